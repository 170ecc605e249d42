from __future__ import annotations

import dataclasses
import time
from datetime import UTC, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator.model import LEVELS, MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources.nginx import link_errors_to_access, parse

SAMPLES = Path(__file__).parents[1] / "samples" / "nginx"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
S = 1_000_000_000
ORIGIN = "nginx.log"


def event(line: bytes, **fields: Any) -> Event:
    """The event ``line`` should become: the constant parts filled in."""
    fields.setdefault("service", "nginx")
    return Event(
        layer="ingress",
        source="nginx",
        origin=ORIGIN,
        raw=line.decode(),
        hash=content_hash("nginx", line),
        **fields,
    )


def read(*lines: bytes) -> list[Event | Reject]:
    return list(parse(list(lines), ORIGIN))


COMBINED_502 = (
    b'127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "POST /v1/allocations HTTP/1.1" 502 157 "-" '
    b'"curl/8.5.0" "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"'
)
COMBINED_EXTRAS = (
    b'10.0.0.8 - alice [22/Nov/2026:14:11:19 +0100] "GET /v1/allocations/a-9?verbose=1 HTTP/2.0" '
    b'200 1534 "https://console.local/" "Mozilla/5.0 \\x22beta\\x22 caf\\xC3\\xA9" '
    b'"9a8b7c6d5e4f30211203f4e5d6c7b8a9" "502, 200" 0.031 "0.001, 0.029" '
    b'"127.0.0.1:8001, 127.0.0.1:8002"'
)
COMBINED_KEYED = (
    b'10.0.0.8 - - [22/Nov/2026:13:11:19 +0000] "DELETE /v1/allocations/a-9 HTTP/1.1" 403 19 '
    b'"-" "python-httpx/0.27.0" rid=0badc0de rt=0.004 us=403 ua="127.0.0.1:8001" cid=c-77'
)
COMBINED_TLS_ON_HTTP = (
    b'203.0.113.9 - - [22/Nov/2026:13:11:19 +0000] "\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xFC'
    b'\\x03\\x03" 400 157 "-" "-" "-"'
)
COMMON = b'127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "GET /healthz HTTP/1.1" 200 2'
JSON_401 = (
    b'{"time_iso8601":"2026-11-22T13:11:19+00:00","msec":"1795353079.123","request_id":'
    b'"5e0c1f3a9b2d4e6f8a7b6c5d4e3f2a1b","remote_addr":"10.0.0.5","request_method":"POST",'
    b'"request_uri":"/v1/allocations?dry_run=1","status":"401","request_time":"0.010",'
    b'"upstream_status":"401","upstream_addr":"127.0.0.1:8001","upstream_response_time":'
    b'"0.009","http_x_correlation_id":"c-1","ssl_protocol":"TLSv1.3","server_name":"api.local",'
    b'"http_user_agent":"curl/8.5.0 \\"quoted\\"","body_bytes_sent":"57"}'
)
JSON_NO_UPSTREAM = (
    b'{"time_local":"22/Nov/2026:13:11:19 +0000","request_id":"77aa","remote_addr":"10.0.0.5",'
    b'"request":"GET /v1/nodes HTTP/1.1","status":504,"request_time":"5.001","upstream_status":'
    b'"","upstream_addr":"","http_x_correlation_id":"bad id","http_traceparent":'
    b'"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","http_baggage":'
    b'"allocation_id=a-9,workflow_id=wf%2F3","server_name":"_","http_host":"api.local:8443"}'
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            COMBINED_502,
            event(
                COMBINED_502,
                ts_ns=T0,
                message="POST /v1/allocations 502",
                level="error",
                correlation_id="4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f",
                http_method="POST",
                http_path="/v1/allocations",
                http_status=502,
                owner_hint="ingress",
                error_type="HTTP 502",
                attrs={
                    "log": "access",
                    "format": "combined",
                    "request_id": "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f",
                    "client": "127.0.0.1",
                    "bytes_sent": 157,
                    "user_agent": "curl/8.5.0",
                    "protocol": "HTTP/1.1",
                },
            ),
            id="combined-502",
        ),
        pytest.param(
            COMBINED_EXTRAS,
            event(
                COMBINED_EXTRAS,
                ts_ns=T0,
                message="GET /v1/allocations/a-9 200",
                correlation_id="9a8b7c6d5e4f30211203f4e5d6c7b8a9",
                http_method="GET",
                http_path="/v1/allocations/a-9",
                http_status=200,
                duration_s=0.031,
                attrs={
                    "log": "access",
                    "format": "combined",
                    "request_id": "9a8b7c6d5e4f30211203f4e5d6c7b8a9",
                    "client": "10.0.0.8",
                    "remote_user": "alice",
                    "upstream_status": "502, 200",
                    "upstream_addr": "127.0.0.1:8001, 127.0.0.1:8002",
                    "upstream_response_time_s": "0.001, 0.029",
                    "request_time_s": 0.031,
                    "bytes_sent": 1534,
                    "user_agent": 'Mozilla/5.0 "beta" café',
                    "protocol": "HTTP/2.0",
                },
            ),
            id="combined-appended-fields-and-escapes",
        ),
        pytest.param(
            COMBINED_KEYED,
            event(
                COMBINED_KEYED,
                ts_ns=T0,
                message="DELETE /v1/allocations/a-9 403",
                level="warning",
                correlation_id="c-77",
                http_method="DELETE",
                http_path="/v1/allocations/a-9",
                http_status=403,
                duration_s=0.004,
                owner_hint="api_auth",
                error_type="HTTP 403",
                attrs={
                    "log": "access",
                    "format": "combined",
                    "request_id": "0badc0de",
                    "client": "10.0.0.8",
                    "upstream_status": "403",
                    "upstream_addr": "127.0.0.1:8001",
                    "request_time_s": 0.004,
                    "bytes_sent": 19,
                    "user_agent": "python-httpx/0.27.0",
                    "protocol": "HTTP/1.1",
                },
            ),
            id="combined-key-value-fields",
        ),
        pytest.param(
            COMBINED_TLS_ON_HTTP,
            event(
                COMBINED_TLS_ON_HTTP,
                ts_ns=T0,
                message="\x16\x03\x01\x02\x00\x01\x00\x01\\xfc\x03\x03 400",
                level="warning",
                http_status=400,
                error_type="HTTP 400",
                attrs={
                    "log": "access",
                    "format": "combined",
                    "client": "203.0.113.9",
                    "bytes_sent": 157,
                    "request": "\x16\x03\x01\x02\x00\x01\x00\x01\\xfc\x03\x03",
                },
            ),
            id="combined-tls-handshake-on-plain-http",
        ),
        pytest.param(
            COMMON,
            event(
                COMMON,
                ts_ns=T0,
                message="GET /healthz 200",
                http_method="GET",
                http_path="/healthz",
                http_status=200,
                attrs={
                    "log": "access",
                    "format": "combined",
                    "client": "127.0.0.1",
                    "bytes_sent": 2,
                    "protocol": "HTTP/1.1",
                },
            ),
            id="common-format",
        ),
        pytest.param(
            JSON_401,
            event(
                JSON_401,
                ts_ns=T0 + 123_000_000,
                service="api.local",
                message="POST /v1/allocations 401",
                level="warning",
                correlation_id="c-1",
                http_method="POST",
                http_path="/v1/allocations",
                http_status=401,
                duration_s=0.01,
                owner_hint="api_auth",
                error_type="HTTP 401",
                attrs={
                    "log": "access",
                    "format": "json",
                    "request_id": "5e0c1f3a9b2d4e6f8a7b6c5d4e3f2a1b",
                    "client": "10.0.0.5",
                    "upstream_status": "401",
                    "upstream_addr": "127.0.0.1:8001",
                    "upstream_response_time_s": "0.009",
                    "request_time_s": 0.01,
                    "bytes_sent": 57,
                    "user_agent": 'curl/8.5.0 "quoted"',
                    "ssl_protocol": "TLSv1.3",
                },
            ),
            id="json-401-header-correlation-id",
        ),
        pytest.param(
            JSON_NO_UPSTREAM,
            event(
                JSON_NO_UPSTREAM,
                ts_ns=T0,
                service="api.local",
                message="GET /v1/nodes 504",
                level="error",
                correlation_id="77aa",
                allocation_id="a-9",
                workflow_id="wf/3",
                trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
                http_method="GET",
                http_path="/v1/nodes",
                http_status=504,
                duration_s=5.001,
                owner_hint="ingress",
                error_type="HTTP 504",
                attrs={
                    "log": "access",
                    "format": "json",
                    "request_id": "77aa",
                    "rejected_ids": {
                        "http_x_correlation_id": "X-Correlation-ID header: correlation_id holds "
                        "' ' (U+0020) at position 3; allowed: ASCII letters, digits and "
                        ". _ : / @ + ~ -"
                    },
                    "parent_span_id": "00f067aa0ba902b7",
                    "client": "10.0.0.5",
                    "request_time_s": 5.001,
                    "host": "api.local:8443",
                    "protocol": "HTTP/1.1",
                },
            ),
            id="json-time-local-baggage-traceparent-bad-header",
        ),
    ],
)
def test_access_lines(line: bytes, expected: Event) -> None:
    assert read(line) == [expected]


ERROR_REFUSED = (
    b"2026/11/22 13:11:19 [error] 1234#1234: *5 connect() failed (111: Connection refused) "
    b'while connecting to upstream, client: 127.0.0.1, server: api.local, request: "POST '
    b'/v1/allocations HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/allocations", host: '
    b'"api.local"'
)
ERROR_NO_LIVE = (
    b"2026/11/22 13:11:19 [error] 1234#1234: *9 no live upstreams while connecting to upstream, "
    b'client: 127.0.0.1, server: api.local, request: "GET /v1/allocations/a-9 HTTP/1.1", '
    b'upstream: "http://api_backend/v1/allocations/a-9", host: "api.local"'
)
ERROR_TIMEOUT = (
    b"2026/11/22 13:11:19 [error] 1234#1234: *11 upstream timed out (110: Connection timed out) "
    b"while reading response header from upstream, client: 127.0.0.1, server: api.local, "
    b'request: "POST /v1/allocations HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/allocations"'
    b', host: "api.local"'
)
ERROR_NO_ROUTE = (
    b"2026/11/22 13:11:19 [error] 1234#1234: *13 connect() failed (113: No route to host) while "
    b'connecting to upstream, client: 10.0.0.7, server: api.local, request: "GET /healthz '
    b'HTTP/1.1", upstream: "http://10.0.0.99:8001/healthz", host: "api.local"'
)
ERROR_VERIFY = (
    b"2026/11/22 13:11:19 [error] 1234#1234: *15 SSL_do_handshake() failed (SSL: error:0A000086:"
    b"SSL routines::certificate verify failed) while SSL handshaking to upstream, client: "
    b'127.0.0.1, server: api.local, request: "POST /v1/allocations HTTP/1.1", upstream: '
    b'"https://127.0.0.1:8443/v1/allocations", host: "api.local"'
)
ERROR_EXPIRED = (
    b"2026/11/22 13:11:19 [info] 1234#1234: *17 SSL_do_handshake() failed (SSL: error:0A000415:"
    b"SSL routines::sslv3 alert certificate expired:SSL alert number 45) while SSL handshaking, "
    b"client: 10.0.0.8, server: 0.0.0.0:443"
)
ERROR_PEER_CLOSED = (
    b"2026/11/22 13:11:19 [info] 1234#1234: *19 peer closed connection in SSL handshake while "
    b"SSL handshaking, client: 10.0.0.8, server: 0.0.0.0:443"
)
ERROR_CANNOT_LOAD = (
    b'2026/11/22 13:11:19 [emerg] 1#1: cannot load certificate "/etc/nginx/tls/api.crt": '
    b"BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:"
    b"calling fopen(/etc/nginx/tls/api.crt, r) error:10000080:BIO routines::no such file)"
)
ERROR_NOTICE = b'2026/11/22 13:11:19 [notice] 1#1: using the "epoll" event method'

UPSTREAM_CONTEXT = {
    "client": "127.0.0.1",
    "server": "api.local",
    "request": "POST /v1/allocations HTTP/1.1",
    "upstream": "http://127.0.0.1:8001/v1/allocations",
    "host": "api.local",
}


def error_attrs(connection: int | None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"log": "error", "nginx_level": "error", "pid": 1234, "tid": 1234}
    if connection is not None:
        attrs["connection"] = connection
    attrs.update(extra)
    return attrs


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            ERROR_REFUSED,
            event(
                ERROR_REFUSED,
                ts_ns=T0,
                service="api.local",
                message="connect() failed (111: Connection refused) while connecting to upstream",
                level="error",
                http_method="POST",
                http_path="/v1/allocations",
                owner_hint="ingress",
                error_type="connection_refused",
                attrs=error_attrs(
                    5,
                    **UPSTREAM_CONTEXT,
                    action="connecting to upstream",
                    errno=111,
                    errno_text="Connection refused",
                    protocol="HTTP/1.1",
                ),
            ),
            id="connection-refused",
        ),
        pytest.param(
            ERROR_NO_LIVE,
            event(
                ERROR_NO_LIVE,
                ts_ns=T0,
                service="api.local",
                message="no live upstreams while connecting to upstream",
                level="error",
                http_method="GET",
                http_path="/v1/allocations/a-9",
                owner_hint="ingress",
                error_type="no_live_upstreams",
                attrs=error_attrs(
                    9,
                    client="127.0.0.1",
                    server="api.local",
                    request="GET /v1/allocations/a-9 HTTP/1.1",
                    upstream="http://api_backend/v1/allocations/a-9",
                    host="api.local",
                    action="connecting to upstream",
                    protocol="HTTP/1.1",
                ),
            ),
            id="no-live-upstreams",
        ),
        pytest.param(
            ERROR_TIMEOUT,
            event(
                ERROR_TIMEOUT,
                ts_ns=T0,
                service="api.local",
                message="upstream timed out (110: Connection timed out) while reading response "
                "header from upstream",
                level="error",
                http_method="POST",
                http_path="/v1/allocations",
                owner_hint="ingress",
                error_type="upstream_timed_out",
                attrs=error_attrs(
                    11,
                    **UPSTREAM_CONTEXT,
                    action="reading response header from upstream",
                    errno=110,
                    errno_text="Connection timed out",
                    protocol="HTTP/1.1",
                ),
            ),
            id="upstream-timed-out",
        ),
        pytest.param(
            ERROR_NO_ROUTE,
            event(
                ERROR_NO_ROUTE,
                ts_ns=T0,
                service="api.local",
                message="connect() failed (113: No route to host) while connecting to upstream",
                level="error",
                http_method="GET",
                http_path="/healthz",
                owner_hint="ingress",
                error_type="no_route_to_host",
                attrs=error_attrs(
                    13,
                    client="10.0.0.7",
                    server="api.local",
                    request="GET /healthz HTTP/1.1",
                    upstream="http://10.0.0.99:8001/healthz",
                    host="api.local",
                    action="connecting to upstream",
                    errno=113,
                    errno_text="No route to host",
                    protocol="HTTP/1.1",
                ),
            ),
            id="no-route-to-host",
        ),
        pytest.param(
            ERROR_VERIFY,
            event(
                ERROR_VERIFY,
                ts_ns=T0,
                service="api.local",
                message="SSL_do_handshake() failed (SSL: error:0A000086:SSL routines::certificate "
                "verify failed) while SSL handshaking to upstream",
                level="error",
                http_method="POST",
                http_path="/v1/allocations",
                owner_hint="cert",
                error_type="certificate_verify_failed",
                attrs=error_attrs(
                    15,
                    **dict(UPSTREAM_CONTEXT, upstream="https://127.0.0.1:8443/v1/allocations"),
                    action="SSL handshaking to upstream",
                    ssl_error="error:0A000086:SSL routines::certificate verify failed",
                    protocol="HTTP/1.1",
                ),
            ),
            id="upstream-certificate-verify-failed",
        ),
        pytest.param(
            ERROR_EXPIRED,
            event(
                ERROR_EXPIRED,
                ts_ns=T0,
                message="SSL_do_handshake() failed (SSL: error:0A000415:SSL routines::sslv3 alert "
                "certificate expired:SSL alert number 45) while SSL handshaking",
                level="info",
                owner_hint="cert",
                error_type="certificate_expired",
                attrs=error_attrs(
                    17,
                    nginx_level="info",
                    client="10.0.0.8",
                    server="0.0.0.0:443",
                    action="SSL handshaking",
                    ssl_error="error:0A000415:SSL routines::sslv3 alert certificate expired:"
                    "SSL alert number 45",
                ),
            ),
            id="client-rejects-expired-certificate",
        ),
        pytest.param(
            ERROR_PEER_CLOSED,
            event(
                ERROR_PEER_CLOSED,
                ts_ns=T0,
                message="peer closed connection in SSL handshake while SSL handshaking",
                level="info",
                owner_hint="cert",
                error_type="ssl_handshake_closed",
                attrs=error_attrs(
                    19,
                    nginx_level="info",
                    client="10.0.0.8",
                    server="0.0.0.0:443",
                    action="SSL handshaking",
                ),
            ),
            id="peer-closed-in-handshake",
        ),
        pytest.param(
            ERROR_CANNOT_LOAD,
            event(
                ERROR_CANNOT_LOAD,
                ts_ns=T0,
                message='cannot load certificate "/etc/nginx/tls/api.crt": BIO_new_file() failed '
                "(SSL: error:80000002:system library::No such file or directory:calling "
                "fopen(/etc/nginx/tls/api.crt, r) error:10000080:BIO routines::no such file)",
                level="critical",
                owner_hint="cert",
                error_type="certificate_load_failed",
                attrs={
                    "log": "error",
                    "nginx_level": "emerg",
                    "pid": 1,
                    "tid": 1,
                    "ssl_error": "error:80000002:system library::No such file or directory:"
                    "calling fopen(/etc/nginx/tls/api.crt, r) error:10000080:BIO routines::no "
                    "such file",
                },
            ),
            id="startup-cannot-load-certificate",
        ),
        pytest.param(
            ERROR_NOTICE,
            event(
                ERROR_NOTICE,
                ts_ns=T0,
                message='using the "epoll" event method',
                level="info",
                attrs={"log": "error", "nginx_level": "notice", "pid": 1, "tid": 1},
            ),
            id="notice",
        ),
    ],
)
def test_error_lines(line: bytes, expected: Event) -> None:
    assert read(line) == [expected]


def test_error_time_uses_the_server_offset() -> None:
    line = ERROR_NOTICE.replace(b"13:11:19", b"14:11:19")
    (item,) = parse([line], ORIGIN, tz_offset_s=3600.0)
    assert isinstance(item, Event)
    assert item.ts_ns == T0


#: 2026-07-22T13:11:19Z, in summer time.
T_SUMMER = 1_784_725_879_000_000_000


@pytest.mark.parametrize(
    ("stamp", "zone", "ts_ns"),
    [
        (b"2026/11/22 13:11:19", None, T0),
        (b"2026/11/22 13:11:19", UTC, T0),
        (b"2026/11/22 14:11:19", timezone(timedelta(hours=1)), T0),
        (b"2026/11/22 14:11:19", ZoneInfo("Europe/Berlin"), T0),  # CET, +01:00
        (b"2026/07/22 15:11:19", ZoneInfo("Europe/Berlin"), T_SUMMER),  # CEST, +02:00
        (b"2026/07/22 14:11:19", timezone(timedelta(hours=1)), T_SUMMER),  # fixed: no DST
        (b"2026/11/22 08:11:19", ZoneInfo("America/New_York"), T0),  # EST, -05:00
    ],
)
def test_error_time_is_read_in_the_server_zone(
    stamp: bytes, zone: tzinfo | None, ts_ns: int
) -> None:
    # A multi-line record too: its first line's time is the record's.
    lines = [
        ERROR_NOTICE.replace(b"2026/11/22 13:11:19", stamp),
        FASTCGI[0].replace(b"2026/11/22 13:11:19", stamp),
        *FASTCGI[1:],
    ]
    items = list(parse(lines, ORIGIN, zone=zone))
    assert [(type(i).__name__, getattr(i, "ts_ns", None)) for i in items] == [
        ("Event", ts_ns),
        ("Event", ts_ns),
    ]


def test_a_zone_and_an_offset_together_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"^give the nginx server's zone or its tz_offset_s, not both$"
    ):
        parse([ERROR_NOTICE], ORIGIN, tz_offset_s=3600.0, zone=UTC)


FASTCGI = [
    b'2026/11/22 13:11:19 [error] 1234#1234: *7 FastCGI sent in stderr: "PHP message: PHP '
    b"Fatal error:  Uncaught Exception: boom in /var/www/index.php:5",
    b"Stack trace:",
    b"",
    b'#0 {main}" while reading response header from upstream, client: 10.0.0.1, server: '
    b'example.com, request: "GET / HTTP/1.1", upstream: "fastcgi://unix:/run/php/fpm.sock:", '
    b'host: "example.com"',
]


def test_multi_line_error_record_is_one_event() -> None:
    items = read(*FASTCGI, COMMON)
    joined = b"\n".join(FASTCGI)
    assert items[0] == event(
        joined,
        ts_ns=T0,
        service="example.com",
        message='FastCGI sent in stderr: "PHP message: PHP Fatal error: Uncaught Exception: boom '
        'in /var/www/index.php:5 Stack trace: #0 {main}" while reading response header from '
        "upstream",
        level="error",
        http_method="GET",
        http_path="/",
        attrs=error_attrs(
            7,
            client="10.0.0.1",
            server="example.com",
            request="GET / HTTP/1.1",
            upstream="fastcgi://unix:/run/php/fpm.sock:",
            host="example.com",
            action="reading response header from upstream",
            protocol="HTTP/1.1",
        ),
    )
    assert [type(item) for item in items] == [Event, Event]
    assert isinstance(items[1], Event)
    assert items[1].http_path == "/healthz"


@pytest.mark.parametrize(
    "follower",
    [pytest.param([ERROR_NOTICE], id="next-record"), pytest.param([], id="end-of-input")],
)
def test_unclosed_quote_ends_at_the_next_record(follower: list[bytes]) -> None:
    items = read(FASTCGI[0], FASTCGI[1], *follower)
    assert len(items) == 1 + len(follower)
    first = items[0]
    assert isinstance(first, Event)
    assert first.raw == (FASTCGI[0] + b"\n" + FASTCGI[1]).decode()
    assert first.message.endswith("index.php:5 Stack trace:")
    assert "client" not in first.attrs


def test_rejects_name_the_line_and_keep_batch_mates() -> None:
    lines = [
        COMMON,
        b"x" * (MAX_LINE_BYTES + 1),
        b'127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "GET /caf\xff HTTP/1.1" 200 2',
        b"",
        b"   ",
        b"Nov 22 13:11:19 api nginx[1234]: worker process exited",
        b'{"time_iso8601": "2026-11-22T13:11:19+00:00", "status": ',
        b'["2026-11-22T13:11:19+00:00", 200]',
        b'{"remote_addr": "10.0.0.5", "status": "200"}',
        b'{"time_iso8601": "2026-11-31T13:11:19+00:00", "status": "200"}',
        b'{"msec": "1795353079.123"}',
        b'{"msec": "1795353079.123", "status": "OK"}',
        b'127.0.0.1 - - [31/Nov/2026:13:11:19 +0000] "GET / HTTP/1.1" 200 2 "-" "-"',
        b"2026/13/22 13:11:19 [error] 1#1: boom",
        COMMON.replace(b" 200 ", b" 999 "),
        COMMON,
    ]
    items = read(*lines)
    rejects = [item for item in items if isinstance(item, Reject)]
    assert [(r.line_no, r.reason) for r in rejects] == [
        (2, "line 2 is longer than 1 MiB (1,048,576 bytes)"),
        (3, "line 3 is not valid UTF-8 (byte 0xff at offset 52)"),
        (6, "line 6 is neither an nginx access-log line (JSON or combined) nor an error-log line"),
        (7, "line 7 is not valid JSON: unexpected end of data: line 1 column 57 (char 56)"),
        (8, "line 8 is a JSON list, not an object"),
        (
            9,
            "line 9 has no time field (one of msec, time_iso8601, time_local, timestamp, "
            "@timestamp, time, ts)",
        ),
        (
            10,
            "line 10 has an unreadable 'time_iso8601': '2026-11-31T13:11:19+00:00' is not a "
            "valid date: day is out of range for month",
        ),
        (11, "line 11 has no 'status' field"),
        (12, "line 12 has status 'OK', which is not an HTTP status"),
        (
            13,
            "line 13 has an unreadable [time_local]: '31/Nov/2026:13:11:19 +0000' is not a "
            "valid date: day is out of range for month",
        ),
        (
            14,
            "line 14 has an unreadable error-log time: '2026/13/22 13:11:19' is not a valid "
            "date: month must be in 1..12",
        ),
        (15, "line 15 has status '999', which is not an HTTP status"),
    ]
    assert all(r.source == "nginx" and r.origin == ORIGIN for r in rejects)
    assert (
        rejects[1].excerpt
        == '127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "GET /caf\ufffd HTTP/1.1" 200 2'
    )
    assert len(rejects[0].excerpt) == 200
    events = [item for item in items if isinstance(item, Event)]
    assert [e.raw for e in events] == [COMMON.decode(), COMMON.decode()]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"body_bytes_sent": "\u00b2", "request_time": "inf"}, (None, None)),
        ({"body_bytes_sent": "9" * 30, "request_time": "-1"}, (None, None)),
        ({"request_time": "0.01s"}, (None, None)),
        ({"body_bytes_sent": 12, "request_time": 0.5}, (12, 0.5)),
    ],
)
def test_odd_numbers_are_left_out(
    fields: dict[str, Any], expected: tuple[int | None, float | None]
) -> None:
    line = orjson.dumps({"msec": "1795353079", "status": "200", **fields})
    (item,) = read(line)
    assert isinstance(item, Event)
    assert (item.attrs.get("bytes_sent"), item.duration_s) == expected


@pytest.mark.parametrize(
    ("rest", "expected"),
    [
        pytest.param(b"", {}, id="nothing-appended"),
        pytest.param(b' "-"', {}, id="no-request-id"),
        pytest.param(b" rid7", {"request_id": "rid7"}, id="bare-request-id"),
        pytest.param(
            b' r1 - "504" 60.002 60.001 0.5 "unix:/run/api.sock" extra',
            {
                "request_id": "r1",
                "upstream_status": "504",
                "request_time_s": 60.002,
                "upstream_response_time_s": "60.001",
                "upstream_addr": "unix:/run/api.sock",
            },
            id="by-shape-surplus-ignored",
        ),
        pytest.param(
            b' r1 rt=- us=502 "ua=[::1]:8001" urt=0.010',
            {
                "request_id": "r1",
                "upstream_status": "502",
                "upstream_addr": "[::1]:8001",
                "upstream_response_time_s": "0.010",
            },
            id="key-value",
        ),
        pytest.param(b' r1 "unclosed', {"request_id": "r1"}, id="unclosed-quote-stops"),
        pytest.param(b" rid=r2 r3", {"request_id": "r2"}, id="keyed-request-id-first"),
    ],
)
def test_combined_appended_fields(rest: bytes, expected: dict[str, Any]) -> None:
    (item,) = read(COMMON + b' "-" "-"' + rest)
    assert isinstance(item, Event)
    keys = ("request_id", "upstream_status", "upstream_addr", "upstream_response_time_s")
    found = {key: item.attrs[key] for key in (*keys, "request_time_s") if key in item.attrs}
    assert found == expected
    assert item.correlation_id == expected.get("request_id")


def test_json_format_without_escape_json() -> None:
    """``log_format ... '{...}'`` without ``escape=json`` writes nginx's default escapes."""
    line = (
        b'{"time_local":"22/Nov/2026:13:11:19 +0000","request":"GET /caf\\xC3\\xA9 HTTP/1.1",'
        b'"status":"200","http_user_agent":"say \\x22hi\\x22 \\x5C \\xFF"}'
    )
    (item,) = read(line)
    assert isinstance(item, Event)
    assert (item.http_path, item.attrs["user_agent"]) == ("/caf\u00e9", 'say "hi" \\ \\xff')
    assert item.raw == line.decode()
    (reject,) = read(line.replace(b'"status"', b"status"))
    assert isinstance(reject, Reject)
    assert reject.reason == (
        "line 1 is not valid JSON: invalid escaped sequence in string: line 1 column 63 (char 62)"
    )


@pytest.mark.parametrize(
    ("fields", "ts_ns"),
    [
        ({"timestamp": "2026-11-22T13:11:19.5Z"}, T0 + S // 2),
        ({"time": "22/Nov/2026:13:11:19 +0000"}, T0),
        ({"ts": "1795353079.25"}, T0 + S // 4),
        ({"@timestamp": 1795353079}, T0),
        ({"time_local": "", "time_iso8601": "-", "ts": "2026-11-22T13:11:19Z"}, T0),
    ],
)
def test_json_time_fields(fields: dict[str, Any], ts_ns: int) -> None:
    (item,) = read(orjson.dumps({**fields, "status": 204}))
    assert isinstance(item, Event)
    assert item.ts_ns == ts_ns


def test_json_first_listed_name_wins() -> None:
    line = orjson.dumps(
        {
            "uri": "/v1/decoded path",
            "request_uri": "/v1/raw%20path?x=1",
            "method": "PUT",
            "request_method": "POST",
            "msec": "1795353079",
            "status": "200",
            "client": "10.9.9.9",
            "remote_addr": "",
            "host": "api.local",
        }
    )
    (item,) = read(line)
    assert isinstance(item, Event)
    assert (item.http_method, item.http_path, item.service) == (
        "POST",
        "/v1/raw%20path",
        "api.local",
    )
    assert item.attrs["client"] == "10.9.9.9"  # remote_addr is empty, so the next name counts


def test_json_identifier_problems_are_noted() -> None:
    line = orjson.dumps(
        {
            "msec": "1795353079",
            "status": "200",
            "request_id": "r 1",
            "http_baggage": "correlation_id=%ff,allocation_id=a-1",
            "http_traceparent": "garbage",
        }
    )
    (item,) = read(line)
    assert isinstance(item, Event)
    # The bad baggage member is refused alone; its batch-mate allocation_id is kept.
    assert (item.correlation_id, item.allocation_id, item.trace_id) == (None, "a-1", None)
    assert item.attrs["rejected_ids"] == {
        "http_traceparent": "traceparent header is malformed: 'garbage'",
        "http_baggage": "baggage header: correlation_id holds '\ufffd' (U+FFFD) at position 0; "
        "allowed: ASCII letters, digits and . _ : / @ + ~ -",
        "request_id": "correlation_id holds ' ' (U+0020) at position 1; allowed: ASCII letters, "
        "digits and . _ : / @ + ~ -",
    }


def test_multi_line_record_stops_at_unreadable_or_oversized_lines() -> None:
    items = read(FASTCGI[0], b"PHP \xff", FASTCGI[1])
    assert [type(item) for item in items] == [Event, Reject, Reject]
    assert isinstance(items[1], Reject)
    assert items[1].reason == "line 2 is not valid UTF-8 (byte 0xff at offset 4)"
    big = b"y" * (MAX_LINE_BYTES - 1000)
    items = read(FASTCGI[0], big, b"z" * 2000)
    assert [type(item) for item in items] == [Event, Reject]
    first = items[0]
    assert isinstance(first, Event)
    assert first.raw == (FASTCGI[0] + b"\n" + big).decode()
    assert isinstance(items[1], Reject)
    assert items[1].line_no == 3


def test_unbalanced_ssl_error_text_is_kept() -> None:
    line = ERROR_VERIFY.split(b") while")[0]
    (item,) = read(line)
    assert isinstance(item, Event)
    assert item.attrs["ssl_error"] == "error:0A000086:SSL routines::certificate verify failed"
    assert item.error_type == "certificate_verify_failed"


def test_crlf_line_endings_are_tolerated() -> None:
    (item,) = read(COMMON + b"\r")
    assert isinstance(item, Event)
    assert item.http_status == 200
    assert item.raw == COMMON.decode()


# -- linking error lines to access lines -------------------------------------------------------


def test_sample_files_link_errors_to_their_requests() -> None:
    lines = (SAMPLES / "access.log").read_bytes().splitlines()
    lines += (SAMPLES / "error.log").read_bytes().splitlines()
    events = [item for item in parse(lines, ORIGIN) if isinstance(item, Event)]
    assert len(events) == 9
    linked = link_errors_to_access(events)
    by_hash = {e.hash: e for e in events}
    summary = [
        (
            e.attrs["log"],
            e.error_type,
            e.correlation_id,
            by_hash[e.attrs["linked_access_hash"]].http_status
            if "linked_access_hash" in e.attrs
            else None,
        )
        for e in linked
    ]
    assert summary == [
        ("access", "HTTP 502", "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", None),
        ("access", "HTTP 502", "9a8b7c6d5e4f30211203f4e5d6c7b8a9", None),
        ("access", "HTTP 504", "0badc0de0badc0de0badc0de0badc0de", None),
        ("access", None, "11112222333344445555666677778888", None),
        ("error", None, None, None),
        ("error", "connection_refused", "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", 502),
        ("error", "no_live_upstreams", "9a8b7c6d5e4f30211203f4e5d6c7b8a9", 502),
        ("error", "upstream_timed_out", "0badc0de0badc0de0badc0de0badc0de", 504),
        ("error", "connection_refused", None, None),  # 21 s after the last such request
    ]
    assert linked[5].attrs["request_id"] == "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"
    assert linked[:5] == events[:5]


def access(
    ts_ns: int, cid: str, *, client: str = "127.0.0.1", duration_s: float | None = None
) -> Event:
    return Event(
        ts_ns=ts_ns,
        layer="ingress",
        source="nginx",
        origin=ORIGIN,
        message="POST /v1/allocations 502",
        raw=cid,
        hash=content_hash("nginx", cid),
        correlation_id=cid,
        http_method="POST",
        http_path="/v1/allocations",
        http_status=502,
        duration_s=duration_s,
        attrs={"log": "access", "client": client, "request_id": cid},
    )


def error(ts_ns: int, *, client: str = "127.0.0.1", path: str = "/v1/allocations") -> Event:
    return Event(
        ts_ns=ts_ns,
        layer="ingress",
        source="nginx",
        origin=ORIGIN,
        message="connect() failed",
        raw=f"error {ts_ns}",
        hash=content_hash("nginx", f"error {ts_ns}"),
        http_method="POST",
        http_path=path,
        attrs={"log": "error", "client": client},
    )


@pytest.mark.parametrize(
    ("accesses", "failure", "expected"),
    [
        pytest.param([access(T0, "c-1")], error(T0), "c-1", id="same-second"),
        pytest.param([access(T0, "c-1")], error(T0 - 5 * S), "c-1", id="5s-before-end"),
        pytest.param([access(T0, "c-1")], error(T0 - 6 * S), None, id="6s-before-end"),
        pytest.param([access(T0, "c-1")], error(T0 + 5 * S), "c-1", id="5s-after-end"),
        pytest.param(
            [access(T0 + 60 * S, "c-1", duration_s=60.0)],
            error(T0 + 1 * S),
            "c-1",
            id="inside-a-long-request",
        ),
        pytest.param(
            [access(T0 - 2 * S, "c-1"), access(T0 + 1 * S, "c-2"), access(T0 + 4 * S, "c-3")],
            error(T0),
            "c-2",
            id="nearest-of-three",
        ),
        pytest.param(
            [access(T0, "c-1", duration_s=1.0), access(T0 + 60 * S, "c-2", duration_s=61.0)],
            error(T0),
            "c-1",
            id="both-hold-it-nearest-end-wins",
        ),
        pytest.param([access(T0, "c-1", client="10.0.0.9")], error(T0), None, id="other-client"),
        pytest.param([access(T0, "c-1")], error(T0, path="/v1/nodes"), None, id="other-path"),
        pytest.param([], error(T0), None, id="no-access-lines"),
    ],
)
def test_link_errors_to_access(accesses: list[Event], failure: Event, expected: str | None) -> None:
    linked = link_errors_to_access([*accesses, failure])
    assert linked[: len(accesses)] == accesses
    result = linked[-1]
    assert result.correlation_id == expected
    if expected is None:
        assert result == failure
    else:
        assert result.attrs == {
            "log": "error",
            "client": "127.0.0.1",
            "request_id": expected,
            "linked_access_hash": content_hash("nginx", expected),
        }
        assert failure.attrs == {"log": "error", "client": "127.0.0.1"}  # input left alone


def test_link_leaves_other_sources_and_linked_errors_alone() -> None:
    foreign = dataclasses.replace(error(T0), source="ndjson")
    already = dataclasses.replace(error(T0), correlation_id="c-9")
    events = [access(T0, "c-1"), foreign, already]
    assert link_errors_to_access(events) == events


# -- properties ---------------------------------------------------------------------------------


@given(st.lists(st.binary(max_size=300), max_size=8))
def test_never_raises_on_arbitrary_bytes(lines: list[bytes]) -> None:
    for item in parse(lines, ORIGIN):
        if isinstance(item, Reject):
            assert 1 <= item.line_no <= len(lines)
            assert item.reason.startswith(f"line {item.line_no} ")
        else:
            assert item.level in LEVELS
            assert item.layer == "ingress"
            orjson.dumps(item.attrs)  # the store writes attrs as JSON


@given(
    st.lists(
        st.sampled_from([COMBINED_502, JSON_401, ERROR_REFUSED, FASTCGI[0], FASTCGI[1]]),
        max_size=6,
    ).flatmap(
        lambda lines: st.tuples(
            st.just(lines),
            st.lists(st.tuples(st.integers(0, 400), st.binary(min_size=1, max_size=3)), max_size=3),
        )
    )
)
def test_never_raises_on_damaged_lines(case: tuple[list[bytes], list[tuple[int, bytes]]]) -> None:
    lines, damage = case
    damaged = list(lines)
    for index, (offset, junk) in enumerate(damage):
        if damaged:
            target = index % len(damaged)
            line = damaged[target]
            damaged[target] = (
                line[: offset % (len(line) + 1)] + junk + line[offset % (len(line) + 1) :]
            )
    items = list(parse(damaged, ORIGIN))
    assert all(isinstance(item, Event | Reject) for item in items)
    for item in items:
        if isinstance(item, Event):
            orjson.dumps(item.attrs)
    link_errors_to_access([item for item in items if isinstance(item, Event)])


def nginx_escape(text: str) -> str:
    """nginx's default access-log escaping: ``"``, ``\\`` and non-printable bytes as ``\\xHH``."""
    return "".join(
        f"\\x{byte:02X}" if byte in b'"\\' or not 0x20 <= byte < 0x7F else chr(byte)
        for byte in text.encode()
    )


@given(
    agent=st.text(min_size=1, max_size=60).filter(lambda text: text != "-"),
    status=st.integers(100, 599),
    request_id=st.from_regex(r"[0-9a-f]{32}", fullmatch=True),
    path=st.from_regex(r"/[a-z0-9/_-]{0,30}", fullmatch=True),
)
def test_combined_round_trip(agent: str, status: int, request_id: str, path: str) -> None:
    line = (
        f'10.1.2.3 - - [22/Nov/2026:13:11:19 +0000] "PUT {path} HTTP/1.1" {status} 0 "-" '
        f'"{nginx_escape(agent)}" "{request_id}"'
    ).encode()
    (item,) = read(line)
    assert isinstance(item, Event)
    assert (item.http_method, item.http_path, item.http_status) == ("PUT", path, status)
    assert (item.correlation_id, item.attrs["user_agent"]) == (request_id, agent)


# Captured from nginx/1.22.1 (Debian) serving a folder on 127.0.0.1: GET of a missing file, of
# a folder without an index (autoindex off), and of a location under `deny all`.
_BENIGN_LINES = [
    b'2026/11/29 01:51:46 [error] 3602#3602: *1 open() "/tmp/ngx/html/favicon.ico" failed '
    b"(2: No such file or directory), client: 127.0.0.1, server: files.local, request: "
    b'"GET /favicon.ico HTTP/1.1", host: "127.0.0.1:18089"',
    b'2026/11/29 01:51:46 [error] 3602#3602: *2 directory index of "/tmp/ngx/html/dir/" is '
    b'forbidden, client: 127.0.0.1, server: files.local, request: "GET /dir/ HTTP/1.1", '
    b'host: "127.0.0.1:18089"',
    b"2026/11/29 01:51:46 [error] 3602#3602: *3 access forbidden by rule, client: 127.0.0.1, "
    b'server: files.local, request: "GET /private/x HTTP/1.1", host: "127.0.0.1:18089"',
]


def test_a_clients_missing_or_forbidden_file_is_no_ingress_failure() -> None:
    # nginx logs these at [error]; they are the access log's 404 and 403s. Left at error, the
    # owner table would read "No such file or directory" as a missing deploy prerequisite.
    from correlator.verdict import is_failure

    events = [e for e in parse(_BENIGN_LINES, "error.log") if isinstance(e, Event)]
    assert [(e.level, e.error_type, e.owner_hint) for e in events] == [
        ("warning", "file_not_found", None),
        ("warning", "directory_index_forbidden", None),
        ("warning", "forbidden_by_rule", None),
    ]
    assert not any(map(is_failure, events))


# -- hostile input: time in proportion to the line ----------------------------------------------

#: A 64 KB error-log message of "(1: " (nginx's "(111: Connection refused)" never closed) took
#: 6 s, 256 KB 3 minutes: the errno pattern scanned from every "(" to the end. " while "
#: likewise, and an unterminated quote of a combined line backtracked (0.46 s for 1 MiB).
HOSTILE_LINES = [
    pytest.param(b"2026/11/22 13:11:19 [error] 1#1: *5 " + b'"(1: ' * 16_000, id="errno"),
    pytest.param(b"2026/11/22 13:11:19 [error] 1#1: *5 " + b" while " * 9_000 + b",", id="while"),
    pytest.param(
        b'1 - - [22/Nov/2026:13:11:19 +0000] "GET / HTTP/1.1" 200 1 "' + b"a" * MAX_LINE_BYTES,
        id="unterminated-referer",
    ),
]


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_a_hostile_line_costs_time_in_proportion_to_it(line: bytes) -> None:
    started = time.process_time()
    items = read(COMBINED_502, *[line[:MAX_LINE_BYTES]] * 4, COMBINED_502)
    assert time.process_time() - started < 1.0
    assert len(items) == 6


def test_the_errno_and_action_of_a_message() -> None:
    line = (
        b"2026/11/22 13:11:19 [error] 1#1: *5 recv() (x) failed (104: Connection reset by peer)"
        b" (110: later) while reading, a comma while reading response header from upstream"
    )
    (item,) = read(line)
    assert isinstance(item, Event)
    assert (item.attrs["errno"], item.attrs["errno_text"]) == (104, "Connection reset by peer")
    assert item.attrs["action"] == "reading response header from upstream"
