"""The push endpoint over HTTP: formats, encodings, tenants, auth and request records."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable

import cramjam
import httpx
import pytest

from tests.lokisim import (
    LokiServer,
    PushEntry,
    PushStream,
    StoredEntry,
    decode_protobuf_push,
    encode_protobuf_push,
    push_request_class,
)
from tests.lokisim.conftest import NOW_NS
from tests.lokisim.wire import len_field, varint

pytestmark = pytest.mark.integration

PROTO = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
PLAIN = dict(discover_log_levels=False, discover_service_name=())


@pytest.fixture
def post(http: httpx.Client) -> Callable[[LokiServer, bytes, dict[str, str]], httpx.Response]:
    def send(server: LokiServer, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return http.post(f"{server.url}/loki/api/v1/push", content=body, headers=headers)

    return send


Post = Callable[[LokiServer, bytes, dict[str, str]], httpx.Response]


def test_protobuf_push_is_decoded_and_stored(post: Post, loki: LokiServer) -> None:
    now = loki.limits.now()
    body = encode_protobuf_push(
        [
            PushStream(
                '{service_name="api", layer="node"}',
                (
                    PushEntry(
                        now, '{"level":"info","event":"claimed"}', (("allocation_id", "a-9"),)
                    ),
                    PushEntry(now + 1, "task failed: error 500"),
                ),
            ),
        ]
    )
    response = post(loki, body, PROTO)
    assert (response.status_code, response.content) == (204, b"")
    labels = {"layer": "node", "service_name": "api"}
    assert loki.entries() == [
        StoredEntry(
            labels,
            now,
            '{"level":"info","event":"claimed"}',
            {"allocation_id": "a-9", "detected_level": "info"},
        ),
        StoredEntry(labels, now + 1, "task failed: error 500", {"detected_level": "error"}),
    ]


def test_hand_assembled_protobuf_proves_the_field_numbers(
    post: Post, make_loki: Callable[..., LokiServer]
) -> None:
    loki = make_loki(**PLAIN)
    # NOW_NS = 1_700_000_000 s + 0 ns; entry at +123 ns.
    seconds = bytes([0x08]) + varint(1_700_000_000)
    nanos = bytes([0x10]) + varint(123)
    timestamp = len_field(1, seconds + nanos)
    pair = len_field(1, b"k") + len_field(2, b"v")
    entry = timestamp + len_field(2, b"hello") + len_field(3, pair)
    stream = len_field(1, b'{a="b"}') + len_field(2, entry) + bytes([0x18]) + varint(42)
    raw = len_field(1, stream) + len_field(2, b"ignored format")
    assert post(loki, bytes(cramjam.snappy.compress_raw(raw)), PROTO).status_code == 204
    assert loki.entries() == [StoredEntry({"a": "b"}, NOW_NS + 123, "hello", {"k": "v"})]
    # The runtime-built class agrees with the hand-made bytes.
    request = push_request_class().FromString(raw)
    assert (request.streams[0].hash, request.streams[0].entries[0].line) == (42, "hello")
    assert decode_protobuf_push(bytes(cramjam.snappy.compress_raw(raw))) == [
        PushStream('{a="b"}', (PushEntry(NOW_NS + 123, "hello", (("k", "v"),)),))
    ]


def _json_body() -> bytes:
    return json.dumps(
        {
            "streams": [
                {
                    "stream": {"service_name": "api", "layer": "node"},
                    "values": [
                        [str(NOW_NS), "plain"],
                        [str(NOW_NS + 1), "with metadata", {"allocation_id": "a-9", "n": 7}],
                        [str(NOW_NS + 2), "nested", {"structuredMetadata": {"trace_id": "t1"}}],
                    ],
                }
            ]
        }
    ).encode()


_JSON_STORED = [
    StoredEntry({"layer": "node", "service_name": "api"}, NOW_NS, "plain", {}),
    StoredEntry(
        {"layer": "node", "service_name": "api"},
        NOW_NS + 1,
        "with metadata",
        {"allocation_id": "a-9", "n": "7"},
    ),
    StoredEntry({"layer": "node", "service_name": "api"}, NOW_NS + 2, "nested", {"trace_id": "t1"}),
]


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("", lambda body: body),
        ("gzip", gzip.compress),
        ("deflate", lambda body: zlib.compress(body, wbits=-15)),
    ],
)
def test_json_push(
    post: Post,
    make_loki: Callable[..., LokiServer],
    encoding: str,
    compress: Callable[[bytes], bytes],
) -> None:
    loki = make_loki(**PLAIN)
    headers = {"Content-Type": "application/json; charset=utf-8", "Content-Encoding": encoding}
    assert post(loki, compress(_json_body()), headers).status_code == 204
    assert loki.entries() == _JSON_STORED


@pytest.mark.parametrize(
    ("raw_line", "stored"),
    [
        (b'"half \\ud800 a pair"', "half \ufffd a pair"),  # a lone surrogate escape
        (b'"\\udc00 low half first"', "\ufffd low half first"),
        (b'"a whole \\ud83d\\ude00 pair"', "a whole \U0001f600 pair"),
        (b'"raw \xff\xfe bytes"', "raw \ufffd\ufffd bytes"),  # not UTF-8 at all
    ],
)
def test_json_text_a_go_string_cannot_hold_is_stored_as_loki_shows_it(
    post: Post, make_loki: Callable[..., LokiServer], raw_line: bytes, stored: str
) -> None:
    loki = make_loki(**PLAIN)
    body = b'{"streams": [{"stream": {"a": "b"}, "values": [["%d", %s, {"m": %s}]]}]}' % (
        NOW_NS,
        raw_line,
        raw_line,
    )
    assert post(loki, body, JSON).status_code == 204
    [entry] = loki.entries()
    assert entry.line == stored
    assert entry.metadata == {"m": stored.replace("\ufffd", " ")}  # Loki's metadata sanitising


def test_gzip_wraps_protobuf_too(post: Post, make_loki: Callable[..., LokiServer]) -> None:
    loki = make_loki(**PLAIN)
    body = encode_protobuf_push([PushStream('{a="b"}', (PushEntry(NOW_NS, "x"),))])
    assert post(loki, gzip.compress(body), {**PROTO, "Content-Encoding": "gzip"}).status_code == 204
    assert loki.count() == 1


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        ({}, b"", b"mime: no media type\n"),
        ({**PROTO, "Content-Encoding": "br"}, b"", b'Content-Encoding "br" not supported\n'),
        (PROTO, b"\xff\xff\xff", b"snappy: corrupt input (invalid header)\n"),
        ({**JSON, "Content-Encoding": "gzip"}, b"plain", b"gzip: invalid header\n"),
        ({**JSON, "Content-Encoding": "deflate"}, b"\xff", b"flate: corrupt input\n"),
        (JSON, b'{"streams": [{"stream": {"a": "b"}, "values": [[1, "x"]]}]}', None),
        (JSON, b'{"streams": [{"stream": {"a-b": "c"}, "values": [["1", "x"]]}]}', None),
        (JSON, b"not json", None),
    ],
)
def test_undecodable_push_is_a_400(
    post: Post, loki: LokiServer, headers: dict[str, str], body: bytes, message: bytes | None
) -> None:
    response = post(loki, body, headers)
    assert response.status_code == 400
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    if message is not None:
        assert response.content == message
    assert loki.count() == 0


def test_unknown_content_type_is_read_as_protobuf(post: Post, loki: LokiServer) -> None:
    body = encode_protobuf_push([PushStream('{a="b"}', (PushEntry(loki.limits.now(), "x"),))])
    assert post(loki, body, {"Content-Type": "text/plain"}).status_code == 204


def test_partial_refusal_is_a_400_with_the_reason_and_a_newline(
    post: Post,
    make_loki: Callable[..., LokiServer],
) -> None:
    loki = make_loki(max_line_size=3, **PLAIN)
    body = encode_protobuf_push(
        [PushStream('{a="b"}', (PushEntry(NOW_NS, "long"), PushEntry(NOW_NS, "ok")))]
    )
    response = post(loki, body, PROTO)
    assert response.status_code == 400
    assert response.text == (
        "max entry size '3' bytes exceeded for stream '{a=\"b\"}' while adding an entry with "
        "length '4' bytes\n"
    )
    assert response.headers["x-content-type-options"] == "nosniff"
    assert [entry.line for entry in loki.entries()] == ["ok"]


def test_empty_push_is_a_422(post: Post, loki: LokiServer) -> None:
    response = post(loki, b'{"streams": []}', JSON)
    assert (response.status_code, response.text) == (
        422,
        "error at least one valid stream is required for ingestion\n",
    )


def test_resent_entries_are_deduplicated(post: Post, make_loki: Callable[..., LokiServer]) -> None:
    loki = make_loki(**PLAIN)
    assert post(loki, _json_body(), JSON).status_code == 204
    assert post(loki, _json_body(), JSON).status_code == 204
    assert loki.entries() == _JSON_STORED


def test_without_auth_every_request_is_tenant_fake(
    post: Post, make_loki: Callable[..., LokiServer]
) -> None:
    loki = make_loki(**PLAIN)
    assert post(loki, _json_body(), {**JSON, "X-Scope-OrgID": "team-a"}).status_code == 204
    assert (loki.count(), loki.count("team-a")) == (3, 0)


def test_auth_enabled_requires_and_separates_tenants(
    post: Post, http: httpx.Client, make_loki: Callable[..., LokiServer]
) -> None:
    loki = make_loki(auth_enabled=True, **PLAIN)
    missing = post(loki, _json_body(), JSON)
    assert (missing.status_code, missing.text) == (401, "no org id\n")
    assert post(loki, _json_body(), {**JSON, "X-Scope-OrgID": "team-a"}).status_code == 204
    assert (loki.count("team-a"), loki.count("team-b"), loki.count()) == (3, 0, 0)
    bad = post(loki, _json_body(), {**JSON, "X-Scope-OrgID": "a/b"})
    assert (bad.status_code, bad.text) == (
        400,
        "tenant ID 'a/b' contains unsupported character '/'\n",
    )
    query = {"query": '{layer="node"}', "start": str(NOW_NS), "end": str(NOW_NS + 10)}
    other = http.get(
        f"{loki.url}/loki/api/v1/query_range", params=query, headers={"X-Scope-OrgID": "team-b"}
    )
    assert other.json()["data"]["result"] == []
    no_tenant = http.get(f"{loki.url}/loki/api/v1/query_range", params=query)
    assert no_tenant.status_code == 401


@pytest.mark.parametrize(
    ("required", "good", "bad"),
    [
        (("user", "pw"), httpx.BasicAuth("user", "pw"), httpx.BasicAuth("user", "nope")),
        ("s3cret", {"Authorization": "Bearer s3cret"}, {"Authorization": "Bearer wrong"}),
    ],
)
def test_require_auth(
    http: httpx.Client,
    make_loki: Callable[..., LokiServer],
    required: tuple[str, str] | str,
    good: httpx.BasicAuth | dict[str, str],
    bad: httpx.BasicAuth | dict[str, str],
) -> None:
    loki = make_loki(require_auth=required, **PLAIN)
    url = f"{loki.url}/loki/api/v1/push"

    def send(credentials: httpx.BasicAuth | dict[str, str] | None) -> httpx.Response:
        if isinstance(credentials, httpx.BasicAuth):
            return http.post(url, content=_json_body(), headers=JSON, auth=credentials)
        return http.post(url, content=_json_body(), headers={**JSON, **(credentials or {})})

    assert [send(None).status_code, send(bad).status_code, send(good).status_code] == [
        401,
        401,
        204,
    ]
    assert send(None).headers["www-authenticate"] in ('Basic realm="loki"', "Bearer")
    assert http.get(f"{loki.url}/ready").status_code == 200
    assert loki.count() == 3


def test_ready_and_unknown_paths(http: httpx.Client, loki: LokiServer) -> None:
    ready = http.get(f"{loki.url}/ready")
    assert (ready.status_code, ready.text) == (200, "ready\n")
    missing = http.get(f"{loki.url}/nope")
    assert (missing.status_code, missing.text) == (404, "404 page not found\n")
    assert http.get(f"{loki.url}/loki/api/v1/push").status_code == 405


def test_requests_are_recorded(
    post: Post, http: httpx.Client, make_loki: Callable[..., LokiServer]
) -> None:
    loki = make_loki(**PLAIN)
    body = gzip.compress(_json_body())
    post(loki, body, {**JSON, "Content-Encoding": "gzip", "X-Scope-OrgID": "t"})
    http.get(f"{loki.url}/ready")
    push, ready = loki.requests
    assert (push.method, push.path, push.status) == ("POST", "/loki/api/v1/push", 204)
    assert (push.content_type, push.body_bytes, push.entries_in_body) == (
        JSON["Content-Type"],
        len(body),
        3,
    )
    assert (push.body, push.headers["x-scope-orgid"]) == (body, "t")
    assert (ready.method, ready.path, ready.status, ready.entries_in_body) == (
        "GET",
        "/ready",
        200,
        0,
    )


def test_a_push_that_does_not_decode_is_recorded_with_no_entries(
    post: Post, make_loki: Callable[..., LokiServer]
) -> None:
    loki = make_loki(**PLAIN)
    entries = (PushEntry(NOW_NS, "x"), PushEntry(NOW_NS + 1, "y"))
    body = encode_protobuf_push([PushStream('{a="b"}', entries)])
    assert post(loki, body, PROTO).status_code == 204  # snappy-compressed already
    assert post(loki, b"\xff\xff\xff", PROTO).status_code == 400
    assert [(r.status, r.entries_in_body) for r in loki.requests] == [(204, 2), (400, 0)]


def test_keep_alive_connection_serves_many_requests(loki: LokiServer) -> None:
    with httpx.Client(base_url=loki.url) as client:
        statuses = [client.get("/ready").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]


def test_wait_for_entries(post: Post, make_loki: Callable[..., LokiServer]) -> None:
    loki = make_loki(**PLAIN)
    assert loki.wait_for_entries(1, timeout_s=0.01) is False
    post(loki, _json_body(), JSON)
    assert loki.wait_for_entries(3, timeout_s=5.0) is True


def test_loki_url_prefers_the_environment(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOKI_URL", "http://127.0.0.1:3100/")
    assert request.getfixturevalue("loki_url") == "http://127.0.0.1:3100"


def test_loki_url_falls_back_to_the_test_server(
    http: httpx.Client, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOKI_URL", raising=False)
    url = request.getfixturevalue("loki_url")
    assert http.get(f"{url}/ready").text == "ready\n"
