"""The shipper process's stand-in spool, against a real spool answered in this process.

``LocalChannel`` passes each message straight to the owner's side (``spool._remote.answer``),
so the read-ahead can be followed step by step without a second process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from agent_logging.shipping._child import Channel, RemoteBatch, RemoteSpool
from agent_logging.spool._remote import answer
from agent_logging.spool._segments import SpoolPosition
from agent_logging.spool._spool import Spool
from tests.agent_logging.spool.test_spool import FRAME, SMALL, fill, rec


class LocalChannel:
    """The owner in this process. Clear :attr:`read_ahead` to hold read-ahead plans back."""

    closed = False  # the owner is here for good

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.read_ahead = threading.Event()
        self.read_ahead.set()
        self.asked: list[dict[str, Any]] = []

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        message = {"op": op, **fields}
        if "after" in message:
            assert self.read_ahead.wait(10.0)
        self.asked.append(message)
        reply, _ = answer(self.spool, message)
        return reply or {}

    def send(self, op: str, **fields: Any) -> None:
        self.ask(op, **fields)


def remote(spool: Spool) -> tuple[RemoteSpool, LocalChannel]:
    channel = LocalChannel(spool)
    return RemoteSpool(cast(Channel, channel), wake_bytes=1 << 20), channel


def payloads(batch: RemoteBatch | None) -> list[bytes]:
    assert batch is not None
    return [r.payload for r in batch.records]


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    with Spool.open(tmp_path / "spool", **SMALL) as opened:  # type: ignore[arg-type]
        yield opened


def test_each_batch_after_the_first_comes_from_the_read_ahead(spool: Spool) -> None:
    fill(spool, range(5))  # three segments: two frames, two frames, one
    stand_in, channel = remote(spool)
    shipped: list[bytes] = []
    while (batch := stand_in.peek_batch()) is not None:
        shipped += payloads(batch)
        stand_in.ack(batch)
    assert shipped == [rec(n) for n in range(5)]
    assert spool.stats().records == 0
    plans = [m for m in channel.asked if m["op"] == "plan"]
    # One plan from the head, then one read ahead per batch (the last finds nothing), and
    # the final peek asks the head again, as the read-ahead of the last batch was empty.
    assert [m.get("after") for m in plans] == [
        None,
        [1, 2 * FRAME],
        [2, 2 * FRAME],
        [3, FRAME],
        None,
    ]


def test_a_read_ahead_answered_after_the_head_moved_is_dropped(tmp_path: Path) -> None:
    with Spool.open(tmp_path / "spool", segment_bytes=76, max_bytes=152) as spool:
        fill(spool, range(2))
        stand_in, channel = remote(spool)
        channel.read_ahead.clear()  # the read-ahead waits for its answer...
        first = stand_in.peek_batch()
        assert payloads(first) == [rec(0), rec(1)]
        fill(spool, range(2, 6))  # ...while drop_oldest deletes the batch in flight
        channel.read_ahead.set()
        assert first is not None
        stand_in.ack(first)  # ignored by the owner: superseded
        assert spool.stats().dropped == 2
        batch = stand_in.peek_batch()
        assert batch is not None
        assert batch.start == SpoolPosition(2, 0)  # from the new head, not from the read-ahead
        assert payloads(batch) == [rec(2), rec(3)]


def test_after_a_partial_ack_the_next_batch_starts_where_it_ended(spool: Spool) -> None:
    fill(spool, range(2))
    stand_in, _ = remote(spool)
    whole = stand_in.peek_batch()
    assert payloads(whole) == [rec(0), rec(1)]
    # The shipper acknowledges the part it delivered (a split cut short): it peeks that part
    # again as a batch of its own, which the read-ahead of the whole batch is not.
    part = stand_in.peek_batch(max_records=1)
    assert payloads(part) == [rec(0)]
    assert part is not None
    stand_in.ack(part)
    rest = stand_in.peek_batch()
    assert payloads(rest) == [rec(1)]
    assert rest is not None
    stand_in.ack(rest)
    assert stand_in.peek_batch() is None
    assert spool.stats().records == 0


def test_a_batch_delivered_again_is_read_again_from_the_head(spool: Spool) -> None:
    fill(spool, range(3))
    stand_in, _ = remote(spool)
    first = stand_in.peek_batch()
    assert payloads(first) == [rec(0), rec(1)]
    again = stand_in.peek_batch()  # the push failed: no ack, the same batch once more
    assert payloads(again) == [rec(0), rec(1)]
    assert again is not None
    stand_in.ack(again)
    assert payloads(stand_in.peek_batch()) == [rec(2)]
