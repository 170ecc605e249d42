"""query_range and the label endpoints over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.lokisim import LokiServer, format_labels
from tests.lokisim.conftest import NOW_NS

pytestmark = pytest.mark.integration

S = 1_000_000_000
API = {"service_name": "api", "layer": "api"}
AGENT = {"service_name": "agent", "layer": "node"}
RANGE = {"start": str(NOW_NS - 60 * S), "end": str(NOW_NS + 1)}


def _push(http: httpx.Client, loki: LokiServer, streams: list[dict[str, Any]]) -> None:
    response = http.post(
        f"{loki.url}/loki/api/v1/push",
        content=json.dumps({"streams": streams}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 204, response.text


@pytest.fixture
def loki(make_loki: Callable[..., LokiServer], http: httpx.Client) -> LokiServer:
    """A server holding two streams; ``detected_level`` discovery off to keep outputs short."""
    server: LokiServer = make_loki(discover_log_levels=False)
    _push(
        http,
        server,
        [
            {
                "stream": API,
                "values": [
                    [str(NOW_NS - 5 * S), "GET /v1 200", {"correlation_id": "c1"}],
                    [
                        str(NOW_NS - 4 * S),
                        "POST /v1 500",
                        {"correlation_id": "c2", "allocation_id": "a-9"},
                    ],
                ],
            },
            {
                "stream": AGENT,
                "values": [
                    [str(NOW_NS - 4 * S), "claimed task", {"allocation_id": "a-9"}],
                    [str(NOW_NS - 3 * S), "task failed", {"allocation_id": "a-9"}],
                    [str(NOW_NS - 2 * S), "heartbeat"],
                ],
            },
        ],
    )
    return server


@pytest.fixture
def query(http: httpx.Client, loki: LokiServer) -> Callable[..., httpx.Response]:
    def run(logql: str, headers: dict[str, str] | None = None, **params: str) -> httpx.Response:
        return http.get(
            f"{loki.url}/loki/api/v1/query_range",
            params={"query": logql, **RANGE, **params},
            headers=headers or {},
        )

    return run


def lines(response: httpx.Response) -> list[str]:
    """All lines of a response, across streams, in (timestamp, line) order."""
    result = response.json()["data"]["result"]
    values = sorted((int(v[0]), v[1]) for stream in result for v in stream["values"])
    return [line for _, line in values]


def test_metadata_is_merged_into_result_stream_labels(query: Callable[..., httpx.Response]) -> None:
    response = query('{layer="node"}')
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    body = response.json()
    assert body["status"] == "success"
    assert body["data"]["resultType"] == "streams"
    assert body["data"]["stats"]["summary"]["totalEntriesReturned"] == 3
    assert body["data"]["result"] == [
        {
            "stream": {"allocation_id": "a-9", "layer": "node", "service_name": "agent"},
            "values": [[str(NOW_NS - 3 * S), "task failed"], [str(NOW_NS - 4 * S), "claimed task"]],
        },
        {
            "stream": {"layer": "node", "service_name": "agent"},
            "values": [[str(NOW_NS - 2 * S), "heartbeat"]],
        },
    ]


def test_categorize_labels_keeps_stream_labels_and_splits_metadata(
    query: Callable[..., httpx.Response],
) -> None:
    flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
    data = query('{layer="node"}', headers=flags, direction="forward").json()["data"]
    assert data["encodingFlags"] == ["categorize-labels"]
    assert data["result"] == [
        {
            "stream": {"layer": "node", "service_name": "agent"},
            "values": [
                [
                    str(NOW_NS - 4 * S),
                    "claimed task",
                    {"structuredMetadata": {"allocation_id": "a-9"}},
                ],
                [
                    str(NOW_NS - 3 * S),
                    "task failed",
                    {"structuredMetadata": {"allocation_id": "a-9"}},
                ],
                [str(NOW_NS - 2 * S), "heartbeat", {}],
            ],
        }
    ]


def test_detected_level_shows_up_as_metadata_by_default(
    make_loki: Callable[..., LokiServer], http: httpx.Client
) -> None:
    loki = make_loki()
    _push(http, loki, [{"stream": {"layer": "node"}, "values": [[str(NOW_NS), "disk error"]]}])
    response = http.get(
        f"{loki.url}/loki/api/v1/query_range", params={"query": '{layer="node"}', **RANGE}
    )
    assert response.json()["data"]["result"][0]["stream"] == {
        "detected_level": "error",
        "layer": "node",
        "service_name": "unknown_service",
    }


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["heartbeat", "task failed", "POST /v1 500", "claimed task", "GET /v1 200"]),
        (
            {"direction": "FORWARD"},
            ["GET /v1 200", "POST /v1 500", "claimed task", "task failed", "heartbeat"],
        ),
        ({"direction": "forward", "limit": "3"}, ["GET /v1 200", "POST /v1 500", "claimed task"]),
        ({"limit": "2"}, ["heartbeat", "task failed"]),
        ({"limit": "3"}, ["heartbeat", "task failed", "POST /v1 500"]),
    ],
)
def test_direction_and_limit_across_streams(
    query: Callable[..., httpx.Response], params: dict[str, str], expected: list[str]
) -> None:
    result = query('{layer=~".+"}', **params).json()["data"]["result"]
    merged = [
        (int(v[0]), format_labels(stream["stream"]), v[1])
        for stream in result
        for v in stream["values"]
    ]
    forward = params.get("direction", "").lower() == "forward"
    # Equal timestamps are ordered by label text in both directions, as Loki's merge does.
    merged.sort(key=lambda item: (item[0] if forward else -item[0], item[1]))
    assert [line for _, _, line in merged] == expected


@pytest.mark.parametrize(
    ("logql", "expected"),
    [
        ('{service_name="api"}', ["GET /v1 200", "POST /v1 500"]),
        ('{service_name=~"a.+", layer!="api"}', ["claimed task", "task failed", "heartbeat"]),
        ('{service_name="agent", layer!~"n.*"}', []),
        ('{layer=~".+"} |= "task"', ["claimed task", "task failed"]),
        ('{layer=~".+"} |= "task" != "failed"', ["claimed task"]),
        ('{layer=~".+"} |~ "[45]\\\\d\\\\d"', ["POST /v1 500"]),
        ('{layer=~".+"} !~ "(?i)TASK|/v1"', ["heartbeat"]),
        ('{layer=~".+"} | allocation_id="a-9"', ["POST /v1 500", "claimed task", "task failed"]),
        ('{layer=~".+"} | correlation_id=~"c.", allocation_id!="a-9"', ["GET /v1 200"]),
        ('{layer=~".+"} | allocation_id="a-9" | layer="node" |= "fail"', ["task failed"]),
        ('{layer=~".+"} | correlation_id=""', ["claimed task", "task failed", "heartbeat"]),
    ],
)
def test_selectors_line_filters_and_metadata_filters(
    query: Callable[..., httpx.Response], logql: str, expected: list[str]
) -> None:
    assert lines(query(logql)) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"start": str(NOW_NS - 4 * S), "end": str(NOW_NS - 3 * S)},
            ["POST /v1 500", "claimed task"],
        ),
        (
            {"start": "2023-11-14T22:13:16Z", "end": "2023-11-14T22:13:17.000000000Z"},
            ["POST /v1 500", "claimed task"],
        ),
        (
            {"start": "2023-11-15T00:13:16+02:00", "end": "1699999997"},
            ["POST /v1 500", "claimed task"],
        ),
        ({"start": "1699999996.0", "end": "1699999996.5"}, ["POST /v1 500", "claimed task"]),
        ({"start": "", "end": "", "since": "3s"}, ["task failed", "heartbeat"]),
        (
            {"start": "", "end": str(NOW_NS - 3 * S), "since": "1m1s"},
            ["GET /v1 200", "POST /v1 500", "claimed task"],
        ),
        ({"start": str(NOW_NS - 3 * S), "end": str(NOW_NS - 3 * S)}, []),
    ],
)
def test_time_range_is_start_inclusive_end_exclusive(
    query: Callable[..., httpx.Response], params: dict[str, str], expected: list[str]
) -> None:
    assert lines(query('{layer=~".+"}', **params)) == expected


def test_json_parser_labels_are_merged_or_categorized(
    make_loki: Callable[..., LokiServer], http: httpx.Client
) -> None:
    loki = make_loki(discover_log_levels=False)
    values = [[str(NOW_NS), '{"status": 503, "layer": "x"}'], [str(NOW_NS + 1), '{"status": 200}']]
    _push(http, loki, [{"stream": API, "values": values}])
    url = f"{loki.url}/loki/api/v1/query_range"
    params = {
        "query": '{layer="api"} | json | status >= 500',
        "start": str(NOW_NS),
        "end": str(NOW_NS + 5),
    }
    merged = http.get(url, params=params).json()["data"]["result"]
    assert merged == [
        {
            "stream": {
                "layer": "api",
                "layer_extracted": "x",
                "service_name": "api",
                "status": "503",
            },
            "values": [[str(NOW_NS), '{"status": 503, "layer": "x"}']],
        }
    ]
    flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
    categorized = http.get(url, params=params, headers=flags).json()["data"]["result"]
    assert categorized[0]["values"][0][2] == {"parsed": {"layer_extracted": "x", "status": "503"}}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"limit": "5001"},
            "max entries limit per query exceeded, limit > max_entries_limit_per_query "
            "(5001 > 5000)",
        ),
        ({"limit": "0"}, "limit must be a positive value"),
        ({"limit": "ten"}, 'strconv.Atoi: parsing "ten": invalid syntax'),
        ({"direction": "sideways"}, "invalid direction 'sideways'"),
        ({"start": "5", "end": "4"}, "end timestamp must not be before or equal to start time"),
        (
            {"start": "yesterday"},
            "could not parse 'start' parameter: strconv.ParseInt: parsing \"yesterday\": "
            "invalid syntax",
        ),
        (
            {"since": "1 hour"},
            "could not parse 'since' parameter: not a valid duration string: \"1 hour\"",
        ),
        (
            {"query": '{layer="node"'},
            "parse error at line 1, col 14: syntax error: unexpected $end, expecting } or ,",
        ),
    ],
)
def test_bad_requests_are_400_with_lokis_message(
    query: Callable[..., httpx.Response], params: dict[str, str], message: str
) -> None:
    logql = params.pop("query", '{layer="node"}')
    response = query(logql, **params)
    assert (response.status_code, response.text) == (400, message)
    assert response.headers["content-type"] == "text/plain; charset=utf-8"


def test_the_query_cap_follows_the_limits(
    make_loki: Callable[..., LokiServer], http: httpx.Client, query: Callable[..., httpx.Response]
) -> None:
    assert query('{layer="node"}', limit="5000").status_code == 200
    small = make_loki(max_entries_limit_per_query=2)
    response = http.get(
        f"{small.url}/loki/api/v1/query_range", params={"query": '{layer="node"}', "limit": "3"}
    )
    assert (
        response.text
        == "max entries limit per query exceeded, limit > max_entries_limit_per_query (3 > 2)"
    )


def test_limit_defaults_to_100(make_loki: Callable[..., LokiServer], http: httpx.Client) -> None:
    loki = make_loki(discover_log_levels=False)
    values = [[str(NOW_NS - i), f"line {i}"] for i in range(101)]
    _push(http, loki, [{"stream": API, "values": values}])
    params = {"query": '{layer="api"}', **RANGE}
    result = http.get(f"{loki.url}/loki/api/v1/query_range", params=params).json()["data"]["result"]
    assert [v[1] for v in result[0]["values"]][::50] == ["line 0", "line 50"]
    assert len(result[0]["values"]) == 100


def test_query_range_accepts_a_form_post(http: httpx.Client, loki: LokiServer) -> None:
    response = http.post(
        f"{loki.url}/loki/api/v1/query_range",
        data={"query": '{layer="api"}', **RANGE, "limit": "1"},
    )
    assert lines(response) == ["POST /v1 500"]


def test_label_endpoints(http: httpx.Client, loki: LokiServer) -> None:
    names = http.get(f"{loki.url}/loki/api/v1/labels", params=RANGE).json()
    assert names == {"status": "success", "data": ["layer", "service_name"]}
    values = http.get(f"{loki.url}/loki/api/v1/label/service_name/values", params=RANGE).json()
    assert values == {"status": "success", "data": ["agent", "api"]}
    late = {"start": str(NOW_NS - 2 * S), "end": str(NOW_NS)}
    assert http.get(f"{loki.url}/loki/api/v1/label/layer/values", params=late).json()["data"] == [
        "node"
    ]


def test_pagination_by_last_timestamp_with_caller_dedup(
    make_loki: Callable[..., LokiServer], http: httpx.Client
) -> None:
    """The paging contract callers rely on.

    Results are sorted in the requested direction and hold at most ``limit`` entries;
    ``start`` is inclusive, so the next page starts at the last timestamp seen and
    repeats the entries sharing it, which the caller drops.
    """
    loki = make_loki(discover_log_levels=False)
    values = [
        [str(NOW_NS + ts), line]
        for ts, line in [(1, "a"), (2, "b"), (2, "c"), (2, "d"), (3, "e"), (4, "f")]
    ]
    _push(http, loki, [{"stream": API, "values": values}])
    url = f"{loki.url}/loki/api/v1/query_range"

    def page(start_ns: int, limit: int) -> list[tuple[int, str]]:
        params = {
            "query": '{layer="api"}',
            "start": str(start_ns),
            "end": str(NOW_NS + 10),
            "limit": str(limit),
            "direction": "forward",
        }
        result = http.get(url, params=params).json()["data"]["result"]
        return [(int(v[0]) - NOW_NS, v[1]) for stream in result for v in stream["values"]]

    assert page(NOW_NS, 3) == [(1, "a"), (2, "b"), (2, "c")]
    assert page(NOW_NS + 2, 3) == [(2, "b"), (2, "c"), (2, "d")]
    seen: list[tuple[int, str]] = []
    start, pages = NOW_NS, 0
    while pages < 10:
        pages += 1
        batch = page(start, 4)
        new = [item for item in batch if item not in seen]
        seen.extend(new)
        if len(batch) < 4:
            break
        assert new, "a full page of one timestamp cannot advance: the caller must raise limit"
        start = NOW_NS + batch[-1][0]
    assert seen == [(1, "a"), (2, "b"), (2, "c"), (2, "d"), (3, "e"), (4, "f")]
    assert pages == 3
