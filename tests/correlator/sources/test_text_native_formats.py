"""The native mapping of the ``logfmt``, ``klog``, ``syslog``, ``journald`` and ``json`` text
formats against the parser, its reference.

As ``test_text_native`` does for ``oslo`` and ``python``: ``text._batch.text_table`` (the
compiled mapping reads the single-line records it is certain of, the parser every other line)
must give exactly the rows and rejects the parser gives for the same lines, every column,
hashes included, whatever the lines and the options. The lines are records of each format
built from parts of every shape its reader and the event's maker distinguish, each part right
and wrong: logfmt's time keys and RFC 3339 in every form ``_time`` reads (and local times read
in the zone), levels, messages, repeated and bare keys, Go's quoted values and their escapes,
service, identifier and HTTP fields, request lines in messages; klog's header (its letters,
yearless times around the year and the "a day after now" boundary, fractions, thread ids,
``file:line``) and its structured ``"msg" k=v`` messages; syslog's RFC 3164 (with and without
``<PRI>``), rsyslog's file form and RFC 5424 with its structured data; journald's objects
(``__REALTIME_TIMESTAMP``, ``PRIORITY``, ``MESSAGE``, values of bytes, several values, null,
bookkeeping fields, duplicate keys); JSON lines of every time, level and message key, numeric
times of every unit, pino's numbered levels, nested objects and arrays. They are mixed with
lines of the other formats, blank lines, lines too long to read, ``\\r`` endings and bytes of
any sort, and read with and without a layer, a service, a rules file, in UTC, at fixed
offsets and in zones whose clocks change (Paris, St. John's, Lord Howe Island: the times they
skip and repeat are drawn), from files whose names place a service in a layer and from files
whose names do not. Other tests prove the native part does the work: the real fixtures give
what the parser gives, and the benchmark's lines are declined only where the module says.

Yearless times (klog, RFC 3164) are never drawn within hours of "now + a day": the parser
reads the clock per record, the native mapping once per batch. The shapes on which the two
once differed (a journald time past 2262, level words with spaces around them) are tests of
their own.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Final, TypeVar
from zoneinfo import ZoneInfo

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.text import JOURNALD as JOURNALD_KIND
from benchmarks.text import JSON as JSON_KIND
from benchmarks.text import KLOG as KLOG_KIND
from benchmarks.text import LOGFMT as LOGFMT_KIND
from benchmarks.text import SYSLOG as SYSLOG_KIND
from benchmarks.text import Kind
from correlator.model import MAX_LINE_BYTES
from correlator.sources.text._civil import FUTURE_SLACK_NS
from correlator.sources.text._rules_file import TextRules
from tests.correlator.sources.test_text_native import (
    _assert_same,
    _benchmark,
    _check,
    _declined,
    _mostly,
    _read_rule_texts,
    _spoiled,
)

T = TypeVar("T")

_FIXTURES: Final = Path(__file__).parent / "text" / "fixtures"
_FIXTURE_NAMES: Final = {
    "logfmt": ("logfmt_gologfmt.log", "logfmt_logrus.log"),
    "klog": ("klog.log",),
    "syslog": ("syslog_local.log", "syslog_logger_stderr.log", "linux_2k_excerpt.log"),
    "journald": ("journald.json",),
    "json": tuple(sorted(path.name for path in _FIXTURES.glob("json_*.log"))),
}
_FIXTURE_LINES: Final = {
    name: [line for file in files for line in (_FIXTURES / file).read_bytes().splitlines()]
    for name, files in _FIXTURE_NAMES.items()
}

_REQ: Final = "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"
_UUID: Final = "b9000564-fe1a-409b-b8cc-1e88b294cd1d"
_HEX32: Final = "4bf92f3577b34da6a3ce929d0e0e4736"
_HEX16: Final = "00f067aa0ba902b7"

#: The zones the batches are read in: UTC, fixed offsets (which the native mapping applies)
#: and one with daylight-saving rules (which leaves the whole batch to the parser).
_ZONES: Final[list[tzinfo]] = [
    UTC,
    UTC,
    timezone(timedelta(hours=-5, minutes=-30)),
    timezone(timedelta(hours=14)),
    timezone(timedelta(hours=5, minutes=45)),
    ZoneInfo("Europe/Paris"),
    ZoneInfo("Europe/Paris"),
    ZoneInfo("America/St_Johns"),
    ZoneInfo("Australia/Lord_Howe"),
    ZoneInfo("UTC"),
]
_ORIGINS: Final = [
    "kubelet.log",
    "nova-api.log",
    "/var/log/nova/nova-compute.log.1",
    "mystery.log",
    "stdin",
    "app.log",
]
_LAYERS: Final = st.sampled_from([None, None, "node", "api"])
_SERVICES: Final = st.sampled_from([None, None, None, "svc", "nova-conductor", "", "sérvice-api"])

#: The rules files the tests read: [[layers]] rules on the service (which the native mapping
#: applies), one on another field, [[identifiers]] rules, the built-in rules turned off (the
#: last three leave the batch to the parser).
_RULE_TEXTS: Final = [
    r"""
[[layers]]
match = '^mystery'
layer = 'db'

[[layers]]
match = '^(provision|app|svc|agent)$'
layer = 'workflow'
""",
    r"""
[[layers]]
field = 'host'
match = '^cp-'
layer = 'node'
""",
    r"""
[[identifiers]]
field = 'pod'
to = 'workflow_id'

[[identifiers]]
pattern = 'job=(\S+)'
to = 'workflow_id'
""",
    r"""
builtin = false

[[layers]]
match = 'api'
layer = 'api'
""",
]
_RULES: Final = st.sampled_from([0, 0, 0, 1, 1, 2, 3, 4])


@pytest.fixture(scope="module")
def rule_sets(tmp_path_factory: pytest.TempPathFactory) -> list[TextRules | None]:
    """No rules, then each of :data:`_RULE_TEXTS`, read."""
    return _read_rule_texts(tmp_path_factory.mktemp("rules"), _RULE_TEXTS)


def _quote(text: str) -> str:
    """``text`` as Go's ``strconv.Quote`` writes it (the escapes logfmt and klog write)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + '"'


def _pick(odd: bool, right: Sequence[T], wrong: Sequence[T]) -> st.SearchStrategy[T]:
    """One of ``right`` seven times in eight, else one of ``wrong`` (shrinks to the first
    right one); only ``right`` when not ``odd`` (lines the native mapping mostly reads)."""
    return _mostly(right, wrong) if odd else st.sampled_from(right)


# -- times ----------------------------------------------------------------------------------

#: Days of every kind: today's, a leap day, the store's first and last, the days clocks
#: change in Europe, in North America and on Lord Howe Island (by half an hour).
_DATES: Final = [
    "2026-11-29",
    "2024-02-29",
    "1970-01-01",
    "2262-04-11",
    "1677-09-21",
    "2026-03-29",
    "2026-10-25",
    "2026-03-08",
    "2026-11-01",
    "2026-10-04",
    "2026-04-05",
    "1996-10-27",
]
_ODD_DATES: Final = [
    "2026-02-29",
    "2026-13-01",
    "2026-11-31",
    "2026-00-10",
    "0000-01-01",
    "2026-1-01",
    "12026-11-29",
    "20261129",
    "\uff12\uff10\uff12\uff16-11-29",  # fullwidth digits
]
_CLOCKS: Final = [
    "05:41:02",
    "23:59:60",
    "00:00:00",
    "23:47:16",
    "00:12:43",
    "02:30:00",
    "01:59:59",
    "01:45:00",
    "03:00:00",
]
_ODD_CLOCKS: Final = ["24:00:00", "23:60:00", "23:59:61", "5:41:02", "05:41"]
_ISO_FRACTIONS: Final = ["", "", ".5", ".123", ".123456789", ",5", ",123456", ".854775807"]
_ODD_ISO_FRACTIONS: Final = [
    ".1234567891",
    ".123456789012",
    ".854775808",
    ".",
    ",",
    ".12a",
    ". 5",
]
_OFFSETS: Final = ["Z", "Z", "z", "+01", "+0100", "+01:00", "-05:30", "+14:00", "-00:00", ""]
_ODD_OFFSETS: Final = ["+1", "+01:0", "+24:00", "+0160", "Z+01", "UTC", "+01:00:00", "+01:60"]


@st.composite
def _iso_time(draw: st.DrawFn, odd: bool = True) -> str:
    """A time of every form ``_civil.iso_ns`` reads or refuses: RFC 3339 (``T``, ``t`` or a
    space, ``.`` or ``,`` fractions, ``Z``/``z``/``±HH``/``±HHMM``/``±HH:MM``, spaces before
    the offset), a local time (no offset), impossible dates and times."""
    date = draw(_pick(odd, _DATES, _ODD_DATES))
    clock = draw(_pick(odd, _CLOCKS, _ODD_CLOCKS))
    separator = draw(_pick(odd, ["T", "T", "t", " "], ["_", "  ", "T "]))
    fraction = draw(_pick(odd, _ISO_FRACTIONS, _ODD_ISO_FRACTIONS))
    offset = draw(_pick(odd, _OFFSETS, _ODD_OFFSETS))
    spaces = draw(st.sampled_from(["", "", "", "", " ", "  "])) if offset else ""
    return f"{date}{separator}{clock}{fraction}{spaces}{offset}"


#: The instant yearless times must stay clear of: "now + a day" (the native mapping reads the
#: clock once per batch, the parser once per record).
_BOUNDARY_S: Final = (datetime.now(UTC).timestamp() * 1e9 + FUTURE_SLACK_NS) / 1e9
#: How far from the boundary a yearless time must be (in every zone the tests read).
_CLEARANCE: Final = timedelta(hours=3)


def _clear_of_the_boundary(month: int, day: int, hour: int, minute: int, second: int) -> bool:
    """Whether a yearless wall-clock time is hours away from "now + a day" read in every zone
    of :data:`_ZONES`, whatever year it falls in (impossible dates are far from it)."""
    for zone in _ZONES:
        boundary = datetime.fromtimestamp(_BOUNDARY_S, zone).replace(tzinfo=UTC)
        for year in (boundary.year - 1, boundary.year, boundary.year + 1):
            try:
                wall = datetime(
                    year, month, day, min(hour, 23), minute % 60, min(second, 59), tzinfo=UTC
                )
            except ValueError:
                continue
            if abs(wall - boundary) < _CLEARANCE:
                return False
    return True


def _yearless_times() -> list[tuple[int, int, int, int, int]]:
    """(month, day, hour, minute, second) of yearless times: around now and "now + a day" (but
    clear of it), around the year's end, 29 February, and impossible ones."""
    now = datetime.now(UTC)
    around = [
        now + timedelta(hours=hours)
        for hours in (-400 * 24, -200 * 24, -30 * 24, -24, -1, 0, 6, 18, 20, 21, 27, 28, 30, 48)
    ]
    around += [now + timedelta(days=days) for days in (40, 300, 364)]
    times = [(t.month, t.day, t.hour, t.minute, t.second) for t in around]
    times += [
        (12, 31, 23, 59, 59),
        (1, 1, 0, 0, 0),
        (12, 31, 23, 59, 60),
        (2, 28, 23, 59, 59),
        (3, 1, 0, 0, 0),
        (2, 29, 12, 0, 0),
        (11, 29, 5, 41, 7),
        (6, 14, 15, 16, 1),
        (6, 5, 1, 2, 3),
        (3, 29, 2, 30, 0),  # skipped in Paris
        (10, 25, 2, 30, 0),  # repeated in Paris
        (3, 8, 2, 30, 0),
        (11, 1, 1, 30, 0),
        (10, 4, 2, 15, 0),  # skipped on Lord Howe Island
        (4, 5, 1, 45, 0),  # repeated there
    ]
    return [time for time in times if _clear_of_the_boundary(*time)]


_YEARLESS: Final = _yearless_times()
_ODD_YEARLESS: Final = [
    (13, 1, 0, 0, 0),
    (0, 10, 0, 0, 0),
    (2, 30, 0, 0, 0),
    (4, 31, 0, 0, 0),
    (1, 0, 0, 0, 0),
    (1, 32, 0, 0, 0),
    (1, 1, 24, 0, 0),
    (1, 1, 23, 60, 0),
    (1, 1, 0, 0, 61),
]
_YEARLESS_FRACTIONS: Final = ["", "", ".123456", ".1", ".123456789", ".000001"]
_ODD_YEARLESS_FRACTIONS: Final = [".", ".1234567891", ".123456789012", ",123", ".12a"]


# -- logfmt -------------------------------------------------------------------------------------

_LEVEL_WORDS: Final = [
    "info",
    "debug",
    "warn",
    "warning",
    "error",
    "err",
    "fatal",
    "critical",
    "trace",
    "notice",
    "INFO",
    "Warn",
    "ERROR",
    "3",
    "7",
    "E",
    "W",
    "I",
    "F",
    "D",
]
_ODD_LEVEL_WORDS: Final = ["", "verbose", "Level 5", "x", "8", "e", " info", "inf"]
#: Texts of values (quoted or bare as they need): messages, services, identifiers, requests.
_TEXTS: Final = [
    "request handled",
    "listening",
    "",
    "nova-api",
    "kubelet",
    "provision",
    "mystery",
    _REQ,
    _UUID,
    "worker-1",
    "abc_1.2:3/4@5+6~7-8",
    "bad id!",
    "a b",
    "x" * 256,
    "x" * 257,
    _HEX32,
    _HEX32.upper(),
    "0" * 32,
    _HEX32[:-1],
    _HEX16,
    "0" * 16,
    "GET",
    "get",
    "/v2/servers/detail",
    "200",
    "404",
    "20",
    "2000",
    "2x0",
    "099",
    "=equals and spaces=",
    'slow "spawn"',
    "back\\slash",
    'say "GET /x HTTP/1.1" 200 time: 0.5',
    '10.0.0.1 "POST /v2/a HTTP/1.1" status: 201 len: 5 time: 0.2477829',
    '"DELETE /b HTTP/2" 204',
    '"GET /c HTTP/1.1x" 200',
    "job=abc-1 ok",
]
_ODD_TEXTS: Final = ["é", "unicode ✓ ünïcödé", "tab\there", "a\nb", "\x7f", "\x01"]
#: Values as written, with escapes (each kind ``_quoted.unquote`` reads) and bad quoting.
_WRITTEN_VALUES: Final = [
    r'"a\"b"',
    r'"a\\b"',
    r'"a\nb"',
    r'"a\tb"',
    r'"\x41"',
    r'"\u00e9"',
    r'"\U0001F600"',
    r'"\ud800"',
    r'"\q"',
    r'"\r"',
    r'"\\"',
    r'"\""',
    '""',
    "a=b",
    "==",
    '"unclosed',
    'a"b',
    '"a"b',
    '"a" b',
    '"a\\',
]
#: The fields the built-in identifier rules read (klog's node, syslog's host among them).
_TRACE_KEYS: Final = frozenset({"trace_id", "traceId", "trace.id"})
_SPAN_KEYS: Final = frozenset({"span_id", "spanId", "span.id"})
_ID_NAMES: Final = [
    "request_id", "requestId", "RequestId", "request-id", "req_id", "x-request-id",
    "X-Request-ID", "correlationId", "correlation_id", "node_id", "node_instance_id",
    "allocation_id", "workflow_id", *sorted(_TRACE_KEYS), *sorted(_SPAN_KEYS), "node", "host",
]  # fmt: skip
_LOGFMT_KEYS: Final = [
    "service", "app", "component", *_ID_NAMES, "global_request_id", "instance", "method",
    "http.method", "http_method", "path", "uri", "url.path", "status", "status_code",
    "http.status_code", "http_status", "err", "addr", "pod", "empty", "level", "lvl", "msg",
    "message", "time", "ts", "t",
]  # fmt: skip
_ODD_LOGFMT_KEYS: Final = ['a"b', "é", "k\\", "Time", "MSG", "x" * 300]
_ID_KEYS: Final = frozenset({*_ID_NAMES, "_HOSTNAME", "_MACHINE_ID"})
_SAFE_IDS: Final = [_REQ, _UUID, "worker-1", "abc_1.2:3/4@5+6~7-8", "nova-api", "200", "x"]


def _right_texts(key: str) -> list[str]:
    """Texts for a field that the identifier check takes when the field is an identifier's."""
    if key in _TRACE_KEYS:
        return [_HEX32, "0123456789abcdef0123456789abcdef"]
    if key in _SPAN_KEYS:
        return [_HEX16, "0123456789abcdef"]
    if key in _ID_KEYS:
        return _SAFE_IDS
    return _TEXTS


@st.composite
def _logfmt_value(draw: st.DrawFn, odd: bool = True, key: str = "") -> str:
    """A value as logfmt writes it (of ``key``): bare when it can be, quoted when it must (or
    anyway), or written with escapes and bad quoting."""
    if odd and draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from(_WRITTEN_VALUES))
    text = draw(_pick(odd, _TEXTS, _ODD_TEXTS) if odd else st.sampled_from(_right_texts(key)))
    must = text == "" or any(c in text for c in ' ="\\\n\t')
    if must or draw(st.integers(0, 3)) == 0:
        return _quote(text) if draw(_pick(odd, [True], [False])) else text
    return text


@st.composite
def _logfmt(draw: st.DrawFn, odd: bool = True) -> str:
    """A logfmt line: a time pair (most often), then pairs of any key, in any order."""
    pairs = [
        f"{key}={draw(_logfmt_value(odd, key))}"
        if draw(st.integers(0, 9))
        else draw(_pick(odd, _LOGFMT_KEYS, _ODD_LOGFMT_KEYS))  # a bare key
        for key in draw(st.lists(st.sampled_from(_LOGFMT_KEYS), max_size=6))
    ]
    if draw(st.integers(0, 2)):
        level = draw(_pick(odd, _LEVEL_WORDS, _ODD_LEVEL_WORDS))
        pairs.insert(0, f"{draw(_pick(odd, ['level', 'lvl'], ['Level']))}={_quote(level)}")
    if draw(st.integers(0, 9)):
        stamp = draw(_iso_time(odd))
        written = _quote(stamp) if " " in stamp or draw(st.booleans()) else stamp
        key = draw(_pick(odd, ["time", "ts", "t"], ["timestamp", "T", ""]))
        pairs.insert(draw(st.integers(0, min(len(pairs), 2))), f"{key}={written}")
    separator = draw(_pick(odd, [" "], ["  ", "\t", " \t"]))
    line = separator.join(pairs)
    if draw(st.integers(0, 9)) == 0:
        line = draw(st.sampled_from([" ", "  "])) + line + draw(st.sampled_from(["", " "]))
    return line


# -- klog ---------------------------------------------------------------------------------------

_KLOG_FILES: Final = ["klog_lines.go:22", "server.go:123", "a.b.c:1", "x:0"]
_ODD_KLOG_FILES: Final = ["a:b:1", "k]:1", "f.go:x", "f.go:", ":1", "f go:1", "é.go:1"]
_KLOG_MESSAGES: Final = [
    "Starting kubelet",
    "Version: v1.29.0",
    "",
    " ",
    'GET "/x"',
    'say "GET /x HTTP/1.1" 200 time: 0.5',
    "node=worker-1 job=abc-1",
    '"unclosed',
    '"a" "b"',
]
_KLOG_QUOTED: Final = [
    '"Pod status updated"',
    '"Message with \\"quotes\\" and spaces"',
    '""',
    '"back\\\\slash"',
    '"a\\nb"',
    '"tab\\there"',
    '"\\x41"',
    '"\\u00e9"',
    '"é"',
    '"GET \\"/a\\" done"',
    '"10.0.0.1 \\"GET /v2 HTTP/1.1\\" 200 time: 0.5"',
]
_KLOG_KEYS: Final = [
    "pod",
    "status",
    "request_id",
    "node",
    "node_id",
    "allocation",
    "err",
    "host",
    "attempt",
    "key",
    "empty",
    "trace_id",
    "span_id",
    "method",
    "path",
    "status_code",
    "pid",
    "file",
    "line",
    "k",
]


@st.composite
def _klog_message(draw: st.DrawFn, odd: bool = True) -> str:
    """A klog message: plain text, or a quoted message and pairs (some that fail)."""
    if draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(_KLOG_MESSAGES))
    pairs = [
        f"{key}={draw(_logfmt_value(odd, key))}"
        if not odd or draw(st.integers(0, 9))
        else draw(st.sampled_from(["k", 'a"b=c', "=x", 'k="unclosed', 'k=v"x', "k=v=w"]))
        for key in draw(st.lists(st.sampled_from(_KLOG_KEYS), max_size=5))
    ]
    separator = draw(_pick(odd, [" "], ["", "  "]))
    quoted = draw(st.sampled_from(_KLOG_QUOTED))
    return quoted + (separator + " ".join(pairs) if pairs else draw(_pick(odd, [""], [" ", "x"])))


def _mmdd(when: tuple[int, int, int, int, int]) -> str:
    month, day, hour, minute, second = when
    return f"{month:02}{day:02} {hour:02}:{minute:02}:{second:02}"


@st.composite
def _klog(draw: st.DrawFn, odd: bool = True) -> str:
    """A klog line: the header of every shape its pattern reads or does not, then a message."""
    letter = draw(_pick(odd, ["I", "W", "E", "F"], ["D", "X", "i", " "]))
    when = draw(_pick(odd, _YEARLESS, _ODD_YEARLESS))
    fraction = draw(_pick(odd, _YEARLESS_FRACTIONS, _ODD_YEARLESS_FRACTIONS))
    spaces = draw(_pick(odd, ["   ", " ", "      "], ["", "\t"]))
    pid = draw(_pick(odd, ["14013", "1", "0"], ["", "x", "9" * 25]))
    file = draw(_pick(odd, _KLOG_FILES, _ODD_KLOG_FILES))
    close = draw(_pick(odd, ["] "], ["]", "]  ", "]\t"]))
    return f"{letter}{_mmdd(when)}{fraction}{spaces}{pid} {file}{close}{draw(_klog_message(odd))}"


# -- syslog -------------------------------------------------------------------------------------

_MONTH_NAMES: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct")
_MONTH_NAMES_ALL: Final = (*_MONTH_NAMES, "Nov", "Dec")
_PRIS: Final = ["", "", "<0>", "<13>", "<34>", "<165>", "<191>"]
_ODD_PRIS: Final = ["<192>", "<0034>", "<x>", "<1", "<>", "<999>", "<1000>", "< 1>"]
_HOSTS: Final = ["combo", "cp-r01-n18.dc1.internal", "vm", "h"]
_ODD_HOSTS: Final = ["bad!host", "-", "é", 'a"b', "x" * 256]
_TAGS: Final = [
    "app: ",
    "app[123]: ",
    "app:",
    "sshd(pam_unix)[19939]: ",
    "kernel: ",
    "provision: ",
    "agent[77]: ",
    "app[1:2]: ",
    "nova-api: ",
    f"{'t' * 128}: ",
    f"app[{'9' * 32}]: ",
]
_ODD_TAGS: Final = [
    "app[a b]: ",
    f"app[{'9' * 33}]: ",
    f"{'t' * 129}: ",
    "",
    "a]b: ",
    "app[]: ",
    "app [1]: ",
    "[a b] ",
    "app[123] ",
    "app:  ",
    "app[1]x: ",
    "é: ",
]
_SYSLOG_MESSAGES: Final = [
    "authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4 ",
    "",
    "x",
    'say "GET /x HTTP/1.1" 200 time: 0.5',
    "a: b",
    "[c] d",
    f"instance {_UUID} spawned {_REQ}",
    "error with trailing spaces  ",
    "request_id=req-1 job=abc-1",
]
_SD: Final = [
    "-",
    '[timeQuality tzKnown="1" isSynced="0"]',
    '[exampleSDID@32473 iut="3" eventSource="Application"]',
    '[id a="1"][id2 c="3"]',
    '[id a="1" b="2"][id2 c="3"]',
    '[id a="b\\"c"]',
    '[id a="x\\]y"]',
    '[id a="\\\\"]',
    '[id a="\\n"]',
    "[id]",
    '[id a="1" a="2"]',
    '[id a="1"][id a="2"]',
    '[a.b c=""]',
    f'[{"i" * 32} {"n" * 32}="1"]',
]
_ODD_SD: Final = [
    "[id a=1]",
    '[id a="1"x]',
    f"[{'i' * 33}]",
    f'[id {"n" * 33}="1"]',
    "x",
    "",
    '[id a="1"',
    "[]",
    "-x",
    '[id  a="1"]',
    '[id a="é"]',
    '[id a="1"] [id2 b="2"]',
]


def _syslog_day(day: int, padded: str) -> str:
    return f"{day:2}" if padded == " " else f"{day:02}" if padded == "0" else str(day)


@st.composite
def _rfc3164(draw: st.DrawFn, odd: bool = True) -> str:
    """RFC 3164 (``<PRI>`` or not): ``Mmm dd hh:mm:ss host tag: message``."""
    when = draw(_pick(odd, _YEARLESS, _ODD_YEARLESS))
    month, day, hour, minute, second = when
    name = (
        _MONTH_NAMES_ALL[month - 1]
        if 1 <= month <= 12
        else draw(st.sampled_from(["Foo", "Jan", "Dec"]))
    )
    name = draw(_pick(odd, [name], ["jan", "JAN", "Janu", "Sept"]))
    padded = draw(_pick(odd, [" ", "0"], [""]))
    stamp = f"{name} {_syslog_day(day, padded)} {hour:02}:{minute:02}:{second:02}"
    stamp += draw(_pick(odd, _YEARLESS_FRACTIONS, _ODD_YEARLESS_FRACTIONS))
    return (
        f"{draw(_pick(odd, _PRIS, _ODD_PRIS))}{stamp} {draw(_pick(odd, _HOSTS, _ODD_HOSTS))} "
        f"{draw(_pick(odd, _TAGS, _ODD_TAGS))}{draw(st.sampled_from(_SYSLOG_MESSAGES))}"
    )


@st.composite
def _rsyslog_file(draw: st.DrawFn, odd: bool = True) -> str:
    """rsyslog's ``RSYSLOG_FileFormat``: an RFC 3339 time, the host, the tag, the message."""
    return (
        f"{draw(_pick(odd, _PRIS, _ODD_PRIS))}{draw(_iso_time(odd))} "
        f"{draw(_pick(odd, _HOSTS, _ODD_HOSTS))} {draw(_pick(odd, _TAGS, _ODD_TAGS))}"
        f"{draw(st.sampled_from(_SYSLOG_MESSAGES))}"
    )


@st.composite
def _rfc5424(draw: st.DrawFn, odd: bool = True) -> str:
    """RFC 5424: ``<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG``, nil values and all."""
    pri = draw(_pick(odd, ["<165>", "<27>", "<0>", "<191>"], ["", "<192>", "<x>"]))
    stamp = draw(st.one_of(_iso_time(odd), _pick(odd, ["2026-11-29T05:41:19.609505+00:00"], ["-"])))
    tokens = [
        draw(_pick(odd, [*_HOSTS, "-"], _ODD_HOSTS)),
        draw(_pick(odd, ["provision", "agent", "-", "a" * 48, "nova-api"], ["a" * 49, ""])),
        draw(_pick(odd, ["4242", "-", "1" * 128], ["1" * 129, ""])),
        draw(_pick(odd, ["ID47", "-", "M" * 32], ["M" * 33])),
        draw(_pick(odd, _SD, _ODD_SD)),
    ]
    separator = draw(_pick(odd, [" "], ["", "  "]))
    message = draw(_pick(odd, _SYSLOG_MESSAGES, ["\ufeffbom", "é"]))
    return f"{pri}{draw(_pick(odd, ['1 '], ['2 ', '1  ', '01 ']))}{stamp} {' '.join(tokens)}" + (
        f"{separator}{message}" if message or draw(st.booleans()) else ""
    )


def _syslog(odd: bool = True) -> st.SearchStrategy[str]:
    """A syslog line of any of its forms."""
    return st.one_of(_rfc3164(odd), _rfc3164(odd), _rsyslog_file(odd), _rfc5424(odd), _rfc5424(odd))


# -- journald -----------------------------------------------------------------------------------

_JOURNAL_TEXTS: Final = [
    "x",
    "",
    "a b",
    'q"uote',
    "back\\slash",
    "cp-r01-n18",
    "3d1219c7c4c5404aaa1f6d2a48adfda4",
    "bad host!",
    _HEX32,
    "GET",
    "/v2/x",
    "200",
    'say "GET /x HTTP/1.1" 200 time: 0.5',
    "provision",
    "kubelet",
    "nova-api",
]
_ODD_JOURNAL_TEXTS: Final = [
    "nl\nx",
    "tab\there",
    "é",
    "\u2028",
    "\x01",
    "\x7f",
    "\x00",
    "\ud800",
    "😀",
    'é "GET /x HTTP/1.1" 200',
]
_STAMPS: Final = [
    "1795930893103993",
    "1795930893103993",
    "1",
    "0",
    "9223372036854775",
    "9223372036854776",
    "01795930893103993",
    "00000000000000001",
]
_ODD_STAMPS: Final = [
    "",
    "x",
    "99999999999999999",
    "1234567890123456789",
    "12345678901234567890",
    "-1",
    "1.5",
    " 1",
    "١٢٣",
]
_PRIORITIES: Final = ["0", "1", "2", "3", "4", "5", "6", "7"]
_ODD_PRIORITIES: Final = ["", "x", "info", "9", "10", " 3"]
_JOURNAL_KEYS: Final = [
    "_HOSTNAME",
    "_MACHINE_ID",
    "SYSLOG_IDENTIFIER",
    "_COMM",
    "_SYSTEMD_UNIT",
    "_PID",
    "_TRANSPORT",
    "__CURSOR",
    "__MONOTONIC_TIMESTAMP",
    "_STREAM_ID",
    "_SYSTEMD_CGROUP",
    "_CAP_EFFECTIVE",
    "_SOURCE_REALTIME_TIMESTAMP",
    "_BOOT_ID",
    "request_id",
    "trace_id",
    "node_id",
    "method",
    "path",
    "status",
    "CODE_FILE",
]
_ODD_JOURNAL_KEYS: Final = ["é", "k y", 'a"b', "", "a\\b", "MESSAGE", "PRIORITY"]
#: Values that are not one string: bytes (valid UTF-8 and not), several values, null, others.
_ODD_JOURNAL_VALUES: Final[list[Any]] = [
    [104, 105],
    [104, 255, 10, 105],
    [],
    ["a", "b"],
    ["a", [104, 105]],
    [["a"]],
    None,
    5,
    {"a": "b"},
    [1000],
    [-1],
    True,
    1.5,
]


@st.composite
def _journal_value(draw: st.DrawFn, odd: bool = True, texts: Sequence[str] | None = None) -> Any:
    if odd and draw(st.integers(0, 7)) == 0:
        return draw(st.sampled_from(_ODD_JOURNAL_VALUES))
    return draw(_pick(odd, texts or _JOURNAL_TEXTS, _ODD_JOURNAL_TEXTS))


@st.composite
def _journald(draw: st.DrawFn, odd: bool = True) -> str:
    """One line of ``journalctl -o json``, its members of every kind, in any order, written
    with or without ``ensure_ascii``, repeated keys and odd spacing included."""
    members: list[tuple[str, Any]] = []
    if draw(st.integers(0, 15)):
        stamp = draw(_pick(odd, _STAMPS, _ODD_STAMPS))
        members.append(("__REALTIME_TIMESTAMP", stamp if draw(st.integers(0, 9)) else int(1e15)))
    if draw(st.integers(0, 7)):
        members.append(("PRIORITY", draw(_journal_value(odd, _PRIORITIES + _ODD_PRIORITIES))))
    if draw(st.integers(0, 7)):
        members.append(("MESSAGE", draw(_journal_value(odd))))
    for _ in range(draw(st.integers(0, 7))):
        key = draw(_pick(odd, _JOURNAL_KEYS, _ODD_JOURNAL_KEYS))
        members.append((key, draw(_journal_value(odd, None if odd else _right_texts(key)))))
    if not odd:  # no repeated key
        members = list(dict(members).items())
    members = draw(st.permutations(members))
    colon, comma = draw(st.sampled_from([(":", ","), (": ", ", "), (" : ", " ,")]))
    ascii_only = draw(st.booleans())
    while True:
        text = comma.join(
            json.dumps(key, ensure_ascii=ascii_only)
            + colon
            + json.dumps(value, ensure_ascii=ascii_only)
            for key, value in members
        )
        try:
            text.encode()
            break
        except UnicodeEncodeError:  # a lone surrogate is no UTF-8: it is written escaped
            ascii_only = True
    text = (
        draw(_pick(odd, [""], [" ", "\t"])) + "{" + text + "}" + draw(_pick(odd, [""], [" ", ","]))
    )
    if odd and draw(st.integers(0, 19)) == 0:  # cut short: not JSON
        text = text[: draw(st.integers(0, len(text)))]
    return text


# -- json ---------------------------------------------------------------------------------------

_TIME_KEYS: Final = ["time", "ts", "@timestamp", "timestamp", "asctime", "T"]
_LEVEL_KEYS: Final = ["level", "log.level", "severity", "levelname", "L"]
_MESSAGE_KEYS: Final = ["msg", "message", "M", "event"]
#: Numbers since 1970 as written: every unit, its bounds, floats as zap and others write them.
_EPOCHS: Final = [
    "1795936013",
    "1795936013171",
    "1795936013171689",
    "1795936013171689123",
    "1795936013.1716418",
    "1795936013.171689",
    "1795936013.5",
    "1795936013.0",
    "1795936013171.5",
    "1795936013171689.2",
    "0",
    "0.0",
    "1.5",
    "123.456",
    "99999999999",
    "100000000000",
    "99999999999999",
    "100000000000000",
    "99999999999999999",
    "100000000000000000",
    "9223372036854775807",
]
_ODD_EPOCHS: Final = [
    "-1",
    "-1.5",
    "-0",
    "-0.0",
    "9223372036854775808",
    "100000000000000000000",
    "1e10",
    "1E3",
    "1795936013.171600",
    "1795936013.1716418123",
    "0.0001",
    "0.00001",
    "1.7959360131716418e18",
    "1e300",
    "01",
    "1.",
    "9223372036854775.808",
]
_JSON_LEVELS: Final = [
    '"info"',
    '"warn"',
    '"DEBUG"',
    '"E"',
    '"3"',
    '"Level 5"',
    '"x"',
    '""',
    "10",
    "20",
    "30",
    "40",
    "50",
    "60",
]
_ODD_JSON_LEVELS: Final = [
    "35",
    "0",
    "-10",
    "30.0",
    "30.5",
    "true",
    "null",
    '["a"]',
    "{}",
    '{"x":1}',
    '"é"',
    '"a\\nb"',
    "3e1",
]
_JSON_MESSAGES: Final = [
    '"handling request"',
    '""',
    '"slow \\"spawn\\""',
    '"back\\\\slash"',
    '"say \\"GET /x HTTP/1.1\\" 200 time: 0.5"',
    '"10.0.0.1 \\"POST /a HTTP/1.1\\" status: 201 time: 12.5"',
    '"\\u0041\\/b"',
    '"job=abc-1"',
]
_ODD_JSON_MESSAGES: Final = [
    '"a\\nb"',
    '"tab\\there"',
    '"é"',
    '"\\u00e9"',
    '"\\u0000"',
    '"\\ud800"',
    '"\\ud83d\\ude00"',
    "5",
    "true",
    "null",
    "[1]",
    "{}",
    '{"a":1}',
    '"\\u001f"',
]
_JSON_KEYS: Final = [
    "service",
    "service.name",
    "app",
    "application",
    "component",
    "request_id",
    "requestId",
    "X-Request-ID",
    "trace_id",
    "traceId",
    "trace.id",
    "span_id",
    "spanId",
    "span.id",
    "node_id",
    "allocation_id",
    "method",
    "http.method",
    "http.request.method",
    "path",
    "url.path",
    "status",
    "status_code",
    "http.status_code",
    "http.response.status_code",
    "caller",
    "host",
    "pid",
    "attempt",
    "tags",
    "latency",
    "cached",
]
_ODD_JSON_KEYS: Final = ["", "é", "a\\u0062", 'a\\"b', "a.b", "a", "log", "http", "x" * 200]
_JSON_VALUES: Final = [
    '"x"',
    '""',
    '"worker-1"',
    '"nova-api"',
    '"provision"',
    f'"{_REQ}"',
    f'"{_HEX32}"',
    f'"{_HEX16}"',
    '"bad id!"',
    '"GET"',
    '"/v2/x"',
    '"200"',
    "200",
    "2000",
    "20",
    "0.001234",
    "false",
    "true",
    "null",
    '["a","b"]',
    "[]",
    "{}",
    "3",
    "-7",
    "1.5",
]
_ODD_JSON_VALUES: Final = [
    '"é"',
    '"a\\nb"',
    '"\\u00e9"',
    '"\\t"',
    "[[[[1]]]]",
    "[" * 70 + "]" * 70,
    "[" * 260 + "]" * 260,
    '{"b":2}',
    '{"level":"x"}',
    '{"method":"POST","status":503}',
    f'{{"id":"{_HEX32}"}}',
    '{"name":"svc"}',
    '{"a":{"b":{"c":{}}}}',
    "1e3",
    "-0",
    "123456789012345678901",
    "0.1000",
    '[1,{"a":[]}]',
]


#: Nested objects as members (flattened with dots): ECS's and OpenTelemetry's names of the
#: level, the request, the service and the trace, dotted keys and nested ones that collide,
#: empty objects, deep ones.
_NESTED: Final = [
    '"log":{"level":"warn","logger":"app.module"}',
    '"log":{"level":""}',
    '"http":{"method":"POST","status":503}',
    '"http":{"request":{"method":"GET"},"response":{"status_code":404}}',
    '"url":{"path":"/v2/x"}',
    '"service":{"name":"nova-api"}',
    f'"trace":{{"id":"{_HEX32}"}},"span":{{"id":"{_HEX16}"}}',
    f'"trace":{{"id":"{_HEX32.upper()}"}}',
    '"a.b":1,"a":{"b":2}',
    '"a":{"b":2},"a.b":1',
    '"a":{"b":{"c":3}},"a.b.c":"x"',
    '"e":{}',
    '"e":{ }',
    '"x":{"y":{"z":{"w":[1,{"v":2}]}}}',
    '"msg":{"a":1}',
    '"time":{"seconds":1,"nanos":5}',
    '"process":{"pid":7,"thread":{"id":140196348218240,"name":"MainThread"}}',
    '"err":{"message":"boom","stack":"Error: boom\\n    at x"}',
    '"d":' + '{"d":' * 70 + "1" + "}" * 70,
]


@st.composite
def _json_time(draw: st.DrawFn, odd: bool = True) -> str:
    """A time key's value as written: a string of every form, or a number of every unit."""
    kind = draw(st.integers(0, 9 if odd else 7))
    if kind < 4:
        return json.dumps(draw(_iso_time(odd)), ensure_ascii=False)
    if kind < 8:
        return draw(_pick(odd, _EPOCHS, _ODD_EPOCHS))
    return draw(st.sampled_from(['"x"', "true", "null", "[1]", '{"seconds":1}', "{}", '""']))


@st.composite
def _json(draw: st.DrawFn, odd: bool = True) -> str:
    """A JSON line of a logging library: time, level and message keys of every name, fields,
    nested objects (flattened: dotted keys and nested ones that collide), repeated keys."""
    members: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 2))):
        members.append((draw(st.sampled_from(_TIME_KEYS)), draw(_json_time(odd))))
    if draw(st.integers(0, 5)):
        members.append((draw(st.sampled_from(_TIME_KEYS)), draw(_json_time(odd))))
    if draw(st.integers(0, 3)):
        key = draw(st.sampled_from(_LEVEL_KEYS))
        members.append((key, draw(_pick(odd, _JSON_LEVELS, _ODD_JSON_LEVELS))))
    if draw(st.integers(0, 3)):
        key = draw(st.sampled_from(_MESSAGE_KEYS))
        members.append((key, draw(_pick(odd, _JSON_MESSAGES, _ODD_JSON_MESSAGES))))
    for _ in range(draw(st.integers(0, 5))):
        key = draw(_pick(odd, _JSON_KEYS, _ODD_JSON_KEYS))
        if odd or key not in _ID_KEYS:
            members.append((key, draw(_pick(odd, _JSON_VALUES, _ODD_JSON_VALUES))))
        else:
            members.append((key, json.dumps(draw(st.sampled_from(_right_texts(key))))))
    if not odd:  # no repeated key
        members = list(dict(members).items())
    parts = [f'"{key}":{value}' for key, value in members]
    parts += draw(st.lists(st.sampled_from(_NESTED), max_size=2, unique=True))
    parts = draw(st.permutations(parts))
    colon, comma = draw(_pick(odd, [":", ": "], [" :\t"])), draw(_pick(odd, [",", ", "], [" , "]))
    text = "{" + comma.join(part.replace('":', '"' + colon, 1) for part in parts) + "}"
    return draw(_pick(odd, [""], [" ", "\t"])) + text + draw(_pick(odd, [""], [" ", "\t", "x"]))


# -- noise for all -------------------------------------------------------------------------------

#: Lines of every format, and nothing in particular.
_OTHERS: Final = [
    "",
    " ",
    "\t",
    "2017-05-16 00:00:04.500 2931 INFO nova.api [-] msg",
    "2026-11-29 04:29:29,123 INFO app.module msg",
    "ts=2026-11-29T05:41:02Z level=info msg=x",
    "I1129 05:41:07.986784   14013 klog_lines.go:22] Starting kubelet",
    "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass",
    "<165>1 2026-11-29T05:41:19Z vm app 1 ID - msg",
    '{"__REALTIME_TIMESTAMP":"1795930893103993","MESSAGE":"m","PRIORITY":"6"}',
    '{"level":"info","ts":1795936013,"msg":"m"}',
    "[]",
    "{",
    "null",
    '"x"',
    "  continued",
    "Traceback (most recent call last):",
]
_LONG: Final = (
    ("ts=2026-11-29T05:41:02Z msg=" + "x" * MAX_LINE_BYTES).encode(),
    ('{"ts":1795936013,"msg":"' + "x" * MAX_LINE_BYTES + '"}').encode(),
    ("I1129 05:41:07.986784   14013 f.go:1] " + "y" * (MAX_LINE_BYTES - 38)).encode(),
)


@st.composite
def _long(draw: st.DrawFn) -> bytes:
    """One line in a hundred past the limit (each costs both paths a MiB), else a blank one."""
    return draw(st.sampled_from(_LONG)) if draw(st.integers(0, 99)) == 0 else b""


def _noise(lines: Callable[[bool], st.SearchStrategy[str]]) -> st.SearchStrategy[bytes]:
    """A format's lines (most often: with odd parts and spoiled, or with right parts only,
    which the native mapping mostly reads) among lines of any sort."""
    odd = _spoiled(lines(True))
    right = lines(False).map(str.encode)
    return st.one_of(
        odd,
        odd,
        odd,
        right,
        right,
        right,
        _spoiled(st.sampled_from(_OTHERS)),
        _long(),
        st.binary(max_size=60),
        st.text(max_size=40).map(str.encode),
    )


_LINES: Final[dict[str, st.SearchStrategy[bytes]]] = {
    "logfmt": _noise(_logfmt),
    "klog": _noise(_klog),
    "syslog": _noise(_syslog),
    "journald": _noise(_journald),
    "json": _noise(_json),
}


# -- shapes that once differed -------------------------------------------------------------------

_ONCE_DIFFERED: Final = [
    # journald's 16 digits of microseconds past 2262 (the mapping overflowed int64)
    pytest.param("journald", b'{"__REALTIME_TIMESTAMP":"9223372036854776"}', id="past-2262"),
    pytest.param("journald", b'{"__REALTIME_TIMESTAMP":"9999999999999999"}', id="16-nines"),
    pytest.param("journald", b'{"__REALTIME_TIMESTAMP":"9223372036854775"}', id="last-us"),
    # level words with spaces around them, which the parser strips (Unicode's too)
    pytest.param("logfmt", b'time=2026-11-29T05:41:02Z level=" E"', id="logfmt-level"),
    pytest.param("logfmt", b'time=2026-11-29T05:41:02Z level="info "', id="logfmt-level-end"),
    pytest.param(
        "journald", b'{"__REALTIME_TIMESTAMP":"1","PRIORITY":"\\u00a06"}', id="journald-nbsp"
    ),
    pytest.param("journald", b'{"__REALTIME_TIMESTAMP":"1","PRIORITY":" 3"}', id="journald-level"),
    pytest.param("json", b'{"ts":1795936013,"level":" 3"}', id="json-level"),
    pytest.param("json", b'{"ts":1795936013,"level":"\\u212aX"}', id="json-kelvin-sign"),
]


@pytest.mark.parametrize(("text_format", "line"), _ONCE_DIFFERED)
def test_the_shapes_that_once_differed_give_what_the_parser_gives(
    text_format: str, line: bytes
) -> None:
    _assert_same([line], "kubelet.log", text_format=text_format)


_PROPERTY: Final = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_OPTIONS: Final = {
    "origin": st.sampled_from(_ORIGINS),
    "layer": _LAYERS,
    "service": _SERVICES,
    "zone": st.sampled_from(_ZONES),
    "rules": _RULES,
    "start_line": st.integers(1, 10**6),
}


@pytest.mark.parametrize("text_format", sorted(_LINES))
@_PROPERTY
@given(data=st.data(), **_OPTIONS)
def test_each_format_gives_what_the_parser_gives(
    rule_sets: list[TextRules | None], text_format: str, data: st.DataObject, **values: Any
) -> None:
    lines = data.draw(st.lists(_LINES[text_format], max_size=12), label="lines")
    _check(rule_sets, lines, text_format, **values)


# -- the real lines -----------------------------------------------------------------------------

_FIXTURE_ZONES: Final[list[tzinfo]] = [
    UTC,
    timezone(timedelta(hours=-5, minutes=-30)),
    ZoneInfo("Europe/Paris"),
]


@pytest.mark.parametrize("zone", _FIXTURE_ZONES, ids=["utc", "-05:30", "paris"])
@pytest.mark.parametrize("start_line", [1, 1_001])
@pytest.mark.parametrize("text_format", list(_FIXTURE_NAMES))
def test_the_fixtures_give_what_the_parser_gives(
    text_format: str, start_line: int, zone: tzinfo
) -> None:
    for file in _FIXTURE_NAMES[text_format]:
        lines = (_FIXTURES / file).read_bytes().splitlines()
        _assert_same(lines, file, start_line, text_format=text_format, zone=zone, layer="api")
        _assert_same(lines, "kubelet.log", start_line, text_format=text_format, zone=zone)
        _assert_same(lines, "stdin", start_line, text_format=text_format, zone=zone)


@pytest.mark.parametrize("ends", [b"\r", b"\r\r"])
@pytest.mark.parametrize("text_format", list(_FIXTURE_NAMES))
def test_a_line_ending_in_cr_gives_what_the_parser_gives(text_format: str, ends: bytes) -> None:
    lines = [line + ends for line in _FIXTURE_LINES[text_format]]
    _assert_same(lines, "kubelet.log", text_format=text_format)


@pytest.mark.parametrize("text_format", list(_FIXTURE_NAMES))
def test_a_line_past_the_limit_gives_what_the_parser_gives(text_format: str) -> None:
    first, *rest = _FIXTURE_LINES[text_format]
    _assert_same([first, *_LONG, *rest[:5]], "kubelet.log", text_format=text_format)


# -- the native part does the work --------------------------------------------------------------


def _printable(line: bytes) -> bool:
    return all(32 <= byte < 127 for byte in line)


def _logfmt_declined(line: bytes) -> bool:
    """A logfmt line the native mapping leaves to the parser: not printable ASCII, or a
    quoted value with an escape other than ``\\"`` and ``\\\\`` (``\\n`` makes a message of
    two lines)."""
    return not _printable(line) or b"\\" in re.sub(rb'\\["\\]', b"", line)


def _json_declined(line: bytes) -> bool:
    """A JSON line the native mapping leaves to the parser: a float of more than 15
    significant digits (orjson's shortest text and the line's may differ: zap's times), or a
    message of several lines."""
    entry = orjson.loads(line)
    floats = re.findall(rb":(-?\d+)\.(\d+)[,}]", line)
    long_float = any(len((whole + fraction).lstrip(b"0")) > 15 for whole, fraction in floats)
    message = next((entry[key] for key in _MESSAGE_KEYS if key in entry), "")
    return long_float or "\n" in message


#: Which of a benchmark kind's lines the native mapping declines (the module says).
_BENCHMARK_DECLINED: Final = {
    "logfmt": _logfmt_declined,
    "klog": lambda _line: False,
    "syslog": lambda _line: False,
    "journald": lambda _line: False,
    "json": _json_declined,
}


@pytest.mark.parametrize(
    "kind",
    [LOGFMT_KIND, KLOG_KIND, SYSLOG_KIND, JOURNALD_KIND, JSON_KIND],
    ids=lambda kind: kind.name,
)
def test_the_benchmarks_lines_are_mapped_natively(kind: Kind, tmp_path: Path) -> None:
    lines = _benchmark(kind, tmp_path)
    declines = _BENCHMARK_DECLINED[kind.name]
    expected = [index for index, line in enumerate(lines) if declines(line)]
    # The share the native mapping reads: 94 % of logfmt's lines, 79 % of json's (zap's
    # times of 16 digits are the parser's), all of the others'.
    assert len(expected) < len(lines) * 4 // 10
    origin = str(tmp_path / f"{kind.name}.log")
    assert _declined(lines, origin, kind.name) == expected
    values: dict[str, Any] = dict(kind.options)
    _assert_same(lines, origin, **values)


def test_the_yearless_times_are_clear_of_the_boundary() -> None:
    # The times drawn are hours from "now + a day", and still are (the test runs in minutes).
    assert len(_YEARLESS) > 10
    assert time.time() + FUTURE_SLACK_NS / 1e9 < _BOUNDARY_S + _CLEARANCE.total_seconds() / 2
