"""``correlator ingest`` from the command line: the zone of nginx error logs, Loki's settings
and headers, the progress bar, and a PostgreSQL audit table."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from correlator.cli import _progress_factory, main
from correlator.ingest import ingest_paths
from correlator.store import Store
from tests.correlator.sources.test_workflow import AUDIT_DDL
from tests.lokisim._server import LokiServer

# -- the zone of nginx error-log times ---------------------------------------------------------

#: The access line and the error line of one refused request, as a server on Berlin time writes
#: them: the access line's time carries its offset, the error line's does not.
ACCESS = (
    '127.0.0.1 - - [{stamp}] "POST /v1/allocations HTTP/1.1" 502 157 "-" "curl/8.5.0" '
    '"4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"\n'
)
ERROR = (
    "{stamp} [error] 1234#1234: *5 connect() failed (111: Connection refused) while connecting "
    'to upstream, client: 127.0.0.1, server: api.local, request: "POST /v1/allocations '
    'HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/allocations", host: "api.local"\n'
)
REQUEST_ID = "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"
WINTER = ("22/Nov/2026:14:11:19 +0100", "2026/11/22 14:11:19")
SUMMER = ("22/Jul/2026:14:11:19 +0200", "2026/07/22 14:11:19")
#: Both access lines' instants: 2026-11-22T13:11:19Z and 2026-07-22T12:11:19Z.
WINTER_NS = 1_795_353_079_000_000_000
SUMMER_NS = 1_784_722_279_000_000_000
HOUR_NS = 3600 * 1_000_000_000


def nginx_logs(tmp_path: Path, stamps: tuple[str, str]) -> list[str]:
    access, error = tmp_path / "access.log", tmp_path / "error.log"
    access.write_text(ACCESS.format(stamp=stamps[0]))
    error.write_text(ERROR.format(stamp=stamps[1]))
    return [str(access), str(error)]


@pytest.mark.parametrize(
    ("stamps", "options", "variable", "stored"),
    [
        pytest.param(WINTER, [], None, (WINTER_NS + HOUR_NS, None), id="no-zone-is-utc"),
        pytest.param(WINTER, ["--nginx-tz", "+01:00"], None, (WINTER_NS, REQUEST_ID), id="+01:00"),
        pytest.param(
            WINTER, ["--nginx-tz", "Europe/Berlin"], None, (WINTER_NS, REQUEST_ID), id="berlin"
        ),
        pytest.param(WINTER, [], "Europe/Berlin", (WINTER_NS, REQUEST_ID), id="variable"),
        pytest.param(
            WINTER, ["--nginx-tz", "Europe/Berlin"], "UTC", (WINTER_NS, REQUEST_ID), id="flag-wins"
        ),
        pytest.param(
            SUMMER, ["--nginx-tz", "Europe/Berlin"], None, (SUMMER_NS, REQUEST_ID), id="summer"
        ),
        pytest.param(
            SUMMER, ["--nginx-tz", "+01:00"], None, (SUMMER_NS + HOUR_NS, None), id="summer-fixed"
        ),
    ],
)
def test_nginx_error_lines_are_read_in_the_server_zone_and_link(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stamps: tuple[str, str],
    options: list[str],
    variable: str | None,
    stored: tuple[int, str | None],
) -> None:
    if variable is not None:
        monkeypatch.setenv("CORRELATOR_NGINX_TZ", variable)
    db = tmp_path / "c.duckdb"
    argv = ["--db", str(db), "ingest", "--source", "nginx", *options, *nginx_logs(tmp_path, stamps)]

    assert main(argv) == 0

    assert capsys.readouterr().err.startswith("accepted 2, duplicate 0, rejected 0 in ")
    with Store(db, read_only=True) as store:
        rows = (
            store.cursor()
            .execute(
                "SELECT ts_ns, correlation_id FROM events "
                "WHERE json_extract_string(attrs, '$.log') = 'error'"
            )
            .fetchall()
        )
    assert rows == [stored]


_NOT_A_ZONE = (
    "is not a time zone: use UTC, an offset such as +01:00 or -0530, or an IANA name such as "
    "Europe/Berlin"
)


@pytest.mark.parametrize(
    ("source", "options", "variable", "message"),
    [
        ("nginx", ["--nginx-tz", "Mars/Base"], None, f"--nginx-tz: 'Mars/Base' {_NOT_A_ZONE}"),
        ("nginx", ["--nginx-tz", "+1"], None, f"--nginx-tz: '+1' {_NOT_A_ZONE}"),
        (
            "nginx",
            [],
            "+25:00",
            "CORRELATOR_NGINX_TZ: '+25:00' has an impossible UTC offset '+25:00'",
        ),
        (
            "agent",
            ["--nginx-tz", "UTC"],
            None,
            "--nginx-tz is the zone of nginx error logs: use it with --source nginx",
        ),
    ],
)
def test_a_bad_nginx_zone_is_named_and_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
    options: list[str],
    variable: str | None,
    message: str,
) -> None:
    if variable is not None:
        monkeypatch.setenv("CORRELATOR_NGINX_TZ", variable)
    logs = nginx_logs(tmp_path, WINTER)
    argv = ["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", source, *options, *logs]

    assert main(argv) == 2

    assert capsys.readouterr().err == f"correlator: {message}\n"


def test_the_zone_variable_is_not_read_for_other_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORRELATOR_NGINX_TZ", "Mars/Base")  # set for nginx, malformed or not
    agent = tmp_path / "agent.jsonl"
    agent.write_text('{"ts":"2026-11-22T13:11:19Z","layer":"node","event":"task claimed"}\n')

    assert (
        main(["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", "agent", str(agent)]) == 0
    )
    assert capsys.readouterr().err.startswith("accepted 1, duplicate 0, rejected 0 in ")


# -- Loki: settings and the headers they send ---------------------------------------------------


@pytest.mark.parametrize(
    ("options", "environ", "message"),
    [
        (
            ["--loki-url", "http://loki.test:3100", "--ca-bundle", "/nonexistent/ca.pem"],
            {},
            "cannot load Loki CA bundle '/nonexistent/ca.pem': [Errno 2] No such file or directory",
        ),
        (
            ["--loki-url", "http://loki.test:3100"],
            {"CORRELATOR_LOKI_CA_BUNDLE": "/nonexistent/ca.pem"},
            "cannot load Loki CA bundle '/nonexistent/ca.pem': [Errno 2] No such file or directory",
        ),
        (
            ["--loki-url", "http://loki.test:3100", "--username", "u"],
            {"CORRELATOR_LOKI_BEARER_TOKEN": "t"},
            "Loki takes basic auth (--username or CORRELATOR_LOKI_USERNAME) or a bearer token "
            "(CORRELATOR_LOKI_BEARER_TOKEN), not both",
        ),
        (
            ["--loki-url", "http://loki.test:3100"],
            {"CORRELATOR_LOKI_USERNAME": "u", "CORRELATOR_LOKI_BEARER_TOKEN": "t"},
            "Loki takes basic auth (--username or CORRELATOR_LOKI_USERNAME) or a bearer token "
            "(CORRELATOR_LOKI_BEARER_TOKEN), not both",
        ),
        (
            ["--loki-url", "ftp://x"],
            {},
            "Loki URL 'ftp://x' must be http:// or https:// with a host",
        ),
        (
            [],
            {"CORRELATOR_LOKI_URL": "loki:3100"},
            "Loki URL 'loki:3100' must be http:// or https:// with a host",
        ),
    ],
)
def test_bad_loki_settings_are_named_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    environ: dict[str, str],
    message: str,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    argv = [
        "--db",
        str(tmp_path / "c.duckdb"),
        "ingest",
        "--source",
        "loki",
        "--query",
        "{a=~`.+`}",
    ]

    assert main([*argv, *options]) == 2  # an exception would be raised here, not returned

    assert capsys.readouterr().err == f"correlator: {message}\n"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("options", "environ", "authorization", "tenant"),
    [
        ([], {}, None, None),
        (["--username", "u"], {"CORRELATOR_LOKI_PASSWORD": "p"}, "Basic dTpw", None),
        (
            [],
            {"CORRELATOR_LOKI_USERNAME": "u", "CORRELATOR_LOKI_PASSWORD": "p"},
            "Basic dTpw",
            None,
        ),
        (
            ["--username", "u"],
            {"CORRELATOR_LOKI_USERNAME": "other", "CORRELATOR_LOKI_PASSWORD": "p"},
            "Basic dTpw",
            None,
        ),
        (["--username", "u"], {}, "Basic dTo=", None),  # no password: an empty one
        ([], {"CORRELATOR_LOKI_BEARER_TOKEN": "s3cret"}, "Bearer s3cret", None),
        ([], {"CORRELATOR_LOKI_BEARER_TOKEN": ""}, None, None),  # empty is unset
        (["--tenant", "team-a"], {}, None, "team-a"),
        ([], {"CORRELATOR_LOKI_TENANT": "team-b"}, None, "team-b"),
        (["--tenant", "team-a"], {"CORRELATOR_LOKI_TENANT": "team-b"}, None, "team-a"),
        ([], {"CORRELATOR_LOKI_TENANT": ""}, None, None),
        (
            ["--tenant", "team-a"],
            {"CORRELATOR_LOKI_BEARER_TOKEN": "s3cret"},
            "Bearer s3cret",
            "team-a",
        ),
    ],
)
def test_loki_queries_carry_the_configured_credentials_and_tenant(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    loki: LokiServer,
    options: list[str],
    environ: dict[str, str],
    authorization: str | None,
    tenant: str | None,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CORRELATOR_LOKI_URL", loki.url)
    query = '{service_name="api"}'
    argv = ["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", "loki", "--query", query]

    assert main([*argv, "--since", "5m", *options]) == 0

    assert capsys.readouterr().err.startswith("accepted 0, duplicate 0, rejected 0 in ")
    queries = [r for r in loki.requests if r.path == "/loki/api/v1/query_range"]
    assert queries
    assert {
        (r.status, r.headers.get("authorization"), r.headers.get("x-scope-orgid")) for r in queries
    } == {(200, authorization, tenant)}


# -- the progress bar -----------------------------------------------------------------------------

#: One agent record of exactly 100 bytes with its newline.
LINE = b'{"ts":"2026-11-22T13:11:19Z","layer":"node","event":"task claimed","n":"%s"}\n'


def agent_file(path: Path, lines: int, first: int = 0) -> Path:
    """``lines`` records numbered from ``first`` (gzipped for a ``.gz``), 100 bytes each."""
    width = 100 - len(LINE % b"")
    records = [LINE % str(n).rjust(width, "0").encode() for n in range(first, first + lines)]
    assert {len(r) for r in records} == {100}
    data = b"".join(records)
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def test_the_progress_bar_advances_by_every_byte_of_each_file(tmp_path: Path, store: Store) -> None:
    plain = agent_file(tmp_path / "plain.jsonl", 200)
    packed = agent_file(tmp_path / "packed.jsonl.gz", 3000, first=200)  # 300,000 unpacked
    terminal = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    bars = _progress_factory(True, terminal)
    totals: dict[str, int] = {}
    advanced: Counter[str] = Counter()

    def counting(path: Path, size: int) -> Callable[[int], None]:
        totals[path.name] = size
        tick = bars(path, size)

        def advance(n: int) -> None:
            advanced[path.name] += n
            tick(n)

        return advance

    try:
        result = ingest_paths(store, "agent", [plain, packed], progress=counting)
    finally:
        bars.stop()

    assert result.accepted == 3200
    packed_size = packed.stat().st_size
    assert totals == {"plain.jsonl": 20_000, "packed.jsonl.gz": packed_size}
    assert advanced == totals  # a .gz advances by its compressed bytes, as its size counts
    drawn = terminal.file.getvalue()  # type: ignore[attr-defined]
    assert "plain.jsonl" in drawn and "20.0/20.0 kB" in drawn
    kilobytes = f"{packed_size / 1000:.1f}"
    assert "packed.jsonl.gz" in drawn and f"{kilobytes}/{kilobytes} kB" in drawn


class _Stream(io.StringIO):
    """Standard error, a terminal or not."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize(
    ("terminal", "options", "min_bytes", "drawn"),
    [
        pytest.param(True, [], 10_000, True, id="terminal-large"),
        pytest.param(True, ["--quiet"], 10_000, False, id="quiet"),
        pytest.param(False, [], 10_000, False, id="not-a-terminal"),
        pytest.param(True, [], 8 * 1024 * 1024, False, id="small"),  # the threshold it ships with
    ],
)
def test_the_ingest_command_draws_a_bar_on_a_terminal_for_large_files(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminal: bool,
    options: list[str],
    min_bytes: int,
    drawn: bool,
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):  # rich reads them
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr("correlator.cli.PROGRESS_MIN_BYTES", min_bytes)
    stderr = _Stream(terminal)
    monkeypatch.setattr(sys, "stderr", stderr)
    evidence = agent_file(tmp_path / "agent.jsonl", 200)  # 20,000 bytes
    argv = ["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", "agent", *options]

    assert main([*argv, str(evidence)]) == 0

    written = stderr.getvalue()
    assert ("20.0/20.0 kB" in written, "agent.jsonl" in written) == (drawn, drawn)
    # The summary, then (these records carry no identifier) the warning that they never join.
    assert re.search(
        r"accepted 200, duplicate 0, rejected 0 in \d+\.\d\d s\n"
        r"correlator: WARNING: 200 of the 200 lines accepted carry no identifier[^\n]*\n\Z",
        written,
    )
    assert capsys.readouterr().out == ""  # the bar is drawn on standard error only


# -- a PostgreSQL audit table ----------------------------------------------------------------

AUDIT_ROWS = [
    ("2026-11-22T13:11:19Z", "allocation", "a-9", None, "requested", None, "a-9", None),
    (
        "2026-11-22T13:41:20Z",
        "allocation",
        "a-9",
        "releasing",
        "release_failed",
        '{"occupancy": "cleanup"}',
        "a-9",
        "n-17",
    ),
    ("2026-11-22T13:41:21Z", "allocation", "a-9", "release_failed", None, None, None, None),
]


def _connect(dsn: str) -> Any:
    psycopg = pytest.importorskip("psycopg")  # the correlator extra's
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture
def audit_table(postgres_dsn: str) -> Iterator[str]:
    """A fresh audit table holding AUDIT_ROWS; its name."""
    table = f"audit_{uuid.uuid4().hex[:12]}"
    with _connect(postgres_dsn) as conn:
        conn.execute(AUDIT_DDL.format(table=table))
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} (ts, entity_kind, entity_id, from_state, to_state, "  # noqa: S608
                "attributes, allocation_id, node_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                AUDIT_ROWS,
            )
    yield table
    with _connect(postgres_dsn) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.integration
def test_ingest_reads_a_workflow_audit_table(
    tmp_path: Path, postgres_dsn: str, audit_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "c.duckdb"
    argv = ["--db", str(db), "ingest", "--source", "workflow", "--dsn", postgres_dsn]

    assert main([*argv, "--table", audit_table]) == 0
    first = capsys.readouterr().err
    assert main([*argv, "--table", audit_table]) == 0
    again = capsys.readouterr().err

    reject = "lacks field 'to' (also read as to_state, state_to, state)"
    assert first.startswith("accepted 2, duplicate 0, rejected 1 in ")
    assert first.endswith(f" s\n  rejected 1: row {reject}\n")  # the summary counts kinds
    assert again.startswith("accepted 0, duplicate 2, rejected 1 in ")
    with Store(db, read_only=True) as store:
        cursor = store.cursor()
        events = cursor.execute(
            "SELECT ts_ns, source, origin, entity_kind, entity_id, state_from, state_to, "
            "allocation_id, node_id, json_extract_string(attrs, '$.occupancy') "
            "FROM events ORDER BY ts_ns"
        ).fetchall()
        rejects = cursor.execute("SELECT origin, line_no, reason FROM rejects").fetchall()
    origin = f"postgresql:{audit_table}"
    assert events == [
        (
            1_795_353_079_000_000_000,
            "workflow",
            origin,
            "allocation",
            "a-9",
            None,
            "requested",
            "a-9",
            None,
            None,
        ),
        (
            1_795_354_880_000_000_000,
            "workflow",
            origin,
            "allocation",
            "a-9",
            "releasing",
            "release_failed",
            "a-9",
            "n-17",
            "cleanup",
        ),
    ]
    assert rejects == [(origin, 3, f"row 3 {reject}")]


# -- what is not a file of evidence, and documents that crashed the ingest ---------------------


def _ingest_in_thread(argv: list[str]) -> int | None:
    """``main(argv)``'s status, or None when it has not returned within 10 s (it blocks)."""
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(main(argv)), daemon=True)
    thread.start()
    thread.join(timeout=10)
    return status[0] if status else None


@pytest.mark.parametrize(
    ("make", "what"),
    [
        pytest.param(lambda path: os.mkfifo(path), "a FIFO (named pipe)", id="fifo"),
        pytest.param(lambda path: path.mkdir(), "a directory", id="directory"),
        pytest.param(lambda path: path.symlink_to("/dev/zero"), "a character device", id="device"),
    ],
)
def test_ingest_refuses_what_is_not_a_regular_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], None],
    what: str,
) -> None:
    # A FIFO blocked the ingest until something wrote to it; /dev/zero would never end.
    good = tmp_path / "agent.jsonl"
    good.write_bytes(b'{"ts": "2026-11-22T13:11:19Z", "layer": "api", "event": "x"}\n')
    odd = tmp_path / "odd"
    make(odd)
    db = tmp_path / "evidence.duckdb"
    Store(db).close()  # an existing database (into a new one, nothing would be created at all)

    status = _ingest_in_thread(
        ["--db", str(db), "ingest", "--source", "agent", str(good), str(odd)]
    )

    assert status == 2
    assert capsys.readouterr().err == (
        f"correlator: cannot read {odd}: it is {what}, not a regular file "
        "(give - to read standard input)\n"
    )
    with Store(db, read_only=True) as store:
        assert store.count() == 0  # refused before any file was read


@pytest.mark.parametrize("source", ["k8s", "aap"])
def test_deep_json_is_a_reject_and_the_documents_beside_it_are_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    # python3 -c 'print("["*100000+"]"*100000)' > deep.json; correlator ingest --source k8s
    # deep.json: RecursionError, exit 1, nothing stored.
    good = {
        "k8s": b'{"kind": "VMRequest", "metadata": {"name": "vm-%d", '
        b'"creationTimestamp": "2026-11-22T13:11:19Z"}}',
        "aap": b'{"id": %d, "type": "job", "status": "failed", "created": "2026-11-22T13:11:19Z"}',
    }[source]
    deep = tmp_path / "deep.json"
    deep.write_bytes(good % 1 + b"\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n" + good % 2 + b"\n")
    db = tmp_path / "evidence.duckdb"

    assert main(["--db", str(db), "ingest", "--source", source, str(deep)]) == 0

    assert "accepted 2, duplicate 0, rejected 1" in capsys.readouterr().err
    with Store(db, read_only=True) as store:
        (reason,) = store.cursor().execute("SELECT reason FROM rejects").fetchone() or ("",)
    assert reason == (
        "line 2 starts a JSON document nested deeper than 512 levels (at line 2); "
        "the limit is 512 levels"
    )


# Captured from nginx/1.22.1 with its stock `combined` log_format (no $request_id).
_COMBINED_WITHOUT_ID = (
    b'127.0.0.1 - - [22/Nov/2026:13:11:19 +0000] "GET / HTTP/1.1" 200 12 "-" "curl/7.88.1"\n'
    b'127.0.0.1 - - [22/Nov/2026:13:11:20 +0000] "GET /x HTTP/1.1" 404 12 "-" "curl/7.88.1"\n'
)


def test_evidence_that_can_never_join_is_said_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from correlator.cli import main

    log = tmp_path / "access.log"
    log.write_bytes(_COMBINED_WITHOUT_ID)
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "nginx", str(log)]) == 0
    err = capsys.readouterr().err
    assert "WARNING: 2 of the 2 lines accepted carry no identifier" in err
    assert "$request_id" in err


def test_an_ingest_that_read_nothing_fails_and_names_the_kind_the_lines_look_like(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from correlator.cli import main

    log = tmp_path / "access.log"
    log.write_bytes(_COMBINED_WITHOUT_ID)
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", str(log)]) == 1
    err = capsys.readouterr().err
    assert "rejected 2: line is not valid JSON" in err
    assert err.rstrip().endswith(
        "no line was read as --source agent; the lines look like --source nginx"
    )
    # The rejects are kept, and readable.
    assert main(["--db", db, "rejects", "--json"]) == 0
    rejects = json.loads(capsys.readouterr().out)["rejects"]
    assert [(r["source"], r["line_no"]) for r in rejects] == [("agent", 1), ("agent", 2)]
    assert all(r["reason"].startswith(f"line {r['line_no']} is not valid JSON") for r in rejects)
    assert main(["--db", db, "rejects"]) == 0
    assert "access.log:1" in capsys.readouterr().out
