"""Ingest through worker processes stores exactly what ingest in one process stores; a damaged
``.gz`` keeps what came before the damage; nginx links read only what lies near an ingest."""

from __future__ import annotations

import dataclasses
import errno
import gzip
import io
import tracemalloc
from datetime import timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from correlator.cli import main
from correlator.errors import InputError
from correlator.ingest import ingest_lines, ingest_paths, parse_pool, read_lines
from correlator.model import MAX_LINE_BYTES, Event
from correlator.sources import source
from correlator.store import Store
from tests.correlator.conftest import RecordingPool
from tests.stored import stored_events

LINES = [
    b'{"ts": "2026-11-22T13:11:19.000000001Z", "level": "info", "event": "task claimed", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1"}',
    b'{"ts": "2026-11-22T13:11:20Z", "level": "error", "event": "ansible-playbook not found", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1", '
    b'"error": {"type": "FileNotFoundError", "message": "No such file or directory", '
    b'"owner_layer": "deploy", "chain": []}}',
    b'{"ts": "yesterday", "layer": "node"}',
    b'{"ts": "2026-11-22T13:11:21Z", "level": "info", "event": "request", "service": "api", '
    b'"layer": "api", "correlation_id": "c-1", "allocation_id": "a-1", "method": "POST", '
    b'"path": "/v1/allocations", "status": 201, "duration_s": 0.12}',
    b"\xff",
    b'{"ts": "2026-11-22T13:11:19.000000001Z", "level": "info", "event": "task claimed", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1"}',
    b'{"ts": "2026-11-22T13:11:22Z", "event": "heartbeat", "layer": "node", "node_id": "n-1"}',
]


def _contents(store: Store) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    cursor = store.cursor()
    events = cursor.execute("SELECT * FROM events ORDER BY hash").fetchall()
    rejects = cursor.execute(
        "SELECT source, origin, line_no, reason, excerpt FROM rejects ORDER BY line_no"
    ).fetchall()
    return events, rejects


@pytest.mark.integration
def test_worker_processes_store_the_same_as_one_process(tmp_path: Path) -> None:
    with Store(tmp_path / "one.duckdb") as one, Store(tmp_path / "pool.duckdb") as pooled:
        alone = ingest_lines(one, "agent", LINES, "agent.jsonl", batch_events=2)
        with parse_pool(2) as pool:
            shared = ingest_lines(pooled, "agent", LINES, "agent.jsonl", batch_events=2, pool=pool)
        assert alone.as_dict() == shared.as_dict()
        assert alone.as_dict() == {
            "accepted": 4,
            "duplicate": 1,
            "rejected": 2,
            "rejected_by_reason": {
                "line has a field 'ts' that is not an RFC timestamp": 1,
                "line is not valid UTF-8 (byte 0xff at offset 0)": 1,
            },
            "notes": [],
        }
        assert _contents(one) == _contents(pooled)
        assert [row[2] for row in _contents(pooled)[1]] == [3, 5]


#: A state transition: the workflow adapter has no columnar parser (never parsed in workers).
TRANSITION = (
    b'{"ts": "2026-11-22T13:11:19Z", "entity_kind": "allocation", "entity_id": "a-1", "to": "x"}'
)


@pytest.mark.parametrize(
    ("kind", "content", "min_bytes_over_size", "workers", "accepted"),
    [
        pytest.param("agent", b"\n".join(LINES), 1, 2, 4, id="one-byte-under-the-threshold"),
        pytest.param("agent", b"\n".join(LINES), 0, 1, 4, id="one-worker"),
        pytest.param("workflow", TRANSITION, 0, 2, 1, id="no-columnar-parser"),
    ],
)
def test_ingest_paths_parses_in_process_below_the_threshold_or_without_workers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    started_pools: list[RecordingPool],
    kind: str,
    content: bytes,
    min_bytes_over_size: int,
    workers: int,
    accepted: int,
) -> None:
    path = tmp_path / "evidence.log"
    path.write_bytes(content)
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", len(content) + min_bytes_over_size)
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, kind, [path], workers=workers)
        again = ingest_paths(store, kind, [path], workers=workers)
    assert (result.accepted, again.accepted) == (accepted, 0)
    assert started_pools == []


@pytest.mark.integration
def test_files_that_add_up_go_to_the_workers_each_its_own_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_pools: list[RecordingPool]
) -> None:
    # Three files, each under the threshold, together over it: parsed by the workers, a batch
    # each, the workers running ahead from one file into the next; each file stored as one
    # transaction, its rejects and its damage with it, as in one process. Two of them alone
    # stay under the threshold: no pool at all.
    content = b"\n".join(LINES[:4]) + b"\n"
    first, second, damaged = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl.gz"
    first.write_bytes(content)
    second.write_bytes(content.replace(b"13:11:", b"13:12:"))
    damaged.write_bytes(TWO_LINES + GZIP_HEADER)
    files = [first, damaged, second]
    monkeypatch.setattr(
        "correlator.ingest.PARALLEL_MIN_BYTES", sum(f.stat().st_size for f in files)
    )
    with Store(tmp_path / "alone.duckdb") as alone:
        under = ingest_paths(alone, "agent", files[:2], workers=2)
        one_process = ingest_paths(alone, "agent", files[2:], workers=2)
        alone_rows = _contents(alone)
    assert started_pools == []
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", files, workers=2)
        pooled_rows = _contents(store)
        again = ingest_paths(store, "agent", files, workers=2)
    # The damaged file's two lines are two of the first file's: duplicates.
    assert (result.accepted, result.duplicate, sum(result.rejected.values())) == (6, 2, 3)
    under.add(one_process)
    assert result.as_dict() == under.as_dict()
    assert (again.accepted, again.duplicate) == (0, 8)
    first_pool, _ = started_pools
    assert (first_pool.workers, first_pool.submitted) == (2, 3)
    assert pooled_rows[0] == alone_rows[0]
    assert sorted(pooled_rows[1]) == sorted(alone_rows[1])  # three rejects of line 3


@pytest.mark.integration
def test_a_file_that_cannot_be_opened_stops_the_ingest_after_the_files_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started_pools: list[RecordingPool]
) -> None:
    content = b"\n".join(LINES[:4]) + b"\n"
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(content)
    second.write_bytes(content.replace(b"13:11:", b"13:12:"))
    missing = tmp_path / "gone.jsonl"
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 1)
    with Store(tmp_path / "evidence.duckdb") as store:
        with pytest.raises(InputError, match=r"cannot read .*gone\.jsonl"):
            ingest_paths(store, "agent", [first, missing, second], workers=2)
        assert store.count() == 3  # the first file's, committed; nothing of the third
    assert started_pools[0].submitted >= 1


def test_a_first_load_computes_the_link_cardinalities(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", [path])
        # Left computed for the next (read-only) reader.
        assert store._stored_cardinalities(4) is not None
    assert (result.accepted, result.duplicate) == (4, 1)


# -- damaged .gz files -----------------------------------------------------------------------

#: An empty gzip member's 10-byte header (mtime 0, deflate, maximum compression, UNIX).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
#: Two lines the agent adapter accepts (``task claimed``, ``ansible-playbook not found``), as
#: one complete gzip member: what a damaged file holds before its damage.
TWO_LINES = gzip.compress(LINES[0] + b"\n" + LINES[1] + b"\n", mtime=0)


@pytest.mark.parametrize(
    ("content", "messages", "line_no", "reason", "summary"),
    [
        pytest.param(
            # A second member cut off after its header (a writer still appending to it).
            TWO_LINES + GZIP_HEADER,
            ["task claimed", "ansible-playbook not found"],
            3,
            "agent.jsonl.gz ends inside a gzip stream (truncated) after line 2",
            "agent.jsonl.gz ends inside a gzip stream (truncated) after line",
            id="truncated",
        ),
        pytest.param(
            b"x\n",
            [],
            1,
            "agent.jsonl.gz is not a gzip file",
            "agent.jsonl.gz is not a gzip file",
            id="not-gzip",
        ),
        pytest.param(
            TWO_LINES + b"garbage\n",
            ["task claimed", "ansible-playbook not found"],
            3,
            "agent.jsonl.gz holds data that is not gzip after line 2",
            "agent.jsonl.gz holds data that is not gzip after line",
            id="garbage-after-a-member",
        ),
        pytest.param(
            # Deflate block type 3 is reserved (RFC 1951 §3.2.3): every decoder refuses it.
            TWO_LINES + GZIP_HEADER + b"\xff" * 8,
            ["task claimed", "ansible-playbook not found"],
            3,
            "agent.jsonl.gz has damaged gzip data after line 2: "
            "Error -3 while decompressing data: invalid block type",
            "agent.jsonl.gz has damaged gzip data after line",
            id="damaged-deflate-data",
        ),
        pytest.param(
            TWO_LINES[:-8] + b"\x00\x00\x00\x00" + TWO_LINES[-4:],  # CRC-32 zeroed
            ["task claimed", "ansible-playbook not found"],
            3,
            "agent.jsonl.gz has damaged gzip data after line 2: CRC check failed 0x0 != 0x597a9f84",
            "agent.jsonl.gz has damaged gzip data after line",
            id="wrong-checksum",
        ),
    ],
)
def test_a_damaged_gz_keeps_what_came_before_and_is_a_reject(
    tmp_path: Path, content: bytes, messages: list[str], line_no: int, reason: str, summary: str
) -> None:
    damaged = tmp_path / "agent.jsonl.gz"
    damaged.write_bytes(content)
    later = tmp_path / "later.jsonl"
    later.write_bytes(LINES[6] + b"\n")  # the heartbeat
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", [damaged, later])
        stored = store.cursor().execute("SELECT message FROM events ORDER BY ts_ns").fetchall()
        rejects = _contents(store)[1]
    # The lines before the damage and the other file are kept; the damage is one reject.
    assert [row[0] for row in stored] == [*messages, "heartbeat"]
    assert rejects == [("agent", str(damaged), line_no, reason, "")]
    assert (result.accepted, result.duplicate, dict(result.rejected)) == (
        len(stored),
        0,
        {summary: 1},
    )


def test_the_cli_reports_a_truncated_gz_like_other_rejects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "agent.jsonl.gz"
    damaged.write_bytes(TWO_LINES + GZIP_HEADER)
    later = tmp_path / "later.jsonl"
    later.write_bytes(LINES[6] + b"\n")
    db = str(tmp_path / "evidence.duckdb")
    # Exit status 0, as for a file with rejected lines: the summary names the problem.
    assert main(["--db", db, "ingest", "--source", "agent", str(damaged), str(later)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("accepted 3, duplicate 0, rejected 1 in ")
    assert err.endswith(
        "\n  rejected 1: agent.jsonl.gz ends inside a gzip stream (truncated) after line\n"
    )


@pytest.mark.integration
@pytest.mark.parametrize("threads", [True, False], ids=["threads", "processes"])
def test_a_truncated_gz_parsed_by_workers_keeps_what_came_before(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    started_pools: list[RecordingPool],
    threads: bool,
) -> None:
    # agent's native table path runs in threads; a source with only a columnar parser (the
    # same source without its table path here) in worker processes.
    if not threads:
        columns_only = dataclasses.replace(source("agent"), table=None)
        monkeypatch.setattr("correlator.ingest.source", lambda kind: columns_only)
    damaged = tmp_path / "agent.jsonl.gz"
    damaged.write_bytes(TWO_LINES + GZIP_HEADER)
    # Exactly at the threshold: to the workers (one byte less stays in process, above).
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", len(TWO_LINES + GZIP_HEADER))
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", [damaged], workers=2)
        rejects = _contents(store)[1]
    assert (result.accepted, result.duplicate, sum(result.rejected.values())) == (2, 0, 1)
    (pool,) = started_pools
    assert (pool.workers, pool.submitted, pool.threads) == (2, 1, threads)  # one batch
    assert pool.ran_elsewhere()
    assert rejects == [
        (
            "agent",
            str(damaged),
            3,
            "agent.jsonl.gz ends inside a gzip stream (truncated) after line 2",
            "",
        )
    ]


class _FailingDisk(io.BytesIO):
    """A file whose second line cannot be read (``EIO``: a failing disk or network mount):
    its first read returns the first line, the next one fails."""

    def read1(self, size: int = -1, /) -> bytes:
        if self.tell() > 0:
            raise OSError(errno.EIO, "Input/output error")
        return super().read1(self.getvalue().index(b"\n") + 1)


def test_a_file_that_fails_to_read_keeps_what_came_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(LINES[0] + b"\n" + LINES[1] + b"\n")
    monkeypatch.setattr("correlator.ingest._open", lambda opened: _FailingDisk(opened.read_bytes()))
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", [path])
        rejects = _contents(store)[1]
    assert (result.accepted, dict(result.rejected)) == (
        1,
        {"agent.jsonl cannot be read after line": 1},
    )
    assert rejects == [
        ("agent", str(path), 2, "agent.jsonl cannot be read after line 1: Input/output error", "")
    ]


# -- linking nginx error lines to access lines across ingests --------------------------------

#: A request refused by its upstream: the access line (request id ``4f7c...``) and the error
#: line nginx wrote for it, one second earlier.
ACCESS = (
    b'127.0.0.1 - - [22/Nov/2026:12:00:01 +0000] "POST /v1/allocations HTTP/1.1" 502 157 "-" '
    b'"curl/8.5.0" "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"'
)
ERROR = (
    b"2026/11/22 12:00:00 [error] 1234#1234: *5 connect() failed (111: Connection refused) "
    b'while connecting to upstream, client: 127.0.0.1, server: api.local, request: "POST '
    b'/v1/allocations HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/allocations", '
    b'host: "api.local"'
)
#: A 120.5 s request ending at 12:02:01 (``$upstream_status`` and ``$request_time`` appended)
#: and an error line of it from two minutes before its access line.
LONG_ACCESS = (
    b'127.0.0.1 - - [22/Nov/2026:12:02:01 +0000] "POST /v1/allocations HTTP/1.1" 504 167 "-" '
    b'"curl/8.5.0" "0badc0de0badc0de0badc0de0badc0de" "504" 120.500'
)
#: Lines nginx wrote that no access line will ever match, hours from the requests above.
NOTICES = [
    b'2026/11/22 00:00:00 [notice] 1#1: using the "epoll" event method',
    b"2026/11/22 23:00:00 [notice] 1#1: signal process started",
]


def _error_links(store: Store) -> list[tuple[str | None, str | None]]:
    rows = (
        store.cursor()
        .execute(
            "SELECT correlation_id, json_extract_string(attrs, '$.request_id') FROM events "
            "WHERE json_extract_string(attrs, '$.log') = 'error' "
            "AND json_extract_string(attrs, '$.nginx_level') = 'error'"
        )
        .fetchall()
    )
    return [(row[0], row[1]) for row in rows]


@pytest.mark.parametrize(
    ("first", "second", "request_id"),
    [
        pytest.param([ERROR], [ACCESS], "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", id="error-first"),
        pytest.param([ACCESS], [ERROR], "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", id="access-first"),
        pytest.param(
            [ERROR],
            [LONG_ACCESS],
            "0badc0de0badc0de0badc0de0badc0de",
            id="long-request-error-first",
        ),
        pytest.param(
            [LONG_ACCESS],
            [ERROR],
            "0badc0de0badc0de0badc0de0badc0de",
            id="long-request-access-first",
        ),
    ],
)
def test_nginx_errors_link_to_access_lines_ingested_before_or_after(
    store: Store, first: list[bytes], second: list[bytes], request_id: str
) -> None:
    ingest_lines(store, "nginx", [*NOTICES, *first], "first.log")
    assert _error_links(store) == [(None, None)] * first.count(ERROR)  # nothing to link yet
    ingest_lines(store, "nginx", second, "second.log")
    assert _error_links(store) == [(request_id, request_id)]


def test_an_nginx_ingest_reads_only_what_lies_near_its_lines(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A day of history: an access line every hour at half past, two never-linkable notices
    # at 00:00 and 23:00, and the error line of a request whose access line is still to come.
    history = [
        f'10.0.0.9 - - [22/Nov/2026:{hour:02d}:30:00 +0000] "GET /v1/nodes HTTP/1.1" 200 12 "-" '
        f'"curl/8.5.0" "{hour:032x}"'.encode()
        for hour in range(24)
    ]
    ingest_lines(store, "nginx", [*history, *NOTICES, ERROR], "history.log")
    examined: list[tuple[str, str]] = []
    nginx_events = Store.nginx_events

    def spy(self: Store, **window: Any) -> list[Event]:
        events = nginx_events(self, **window)
        examined.extend((e.attrs["log"], e.raw[:50]) for e in events)
        return events

    monkeypatch.setattr(Store, "nginx_events", spy)
    ingest_lines(store, "nginx", [ACCESS], "http")
    # The error line one second away and the new access line; not the day's other 26 lines.
    assert examined == [("error", ERROR[:50].decode()), ("access", ACCESS[:50].decode())]
    assert _error_links(store) == [
        ("4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f")
    ]


def test_an_nginx_ingest_reads_only_the_access_lines_of_the_errors_requests(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Other requests at the same second (another path, another client, another method) are
    # not read: no error line names them.
    others = [
        ACCESS.replace(b"/v1/allocations", b"/v1/nodes"),
        ACCESS.replace(b"127.0.0.1 -", b"10.0.0.7 -"),
        ACCESS.replace(b'"POST ', b'"GET '),
    ]
    others = [line.replace(b"4f7c", b"%04x" % n) for n, line in enumerate(others)]
    ingest_lines(store, "nginx", [*others, ERROR], "history.log")
    examined: list[tuple[str, str]] = []
    nginx_events = Store.nginx_events

    def spy(self: Store, **window: Any) -> list[Event]:
        events = nginx_events(self, **window)
        examined.extend((e.attrs["log"], e.raw) for e in events)
        return events

    monkeypatch.setattr(Store, "nginx_events", spy)
    ingest_lines(store, "nginx", [ACCESS], "http")
    assert examined == [("error", ERROR.decode()), ("access", ACCESS.decode())]
    assert _error_links(store) == [
        ("4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f", "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f")
    ]


#: ACCESS and ERROR as a server on Berlin time writes them (+01:00 in November): the access
#: line's time says so, the error line's does not.
ACCESS_BERLIN = ACCESS.replace(b"[22/Nov/2026:12:00:01 +0000]", b"[22/Nov/2026:13:00:01 +0100]")
ERROR_BERLIN = ERROR.replace(b"2026/11/22 12:00:00 ", b"2026/11/22 13:00:00 ")
REQUEST_ID = "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"


@pytest.mark.parametrize(
    ("zone", "links"),
    [
        pytest.param(None, [(None, None)], id="utc-an-hour-off"),
        pytest.param(ZoneInfo("Europe/Berlin"), [(REQUEST_ID, REQUEST_ID)], id="berlin"),
        pytest.param(timezone(timedelta(hours=1)), [(REQUEST_ID, REQUEST_ID)], id="+01:00"),
    ],
)
def test_nginx_error_times_are_read_in_the_zone_given(
    store: Store, zone: tzinfo | None, links: list[tuple[str | None, str | None]]
) -> None:
    ingest_lines(store, "nginx", [ACCESS_BERLIN], "access.log", options={"zone": zone})
    ingest_lines(store, "nginx", [ERROR_BERLIN], "error.log", options={"zone": zone})
    assert _error_links(store) == links


def test_ingest_paths_gives_the_zone_to_the_nginx_parser_only(
    tmp_path: Path,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    started_pools: list[RecordingPool],
) -> None:
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)  # every file is "large"
    berlin = ZoneInfo("Europe/Berlin")
    access, error, agent = tmp_path / "access.log", tmp_path / "error.log", tmp_path / "a.jsonl"
    access.write_bytes(ACCESS_BERLIN + b"\n")
    error.write_bytes(ERROR_BERLIN + b"\n")
    agent.write_bytes(LINES[0] + b"\n")

    nginx = ingest_paths(store, "nginx", [error, access], workers=2, options={"zone": berlin})
    others = ingest_paths(store, "agent", [agent])

    assert (nginx.accepted, others.accepted) == (2, 1)
    assert _error_links(store) == [(REQUEST_ID, REQUEST_ID)]
    # nginx's files are parsed in the workers (a batch each), the zone handed to them, and
    # linked across the files once each is committed; agent's one file is parsed here.
    assert [pool.submitted for pool in started_pools] == [2]


# -- a UTF-8 byte order mark -----------------------------------------------------------------

SAMPLES = Path(__file__).parent / "samples"


@pytest.mark.parametrize(
    ("sample", "kind"),
    [
        ("ndjson/agent.jsonl", "agent"),
        ("aap/job_4711.json", "aap"),
        ("k8s/provisionrequests.json", "k8s"),
        ("nginx/access.log", "nginx"),
        ("nginx/error.log", "nginx"),
        ("postgres/postgresql.csv", "postgres"),
        ("postgres/postgresql.json", "postgres"),
        ("workflow/transitions.jsonl", "workflow"),
    ],
)
def test_a_byte_order_mark_changes_nothing(tmp_path: Path, sample: str, kind: str) -> None:
    # Windows editors and PowerShell start a file with one: it used to cost the first line
    # (or a whole JSON document), or end up inside an nginx field.
    content = (SAMPLES / sample).read_bytes()
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    plain.write_bytes(content)
    marked.write_bytes(b"\xef\xbb\xbf" + content)
    stored = []
    for path in (plain, marked):
        with Store(tmp_path / f"{path.name}.duckdb") as store:
            result = ingest_paths(store, kind, [path])
            rows = [(event.hash, event.raw) for event in stored_events(store)]
        stored.append((result.accepted, dict(result.rejected), rows))
    assert stored[0][0] > 0
    assert stored[1] == stored[0]


# -- reading lines in bounded memory ---------------------------------------------------------

GOOD_LINE = b'{"ts":"2026-11-22T13:11:19Z","layer":"api","event":"after the zeros"}'


def _sparse(path: Path, zeros: int, *, compressed: bool = False) -> Path:
    """``zeros`` zero bytes without a newline (a hole: no disk used), then a good line."""
    with path.open("wb") as handle:
        handle.truncate(zeros)
    with path.open("ab") as handle:
        handle.write(b"\n" + GOOD_LINE + b"\n")
    if not compressed:
        return path
    packed = path.with_name(path.name + ".gz")
    with path.open("rb") as source, gzip.open(packed, "wb", compresslevel=1) as target:
        while chunk := source.read(1 << 20):
            target.write(chunk)
    return packed


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("kind", ["agent", "nginx", "k8s"])
def test_a_line_without_newline_is_a_reject_read_in_bounded_memory(
    tmp_path: Path, kind: str, compressed: bool
) -> None:
    # `truncate -s 3G big.ndjson` took 3.36 GB of memory and failed with MemoryError: the line
    # limit was checked after the whole line was read. Here 64 MiB, then a good line.
    path = _sparse(tmp_path / "big.ndjson", 64 * 1024 * 1024, compressed=compressed)
    with Store(tmp_path / "evidence.duckdb") as store:
        tracemalloc.start()
        try:
            result = ingest_paths(store, kind, [path])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        rejects = _contents(store)[1]

    assert rejects[0][2:4] == (1, "line 1 is longer than 1 MiB (1,048,576 bytes)")
    assert rejects[0][4] == "\x00" * 200
    if kind == "agent":
        assert (result.accepted, len(rejects)) == (1, 1)  # the line after it
    # The line limit and a read's worth, not the line: reading it whole took twice its size.
    assert peak < 32 * 1024 * 1024, peak


def _read(data: bytes, progress: list[int] | None = None) -> list[bytes]:
    tick = progress.append if progress is not None else None
    return list(read_lines(io.BufferedReader(io.BytesIO(data), 8192), tick))


LIMIT = MAX_LINE_BYTES


@pytest.mark.parametrize(
    ("data", "lengths"),
    [
        pytest.param(b"", [], id="empty"),
        pytest.param(b"x\nzz\n", [1, 2], id="lines"),
        pytest.param(b"x\nzz", [1, 2], id="no-final-newline"),
        pytest.param(b"\n\n", [0, 0], id="blank"),
        pytest.param(b"z\n" + b"x" * LIMIT + b"\nz", [1, LIMIT, 1], id="at-the-limit"),
        pytest.param(b"z\n" + b"x" * LIMIT + b"\r\nz", [1, LIMIT + 1, 1], id="crlf"),
        pytest.param(b"z\n" + b"x" * (LIMIT + 1) + b"\nz", [1, LIMIT + 1, 1], id="one-over"),
        pytest.param(b"z\n" + b"x" * (LIMIT + 2) + b"\nz", [1, LIMIT + 2, 1], id="cut"),
        pytest.param(b"z\n" + b"x" * (3 * LIMIT) + b"\nz\n", [1, LIMIT + 2, 1], id="skipped"),
        pytest.param(b"z\n" + b"x" * (3 * LIMIT), [1, LIMIT + 2], id="cut-to-the-end"),
        # A byte order mark is no part of the first line, which is cut as any other.
        pytest.param(b"\xef\xbb\xbf" + b"x" * LIMIT + b"\nz", [LIMIT, 1], id="mark"),
        pytest.param(b"\xef\xbb\xbf" + b"x" * (3 * LIMIT), [LIMIT + 2], id="mark-then-cut"),
        pytest.param(b"x" * (3 * LIMIT) + b"\nz", [LIMIT + 2, 1], id="first-cut"),
        # Read a block at a time: a line across blocks, a mark split across reads.
        pytest.param(b"z\n" * 700_000 + b"x\n", [1] * 700_001, id="many-blocks"),
    ],
)
def test_read_lines_cuts_a_line_past_the_limit(data: bytes, lengths: list[int]) -> None:
    progress: list[int] = []

    lines = _read(data, progress)

    # A cut line is longer than the limit even without a trailing \r: every adapter rejects it.
    assert [len(line) for line in lines] == lengths
    assert sum(progress) == len(data)
    assert _read(data) == lines
    assert all(line.strip(b"x") in (b"", b"z", b"zz", b"\r") for line in lines)


class _Trickle(io.BytesIO):
    """A stream that gives two bytes a read (a pipe, a slow request body)."""

    def read1(self, size: int = -1, /) -> bytes:
        return super().read1(2)


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        pytest.param(b"\xef\xbb\xbfab\ncd\r\n\nef", [b"ab", b"cd\r", b"", b"ef"], id="mark"),
        pytest.param(b"\xef\xbb", [b"\xef\xbb"], id="part-of-a-mark"),
        pytest.param(b"a\xef\xbb\xbf\n", [b"a\xef\xbb\xbf"], id="a-mark-inside"),
    ],
)
def test_read_lines_joins_lines_across_reads(data: bytes, lines: list[bytes]) -> None:
    progress: list[int] = []
    assert list(read_lines(_Trickle(data), progress.append)) == lines
    assert sum(progress) == len(data)


def _recording(store: Store, name: str, size: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of what each call of the store's method ``name`` is given, as it goes on."""
    sizes: list[int] = []
    method = getattr(store, name)

    def record(batch: Any) -> Any:
        sizes.append(size(batch))
        return method(batch)

    monkeypatch.setattr(store, name, record)
    return sizes


@pytest.mark.parametrize(
    ("kind", "line", "method", "size"),
    [
        ("agent", LINES[0], "insert_table", lambda table: table.num_rows),
        ("nginx", ACCESS, "insert_table", lambda table: table.num_rows),
    ],
)
def test_a_batch_ends_at_a_size_in_bytes_too(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    line: bytes,
    method: str,
    size: Any,
) -> None:
    # 50,000 lines near the 1 MiB limit would be a 50 GB batch: a batch also ends once it
    # holds BATCH_BYTES of lines (here: at its third line).
    lines = [line.replace(b"13:11:19", b"13:11:%02d" % n) for n in range(7)]
    lines = [line.replace(b"12:00:01", b"12:00:%02d" % n) for n, line in enumerate(lines)]
    monkeypatch.setattr("correlator._parse_workers.BATCH_BYTES", 2 * len(line) + 1)
    monkeypatch.setattr("correlator.ingest.BATCH_BYTES", 2 * len(line) + 1)
    monkeypatch.setattr("correlator.ingest.INSERT_EVENTS", 1)  # each batch inserted alone
    with Store(tmp_path / "evidence.duckdb") as store:
        batches = _recording(store, method, size, monkeypatch)
        result = ingest_lines(store, kind, lines, "f")
    assert result.accepted == 7
    assert batches == [3, 3, 1]


def test_a_file_of_nothing_but_rejects_is_stored_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rejects count towards a batch: a file of bad lines was held whole until its end. Lines
    # that start no record (nginx's continue an error message, when one is open) extend a
    # batch, up to CUT_SEARCH_BYTES of them (here: one line).
    monkeypatch.setattr("correlator._parse_workers.CUT_SEARCH_BYTES", 1)
    with Store(tmp_path / "evidence.duckdb") as store:
        batches = _recording(store, "insert_rejects", len, monkeypatch)
        ingest_lines(store, "nginx", [b"not nginx"] * 5, "bad.log", batch_events=2)
    assert batches == [3, 2]
    with Store(tmp_path / "evidence.duckdb") as store:
        batches = _recording(store, "insert_rejects", len, monkeypatch)
        ingest_lines(store, "agent", [b"not json"] * 5, "bad.log", batch_events=2)
    assert batches == [2, 2, 1]
