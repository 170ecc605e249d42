"""Every source under hostile input: random bytes, invalid and mixed encodings, lines past the
limit, nesting thousands of levels deep, integers of thousands of digits, alone or inside an
otherwise good record, between two good records.

Whatever the input, a source must not raise, must give each reject a reason, must keep the
good records around the bad ones, and must read with memory bounded by the input's size (the
peak of what Python allocates while parsing, by ``tracemalloc``). Sources: every kind of
``correlator.sources.file_kinds()`` through its parser, the columnar parser and the table path
of the NDJSON kinds (the bulk ingest's: the native mapping and the Python one for what it
declines), and the ``loki`` source's mapping of entries. ``tracemalloc`` sees what Python
allocates, not the native mapping's own buffers (sized by the batch).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Final, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_logging.loki._client import LokiClient, QueriedEntry
from correlator._schema import columns_from_events
from correlator.model import MAX_LINE_BYTES, Event, Reject
from correlator.sources import SOURCES as REGISTRY
from correlator.sources import Parser, file_kinds, ndjson
from correlator.sources.loki import fetch

RECORD_A = b'{"ts":"2026-11-22T13:11:19Z","layer":"api","event":"before","allocation_id":"a-1"}'
RECORD_B = b'{"ts":"2026-11-22T13:11:20Z","layer":"api","event":"after","allocation_id":"a-2"}'
#: Two good records of each kind, each a line that starts a record of its format.
GOOD: Final = {
    "ndjson": (RECORD_A, RECORD_B),
    "agent": (RECORD_A, RECORD_B),
    "nginx": (
        b'127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "POST /v1/allocations HTTP/1.1" 502 157 '
        b'"-" "curl/8.5.0" "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"',
        b"2026/11/22 13:11:19 [error] 1234#1234: *5 connect() failed (111: Connection "
        b"refused) while connecting to upstream, client: 127.0.0.1",
    ),
    "text": (  # logfmt, each line a record; nova-api is a service the built-in names place
        b"time=2026-11-22T13:11:19Z level=info msg=before service=nova-api allocation_id=a-1",
        b'time=2026-11-22T13:11:20Z level=error msg="after" service=nova-api request_id=r-2',
    ),
    "postgres": (
        b"2026-11-22 13:11:18.001 UTC,,,4700,,6740a1a0.125c,1,,2026-11-22 13:10:00 UTC,,0,LOG,"
        b'00000,"database system is ready to accept connections",,,,,,,,,"","postmaster",,0',
        b'{"timestamp":"2026-11-22 13:11:19.123 UTC","pid":4711,"error_severity":"ERROR",'
        b'"state_code":"55P03","message":"canceling statement due to lock timeout"}',
    ),
    "workflow": (
        b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"allocation","entity_id":"a-1",'
        b'"to":"requested"}',
        b'{"ts":"2026-11-22T13:11:20Z","entity_kind":"allocation","entity_id":"a-2",'
        b'"from":"requested","to":"provisioning"}',
    ),
    "k8s": (
        b'{"kind":"ProvisionRequest","metadata":{"name":"pr-1","creationTimestamp":'
        b'"2026-11-22T13:11:19Z"},"status":{"phase":"Pending"}}',
        b'{"type":"MODIFIED","object":{"kind":"ProvisionRequest","metadata":{"name":"pr-2",'
        b'"creationTimestamp":"2026-11-22T13:11:20Z"},"status":{"phase":"Failed"}}}',
    ),
    "aap": (
        b'{"id":4711,"type":"job","status":"failed","created":"2026-11-22T13:11:19Z"}',
        b'{"id":12,"activation_id":3,"status":"running","started_at":"2026-11-22T13:11:20Z"}',
    ),
    "loki": (RECORD_A, RECORD_B),
}

T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z


Outcome = tuple[list[int], list[Reject]]
#: A source: given the lines, what reads them (prepared outside the memory measurement) and
#: returns the hashes of the events kept and the rejects.
Source = Callable[[list[bytes]], Callable[[], Outcome]]


def _outcome(items: list[Event | Reject]) -> Outcome:
    events = [item for item in items if isinstance(item, Event)]
    # As the store takes them: an event whose attrs orjson cannot write failed the insert,
    # and with it the whole file (a workflow line with a field nested 300 levels deep).
    columns = columns_from_events(events)
    return columns["hash"], [item for item in items if isinstance(item, Reject)]


FILE_KINDS: Final = file_kinds()


def parser_for(kind: str) -> Parser:
    parse = REGISTRY[kind].parse
    assert parse is not None
    return parse


def _file_kind(kind: str) -> Source:
    parse = parser_for(kind)
    return lambda lines: lambda: _outcome(list(parse(lines, "hostile")))


def _columns(kind: str) -> Source:
    def prepare(lines: list[bytes]) -> Callable[[], Outcome]:
        def run() -> Outcome:
            columns, rejects = ndjson.parse_columns(lines, "hostile", source=kind)
            return list(columns["hash"]), rejects

        return run

    return prepare


def _table(kind: str) -> Callable[[list[bytes]], Callable[[], Outcome]]:
    """The NDJSON kinds' table path (the native mapping, the Python one for what it
    declines): what a bulk ingest runs."""

    def prepare(lines: list[bytes]) -> Callable[[], Outcome]:
        def run() -> Outcome:
            table, rejects = ndjson.parse_table(lines, "hostile", source=kind)
            return table.column("hash").to_pylist(), rejects

        return run

    return prepare


class _Loki:
    """A Loki client that has the entries already: what is measured is the source's mapping
    of them, not the client's reading of an answer."""

    def __init__(self, entries: list[QueriedEntry]) -> None:
        self.entries = entries

    def iter_query_range(self, query: str, **window: int) -> Iterator[QueriedEntry]:
        return iter(self.entries)


def _loki(lines: list[bytes]) -> Callable[[], Outcome]:
    # What Loki returns is JSON text: its lines are valid Unicode, whatever was shipped. An
    # entry's hash covers its time: one time for all, so that a line hashes alike anywhere.
    labels = {"service_name": "api", "layer": "api"}
    entries = [QueriedEntry(labels, T0, line.decode("utf-8", "replace")) for line in lines]
    client = cast(LokiClient, _Loki(entries))
    return lambda: _outcome(list(fetch(client, '{layer=~".+"}', start_ns=T0, end_ns=T0 + 1)))


#: Every way into the store a line can take: each file kind's parser, the columnar path of
#: the NDJSON kinds, and Loki's entries (by name: the kind whose good records they get, and
#: the source).
SOURCES: Final[dict[str, tuple[str, Source]]] = {
    **{kind: (kind, _file_kind(kind)) for kind in FILE_KINDS},
    "ndjson-columns": ("ndjson", _columns("ndjson")),
    "agent-columns": ("agent", _columns("agent")),
    "ndjson-table": ("ndjson", _table("ndjson")),
    "agent-table": ("agent", _table("agent")),
    "loki": ("loki", _loki),
}


def _kept(source: Source, lines: list[bytes]) -> set[int]:
    return set(source(lines)()[0])


def _one_line(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


def _repeated(unit: bytes, size: int) -> bytes:
    return (unit * (size // len(unit) + 1))[:size]


def _deep(opener: bytes, depth: int, closed: bool) -> bytes:
    closer = {b"[": b"]", b'{"a":': b"}"}[opener]
    inner = b"1" if opener != b"[" else b""
    return opener * depth + inner + (closer * depth if closed else b"")


NOISE = st.binary(max_size=300).map(_one_line)
INVALID_UTF8 = st.tuples(
    st.binary(max_size=40),
    st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]),
).map(lambda parts: _one_line(parts[0] + parts[1]))
MIXED_ENCODINGS = st.tuples(
    st.text(max_size=40), st.sampled_from(["latin-1", "utf-16", "utf-16-le", "cp1252", "utf-8"])
).map(lambda parts: _one_line(parts[0].encode(parts[1], "replace")))
HUGE_LINES = st.builds(
    _repeated,
    st.sampled_from([b"x", b"\x00", b'{"a":"', b"[", b'"\\"', b"\xff", b"/* ", b" "]),
    st.integers(MAX_LINE_BYTES - 2, MAX_LINE_BYTES + 4),
)
DEEP = st.builds(_deep, st.sampled_from([b"[", b'{"a":']), st.integers(1, 100_000), st.booleans())
HUGE_INTEGERS = st.builds(
    lambda sign, digits, fraction: sign + b"9" * digits + fraction,
    st.sampled_from([b"", b"-"]),
    st.integers(1, 100_000),
    st.sampled_from([b"", b".5", b"e-99999", b"e+5"]),
)
VALUES = DEEP | HUGE_INTEGERS | NOISE


def _inside(record: bytes, value: bytes) -> bytes:
    """``record`` (a JSON object) with one more field holding ``value``."""
    return record[:-1] + b',"x":' + value + record[-1:]


@st.composite
def hostile_lines(draw: st.DrawFn, kind: str) -> list[bytes]:
    """One to three bad lines: bytes of any sort, or a good record carrying a bad value."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()) and GOOD[kind][0].startswith(b"{"):
            lines.append(_inside(GOOD[kind][0], draw(VALUES)))
        else:
            lines.append(draw(NOISE | INVALID_UTF8 | MIXED_ENCODINGS | HUGE_LINES | DEEP))
    return lines


#: The most a parse may allocate at its peak: a multiple of its input, plus a fixed allowance
#: (a 1 MiB line is decoded, parsed and excerpted; a document source joins its lines).
MEMORY_PER_INPUT_BYTE: Final = 16
MEMORY_FIXED_BYTES: Final = 8 * 1024 * 1024


@pytest.mark.parametrize("name", list(SOURCES))
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_a_source_keeps_good_records_around_hostile_lines(name: str, data: st.DataObject) -> None:
    kind, source = SOURCES[name]
    good_a, good_b = GOOD[kind]
    bad = data.draw(hostile_lines(kind), label="bad lines")
    lines = [good_a, *bad, good_b]
    wanted = _kept(source, [good_a]) | _kept(source, [good_b])
    run = source(lines)

    tracemalloc.start()
    try:
        kept, rejects = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert all(reject.reason.strip() for reject in rejects)
    assert len(wanted) >= 2
    assert wanted <= set(kept)  # the good neighbours, as read alone
    size = sum(len(line) + 1 for line in lines)
    assert peak <= MEMORY_PER_INPUT_BYTE * size + MEMORY_FIXED_BYTES, (peak, size)


def test_the_hostile_sources_are_every_source() -> None:
    # A kind added to the registry is fed hostile input without anyone listing it here.
    assert set(FILE_KINDS) <= set(SOURCES)
    assert {kind for kind, _ in SOURCES.values()} == {*FILE_KINDS, "loki"}
    assert set(GOOD) == {*FILE_KINDS, "loki"}


DEEP_FIELD: Final = b"[" * 300 + b"]" * 300  # orjson reads it, and cannot write it


@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep.json"),
        pytest.param(b"[" * 100_000, id="deep-unclosed"),
        pytest.param(b'{"a":' * 1_000 + b"1" + b"}" * 1_000, id="deep-object"),
        pytest.param(b"9" * 100_000, id="huge-integer"),
        pytest.param(b"\xff" * (MAX_LINE_BYTES + 2), id="huge-line"),
        pytest.param(None, id="deep-field"),  # in a good record of the kind
    ],
)
def test_the_inputs_that_broke_a_source(name: str, bad: bytes | None) -> None:
    kind, source = SOURCES[name]
    good_a, good_b = GOOD[kind]
    if bad is None:
        bad = _inside(good_a if good_a.startswith(b"{") else RECORD_A, DEEP_FIELD)

    kept, rejects = source([good_a, bad, good_b])()

    assert _kept(source, [good_a]) | _kept(source, [good_b]) <= set(kept)
    if name != "loki":  # an entry that is no record is kept as text, with its labels' layer
        assert [reject.line_no for reject in rejects] == [2]
    assert all(reject.reason for reject in rejects)


@pytest.mark.parametrize("kind", ["k8s", "aap"])
def test_a_deep_item_of_a_document_is_a_reject_of_that_item(kind: str) -> None:
    # orjson reads 1,024 levels and writes 254: an item it read but cannot write crashed the
    # ingest with TypeError (json.dumps of raw), and lost the file.
    good = GOOD[kind][0]
    deep = _inside(good, DEEP_FIELD)
    page = b'{"%s":[%s,%s]}' % (b"items" if kind == "k8s" else b"results", good, deep)

    items = list(parser_for(kind)([good, page], "f"))

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        ("line 2 item 2 (ProvisionRequest pr-1)" if kind == "k8s" else "line 2 result 2 (aap:4711)")
        + " is nested deeper than the 254 levels of objects and arrays "
        + ("an item" if kind == "k8s" else "a job")
        + " may have"
    ]
    assert len([item for item in items if isinstance(item, Event)]) == 2
