"""A node's backlog after an outage, compressed, into the real Loki at ``$LOKI_URL``.

Stock limits (``../shared/loki/loki.yaml``): the tenant takes 4 MB/s with a 6 MB burst and
answers 429 beyond; an ingester refuses an entry more than an hour behind the newest of its
stream ("entry too far behind"). The backlog here is 24 MB of records stamped over the last
2.5 hours (the outage, compressed: a real one is longer and larger, the limits are the same),
so it drains through the rate limit for about six seconds, and most of it is more than an
hour older than the live records its stream receives meanwhile. Nothing may be dead-lettered,
and every record must be visible once. The oldest record stays younger than Loki's
``query_ingesters_within`` (3 h), so that the check can see it (``docs/library.md``).

How the live records get ahead of the backlog, as on a node: another writer of the stream
(a replica, or the service's live spool while an orphan spool of it is adopted) ships the
present while the backlog drains. Both paths are tested: ``agent-logging drain`` and the
in-process shipper adopting an orphan spool.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

import agent_logging
from agent_logging.loki._client import LokiClient
from agent_logging.spool._spool import Spool
from tests.lokisim.fixtures import LOKI_TENANT_ENV, VISIBILITY_TIMEOUT_S

TENANT = os.environ.get(LOKI_TENANT_ENV) or None

pytestmark = pytest.mark.integration

#: 40,000 records of about 600 bytes: 24 MB, six seconds of a stock tenant's rate.
RECORDS = 40_000
PAD = "x" * 480
#: The backlog spans from 2.5 h ago to 5 min ago (older than an hour: behind the live stream).
SPAN_NS = int(2.5 * 3600e9)
END_AGO_NS = int(300e9)


def _record(service: str, index: int, ts_ns: int) -> bytes:
    stamp = datetime.fromtimestamp(ts_ns // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return orjson.dumps(
        {
            "ts": f"{stamp}.{ts_ns % 10**9:09d}Z",
            "level": "info",
            "event": "backlog",
            "service": service,
            "layer": "api",
            "env": "it",
            "i": index,
            "pad": PAD,
        }
    )


def _spool_backlog(directory: Path, service: str) -> int:
    """Fill a spool with the backlog, oldest first; returns its start (ns)."""
    start_ns = time.time_ns() - SPAN_NS
    step = (SPAN_NS - END_AGO_NS) // RECORDS
    spool = Spool.open(directory)
    try:
        for i in range(RECORDS):
            ts_ns = start_ns + i * step
            spool.append(ts_ns, _record(service, i, ts_ns))
    finally:
        spool.close()
    return start_ns


def _push_live(url: str, service: str) -> None:
    """One record of the present into the backlog's stream, as its live writer ships it."""
    with LokiClient(url, tenant=TENANT) as client:
        now = time.time_ns()
        result = client.push_records(
            [_Record(now, _record(service, -1, now))],
            node_id_label=False,
            default_labels={},
        )
    assert result.outcome == "ok", result.reason


class _Record:
    def __init__(self, ts_ns: int, payload: bytes) -> None:
        self.ts_ns = ts_ns
        self.payload = payload


def _visible(url: str, service: str, start_ns: int, expected: int) -> list[int]:
    """The ``i`` of every entry of the service's stream, once each, when ``expected`` are
    visible or the visibility timeout passed."""
    pause = threading.Event()
    deadline = time.monotonic() + VISIBILITY_TIMEOUT_S
    with LokiClient(url, tenant=TENANT) as client:
        while True:
            seen = [
                orjson.loads(entry.line)["i"]
                for entry in client.iter_query_range(
                    f'{{service_name="{service}"}}', start_ns=start_ns, end_ns=time.time_ns() + 1
                )
            ]
            if len(seen) >= expected or time.monotonic() > deadline:
                return seen
            pause.wait(0.5)


def test_drain_ships_a_backlog_behind_a_live_stream_at_the_rate_limit(
    real_loki: str, tmp_path: Path
) -> None:
    service = f"backlog-{uuid.uuid4().hex[:10]}"
    spool_dir = tmp_path / "spool"
    start_ns = _spool_backlog(spool_dir / service, service)
    _push_live(real_loki, service)
    began = time.monotonic()

    drained = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_logging._cli",
            "drain",
            "--spool-dir",
            str(spool_dir),
            "--loki-url",
            real_loki,
            "--timeout-s",
            "240",
            *(["--tenant", TENANT] if TENANT else []),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    took_s = time.monotonic() - began

    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert f"all {RECORDS} spooled records" in drained.stdout
    assert not list(spool_dir.rglob("dead-letter*"))
    seen = _visible(real_loki, service, start_ns, RECORDS + 1)
    assert sorted(seen) == [-1, *range(RECORDS)]
    # 24 MB at 4 MB/s: no faster than the limit allows, and not stalled by long backoffs.
    assert 3.0 < took_s < 120.0


def test_an_orphan_backlog_is_adopted_while_the_service_logs_live(
    real_loki: str, tmp_path: Path
) -> None:
    service = f"orphan-{uuid.uuid4().hex[:10]}"
    spool_dir = tmp_path / "spool"
    orphan = spool_dir / f"{service}.4242"  # a crashed worker's spool, under its pid
    start_ns = _spool_backlog(orphan, service)
    agent_logging.configure(
        service=service,
        layer="api",
        env="it",
        output="none",
        loki_url=real_loki,
        loki_tenant=TENANT,
        spool_dir=spool_dir,
        batch_interval_s=0.2,
    )
    log = agent_logging.get_logger("it")
    live = 0
    pause = threading.Event()
    deadline = time.monotonic() + 180.0
    try:
        # Live records ship beside the adoption, keeping the stream at the present.
        while orphan.exists() and time.monotonic() < deadline:
            log.info("live", i=-1 - live)
            live += 1
            pause.wait(0.05)
        health = agent_logging.health()
    finally:
        agent_logging.shutdown(timeout_s=30.0)

    assert not orphan.exists(), "the orphan spool was not shipped (or kept dead letters)"
    assert health["dead_lettered"] == 0
    assert not list(spool_dir.rglob("dead-letter*"))
    seen = _visible(real_loki, service, start_ns, RECORDS + live)
    assert sorted(seen) == [*range(-live, 0), *range(RECORDS)]


def test_drain_dead_letters_a_week_old_backlog_by_the_batch(real_loki: str, tmp_path: Path) -> None:
    # Loki refuses every entry older than reject_old_samples_max_age (a week) in any stream:
    # before, each of them was split out alone (about 9 a second); now each batch refused
    # whole for that one reason is dead-lettered at once.
    service = f"refused-{uuid.uuid4().hex[:10]}"
    spool_dir = tmp_path / "spool"
    old_ns = time.time_ns() - 8 * 24 * 3600 * 10**9
    spool = Spool.open(spool_dir / service)
    try:
        for i in range(20_000):
            spool.append(old_ns + i * 10**6, _record(service, i, old_ns + i * 10**6))
    finally:
        spool.close()
    began = time.monotonic()

    drained = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_logging._cli",
            "drain",
            "--spool-dir",
            str(spool_dir),
            "--loki-url",
            real_loki,
            "--timeout-s",
            "120",
            *(["--tenant", TENANT] if TENANT else []),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    took_s = time.monotonic() - began

    assert drained.returncode == 1
    assert "20000 were refused by Loki" in drained.stderr
    (letters,) = spool_dir.rglob("dead-letter.ndjson")
    documents = [orjson.loads(line) for line in letters.read_bytes().splitlines()]
    assert sorted(orjson.loads(d["line"])["i"] for d in documents) == list(range(20_000))
    assert all("has timestamp too old" in d["reason"] for d in documents)
    assert took_s < 60.0
