"""The native nginx mapping against the parser, its reference.

``_nginx_batch.nginx_table`` (the ingest's table path: the compiled mapping reads the
``combined`` access lines it is certain of, the parser every other line, run by run) must give
exactly the rows and rejects the parser gives for the same lines: every column, hashes
included, whatever the lines. The lines are ``combined`` lines built from fields of every shape
the mapping distinguishes (each field right, wrong, clipped, escaped, quoted, absent, and the
appended ``$request_id``, keyed timings, statuses, durations, addresses, lists and headers),
mixed with the real samples' access and error lines, error messages left open over the lines
after them, continuation lines and bytes of any sort. Other tests prove the native part does
the work: the benchmark's and the samples' access lines are declined by none.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.text import NGINX_ACCESS
from correlator._schema import events_table
from correlator.model import Reject
from correlator.sources import _nginx_batch
from correlator.sources._native import runs as declined_runs
from correlator.sources._nginx_batch import nginx_table
from correlator.sources._record_native import map_nginx  # CI builds it: its absence fails
from correlator.sources._row_columns import row_columns
from correlator.sources.nginx import parse

_SAMPLES: Final = Path(__file__).parents[1] / "samples" / "nginx"
_ACCESS: Final = (_SAMPLES / "access.log").read_bytes().splitlines()
_ERROR: Final = (_SAMPLES / "error.log").read_bytes().splitlines()

_CLIENTS: Final = ["127.0.0.1", "10.0.0.1", "::1", 'a"b', "-", "é", "[::1]", "{x}", "2026/1"]
_USERS: Final = ["-", "alice", 'bo"b', "\\x22", "ü"]
_TIMES: Final = [
    "27/Nov/2026:00:00:00 +0000",
    "29/Feb/2024:23:59:60 -0130",
    "31/Dec/2026:23:59:59 +2359",
    "30/Feb/2026:00:00:00 +0000",
    "29/Feb/2026:00:00:00 +0000",
    "27/nov/2026:00:00:00 +0000",
    "27/NOV/2026:00:00:00 +0000",
    "27/Nov/1600:00:00:00 +0000",
    "27/Nov/2026:24:00:00 +0000",
    "27/Nov/2026:00:60:00 +0000",
    "27/Nov/2026:00:00:61 +0000",
    "27/Nov/2026:00:00:00 +2400",
    "27/Nov/2026:00:00:00 +0060",
    "00/Nov/2026:00:00:00 +0000",
    "01/Jan/1678:00:00:00 +0000",
    "31/Dec/2261:23:59:59 -2359",
    "01/Jan/2262:00:00:00 +0000",
    "11/Apr/2262:23:47:16 +0000",
    "21/Sep/1677:00:12:44 +0000",
    "27/Nov/2026:00:00:00",
    "27/Nov/2026:00:00:00 +000",
    "27/Nov/2026:00:00:00.5 +0000",
    "27/Nov/2026 00:00:00 +0000",
    "",
]
_METHODS: Final = ["GET", "POST", "M-SEARCH", "PROP_FIND", "get", "A" * 32, "A" * 33, "G1", ""]
_TARGETS: Final = [
    "/v1/allocations/ax-1",
    "/v1/x?y=1&z",
    "?q",
    "/",
    '/a"b',
    "/a\\x22b",
    "/ü",
    "/" + "p" * 500,
    "/" + "p" * 510,
    "*",
]
_PROTOCOLS: Final = [None, "HTTP/1.1", "HTTP/2", "HTTP/2.0", "HTTP/1.10", "HTTP/x", "http/1.1"]
_STATUSES: Final = ["200", "201", "404", "401", "403", "500", "502", "504", "099", "600", "2x0"]
_SENT: Final = ["0", "85", "0085", "-", "9" * 18, "9" * 19, "", "-5", "85x"]
_PAIRS: Final = [
    None,
    ("-", "curl/8.5.0"),
    ("-", "-"),
    ("", ""),
    ("http://x/", 'Mozilla/5.0 "quoted"'),
    ("-", "a" * 600),
    ("-", "ansible-httpget"),
]
_EXTRAS: Final = [
    '"7e74ce7fd8ef4fa6f03762413d691056"',
    "7e74ce7fd8ef4fa6f03762413d691056",
    '"-"',
    "-",
    '""',
    "abc",
    '"req id"',
    "rid=abc-1",
    '"rid=a b"',
    "rid=bad!id",
    "rid=",
    "rid=-",
    "x" * 257,
    "y" * 600,
    "rt=0.111",
    "rt=5",
    "rt=0.000",
    "rt=00.50",
    "rt=1e3",
    "rt=0.00001",
    "rt=0.0001",
    "rt=-1",
    "rt=inf",
    "rt=1_0",
    "rt=0.1234567890123456",
    "rt=12345678901234567",
    "rt=abc",
    'rt="0.2 "',
    'uct="0.001"',
    'urt="0.111"',
    "urt=0.1,0.2",
    "us=502",
    "ups=502, 504",
    "ua=127.0.0.1:8001",
    "upstream=unix:/run/api.sock",
    "502",
    "200",
    "502:504",
    "502, 504",
    "0.173",
    "1.5.3",
    "127.0.0.1:36731",
    "api.local:443",
    ":80",
    "127:800",
    "unix:/tmp/s",
    "[::1]:8001",
    "cid=abc",
    "cid=-",
    "http_x_correlation_id=abc",
    "host=api.local",
    "server_name=api",
    "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    '"unterminated',
    'a"b',
    "k=v",
    "=v",
]
_TRAILING: Final = ["", "", "", " ", "  ", "\r", "\r\r", " \r", "\r ", "\t", "é", "\\x22"]


@st.composite
def _combined(draw: st.DrawFn) -> bytes:
    """A ``combined`` line, its fields drawn from the shapes above (most of them readable)."""
    method = draw(st.sampled_from(_METHODS))
    target = draw(st.sampled_from(_TARGETS))
    protocol = draw(st.sampled_from(_PROTOCOLS))
    request = draw(
        st.sampled_from([f"{method} {target}" + (f" {protocol}" if protocol else ""), "-", ""])
        if draw(st.integers(0, 9)) == 0
        else st.just(f"{method} {target}" + (f" {protocol}" if protocol else ""))
    )
    line = (
        f"{draw(st.sampled_from(_CLIENTS))} - {draw(st.sampled_from(_USERS))} "
        f'[{draw(st.sampled_from(_TIMES))}] "{request}" {draw(st.sampled_from(_STATUSES))} '
        f"{draw(st.sampled_from(_SENT))}"
    )
    pair = draw(st.sampled_from(_PAIRS))
    if pair is not None:
        line += f' "{pair[0]}" "{pair[1]}"'
    for extra in draw(st.lists(st.sampled_from(_EXTRAS), max_size=6)):
        line += draw(st.sampled_from([" ", " ", "  ", ""])) + extra
    return (line + draw(st.sampled_from(_TRAILING))).encode()


@st.composite
def _readable(draw: st.DrawFn) -> bytes:
    """A ``combined`` line of the shapes the native mapping reads (it declines none)."""
    client = draw(st.sampled_from(["127.0.0.1", "10.1.2.3", 'a"b']))
    user = draw(st.sampled_from(["-", "alice"]))
    time = draw(st.sampled_from(_TIMES[:3]))
    method = draw(st.sampled_from(_METHODS[:4]))
    target = draw(st.sampled_from([*_TARGETS[:2], "/"]))
    status = draw(st.sampled_from(_STATUSES[:8]))
    sent = draw(st.sampled_from(_SENT[:5]))
    line = f'{client} - {user} [{time}] "{method} {target} HTTP/1.1" {status} {sent}'
    extras = draw(st.booleans())
    # Without the referer and the agent, "$request_id" "-" would be read as them (as nginx's
    # combined format is ambiguous there): fields after them come with them.
    if extras or draw(st.booleans()):
        agent = draw(st.sampled_from(["curl/8.5.0", "-", "Mozilla/5.0 (X11)"]))
        line += f' "-" "{agent}"'
    if extras:  # $request_id, then the fields after it
        line += " " + draw(st.sampled_from(_EXTRAS[:2]))
        readable = [*_EXTRAS[14:18], *_EXTRAS[28:30], "us=502", "ua=127.0.0.1:8001", "502"]
        readable += ["0.173", "127.0.0.1:36731", "api.local:443", '"-"', "-", "rid=abc-1"]
        for extra in draw(st.lists(st.sampled_from(readable), max_size=5)):
            line += " " + extra
    return line.encode()


_LINES: Final = st.one_of(
    _combined(),
    _combined(),
    _combined(),
    st.sampled_from(_ACCESS + _ERROR),
    st.sampled_from(
        [
            b'2026/11/22 13:11:19 [error] 7#7: *9 upstream timed out, request: "GET /x',
            b"  continued",
            b'" closes it',
            b"",
            b"{not json",
            b'{"msec": "1795353079.123", "status": "502", "request": "GET /x HTTP/1.1"}',
            b"[]",
        ]
    ),
    st.binary(max_size=120),
    st.text(max_size=80).map(str.encode),
)


def _rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=repr)


def _assert_same(lines: list[bytes], start_line: int = 1) -> None:
    table, rejects = nginx_table(parse, lines, "f.log", start_line=start_line)
    columns, expected = row_columns(parse, lines, "f.log", start_line=start_line)
    assert rejects == expected
    assert _rows(table) == _rows(events_table(columns))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINES, max_size=12), start_line=st.integers(1, 10**6))
def test_the_native_mapping_gives_what_the_parser_gives(
    lines: list[bytes], start_line: int
) -> None:
    _assert_same(lines, start_line)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_readable(), min_size=1, max_size=8))
def test_the_native_mapping_reads_the_common_lines_itself(lines: list[bytes]) -> None:
    _, _, declined = map_nginx(lines, "f.log")
    assert declined == []
    _assert_same(lines)


def test_the_samples_access_lines_are_mapped_natively() -> None:
    rows, _, declined = map_nginx(_ACCESS, "access.log")
    assert (rows, declined) == (len(_ACCESS), [])
    _assert_same(_ACCESS + _ERROR)


def test_the_benchmarks_access_lines_are_mapped_natively() -> None:
    # The text benchmark's nginx lines: combined, $request_id, then keyed timings, or the bare
    # status, durations and upstream address as the incident corpus's nginx wrote them.
    records = NGINX_ACCESS.records(random.Random("nginx-access"))
    lines = [next(records).encode() for _ in range(2_000)]
    _, _, declined = map_nginx(lines, "access.log")
    assert declined == []
    _assert_same(lines)


def test_without_the_compiled_module_the_parser_reads_every_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = _ACCESS + _ERROR + [b"garbage"]
    with_native = nginx_table(parse, lines, "f.log", start_line=5)
    monkeypatch.setattr(_nginx_batch, "native", None)
    without = nginx_table(parse, lines, "f.log", start_line=5)
    assert without[1] == with_native[1]
    assert all(isinstance(r, Reject) for r in without[1])
    assert _rows(without[0]) == _rows(with_native[0])


@pytest.mark.parametrize(
    ("indexes", "runs"),
    [
        ([0], [(0, 1)]),
        ([0, 1, 2], [(0, 3)]),
        ([1, 3, 4, 9], [(1, 2), (3, 5), (9, 10)]),
    ],
)
def test_declined_lines_are_parsed_in_runs(indexes: list[int], runs: list[tuple[int, int]]) -> None:
    assert list(declined_runs(indexes)) == runs


def test_a_line_past_the_limit_is_declined_and_rejected() -> None:
    line = _ACCESS[0] + b" " + b"x" * (2**20)
    _, _, declined = map_nginx([line], "f.log")
    assert declined == [0]
    _assert_same([line])


@pytest.mark.parametrize("ends", [b"\r", b"\r\r"])
def test_a_line_ending_in_cr_keeps_it_in_its_hash_not_in_its_text(ends: bytes) -> None:
    # As the parser does: the hash is of the line as read, the raw text without its "\r"s
    # (a CRLF file's lines are mapped natively too).
    lines = [line + ends for line in _ACCESS]
    _, _, declined = map_nginx(lines, "f.log")
    assert declined == []
    _assert_same(lines)
