"""The Loki client: push outcomes, headers, error translation, queries and paging."""

from __future__ import annotations

import base64
import gzip
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import certifi
import cramjam
import httpx
import orjson
import pytest

from agent_logging.errors import ConfigurationError
from agent_logging.loki._client import (
    LokiClient,
    LokiQueryError,
    PushResult,
    QueriedEntry,
    classify_response,
    is_entry_refusal,
    parse_retry_after,
)
from agent_logging.loki._entries import PushEntry
from agent_logging.loki._push import encode_protobuf

ENTRY = PushEntry((("service_name", "svc"),), 1_700_000_000_000_000_001, '{"event":"x"}', ())

Handler = Callable[[httpx.Request], httpx.Response]

REQUEST_REFUSED = (
    "the request was refused, not its entries (check the tenant, the URL and its scheme, "
    "and any proxy in front of Loki)"
)
NGINX_PLAIN_HTTP = (
    "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n"
    "<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n"
    "<center>The plain HTTP request was sent to HTTPS port</center>\r\n"
    "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


@pytest.fixture
def requests_seen() -> list[httpx.Request]:
    return []


def mock_client(handler: Handler, **kwargs: object) -> LokiClient:
    return LokiClient("http://loki.test:3100", transport=httpx.MockTransport(handler), **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def ok_client(requests_seen: list[httpx.Request]) -> Iterator[LokiClient]:
    def handler(request: httpx.Request) -> httpx.Response:
        requests_seen.append(request)
        return httpx.Response(204)

    client = mock_client(handler, tenant="team-a", extra_headers={"X-Extra": "1"})
    yield client
    client.close()


# -- push --------------------------------------------------------------------------------------


def test_push_protobuf_request(ok_client: LokiClient, requests_seen: list[httpx.Request]) -> None:
    result = ok_client.push([ENTRY])

    assert result == PushResult("ok", 204, None, "HTTP 204")
    (request,) = requests_seen
    assert request.method == "POST"
    assert str(request.url) == "http://loki.test:3100/loki/api/v1/push"
    assert request.headers["Content-Type"] == "application/x-protobuf"
    assert request.headers["X-Scope-OrgID"] == "team-a"
    assert request.headers["X-Extra"] == "1"
    assert "Authorization" not in request.headers
    assert bytes(cramjam.snappy.decompress_raw(request.content)) == encode_protobuf([ENTRY])


def test_push_nothing_sends_nothing(
    ok_client: LokiClient, requests_seen: list[httpx.Request]
) -> None:
    assert ok_client.push([]).outcome == "ok"
    assert requests_seen == []


def test_push_json_gzip(requests_seen: list[httpx.Request]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        requests_seen.append(request)
        return httpx.Response(204)

    with mock_client(handler, encoding="json", json_gzip=True) as client:
        client.push([ENTRY])

    (request,) = requests_seen
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Content-Encoding"] == "gzip"
    assert orjson.loads(gzip.decompress(request.content)) == {
        "streams": [
            {"stream": {"service_name": "svc"}, "values": [["1700000000000000001", ENTRY.line]]}
        ]
    }


@pytest.mark.parametrize(
    ("kwargs", "authorization"),
    [
        ({"basic_auth": ("user", "pa:ss")}, "Basic " + base64.b64encode(b"user:pa:ss").decode()),
        ({"bearer_token": "tok-123"}, "Bearer tok-123"),
    ],
)
def test_push_auth_headers(kwargs: dict[str, object], authorization: str) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    with mock_client(handler, **kwargs) as client:
        client.push([ENTRY])

    assert seen[0].headers["Authorization"] == authorization


# Loki 3.7's own texts (pkg/validation/validate.go, pkg/ingester/stream.go).
TENANT_LIMITED = (
    "ingestion rate limit exceeded for user fake (limit: 4194304 bytes/sec) while attempting to "
    "ingest '7000' lines totaling '7042000' bytes, reduce log volume or contact your Loki "
    "administrator to see if the limit can be increased"
)
TENANT_LIMITED_SMALL = (
    "ingestion rate limit exceeded for user fake (limit: 4194304 bytes/sec) while attempting to "
    "ingest '1900' lines totaling '3808390' bytes, reduce log volume or contact your Loki "
    "administrator to see if the limit can be increased"
)
GRPC_TOO_LARGE = (
    "rpc error: code = ResourceExhausted desc = grpc: received message larger than max "
    "(5334158 vs. 4194304)"
)
STREAM_LIMITED = (
    "entry with timestamp 2026-11-29 00:54:03 +0000 UTC ignored, reason: 'Per stream rate limit "
    "exceeded (limit: 3MB/sec) while attempting to ingest for stream"
)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        pytest.param(httpx.Response(200), PushResult("ok", 200, None, "HTTP 200"), id="200"),
        pytest.param(
            httpx.Response(
                429, text="Ingestion rate limit exceeded\n", headers={"Retry-After": "3"}
            ),
            PushResult("retry", 429, 3.0, "HTTP 429: Ingestion rate limit exceeded"),
            id="429",
        ),
        pytest.param(
            httpx.Response(500, text="internal"),
            PushResult("retry", 500, None, "HTTP 500: internal"),
            id="500",
        ),
        pytest.param(
            httpx.Response(503), PushResult("retry", 503, None, "HTTP 503"), id="503-no-body"
        ),
        pytest.param(httpx.Response(408), PushResult("retry", 408, None, "HTTP 408"), id="408"),
        pytest.param(
            httpx.Response(302, headers={"Location": "/login"}),
            PushResult("retry", 302, None, "HTTP 302", nothing_stored=True),
            id="redirect",
        ),
        pytest.param(
            httpx.Response(401, text="no org id"),
            PushResult(
                "retry",
                401,
                None,
                "HTTP 401: Loki refused our credentials; entries kept for retry: no org id",
                nothing_stored=True,
            ),
            id="401",
        ),
        pytest.param(
            httpx.Response(403),
            PushResult(
                "retry",
                403,
                None,
                "HTTP 403: Loki refused our credentials or tenant; entries kept for retry",
                nothing_stored=True,
            ),
            id="403",
        ),
        pytest.param(
            httpx.Response(404, text="404 page not found"),
            PushResult(
                "retry",
                404,
                None,
                "HTTP 404: no Loki push endpoint at this URL; entries kept for retry: "
                "404 page not found",
                nothing_stored=True,
            ),
            id="404",
        ),
        pytest.param(
            httpx.Response(400, text="entry for stream '{a=\"b\"}' has timestamp too old\n"),
            PushResult(
                "reject",
                400,
                None,
                "entry for stream '{a=\"b\"}' has timestamp too old",
                refused=1,
                refusal_kinds=("has timestamp too old",),
            ),
            id="400",
        ),
        pytest.param(
            httpx.Response(413, text="request body too large"),
            PushResult(
                "retry",
                413,
                None,
                "HTTP 413: the push body is over a size limit of Loki or of a proxy in front "
                "of it; entries kept for retry: request body too large",
                nothing_stored=True,
                too_large=True,
            ),
            id="413",
        ),
        pytest.param(
            httpx.Response(422),
            PushResult(
                "retry",
                422,
                None,
                f"HTTP 422: {REQUEST_REFUSED}; entries kept for retry",
                nothing_stored=True,
            ),
            id="422",
        ),
        pytest.param(
            httpx.Response(429, text=f"{TENANT_LIMITED_SMALL}\n"),
            PushResult(
                "retry",
                429,
                None,
                f"HTTP 429: {TENANT_LIMITED_SMALL}",
                nothing_stored=True,
                refill_s=3_808_390 / 4_194_304,  # its bytes over the rate: the wait
            ),
            id="429-tenant-limit-stores-nothing",
        ),
        pytest.param(
            # 7 MB at once never passes a 4 MB/s limit with Loki's 6 MB burst: halved.
            httpx.Response(429, text=f"{TENANT_LIMITED}\n"),
            PushResult(
                "retry",
                429,
                None,
                f"HTTP 429: {TENANT_LIMITED}",
                nothing_stored=True,
                too_large=True,
                refill_s=7_042_000 / 4_194_304,
            ),
            id="429-tenant-limit-push-larger-than-the-rate",
        ),
        pytest.param(
            # Captured from the real Loki 3.7.6 of ../shared (a 5.3 MB protobuf push).
            httpx.Response(500, text=f"{GRPC_TOO_LARGE}\n"),
            PushResult("retry", 500, None, f"HTTP 500: {GRPC_TOO_LARGE}", too_large=True),
            id="500-over-grpc-message-limit",
        ),
        pytest.param(
            httpx.Response(429, text=f"{STREAM_LIMITED}\n"),
            PushResult("retry", 429, None, f"HTTP 429: {STREAM_LIMITED}"),
            id="429-stream-limit-may-store-some",
        ),
    ],
)
def test_push_status_outcomes(response: httpx.Response, expected: PushResult) -> None:
    with mock_client(lambda request: response) as client:
        assert client.push([ENTRY]) == expected


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        pytest.param(
            400,
            "tenant ID 'team a/b' contains unsupported character ' '\n",
            f"HTTP 400: {REQUEST_REFUSED}; entries kept for retry: "
            "tenant ID 'team a/b' contains unsupported character ' '",
            id="400-tenant",
        ),
        pytest.param(
            400,
            NGINX_PLAIN_HTTP,
            f"HTTP 400: {REQUEST_REFUSED}; entries kept for retry: "
            "400 The plain HTTP request was sent to HTTPS port",
            id="400-nginx-html",
        ),
        pytest.param(
            400,
            "snappy: corrupt input\n",
            f"HTTP 400: {REQUEST_REFUSED}; entries kept for retry: snappy: corrupt input",
            id="400-undecodable-body",
        ),
        pytest.param(
            400,
            "stream '{service_name=\"svc\"}' includes structured metadata, but this feature is "
            "disallowed. Please see `limits_config.allow_structured_metadata`",
            f"HTTP 400: {REQUEST_REFUSED}; entries kept for retry: "
            "stream '{service_name=\"svc\"}' includes structured metadata, but this feature is "
            "disallowed. Please see `limits_config.allow_structured_metadata`",
            id="400-metadata-disallowed",
        ),
        pytest.param(
            405,
            "",
            "HTTP 405: this URL does not take a push (a proxy, or not Loki's push URL); "
            "entries kept for retry",
            id="405",
        ),
        pytest.param(
            415,
            "<html><body><h1>415 Unsupported Media Type</h1></body></html>",
            "HTTP 415: the push body's content type is refused (a proxy or gateway); "
            "entries kept for retry: 415 Unsupported Media Type",
            id="415-html-without-title",
        ),
    ],
)
def test_refusals_of_the_request_are_retried(status: int, body: str, reason: str) -> None:
    result = classify_response(status, body, None, now_unix_s=NOW)

    # A refusal of the whole request stores nothing: no reconcile is needed before a retry.
    assert result == PushResult("retry", status, None, reason, nothing_stored=True)


@pytest.mark.parametrize(
    ("body", "refused", "kinds"),
    [
        pytest.param(
            "Max entry size '300' bytes exceeded for stream '{service_name=\"svc\"}' while "
            "adding an entry with length '412' bytes",
            1,
            ("bytes exceeded for stream",),
            id="line-too-long-alone",
        ),
        pytest.param(
            "entry for stream '{service_name=\"svc\"}' has timestamp too old: "
            "2023-11-01T00:00:00Z, oldest acceptable timestamp is: 2023-11-07T22:13:20Z",
            1,
            ("has timestamp too old",),
            id="too-old-alone",
        ),
        pytest.param(
            "entry for stream '{service_name=\"svc\"}' has timestamp too new: 2023-11-15T00:00:00Z",
            1,
            ("has timestamp too new",),
            id="too-new-alone",
        ),
        pytest.param(
            "entry with timestamp 2023-11-14 20:00:00 +0000 UTC ignored, reason: 'entry too far "
            "behind, entry timestamp is: 2023-11-14T20:00:00Z, oldest acceptable timestamp is: "
            "2023-11-14T21:13:20Z',\nuser 'fake', total ignored: 1 out of 3 for stream: "
            '{service_name="svc"}',
            1,
            ("entry too far behind",),
            id="too-far-behind-counted",
        ),
        pytest.param(
            "entry with timestamp 2023-11-14 20:00:00 +0000 UTC ignored, reason: 'entry out of "
            'order\' for stream: {service_name="svc"}',
            None,
            ("entry out of order",),
            id="out-of-order-not-counted",
        ),
        pytest.param(
            'entry for stream \'{a="1", service_name="svc"}\' has 16 label names; limit 15',
            1,
            ("label names; limit",),
            id="label-names",
        ),
        pytest.param(
            "stream '{service_name=\"svc\"}' has label value too long: 'xxx'",
            1,
            ("has label value too long",),
            id="label-value",
        ),
        pytest.param(
            "stream '{service_name=\"svc\"}' has structured metadata too large: '70000' bytes, "
            "limit: '65536' bytes. Please see `limits_config.max_structured_metadata_size`",
            1,
            ("has structured metadata too large",),
            id="metadata",
        ),
        pytest.param(
            "2 errors like: Max entry size '300' bytes exceeded for stream '{a=\"b\"}' while "
            "adding an entry with length '412' bytes; 1 errors like: entry for stream "
            "'{a=\"b\"}' has timestamp too new: 2023-11-15T00:00:00Z",
            3,
            ("bytes exceeded for stream", "has timestamp too new"),
            id="two-groups",
        ),
        pytest.param(
            "couldn't parse labels: 1:12: parse error: unexpected end of label set",
            1,
            ("couldn't parse labels",),
            id="labels-unparsable",
        ),
    ],
)
def test_lokis_entry_refusals_are_rejected(
    body: str, refused: int | None, kinds: tuple[str, ...]
) -> None:
    result = classify_response(400, body + "\n", None, now_unix_s=NOW)

    assert result == PushResult("reject", 400, None, body, refused=refused, refusal_kinds=kinds)
    assert is_entry_refusal(body)


def test_long_bodies_are_cut_in_reasons() -> None:
    result = classify_response(500, "x" * 5000, None, now_unix_s=0.0)

    assert result.reason == "HTTP 500: " + "x" * 1024 + "..."


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "ConnectError: [Errno 111]"),
        (httpx.ReadTimeout("timed out"), "timeout: ReadTimeout: timed out"),
        (httpx.ConnectTimeout("timed out"), "timeout: ConnectTimeout: timed out"),
        (httpx.RemoteProtocolError("peer closed connection"), "RemoteProtocolError: peer"),
        (httpx.ReadError("[Errno 104] Connection reset by peer"), "ReadError: [Errno 104]"),
    ],
)
def test_network_faults_become_retry(error: httpx.HTTPError, reason: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    with mock_client(handler) as client:
        result = client.push([ENTRY])

    assert (result.outcome, result.status, result.retry_after_s) == ("retry", None, None)
    assert result.reason.startswith(reason)


@pytest.mark.integration
def test_connection_refused_on_a_real_socket() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    with LokiClient(f"http://127.0.0.1:{port}", timeout_s=2.0) as client:
        result = client.push([ENTRY])

    assert (result.outcome, result.status) == ("retry", None)
    assert result.reason.startswith("ConnectError")


# -- Retry-After -------------------------------------------------------------------------------

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("value", "delay"),
    [
        (None, None),
        ("", None),
        ("5", 5.0),
        (" 0 ", 0.0),
        ("1.5", 1.5),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("Tue, 14 Nov 2023 22:13:50 GMT", 30.0),
        ("Tuesday, 14-Nov-23 22:13:50 GMT", 30.0),
        ("Tue Nov 14 22:13:50 2023", 30.0),
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),
    ],
)
def test_parse_retry_after(value: str | None, delay: float | None) -> None:
    assert parse_retry_after(value, now_unix_s=NOW) == delay


def test_retry_after_date_on_a_response() -> None:
    result = classify_response(503, "", "Tue, 14 Nov 2023 22:14:20 GMT", now_unix_s=NOW)

    assert result == PushResult("retry", 503, 60.0, "HTTP 503")


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kwargs", "message"),
    [
        ("http://l:3100", {"basic_auth": ("u", "p"), "bearer_token": "t"}, "not both"),
        ("http://l:3100", {"encoding": "xml"}, "encoding"),
        ("http://l:3100", {"timeout_s": 0}, "timeout_s"),
        ("http://l:3100", {"tenant": ""}, "tenant"),
        ("ftp://l:3100", {}, "http:// or https://"),
        ("loki:3100", {}, "http:// or https://"),
        ("http://[::1", {}, "is not a URL"),
        ("http://l:3100", {"ca_bundle": "/nonexistent/ca.pem"}, "cannot load Loki CA bundle"),
        ("http://l:3100", {"ca_bundle": certifi.where(), "verify_tls": False}, "choose one"),
    ],
)
def test_bad_configuration(url: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        LokiClient(url, **kwargs)  # type: ignore[arg-type]


def test_ca_bundle_that_is_not_pem(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate\n")

    with pytest.raises(ConfigurationError, match="cannot load Loki CA bundle"):
        LokiClient("https://loki.test", ca_bundle=str(bundle))


def test_ca_bundle_and_push_url_accepted() -> None:
    with LokiClient(
        "https://loki.test:3100/loki/api/v1/push/", ca_bundle=certifi.where()
    ) as client:
        assert client.url == "https://loki.test:3100"


def test_after_fork_in_child_replaces_the_pool_without_closing_it(ok_client: LokiClient) -> None:
    parent_pool = ok_client._http

    ok_client.after_fork_in_child()

    assert ok_client._http is not parent_pool
    assert not parent_pool.is_closed
    assert ok_client.push([ENTRY]).outcome == "ok"
    parent_pool.close()


def test_close(ok_client: LokiClient) -> None:
    ok_client.close()

    assert ok_client._http.is_closed


# -- queries -----------------------------------------------------------------------------------


def streams_response(*streams: dict[str, object]) -> httpx.Response:
    return httpx.Response(
        200,
        json={"status": "success", "data": {"resultType": "streams", "result": list(streams)}},
    )


def test_query_range_request_and_merge() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return streams_response(
            {
                "stream": {"service_name": "a", "level": "info"},
                "values": [["30", "l3"], ["10", "l1"]],
            },
            {
                "stream": {"service_name": "b"},
                "values": [["20", "l2", {"structuredMetadata": {"allocation_id": "a-9"}}]],
            },
        )

    with mock_client(handler, tenant="t") as client:
        entries = client.query_range(
            '{service_name=~"a|b"}', start_ns=5, end_ns=50, limit=100, direction="forward"
        )

    assert entries == [
        QueriedEntry({"service_name": "a", "level": "info"}, 10, "l1"),
        QueriedEntry({"service_name": "b", "allocation_id": "a-9"}, 20, "l2"),
        QueriedEntry({"service_name": "a", "level": "info"}, 30, "l3"),
    ]
    (request,) = seen
    assert request.url.path == "/loki/api/v1/query_range"
    assert dict(request.url.params) == {
        "query": '{service_name=~"a|b"}',
        "start": "5",
        "end": "50",
        "limit": "100",
        "direction": "forward",
    }
    assert request.headers["X-Scope-OrgID"] == "t"


def test_query_range_backward_is_newest_first() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return streams_response(
            {"stream": {"a": "1"}, "values": [["3", "c"], ["1", "a"]]},
            {"stream": {"a": "2"}, "values": [["2", "b"]]},
        )

    with mock_client(handler) as client:
        entries = client.query_range('{a=~".+"}', start_ns=0, end_ns=9, direction="backward")

    assert [e.line for e in entries] == ["c", "b", "a"]


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(400, text="parse error at line 1"), "HTTP 400: parse error at line 1"),
        (httpx.Response(200, text="<html>"), "unexpected body"),
        (httpx.Response(200, json={"status": "success", "data": {}}), "unexpected body"),
        (
            httpx.Response(
                200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}
            ),
            "'matrix' result",
        ),
    ],
)
def test_query_range_failures_raise(response: httpx.Response, message: str) -> None:
    with (
        mock_client(lambda request: response) as client,
        pytest.raises(LokiQueryError, match=message),
    ):
        client.query_range('{a="b"}', start_ns=0, end_ns=1)


def test_query_range_network_failure_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with mock_client(handler) as client, pytest.raises(LokiQueryError, match="ConnectError"):
        client.query_range('{a="b"}', start_ns=0, end_ns=1)


def paging_server(
    stored: list[tuple[int, str]], starts: list[int]
) -> Callable[[httpx.Request], httpx.Response]:
    """A window query over ``stored`` (one stream) with Loki's start <= ts < end and limit."""

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        start, end, limit = int(params["start"]), int(params["end"]), int(params["limit"])
        starts.append(start)
        page = [(ts, line) for ts, line in stored if start <= ts < end][:limit]
        return streams_response(
            {"stream": {"s": "x"}, "values": [[str(ts), line] for ts, line in page]}
        )

    return handler


def test_iter_query_range_pages_with_boundary_dedupe() -> None:
    stored = [(10, "a"), (20, "b"), (20, "c"), (30, "d"), (30, "e"), (40, "f"), (50, "out")]
    starts: list[int] = []

    with mock_client(paging_server(stored, starts)) as client:
        lines = [
            e.line for e in client.iter_query_range('{s="x"}', start_ns=0, end_ns=50, page_limit=3)
        ]

    assert lines == ["a", "b", "c", "d", "e", "f"]
    assert starts == [0, 20, 30, 40]


def test_iter_query_range_too_many_at_one_timestamp() -> None:
    stored = [(10, "a"), (10, "b"), (10, "c"), (10, "d")]

    with mock_client(paging_server(stored, [])) as client:
        pages = client.iter_query_range('{s="x"}', start_ns=10, end_ns=11, page_limit=2)
        with pytest.raises(LokiQueryError, match="2 or more entries share timestamp 10"):
            list(pages)


def test_iter_query_range_yields_an_entry_stored_in_two_shards_once() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        shard = {"service_name": "svc"}
        streams = [
            {"stream": {**shard, "__stream_shard__": "0"}, "values": [["5", "a"], ["7", "b"]]},
            {"stream": {**shard, "__stream_shard__": "1"}, "values": [["6", "c"]]},
            {"stream": shard, "values": [["5", "a"], ["6", "c"], ["6", "d"]]},
        ]
        data = {"resultType": "streams", "encodingFlags": ["categorize-labels"], "result": streams}
        return httpx.Response(200, json={"status": "success", "data": data})

    transport = httpx.MockTransport(handler)
    with LokiClient("http://loki.test", transport=transport) as client:
        entries: list[QueriedEntry] = list(
            client.iter_query_range('{service_name="svc"}', start_ns=0, end_ns=10)
        )
    assert [(e.ts_ns, e.line) for e in entries] == [(5, "a"), (6, "c"), (6, "d"), (7, "b")]
    assert entries[0].stream == {"service_name": "svc", "__stream_shard__": "0"}


def test_iter_query_range_sizes_pages_to_about_page_bytes() -> None:
    """A first page of 100 entries, then pages that should come to about ``page_bytes``:
    Loki cannot send an answer over gRPC's 4 MiB (5,000 lines of 2 KB never arrive)."""
    stored = [(ts, f"{ts:04d}" + "x" * 996) for ts in range(1, 1001)]  # 1 KB lines
    limits: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        start, end, limit = int(params["start"]), int(params["end"]), int(params["limit"])
        limits.append(limit)
        page = [(ts, line) for ts, line in stored if start <= ts < end][:limit]
        return streams_response({"stream": {"s": "x"}, "values": [[str(t), v] for t, v in page]})

    with mock_client(handler) as client:
        found = list(
            client.iter_query_range('{s="x"}', start_ns=0, end_ns=2000, page_bytes=200_000)
        )

    assert [e.ts_ns for e in found] == list(range(1, 1001))
    assert limits[0] == 100
    assert all(180 <= limit <= 200 for limit in limits[1:])  # 200 KB of ~1 KB entries
