"""The test server and a real Loki, side by side: the same assertions against both.

Every test runs against the test server, and again against the real Loki at ``LOKI_URL`` when
that is set (``scripts/test.sh`` starts one; ``../shared/loki/start-loki`` by hand), with Loki's
stock limits (``../shared/loki/loki.yaml``). They cover what agent_logging depends on: how
structured metadata comes back, ``query_range``'s window, ``limit`` and ``direction``,
de-duplication, the ingestion rate limit, the line size limit, "too far behind", entries older
than ``query_ingesters_within`` and rate-based stream sharding, with the duplicate it causes.

Each test uses label values of its own (a uuid), so a Loki holding other data, or earlier runs,
cannot confuse it. A test that takes the tenant's rate budget waits for it to refill, so that
the next test's pushes are not refused.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from tests.lokisim import LokiServer
from tests.lokisim._labels import stream_hash
from tests.lokisim.fixtures import LOKI_TENANT_ENV, VISIBILITY_TIMEOUT_S
from tests.real_parts import real_loki_url

pytestmark = pytest.mark.integration

S = 1_000_000_000
MIB = 1 << 20
_RATE_BYTES_PER_S = 4 * MIB  # the stock ingestion rate limit both run with


class Target:
    """A Loki to test: the test server or the real one, over HTTP only."""

    def __init__(self, name: str, url: str, tenant: str | None) -> None:
        self.name = name
        self.url = url.rstrip("/")
        headers = {"X-Scope-OrgID": tenant} if tenant else {}
        #: The tenant as Loki names it in messages ("fake" without multi-tenancy).
        self.tenant = tenant or "fake"
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=60.0)
        self.run = uuid.uuid4().hex[:12]
        self._pause = threading.Event()  # never set: timed waits

    def service(self, name: str) -> str:
        return f"{name}-{self.run}"

    def push(self, streams: list[dict[str, Any]]) -> httpx.Response:
        return self.http.post("/loki/api/v1/push", json={"streams": streams})

    def query(
        self,
        query: str,
        start_ns: int,
        end_ns: int,
        headers: Mapping[str, str] | None = None,
        **params: str,
    ) -> httpx.Response:
        return self.http.get(
            "/loki/api/v1/query_range",
            params={"query": query, "start": str(start_ns), "end": str(end_ns), **params},
            headers=headers or {},
        )

    def values(self, query: str, start_ns: int, end_ns: int, **params: str) -> list[list[Any]]:
        response = self.query(query, start_ns, end_ns, None, **params)
        assert response.status_code == 200, response.text
        return [v for stream in response.json()["data"]["result"] for v in stream["values"]]

    def wait_count(self, query: str, start_ns: int, end_ns: int, count: int) -> int:
        """Poll until the query finds ``count`` entries (or the visibility timeout): how many."""
        deadline = time.monotonic() + VISIBILITY_TIMEOUT_S
        while True:
            found = len(self.values(query, start_ns, end_ns, limit="5000", direction="forward"))
            if found >= count or time.monotonic() > deadline:
                return found
            self.sleep(0.2)

    def sleep(self, seconds: float) -> None:
        self._pause.wait(seconds)

    def refill(self, spent_bytes: int) -> None:
        """Wait until the tenant's rate budget is back after ``spent_bytes`` were taken."""
        self.sleep(spent_bytes / _RATE_BYTES_PER_S + 0.2)


@pytest.fixture(params=["test server", "real Loki"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """The test server, then the real Loki at ``LOKI_URL`` (skipped when that is not set)."""
    if request.param == "real Loki":
        # Skips without LOKI_URL; in CI (CI=true), fails: scripts/test.sh starts one.
        url = real_loki_url()
        loki = Target("real Loki", url, os.environ.get(LOKI_TENANT_ENV) or None)
        try:
            yield loki
        finally:
            loki.http.close()
        return
    with LokiServer() as server:
        loki = Target("test server", server.url, None)
        try:
            yield loki
        finally:
            loki.http.close()


def _entry(ts_ns: int, line: str, metadata: dict[str, str] | None = None) -> list[Any]:
    return [str(ts_ns), line, metadata] if metadata else [str(ts_ns), line]


def test_structured_metadata_is_merged_into_stream_labels_unless_categorized(
    target: Target,
) -> None:
    service = target.service("sm")
    now = time.time_ns()
    values = [
        _entry(now, "one", {"trace_id": "t1", "level": "info"}),
        _entry(now + 1, "two", {"trace_id": "t2"}),
    ]
    assert (
        target.push(
            [{"stream": {"service_name": service, "env": "e"}, "values": values}]
        ).status_code
        == 204
    )
    query = f'{{service_name="{service}"}}'
    assert target.wait_count(query, now, now + 2, 2) == 2

    merged = target.query(query, now, now + 2, direction="forward").json()["data"]
    assert "encodingFlags" not in merged
    assert sorted(
        ((s["stream"], [v[1] for v in s["values"]]) for s in merged["result"]), key=str
    ) == sorted(
        [
            (
                {
                    "service_name": service,
                    "env": "e",
                    "trace_id": "t1",
                    "level": "info",
                    "detected_level": "info",
                },
                ["one"],
            ),
            (
                {
                    "service_name": service,
                    "env": "e",
                    "trace_id": "t2",
                    "detected_level": "unknown",
                },
                ["two"],
            ),
        ],
        key=str,
    )

    flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
    apart = target.query(query, now, now + 2, headers=flags, direction="forward").json()["data"]
    assert apart["encodingFlags"] == ["categorize-labels"]
    assert apart["result"] == [
        {
            "stream": {"env": "e", "service_name": service},
            "values": [
                [
                    str(now),
                    "one",
                    {
                        "structuredMetadata": {
                            "detected_level": "info",
                            "level": "info",
                            "trace_id": "t1",
                        }
                    },
                ],
                [
                    str(now + 1),
                    "two",
                    {"structuredMetadata": {"detected_level": "unknown", "trace_id": "t2"}},
                ],
            ],
        }
    ]


def test_query_range_window_limit_and_direction(target: Target) -> None:
    service = target.service("page")
    now = time.time_ns()
    streams = [
        {
            "stream": {"service_name": service, "x": name},
            "values": [
                _entry(now, f"{name}-tie"),
                _entry(now + 5, f"{name}-later"),
                _entry(now, f"{name}-tie2"),
            ],
        }
        for name in ("b", "a", "c", "d")
    ]
    assert target.push(streams).status_code == 204
    query = f'{{service_name="{service}"}}'
    assert target.wait_count(query, now, now + 6, 12) == 12

    def lines(**params: str) -> list[str]:
        start, end = int(params.pop("start", now)), int(params.pop("end", now + 6))
        return [v[1] for v in sorted_values(target.query(query, start, end, None, **params))]

    # [start, end): the end is exclusive, the start inclusive.
    assert sorted(lines(end=str(now + 5), limit="100")) == sorted(
        f"{n}-{k}" for n in "abcd" for k in ("tie", "tie2")
    )
    assert sorted(lines(start=str(now + 5), limit="100")) == [f"{n}-later" for n in "abcd"]
    # Defaults: backward, 100 entries.
    assert len(lines()) == 12
    assert set(lines(limit="4")) == {f"{n}-later" for n in "abcd"}
    # A limit that cuts ties across streams: which stream's entries come first is Loki's
    # order of stream hashes (Prometheus' labels.Hash), in both directions; within a stream,
    # push order (reversed, backward). Streams come back sorted by their labels.
    by_hash = sorted("abcd", key=lambda x: stream_hash({"service_name": service, "x": x}))
    forward = target.query(query, now, now + 6, limit="4", direction="forward")
    assert shown(forward) == sorted((x, [f"{x}-tie", f"{x}-tie2"]) for x in by_hash[:2])
    backward = target.query(query, now, now + 6, limit="6", direction="backward")
    first = by_hash[0]
    assert shown(backward) == sorted(
        (x, [f"{x}-later", f"{x}-tie2", f"{x}-tie"] if x == first else [f"{x}-later"])
        for x in "abcd"
    )


def shown(response: httpx.Response) -> list[tuple[str, list[str]]]:
    assert response.status_code == 200, response.text
    return [
        (s["stream"]["x"], [v[1] for v in s["values"]]) for s in response.json()["data"]["result"]
    ]


def sorted_values(response: httpx.Response) -> list[list[Any]]:
    assert response.status_code == 200, response.text
    return sorted(
        (v for stream in response.json()["data"]["result"] for v in stream["values"]),
        key=lambda v: (int(v[0]), v[1]),
    )


def test_same_stream_timestamp_line_and_metadata_is_one_entry(target: Target) -> None:
    service = target.service("dedup")
    now = time.time_ns()
    stream = {"service_name": service}
    first = [_entry(now, "same", {"trace_id": "t"}), _entry(now + 1, "next")]
    assert target.push([{"stream": stream, "values": first}]).status_code == 204
    again = [
        _entry(now, "same", {"trace_id": "t"}),  # identical: dropped
        _entry(now, "same", {"trace_id": "other"}),  # other metadata: kept
        _entry(now, "different line"),  # other line: kept
    ]
    assert target.push([{"stream": stream, "values": again}]).status_code == 204
    query = f'{{service_name="{service}"}}'
    assert target.wait_count(query, now, now + 2, 4) == 4
    flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
    found = sorted_values(target.query(query, now, now + 2, headers=flags, limit="100"))
    metadata = [(v[1], v[2].get("structuredMetadata", {}).get("trace_id", "")) for v in found]
    assert sorted(metadata) == [
        ("different line", ""),
        ("next", ""),
        ("same", "other"),
        ("same", "t"),
    ]


def test_a_push_over_the_burst_is_refused_whole_with_429(target: Target) -> None:
    service = target.service("burst")
    now = time.time_ns()
    line = "z" * 1000
    entries = [_entry(now + i, f"{i:05d} {line}") for i in range(7000)]  # 7 MB > the 6 MiB burst
    response = target.push([{"stream": {"service_name": service}, "values": entries}])
    assert response.status_code == 429
    total = sum(len(e[1]) for e in entries)
    tenant = target.tenant
    assert response.text == (
        f"ingestion rate limit exceeded for user {tenant} (limit: 4194304 bytes/sec) while "
        f"attempting to ingest '7000' lines totaling '{total}' bytes, reduce log volume or "
        "contact your Loki administrator to see if the limit can be increased\n"
    )
    # A refused push takes no tokens: 3 MB right after it pass.
    small = entries[:3000]
    assert target.push([{"stream": {"service_name": service}, "values": small}]).status_code == 204
    target.refill(sum(len(e[1]) for e in small))


def test_the_budget_refills_at_4_mib_per_second(target: Target) -> None:
    service = target.service("budget")
    now = time.time_ns()
    line = "q" * 1000

    def push(first: int, count: int) -> int:
        values = [_entry(now + first + i, f"{first + i:07d} {line}") for i in range(count)]
        return target.push([{"stream": {"service_name": service}, "values": values}]).status_code

    # 3.5 MB of the 6 MiB burst, then 3.9 MB at once: more than is left, and it is refused
    # whole; a moment later it passes. (A push must stay under gRPC's 4 MiB: one more entry
    # of this size is answered 500 "received message larger than max".)
    assert push(0, 3500) == 204
    assert push(3500, 3900) == 429
    target.refill(3500 * 1008)
    assert push(3500, 3900) == 204
    target.refill(3900 * 1008)


def test_a_push_over_grpc_s_4_mib_is_a_500(target: Target) -> None:
    service = target.service("huge")
    now = time.time_ns()
    line = "h" * 1000
    values = [_entry(now + i, f"{i:07d} {line}") for i in range(4200)]
    response = target.push([{"stream": {"service_name": service}, "values": values}])
    assert response.status_code == 500
    assert response.text.startswith(
        "rpc error: code = ResourceExhausted desc = grpc: received message larger than max ("
    )
    assert response.text.endswith(" vs. 4194304)\n")
    assert target.values(f'{{service_name="{service}"}}', now, now + 5000, limit="10") == []
    target.refill(4200 * 1008)  # the rate limiter took it before the ingester refused it


def test_a_line_over_256_kb_is_refused_with_loki_s_message(target: Target) -> None:
    service = target.service("long")
    now = time.time_ns()
    response = target.push(
        [
            {
                "stream": {"service_name": service},
                "values": [_entry(now, "y" * (256 * 1024 + 1)), _entry(now + 1, "short")],
            }
        ]
    )
    assert response.status_code == 400
    assert response.text == (
        f"max entry size '262144' bytes exceeded for stream '{{service_name=\"{service}\"}}' "
        "while adding an entry with length '262145' bytes\n"
    )
    assert target.wait_count(f'{{service_name="{service}"}}', now, now + 2, 1) == 1


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("too new", "entry for stream '{stream}' has timestamp too new: {future}"),
        (
            "metadata too large",
            "stream '{stream}' has structured metadata too large: '65539' bytes, limit: '65536' "
            "bytes. Please see `limits_config.max_structured_metadata_size` or contact your Loki "
            "administrator to increase it",
        ),
        (
            "too many metadata",
            "stream '{stream}' has too many structured metadata labels: '129', limit: '128'. "
            "Please see `limits_config.max_structured_metadata_entries_count` or contact your "
            "Loki administrator to increase it",
        ),
        ("15 labels and service_name", ""),  # service_name does not count: accepted
    ],
)
def test_entry_and_stream_limits_answer_with_loki_s_messages(
    target: Target, case: str, message: str
) -> None:
    service = target.service("limits")
    now = time.time_ns()
    future = now + 11 * 60 * S  # past the 10 minute creation grace period
    stream: dict[str, str] = {"service_name": service}
    entry = _entry(now, "x")
    if case == "too new":
        entry = _entry(future, "x")
    elif case == "metadata too large":
        entry = _entry(now, "x", {"big": "v" * (64 * 1024)})
    elif case == "too many metadata":
        entry = _entry(now, "x", {f"k{i}": "v" for i in range(129)})
    else:
        stream.update({f"l{i}": "v" for i in range(15)})
    response = target.push([{"stream": stream, "values": [entry]}])
    if not message:
        assert response.status_code == 204
        return
    assert response.status_code == 400
    future_text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(future // S))
    shown = f'{{service_name="{service}"}}'
    assert response.text == message.format(stream=shown, future=future_text) + "\n"


def test_an_entry_an_hour_behind_its_stream_is_refused(target: Target) -> None:
    service = target.service("behind")
    now = time.time_ns()
    stream = {"service_name": service}
    assert target.push([{"stream": stream, "values": [_entry(now, "new")]}]).status_code == 204
    old = now - 70 * 60 * S
    response = target.push([{"stream": stream, "values": [_entry(old, "old")]}])
    assert response.status_code == 400
    text = response.text
    assert text.startswith("entry with timestamp ")
    assert "ignored, reason: 'entry too far behind, entry timestamp is: " in text
    assert text.endswith(
        f"',\nuser '{target.tenant}', total ignored: 1 out of 1 for stream: "
        f'{{service_name="{service}"}}\n'
    )
    # Another stream takes it: the window is per stream.
    other = {"service_name": target.service("behind-other")}
    assert target.push([{"stream": other, "values": [_entry(old, "old")]}]).status_code == 204


def test_entries_older_than_3_hours_are_not_queryable_while_in_the_ingester(target: Target) -> None:
    service = target.service("old")
    now = time.time_ns()
    old = now - 4 * 3600 * S
    values = [_entry(old, "four hours old"), _entry(now, "now")]
    assert target.push([{"stream": {"service_name": service}, "values": values}]).status_code == 204
    query = f'{{service_name="{service}"}}'
    assert target.wait_count(query, old, now + 1, 1) == 1
    assert [v[1] for v in target.values(query, old - S, now + 1, limit="10")] == ["now"]


def test_a_fast_stream_is_sharded_and_a_resent_batch_can_be_visible_twice(target: Target) -> None:
    """Loki's sharding, seen from outside: a stream pushed at 3 MB/s gets ``__stream_shard__``
    copies; a batch pushed again once the rate has fallen lands in the unsharded stream, next
    to its first copies in the shards: every entry of it visible twice."""
    service = target.service("fast")
    stream = {"service_name": service}
    line = "f" * 2000
    start_ns = time.time_ns()
    began = time.monotonic()
    sent = 0
    batch: list[list[Any]] = []
    shards: set[str] = set()
    number = 0
    # 3 MB/s, 100 entries of 2 KB per push, until a push was sharded (at most 10 s).
    while time.monotonic() - began < 10.0:
        batch = [_entry(time.time_ns(), f"{number + i:06d} {line}") for i in range(100)]
        number += 100
        assert target.push([{"stream": stream, "values": batch}]).status_code == 204
        sent += 100 * len(line)
        ahead = sent / 3e6 - (time.monotonic() - began)
        if ahead > 0:
            target.sleep(ahead)
        if sent % (20 * 100 * len(line)) == 0:
            shards = _shards(target, service, start_ns)
            if len(shards) > 1:
                break
    assert shards >= {"0", "1"}, f"no shards after {time.monotonic() - began:.1f} s: {shards}"
    # The last batch went to the shards. Once the rate has decayed (a crashed shipper
    # restarting), the same batch goes to the stream unsharded: Loki stores it again.
    target.sleep(6.0)
    assert target.push([{"stream": stream, "values": batch}]).status_code == 204
    first_ns, last_ns = int(batch[0][0]), int(batch[-1][0]) + 1
    query = f'{{service_name="{service}"}}'
    assert target.wait_count(query, first_ns, last_ns, 200) == 200
    flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
    result = target.query(query, first_ns, last_ns, headers=flags, limit="500").json()["data"][
        "result"
    ]
    where = {s["stream"].get("__stream_shard__", "none"): len(s["values"]) for s in result}
    assert where["none"] == 100
    assert sum(n for shard, n in where.items() if shard != "none") == 100


def _shards(target: Target, service: str, start_ns: int) -> set[str]:
    response = target.http.get(
        "/loki/api/v1/series",
        params={
            "match[]": f'{{service_name="{service}"}}',
            "start": str(start_ns),
            "end": str(time.time_ns()),
        },
    )
    if response.status_code == 404:  # the test server has no series endpoint: ask a query
        flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
        result = target.query(
            f'{{service_name="{service}"}}',
            start_ns,
            time.time_ns(),
            headers=flags,
            limit="1000",
            direction="backward",
        ).json()["data"]["result"]
        return {s["stream"].get("__stream_shard__", "none") for s in result}
    assert response.status_code == 200, response.text
    return {s.get("__stream_shard__", "none") for s in response.json()["data"]}
