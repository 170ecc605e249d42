"""Row parsers read in batches (nginx, the text formats): cut only where a record starts, each
batch parsed alone gives what the whole input parsed at once gives, and stores the same rows.

The lines are the real samples of each source (``samples/nginx``, the text fixtures, whose
README says where each came from) mixed with hostile ones: blank lines, lines of no format,
invalid UTF-8, ``\\r`` ends, continuation lines and nginx error messages whose quote stays open
over the following lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from correlator._parse_workers import chunks, reading
from correlator._schema import columns_from_events, events_table
from correlator.errors import QueryError
from correlator.ingest import _after_commit, _Span, ingest_items, ingest_lines, ingest_paths
from correlator.model import Event, Reject
from correlator.sources import source
from correlator.sources.nginx import parse as nginx_parse
from correlator.sources.text import FORMATS
from correlator.sources.text._rules_file import read_rules
from correlator.store import Store
from tests.correlator.conftest import RecordingPool
from tests.correlator.sources.text.test_rules_file import BILLING
from tests.stored import stored_events

_HERE: Final = Path(__file__).parent
_TEXT_FIXTURES: Final = _HERE / "sources" / "text" / "fixtures"

_HOSTILE: Final = [
    b"",
    b"   ",
    b"not a record of any format",
    b"\xff\xfe invalid UTF-8 \xc3",
    b"  continues whatever is above\r",
    b'  File "/srv/app.py", line 3, in main',
    b"ValueError: a continuation that names an exception",
    b'" closes a quote left open',
    b"{ not json",
]

_NGINX: Final = [
    *(_HERE / "samples" / "nginx" / "access.log").read_bytes().splitlines(),
    *(_HERE / "samples" / "nginx" / "error.log").read_bytes().splitlines(),
    # an error message whose quote stays open: it continues on the lines after it
    b'2026/11/22 13:11:19 [error] 7#7: *9 upstream timed out, client: 10.0.0.1, request: "GET /x',
    b"2026/11/22 13:11:20 [warn] 7#7: *10 an error line without quotes",
]

#: A format's sample lines: its fixtures.
_TEXT: Final = {
    "oslo": ["openstack_2k_head.log"],
    "klog": ["klog.log"],
    "logfmt": ["logfmt_gologfmt.log", "logfmt_logrus.log"],
    "syslog": ["linux_2k_excerpt.log", "syslog_local.log", "syslog_logger_stderr.log"],
    "journald": ["journald.json"],
    "python": ["python_default.log", "python_asctime.log", "python_dashes.log"],
    "json": ["json_structlog.log", "json_zap.log", "json_pino.log"],
}


def _text_lines(name: str) -> list[bytes]:
    return [
        line
        for fixture in _TEXT[name]
        for line in (_TEXT_FIXTURES / fixture).read_bytes().splitlines()
    ]


def test_every_format_has_samples_here() -> None:
    assert set(_TEXT) == set(FORMATS)


def _cases() -> Iterator[tuple[str, dict[str, Any], list[bytes]]]:
    yield "nginx", {}, _NGINX
    for name in _TEXT:
        yield "text", {"text_format": name, "layer": "node"}, _text_lines(name)


_CASES: Final = list(_cases())


def _whole(kind: str, values: dict[str, Any], lines: list[bytes]) -> list[Event | Reject]:
    parse = source(kind).parse
    assert parse is not None
    return list(parse(lines, "f.log", **values))


def _batched(
    kind: str, values: dict[str, Any], lines: list[bytes], size: int
) -> tuple[list[Event | Reject], list[list[bytes]]]:
    declared = source(kind)
    parse = declared.parse
    assert parse is not None
    cut = reading(declared, values).cut
    items: list[Event | Reject] = []
    batches = []
    for chunk, start_line in chunks(lines, size, cut):
        batches.append(chunk)
        items += parse(chunk, "f.log", start_line=start_line, **values)
    return items, batches


@pytest.mark.parametrize(
    ("kind", "values", "samples"), _CASES, ids=[c[1].get("text_format", c[0]) for c in _CASES]
)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_batches_parsed_alone_give_what_the_whole_input_gives(
    kind: str, values: dict[str, Any], samples: list[bytes], data: st.DataObject
) -> None:
    lines = data.draw(st.lists(st.sampled_from(samples + _HOSTILE), max_size=40))
    size = data.draw(st.integers(1, 8))
    items, batches = _batched(kind, values, lines, size)
    assert items == _whole(kind, values, lines)
    assert [line for batch in batches for line in batch] == lines


def test_a_batch_is_cut_only_before_a_line_that_starts_a_record() -> None:
    # A traceback folded into its record stays with it, whatever the batch size.
    lines = _text_lines("python")
    values = {"text_format": "python", "layer": "node"}
    cut = reading(source("text"), values).cut
    assert cut is not None
    batches = [chunk for chunk, _ in chunks(lines, 1, cut)]
    assert all(cut(batch[0]) for batch in batches)
    assert any(len(batch) > 1 for batch in batches)  # the multi-line records
    assert [line for batch in batches for line in batch] == lines


def test_the_text_source_cuts_only_once_its_format_is_settled() -> None:
    with pytest.raises(ValueError, match="settle --format auto"):
        reading(source("text"), {"text_format": "auto"})


@pytest.mark.parametrize(
    ("kind", "values", "samples"), _CASES, ids=[c[1].get("text_format", c[0]) for c in _CASES]
)
def test_the_batched_ingest_stores_what_the_row_ingest_stores(
    tmp_path: Path, kind: str, values: dict[str, Any], samples: list[bytes]
) -> None:
    lines = list(islice(iter(samples * 3), 400)) + _HOSTILE
    parse = source(kind).parse
    assert parse is not None
    with Store(tmp_path / "rows.duckdb") as by_rows, Store(tmp_path / "batches.duckdb") as batched:
        span = _Span()  # the row path's: what each event covers, as it goes by
        with by_rows.bulk():
            expected = ingest_items(by_rows, span.watch(parse(lines, "f.log", **values)))
        _after_commit(by_rows, source(kind), span)  # nginx links errors to their requests
        got = ingest_lines(batched, kind, lines, "f.log", options=values, batch_events=7)
        assert (got.accepted, got.duplicate, got.rejected) == (
            expected.accepted,
            expected.duplicate,
            expected.rejected,
        )
        assert got.accepted > 0
        stored = stored_events(batched)
        assert stored == stored_events(by_rows)
    if kind == "nginx":  # error lines were linked to their requests' access lines
        assert any(e.attrs["log"] == "error" and e.correlation_id for e in stored)


_ACCESS: Final = (
    b'127.0.0.1 - - [22/Nov/2026:12:00:0%d +0000] "GET /v1/x HTTP/1.1" 502 0 "-" "curl" '
    b'"req-%d" rt=%s'
)


@pytest.mark.parametrize(
    "request_time",
    ["0.0000000005", "0.0000000015", "12.5", "1e300", "4611686018.4", "-"],
)
def test_a_tables_span_is_its_events_span(tmp_path: Path, request_time: str) -> None:
    # What an input covers (nginx links errors within it) reads the same from a batch's table
    # as from its events, rounding included; a hostile request time of 1e300 seconds reaches
    # back ~146 years, and the ingest goes on (it raised OverflowError before).
    lines = [_ACCESS % (n, n, request_time.encode()) for n in range(3)]
    events = [e for e in nginx_parse(lines, "f.log") if isinstance(e, Event)]
    by_events, by_table = _Span(), _Span()
    list(by_events.watch(events))
    by_table.widen(events_table(columns_from_events(events)))
    assert (by_table.start_ns, by_table.end_ns) == (by_events.start_ns, by_events.end_ns)
    assert by_events.start_ns is not None
    assert by_events.start_ns >= events[0].ts_ns - 2**62
    with Store(tmp_path / "evidence.duckdb") as store:
        assert ingest_lines(store, "nginx", lines, "f.log").accepted == 3


def test_text_files_are_parsed_by_workers_each_in_its_own_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_pools: list[RecordingPool]
) -> None:
    # --format auto settles each file's format from its first lines, in the reading thread;
    # the workers read each file's batches in that format, the notes say what was chosen.
    # The built-in formats are mapped natively: parse threads read them.
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)  # every file is "large"
    paths = []
    for name in ("python", "klog", "oslo"):
        path = tmp_path / f"nova-api.{name}.log"
        path.write_bytes(b"\n".join(_text_lines(name)) + b"\n")
        paths.append(path)
    values = {"layer": "node"}
    with Store(tmp_path / "workers.duckdb") as workers, Store(tmp_path / "here.duckdb") as here:
        parallel = ingest_paths(workers, "text", paths, workers=2, options=values)
        serial = ingest_paths(here, "text", paths, workers=1, options=values)
        assert stored_events(workers) == stored_events(here)
    assert parallel == serial
    assert [note.split(": ")[0] for note in parallel.notes] == [str(path) for path in paths]
    assert len(started_pools) == 1
    assert started_pools[0].ran_elsewhere()
    assert started_pools[0].threads


def test_a_text_file_no_format_reads_stops_the_ingest_after_the_files_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_pools: list[RecordingPool]
) -> None:
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)
    good, bad = tmp_path / "agent.log", tmp_path / "noise.log"
    good.write_bytes(b"\n".join(_text_lines("klog")) + b"\n")
    bad.write_bytes(b"\x00\x01 no format reads this\n" * 60)
    with Store(tmp_path / "evidence.duckdb") as store:
        with pytest.raises(QueryError, match="format"):
            ingest_paths(store, "text", [good, bad], workers=2, options={"layer": "node"})
        assert store.count() == len(stored_events(store)) > 0  # the first file's events


def test_an_operators_own_format_is_read_in_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_pools: list[RecordingPool]
) -> None:
    # The rules file (its compiled patterns) goes to the workers with each batch, and its
    # format's start pattern cuts the batches: a folded line stays with its record.
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr("correlator.ingest.BATCH_EVENTS", 7)
    rules_path = tmp_path / "rules.toml"
    rules_path.write_text(BILLING)  # the rules file tests' format, its start its pattern
    rules = read_rules(str(rules_path), frozenset(FORMATS))
    lines = []
    for n in range(60):
        lines.append(f"2026-11-29 04:29:{n:02d},123 ERROR [req-{n}] charge failed".encode())
        if n % 4 == 0:
            lines.append(b"  at billing.charge(Billing.java:42)")
    path = tmp_path / "billing.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    values = {"rules": rules}
    with Store(tmp_path / "workers.duckdb") as workers, Store(tmp_path / "here.duckdb") as here:
        parallel = ingest_paths(workers, "text", [path], workers=2, options=values)
        serial = ingest_paths(here, "text", [path], workers=1, options=values)
        stored = stored_events(workers)
        assert stored == stored_events(here)
    assert parallel == serial
    assert parallel.accepted == 60
    assert sum("\n" in e.raw for e in stored) == 15  # the folded lines, each in its record
    assert {e.correlation_id for e in stored} == {f"req-{n}" for n in range(60)}
    assert started_pools[0].submitted > 1 and started_pools[0].ran_elsewhere()
    # the operator's identifier rules are the parser's alone: worker processes read them
    assert not started_pools[0].threads
