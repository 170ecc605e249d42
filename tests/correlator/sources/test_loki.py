"""The loki source: entry mapping, paging, and queries built from hostile ids."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import orjson
import pytest

from agent_logging.loki._client import LokiClient
from agent_logging.loki._entries import PushEntry, entry_from_record
from correlator.errors import QueryError, SourceError
from correlator.logql import query_for, selector
from correlator.model import Event, Reject, content_hash
from correlator.sources import nginx
from correlator.sources.loki import fetch
from tests.lokisim.fixtures import VISIBILITY_TIMEOUT_S

T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"

# -- mapping entries (a mock Loki) ------------------------------------------------------------


def streams_body(*streams: tuple[dict[str, str], list[tuple[int, str]]]) -> bytes:
    result = [
        {"stream": labels, "values": [[str(ts), line] for ts, line in values]}
        for labels, values in streams
    ]
    return orjson.dumps({"status": "success", "data": {"resultType": "streams", "result": result}})


def mock_client(respond: Callable[[httpx.Request], httpx.Response]) -> LokiClient:
    return LokiClient("http://loki.test:3100", transport=httpx.MockTransport(respond))


RECORD = (
    '{"ts":"2026-11-22T13:11:19.000000001Z","level":"error","event":"provisioning failed",'
    '"layer":"api","allocation_id":"a-9","error":{"type":"RuntimeError","owner_layer":"cert"}}'
)
API = {"service_name": "api", "layer": "api", "env": "prod", "trace_id": TRACE}
NGINX_LINE = (
    "2026/11/22 13:11:19 [error] 31#31: *7 connect() failed (111: Connection refused) while "
    'connecting to upstream, client: 10.0.0.7, server: api.example, request: "POST /v1 HTTP/1.1"'
)


def test_entries_are_mapped_as_records_or_from_their_labels() -> None:
    body = streams_body(
        (API, [(T0 + 5, RECORD)]),
        (
            {
                "service_name": "nginx",
                "layer": "ingress",
                "level": "ERROR",
                "allocation_id": 'a"9',
                "node_id": "n-17",
                "filename": "/var/log/nginx/error.log",
            },
            [(T0 + 7, NGINX_LINE)],
        ),
        ({"service_name": "mystery"}, [(T0 + 9, "no layer here")]),
    )
    client = mock_client(lambda request: httpx.Response(200, content=body))
    query = '{service_name=~".+"}'

    items = list(fetch(client, query, start_ns=T0, end_ns=T0 + 10))
    [from_file] = nginx.parse([NGINX_LINE.encode()], "/var/log/nginx/error.log")
    assert isinstance(from_file, Event)
    # its own: a refused upstream connection is the ingress's
    assert (from_file.source, from_file.level, from_file.owner_hint) == (
        "nginx",
        "error",
        "ingress",
    )

    assert items == [
        Event(
            ts_ns=T0 + 1,  # the record's own ts
            layer="api",
            source="loki",
            origin=query,
            message="provisioning failed",
            raw=RECORD,
            hash=content_hash("loki", f"{T0 + 5}\n{RECORD}".encode()),
            service="api",  # from the stream, the record names none
            level="error",
            allocation_id="a-9",
            trace_id=TRACE,  # from the structured metadata: the record names none
            owner_hint="cert",
            error_type="RuntimeError",
        ),
        # A line nginx wrote, shipped by a collector: read as its file is (the nginx
        # source's event, hash and all), with the identifiers of its structured metadata.
        replace(
            from_file,
            origin=query,
            node_id="n-17",
            attrs={
                **from_file.attrs,
                "rejected_ids": {
                    "allocation_id": "holds '\"' (U+0022) at position 1; allowed: ASCII "
                    "letters, digits and . _ : / @ + ~ -"
                },
            },
        ),
        Reject(
            "loki",
            query,
            3,
            "entry 3 names no layer: the line is not a record with one and the stream has no "
            "'layer' label of a known layer (node, ingress, api, workflow, db, provider, "
            "projection)",
            "no layer here",
        ),
    ]


def test_default_layer_fills_in() -> None:
    body = streams_body(({"service_name": "mystery"}, [(T0, "plain"), (T0 + 1, '{"ts": 5}')]))
    client = mock_client(lambda request: httpx.Response(200, content=body))

    items = list(fetch(client, '{a="b"}', start_ns=T0, end_ns=T0 + 2, default_layer="node"))

    assert [(i.layer, i.ts_ns, i.message, i.attrs) for i in items] == [  # type: ignore[union-attr]
        ("node", T0, "plain", {}),
        ("node", T0 + 1, "", {"ts": 5}),  # a record without a readable ts keeps Loki's
    ]


def test_an_entry_stored_in_two_shards_of_its_stream_is_one_event() -> None:
    """Loki shards a fast stream (``__stream_shard__``) and de-duplicates within a shard only:
    the same timestamp and line in two shards is one entry, one event."""
    shard0 = {**API, "__stream_shard__": "0"}
    body = streams_body((shard0, [(T0 + 5, RECORD)]), (API, [(T0 + 5, RECORD), (T0 + 6, "x")]))
    client = mock_client(lambda request: httpx.Response(200, content=body))

    items = list(fetch(client, '{a="b"}', start_ns=T0, end_ns=T0 + 10, default_layer="api"))

    assert [(i.ts_ns, i.message) for i in items] == [  # type: ignore[union-attr]
        (T0 + 1, "provisioning failed"),  # the record's own ts
        (T0 + 6, "x"),
    ]


def test_a_record_keeps_every_digit_of_an_integer_past_64_bits() -> None:
    wide = "123456789012345678901234567890"  # orjson alone reads 1.2345678901234568e+29
    line = (
        f'{{"ts":"2026-11-22T13:11:19Z","layer":"api","event":"e","node_id":{wide},'
        f'"job":{{"seq":{wide},"max":18446744073709551615}}}}'
    )
    body = streams_body((API, [(T0, line)]))
    client = mock_client(lambda request: httpx.Response(200, content=body))

    (item,) = fetch(client, '{a="b"}', start_ns=T0, end_ns=T0 + 1)

    assert isinstance(item, Event)
    assert (item.node_id, item.raw, item.hash) == (
        wide,
        line,
        content_hash("loki", f"{T0}\n{line}".encode()),
    )
    assert orjson.dumps(item.attrs).decode() == (
        f'{{"job":{{"seq":"{wide}","max":18446744073709551615}}}}'
    )


def test_lines_that_only_look_like_records_and_oversized_lines() -> None:
    huge = "x" * 1_048_577
    body = streams_body(
        (API, [(T0, "{not json"), (T0 + 1, '{"layer": "frontend"}'), (T0 + 2, huge)])
    )
    client = mock_client(lambda request: httpx.Response(200, content=body))

    items = list(fetch(client, '{a="b"}', start_ns=T0, end_ns=T0 + 3))

    assert [(i.message, i.layer, i.trace_id) for i in items[:2]] == [  # type: ignore[union-attr]
        ("{not json", "api", TRACE),
        ('{"layer": "frontend"}', "api", TRACE),  # not a record we can read: kept as a line
    ]
    assert items[2] == Reject(
        "loki", '{a="b"}', 3, "entry 3 is 1,048,577 bytes; the limit is 1,048,576", "x" * 200
    )


def test_loki_failure_is_a_source_error() -> None:
    client = mock_client(lambda request: httpx.Response(400, text="parse error at line 1, col 2"))

    with pytest.raises(SourceError, match="failed after 0 entries: Loki query failed: HTTP 400"):
        list(fetch(client, "{", start_ns=T0, end_ns=T0 + 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"page_limit": 5001}, "page_limit 5001 is outside 1 to 5,000"),
        ({"page_limit": 0}, "page_limit 0 is outside"),
        ({"end_ns": T0}, "the window is empty"),
        ({"start_ns": 1.5}, "start_ns must be an integer"),
        ({"default_layer": "frontend"}, "unknown default layer 'frontend'"),
    ],
)
def test_bad_arguments_are_refused_before_any_request(kwargs: dict[str, Any], message: str) -> None:
    seen: list[httpx.Request] = []

    def respond(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500)

    client = mock_client(respond)
    arguments: dict[str, Any] = {"start_ns": T0, "end_ns": T0 + 10, **kwargs}

    with pytest.raises(QueryError, match=message):
        fetch(client, '{a="b"}', **arguments)
    assert seen == []


# -- against the Loki test server (or a real Loki when LOKI_URL is set) ---------------------


@pytest.fixture
def client(loki_url: str, loki_tenant: str | None) -> Iterator[LokiClient]:
    with LokiClient(loki_url, tenant=loki_tenant) as client:
        yield client


@pytest.fixture
def tag() -> str:
    """A value unique to this test, so a shared real Loki's other data stays out."""
    return uuid.uuid4().hex[:10]


def push_records(client: LokiClient, records: list[tuple[int, dict[str, Any]]]) -> None:
    entries: list[PushEntry] = [
        entry_from_record(ts, orjson.dumps(fields), node_id_label=False, default_labels={})
        for ts, fields in records
    ]
    result = client.push(entries)
    assert result.outcome == "ok", result.reason
    # A 204 does not promise the entries are queryable yet (a real Loki may lag): poll.
    start, end = min(ts for ts, _ in records), max(ts for ts, _ in records) + 1
    query = selector(service_name=records[0][1]["service"])
    deadline = time.monotonic() + VISIBILITY_TIMEOUT_S
    pause = threading.Event()
    while len(client.query_range(query, start_ns=start, end_ns=end)) < len(records):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"pushed entries did not become visible within {VISIBILITY_TIMEOUT_S} s"
            )
        pause.wait(0.2)


def record(ts_ns: int, event: str, service: str, **fields: Any) -> dict[str, Any]:
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"
    return {
        "ts": stamp,
        "level": "info",
        "event": event,
        "service": service,
        "layer": "api",
        **fields,
    }


@pytest.mark.integration
def test_hostile_identifier_fetches_exactly_its_entries(client: LokiClient, tag: str) -> None:
    now = time.time_ns() - 60 * 1_000_000_000
    service, plain = f"api-{tag}", f"a-9-{tag}"
    hostile = f'{plain}" or allocation_id=~".+'
    push_records(
        client,
        [
            (now, record(now, "plain", service, allocation_id=plain)),
            (now + 1, record(now + 1, "hostile", service, allocation_id=hostile)),
            (now + 2, record(now + 2, "other", service, allocation_id=f"a-10-{tag}")),
            (now + 3, record(now + 3, "prefix", service, allocation_id=plain + '"')),
            (now + 4, record(now + 4, "newline", service, allocation_id=plain + "\n}")),
        ],
    )

    def fetched(ids: dict[str, str]) -> list[tuple[str, str | None, list[str]]]:
        items = fetch(client, query_for(ids), start_ns=now, end_ns=now + 10)
        return [
            (i.message, i.allocation_id, list(i.attrs.get("rejected_ids", {})))  # type: ignore[union-attr]
            for i in items
        ]

    assert fetched({"allocation_id": hostile}) == [("hostile", None, ["allocation_id"])]
    assert fetched({"allocation_id": plain}) == [("plain", plain, [])]
    assert fetched({"allocation_id": plain + "\n}"}) == [("newline", None, ["allocation_id"])]
    assert fetched({"allocation_id": f"a-10-{tag}", "correlation_id": hostile}) == [
        ("other", f"a-10-{tag}", [])
    ]


@pytest.mark.integration
def test_paging_with_shared_timestamps_yields_each_entry_once(client: LokiClient, tag: str) -> None:
    start = time.time_ns() - 120 * 1_000_000_000
    service, node = f"api-{tag}", f"n-{tag}"
    push_records(
        client,
        [
            (
                start + (n // 4) * 1000,
                record(start + (n // 4) * 1000, f"entry {n}", service, node_id=node),
            )
            for n in range(23)
        ],
    )
    query = query_for({"node_id": node})

    paged = list(fetch(client, query, start_ns=start, end_ns=start + 10_000, page_limit=5))
    whole = list(fetch(client, query, start_ns=start, end_ns=start + 10_000))

    events = [e for e in paged if isinstance(e, Event)]
    assert sorted(e.message for e in events) == sorted(f"entry {n}" for n in range(23))
    assert len({e.hash for e in events}) == 23
    assert [e.ts_ns for e in events] == sorted(e.ts_ns for e in events)
    assert sorted(paged, key=lambda e: getattr(e, "hash", 0)) == sorted(
        whole, key=lambda e: getattr(e, "hash", 0)
    )


@pytest.mark.integration
def test_a_page_of_one_timestamp_cannot_be_passed(client: LokiClient, tag: str) -> None:
    ts = time.time_ns() - 60 * 1_000_000_000
    service = f"api-{tag}"
    push_records(client, [(ts, record(ts, f"same {n}", service)) for n in range(4)])

    with pytest.raises(
        SourceError, match=r"share timestamp \d+; paging by time cannot pass them: raise page_limit"
    ):
        list(
            fetch(client, selector(service_name=service), start_ns=ts, end_ns=ts + 1, page_limit=3)
        )
