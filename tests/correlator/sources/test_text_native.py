"""The native mapping of the ``oslo`` and ``python`` text formats against the parser, its
reference.

``text._batch.text_table`` (the compiled mapping reads the single-line records it is certain
of, the parser every other line, run by run) must give exactly the rows and rejects the parser
gives for the same lines: every column, hashes included, whatever the lines and the options.
The lines are records of both formats built from parts of every shape the two readers
distinguish (oslo's head with its times, fractions, levels and loghub's file word, its request
contexts, ``[instance: <uuid>]``, the messages its identifier patterns and the WSGI request
line read; Python's ``asctime`` with the level and the logger in either order, spaces or
`` - ``, the default format), each part right and wrong, mixed with tracebacks, continuation
lines, blank lines, lines of the other format, lines too long to read, ``\\r`` endings and
bytes of any sort; read with and without a layer, a service, a rules file, in UTC, at fixed
offsets and in an IANA zone, from files whose names place a service in a layer and from files
whose names do not; pieces of what the patterns after the head read are also put together in
any order. Other tests prove the native part does the work: the real fixtures' and the
benchmark's single-line records are declined by none. A file name that is not UTF-8 (its bytes
escaped as surrogates) must not change what the parser says either.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Final, TypeVar
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.text import OSLO as OSLO_KIND
from benchmarks.text import PYTHON as PYTHON_KIND
from benchmarks.text import Kind, write_kind
from correlator._schema import events_table
from correlator.model import MAX_LINE_BYTES
from correlator.sources._record_native import map_text  # CI builds it: its absence fails
from correlator.sources._row_columns import row_columns
from correlator.sources.text import _batch
from correlator.sources.text._batch import text_table
from correlator.sources.text._civil import (
    FUTURE_SLACK_NS,
    UNKNOWN_OFFSET,
    now_year,
    wall_offset_s,
    zone_table,
)
from correlator.sources.text._event import origin_service
from correlator.sources.text._formats import FORMATS
from correlator.sources.text._rules_file import TextRules, read_rules
from correlator.sources.text._source import parse
from correlator.sources.text.oslo import starts as oslo_starts
from correlator.sources.text.python import starts as python_starts

_FIXTURES: Final = Path(__file__).parent / "text" / "fixtures"
_OPENSTACK: Final = (_FIXTURES / "openstack_2k_head.log").read_bytes().splitlines()
_PYTHON_FIXTURES: Final = [
    (_FIXTURES / name).read_bytes().splitlines()
    for name in ("python_asctime.log", "python_dashes.log", "python_default.log")
    if (_FIXTURES / name).exists()
]
_STARTS: Final[dict[str, Callable[[str], bool]]] = {"oslo": oslo_starts, "python": python_starts}

_U1: Final = "b9000564-fe1a-409b-b8cc-1e88b294cd1d"
_U2: Final = "3edec1e4-9678-4a3a-a21b-a145a4ee5e61"
_U3: Final = "0000000a-000b-400c-800d-00000000000e"
_REQ: Final = f"req-{_U1}"
_GREQ: Final = f"req-{_U2}"


T = TypeVar("T")


def _mostly(right: Sequence[T], wrong: Sequence[T]) -> st.SearchStrategy[T]:
    """One of ``right`` seven times in eight, else one of ``wrong`` (shrinks to the first
    right one). (``st.one_of`` of the same strategy repeated would not weigh it more.)"""
    return st.sampled_from([*right] * (7 * len(wrong)) + [*wrong] * len(right))


# -- oslo ---------------------------------------------------------------------------------------

#: loghub's word before the time (the file a line came from), and odd words.
_FILE_WORDS: Final = [
    "",
    "",
    "nova-api.log.1.2017-05-16_13:53:08",
    "nova-compute.log.1.2017-05-16_13:55:31",
    "nova-scheduler",
]
_ODD_FILE_WORDS: Final = [
    "mystery.log",
    ".hidden",
    "a/b.log",
    "a//b-api.log",
    "x/.",
    "a/..",
    "x.",
    "é.log",
    "a\tb.log",
    "Z",
    "1abc",
    "-api.log",
]
_DATES: Final = [
    "2017-05-16 00:00:04",
    "2026-11-29 04:29:29",
    "2024-02-29 23:59:59",
    "2026-12-31 23:59:60",
    "1678-01-01 00:00:00",
    "2261-12-31 23:59:59",
    "1970-01-01 00:00:00",
]
_ODD_DATES: Final = [
    "2026-02-29 00:00:00",
    "2026-02-30 00:00:00",
    "2026-13-01 00:00:00",
    "2026-00-10 00:00:00",
    "2026-01-00 00:00:00",
    "2026-01-32 00:00:00",
    "2026-01-01 24:00:00",
    "2026-01-01 23:60:00",
    "2026-12-31 23:59:61",
    "2026-03-29 02:30:00",  # skipped in Paris
    "2026-10-25 02:30:00",  # repeated in Paris
    "1677-09-21 00:12:43",
    "1677-09-21 00:12:44",
    "1677-09-21 05:42:44",
    "1677-09-21 05:42:43",
    "1677-09-21 14:12:43",
    "1677-09-20 18:42:43",
    "1677-01-01 00:00:00",
    "2262-01-01 00:00:00",
    "2262-04-12 13:47:16",
    "2262-04-11 23:47:16",
    "2262-04-11 18:17:16",
    "2262-04-11 23:47:17",
    "0000-01-01 00:00:00",
    "9999-12-31 23:59:59",
    "2017-5-16 00:00:04",
    "12017-05-16 00:00:04",
    "2017-05-16T00:00:04",
    "2017-05-16  00:00:04",
    "\uff12\uff10\uff11\uff17-05-16 00:00:04",  # fullwidth digits
]
_FRACTIONS: Final = [".500", ".008", "", ".5", ".12", ".1234", ".123456", ".123456789"]
_ODD_FRACTIONS: Final = [
    ".",
    ".854775807",
    ".854775808",
    ".145224191",
    ".145224192",
    ".1234567890",
    ".12345678901",
    ".123456789012",
    ",500",
    ".5a",
]
_PIDS: Final = ["2931", "25746", "0"]
_ODD_PIDS: Final = ["9" * 30, "", "x1", "-1"]
_OSLO_LEVELS: Final = [
    "INFO",
    "ERROR",
    "WARNING",
    "DEBUG",
    "CRITICAL",
    "AUDIT",
    "E",
    "W",
    "I",
    "F",
    "D",
    "ERR",
    "WARN",
    "FATAL",
    "NOTICE",
    "EMERG",
    "BOGUS",
]
_ODD_OSLO_LEVELS: Final = ["TRACE", "info", "Info", "", "INFO1"]
_LOGGERS: Final = ["nova.compute.manager", "nova.osapi_compute.wsgi.server", "a", "node"]
_ODD_LOGGERS: Final = ['q"x', "[x]", "back\\slash", "é", "a b", "<a>&'/b", "x]"]
_CONTEXTS: Final = [
    f"[{_REQ} - - - - -] ",
    f"[{_REQ} 113d3a99c3da401fbd62cc2caa5b96d2 54fadb412c4e40cdbaed9335e4c35a9e - - -] ",
    f"[{_GREQ} {_REQ} u p - - -] ",
    f"[None {_REQ} u p - - -] ",
    "[-] ",
]
_ODD_CONTEXTS: Final = [
    f"[{_GREQ} {_REQ} {_GREQ} u p] ",
    f"[x{_REQ}] ",
    f"[{_REQ.upper()} - - - - -] ",
    f"[req-{_U1}abcd - -] ",
    "[req-short - - - - -] ",
    "[-]",
    "[-]  ",
    "[] ",
    "[ ] ",
    '[req "quoted" \\ back] ',
    "[a\\b] ",
    "[instance:x] ",
    "[instance: bad] ",
    f"[instance: {_U1}] ",
    f"[{_REQ} - - - - - ",
    "[[nested] ",
    f"[req-req-{_U1}] ",
    f"[req-{'-' * 36} req-{_U1.upper()}] ",
    f"[Instance: {_U1}] ",
    "[<a>&'/\\u0041] ",
    "[é] ",
    "[\t] ",
    "",
    "x ",
]
_INSTANCES: Final = ["", "", f"[instance: {_U1}] ", f"[instance: {_U2}] "]
_ODD_INSTANCES: Final = [
    f"[instance: {_U1}]",
    f"[instance: {_U1.upper()}] ",
    f"[instance: {'-' * 36}] ",
    f"[instance: {_U1[:-1]}] ",
    f"[instance: {_U1}x] ",
    f"[instance:{_U1}] ",
    f"[instance: {_U1}]  ",
]
_OSLO_MESSAGES: Final = [
    "VM Started (Lifecycle Event)",
    "",
    " ",
    "Instance failed to spawn",
    f"DELETE /v2/p/servers/{_U1} done",
    f"GET /servers/{_U1}x",
    f"GET /servers/{_U1}-x",
    f"GET /servers/{_U1.upper()}/action",
    f"/servers/{_U1[:-1]}",
    f"/servers/{_U1}_x and /servers/{_U2}",
    f"Node {_U1} ready",
    f"node {_U1}",
    f"NODE {_U1}",
    f"xnode {_U1}",
    f"x-node {_U1}",
    f"node  {_U1}",
    f"node {_U1}abc then node {_U2}",
    f"/nodes/{_U1}/power",
    f"/nodes/{_U1}_",
    f"node {_U1} and /nodes/{_U2}",
    f"/nodes/{_U3} on /servers/{_U2}",
    f"Creating event network-vif-plugged:{_U2} for instance {_U1}",
    'a "quoted" word',
    "back\\slash and \\u0041",
    "trailing spaces   ",
    "job=abc-1",
    'job=a"b',
    "trace=4bf92f3577b34da6a3ce929d0e0e4736",
    "span=00f067aa0ba902b7 trace=00000000000000000000000000000000",
    "Final resource view: name=cp-r00-n00 phys_ram=64172MB pci_stats=[]",
    "x" * 3000,
    f"_node {_U1}",
    f"1node {_U1}",
    f"[node {_U1}]",
    f"nodes {_U1}",
    f"node {_U1.upper()}.",
    f"/servers//servers/{_U1}",
    "<b>&amp;'/'</b>",
    "\\",
    '"',
]
_ODD_MESSAGES: Final = ["tab\there", "é ü", "\x7f", "\x1f", "\x0c", "\xa0"]
_IPS: Final = ["10.11.10.1", "10.0.0.1,10.11.10.1", "", "::1"]
_HTTP_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_ODD_HTTP_METHODS: Final = ["get", "TRACE", "CONNECT", ""]
_HTTP_PATHS: Final = [
    "/v2/54fadb412c4e40cdbaed9335e4c35a9e/servers/detail",
    f"/v2/p/servers/{_U1}",
    f"/v1/nodes/{_U1}/states/power",
    "/",
    "/x?y=1&z",
]
_ODD_HTTP_PATHS: Final = [
    '/a"b',
    "/a\\b",
    "/ü",
    "/" + "p" * 2047,
    "/" + "p" * 2048,
    "",
    "/a b",
]
_PROTOS: Final = ["HTTP/1.1", "HTTP/1.0", "HTTP/2"]
_ODD_PROTOS: Final = ["HTTP/1.10", "HTTP/1.1x", "HTTP/", "HTTP/...", "http/1.1", "HTTP/2.0 "]
_STATUS_PARTS: Final = [" status: 200", " status: 204", " status: 404", " 200", ""]
_ODD_STATUS_PARTS: Final = [
    " status: 600",
    " status: 099",
    " status: 2000",
    " status: 200.",
    " 404,",
    " status: 20x",
    " status: 200x",
    "status: 200",
    "  status: 200",
    " status:  200",
]
_TIME_PARTS: Final = [
    " len: 1893 time: 0.2477829",
    " len: 967 time: 0.0012",
    " time: 0",
    " len: 1893",
    "",
]
_ODD_TIME_PARTS: Final = [
    " time: 1234567",
    " time: 123456",
    " time: 0.1234567890",
    " time: 0.123456789",
    " time: 0.5x",
    " time: 00012.50",
    " time: 0.00001",
    " time: 999999.999999999",
    " time: 123456.123456789",
    " time: 0.000000001",
    " time: 1.000000000",
    " time: 0.1 len: 5",
    " time: 0.30000000000000004",
    " time: 9007199254740993",
    " time: 12345.6789012345",
    " time: .5",
    " time: 1e3",
    " time: -1",
    " time: 0.5 time: 0.7",
    " time: x time: 0.7",
    " time:0.5",
    " time: 0.",
    " time: 0._5",
    " time: 1.5é",
]


@st.composite
def _wsgi(draw: st.DrawFn) -> str:
    """A message with a request line as oslo's WSGI servers write it, its parts of every
    shape ``_event._REQUEST_LINE`` reads or does not."""
    request = (
        f"{draw(_mostly(_HTTP_METHODS, _ODD_HTTP_METHODS))} "
        f"{draw(_mostly(_HTTP_PATHS, _ODD_HTTP_PATHS))} {draw(_mostly(_PROTOS, _ODD_PROTOS))}"
    )
    text = f'{draw(st.sampled_from(_IPS))} "{request}"'
    text += draw(_mostly(_STATUS_PARTS, _ODD_STATUS_PARTS))
    text += draw(_mostly(_TIME_PARTS, _ODD_TIME_PARTS))
    if draw(st.integers(0, 5)) == 0:
        text = draw(st.sampled_from(['"a" ', '"GET /x HTTP/9.9x" ', "pre ", '"'])) + text
    if draw(st.integers(0, 5)) == 0:
        text += draw(st.sampled_from([' "GET /y HTTP/1.0" 500', ' "', ' "quoted"', " x"]))
    return text


_OSLO_MESSAGE: Final = st.one_of(
    _mostly(_OSLO_MESSAGES, _ODD_MESSAGES), _wsgi(), _mostly(_OSLO_MESSAGES, _ODD_MESSAGES)
)


@st.composite
def _oslo_head(draw: st.DrawFn, level: str | None = None) -> str:
    """The head of an oslo line: the file word, the time, the pid, the level, the logger."""
    word = draw(_mostly(_FILE_WORDS, _ODD_FILE_WORDS))
    date = draw(st.one_of(st.sampled_from(_DATES), st.sampled_from(_ODD_DATES)))
    head = (
        f"{date}{draw(_mostly(_FRACTIONS, _ODD_FRACTIONS))} {draw(_mostly(_PIDS, _ODD_PIDS))} "
        f"{level or draw(_mostly(_OSLO_LEVELS, _ODD_OSLO_LEVELS))} "
        f"{draw(_mostly(_LOGGERS, _ODD_LOGGERS))}{draw(_mostly([' '], ['', '  ', chr(9)]))}"
    )
    return f"{word} {head}" if word else head


@st.composite
def _oslo(draw: st.DrawFn) -> str:
    """An oslo record's first line (most of them starting a record)."""
    return (
        draw(_oslo_head())
        + draw(_mostly(_CONTEXTS, _ODD_CONTEXTS))
        + draw(_mostly(_INSTANCES, _ODD_INSTANCES))
        + draw(_OSLO_MESSAGE)
    )


@st.composite
def _oslo_prefixed(draw: st.DrawFn) -> str:
    """A traceback line with oslo's ``logging_exception_prefix`` (no request context)."""
    return (
        draw(_oslo_head(level=draw(st.sampled_from(["ERROR", "TRACE", "INFO"]))))
        + draw(st.sampled_from(["", f"[instance: {_U1}] ", f"[instance: {_U1}]"]))
        + draw(st.sampled_from(_CONTINUATIONS))
    )


# -- python -------------------------------------------------------------------------------------

_PY_DATES: Final = [
    "2026-11-29 04:29:29",
    "2026-11-29 05:41:12",
    "2024-02-29 23:59:59",
    "2026-12-31 23:59:60",
    "1678-01-01 00:00:00",
    "2261-12-31 23:59:59",
]
_ODD_PY_DATES: Final = [
    "2026-02-29 00:00:00",
    "2026-02-30 00:00:00",
    "2026-13-01 00:00:00",
    "2026-01-01 24:00:00",
    "2026-01-01 23:60:00",
    "2026-12-31 23:59:61",
    "2026-03-29 02:30:00",
    "2026-10-25 02:30:00",
    "1677-09-21 00:12:43",
    "1677-09-21 00:12:44",
    "1677-09-21 14:12:43",
    "1677-09-20 18:42:43",
    "1677-01-01 00:00:00",
    "2262-04-11 23:47:16",
    "2262-04-11 18:17:16",
    "2262-04-12 13:47:16",
    "2262-04-11 23:47:17",
    "2262-01-01 00:00:00",
    "2026-11-29T04:29:29",
    "12026-11-29 04:29:29",
    "\uff12\uff10\uff12\uff16-11-29 04:29:29",  # fullwidth digits
    "٢٠٢٦-11-29 04:29:29",
]
_PY_FRACTIONS: Final = [",123", ".123", "", ",5", ",1234", ",123456", ",123456789"]
_ODD_PY_FRACTIONS: Final = [
    ",",
    ".",
    ",854775807",
    ",854775808",
    ",145224192",
    ",145224191",
    ",1234567890",
    ".123456789012",
    ",12a",
    ";123",
]
_PY_LEVELS: Final = [
    "INFO",
    "WARNING",
    "ERROR",
    "DEBUG",
    "CRITICAL",
    "WARN",
    "FATAL",
    "NOTSET",
    "Level 5",
    "Level 100",
]
_ODD_PY_LEVELS: Final = ["Level 1000", "Level ", "INFOX", "info", "TRACE", "Level 05x"]
_PY_LOGGERS: Final = ["app.module", "root", "app.db", "a"]
_ODD_PY_LOGGERS: Final = ["-", "INFO", 'q"x', "é", "a\\b", "x:y", "[a]", "<a>&'/b", "Level"]
_PY_MESSAGES: Final = [
    "disk almost full",
    "request handled request_id=req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
    "",
    " ",
    "  leading spaces",
    "trailing ",
    "- dash",
    "INFO - name - msg",
    "lookup failed",
    'GET "/x"',
    '10.0.0.1 "GET /v2/servers/detail HTTP/1.1" status: 200 len: 1893 time: 0.2477829',
    '"POST /a HTTP/1.1" 201 time: 12.5',
    '"DELETE /b HTTP/2" 204',
    'x "GET /c HTTP/1.1x" 200 time: 1',
    "node " + _U1,
    "back\\slash",
    "job=abc-1",
]
_PY_SEPARATORS: Final = [" ", " - "]
_ODD_PY_SEPARATORS: Final = ["  ", " -", "- ", "\t", "", " -  ", " — "]


@st.composite
def _python(draw: st.DrawFn) -> str:
    """A Python ``logging`` record's first line: the time, then the level and the logger in
    either order, spaces or `` - `` between them, then the message (if any)."""
    stamp = draw(st.one_of(st.sampled_from(_PY_DATES), st.sampled_from(_ODD_PY_DATES)))
    stamp += draw(_mostly(_PY_FRACTIONS, _ODD_PY_FRACTIONS))
    level = draw(_mostly(_PY_LEVELS, _ODD_PY_LEVELS))
    logger = draw(_mostly(_PY_LOGGERS, _ODD_PY_LOGGERS))
    first, second = (level, logger) if draw(st.booleans()) else (logger, level)
    one = draw(_mostly(_PY_SEPARATORS, _ODD_PY_SEPARATORS))
    two = draw(_mostly([one], _ODD_PY_SEPARATORS))
    three = draw(_mostly([two], _ODD_PY_SEPARATORS))
    line = f"{stamp}{one}{first}{two}{second}"
    if draw(st.integers(0, 6)) != 0:  # else: the line ends after the second word
        line += three + draw(_mostly(_PY_MESSAGES, _ODD_MESSAGES))
    return line


_PY_DEFAULT: Final = [
    "WARNING:root:disk almost full",
    "INFO:app.module:",
    "CRITICAL::giving up",
    "Level 5:x:y",
    "ERROR:app:db:failed",
    "WARNING:root",
    "NOTICE:root:x",
]

#: Pieces of what the patterns after the head read (a request line, its status and time,
#: the identifiers, a context; a level and a logger), put together in any order: the
#: readers' corners that whole fields do not reach.
_OSLO_PIECES: Final = [
    '"',
    " ",
    "GET",
    "DELETE",
    "/",
    "/servers/",
    "/nodes/",
    " HTTP/",
    "1.1",
    "2",
    ".",
    '"',
    " status: ",
    "200",
    "5",
    " time: ",
    "0.5",
    "123456",
    "7",
    "node ",
    "Node ",
    _U1,
    _U1[:8],
    "req-",
    "[",
    "]",
    "[instance: ",
    "-",
    "x",
    "_",
    "\\",
]
_PY_PIECES: Final = [
    " ",
    " - ",
    "-",
    "INFO",
    "WARNING",
    "WARN",
    "Level ",
    "5",
    "1234",
    "app",
    ",",
    ".",
    "123",
    "x",
    ":",
]


@st.composite
def _oslo_soup(draw: st.DrawFn) -> str:
    """An oslo head and context, then pieces of a message in any order."""
    pieces = draw(st.lists(st.sampled_from(_OSLO_PIECES), max_size=16))
    if draw(st.booleans()):
        context = draw(st.sampled_from([*_CONTEXTS, "", "[", "[instance: "]))
    else:  # the request ids in a context of any shape
        inside = st.sampled_from(["req-", _U1, _U2[:9], "-", " ", "x", "[", "instance: "])
        context = "[" + "".join(draw(st.lists(inside, max_size=8))) + "]"
        context += draw(st.sampled_from([" ", "", "  "]))
    return draw(_oslo_head()) + context + "".join(pieces)


@st.composite
def _python_soup(draw: st.DrawFn) -> str:
    """A Python time, then pieces of the level, the logger and the message in any order."""
    pieces = draw(st.lists(st.sampled_from(_PY_PIECES), max_size=10))
    return draw(st.sampled_from(_PY_DATES)) + "".join(pieces)


# -- for both -----------------------------------------------------------------------------------

_CONTINUATIONS: Final = [
    "Traceback (most recent call last):",
    '  File "/srv/app/python_lines.py", line 33, in main',
    '    {}["missing"]',
    "    ~~^^^^^^^^^^^",
    "KeyError: 'missing'",
    "ValueError: boom",
    "requests.exceptions.SSLError: bad handshake",
    "Caused by: java.io.IOException: x",
    "VirtualInterfaceCreateException: Virtual Interface creation failed",
    "that spans two lines",
    "",
    " ",
    "\t",
    "  continued",
]
_TRAILING: Final = [" ", "  ", "\r", "\r\r", " \r", "\r ", "\t", "é", "\x00"]
#: Characters put anywhere in a line: each a distinction the native mapping must make.
_SPOILERS: Final = [
    b"\xff",
    b"\xc3",
    "é".encode(),
    "\xa0".encode(),
    "\u2028".encode(),
    "\x85".encode(),
    b"\t",
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1f",
    b"\x7f",
    b"\x00",
    b" ",
    b'"',
    b"\\",
    b"[",
    b"]",
    b"\n",
]
_LONG: Final = (
    f"2017-05-16 00:00:04.500 2931 INFO nova.api [-] {'x' * MAX_LINE_BYTES}".encode(),
    f"2026-11-29 04:29:29,123 INFO app.module {'x' * MAX_LINE_BYTES}".encode(),
    # Half a MiB each: the second continues the first past the bound of a record.
    f"2017-05-16 00:00:04.500 2931 INFO nova.api [-] {'x' * (MAX_LINE_BYTES // 2)}".encode(),
    f"2026-11-29 04:29:29,123 INFO app.module {'y' * (MAX_LINE_BYTES // 2)}".encode(),
    b"  " + b"z" * (MAX_LINE_BYTES // 2 + 10),
)


@st.composite
def _spoiled(draw: st.DrawFn, lines: st.SearchStrategy[str]) -> bytes:
    """A line, most often as drawn, else with a trailing part or a character put anywhere."""
    line = (draw(lines) + draw(_mostly([""], _TRAILING))).encode()
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from(_SPOILERS)) + line[at:]
    return line


_LINES: Final = st.one_of(
    _spoiled(_oslo()),
    _spoiled(_oslo()),
    _spoiled(_oslo()),
    _spoiled(_oslo_prefixed()),
    _spoiled(_python()),
    _spoiled(_python()),
    _spoiled(_python()),
    _spoiled(st.sampled_from(_PY_DEFAULT + _CONTINUATIONS)),
    _spoiled(_oslo_soup()),
    _spoiled(_python_soup()),
    st.sampled_from(_OPENSTACK + [line for lines in _PYTHON_FIXTURES for line in lines]),
    st.sampled_from(_LONG),
    st.binary(max_size=120),
    st.text(max_size=80).map(str.encode),
)

_ORIGINS: Final = [
    "nova-api.log",
    "/var/log/nova/nova-compute.log.1",
    "mystery.log",
    "stdin",
    "http",
    "app.log",
    ".log",
    "/var/log/nova-conductor.log",
    "/var/log/é/nova-api-é.log",
]
_ZONES: Final[list[tzinfo]] = [
    UTC,
    timezone(timedelta(hours=-5, minutes=-30)),
    timezone(timedelta(hours=14)),
    timezone(timedelta(hours=5, minutes=45, seconds=30)),
    timezone(timedelta(microseconds=-1)),
    timezone(timedelta(seconds=-1, microseconds=500_000)),
    ZoneInfo("Europe/Paris"),
    ZoneInfo("UTC"),
]

#: The rules files the tests read: [[layers]] rules on the service (which the native mapping
#: applies), one on another field, [[identifiers]] rules of each kind, and the built-in rules
#: turned off (which leave the batch to the parser).
_RULE_TEXTS: Final = [
    r"""
[[layers]]
match = '^mystery'
layer = 'db'

[[layers]]
match = 'compute'
layer = 'workflow'

[[layers]]
field = 'service'
match = '^(b|x|Z)$'
layer = 'node'
""",
    r"""
[[layers]]
match = '^nova-api$'
layer = 'db'

[[layers]]
field = 'logger'
match = '^app\.db'
layer = 'db'
""",
    r"""
[[identifiers]]
pattern = 'job=(\S+)'
to = 'workflow_id'

[[identifiers]]
field = 'request_id'
to = 'correlation_id'
formats = ['oslo']

[[identifiers]]
field = 'logger'
to = 'node_id'
formats = ['python']

[[identifiers]]
pattern = 'trace=(?P<id>[0-9a-f]{32})'
to = 'trace_id'

[[identifiers]]
field = 'pid'
to = 'node_instance_id'
""",
    r"""
builtin = false

[[identifiers]]
pattern = '/servers/(\S+)'
to = 'allocation_id'

[[layers]]
match = 'api'
layer = 'api'
""",
]
#: Which rules a batch is read with (an index in ``rule_sets``): most often none, or those
#: the native mapping applies.
_RULES: Final = st.sampled_from([0, 0, 0, 1, 1, 2, 3, 4])


def _read_rule_texts(folder: Path, texts: Sequence[str]) -> list[TextRules | None]:
    """No rules, then each of ``texts``, read from a file in ``folder``: what ``rules``
    indexes in the property tests."""
    read: list[TextRules | None] = [None]
    for index, text in enumerate(texts):
        path = folder / f"rules{index}.toml"
        path.write_text(text)
        read.append(read_rules(str(path), frozenset(FORMATS)))
    return read


@pytest.fixture(scope="module")
def rule_sets(tmp_path_factory: pytest.TempPathFactory) -> list[TextRules | None]:
    """No rules, then each of :data:`_RULE_TEXTS`, read."""
    return _read_rule_texts(tmp_path_factory.mktemp("rules"), _RULE_TEXTS)


def _rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: (row["hash"], repr(row)))


def _assert_same(
    lines: Sequence[bytes], origin: str = "f.log", start_line: int = 1, **values: Any
) -> None:
    table, rejects = text_table(parse, lines, origin, start_line=start_line, **values)
    columns, expected = row_columns(parse, lines, origin, start_line=start_line, **values)
    assert rejects == expected
    assert _rows(table) == _rows(events_table(columns))


def _check(
    rule_sets: list[TextRules | None],
    lines: Sequence[bytes],
    text_format: str,
    origin: str,
    layer: str | None,
    service: str | None,
    zone: tzinfo,
    rules: int,
    start_line: int,
) -> None:
    """:func:`_assert_same` with the options a property test draws (``rules``: the index of
    a rules file of the ``rule_sets`` fixture)."""
    _assert_same(
        lines,
        origin,
        start_line,
        text_format=text_format,
        layer=layer,
        service=service,
        zone=zone,
        rules=rule_sets[rules],
    )


#: UTC's table and this year, as ``_batch.text_table`` hands them to the compiled mapping.
_UTC: Final = _batch._zone(UTC, now_year(UTC, time.time_ns()))
_NOW: Final = (now_year(UTC, time.time_ns()), time.time_ns() + FUTURE_SLACK_NS)


def _declined(lines: Sequence[bytes], origin: str, text_format: str) -> list[int]:
    """The indexes of the lines the compiled mapping leaves to the parser (in UTC, without
    --service), after checking that it maps every other line."""
    rows, _, declined, row_lines = map_text(
        lines, origin, text_format, *_UTC, None, origin_service(origin), *_NOW
    )
    assert rows == len(lines) - len(declined) == len(row_lines) // 4
    return list(declined)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINES, max_size=12),
    text_format=st.sampled_from(["oslo", "python"]),
    origin=st.sampled_from(_ORIGINS),
    layer=st.sampled_from([None, None, "api", "node"]),
    service=st.sampled_from([None, None, "nova-conductor", "svc", "", "sérvice-api"]),
    zone=st.sampled_from(_ZONES),
    rules=_RULES,
    start_line=st.integers(1, 10**6),
)
def test_the_native_mapping_gives_what_the_parser_gives(
    rule_sets: list[TextRules | None],
    lines: list[bytes],
    text_format: str,
    origin: str,
    layer: str | None,
    service: str | None,
    zone: tzinfo,
    rules: int,
    start_line: int,
) -> None:
    _check(rule_sets, lines, text_format, origin, layer, service, zone, rules, start_line)


@st.composite
def _readable_oslo(draw: st.DrawFn) -> bytes:
    """An oslo line of the shapes the native mapping reads (it declines none)."""
    word = draw(st.sampled_from(_FILE_WORDS))
    head = (
        f"{draw(st.sampled_from(_DATES))}{draw(st.sampled_from(_FRACTIONS))} "
        f"{draw(st.sampled_from(_PIDS))} {draw(st.sampled_from(_OSLO_LEVELS))} "
        f"{draw(st.sampled_from(_LOGGERS))} "
    )
    if draw(st.booleans()):
        message = draw(st.sampled_from(_OSLO_MESSAGES))
    else:
        request = (
            f"{draw(st.sampled_from(_HTTP_METHODS))} {draw(st.sampled_from(_HTTP_PATHS))} "
            f"{draw(st.sampled_from(_PROTOS))}"
        )
        message = (
            f'{draw(st.sampled_from(_IPS))} "{request}"{draw(st.sampled_from(_STATUS_PARTS))}'
            f"{draw(st.sampled_from(_TIME_PARTS))}"
        )
    line = head + draw(st.sampled_from(_CONTEXTS)) + draw(st.sampled_from(_INSTANCES)) + message
    return (f"{word} {line}" if word else line).encode()


@st.composite
def _readable_python(draw: st.DrawFn) -> bytes:
    """A Python line of the shapes the native mapping reads (it declines none)."""
    stamp = draw(st.sampled_from(_PY_DATES)) + draw(st.sampled_from(_PY_FRACTIONS))
    level = draw(st.sampled_from(_PY_LEVELS))
    logger = draw(st.sampled_from(_PY_LOGGERS))
    sep = draw(st.sampled_from(_PY_SEPARATORS))
    first, second = (level, logger) if draw(st.booleans()) else (logger, level)
    line = f"{stamp}{sep}{first}{sep}{second}"
    if draw(st.integers(0, 6)) != 0:
        line += sep + draw(st.sampled_from(_PY_MESSAGES))
    return line.encode()


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_readable_oslo(), min_size=1, max_size=8))
def test_the_native_mapping_reads_the_common_oslo_lines_itself(lines: list[bytes]) -> None:
    assert _declined(lines, "nova-api.log", "oslo") == []
    _assert_same(lines, "nova-api.log", text_format="oslo")


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_readable_python(), min_size=1, max_size=8))
def test_the_native_mapping_reads_the_common_python_lines_itself(lines: list[bytes]) -> None:
    assert _declined(lines, "nova-api.log", "python") == []
    _assert_same(lines, "nova-api.log", text_format="python")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(
        st.one_of(_readable_oslo(), _readable_python(), _LINES.filter(bool)), max_size=16
    ),
    text_format=st.sampled_from(["oslo", "python"]),
    origin=st.sampled_from(_ORIGINS),
    layer=st.sampled_from([None, None, "api", "node"]),
    service=st.sampled_from([None, None, "nova-conductor", "svc", "", "sérvice-api"]),
    zone=st.sampled_from(_ZONES[:6]),
    rules=st.sampled_from([0, 0, 1, 2]),
    start_line=st.integers(1, 10**6),
)
def test_mostly_readable_lines_give_what_the_parser_gives(
    rule_sets: list[TextRules | None],
    lines: list[bytes],
    text_format: str,
    origin: str,
    layer: str | None,
    service: str | None,
    zone: tzinfo,
    rules: int,
    start_line: int,
) -> None:
    # The native mapping's share: lines it reads among a few it must decline, with the
    # options it applies itself (fixed offsets, layer rules on the service).
    _check(rule_sets, lines, text_format, origin, layer, service, zone, rules, start_line)


# -- the real lines -----------------------------------------------------------------------------


def _printable(line: bytes) -> bool:
    return all(32 <= byte < 127 for byte in line)


def _single_records(lines: Sequence[bytes], text_format: str) -> list[int]:
    """The indexes of the lines that are a record of their own, in printable ASCII: the line
    starts a record, and the next one (if any) starts another."""
    starts = _STARTS[text_format]
    begins = [starts(line.decode("utf-8", "replace")) for line in lines]
    return [
        index
        for index, line in enumerate(lines)
        if _printable(line) and begins[index] and (index + 1 == len(lines) or begins[index + 1])
    ]


@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=-5, minutes=-30))])
@pytest.mark.parametrize("start_line", [1, 1_001])
def test_the_fixtures_give_what_the_parser_gives(zone: tzinfo, start_line: int) -> None:
    _assert_same(_OPENSTACK, "openstack_2k_head.log", start_line, text_format="oslo", zone=zone)
    for lines in _PYTHON_FIXTURES:
        _assert_same(lines, "app.log", start_line, text_format="python", zone=zone, layer="api")
        _assert_same(lines, "nova-api.log", start_line, text_format="python", zone=zone)


def test_the_openstack_fixtures_records_are_mapped_natively() -> None:
    mapped = _single_records(_OPENSTACK, "oslo")
    assert len(mapped) > len(_OPENSTACK) // 2
    assert _declined(_OPENSTACK, "openstack_2k_head.log", "oslo") == [
        index for index in range(len(_OPENSTACK)) if index not in mapped
    ]


def _benchmark(kind: Kind, folder: Path) -> list[bytes]:
    """2,000 lines of one of the benchmark's kinds, written as the benchmark writes them."""
    path = folder / f"{kind.name}.log"
    write_kind(kind, path, 2_000, 1)
    return path.read_bytes().splitlines()


@pytest.mark.parametrize("kind", [OSLO_KIND, PYTHON_KIND], ids=["oslo", "python"])
def test_the_benchmarks_single_line_records_are_mapped_natively(kind: Kind, tmp_path: Path) -> None:
    # Each traceback's lines and the line before it (its record's first line) are declined.
    lines = _benchmark(kind, tmp_path)
    mapped = _single_records(lines, kind.name)
    assert len(mapped) > len(lines) * 9 // 10
    origin = str(tmp_path / f"{kind.name}.log")
    assert _declined(lines, origin, kind.name) == [
        index for index in range(len(lines)) if index not in mapped
    ]
    values: dict[str, Any] = dict(kind.options)
    _assert_same(lines, origin, **values)


@pytest.mark.parametrize("ends", [b"\r", b"\r\r"])
def test_a_line_ending_in_cr_gives_what_the_parser_gives(ends: bytes) -> None:
    _assert_same([line + ends for line in _OPENSTACK], "nova.log", text_format="oslo")
    for lines in _PYTHON_FIXTURES:
        _assert_same([line + ends for line in lines], "nova-api.log", text_format="python")


@pytest.mark.parametrize("zone", [ZoneInfo("Europe/Paris"), ZoneInfo("UTC")])
def test_a_zone_with_rules_gives_what_the_parser_gives(zone: tzinfo) -> None:
    _assert_same(_OPENSTACK, "nova.log", text_format="oslo", zone=zone)
    for lines in _PYTHON_FIXTURES:
        _assert_same(lines, "nova-api.log", text_format="python", zone=zone)


def test_a_line_past_the_limit_gives_what_the_parser_gives() -> None:
    for text_format in ("oslo", "python"):
        _assert_same([_OPENSTACK[0], *_LONG, _OPENSTACK[1]], "nova.log", text_format=text_format)


@pytest.mark.parametrize("text_format", ["oslo", "python"])
def test_a_line_past_the_limit_between_a_record_and_its_continuation(text_format: str) -> None:
    # The line past the limit is a reject of its own: the line after it continues the record
    # before it, which is then not a record of its own.
    first = _OPENSTACK[0] if text_format == "oslo" else _PYTHON_FIXTURES[0][0]
    for long in _LONG[:2]:
        _assert_same([first, long, b"  continued", first], "nova-api.log", text_format=text_format)
        _assert_same([first, long, first], "nova-api.log", text_format=text_format)


@pytest.mark.parametrize("text_format", ["oslo", "python"])
def test_an_origin_that_is_not_utf8_gives_what_the_parser_gives(text_format: str) -> None:
    # A file name with bytes that are not UTF-8 (a path from the command line, its bytes
    # escaped as surrogates): records no layer places are rejects, as the parser says.
    # (Events would fail the reference too: an Arrow string is UTF-8.)
    bare = [line.partition(b" ")[2] for line in _OPENSTACK]  # without loghub's file word
    lines = [line for lines in _PYTHON_FIXTURES for line in lines] + bare
    columns, rejects = row_columns(parse, lines, "\udcff.log", text_format=text_format)
    assert not columns["ts_ns"]
    assert len(rejects) > 20
    _assert_same(lines, "\udcff.log", text_format=text_format)


#: Lines just under the limit whose shapes make the mapping look again and again (a quote
#: before every method, a word before every uuid, pairs without end, objects in objects):
#: each must take the time of a linear read, whatever the format.
_HEADS: Final = {
    "oslo": b"2017-05-16 00:00:04.500 2931 INFO nova.compute.manager [-] ",
    "python": b"2026-11-29 04:29:29,123 INFO app.module ",
    "logfmt": b"ts=2026-11-29T04:29:29Z ",
    "klog": b'I1129 04:29:29.123456   12345 server.go:123] "m" ',
    "syslog": b"<165>1 2026-11-29T04:29:29Z host app - - ",
    "journald": b'{"__REALTIME_TIMESTAMP":"1795930893103993","MESSAGE":"',
    "json": b'{"time":"2026-11-29T04:29:29Z","msg":"',
}
_FILLS: Final = [
    b'"GET /', b'"GET /x HTTP/1.1" status: 200 time: 1', b"node ", b"/servers/", b"/nodes/",
    b"k=v ", b'k="v" ', b"[id a=\"1\"]", b'{"a":', b"req-", b" time: 1234567", b"x",
]  # fmt: skip
LINEAR_LIMIT_S: Final = 5.0


@pytest.mark.parametrize("text_format", sorted(_HEADS))
def test_a_line_near_the_limit_is_mapped_in_linear_time(text_format: str) -> None:
    head = _HEADS[text_format]
    lines = [
        (head + fill * ((MAX_LINE_BYTES - len(head) - 8) // len(fill)))[: MAX_LINE_BYTES - 4]
        for fill in _FILLS
    ]
    started = time.perf_counter()
    map_text(lines, "x.log", text_format, *_UTC, None, "x", *_NOW)
    elapsed = time.perf_counter() - started
    assert elapsed < LINEAR_LIMIT_S * len(lines) / 4, f"{text_format}: {elapsed:.1f} s"
    _assert_same(lines, "nova-api.log", text_format=text_format, layer="api")


@pytest.mark.parametrize(
    "zone_name",
    [
        "Europe/Paris",
        "America/New_York",
        "Australia/Lord_Howe",
        "America/Sao_Paulo",
        "Asia/Kolkata",
    ],
)
def test_wall_clock_times_around_a_zones_changes_give_what_the_parser_gives(zone_name: str) -> None:
    # A zone with rules is read from its table of offsets by wall-clock time: every change
    # the table holds, the seconds around it (a skipped hour, a repeated one: fold=0), and
    # times past the table's ends (left to the parser), in the formats that write no offset.
    zone = ZoneInfo(zone_name)
    starts, _ = zone_table(zone, time.time_ns())
    walls = [starts[1] - 1, starts[-1], starts[-1] - 1]
    for start in starts[1:-1]:
        walls += [start + delta for delta in (-3601, -1800, -1, 0, 1, 1799, 3600)]
    stamps = [datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=wall) for wall in walls]
    lines = [
        stamp.strftime(pattern).encode()
        for stamp in stamps
        for pattern in (
            "%Y-%m-%d %H:%M:%S.123 2931 INFO nova.compute.manager [-] m",
            "%Y-%m-%d %H:%M:%S,5 INFO app.module m",
        )
    ]
    oslo, python = lines[::2], lines[1::2]
    # natively, but for the times outside the table
    table = _batch._zone(zone, now_year(zone, time.time_ns()))
    _, _, declined, _ = map_text(oslo, "nova-api.log", "oslo", *table, None, "nova-api", *_NOW)
    outside = [i for i, wall in enumerate(walls) if not starts[1] <= wall < starts[-1]]
    assert declined == outside
    assert len(outside) <= len(walls) / 2
    _assert_same(oslo, "nova-api.log", text_format="oslo", zone=zone)
    _assert_same(python, "nova-api.log", text_format="python", zone=zone)
    logfmt = [b"time=" + line[:19].replace(b" ", b"T") + b" msg=m" for line in python]
    _assert_same(logfmt, "nova-api.log", text_format="logfmt", zone=zone)


def test_a_zones_table_holds_every_change_the_zone_makes() -> None:
    # zone_table samples a zone every few hours and finds each change to the second: it
    # agrees with the offset of every wall-clock hour and of each second around a change.
    for zone_name in ("Europe/Paris", "Australia/Lord_Howe", "America/St_Johns"):
        zone = ZoneInfo(zone_name)
        starts, offsets = zone_table(zone, time.time_ns())
        assert offsets[0] == offsets[-1] == UNKNOWN_OFFSET
        for wall in range(starts[1], starts[-1], 3600):
            index = bisect_right(starts, wall) - 1
            assert offsets[index] == wall_offset_s(wall, zone), (zone_name, wall)
        for start, offset in zip(starts[2:-1], offsets[2:-1], strict=True):
            assert wall_offset_s(start, zone) == offset
            assert wall_offset_s(start - 1, zone) != offset
