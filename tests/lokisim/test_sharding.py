"""Rate-based stream sharding, the ingestion rate limit and the gRPC size limits, on a clock.

These drive the store directly with a clock the test moves (``Limits.clock``), so every shard
count and refusal is exact; ``test_parity.py`` shows the same behaviour against a real Loki,
in real time.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.lokisim import LokiServer
from tests.lokisim._limits import Limits
from tests.lokisim._proto import PushEntry, PushStream
from tests.lokisim._store import PushResult, Store

NOW = 1_700_000_000_000_000_000
S = 1_000_000_000
MIB = 1 << 20
LABELS = '{service_name="fast"}'


class Clock:
    """Monotonic seconds that only move when told."""

    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> float:
        return self.s


def make_store(clock: Clock, **overrides: object) -> Store:
    return Store(Limits(**{"now": lambda: NOW, "clock": clock, **overrides}))  # type: ignore[arg-type]


def push(
    store: Store, first: int, count: int, size: int = 1000, labels: str = LABELS
) -> PushResult:
    entries = tuple(
        PushEntry(NOW + first + i, f"{first + i:08d}" + "x" * (size - 8)) for i in range(count)
    )
    return store.push("fake", [PushStream(labels, entries)])


def shards_of(store: Store) -> dict[str, list[int]]:
    """Entry numbers by shard label (``-`` for the unsharded stream)."""
    found: dict[str, list[int]] = {}
    for entry in store.entries("fake"):
        found.setdefault(entry.labels.get("__stream_shard__", "-"), []).append(int(entry.line[:8]))
    return found


def test_the_first_second_is_never_sharded_then_the_rate_decides() -> None:
    clock = Clock()
    store = make_store(clock)
    assert push(store, 0, 1600).status == 204  # 1.6 MB in the stream's first second
    assert shards_of(store) == {"-": list(range(1600))}
    clock.s += 1.0  # the distributor learns the rate: 1,600,000 bytes/s, one push a second
    assert store.rates.rate(("fake", LABELS)) == 1_600_000
    # (1,600,000 + 200,000) / 1,572,864 -> 2 shards; entries dealt round robin.
    assert push(store, 1600, 200, size=1000).status == 204
    found = shards_of(store)
    assert found["0"] == list(range(1600, 1800, 2))
    assert found["1"] == list(range(1601, 1800, 2))


def test_shards_rotate_per_push_and_a_push_never_has_more_shards_than_entries() -> None:
    clock = Clock()
    store = make_store(clock)
    push(store, 0, 4000)  # 4 MB: the rate known next second makes 3 shards
    clock.s += 1.0
    assert push(store, 4000, 2).status == 204  # 2 entries: shards 0 and 1 (start 0)
    assert push(store, 4002, 1).status == 204  # 1 entry: shard 2 (start 2)
    assert push(store, 4003, 3).status == 204  # start 3: shards 0, 1, 2
    found = shards_of(store)
    assert (found["0"], found["1"], found["2"]) == ([4000, 4003], [4001, 4004], [4002, 4005])


def test_a_resent_batch_lands_in_another_shard_once_the_rate_has_decayed() -> None:
    clock = Clock()
    store = make_store(clock)
    push(store, 0, 3000)
    clock.s += 1.0
    assert push(store, 3000, 100).status == 204  # sharded: the first copies
    again = push(store, 3000, 100)  # resent at once: same shards, de-duplicated
    assert again.status == 204
    assert store.count("fake") == 3100
    clock.s += 6.0  # quiet: 3 MB/s decays to 0.6**6 of it, below the desired rate
    assert push(store, 3000, 100).status == 204  # now unsharded: stored again
    assert store.count("fake") == 3200
    assert sorted(shards_of(store)["-"]) == list(range(3000)) + list(range(3000, 3100))


def test_a_stream_forgotten_after_ten_quiet_minutes_starts_unsharded() -> None:
    clock = Clock()
    store = make_store(clock)
    push(store, 0, 3000)
    clock.s += 601.0
    assert store.rates.rate(("fake", LABELS)) == 0
    push(store, 3000, 3000)  # first push again: "don't shard until the rate is understood"
    assert set(shards_of(store)) == {"-"}


def test_sharding_off_or_a_desired_rate_of_zero_never_shards() -> None:
    for overrides in ({"shard_streams_enabled": False}, {"shard_streams_desired_rate": 0}):
        clock = Clock()
        store = make_store(clock, **overrides)
        push(store, 0, 3000)
        clock.s += 1.0
        push(store, 3000, 3000)
        assert set(shards_of(store)) == {"-"}


def test_the_ingestion_rate_limit_is_a_token_bucket_of_the_valid_entries() -> None:
    clock = Clock()
    store = make_store(clock, shard_streams_enabled=False)
    assert push(store, 0, 3000).status == 204  # 3 MB of the 6 MiB burst
    refused = push(store, 3000, 3500)  # 3.5 MB: more than the 3.29 MB left
    assert refused == PushResult(
        429,
        "ingestion rate limit exceeded for user fake (limit: 4194304 bytes/sec) while attempting "
        "to ingest '3500' lines totaling '3500000' bytes, reduce log volume or contact your Loki "
        "administrator to see if the limit can be increased",
    )
    assert store.count("fake") == 3000  # refused whole
    clock.s += 0.1  # +419,430 bytes: 3,710,886 left
    assert push(store, 3000, 3500).status == 204
    assert push(store, 6500, 210).status == 204  # 210,000 of the 210,886 left
    assert push(store, 6710, 1).status == 429
    clock.s += 10.0  # full again, never more than the burst
    assert push(store, 10_000, 3800).status == 204
    assert push(store, 20_000, 2500).status == 429


def test_a_push_over_the_burst_is_refused_whatever_the_wait() -> None:
    clock = Clock()
    store = make_store(clock, shard_streams_enabled=False, ingestion_burst_size_mb=1.0)
    clock.s += 3600.0
    assert push(store, 0, 1049).status == 429  # 1,049,000 > 1 MiB
    assert push(store, 0, 1048).status == 204


def test_a_push_over_grpc_s_limit_takes_tokens_and_stores_nothing() -> None:
    clock = Clock()
    store = make_store(clock, shard_streams_enabled=False, grpc_max_message_bytes=100_000)
    result = push(store, 0, 100)  # 100 * (1000 + 20 + detected_level) > 100,000
    assert result.status == 500
    assert result.message.startswith(
        "rpc error: code = ResourceExhausted desc = grpc: received message larger than max ("
    )
    assert result.message.endswith(" vs. 100000)")
    assert store.count("fake") == 0


def test_entries_older_than_3_hours_show_once_their_stream_is_idle_for_30_minutes() -> None:
    now = [NOW]
    store = Store(Limits(now=lambda: now[0]))
    old = PushEntry(NOW - 4 * 3600 * S, "old")
    assert store.push("fake", [PushStream(LABELS, (old,))]).status == 204
    from tests.lokisim._logql import parse_query

    query = parse_query(LABELS)
    assert store.select("fake", query, NOW - 5 * 3600 * S, NOW + 1) == []
    now[0] += 1801 * S  # no entry for 30 minutes: its chunk is flushed, the store answers
    assert [hit.entry.line for hit in store.select("fake", query, 0, now[0])] == ["old"]


@pytest.mark.integration
def test_a_query_answer_over_grpc_s_limit_is_a_504(
    make_loki: Callable[..., LokiServer], http: httpx.Client
) -> None:
    loki = make_loki(grpc_max_message_bytes=10_000)
    for first in range(0, 20, 5):  # in pushes small enough for the limit
        values = [[str(NOW - 10 * S + first + i), "y" * 1000] for i in range(5)]
        response = http.post(
            f"{loki.url}/loki/api/v1/push",
            json={"streams": [{"stream": {"service_name": "big"}, "values": values}]},
        )
        assert response.status_code == 204
    params = {"query": '{service_name="big"}', "start": str(NOW - 60 * S), "end": str(NOW)}
    small = http.get(f"{loki.url}/loki/api/v1/query_range", params={**params, "limit": "5"})
    assert small.status_code == 200
    large = http.get(f"{loki.url}/loki/api/v1/query_range", params={**params, "limit": "20"})
    assert large.status_code == 504
    assert large.text == (
        "request timed out, decrease the duration of the request or add more label matchers "
        "(prefer exact match over regex match) to reduce the amount of data processed"
    )
