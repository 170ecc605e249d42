"""The shipper: batching, backoff, bisection and dead letters, flush/stop, and real Loki."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest

from agent_logging.errors import ConfigurationError
from agent_logging.loki._client import LokiClient, PushResult
from agent_logging.shipping._delivery import Delivery, Outcome
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._spool import Spool
from tests.agent_logging.loki.test_loki_client import NGINX_PLAIN_HTTP, REQUEST_REFUSED
from tests.lokisim import Limits, LokiServer

WALL = 1_795_000_000.5  # the fake wall clock: 2026-11-18T11:06:40.5Z
LABELS = {"service_name": "svc", "layer": "node", "env": "test"}

# -- fakes -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FakeRecord:
    ts_ns: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class FakeBatch:
    records: tuple[FakeRecord, ...]
    start: int
    end: int


class FakeSpool:
    """In memory, following ``agent_logging.spool._spool.Spool``'s shipper-facing interface."""

    def __init__(self, *, wake_bytes: int = 1 << 20) -> None:
        self.wake = threading.Event()
        self.wake_bytes = wake_bytes
        self.syncs = 0
        self.peek_errors: list[Exception] = []
        self.sync_errors: list[Exception] = []
        self._records: list[FakeRecord] = []
        self._head = 0
        self._lock = threading.Lock()

    def append(self, ts_ns: int, payload: bytes) -> None:
        with self._lock:
            self._records.append(FakeRecord(ts_ns, payload))
            if sum(len(r.payload) for r in self._records[self._head :]) >= self.wake_bytes:
                self.wake.set()

    def peek_batch(
        self, *, max_records: int = 10_000, max_bytes: int = 1 << 20
    ) -> FakeBatch | None:
        with self._lock:
            if self.peek_errors:
                raise self.peek_errors.pop(0)
            taken: list[FakeRecord] = []
            size = 0
            for record in self._records[self._head :]:
                if taken and (len(taken) >= max_records or size + len(record.payload) > max_bytes):
                    break
                taken.append(record)
                size += len(record.payload)
            if not taken:
                return None
            return FakeBatch(tuple(taken), self._head, self._head + len(taken))

    def ack(self, batch: FakeBatch) -> None:
        with self._lock:
            if batch.start != self._head:
                raise AssertionError(f"ack out of order: {batch.start} != {self._head}")
            self._head = batch.end

    def sync_if_due(self) -> bool:
        self.syncs += 1
        if self.sync_errors:
            raise self.sync_errors.pop(0)
        return False

    def stats(self) -> SimpleNamespace:
        with self._lock:
            return SimpleNamespace(records=len(self._records) - self._head)


Action = httpx.Response | Exception


@dataclass
class FakeLoki:
    """A MockTransport handler for JSON pushes that behaves like Loki 3.

    It stores the acceptable entries of every push, even one it answers 400 (Loki keeps the
    valid entries of a partly refused push), de-duplicates identical entries, and refuses
    lines containing ``poison``. ``script`` overrides the answer to the n-th push (0-based).
    """

    script: dict[int, Action] = field(default_factory=dict)
    pushes: list[list[str]] = field(default_factory=list)
    stored: dict[tuple[str, int, str], None] = field(default_factory=dict)
    received: threading.Event = field(default_factory=threading.Event)
    queries: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/loki/api/v1/query_range":
            return self.query(request)
        body = orjson.loads(request.content)
        entries = [
            (orjson.dumps(stream["stream"], option=orjson.OPT_SORT_KEYS).decode(), int(v[0]), v[1])
            for stream in body["streams"]
            for v in stream["values"]
        ]
        index = len(self.pushes)
        self.pushes.append([line for _, _, line in entries])
        action = self.script.get(index)
        if isinstance(action, Exception):
            raise action
        if action is not None:
            return action
        refused = [e for e in entries if "poison" in e[2]]
        for entry in entries:
            if entry not in refused:
                self.stored[entry] = None
        self.received.set()
        if refused:
            return httpx.Response(
                400, text=f"Max entry size '100' bytes exceeded for stream '{refused[0][0]}'"
            )
        return httpx.Response(204)

    def query(self, request: httpx.Request) -> httpx.Response:
        """``query_range`` over what is stored (a reconcile's), whatever the selector."""
        self.queries.append(request)
        params = request.url.params
        start, end = int(params["start"]), int(params["end"])
        found = sorted((ts, line) for _, ts, line in self.stored if start <= ts < end)
        values = [[str(ts), line] for ts, line in found[: int(params["limit"])]]
        result = [{"stream": LABELS, "values": values}] if values else []
        data = {"resultType": "streams", "result": result}
        return httpx.Response(200, json={"status": "success", "data": data})

    @property
    def lines(self) -> list[str]:
        return [line for _, _, line in self.stored]

    @property
    def push_sizes(self) -> list[int]:
        return [len(p) for p in self.pushes]


class FakeTime:
    """A monotonic clock and a backoff ``wait`` that records delays instead of sleeping."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        self.now += timeout_s
        return False


class MaxJitter(random.Random):
    """Jitter that always draws its upper bound, so delays are the backoff ceilings."""

    def uniform(self, a: float, b: float) -> float:
        return b


def payload(index: int, **extra: object) -> bytes:
    record = {
        "ts": f"2026-11-19T09:46:{index:02d}.000000000Z",
        "level": "info",
        "event": f"event {index}",
        "service": "svc",
        "layer": "node",
        "env": "test",
        **extra,
    }
    return orjson.dumps(record)


def fill(spool: FakeSpool | Spool, count: int, *, poison: tuple[int, ...] = ()) -> list[str]:
    lines = []
    for index in range(count):
        data = payload(index, note="poison" if index in poison else "fine")
        spool.append(1_795_000_000_000_000_000 + index, data)
        lines.append(data.decode())
    return lines


@pytest.fixture
def spool() -> FakeSpool:
    return FakeSpool()


@pytest.fixture
def fake_loki() -> FakeLoki:
    return FakeLoki()


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def errors() -> list[str]:
    return []


@pytest.fixture
def make_shipper(
    tmp_path: Path, fake_loki: FakeLoki, fake_time: FakeTime, errors: list[str]
) -> Iterator[Callable[..., Shipper]]:
    made: list[tuple[Shipper, LokiClient]] = []

    def make(spool: Any, **kwargs: Any) -> Shipper:
        client = LokiClient(
            "http://loki.test", encoding="json", transport=httpx.MockTransport(fake_loki)
        )
        options: dict[str, Any] = {
            "dead_letter_path": tmp_path / "dead" / "letters.jsonl",
            "default_labels": LABELS,
            "on_error": errors.append,
            "rng": MaxJitter(),
            "clock": fake_time.clock,
            "wall_clock": lambda: WALL,
            "wait": fake_time.wait,
        }
        options.update(kwargs)
        shipper = Shipper(spool, client, **options)
        made.append((shipper, client))
        return shipper

    yield make
    for shipper, client in made:
        shipper.stop(timeout_s=0.0)
        client.close()


def dead_letters(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


# -- delivery ----------------------------------------------------------------------------------


def test_ships_and_acks(
    spool: FakeSpool, fake_loki: FakeLoki, make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 3)
    shipper = make_shipper(spool)

    assert shipper.ship_pending(10.0) is True

    assert fake_loki.lines == lines
    assert spool.stats().records == 0
    assert spool.syncs == 1
    assert shipper.stats() == {
        "batches_sent": 1,
        "records_sent": 3,
        "bytes_sent": sum(len(line) for line in lines),
        "retried": 0,
        "dead_lettered": 0,
        "last_status": 204,
        "last_error": None,
        "last_error_unix_s": None,
        "last_success_unix_s": WALL,
        "consecutive_failures": 0,
        "reconciled": 0,
        "resent_unreconciled": 0,
    }


def test_a_delivery_acks_a_batch_stored_and_leaves_one_stopped_by_halt_spooled(
    spool: FakeSpool, fake_loki: FakeLoki, fake_time: FakeTime, tmp_path: Path
) -> None:
    # The design without its runner: built on its own, handed the batches the runner peeks.
    lines = fill(spool, 3)
    client = LokiClient(
        "http://loki.test", encoding="json", transport=httpx.MockTransport(fake_loki)
    )
    delivery = Delivery(
        spool,
        client,
        max_batch_bytes=1 << 20,
        backoff_initial_s=0.5,
        backoff_max_s=60.0,
        dead_letter_path=tmp_path / "dl.jsonl",
        dead_letter_max_bytes=1 << 20,
        node_id_label=False,
        default_labels=LABELS,
        on_error=None,
        rng=MaxJitter(),
        clock=fake_time.clock,
        wall_clock=lambda: WALL,
        wait=fake_time.wait,
        waiting=contextlib.nullcontext,
    )
    halt = threading.Event()

    assert delivery.deliver(spool.peek_batch(max_records=2), None, halt=halt) == (Outcome.DONE, 2)
    fake_loki.script = {1: httpx.Response(503)}
    halt.set()
    assert delivery.deliver(spool.peek_batch(), None, halt=halt) == (Outcome.STOPPED, 0)

    client.close()
    assert fake_loki.lines == lines[:2]
    assert spool.stats().records == 1
    assert (delivery.stats()["records_sent"], delivery.stats()["retried"]) == (2, 1)


def test_batches_respect_the_record_limit(
    spool: FakeSpool, fake_loki: FakeLoki, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 5)

    assert make_shipper(spool, max_batch_records=2).ship_pending(10.0)

    assert fake_loki.push_sizes == [2, 2, 1]


def test_empty_spool_ships_nothing(
    spool: FakeSpool, fake_loki: FakeLoki, make_shipper: Callable[..., Shipper]
) -> None:
    assert make_shipper(spool).ship_pending(10.0) is True
    assert fake_loki.pushes == []


# -- retries and backoff -----------------------------------------------------------------------


def too_many(retry_after: str) -> httpx.Response:
    return httpx.Response(
        429, text="Ingestion rate limit exceeded", headers={"Retry-After": retry_after}
    )


def test_429_storm_then_success_honours_retry_after(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    errors: list[str],
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 2)
    fake_loki.script = {0: too_many("1"), 1: too_many("1"), 2: too_many("1")}
    shipper = make_shipper(spool)

    assert shipper.ship_pending(100.0)

    # Ceilings 0.5, 1, 2: Retry-After (1 s) wins where it is longer.
    assert fake_time.waits == [1.0, 1.0, 2.0]
    assert fake_loki.lines == lines
    stats = shipper.stats()
    assert (stats["retried"], stats["consecutive_failures"], stats["last_status"]) == (3, 0, 204)
    assert stats["last_error"] == "HTTP 429: Ingestion rate limit exceeded"
    assert stats["last_error_unix_s"] == WALL  # kept after the success, with its time
    assert errors == ["push to Loki failed, will retry: HTTP 429: Ingestion rate limit exceeded"]


def test_busy_while_reading_pushing_and_acking_not_while_backing_off(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    make_shipper: Callable[..., Shipper],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Logging threads let the shipper in at the GIL while it is busy (``shipping._durable``): not
    # while it waits out a backoff in an outage, when that would cost them for nothing.
    fill(spool, 2)
    fake_loki.script = {0: too_many("1")}
    seen: list[tuple[str, bool]] = []
    shipper: Shipper | None = None

    def watch(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            assert shipper is not None
            seen.append((name, shipper.busy))
            return call(*args, **kwargs)

        return watched

    monkeypatch.setattr(spool, "peek_batch", watch("peek", spool.peek_batch))
    monkeypatch.setattr(spool, "ack", watch("ack", spool.ack))
    shipper = make_shipper(spool, wait=watch("backoff", fake_time.wait))
    monkeypatch.setattr(
        shipper._client, "push_records", watch("push", shipper._client.push_records)
    )

    assert shipper.ship_pending(100.0)

    assert seen == [
        ("peek", True),
        ("push", True),
        ("backoff", False),
        ("peek", True),
        ("push", True),
        ("ack", True),
        ("peek", True),
    ]
    assert not shipper.busy


def test_backoff_grows_exponentially_to_the_cap(
    spool: FakeSpool, fake_loki: FakeLoki, fake_time: FakeTime, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 1)
    fake_loki.script = dict.fromkeys(range(9), httpx.Response(500, text="internal"))

    assert make_shipper(spool).ship_pending(1000.0)

    assert fake_time.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert len(fake_loki.stored) == 1


def test_full_jitter_draws_within_the_ceiling(
    spool: FakeSpool, fake_loki: FakeLoki, fake_time: FakeTime, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 1)
    fake_loki.script = dict.fromkeys(range(6), httpx.Response(503))

    assert make_shipper(spool, rng=random.Random(7), backoff_max_s=4.0).ship_pending(1000.0)

    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    reference = random.Random(7)
    assert fake_time.waits == [reference.uniform(0.0, c) for c in ceilings]
    assert all(0.0 <= w <= c for w, c in zip(fake_time.waits, ceilings, strict=True))
    assert len(set(fake_time.waits)) == 6


def test_retry_after_is_capped_at_backoff_max(
    spool: FakeSpool, fake_loki: FakeLoki, fake_time: FakeTime, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 1)
    fake_loki.script = {0: too_many("3600")}

    assert make_shipper(spool, rng=random.Random(1)).ship_pending(1000.0)

    assert fake_time.waits == [60.0]


def test_whole_batch_retry_peeks_again_and_picks_up_new_records(
    spool: FakeSpool, fake_loki: FakeLoki, make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 2)
    late = payload(9)
    fake_loki.script = {0: httpx.Response(503)}
    waits: list[float] = []

    def wait(event: threading.Event, timeout_s: float) -> bool:
        waits.append(timeout_s)
        spool.append(1_795_000_000_000_000_009, late)  # logged during the backoff
        return False

    assert make_shipper(spool, wait=wait).ship_pending(100.0)

    assert fake_loki.pushes == [lines, [*lines, late.decode()]]
    assert waits == [0.5]
    assert spool.syncs == 2  # once per ship_pending, once per backoff


@pytest.mark.parametrize(
    ("fault", "waits", "queries"),
    [
        # Sent, no answer: Loki may have stored it, and may still be storing it. Before each
        # retry the shipper waits until SETTLE_S (1 s) has passed since that push began, then
        # asks Loki what it holds of it (nothing here).
        (httpx.ReadTimeout("timed out"), [0.5, 0.5, 1.0], 2),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            [0.5, 0.5, 1.0],
            2,
        ),
        # Never connected: nothing can be in Loki, nothing to ask.
        (httpx.ConnectTimeout("timed out"), [0.5, 1.0], 0),
        (httpx.ConnectError("[Errno 111] Connection refused"), [0.5, 1.0], 0),
    ],
)
def test_network_faults_are_retried(
    fault: Exception,
    waits: list[float],
    queries: int,
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 2)
    fake_loki.script = {0: fault, 1: fault}
    shipper = make_shipper(spool)

    assert shipper.ship_pending(100.0)

    assert fake_loki.lines == lines
    assert fake_time.waits == waits
    assert len(fake_loki.queries) == queries
    assert shipper.stats()["retried"] == 2
    assert shipper.stats()["reconciled"] == 0


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_url_errors_never_dead_letter(
    status: int,
    spool: FakeSpool,
    fake_loki: FakeLoki,
    tmp_path: Path,
    errors: list[str],
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 3)
    fake_loki.script = dict.fromkeys(range(5), httpx.Response(status, text="no org id"))
    shipper = make_shipper(spool)

    assert shipper.ship_pending(1000.0)

    assert fake_loki.lines == lines
    assert not (tmp_path / "dead").exists()
    assert shipper.stats()["dead_lettered"] == 0
    assert len(errors) == 1
    assert f"HTTP {status}" in errors[0]
    assert "entries kept for retry" in errors[0]


def test_retries_stop_at_the_deadline_and_keep_the_records(
    spool: FakeSpool, fake_loki: FakeLoki, fake_time: FakeTime, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 2)
    fake_loki.script = dict.fromkeys(range(100), httpx.Response(503))
    shipper = make_shipper(spool)

    assert shipper.ship_pending(5.0) is False

    assert spool.stats().records == 2
    assert fake_time.waits == [0.5, 1.0, 2.0, 1.5]  # the last one cut to the deadline
    assert shipper.stats()["consecutive_failures"] == 4


def test_errors_reported_once_per_reason_until_a_success(
    spool: FakeSpool, fake_loki: FakeLoki, errors: list[str], make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 1)
    fake_loki.script = {
        0: httpx.Response(503, text="a"),
        1: httpx.Response(503, text="b"),
        2: httpx.Response(500, text="c"),
        4: httpx.Response(503, text="d"),
    }
    shipper = make_shipper(spool)

    assert shipper.ship_pending(100.0)
    fill(spool, 1)
    assert shipper.ship_pending(100.0)

    assert errors == [
        "push to Loki failed, will retry: HTTP 503: a",
        "push to Loki failed, will retry: HTTP 500: c",
        "push to Loki failed, will retry: HTTP 503: d",
    ]


def test_a_raising_reporter_is_ignored(
    spool: FakeSpool, fake_loki: FakeLoki, make_shipper: Callable[..., Shipper]
) -> None:
    def broken(message: str) -> None:
        raise RuntimeError("reporter down")

    fill(spool, 1)
    fake_loki.script = {0: httpx.Response(503)}

    assert make_shipper(spool, on_error=broken).ship_pending(100.0)
    assert len(fake_loki.stored) == 1


def test_spool_exception_is_reported_and_survived(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    errors: list[str],
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 1)
    spool.peek_errors = [RuntimeError("disk on fire")]

    assert make_shipper(spool).ship_pending(100.0)

    assert errors == ["shipping failed: RuntimeError: disk on fire"]
    assert fake_time.waits == [0.5]
    assert fake_loki.lines == lines


def test_spool_sync_failure_is_reported_and_shipping_goes_on(
    spool: FakeSpool, fake_loki: FakeLoki, errors: list[str], make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 1)
    spool.sync_errors = [OSError(28, "No space left on device")]

    assert make_shipper(spool).ship_pending(100.0)

    assert errors == ["spool sync failed: OSError: [Errno 28] No space left on device"]
    assert fake_loki.lines == lines


def test_spool_exception_until_the_deadline(
    spool: FakeSpool, fake_time: FakeTime, make_shipper: Callable[..., Shipper]
) -> None:
    fill(spool, 1)
    spool.peek_errors = [RuntimeError("disk on fire")] * 10

    assert make_shipper(spool).ship_pending(2.0) is False

    assert fake_time.waits == [0.5, 1.0, 0.5]
    assert spool.stats().records == 1


class FlakyClient:
    """Raises from push() once (a bug in a client), then delegates."""

    def __init__(self, inner: LokiClient) -> None:
        self.inner = inner
        self.raised = False

    def push(self, entries: Any) -> PushResult:
        if not self.raised:
            self.raised = True
            raise RuntimeError("client bug")
        return self.inner.push(entries)

    def after_fork_in_child(self) -> None:
        self.inner.after_fork_in_child()


def test_client_exception_is_a_retry(
    spool: FakeSpool, fake_loki: FakeLoki, tmp_path: Path, fake_time: FakeTime
) -> None:
    lines = fill(spool, 1)
    with LokiClient("http://l", encoding="json", transport=httpx.MockTransport(fake_loki)) as inner:
        shipper = Shipper(
            spool,
            FlakyClient(inner),
            dead_letter_path=tmp_path / "dl",
            default_labels=LABELS,
            clock=fake_time.clock,
            wait=fake_time.wait,
        )

        assert shipper.ship_pending(100.0)

    assert fake_loki.lines == lines
    assert shipper.stats()["last_error"] == "RuntimeError: client bug"


# -- refused content: bisection and dead letters ----------------------------------------------


def test_poison_entry_is_dead_lettered_and_its_batch_mates_delivered(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    tmp_path: Path,
    errors: list[str],
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 5, poison=(2,))
    shipper = make_shipper(spool)

    assert shipper.ship_pending(100.0)

    # [0..4] refused, the rest stored: each part of the split first asks Loki what it holds
    # (a reconcile) and pushes only the rest. [0,1]: held, not pushed again; [2,3,4]: only
    # [2] pushed, refused, and Loki's answer counts the one entry pushed: nothing of it was
    # stored, so no more queries; [2]: refused -> dead letter; [3,4]: held.
    assert fake_loki.push_sizes == [5, 1, 1]
    assert fake_loki.lines == lines[:2] + lines[3:]
    assert len(fake_loki.queries) == 2
    assert shipper.stats()["reconciled"] == 4
    assert spool.stats().records == 0
    stream = '{"env":"test","layer":"node","service_name":"svc"}'
    reason = f"Max entry size '100' bytes exceeded for stream '{stream}'"
    assert dead_letters(tmp_path / "dead" / "letters.jsonl") == [
        {
            "ts_ns": 1_795_000_000_000_000_002,
            "labels": {"env": "test", "layer": "node", "service_name": "svc"},
            "line": lines[2],
            "status": 400,
            "reason": reason,
            "dead_lettered_at": "2026-11-18T11:06:40.500000Z",
        }
    ]
    assert shipper.stats()["dead_lettered"] == 1
    assert shipper.stats()["retried"] == 0
    path = tmp_path / "dead" / "letters.jsonl"
    assert errors == [f"Loki refused an entry (HTTP 400): {reason}; written to {path}"]


def test_two_poison_entries_among_a_hundred(
    spool: FakeSpool, fake_loki: FakeLoki, tmp_path: Path, make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 100, poison=(17, 83))
    shipper = make_shipper(spool)

    assert shipper.ship_pending(100.0)

    letters = dead_letters(tmp_path / "dead" / "letters.jsonl")
    assert [letter["line"] for letter in letters] == [lines[17], lines[83]]
    assert sorted(fake_loki.lines) == sorted(
        line for i, line in enumerate(lines) if i not in (17, 83)
    )
    assert len(fake_loki.lines) == 98
    # Bisection: at most two pushes per poison entry per level of a 7-level split.
    assert len(fake_loki.pushes) <= 1 + 2 * 2 * 7
    assert spool.stats().records == 0
    assert shipper.stats()["dead_lettered"] == 2


def test_retry_in_the_middle_of_a_split_resends_only_that_part(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    tmp_path: Path,
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 4, poison=(1, 3))
    fake_loki.script = {1: httpx.Response(503)}

    assert make_shipper(spool).ship_pending(100.0)

    # [0..3] refused ([0, 2] stored); [0, 1] pushes [1] alone (Loki holds [0]): 503, retried
    # after the backoff (Loki answered: no need to wait for it to settle) as [1] again.
    assert fake_loki.pushes[:3] == [lines, lines[1:2], lines[1:2]]
    resent = [line for push in fake_loki.pushes[1:] for line in push]
    assert lines[0] not in resent
    assert lines[2] not in resent
    assert fake_time.waits == [0.5]
    assert [d["line"] for d in dead_letters(tmp_path / "dead" / "letters.jsonl")] == [
        lines[1],
        lines[3],
    ]


def test_dead_letter_file_rotates_at_its_cap(
    spool: FakeSpool, tmp_path: Path, make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 3, poison=(0, 1, 2))
    path = tmp_path / "dead" / "letters.jsonl"

    assert make_shipper(spool, dead_letter_max_bytes=600).ship_pending(100.0)

    assert [d["line"] for d in dead_letters(path)] == [lines[2]]
    assert [d["line"] for d in dead_letters(path.with_name("letters.jsonl.1"))] == [lines[1]]


def test_unwritable_dead_letter_file_keeps_the_entry_spooled(
    spool: FakeSpool, tmp_path: Path, errors: list[str], make_shipper: Callable[..., Shipper]
) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    fill(spool, 1, poison=(0,))
    shipper = make_shipper(spool, dead_letter_path=tmp_path / "blocker" / "dl.jsonl")

    assert shipper.ship_pending(10.0) is False

    assert spool.stats().records == 1
    assert shipper.stats()["dead_lettered"] == 0
    assert errors[-1].startswith(
        f"cannot write dead-letter file {tmp_path / 'blocker' / 'dl.jsonl'}"
    )


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        {"max_batch_bytes": 0},
        {"max_batch_records": 0},
        {"batch_interval_s": 0.0},
        {"backoff_initial_s": -1.0},
        {"backoff_max_s": 0.0},
        {"dead_letter_max_bytes": 0},
    ],
)
def test_bad_configuration(option: dict[str, Any], spool: FakeSpool, tmp_path: Path) -> None:
    with LokiClient("http://l") as client, pytest.raises(ConfigurationError, match="positive"):
        Shipper(spool, client, dead_letter_path=tmp_path / "dl", default_labels={}, **option)


# -- the thread: wake, interval, flush, stop, fork ---------------------------------------------


@pytest.fixture
def threaded(make_shipper: Callable[..., Shipper]) -> Callable[..., Shipper]:
    """Shippers on the real clock, with real (short) backoff waits."""

    def make(spool: Any, **kwargs: Any) -> Shipper:
        options: dict[str, Any] = {
            "clock": time.monotonic,
            "wait": lambda event, timeout_s: event.wait(timeout_s),
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.05,
        }
        options.update(kwargs)
        return make_shipper(spool, **options)

    return make


def test_thread_ships_when_the_spool_wakes_it(
    fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    spool = FakeSpool(wake_bytes=1)
    shipper = threaded(spool, batch_interval_s=60.0)
    shipper.start()

    lines = fill(spool, 1)

    assert fake_loki.received.wait(5.0)
    assert shipper.stop(5.0) is True
    assert fake_loki.lines == lines
    assert not shipper.running


def test_start_twice_keeps_one_thread(spool: FakeSpool, threaded: Callable[..., Shipper]) -> None:
    shipper = threaded(spool, batch_interval_s=60.0)
    shipper.start()
    first = shipper._thread

    shipper.start()

    assert shipper._thread is first
    assert shipper.stop(5.0)


def test_thread_ships_after_the_interval(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    shipper = threaded(spool, batch_interval_s=0.02)
    shipper.start()

    lines = fill(spool, 2)

    assert fake_loki.received.wait(5.0)
    assert shipper.stop(5.0)
    assert fake_loki.lines == lines


def test_flush_ships_now(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    shipper = threaded(spool, batch_interval_s=60.0)
    shipper.start()
    lines = fill(spool, 3)

    assert shipper.flush(5.0) is True

    assert fake_loki.lines == lines
    assert spool.stats().records == 0
    assert shipper.running


def test_flush_without_a_thread_ships_in_the_caller(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    lines = fill(spool, 2)
    shipper = threaded(spool)

    assert shipper.flush(5.0) is True
    assert fake_loki.lines == lines
    assert not shipper.running


def test_flush_and_stop_give_up_at_their_deadlines_when_loki_is_down(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    fake_loki.script = dict.fromkeys(range(10_000), httpx.ConnectError("refused"))
    shipper = threaded(spool, batch_interval_s=60.0)
    shipper.start()
    fill(spool, 2)

    assert shipper.flush(0.2) is False
    assert shipper.stop(1.0) is False

    assert not shipper.running
    assert spool.stats().records == 2  # durable: still spooled for the next run


def test_stop_cuts_a_long_backoff_short(
    spool: FakeSpool, threaded: Callable[..., Shipper], fake_loki: FakeLoki
) -> None:
    fake_loki.script = dict.fromkeys(range(10_000), httpx.ConnectError("refused"))
    failed = threading.Event()
    shipper = threaded(
        spool,
        batch_interval_s=60.0,
        backoff_initial_s=600.0,
        backoff_max_s=600.0,
        rng=MaxJitter(),
        on_error=lambda message: failed.set(),
    )
    shipper.start()
    fill(spool, 1)
    spool.wake.set()
    assert failed.wait(5.0)

    # The thread now waits 600 s; stop() must end it without waiting that out.
    assert shipper.stop(1.0) is False

    assert not shipper.running


def test_stop_from_another_thread_ends_ship_pending(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    fake_loki.script = dict.fromkeys(range(10_000), httpx.ConnectError("refused"))
    failed = threading.Event()
    shipper = threaded(
        spool,
        backoff_initial_s=600.0,
        backoff_max_s=600.0,
        rng=MaxJitter(),
        on_error=lambda message: failed.set(),
    )
    fill(spool, 1)
    results: list[bool] = []
    drainer = threading.Thread(target=lambda: results.append(shipper.ship_pending(3600.0)))
    drainer.start()
    assert failed.wait(5.0)

    shipper.stop(0.3)
    drainer.join(5.0)

    assert not drainer.is_alive()
    assert results == [False]
    assert spool.stats().records == 1


def test_after_fork_in_child_replaces_the_pool_and_can_start_again(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    shipper = threaded(spool, batch_interval_s=60.0)
    shipper.start()
    assert shipper.stop(5.0)
    client = shipper._client
    assert isinstance(client, LokiClient)
    parent_pool = client._http

    shipper.after_fork_in_child()

    assert not shipper.running
    assert client._http is not parent_pool
    assert not parent_pool.is_closed
    lines = fill(spool, 1)
    shipper.start()
    assert shipper.flush(5.0)
    assert fake_loki.lines == lines
    parent_pool.close()


@pytest.mark.integration
def test_forked_child_ships_although_the_parent_held_the_ship_lock(
    spool: FakeSpool, fake_loki: FakeLoki, threaded: Callable[..., Shipper]
) -> None:
    fake_loki.script = {0: httpx.ConnectError("refused")}
    failed = threading.Event()
    shipper = threaded(
        spool,
        batch_interval_s=60.0,
        backoff_initial_s=600.0,
        backoff_max_s=600.0,
        rng=MaxJitter(),
        on_error=lambda message: failed.set(),
    )
    shipper.start()
    lines = fill(spool, 1)
    spool.wake.set()
    # The parent's thread now sits in a 600 s backoff holding the ship lock.
    assert failed.wait(5.0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads
        pid = os.fork()
    if pid == 0:  # the child: report through the exit code only, never return into pytest
        code = 1
        try:
            shipper.after_fork_in_child()
            shipper.start()
            if shipper.flush(5.0) and fake_loki.lines == lines:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's thread is untouched: stop() cuts its backoff short and it delivers too.
    assert shipper.stop(5.0)
    assert fake_loki.lines == lines


# -- the real spool ----------------------------------------------------------------------------


@pytest.fixture
def real_spool(tmp_path: Path) -> Iterator[Spool]:
    spool = Spool.open(tmp_path / "spool")
    yield spool
    spool.close()


def test_real_spool_is_drained_and_acked(
    real_spool: Spool, fake_loki: FakeLoki, tmp_path: Path, make_shipper: Callable[..., Shipper]
) -> None:
    lines = fill(real_spool, 7, poison=(4,))
    shipper = make_shipper(real_spool, max_batch_records=3)

    assert shipper.ship_pending(100.0)

    assert real_spool.stats().records == 0
    assert fake_loki.lines == lines[:4] + lines[5:]
    assert [d["line"] for d in dead_letters(tmp_path / "dead" / "letters.jsonl")] == [lines[4]]


def test_real_spool_keeps_records_while_loki_refuses_us(
    real_spool: Spool, fake_loki: FakeLoki, tmp_path: Path, make_shipper: Callable[..., Shipper]
) -> None:
    fill(real_spool, 2)
    fake_loki.script = dict.fromkeys(range(100), httpx.Response(401))

    assert make_shipper(real_spool).ship_pending(3.0) is False

    assert real_spool.stats().records == 2
    real_spool.close()
    reopened = Spool.open(tmp_path / "spool")
    try:
        assert reopened.stats().records == 2
    finally:
        reopened.close()


# -- integration: the Loki test server ---------------------------------------------------------


def now_payloads(count: int, **extra: object) -> list[tuple[int, bytes]]:
    base = time.time_ns()
    return [(base + i, payload(i, **extra)) for i in range(count)]


@pytest.fixture
def real_shipper(
    tmp_path: Path, real_spool: Spool, loki: LokiServer
) -> Iterator[Callable[..., Shipper]]:
    made: list[tuple[Shipper, LokiClient]] = []

    def make(**kwargs: Any) -> Shipper:
        client = LokiClient(loki.url, timeout_s=2.0)
        options: dict[str, Any] = {
            "dead_letter_path": tmp_path / "dl.jsonl",
            "default_labels": LABELS,
            "batch_interval_s": 0.05,
            "backoff_initial_s": 0.02,
            "backoff_max_s": 0.1,
        }
        options.update(kwargs)
        shipper = Shipper(real_spool, client, **options)
        made.append((shipper, client))
        shipper.start()
        return shipper

    yield make
    for shipper, client in made:
        shipper.stop(timeout_s=1.0)
        client.close()


@pytest.mark.integration
def test_pushed_records_are_queryable_by_structured_metadata(
    real_spool: Spool, loki: LokiServer, real_shipper: Callable[..., Shipper]
) -> None:
    wanted = now_payloads(3, allocation_id="a-9")
    others = now_payloads(2, allocation_id="a-1")
    for ts_ns, data in wanted + others:
        real_spool.append(ts_ns, data)
    shipper = real_shipper()

    assert shipper.flush(10.0)

    with LokiClient(loki.url) as client:
        found = client.query_range(
            '{service_name="svc"} | allocation_id="a-9"',
            start_ns=min(ts for ts, _ in wanted + others),
            end_ns=max(ts for ts, _ in wanted + others) + 1,
        )
    assert sorted(e.line for e in found) == sorted(data.decode() for _, data in wanted)
    assert {e.labels["allocation_id"] for e in found} == {"a-9"}
    assert {e.labels["service_name"] for e in found} == {"svc"}


@pytest.mark.integration
def test_an_outage_loses_nothing(
    real_spool: Spool, loki: LokiServer, real_shipper: Callable[..., Shipper]
) -> None:
    before = now_payloads(5, phase="before")
    for ts_ns, data in before:
        real_spool.append(ts_ns, data)
    shipper = real_shipper()
    assert shipper.flush(10.0)

    loki.go_down()
    during = now_payloads(5, phase="during")
    for ts_ns, data in during:
        real_spool.append(ts_ns, data)
    assert shipper.flush(0.3) is False
    loki.come_up()

    assert shipper.flush(10.0)
    stored = sorted(e.line for e in loki.entries())
    assert stored == sorted(data.decode() for _, data in before + during)
    assert shipper.stats()["retried"] >= 1
    assert real_spool.stats().records == 0


@pytest.mark.integration
def test_faults_from_a_real_server_are_retried(
    real_spool: Spool, loki: LokiServer, real_shipper: Callable[..., Shipper]
) -> None:
    loki.fail_next(2, 429, retry_after_s=0.05, body="Ingestion rate limit exceeded")
    loki.reset_next(1)
    loki.fail_next(1, 503)
    records = now_payloads(4)
    for ts_ns, data in records:
        real_spool.append(ts_ns, data)
    shipper = real_shipper()

    assert shipper.flush(10.0)

    assert sorted(e.line for e in loki.entries()) == sorted(d.decode() for _, d in records)
    assert shipper.stats()["retried"] == 4


@pytest.mark.integration
def test_line_too_long_is_dead_lettered_with_lokis_reason(tmp_path: Path) -> None:
    with LokiServer(limits=Limits(max_line_size=300)) as server, LokiClient(server.url) as client:
        spool = Spool.open(tmp_path / "spool")
        try:
            records = now_payloads(4)
            long_ts = records[1][0]
            records[1] = (long_ts, payload(1, padding="x" * 400))
            for ts_ns, data in records:
                spool.append(ts_ns, data)
            shipper = Shipper(
                spool, client, dead_letter_path=tmp_path / "dl.jsonl", default_labels=LABELS
            )

            assert shipper.ship_pending(10.0)

            stored = sorted(e.line for e in server.entries())
            assert stored == sorted(d.decode() for i, (_, d) in enumerate(records) if i != 1)
            (letter,) = dead_letters(tmp_path / "dl.jsonl")
            assert (letter["ts_ns"], letter["status"]) == (long_ts, 400)
            assert letter["reason"].startswith("max entry size '300' bytes exceeded")
            assert spool.stats().records == 0
        finally:
            spool.close()


# -- refusals of the request: kept spooled and retried, never dead-lettered -------------------


@pytest.fixture
def sim_options(tmp_path: Path, fake_time: FakeTime, errors: list[str]) -> dict[str, Any]:
    """Shipper options for a Loki test server: backoffs recorded, not slept."""
    return {
        "dead_letter_path": tmp_path / "dl.jsonl",
        "default_labels": LABELS,
        "on_error": errors.append,
        "rng": MaxJitter(),
        "clock": fake_time.clock,
        "wall_clock": lambda: WALL,
        "wait": fake_time.wait,
    }


def pushes_seen(server: LokiServer) -> list[tuple[int, int]]:
    """Each push request's status and how many entries it carried (queries left out)."""
    return [(r.status, r.entries_in_body) for r in server.requests if r.method == "POST"]


def spool_all(spool: Spool, records: list[tuple[int, bytes]]) -> None:
    for ts_ns, data in records:
        spool.append(ts_ns, data)


@pytest.mark.integration
def test_a_tenant_loki_refuses_keeps_the_batch_spooled_and_retried(
    real_spool: Spool,
    tmp_path: Path,
    fake_time: FakeTime,
    errors: list[str],
    sim_options: dict[str, Any],
) -> None:
    records = now_payloads(5)
    spool_all(real_spool, records)
    with LokiServer(auth_enabled=True) as server:
        with LokiClient(server.url, tenant="team a/b") as client:
            shipper = Shipper(real_spool, client, **sim_options)

            assert shipper.ship_pending(5.0) is False

        # One request of the whole batch per attempt, no split, nothing dead-lettered.
        assert pushes_seen(server) == [(400, 5)] * 4
        assert fake_time.waits == [0.5, 1.0, 2.0, 1.5]
        assert not (tmp_path / "dl.jsonl").exists()
        assert real_spool.stats().records == 5
        stats = shipper.stats()
        assert (stats["retried"], stats["dead_lettered"], stats["last_status"]) == (4, 0, 400)
        assert errors == [
            f"push to Loki failed, will retry: HTTP 400: {REQUEST_REFUSED}; entries kept for "
            "retry: tenant ID 'team a/b' contains unsupported character ' '"
        ]

        # The tenant fixed, everything kept is delivered.
        with LokiClient(server.url, tenant="team-a") as fixed:
            assert Shipper(real_spool, fixed, **sim_options).ship_pending(10.0)
        stored = sorted(e.line for e in server.entries("team-a"))
        assert stored == sorted(data.decode() for _, data in records)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("status", "body", "count", "shown"),
    [
        pytest.param(
            400, NGINX_PLAIN_HTTP, 3, "400 The plain HTTP request was sent to HTTPS port", id="400"
        ),
        pytest.param(405, "", 3, "this URL does not take a push", id="405"),
        pytest.param(
            415,
            "<html><body><h1>415 Unsupported Media Type</h1></body></html>",
            3,
            "415 Unsupported Media Type",
            id="415",
        ),
        pytest.param(413, "request body too large", 1, "request body too large", id="413-one"),
        pytest.param(
            400,
            "error at least one valid stream is required for ingestion",
            3,
            "error at least one valid stream is required for ingestion",
            id="400-not-an-entry-refusal",
        ),
    ],
)
def test_a_gateway_refusing_the_request_dead_letters_nothing(
    status: int,
    body: str,
    count: int,
    shown: str,
    real_spool: Spool,
    loki: LokiServer,
    tmp_path: Path,
    errors: list[str],
    sim_options: dict[str, Any],
) -> None:
    records = now_payloads(count)
    spool_all(real_spool, records)
    loki.fail_next(4, status, body=body)
    with LokiClient(loki.url) as client:
        shipper = Shipper(real_spool, client, **sim_options)

        assert shipper.ship_pending(5.0) is False

        assert pushes_seen(loki) == [(status, count)] * 4
        assert not (tmp_path / "dl.jsonl").exists()
        assert real_spool.stats().records == count
        assert shipper.stats()["dead_lettered"] == 0
        (message,) = errors
        assert message.startswith(f"push to Loki failed, will retry: HTTP {status}: ")
        assert "entries kept for retry" in message
        assert shown in message

        # The gateway fixed, everything kept is delivered.
        assert shipper.ship_pending(10.0)
    assert sorted(e.line for e in loki.entries()) == sorted(d.decode() for _, d in records)


@pytest.mark.integration
def test_a_body_too_large_is_halved_and_later_batches_kept_below_it(
    real_spool: Spool,
    loki: LokiServer,
    tmp_path: Path,
    errors: list[str],
    sim_options: dict[str, Any],
) -> None:
    first = now_payloads(4)
    spool_all(real_spool, first)
    size = sum(len(data) for _, data in first)
    loki.fail_next(1, 413, body="request body too large")
    with LokiClient(loki.url) as client:
        shipper = Shipper(real_spool, client, **sim_options)

        assert shipper.ship_pending(10.0)
        later = now_payloads(4)
        spool_all(real_spool, later)
        assert shipper.ship_pending(10.0)

    assert pushes_seen(loki) == [(413, 4), (204, 2), (204, 2), (204, 2), (204, 2)]
    assert sorted(e.line for e in loki.entries()) == sorted(d.decode() for _, d in first + later)
    assert not (tmp_path / "dl.jsonl").exists()
    assert shipper.stats()["retried"] == 1
    assert errors == [
        f"a push of 4 records ({size} bytes) was refused as too large; sending it in halves, "
        f"and at most {size // 2} bytes per push from now on: HTTP 413: the push body is over "
        "a size limit of Loki or of a proxy in front of it; entries kept for retry: request "
        "body too large"
    ]


class EveryRefusalRejects:
    """A client taking every refusal but 401/403/404 for refused entries, as LokiClient did."""

    def __init__(self, inner: LokiClient) -> None:
        self.inner = inner

    def push(self, entries: Any) -> PushResult:
        result = self.inner.push(entries)
        if result.outcome == "retry" and result.status == 400:
            reason = result.reason.rpartition("retry: ")[2]
            # What it knew of the answer stays: the whole request was refused, nothing stored.
            return PushResult("reject", 400, None, reason, nothing_stored=result.nothing_stored)
        return result

    def after_fork_in_child(self) -> None:
        self.inner.after_fork_in_child()


@pytest.mark.integration
def test_one_entry_refused_as_the_whole_batch_was_is_a_refused_request(
    real_spool: Spool,
    tmp_path: Path,
    fake_time: FakeTime,
    errors: list[str],
    sim_options: dict[str, Any],
) -> None:
    spool_all(real_spool, now_payloads(4))
    with LokiServer(auth_enabled=True) as server, LokiClient(server.url, tenant="a b") as inner:
        shipper = Shipper(real_spool, EveryRefusalRejects(inner), **sim_options)

        assert shipper.ship_pending(5.0) is False

        # Split down to the first entry, which is refused as the batch was: then retried.
        assert pushes_seen(server) == [(400, 4), (400, 2), (400, 1), (400, 1), (400, 1), (400, 1)]
    assert fake_time.waits == [0.5, 1.0, 2.0, 1.5]
    assert not (tmp_path / "dl.jsonl").exists()
    assert real_spool.stats().records == 4
    assert shipper.stats()["dead_lettered"] == 0
    assert errors == [
        "push to Loki failed, will retry: HTTP 400: one entry is refused as the whole batch "
        "was, so the request is at fault, not its entries; entries kept for retry: tenant ID "
        "'a b' contains unsupported character ' '"
    ]


# -- each refused entry is dead-lettered once -------------------------------------------------


@pytest.mark.integration
def test_a_split_cut_short_does_not_dead_letter_an_entry_twice(
    tmp_path: Path, errors: list[str], sim_options: dict[str, Any]
) -> None:
    records = now_payloads(4)
    records[0] = (records[0][0], payload(0, padding="x" * 400))
    records[2] = (records[2][0], payload(2, padding="x" * 400))
    with LokiServer(limits=Limits(max_line_size=300)) as server, LokiClient(server.url) as client:

        def on_error(message: str) -> None:
            errors.append(message)
            if message.startswith("Loki refused an entry"):
                server.fail_next(1, 503)  # Loki is busy right after the dead letter

        spool = Spool.open(tmp_path / "spool")
        try:
            spool_all(spool, records)
            options = {**sim_options, "on_error": on_error}
            # A backoff longer than what is left of the deadline: the split is cut short,
            # as shutdown, a drain's deadline or an adoption's 1 s slices cut it.
            slow = Shipper(spool, client, backoff_initial_s=100.0, **options)

            assert slow.ship_pending(1.0) is False

            # [0..3] refused ([1] and [3] stored); [0, 1]: Loki holds [1], [0] pushed alone,
            # refused; [0]: dead letter; [1]: held; [2, 3]: [2] pushed alone: 503, cut short.
            assert pushes_seen(server) == [(400, 4), (400, 1), (400, 1), (503, 1)]
            # The dead-lettered entry left the spool with its split's delivered part.
            assert spool.stats().records == 2
        finally:
            spool.close()

        # The next process, opening the spool, finds [3] in Loki already (in-flight says it
        # may be) and dead-letters [2].
        spool = Spool.open(tmp_path / "spool")
        try:
            assert spool.stats().records == 2
            assert Shipper(spool, client, **options).ship_pending(10.0)
            assert spool.stats().records == 0
        finally:
            spool.close()

        assert pushes_seen(server)[4:] == [(400, 1), (400, 1)]
        assert sorted(e.line for e in server.entries()) == sorted(
            d.decode() for i, (_, d) in enumerate(records) if i in (1, 3)
        )
    letters = dead_letters(tmp_path / "dl.jsonl")
    assert [letter["line"] for letter in letters] == [
        records[0][1].decode(),
        records[2][1].decode(),
    ]
    assert slow.stats()["dead_lettered"] == 1


def test_a_split_cut_short_acks_the_part_delivered_and_dead_lettered(
    spool: FakeSpool,
    fake_loki: FakeLoki,
    tmp_path: Path,
    make_shipper: Callable[..., Shipper],
) -> None:
    lines = fill(spool, 6, poison=(1, 4))
    # [0..5] refused (the rest stored); [0..2]: [1] pushed, refused; [0]: held; [1,2]: [1]
    # refused; [1]: refused -> dead letter; [2]: held; [3..5]: [4] pushed: 503 (cut).
    fake_loki.script = {4: httpx.Response(503)}
    shipper = make_shipper(spool, backoff_initial_s=100.0)

    assert shipper.ship_pending(1.0) is False

    assert spool.stats().records == 3
    assert shipper.ship_pending(10.0)
    assert all(p == lines[4:5] for p in fake_loki.pushes[5:])  # never [3] or [5] again
    assert [d["line"] for d in dead_letters(tmp_path / "dead" / "letters.jsonl")] == [
        lines[1],
        lines[4],
    ]
    assert shipper.stats()["dead_lettered"] == 2
    assert sorted(fake_loki.lines) == sorted(lines[:1] + lines[2:4] + lines[5:])


@pytest.mark.parametrize("trouble", ["head moved", "peek fails"])
def test_the_part_done_is_not_acked_when_the_spool_changed_or_fails(
    trouble: str,
    spool: FakeSpool,
    fake_loki: FakeLoki,
    fake_time: FakeTime,
    errors: list[str],
    make_shipper: Callable[..., Shipper],
) -> None:
    fill(spool, 4, poison=(0, 2))
    # [0..3] refused; [0,1]: [0] refused; [0]: dead letter; [1]: held; [2,3]: [2]: 503 (cut).
    fake_loki.script = {3: httpx.Response(503)}

    def wait(event: threading.Event, timeout_s: float) -> bool:
        # During the backoff after the 503 (cut to the deadline): the spool drops its oldest
        # record (drop_oldest), or its next read fails.
        if trouble == "head moved":
            spool.ack(FakeBatch(tuple(spool._records[:1]), 0, 1))
        else:
            spool.peek_errors.append(RuntimeError("disk on fire"))
        return fake_time.wait(event, timeout_s)

    shipper = make_shipper(spool, wait=wait, backoff_initial_s=100.0)

    assert shipper.ship_pending(1.0) is False

    # Nothing acked on the shipper's behalf: what it peeks no longer matches, or fails.
    assert spool.stats().records == (3 if trouble == "head moved" else 4)
    if trouble == "peek fails":
        assert errors[-1] == "cannot acknowledge shipped records: RuntimeError: disk on fire"
