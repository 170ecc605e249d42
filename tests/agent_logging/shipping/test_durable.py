"""The durable path end to end: configure → spool → shipper → Loki, through the public API.

Each test configures the library with ``loki_url`` and ``spool_dir`` against the Loki test
server (or a real Loki for the first test, when ``LOKI_URL`` is set) and checks what Loki
holds afterwards. Outages, refusals and a full spool are injected on the server side.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import mmap
import os
import re
import signal
import threading
import time
import tracemalloc
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

import agent_logging
from agent_logging import _state
from agent_logging.loki._client import LokiClient, QueriedEntry
from agent_logging.schema import rfc3339_ns
from agent_logging.shipping import _adoption, _durable
from agent_logging.shipping._durable import Durable
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._dirs import DEAD_LETTER_NAME
from agent_logging.spool._spool import Spool, read_all
from tests.lokisim import Limits, LokiServer
from tests.lokisim.fixtures import VISIBILITY_TIMEOUT_S

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
HEALTH_KEYS = (
    "spool_records",
    "spool_bytes",
    "oldest_unsent_age_s",
    "sent",
    "retried",
    "dropped",
    "dead_lettered",
)


def configure(url: str, root: Path, service: str = "svc", **options: Any) -> None:
    """The durable path with quick batches, no health records and no local output."""
    settings: dict[str, Any] = {
        "loki_url": url,
        "spool_dir": root,
        "output": "none",
        "batch_interval_s": 0.05,
        "health_interval_s": 0,
        **options,
    }
    agent_logging.configure(service=service, layer="node", env="test", **settings)


def durable() -> Durable:
    """The durable sink of the pipeline in force."""
    pipeline = _state.pipeline
    assert pipeline is not None
    sink = pipeline.sinks[0]
    assert isinstance(sink, Durable)
    return sink


def internal_messages() -> tuple[list[str], logging.Handler]:
    """A list that receives what the library says on its internal logger, and the handler
    that fills it (attached now; remove it when done)."""
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    _state.internal_logger.addHandler(handler)
    return said, handler


@pytest.fixture
def reported() -> Iterator[list[str]]:
    """What the library says on its internal logger (once per kind) during the test."""
    said, handler = internal_messages()
    try:
        yield said
    finally:
        _state.internal_logger.removeHandler(handler)


def losses(said: list[str]) -> list[str]:
    return [message for message in said if message.startswith("records are being lost")]


def stored_records(loki: LokiServer) -> list[dict[str, Any]]:
    return [orjson.loads(entry.line) for entry in loki.entries()]


def wait_for_record(
    loki: LokiServer, predicate: Callable[[dict[str, Any]], bool], timeout_s: float
) -> dict[str, Any] | None:
    """The first stored record the predicate accepts, waiting for new entries up to the timeout."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while True:
        entries = loki.entries()
        for entry in entries[seen:]:
            record: dict[str, Any] = orjson.loads(entry.line)
            if predicate(record):
                return record
        seen = len(entries)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not loki.wait_for_entries(seen + 1, remaining):
            return None


def query_until(
    client: LokiClient, query: str, start_ns: int, end_ns: int, count: int, timeout_s: float
) -> list[QueriedEntry]:
    """Query until at least ``count`` entries are visible (a real Loki may lag a little)."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        entries = client.query_range(query, start_ns=start_ns, end_ns=end_ns)
        if len(entries) >= count or time.monotonic() >= deadline:
            return entries
        pause.wait(0.2)


# -- 1. end to end ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("shipper", ["thread", "process"])
def test_records_reach_loki_with_identifiers_as_structured_metadata(
    loki_url: str, loki_tenant: str | None, tmp_path: Path, shipper: str
) -> None:
    # A unique service name keeps runs apart on a shared real Loki.
    service = f"e2e-{uuid.uuid4().hex[:12]}"
    start_ns = time.time_ns()
    # node_id as metadata here (the default for layer=node makes it a label: tested below).
    configure(
        loki_url,
        tmp_path / "spool",
        service,
        node_id_label=False,
        loki_tenant=loki_tenant,
        shipper=shipper,
    )
    log = agent_logging.get_logger("tests.e2e")
    with agent_logging.bound(
        node_id="n-1", allocation_id="a-9", trace_id=TRACE_ID, span_id=SPAN_ID
    ):
        for step in range(3):
            log.info("task claimed", step=step)
    log.warning("other allocation", allocation_id="a-8", node_id="n-1")
    agent_logging.shutdown(timeout_s=10.0)
    end_ns = time.time_ns() + 1

    with LokiClient(loki_url, tenant=loki_tenant) as client:
        query = f'{{service_name="{service}"}} | allocation_id="a-9"'
        entries = query_until(client, query, start_ns, end_ns, 3, timeout_s=VISIBILITY_TIMEOUT_S)
        everything = query_until(
            client,
            f'{{service_name="{service}"}}',
            start_ns,
            end_ns,
            4,
            timeout_s=VISIBILITY_TIMEOUT_S,
        )
    assert [orjson.loads(entry.line)["step"] for entry in entries] == [0, 1, 2]
    assert len(everything) == 4
    first = orjson.loads(entries[0].line)
    assert first["event"] == "task claimed"
    assert first["ts"] == rfc3339_ns(entries[0].ts_ns)  # the record's own stamp is the entry's

    # Categorized, Loki 3 tells stream labels from structured metadata.
    response = httpx.get(
        f"{loki_url}/loki/api/v1/query_range",
        params={
            "query": f'{{service_name="{service}"}}',
            "start": str(start_ns),
            "end": str(end_ns),
            "direction": "forward",
        },
        headers={
            "X-Loki-Response-Encoding-Flags": "categorize-labels",
            **({"X-Scope-OrgID": loki_tenant} if loki_tenant else {}),
        },
        timeout=10.0,
    )
    assert response.status_code == 200, response.text
    streams = response.json()["data"]["result"]
    assert [stream["stream"] for stream in streams] == [
        {"env": "test", "layer": "node", "service_name": service}
    ]
    metadata = [value[2]["structuredMetadata"] for value in streams[0]["values"]]
    assert {k: metadata[0][k] for k in ("node_id", "allocation_id", "trace_id", "span_id")} == {
        "node_id": "n-1",
        "allocation_id": "a-9",
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
    }
    assert [m["level"] for m in metadata] == ["info", "info", "info", "warning"]
    assert metadata[3]["allocation_id"] == "a-8"


@pytest.mark.integration
def test_the_http_clients_own_log_records_are_not_spooled(
    loki: LokiServer, tmp_path: Path, captured: Callable[..., Any]
) -> None:
    # httpx logs every request at INFO; through the stdlib bridge each push would spool a
    # record needing another push, for ever. The bridge drops what the HTTP stack says on
    # the library's own threads.
    local = captured(
        loki_url=loki.url, spool_dir=tmp_path / "spool", batch_interval_s=0.05, health_interval_s=0
    )
    agent_logging.get_logger("tests").info("only me")
    assert loki.wait_for_entries(1, timeout_s=10.0)
    assert durable().flush(timeout_s=5.0)  # acked: the push and its log record are over
    assert not any(record.get("logger") == "httpx" for record in local.records)
    health = agent_logging.health()
    assert (health["spool_records"], health["sent"]) == (0, 1)
    agent_logging.shutdown(timeout_s=5.0)

    assert [record["event"] for record in stored_records(loki)] == ["only me"]


@pytest.mark.integration
def test_node_agents_get_one_stream_per_node_by_default(loki: LokiServer, tmp_path: Path) -> None:
    configure(loki.url, tmp_path / "spool", "agent", ids={"node_id": "n-17"})
    agent_logging.get_logger("tests").info("claimed", allocation_id="a-9")
    agent_logging.shutdown(timeout_s=10.0)
    (entry,) = loki.entries()
    assert entry.labels["node_id"] == "n-17"
    assert "node_id" not in entry.metadata
    assert entry.metadata["allocation_id"] == "a-9"


@pytest.mark.integration
def test_a_spool_the_filesystem_cannot_map_is_written_by_system_calls_and_said_so(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reported: list[str]
) -> None:
    def no_mapping(fd: int, length: int) -> mmap.mmap:
        raise OSError(errno.ENODEV, "No such device")

    monkeypatch.setattr(mmap, "mmap", no_mapping)
    configure(loki.url, tmp_path / "spool", spool_max_bytes=64 * 1024)  # 32 KiB segments
    log = agent_logging.get_logger("tests")
    for seq in range(100):  # ~45 KiB: the segments rotate, each written without a mapping
        log.info("claimed", seq=seq, pad="x" * 300)
    assert agent_logging.flush(timeout_s=15.0) is True
    assert [r["seq"] for r in stored_records(loki)] == list(range(100))
    health = agent_logging.health()
    assert (health["write_errors"], health["dropped"], health["spool_error"]) == (0, 0, None)
    said = [m for m in reported if "shared and writable" in m]
    segment = re.escape(str(tmp_path / "spool" / "svc")) + r"/seg-[0-9]+\.spool"
    assert len(said) == 1
    assert re.fullmatch(
        rf"cannot map {segment} shared and writable: No such device; records are written "
        r"with one system call each instead \(as durable, about 2 µs more per log call\)",
        said[0],
    )


@pytest.mark.integration
def test_flush_ships_now_what_would_wait_for_its_batch_to_age(
    loki: LokiServer, tmp_path: Path
) -> None:
    configure(loki.url, tmp_path / "spool", batch_interval_s=3600.0)  # a batch ages an hour
    log = agent_logging.get_logger("tests")
    for n in range(5):
        log.info("claimed", attempt=n)
    assert agent_logging.flush(timeout_s=10.0) is True
    assert [r["attempt"] for r in stored_records(loki)] == [0, 1, 2, 3, 4]
    assert durable().health()["spool_records"] == 0
    loki.go_down()
    log.info("claimed", attempt=5)
    assert agent_logging.flush(timeout_s=0.3) is False  # Loki is down: still spooled
    started = time.monotonic()
    assert agent_logging.flush(timeout_s=-1.0) is False  # a deadline already past
    assert time.monotonic() - started < 1.0
    assert durable().health()["spool_records"] == 1


def test_flush_without_a_durable_path_has_nothing_to_ship() -> None:
    agent_logging.shutdown()
    assert agent_logging.flush() is True  # not configured
    agent_logging.configure(service="svc", layer="node", env="test", output="none")
    assert agent_logging.flush() is True  # nothing ships


@pytest.mark.integration
def test_a_logging_thread_lets_the_shipper_in_while_it_works_behind(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(loki.url, tmp_path / "spool", batch_interval_s=3600.0)  # the shipper stays idle
    yields: list[float] = []
    monkeypatch.setattr(
        _durable, "time", types.SimpleNamespace(sleep=yields.append, monotonic=time.monotonic)
    )
    log = agent_logging.get_logger("tests")
    sink = durable()
    sink._behind_bytes = 0  # every record counts as behind
    sink.shipper.busy = True
    for n in range(640):
        log.info("claimed", attempt=n)
    assert yields == [0] * 10  # one call in 64
    sink.shipper.busy = False  # waiting or backing off: nothing to let in
    for n in range(640):
        log.info("claimed", attempt=n)
    assert len(yields) == 10
    sink._behind_bytes = 2**40  # busy, but the shipper keeps up
    sink.shipper.busy = True
    for n in range(640):
        log.info("claimed", attempt=n)
    assert len(yields) == 10
    sink.shipper.busy = False


# -- 3. outages, 429s and refusals --------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_a_long_outage_loses_nothing_backs_off_and_keeps_memory_flat(
    loki: LokiServer, tmp_path: Path
) -> None:
    configure(loki.url, tmp_path / "spool", batch_max_bytes=64 * 1024)
    log = agent_logging.get_logger("tests.outage")
    log.info("before the outage")
    assert loki.wait_for_entries(1, timeout_s=10.0)
    loki.go_down()

    count = 4000
    tracemalloc.start()
    try:
        baseline, _ = tracemalloc.get_traced_memory()
        for seq in range(count):
            log.info("during the outage", seq=seq, pad="x" * 2000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    during = agent_logging.health()
    assert during["spool_records"] == count
    assert during["sent"] == 1
    # Records live in the spool, not in memory: the peak stays far below what was spooled.
    assert peak - baseline < during["spool_bytes"] / 10

    loki.come_up()
    assert durable().flush(timeout_s=30.0)
    after = agent_logging.health()
    stored = [r["seq"] for r in stored_records(loki) if r["event"] == "during the outage"]
    assert sorted(stored) == list(range(count))
    assert after["spool_records"] == 0
    assert after["sent"] == count + 1
    # Backed off: a handful of attempts for the whole outage, not one per batch or record.
    assert 0 < after["retried"] <= 25
    assert after["dropped"] == 0


@pytest.mark.integration
def test_a_429_storm_is_retried_no_sooner_than_retry_after(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[float] = []

    def recording_wait(event: threading.Event, timeout_s: float) -> bool:
        delays.append(timeout_s)
        return event.wait(timeout_s)

    monkeypatch.setattr(_durable, "Shipper", functools.partial(Shipper, wait=recording_wait))
    loki.fail_next(3, 429, retry_after_s=0.25, body="Ingestion rate limit exceeded")
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests.ratelimit")
    for seq in range(5):
        log.info("rate limited", seq=seq)

    assert loki.wait_for_entries(5, timeout_s=15.0)
    assert durable().flush(timeout_s=5.0)
    health = agent_logging.health()
    assert health["retried"] == 3
    assert len(delays) == 3
    # The error stays after the recovery, with how long ago it was (the storm took ~1 s).
    assert "Ingestion rate limit exceeded" in health["last_error"]
    assert 0.0 <= health["last_error_age_s"] < 30.0
    assert all(delay >= 0.25 for delay in delays)
    statuses = [r.status for r in loki.requests if r.path == "/loki/api/v1/push"]
    assert statuses[:4] == [429, 429, 429, 204]
    assert sorted(r["seq"] for r in stored_records(loki)) == [0, 1, 2, 3, 4]


@pytest.mark.integration
def test_a_poison_entry_is_dead_lettered_and_its_batch_mates_delivered(tmp_path: Path) -> None:
    with LokiServer(limits=Limits(max_line_size=1024)) as loki:
        loki.go_down()  # everything below goes out in one batch once Loki is up
        configure(loki.url, tmp_path / "spool")
        log = agent_logging.get_logger("tests.poison")
        for seq in range(7):
            log.info("batch mate", seq=seq, pad="x" * (2000 if seq == 3 else 10))
        loki.come_up()
        assert durable().flush(timeout_s=15.0)
        health = agent_logging.health()
        stored = sorted(r["seq"] for r in stored_records(loki))

    assert stored == [0, 1, 2, 4, 5, 6]
    assert health["dead_lettered"] == 1
    assert health["spool_records"] == 0
    letters = (tmp_path / "spool" / "svc" / DEAD_LETTER_NAME).read_bytes().splitlines()
    assert len(letters) == 1
    letter = orjson.loads(letters[0])
    assert orjson.loads(letter["line"])["seq"] == 3
    assert letter["status"] == 400
    assert letter["reason"].startswith("max entry size '1024' bytes exceeded for stream")
    assert letter["labels"] == {"env": "test", "layer": "node", "service_name": "svc"}


# -- 4. spool full --------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("policy", "kept_end"), [("drop_oldest", "newest"), ("drop_newest", "oldest")]
)
def test_a_full_spool_applies_its_policy_counts_drops_and_delivers_the_rest(
    loki: LokiServer, tmp_path: Path, policy: str, kept_end: str, reported: list[str]
) -> None:
    loki.go_down()
    configure(loki.url, tmp_path / "spool", spool_max_bytes=64 * 1024, spool_full_policy=policy)
    log = agent_logging.get_logger("tests.full")
    count = 300
    for seq in range(count):
        log.info("filling", seq=seq, pad="x" * 500)
    full = agent_logging.health()
    kept = full["spool_records"]
    assert 0 < kept < count
    assert full["dropped"] == count - kept
    # The documented policy at work, counted as dropped: not a loss to report.
    assert (full["write_errors"], full["spool_error"], losses(reported)) == (0, None, [])

    loki.come_up()
    assert durable().flush(timeout_s=15.0)
    delivered = sorted(r["seq"] for r in stored_records(loki))
    expected = list(range(count - kept, count)) if kept_end == "newest" else list(range(kept))
    assert delivered == expected
    assert agent_logging.health()["dropped"] == count - kept


@pytest.mark.integration
@pytest.mark.parametrize(
    ("free_blocks", "reason"),
    [
        (0, "the disk is full (0 bytes free; a new segment needs 32,768)"),
        (1 << 20, "a segment file could not be created or written"),
    ],
)
def test_a_spool_that_cannot_store_records_is_reported_once_naming_it(
    loki: LokiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reported: list[str],
    free_blocks: int,
    reason: str,
) -> None:
    loki.go_down()
    configure(loki.url, tmp_path / "spool", spool_max_bytes=64 * 1024)  # 32 KiB segments
    spool_dir = tmp_path / "spool" / "svc"
    real_fallocate, real_statvfs = os.posix_fallocate, os.statvfs

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def filesystem(path: Any) -> os.statvfs_result:
        # 4 KiB blocks: 0 free, or 4 GiB free (a failure the disk's free space does not explain).
        return os.statvfs_result((4096, 4096, 1 << 21, free_blocks, free_blocks, 0, 0, 0, 0, 255))

    monkeypatch.setattr(os, "posix_fallocate", no_space)  # no new segment can be allocated
    monkeypatch.setattr(os, "statvfs", filesystem)
    log = agent_logging.get_logger("tests.disk")
    count = 300
    for seq in range(count):
        log.info("filling", seq=seq, pad="x" * 500)
    monkeypatch.setattr(os, "posix_fallocate", real_fallocate)
    monkeypatch.setattr(os, "statvfs", real_statvfs)

    health = agent_logging.health()
    kept = health["spool_records"]
    assert 0 < kept < count  # the first segment filled up, and no second one could be made
    assert (health["write_errors"], health["dropped"]) == (count - kept, 0)
    problem = f"spool {spool_dir} cannot store records: {reason}"
    assert health["spool_error"] == problem
    assert losses(reported) == [
        f"records are being lost: {problem}; further losses are counted in "
        "health()['write_errors'] without being reported again"
    ]

    durable().spool._retry_at = 0.0  # past the pause between tries (_spool_cap._RETRY_S)
    log.info("after the disk has room again")  # the spool recovers on a fresh segment
    loki.come_up()
    assert durable().flush(timeout_s=15.0)
    assert [r.get("seq") for r in stored_records(loki)] == [*range(kept), None]


# -- 5. orphan adoption ---------------------------------------------------------------------------


def fill_spool(directory: Path, service: str, count: int) -> list[int]:
    """Write ``count`` records as a process of ``service`` would have; returns their stamps."""
    base = time.time_ns() - 5_000_000_000
    stamps = [base + seq * 1000 for seq in range(count)]
    with Spool.open(directory) as spool:
        for seq, ts_ns in enumerate(stamps):
            record = {
                "ts": rfc3339_ns(ts_ns),
                "level": "info",
                "event": "left behind",
                "service": service,
                "layer": "node",
                "env": "test",
                "seq": seq,
            }
            assert spool.append(ts_ns, orjson.dumps(record))
    return stamps


@pytest.mark.integration
def test_an_orphaned_spool_is_shipped_by_the_next_process_and_removed(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    stamps = fill_spool(root / "old-svc", "old-svc", 5)
    configure(loki.url, root, "new-svc")
    assert durable().wait_for_adoption(1, timeout_s=15.0)

    entries = loki.entries()
    assert [entry.ts_ns for entry in entries] == stamps
    assert {entry.labels["service_name"] for entry in entries} == {"old-svc"}
    assert not (root / "old-svc").exists()
    assert agent_logging.health()["adopted"] == 5
    assert sorted(path.name for path in root.iterdir()) == ["new-svc"]


@pytest.mark.integration
def test_a_spool_with_a_live_owner_is_left_to_it(loki: LokiServer, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    fill_spool(root / "busy-svc", "busy-svc", 3)
    with Spool.open(root / "busy-svc") as busy:  # its owner, alive
        configure(loki.url, root, "new-svc")
        assert durable().wait_for_adoption(1, timeout_s=15.0)
        assert busy.stats().records == 3
    assert loki.count() == 0
    assert agent_logging.health()["adopted"] == 0


@pytest.mark.integration
def test_an_adopted_spool_with_dead_letters_is_emptied_but_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spool"
    fill_spool(root / "old-svc", "old-svc", 3)
    (root / "old-svc" / "notes.txt").write_text("not ours to delete\n")
    with LokiServer(limits=Limits(max_line_size=60)) as loki:
        configure(loki.url, root, "new-svc")
        assert durable().wait_for_adoption(1, timeout_s=15.0)
        assert loki.count() == 0  # every line is over the tiny limit
    assert sorted(path.name for path in (root / "old-svc").iterdir()) == [
        DEAD_LETTER_NAME,
        "lock",
        "notes.txt",
    ]
    assert len((root / "old-svc" / DEAD_LETTER_NAME).read_bytes().splitlines()) == 3


def is_locked(directory: Path) -> bool:
    fd = os.open(directory / "lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.integration
def test_an_orphan_a_reader_holds_for_a_moment_is_adopted_in_the_same_round(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    fill_spool(root / "old-svc", "old-svc", 3)
    # What `agent-logging status` does while it reads a spool: a shared lock, for a moment.
    fd = os.open(root / "old-svc" / "lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    threading.Timer(0.2, os.close, (fd,)).start()
    configure(loki.url, root, "new-svc")
    assert durable().wait_for_adoption(1, timeout_s=15.0)  # not the next rescan, 60 s on
    assert len(loki.entries()) == 3
    assert not (root / "old-svc").exists()


@pytest.mark.integration
def test_shutdown_ends_an_adoption_in_progress_and_releases_the_orphan(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    fill_spool(root / "old-svc", "old-svc", 3)
    loki.go_down()
    configure(loki.url, root, "new-svc")
    # Wait on the adopter's own state, not by probing the lock: a probe holds a shared lock
    # for a moment, which the adopter takes for an owner's unless it is gone on its retry.
    deadline = time.monotonic() + 30.0
    pause = threading.Event()
    while durable()._adoption.current is None and time.monotonic() < deadline:
        pause.wait(0.01)
    assert is_locked(root / "old-svc")  # the adoption is retrying against the outage
    adoption = [t for t in durable()._threads if t.name == "agent-logging-adopt"]

    agent_logging.shutdown(timeout_s=2.0)
    adoption[0].join(5.0)
    assert not adoption[0].is_alive()
    assert not is_locked(root / "old-svc")
    assert len(list(read_all(root / "old-svc"))) == 3


# -- 6. fork --------------------------------------------------------------------------------------


def run_in_child(body: Callable[[], int]) -> int:
    """Fork; the child runs ``body`` and exits with its result. Returns the child's status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, whose coverage is not collected
        code = 70
        try:
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.integration
def test_a_forked_child_ships_from_its_own_spool_and_the_parent_goes_on(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    configure(loki.url, root)
    log = agent_logging.get_logger("tests.fork")
    log.info("parent before the fork")
    assert loki.wait_for_entries(1, timeout_s=10.0)

    def child() -> int:  # pragma: no cover - runs in the child
        log.info("from the child", child_pid=os.getpid())
        agent_logging.shutdown(timeout_s=5.0)
        return 0 if (root / f"svc.{os.getpid()}").is_dir() else 3

    assert run_in_child(child) == 0
    log.info("parent after the fork")
    agent_logging.shutdown(timeout_s=5.0)

    records = stored_records(loki)
    assert sorted(r["event"] for r in records) == [
        "from the child",
        "parent after the fork",
        "parent before the fork",
    ]
    child_pid = next(r["child_pid"] for r in records if r["event"] == "from the child")
    assert sorted(path.name for path in root.iterdir()) == sorted(["svc", f"svc.{child_pid}"])


@pytest.mark.integration
def test_a_forked_child_that_never_logs_leaves_the_parents_spool_alone(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    configure(loki.url, root)
    log = agent_logging.get_logger("tests.fork")
    loki.go_down()
    log.info("parent, spooled while Loki is down")

    def child() -> int:  # pragma: no cover - runs in the child
        said, _ = internal_messages()
        agent_logging.shutdown(timeout_s=3.0)
        return 0 if not said else 4

    assert run_in_child(child) == 0
    assert sorted(path.name for path in root.iterdir()) == ["svc"]
    assert agent_logging.health()["spool_records"] == 1
    loki.come_up()
    assert durable().flush(timeout_s=15.0)
    assert [r["event"] for r in stored_records(loki)] == ["parent, spooled while Loki is down"]


@pytest.mark.integration
def test_a_forked_child_that_never_logged_flushes_at_once_and_reports_its_own_health(
    loki: LokiServer, tmp_path: Path
) -> None:
    root = tmp_path / "spool"
    configure(loki.url, root)
    log = agent_logging.get_logger("tests.fork")
    loki.go_down()
    for seq in range(3):
        log.info("parent, spooled while Loki is down", seq=seq)
    assert agent_logging.health()["spool_records"] == 3
    keys = set(agent_logging.health())

    def child() -> int:  # pragma: no cover - runs in the child
        said, _ = internal_messages()
        started = time.monotonic()
        if agent_logging.flush(timeout_s=10.0) is not True:
            return 3
        if time.monotonic() - started > 2.0:  # without a guard it spins until the timeout
            return 4
        health = agent_logging.health()
        if set(health) != keys:
            return 8  # a forked child's health must say what every process's says
        own = {key: health[key] for key in (*HEALTH_KEYS, "write_errors", "last_error")}
        if own != {**dict.fromkeys(HEALTH_KEYS, 0), "write_errors": 0, "last_error": None}:
            return 5  # the parent's spool counts, as if they were the child's
        if said:
            return 6  # e.g. "SpoolError: ... belongs to the parent of a fork"
        log.info("the child's own record")
        if agent_logging.health()["spool_records"] != 1:
            return 7
        agent_logging.shutdown(timeout_s=0.5)  # Loki is down: it stays in the child's spool
        return 0

    assert run_in_child(child) == 0
    assert agent_logging.health()["spool_records"] == 3  # the parent's, untouched
    assert len(list(read_all(root / "svc"))) == 3


@pytest.mark.integration
def test_the_spool_of_a_worker_that_died_is_adopted_while_its_parent_runs(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_adoption, "_RESCAN_S", 0.05)
    root = tmp_path / "spool"
    configure(loki.url, root)
    log = agent_logging.get_logger("tests.fork")
    loki.go_down()  # the worker's record stays in its spool when it dies

    def doomed_worker() -> int:  # pragma: no cover - runs in the child
        log.info("from a worker that crashed", worker_pid=os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)
        return 0

    assert run_in_child(doomed_worker) == -signal.SIGKILL
    (orphan,) = [path for path in root.iterdir() if path.name != "svc"]
    assert len(list(read_all(orphan))) == 1
    loki.come_up()

    record = wait_for_record(loki, lambda r: "worker_pid" in r, timeout_s=15.0)
    assert record is not None
    assert orphan.name == f"svc.{record['worker_pid']}"
    rounds = durable()._adoption.rounds
    assert durable().wait_for_adoption(rounds + 1, timeout_s=15.0)
    assert sorted(path.name for path in root.iterdir()) == ["svc"]


# -- 8. health ------------------------------------------------------------------------------------


@pytest.mark.integration
def test_health_reports_the_spool_and_the_shipping(loki: LokiServer, tmp_path: Path) -> None:
    assert agent_logging.health() == {"configured": False}
    loki.go_down()
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests.health")
    log.info("one")
    log.info("two")
    down = agent_logging.health()
    assert {key: down[key] for key in ("spool_records", "sent", "dropped", "dead_lettered")} == {
        "spool_records": 2,
        "sent": 0,
        "dropped": 0,
        "dead_lettered": 0,
    }
    assert down["spool_bytes"] > 0
    assert down["oldest_unsent_age_s"] >= 0.0

    loki.come_up()
    assert durable().flush(timeout_s=15.0)
    up = agent_logging.health()
    assert {key: up[key] for key in ("spool_records", "spool_bytes", "sent")} == {
        "spool_records": 0,
        "spool_bytes": 0,
        "sent": 2,
    }
    assert up["oldest_unsent_age_s"] == 0.0


@pytest.mark.integration
def test_shipping_health_is_logged_periodically(loki: LokiServer, tmp_path: Path) -> None:
    configure(loki.url, tmp_path / "spool", health_interval_s=0.1)
    agent_logging.get_logger("tests.health").info("some work")

    def shows_a_sent_record(record: dict[str, Any]) -> bool:
        return bool(record["event"] == "shipping health" and record["sent"] >= 1)

    record = wait_for_record(loki, shows_a_sent_record, timeout_s=15.0)
    assert record is not None
    assert record["logger"] == "agent_logging.health"
    assert record["level"] == "info"
    assert all(key in record for key in HEALTH_KEYS)
    assert all(isinstance(record[key], int) for key in HEALTH_KEYS if key != "oldest_unsent_age_s")
    agent_logging.shutdown(timeout_s=5.0)  # its last health record ships before Loki stops


def test_durable_configuration_creates_the_service_spool(tmp_path: Path) -> None:
    # No server needed: nothing is logged, so nothing is pushed.
    configure("http://127.0.0.1:9", tmp_path / "spool", "my svc/1")
    assert durable().spool.directory == tmp_path / "spool" / "my_svc_1"
    assert list(read_all(durable().spool.directory)) == []
