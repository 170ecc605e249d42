"""Exactly once as a query sees it: records in doubt after a crash or an unknown outcome are
reconciled with Loki, not pushed again (``agent_logging.shipping._reconcile``).

Against the test server with stream sharding on (Loki's default) and its rate clock in the
test's hands: a batch pushed again once the stream's rate has fallen lands in another shard
than its first copy, and is then visible twice; the control tests show that happening, so
the others could fail.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_logging import _cli
from agent_logging.loki._client import LokiClient, LokiQueryError, PushResult, QueriedEntry
from agent_logging.shipping._reconcile import (
    IN_FLIGHT_NAME,
    QUERYABLE_S,
    RECONCILE_ATTEMPTS,
    SETTLE_S,
    Found,
    InDoubt,
    InFlight,
    find_in_loki,
    read_in_flight,
    write_in_flight,
)
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._dirs import remove_spool_files
from agent_logging.spool._framing import HEADER_BYTES
from agent_logging.spool._segments import SpooledRecord, SpoolPosition
from agent_logging.spool._spool import Spool
from tests.lokisim import Limits, LokiServer

LABELS = {"service_name": "svc", "layer": "node", "env": "test"}
RECORD_BYTES = 2000  # large records: a 1 MiB batch per push makes the stream fast
S = 1_000_000_000


class RateClock:
    """The test server's clock for rates (sharding, the rate limit), moved by the test."""

    def __init__(self) -> None:
        self.s = 1000.0

    def __call__(self) -> float:
        return self.s


class Crash(BaseException):
    """The process dies: raised through the shipper, which catches only ``Exception``."""


class DiesBeforeAck:
    """A spool whose process dies right after Loki acknowledged a push, before the ack."""

    def __init__(self, spool: Spool) -> None:
        self._spool = spool
        self.directory = spool.directory
        self.wake = spool.wake

    def peek_batch(self, **limits: int) -> Any:
        return self._spool.peek_batch(**limits)

    def ack(self, batch: Any) -> None:
        raise Crash

    def sync_if_due(self) -> object:
        return self._spool.sync_if_due()

    def stats(self) -> Any:
        return self._spool.stats()


def payload(run: str, seq: int) -> bytes:
    record = {
        "ts": "2026-11-29T00:00:00.000000000Z",
        "level": "info",
        "event": "tick",
        "service": "svc",
        "layer": "node",
        "env": "test",
        "run": run,
        "seq": seq,
        "pad": "",
    }
    pad = RECORD_BYTES - len(orjson.dumps(record))
    record["pad"] = "p" * pad
    return orjson.dumps(record)


def fill(spool: Spool, run: str, first: int, count: int) -> list[bytes]:
    now = time.time_ns()
    made = []
    for seq in range(first, first + count):
        data = payload(run, seq)
        assert spool.append(now + seq, data)
        made.append(data)
    return made


def copies(loki: LokiServer) -> Counter[str]:
    """How many times each line is stored (across shards)."""
    return Counter(entry.line for entry in loki.entries())


def shards(loki: LokiServer) -> set[str]:
    return {entry.labels.get("__stream_shard__", "-") for entry in loki.entries()}


@dataclass
class World:
    loki: LokiServer
    client: LokiClient
    clock: RateClock
    directory: Path

    def shipper(self, spool: Any, **options: Any) -> Shipper:
        return Shipper(
            spool,
            options.pop("client", self.client),
            dead_letter_path=self.directory / "dead-letter.ndjson",
            default_labels=LABELS,
            backoff_initial_s=options.pop("backoff_initial_s", 0.05),
            **options,
        )

    def make_fast(self, spool: Spool) -> list[bytes]:
        """Ship a first 1 MiB batch, then let the server learn the stream's rate: from now
        on the stream is sharded."""
        lines = fill(spool, "warm", 0, 500)
        assert self.shipper(spool).ship_pending(10.0)
        self.clock.s += 1.0
        return lines


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clock = RateClock()
    with LokiServer(limits=Limits(clock=clock)) as loki, LokiClient(loki.url) as client:
        yield World(loki, client, clock, tmp_path / "spool")


def crash_after_push(world: World, spool: Spool) -> None:
    """A shipper pushes the head batch, Loki stores it, and the process dies before the ack."""
    with pytest.raises(Crash):
        world.shipper(DiesBeforeAck(spool)).ship_pending(10.0)
    spool.close()


def later(seconds: float) -> Any:
    return lambda: time.time() + seconds


# -- the crash ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_batch_in_flight_at_a_crash_is_reconciled_not_pushed_again(world: World) -> None:
    spool = Spool.open(world.directory)
    warm = world.make_fast(spool)
    batch = fill(spool, "crash", 0, 450)
    crash_after_push(world, spool)
    assert shards(world.loki) == {"-", "0", "1"}  # the batch went to two shards
    assert read_in_flight(world.directory) is not None
    world.clock.s += 10.0  # the restart: the stream's rate has fallen, a resend is unsharded
    pushed_before = len(world.loki.requests)

    with Spool.open(world.directory) as spool:
        rest = fill(spool, "after", 0, 10)
        shipper = world.shipper(spool, wall_clock=later(SETTLE_S))
        assert shipper.ship_pending(10.0)
        assert shipper.stats()["reconciled"] == len(batch)
        assert shipper.stats()["resent_unreconciled"] == 0

    assert copies(world.loki) == Counter({line.decode(): 1 for line in warm + batch + rest})
    later_pushes = [r for r in world.loki.requests[pushed_before:] if r.method == "POST"]
    assert sum(r.entries_in_body for r in later_pushes) == len(rest)


@pytest.mark.integration
def test_without_the_in_flight_record_the_resent_batch_is_visible_twice(world: World) -> None:
    """The control: what the reconcile prevents does happen on the test server."""
    spool = Spool.open(world.directory)
    world.make_fast(spool)
    batch = fill(spool, "crash", 0, 450)
    crash_after_push(world, spool)
    (world.directory / IN_FLIGHT_NAME).unlink()
    world.clock.s += 10.0

    with Spool.open(world.directory) as spool:
        assert world.shipper(spool).ship_pending(10.0)

    counted = copies(world.loki)
    assert {counted[line.decode()] for line in batch} == {2}


@pytest.mark.integration
def test_only_the_records_before_the_in_flight_end_are_looked_for(world: World) -> None:
    """A previous process pushed 300 records and died; the next batch holds 500."""
    with Spool.open(world.directory) as spool:
        lines = fill(spool, "part", 0, 800)
        head = spool.peek_batch(max_records=300, max_bytes=1 << 30)
        assert head is not None
        assert world.client.push_records(
            head.records, node_id_label=False, default_labels=LABELS
        ) == PushResult("ok", 204, None, "HTTP 204")
        write_in_flight(world.directory, InFlight(head.end, time.time_ns() - 5 * S))
        pushed_before = len(world.loki.requests)

        shipper = world.shipper(spool, max_batch_records=500)
        assert shipper.ship_pending(10.0)

    assert shipper.stats()["reconciled"] == 300
    queries = [r for r in world.loki.requests[pushed_before:] if r.method == "GET"]
    # One stream, one window (the first 300 records): a first page of 100, then the rest.
    assert [q.headers["x-loki-response-encoding-flags"] for q in queries] == [
        "categorize-labels",
        "categorize-labels",
    ]
    pushes = [r.entries_in_body for r in world.loki.requests[pushed_before:] if r.method == "POST"]
    assert pushes == [200, 300]
    assert copies(world.loki) == Counter({line.decode(): 1 for line in lines})


@pytest.mark.integration
def test_a_push_that_lands_after_the_client_gave_up_is_found(tmp_path: Path) -> None:
    """Loki stores a push its client timed out on: the retry finds it, after SETTLE_S."""
    clock = RateClock()
    with (
        LokiServer(limits=Limits(clock=clock)) as loki,
        LokiClient(loki.url, timeout_s=0.2) as client,
    ):
        world = World(loki, client, clock, tmp_path / "spool")
        with Spool.open(world.directory) as spool:
            world.make_fast(spool)
            batch = fill(spool, "slow", 0, 450)
            loki.stall_next(1, 0.5)  # held 0.5 s, then stored: the client gave up at 0.2 s

            def wait(event: threading.Event, timeout_s: float) -> bool:
                clock.s += 10.0  # meanwhile the stream's rate falls: a resend is unsharded
                return event.wait(timeout_s)

            began = time.monotonic()
            shipper = world.shipper(spool, wait=wait)
            assert shipper.ship_pending(10.0)
            assert time.monotonic() - began >= SETTLE_S

    assert shipper.stats()["retried"] >= 1  # the timeout (and a slow query, on a busy machine)
    assert shipper.stats()["reconciled"] == len(batch)
    assert {copies(loki)[line.decode()] for line in batch} == {1}


@pytest.mark.integration
def test_drain_reconciles_and_takes_a_record_in_two_shards_for_one(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch stored twice (in the shards, then unsharded by an unreconciled resend) and
    still spooled behind an in-flight record: drain pushes none of it again, and finds every
    record once."""
    spool = Spool.open(world.directory)
    world.make_fast(spool)
    batch = fill(spool, "twice", 0, 450)
    crash_after_push(world, spool)
    world.clock.s += 10.0
    with Spool.open(world.directory) as reopened:
        head = reopened.peek_batch()
        assert head is not None
        world.client.push_records(head.records, node_id_label=False, default_labels=LABELS)
    assert {copies(world.loki)[line.decode()] for line in batch} == {2}
    pushed_before = len(world.loki.requests)

    args = ["drain", "--spool-dir", str(world.directory), "--loki-url", world.loki.url]
    assert _cli.main([*args, "--timeout-s", "20"]) == 0

    out = capsys.readouterr().out
    assert out.startswith("drain: all 450 spooled records from 1 spools are visible in Loki")
    pushes = [r for r in world.loki.requests[pushed_before:] if r.method == "POST"]
    assert pushes == []


# -- when Loki cannot be asked ----------------------------------------------------------------


class QueryFails:
    """A client that pushes through ``client`` but whose queries fail."""

    def __init__(self, client: LokiClient, error: LokiQueryError) -> None:
        self._client = client
        self.error = error
        self.asked = 0

    def push(self, entries: Any) -> PushResult:
        return self._client.push(entries)

    def push_records(self, records: Any, **options: Any) -> PushResult:
        return self._client.push_records(records, **options)

    def iter_query_range(self, query: str, *, start_ns: int, end_ns: int) -> Iterator[Any]:
        self.asked += 1
        raise self.error

    def after_fork_in_child(self) -> None:
        return None


class NoWait:
    """A monotonic clock and backoff wait that only count (nothing sleeps)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        self.now += timeout_s
        return False


def in_doubt_spool(world: World, count: int) -> tuple[Spool, list[bytes]]:
    """A spool whose first ``count`` records a previous process pushed, then died."""
    spool = Spool.open(world.directory)
    lines = fill(spool, "doubt", 0, count)
    head = spool.peek_batch(max_records=count, max_bytes=1 << 30)
    assert head is not None
    world.client.push_records(head.records, node_id_label=False, default_labels=LABELS)
    write_in_flight(world.directory, InFlight(head.end, time.time_ns() - 5 * S))
    return spool, lines


@pytest.mark.integration
@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_a_read_path_refused_for_good_resends_at_once_and_counts(world: World, status: int) -> None:
    spool, _ = in_doubt_spool(world, 20)
    failing = QueryFails(world.client, LokiQueryError(f"HTTP {status}", status=status))
    errors: list[str] = []
    with spool:
        shipper = world.shipper(spool, client=failing, on_error=errors.append)
        assert shipper.ship_pending(10.0)
    assert failing.asked == 1
    assert shipper.stats()["resent_unreconciled"] == 20
    assert shipper.stats()["reconciled"] == 0
    assert errors == [
        "pushing 20 records again without knowing whether Loki holds them already (each may "
        f"be visible twice; counted as resent_unreconciled): HTTP {status}"
    ]


@pytest.mark.integration
def test_failing_queries_are_retried_then_given_up(world: World) -> None:
    spool, _ = in_doubt_spool(world, 20)
    failing = QueryFails(world.client, LokiQueryError("HTTP 503: busy", status=503))
    fake = NoWait()
    with spool:
        shipper = world.shipper(spool, client=failing, clock=fake.clock, wait=fake.wait)
        assert shipper.ship_pending(600.0)
    assert failing.asked == RECONCILE_ATTEMPTS
    assert shipper.stats()["retried"] == RECONCILE_ATTEMPTS - 1
    assert shipper.stats()["resent_unreconciled"] == 20


@pytest.mark.integration
def test_an_unreachable_loki_only_delays(world: World) -> None:
    spool, _ = in_doubt_spool(world, 20)
    failing = QueryFails(world.client, LokiQueryError("ConnectError", unreachable=True))
    fake = NoWait()
    with spool:
        shipper = world.shipper(spool, client=failing, clock=fake.clock, wait=fake.wait)
        assert not shipper.ship_pending(600.0)  # it never gives up: no push could land
        assert spool.stats().records == 20
    assert failing.asked > RECONCILE_ATTEMPTS
    assert shipper.stats()["resent_unreconciled"] == 0
    failing.error = LokiQueryError("HTTP 500", status=500)  # it answers again: counts anew
    with Spool.open(world.directory) as spool:
        shipper = world.shipper(spool, client=failing, clock=fake.clock, wait=fake.wait)
        assert shipper.ship_pending(600.0)


@pytest.mark.integration
def test_records_too_old_to_be_seen_are_resent_and_counted(world: World) -> None:
    with Spool.open(world.directory) as spool:
        old_ns = time.time_ns() - int((QUERYABLE_S + 3600) * S)
        lines = [payload("old", seq) for seq in range(5)]
        for seq, line in enumerate(lines):
            spool.append(old_ns + seq, line)
        head = spool.peek_batch()
        assert head is not None
        world.client.push_records(head.records, node_id_label=False, default_labels=LABELS)
        write_in_flight(world.directory, InFlight(head.end, time.time_ns() - 5 * S))
        shipper = world.shipper(spool)
        assert shipper.ship_pending(10.0)
    # Loki does not show them (4 h old, still in its ingester): resent, each a possible copy.
    assert shipper.stats()["resent_unreconciled"] == 5


# -- the in-flight record ---------------------------------------------------------------------


def test_in_flight_round_trips_and_garbage_reads_as_none(tmp_path: Path) -> None:
    write_in_flight(tmp_path, InFlight(SpoolPosition(7, 4096), 1_795_000_000_000_000_000))
    assert (tmp_path / IN_FLIGHT_NAME).read_text() == (
        "1 00000000000000000007 00000000000000004096 01795000000000000000\n"
    )
    assert read_in_flight(tmp_path) == InFlight(SpoolPosition(7, 4096), 1_795_000_000_000_000_000)
    for garbage in ("", "1 7 4096", "2 7 4096 1", "1 7 x 1", "\xff"):
        (tmp_path / IN_FLIGHT_NAME).write_text(garbage, "latin-1")
        assert read_in_flight(tmp_path) is None
    assert read_in_flight(tmp_path / "missing") is None


@dataclass(frozen=True)
class Positioned:
    records: tuple[SpooledRecord, ...]
    start: SpoolPosition
    end: SpoolPosition


def batch_at(segment: int, offset: int, sizes: list[int], *, gap: int = 0) -> Positioned:
    records = tuple(SpooledRecord(i, b"x" * size) for i, size in enumerate(sizes))
    end = offset + sum(HEADER_BYTES + size for size in sizes) + gap
    return Positioned(records, SpoolPosition(segment, offset), SpoolPosition(segment, end))


def doubt_until(tmp_path: Path, end: SpoolPosition) -> InDoubt:
    write_in_flight(tmp_path, InFlight(end, time.time_ns()))
    return InDoubt(tmp_path)


@pytest.mark.parametrize(
    ("end", "batch", "in_doubt"),
    [
        # The same segment: the records that end at or before the in-flight end.
        (SpoolPosition(3, 100 + 2 * (HEADER_BYTES + 10)), batch_at(3, 100, [10, 10, 10]), 2),
        (SpoolPosition(3, 100 + 2 * (HEADER_BYTES + 10) - 1), batch_at(3, 100, [10, 10, 10]), 1),
        # A later segment ends it: all of this one.
        (SpoolPosition(4, 0), batch_at(3, 100, [10, 10, 10]), 3),
        # It ended before this batch: none.
        (SpoolPosition(3, 100), batch_at(3, 100, [10, 10, 10]), 0),
        (SpoolPosition(2, 5000), batch_at(3, 0, [10]), 0),
        # The batch skipped damage: offsets cannot be told, all of it is in doubt.
        (SpoolPosition(3, 120), batch_at(3, 100, [10, 10, 10], gap=7), 3),
    ],
)
def test_the_records_before_the_in_flight_end_are_in_doubt(
    tmp_path: Path, end: SpoolPosition, batch: Positioned, in_doubt: int
) -> None:
    doubt = doubt_until(tmp_path, end)
    doubt.note_batch(batch)
    assert doubt.records == set(batch.records[:in_doubt])


def test_in_doubt_without_a_directory_or_positions_persists_nothing(tmp_path: Path) -> None:
    doubt = InDoubt(None)
    doubt.note_batch(batch_at(1, 0, [5]))
    doubt.before_push(SpoolPosition(1, 100))
    assert doubt.records == set()
    positioned = doubt_until(tmp_path, SpoolPosition(9, 9))
    positioned.note_batch(SimpleBatch((SpooledRecord(1, b"a"),)))
    assert positioned.records == set()


@dataclass(frozen=True)
class SimpleBatch:
    records: tuple[SpooledRecord, ...]


def test_the_in_flight_end_only_grows_and_an_ack_past_it_forgets_it(tmp_path: Path) -> None:
    doubt = InDoubt(tmp_path, wall_clock=lambda: 1_795_000_000.5)
    doubt.before_push(SpoolPosition(2, 500))
    doubt.before_push(SpoolPosition(2, 300))  # a part of the batch: the end stays
    assert read_in_flight(tmp_path) == InFlight(SpoolPosition(2, 500), 1_795_000_000_500_000_000)
    doubt.before_push(SpoolPosition(3, 100))
    assert read_in_flight(tmp_path) == InFlight(SpoolPosition(3, 100), 1_795_000_000_500_000_000)
    doubt.acked(batch_at(3, 0, [1]))  # ends before the in-flight end: it stays
    noted = batch_at(3, 0, [1])
    doubt.note_batch(noted)
    assert len(doubt.records) == 1
    doubt.acked(Positioned(noted.records, SpoolPosition(3, 0), SpoolPosition(3, 100)))
    assert doubt.records == set()
    doubt.note_batch(batch_at(3, 100, [1]))
    assert doubt.records == set()


def test_a_crash_s_push_settles_from_when_it_began(tmp_path: Path) -> None:
    pushed_ns = 1_795_000_000_000_000_000
    write_in_flight(tmp_path, InFlight(SpoolPosition(1, 1), pushed_ns))
    now = [100.0]
    doubt = InDoubt(tmp_path, wall_clock=lambda: pushed_ns / S + 0.25, clock=lambda: now[0])
    doubt.load()
    assert doubt.settle_s() == pytest.approx(SETTLE_S - 0.25)
    now[0] += SETTLE_S
    assert doubt.settle_s() == 0.0


def test_records_in_doubt_far_apart_are_looked_for_in_windows_of_their_own() -> None:
    asked: list[tuple[str, int, int]] = []
    base = 1_795_000_000 * S
    stamps = [base, base + 5 * S, base + 3600 * S, base + 3601 * S]
    records = [SpooledRecord(ts, payload("w", i)) for i, ts in enumerate(stamps)]

    def query(selector: str, *, start_ns: int, end_ns: int) -> Iterator[QueriedEntry]:
        asked.append((selector, start_ns, end_ns))
        if start_ns <= base < end_ns:  # Loki holds the first one
            yield QueriedEntry({}, base, records[0].payload.decode())

    found = find_in_loki(
        query, records, node_id_label=False, default_labels=LABELS, now_unix_s=base / S + 60
    )
    selector = '{env="test", layer="node", service_name="svc"}'
    assert asked == [
        (selector, base, base + 5 * S + 1),
        (selector, base + 3600 * S, base + 3601 * S + 1),
    ]
    assert found == Found({records[0]}, 0)


def test_an_emptied_orphan_s_in_flight_record_is_removed(tmp_path: Path) -> None:
    write_in_flight(tmp_path, InFlight(SpoolPosition(1, 1), 1))
    (tmp_path / "lock").write_text("")
    remove_spool_files(tmp_path)
    assert list(tmp_path.iterdir()) == []
