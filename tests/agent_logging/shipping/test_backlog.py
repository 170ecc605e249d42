"""A backlog against Loki's limits: time shards, bodies too large, the tenant's rate limit,
and a Loki refusing every entry; against the Loki test server (the real Loki's side is in
``tests/test_real_loki_backlog.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import agent_logging
from agent_logging.loki._client import LokiClient
from agent_logging.loki._entries import PushEntry
from agent_logging.loki._time_shards import TIME_SHARD_LABEL, shard_label_value, time_sharded
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._spool import Spool
from tests.lokisim import Limits, LokiServer

LABELS = {"service_name": "svc", "layer": "api", "env": "test"}
HOUR_NS = 3600 * 10**9
WEEK_NS = 7 * 24 * HOUR_NS


def record(index: int, **extra: object) -> bytes:
    return orjson.dumps(
        {"level": "info", "event": f"event {index}", "service": "svc", "layer": "api", **extra}
    )


def spooled(spool: Spool, stamps: list[int], **extra: object) -> list[str]:
    lines = []
    for i, ts_ns in enumerate(stamps):
        data = record(i, **extra)
        spool.append(ts_ns, data)
        lines.append(data.decode())
    return lines


def shipper(spool: Spool, client: LokiClient, tmp_path: Path, **options: Any) -> Shipper:
    return Shipper(
        spool,
        client,
        dead_letter_path=tmp_path / "dl.jsonl",
        default_labels=LABELS,
        backoff_initial_s=0.05,
        backoff_max_s=0.5,
        **options,
    )


def pushes(server: LokiServer) -> list[tuple[int, int]]:
    return [(r.status, r.entries_in_body) for r in server.requests if r.method == "POST"]


@pytest.fixture
def spool(tmp_path: Path) -> Any:
    opened = Spool.open(tmp_path / "spool")
    yield opened
    opened.close()


def test_the_time_shard_of_an_entry_is_lokis() -> None:
    # Captured from the real Loki 3.7.6 of ../shared with limits_config.shard_streams.
    # time_sharding_enabled: true, pushed an entry at this timestamp two hours old: it
    # stored it under __time_shard__="1795917600_1795921200".
    assert shard_label_value(1_795_919_826_876_167_018) == "1795917600_1795921200"


def test_only_entries_older_than_40_minutes_get_a_time_shard() -> None:
    now = 1_795_927_026_876_167_018
    labels = (("env", "x"), ("service_name", "svc"))
    recent = PushEntry(labels, now - 39 * 60 * 10**9, "recent")
    old = PushEntry(labels, now - 2 * HOUR_NS, "old")

    assert time_sharded([recent], now_ns=now) == [recent]
    assert time_sharded([recent, old], now_ns=now) == [
        recent,
        old._replace(
            labels=(
                (TIME_SHARD_LABEL, "1795917600_1795921200"),
                ("env", "x"),
                ("service_name", "svc"),
            )
        ),
    ]


@pytest.mark.integration
def test_a_backlog_behind_a_live_stream_goes_to_its_time_shards(
    loki: LokiServer, spool: Spool, tmp_path: Path
) -> None:
    now = time.time_ns()
    with LokiClient(loki.url) as client:
        live = shipper(spool, client, tmp_path)
        spooled(spool, [now])  # the stream's newest entry: the present
        assert live.ship_pending(10.0)
        stamps = [now - 2 * HOUR_NS + i * 10**9 for i in range(100)]
        stamps += [now - 5 * 10**9 + i for i in range(10)]
        lines = spooled(spool, stamps)

        assert live.ship_pending(10.0)

    assert live.stats()["dead_lettered"] == 0
    assert not (tmp_path / "dl.jsonl").exists()
    stored = {e.line: e for e in loki.entries()}
    assert set(lines) <= set(stored)
    for line, ts_ns in zip(lines, stamps, strict=True):
        shard = stored[line].labels.get(TIME_SHARD_LABEL)
        assert shard == (shard_label_value(ts_ns) if ts_ns < now - HOUR_NS else None)


@pytest.mark.integration
def test_a_push_over_grpcs_message_limit_is_halved_not_retried_for_ever(
    spool: Spool, tmp_path: Path
) -> None:
    # Loki answers 500 to a push over gRPC's 4 MiB (here 64 KiB, to keep the test small).
    limits = Limits(grpc_max_message_bytes=64 * 1024)
    now = time.time_ns()
    lines = spooled(spool, [now + i for i in range(200)], pad="x" * 1000)
    with LokiServer(limits=limits) as server, LokiClient(server.url) as client:
        ship = shipper(spool, client, tmp_path, max_batch_bytes=1 << 20)

        assert ship.ship_pending(20.0)

        # 200 -> 500, halved: 100 -> 500, halved again (and later pushes kept below it):
        # 50 + 50 stored; the other 100 of the first split the same.
        first_half = [(500, 100), (204, 50), (204, 50)]
        assert pushes(server) == [(500, 200), *first_half, *first_half]
        assert sorted(e.line for e in server.entries()) == sorted(lines)
    assert ship.stats()["dead_lettered"] == 0


@pytest.mark.integration
def test_a_push_larger_than_the_tenants_rate_is_halved(spool: Spool, tmp_path: Path) -> None:
    # A tenant limit of 0.25 MiB/s with as much burst: a 0.5 MiB push can never pass (429
    # for ever, before); halves of it pass, at the rate.
    limits = Limits(ingestion_rate_mb=0.25, ingestion_burst_size_mb=0.25)
    now = time.time_ns()
    lines = spooled(spool, [now + i for i in range(500)], pad="x" * 1000)
    errors: list[str] = []
    with LokiServer(limits=limits) as server, LokiClient(server.url) as client:
        ship = shipper(spool, client, tmp_path, max_batch_bytes=4 << 20, on_error=errors.append)

        assert ship.ship_pending(30.0)

        seen = pushes(server)
        assert seen[0] == (429, 500)
        assert sorted(e.line for e in server.entries()) == sorted(lines)
    stats = ship.stats()
    assert stats["dead_lettered"] == 0
    # Halved until a push fits in the rate; then throttled (429s between successes), which
    # is said once, however many 429s come between the pushes that pass.
    throttled = [m for m in errors if m.startswith("shipping at the rate Loki's tenant limit")]
    assert len(throttled) == 1
    assert [status for status, _ in seen].count(429) > 2


# -- a Loki that refuses every entry -----------------------------------------------------------


@pytest.mark.integration
def test_a_loki_refusing_every_entry_dead_letters_each_batch_at_once(
    loki: LokiServer, spool: Spool, tmp_path: Path
) -> None:
    old = time.time_ns() - WEEK_NS - 24 * HOUR_NS
    lines = spooled(spool, [old + i * 10**6 for i in range(5000)])
    with LokiClient(loki.url) as client:
        ship = shipper(spool, client, tmp_path, max_batch_records=1000)

        assert ship.ship_pending(20.0)

    # One push per batch, refused whole ("1000 errors like: ... too old"): no split, and no
    # query (nothing of it was stored, so nothing is in doubt).
    assert pushes(loki) == [(400, 1000)] * 5
    assert not [r for r in loki.requests if r.method == "GET"]
    letters = [orjson.loads(line) for line in (tmp_path / "dl.jsonl").read_bytes().splitlines()]
    assert [letter["line"] for letter in letters] == lines
    assert all("has timestamp too old" in letter["reason"] for letter in letters)
    assert ship.stats()["dead_lettered"] == 5000
    assert spool.stats().records == 0


@pytest.mark.integration
def test_entries_refused_for_two_reasons_are_split_by_reason(
    loki: LokiServer, spool: Spool, tmp_path: Path
) -> None:
    now = time.time_ns()
    old = now - WEEK_NS - 24 * HOUR_NS
    too_old = spooled(spool, [old, old + 1])
    too_long = [record(9, pad="x" * (300 * 1024)), record(10, pad="y" * (300 * 1024))]
    for i, data in enumerate(too_long):
        spool.append(now + i, data)
    with LokiClient(loki.url) as client:
        ship = shipper(spool, client, tmp_path)

        assert ship.ship_pending(20.0)

    # All four refused, for two reasons: halves, each refused whole for one reason.
    assert pushes(loki) == [(400, 4), (400, 2), (400, 2)]
    letters = [orjson.loads(line) for line in (tmp_path / "dl.jsonl").read_bytes().splitlines()]
    assert [letter["line"] for letter in letters] == too_old + [d.decode() for d in too_long]
    assert ["too old" in letter["reason"] for letter in letters] == [True, True, False, False]
    assert ship.stats()["dead_lettered"] == 4


@pytest.mark.integration
def test_shutdown_does_not_wait_its_deadline_when_loki_refuses_everything(
    tmp_path: Path,
) -> None:
    # Every line is over max_line_size: each batch is refused whole, and dead-lettered.
    with LokiServer(limits=Limits(max_line_size=10)) as server:
        agent_logging.configure(
            service="svc",
            layer="api",
            env="test",
            output="none",
            loki_url=server.url,
            spool_dir=tmp_path / "spool",
        )
        log = agent_logging.get_logger("t")
        for i in range(3000):
            log.info("refused", i=i)
        began = time.monotonic()
        agent_logging.shutdown(timeout_s=20.0)
        took_s = time.monotonic() - began

        posts = [r for r in server.requests if r.method == "POST"]
    letters = list((tmp_path / "spool").rglob("dead-letter.ndjson"))
    assert sum(len(path.read_bytes().splitlines()) for path in letters) == 3000
    assert len(posts) < 10
    assert took_s < 5.0
