"""The shipper's batching: full batches on a size wake, the rest after a short linger."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_logging.loki._client import PushResult
from agent_logging.loki._entries import PushEntry
from agent_logging.shipping import _shipper
from agent_logging.shipping._shipper import Shipper
from tests.agent_logging.shipping.test_shipper import LABELS, FakeSpool


class ScriptedWake:
    """The spool's ``wake`` as the shipper loop sees it: each wait gives the next answer.

    Records the timeout of every wait and the pushes made before it; when the script is
    used up it calls ``done`` (which stops the loop) and answers True.
    """

    def __init__(self, answers: Sequence[bool], pushes: list[int]) -> None:
        self.answers = list(answers)
        self.pushes = pushes
        self.timeouts: list[float] = []
        self.pushes_before: list[int] = []
        self.done: Callable[[], None] = lambda: None

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout if timeout is not None else -1.0)
        self.pushes_before.append(len(self.pushes))
        if not self.answers:
            self.done()
            return True
        return self.answers.pop(0)

    def set(self) -> None:
        return None

    def clear(self) -> None:
        return None

    def is_set(self) -> bool:
        return False


class SizedSpool(FakeSpool):
    """A FakeSpool that also says how many payload bytes are pending."""

    def pending_bytes(self) -> int:
        with self._lock:
            return sum(len(r.payload) for r in self._records[self._head :])


class CountingClient:
    def __init__(self) -> None:
        self.pushes: list[int] = []

    def push(self, entries: Sequence[PushEntry], /) -> PushResult:
        self.pushes.append(len(entries))
        return PushResult("ok", 204, None, "")

    def after_fork_in_child(self) -> None:
        return None


def _run(spool: Any, answers: Sequence[bool], tmp_path: Path) -> tuple[CountingClient, Any]:
    client = CountingClient()
    wake = ScriptedWake(answers, client.pushes)
    spool.wake = wake
    shipper = Shipper(
        spool,
        client,
        max_batch_bytes=100,
        batch_interval_s=1.0,
        dead_letter_path=tmp_path / "dead.ndjson",
        default_labels=LABELS,
    )
    wake.done = shipper._stop.set
    shipper._run()  # in this thread: the script ends it
    return client, wake


def _fill(spool: FakeSpool, count: int) -> None:
    for index in range(count):
        spool.append(1_795_000_000_000_000_000 + index, b'{"event":"1234567890"}'[:10])


def test_a_size_wake_ships_full_batches_and_leaves_the_rest_for_the_linger(
    tmp_path: Path,
) -> None:
    spool = SizedSpool(wake_bytes=100)
    _fill(spool, 35)  # 350 bytes: three full batches of 100 and 50 bytes more
    client, wake = _run(spool, [True, False, False], tmp_path)
    assert client.pushes == [10, 10, 10, 5]
    # The rest waited for the next wait, a short linger rather than a whole interval; with
    # less than an eighth of a batch coming per linger, the loop goes back to the interval.
    assert wake.pushes_before == [0, 3, 4, 4]
    assert wake.timeouts == [1.0, _shipper._LINGER_S, _shipper._LINGER_S, 1.0]
    assert spool.stats().records == 0


def test_an_age_wake_ships_what_is_pending_in_full_batches_then_one_more(
    tmp_path: Path,
) -> None:
    spool = SizedSpool(wake_bytes=100)
    _fill(spool, 5)
    client, wake = _run(spool, [False], tmp_path)
    assert client.pushes == [5]  # less than a batch: it goes, however little
    assert wake.timeouts == [1.0, 1.0]
    spool = SizedSpool(wake_bytes=100)
    _fill(spool, 35)
    client, wake = _run(spool, [False, False], tmp_path)
    assert client.pushes == [10, 10, 10, 5]
    assert wake.pushes_before == [0, 3, 4]  # the rest waited for the next interval
    assert wake.timeouts == [1.0, 1.0, 1.0]


def test_a_flush_request_ships_everything_even_on_a_size_wake(tmp_path: Path) -> None:
    spool = SizedSpool(wake_bytes=100)
    _fill(spool, 35)
    client = CountingClient()
    wake = ScriptedWake([True], client.pushes)
    spool.wake = wake  # type: ignore[assignment]
    shipper = Shipper(
        spool,
        client,
        max_batch_bytes=100,
        dead_letter_path=tmp_path / "dead.ndjson",
        default_labels=LABELS,
    )
    wake.done = shipper._stop.set
    shipper._flush_all.set()  # what flush() sets before waking the thread
    shipper._run()
    assert client.pushes == [10, 10, 10, 5]
    assert wake.pushes_before == [0, 4]


def test_a_smaller_wake_threshold_of_the_spool_sets_the_full_batch(tmp_path: Path) -> None:
    spool = SizedSpool(wake_bytes=30)
    _fill(spool, 35)
    client, wake = _run(spool, [True], tmp_path)
    # Full batches while at least 30 bytes are pending: 350 -> 250 -> 150 -> 50 -> 0.
    assert client.pushes == [10, 10, 10, 5]
    assert wake.pushes_before == [0, 4]


def test_a_spool_without_pending_bytes_ships_everything_on_every_wake(tmp_path: Path) -> None:
    spool = FakeSpool(wake_bytes=100)
    _fill(spool, 35)
    client, wake = _run(spool, [True], tmp_path)
    assert client.pushes == [10, 10, 10, 5]
    assert wake.pushes_before == [0, 4]
    assert wake.timeouts == [1.0, 1.0]
