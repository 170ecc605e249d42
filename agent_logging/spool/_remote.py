"""The spool's read side for a shipper in another process (``shipping._process``).

The shipper process reads the segment files itself (``_batches.read_segment``, with
``pread``: the owner's mapping is its own), but the spool's state stays with the process that
owns the spool. Per batch, the shipper asks for a :class:`ReadPlan` (:func:`plan`: where the
oldest unacknowledged record is, and how far the writer has committed, so it never reads half
a frame), reads and delivers, then reports the outcome (:func:`report`): the records
acknowledged, with the damage its read found, or a range that held damage only, to skip.

Between a plan and its report the head may move: ``drop_oldest`` deletes the oldest segment
when the spool is full. A report that no longer starts at the head is then ignored, as
``Spool.ack`` ignores a superseded batch: its records were dropped (and counted so) while they
were being shipped. Damage is counted at the report, once, however often a failed delivery
made the shipper read the same range again. One shipper process reads a spool at a time, and
nothing else reads it meanwhile; each call takes the spool's read lock, as a peek or an ack
does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from agent_logging.spool._cap import remove_head
from agent_logging.spool._reading import (
    _read_failed,
    _write_acked,
    ack_range,
    finish,
)
from agent_logging.spool._segments import SpoolPosition

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["ReadPlan", "answer", "plan", "plan_after", "read_failed", "report"]


class ReadPlan(NamedTuple):
    """Where the shipper reads next: ``[start, limit)`` of the segment at ``path``.

    ``checked``: damage before this offset was counted already (``read_segment``'s argument).
    ``sealed``: the segment is no longer written to.
    """

    seq: int
    path: str
    start: int
    limit: int
    checked: int
    sealed: bool


def plan_after(spool: Spool, after: SpoolPosition) -> ReadPlan | None:
    """Where the records after ``after`` are (a read-ahead while the batch that ends there is
    in flight); None when there are none yet, or ``after`` is no longer in the spool.

    Nothing changes: a sealed segment ``after`` ends is finished by the ack of its last batch.

    Raises:
        SpoolError: the spool is closed.
    """
    with spool._lock:
        spool._check_open()
        segments = spool._segments
        index = next((i for i, s in enumerate(segments) if s.seq == after.segment), None)
        if index is None:
            return None  # dropped: the shipper reads from the head instead
        segment, offset = segments[index], after.offset
        if offset >= segment.size:
            if segment is spool._active or index + 1 >= len(segments):
                return None
            segment, offset = segments[index + 1], 0
            if offset >= segment.size:
                return None
        sealed = segment is not spool._active
        return ReadPlan(
            segment.seq, str(segment.path), offset, segment.size, segment.checked, sealed
        )


def plan(spool: Spool) -> ReadPlan | None:
    """Where the oldest unacknowledged records are; None when there are none.

    A sealed segment with nothing left in it is finished on the way (deleted). Unlike a
    peek, a plan does not fsync under the ``batch`` policy: the owner does that beside the
    read, so that the shipper does not wait for the disk (``shipping._process``).

    Raises:
        SpoolError: the spool is closed.
    """
    with spool._read_lock:
        while True:
            with spool._lock:
                spool._check_open()
                spool._superseded = None
                segment = spool._segments[0]
                sealed = segment is not spool._active
                if spool._head_offset < segment.size:
                    return ReadPlan(
                        segment.seq,
                        str(segment.path),
                        spool._head_offset,
                        segment.size,
                        segment.checked,
                        sealed,
                    )
                if not sealed:
                    return None
                remove_head(spool)
                head = SpoolPosition(spool._segments[0].seq, 0)
            _write_acked(spool, head, 0)
            finish(spool, segment)


def report(
    spool: Spool,
    start: SpoolPosition,
    end: int,
    count: int,
    payload_bytes: int,
    torn: int,
    corrupt: int,
) -> bool:
    """The outcome of a read from ``start`` to ``end`` (an offset in the same segment).

    ``count`` records (``payload_bytes`` of payload) were delivered: they are acknowledged.
    With ``count`` 0 the range held damage only: the head moves past it. ``torn`` and
    ``corrupt`` are the damage the read found at or after the plan's ``checked``.

    Returns:
        False when ``start`` is no longer the head (dropped meanwhile): nothing was done.

    Raises:
        SpoolError: the spool is closed.
    """
    with spool._read_lock:
        with spool._lock:
            spool._check_open()
            segment = spool._segments[0]
            if SpoolPosition(segment.seq, spool._head_offset) != start:
                return False
            spool._torn += torn
            spool._corrupt += corrupt
            segment.checked = max(segment.checked, end)
            if not count:
                spool._head_offset = end
                return True
        return ack_range(spool, start, SpoolPosition(start.segment, end), count, payload_bytes)


def read_failed(spool: Spool, start: SpoolPosition, sealed: bool, reason: str) -> None:
    """The shipper could not read the plan's segment: as ``peek_batch`` handles it.

    A sealed segment is set aside and its records counted as lost; the active one is rotated,
    so that next time it is a sealed one.

    Raises:
        SpoolError: the active segment cannot be read (after scheduling its rotation).
    """
    with spool._read_lock:
        with spool._lock:
            segment = spool._segments[0]
        if segment.seq == start.segment:
            _read_failed(spool, segment, start, sealed, OSError(reason))


def answer(spool: Spool, message: dict[str, Any]) -> tuple[dict[str, Any] | None, int]:
    """Act on one of the shipper process's messages about the spool (``shipping._process``).

    Returns:
        The answer to a request (None for a note, or a message not about the spool), and how
        many records the message acknowledged.

    Raises:
        SpoolError: the spool is closed, or cannot be read (``read_failed``).
        KeyError, TypeError, ValueError: a message that lacks a field or has a wrong one.
    """
    op = message.get("op")
    if op == "plan":
        after = message.get("after")
        planned = plan(spool) if after is None else plan_after(spool, SpoolPosition(*after))
        return {
            "plan": None if planned is None else list(planned),
            "pending": spool.pending_bytes(),
        }, 0
    if op == "report":
        count = int(message["count"])
        acked = report(
            spool,
            SpoolPosition(*message["start"]),
            int(message["end"]),
            count,
            int(message["payload"]),
            int(message["torn"]),
            int(message["corrupt"]),
        )
        return None, count if acked else 0
    if op == "read_failed":
        start = SpoolPosition(*message["start"])
        read_failed(spool, start, bool(message["sealed"]), str(message["reason"]))
        return {}, 0
    if op == "records":
        return {"records": spool.stats().records}, 0
    return None, 0
