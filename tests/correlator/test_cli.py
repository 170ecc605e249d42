from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from correlator._arguments import parser
from correlator._demo_story import STUCK_ALLOCATION
from correlator.cli import main
from correlator.store import Store
from tests.argparse_help import options_without_help
from tests.correlator.conftest import DEMO_NOW_NS, RecordingPool

RECORDS = [
    {
        "ts": "2026-11-22T13:11:19.000000001Z",
        "level": "info",
        "event": "task claimed",
        "service": "node-agent",
        "layer": "node",
        "node_id": "n-1",
        "allocation_id": "a-1",
    },
    {
        "ts": "2026-11-22T13:11:20Z",
        "level": "error",
        "event": "ansible-playbook not found",
        "service": "node-agent",
        "layer": "node",
        "node_id": "n-1",
        "allocation_id": "a-1",
        "error": {
            "type": "FileNotFoundError",
            "message": "No such file or directory",
            "owner_layer": "deploy",
            "chain": [],
        },
    },
]


@pytest.fixture
def evidence(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    lines = [orjson.dumps(r) for r in RECORDS] + [b'{"ts": "yesterday", "layer": "node"}', b"\xff"]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def ingested(tmp_path: Path, evidence: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A database holding ``evidence`` (its path); the ingest's output is discarded."""
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)]) == 0
    capsys.readouterr()
    return db


def test_ingest_prints_a_summary_and_is_idempotent(
    tmp_path: Path, evidence: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", str(evidence)]) == 0
    first = capsys.readouterr().err
    assert first.startswith("accepted 2, duplicate 0, rejected 2 in ")
    assert main(["--db", db, "ingest", "--source", "agent", str(evidence)]) == 0
    assert capsys.readouterr().err.startswith("accepted 0, duplicate 2, rejected 2 in ")


@pytest.mark.integration
def test_ingest_parses_large_files_in_worker_threads(
    tmp_path: Path,
    evidence: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    started_pools: list[RecordingPool],
) -> None:
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)  # every file is "large"
    pooled, alone = str(tmp_path / "pooled.duckdb"), str(tmp_path / "alone.duckdb")
    assert (
        main(["--db", pooled, "ingest", "--source", "agent", "--workers", "2", str(evidence)]) == 0
    )
    assert capsys.readouterr().err.startswith("accepted 2, duplicate 0, rejected 2 in ")
    (pool,) = started_pools
    assert (pool.workers, pool.submitted) == (2, 1)  # one batch, parsed by a worker
    assert pool.threads  # the native mapping runs without the GIL
    assert pool.ran_elsewhere()
    assert (
        main(["--db", alone, "ingest", "--source", "agent", "--workers", "1", str(evidence)]) == 0
    )
    capsys.readouterr()
    assert started_pools == [pool]  # one worker: parsed in process
    rows = []
    for db in (pooled, alone):
        with Store(db, read_only=True) as store:
            rows.append(store.cursor().execute("SELECT * FROM events ORDER BY hash").fetchall())
    assert rows[0] == rows[1] and len(rows[0]) == 2


def test_ingest_refuses_zero_workers(
    tmp_path: Path, evidence: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", "--workers", "0", str(evidence)]) == 2
    assert "--workers must be 1 or more, not 0" in capsys.readouterr().err


def test_timeline_json_and_html(
    tmp_path: Path, evidence: Path, ingested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ingested
    assert main(["--db", db, "timeline", "--id", "allocation_id=a-1", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["verdict"]["owner_layer"] == "deploy"
    assert [e["message"] for e in data["events"]] == ["task claimed", "ansible-playbook not found"]
    page = tmp_path / "t.html"
    assert main(["--db", db, "timeline", "--id", "allocation_id=a-1", "--html", str(page)]) == 0
    text = page.read_text()
    assert (
        "Owner layer: deploy" in text
        and "<script" in text
        and "http" not in text.split("<body>")[0]
    )


def test_the_timeline_shows_every_digit_of_an_integer_past_64_bits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = "123456789012345678901234567890"  # orjson alone reads 1.2345678901234568e+29
    evidence = tmp_path / "agent.jsonl"
    evidence.write_text(
        '{"ts":"2026-11-22T13:11:19Z","layer":"node","event":"task claimed",'
        f'"allocation_id":"a-1","job_seq":{wide},"parts":[-9223372036854775809],'
        '"ceiling":18446744073709551615}\n'
    )
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)]) == 0

    assert main(["--db", db, "timeline", "--id", "allocation_id=a-1", "--json"]) == 0

    (event,) = orjson.loads(capsys.readouterr().out)["events"]
    assert event["attrs"] == {
        "job_seq": wide,
        "parts": ["-9223372036854775809"],
        "ceiling": 18446744073709551615,
    }
    assert main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)]) == 0
    with Store(db, read_only=True) as store:
        assert store.count() == 1  # the same line again is the same event


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (
            ["timeline", "--id", "allocation_id=a-404"],
            1,
            "no evidence mentions allocation_id=a-404",
        ),
        (["timeline", "--id", "allocation_id=a'1"], 2, 'allocation_id holds "\'"'),
        # A bare value is tried as each identifier kind, as the web page does.
        (
            ["timeline", "--id", "nonsense"],
            1,
            "no evidence mentions nonsense (tried it as allocation_id, correlation_id, "
            "workflow_id, node_id, node_instance_id)",
        ),
        (["ingest", "--source", "syslog", "x.log"], 2, "unknown source kind 'syslog'"),
        (
            ["ingest", "--source", "agent", "/nonexistent/file.jsonl"],
            2,
            "cannot read /nonexistent/file.jsonl",
        ),
        (
            ["ingest", "--source", "loki", "--query", '{a="b"}'],
            2,
            "give --loki-url or set CORRELATOR_LOKI_URL",
        ),
    ],
)
def test_errors_name_the_problem_and_exit_codes_tell_the_kind(
    ingested: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    code: int,
    message: str,
) -> None:
    monkeypatch.delenv("CORRELATOR_LOKI_URL", raising=False)
    db = ingested
    assert main(["--db", db, *argv]) == code
    assert message in capsys.readouterr().err


#: The seeded demo's provider latencies (seed 7): per provider and phase, the jobs timed, those
#: without an end, and the percentiles of those with one.
DEMO_LATENCY = [
    ("aap", "provision", 5, 2, 315.262107921, 351.166694893, 351.166694893),
    ("eda", "provision", 4, 0, 166.88938771, 197.388061615, 197.388061615),
    ("aap", "deprovision", 4, 1, 98.334808135, 105.428455773, 105.428455773),
    ("eda", "deprovision", 1, 0, 67.787243804, 67.787243804, 67.787243804),
    ("aap", "total", 5, 0, 317.262107921, 353.166694893, 353.166694893),
    ("eda", "total", 4, 0, 168.88938771, 199.388061615, 199.388061615),
]
_LATENCY_KEYS = ("provider", "phase", "count", "incomplete", "p50_s", "p95_s", "max_s")


def test_findings_and_latency_of_the_demo(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = str(DEMO_NOW_NS)
    assert main(["--db", str(demo_db), "findings", "--json", "--now", now]) == 0
    rules = [f["rule"] for f in orjson.loads(capsys.readouterr().out)["findings"]]
    assert rules == ["projection_drift", "release_failed_stuck"]
    assert main(["--db", str(demo_db), "latency", "--json"]) == 0
    phases = [dict(zip(_LATENCY_KEYS, row, strict=True)) for row in DEMO_LATENCY]
    assert orjson.loads(capsys.readouterr().out) == {"phases": phases, "truncated": False}
    assert main(["--db", str(demo_db), "findings", "--now", now]) == 0
    assert "release_failed_stuck" in capsys.readouterr().out


@pytest.mark.integration
def test_the_demo_command_runs_end_to_end(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "correlator",
            "--db",
            str(tmp_path / "d.duckdb"),
            "demo",
            "--no-serve",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert "verdict: owner layer cert" in result.stdout
    assert STUCK_ALLOCATION in result.stdout


#: An allocation that failed to release 1,000 s before ``STUCK_NOW``: a finding under a deadline
#: of less than that, none at 1,000 s (an age must be strictly greater).
STUCK = (
    b'{"ts":"2026-11-22T13:41:20Z","entity_kind":"allocation","entity_id":"a-9",'
    b'"from":"releasing","to":"release_failed","attributes":{"occupancy":"cleanup"},'
    b'"allocation_id":"a-9","service":"workflow-worker"}\n'
)
STUCK_NOW = "2026-11-22T13:58:00Z"


@pytest.mark.parametrize(
    ("options", "environ", "found"),
    [
        pytest.param([], {}, [], id="default-3600"),
        pytest.param(
            ["--threshold", "release_failed_deadline_s=999.999"],
            {},
            [("release_failed_stuck", "warning", 999.999)],
            id="flag-under",
        ),
        pytest.param(["--threshold", "release_failed_deadline_s=1000"], {}, [], id="flag-at"),
        pytest.param(
            [],
            {"CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "999.999"},
            [("release_failed_stuck", "warning", 999.999)],
            id="variable-under",
        ),
        pytest.param(
            [], {"CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "1000"}, [], id="variable-at"
        ),
        pytest.param(
            ["--threshold", "release_failed_deadline_s=999"],
            {"CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "1000"},
            [("release_failed_stuck", "warning", 999.0)],
            id="flag-wins",
        ),
        pytest.param(
            ["--threshold", "release_failed_deadline_s=1000"],
            {"CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "999"},
            [],
            id="flag-wins-the-other-way",
        ),
        pytest.param(
            [
                "--threshold",
                "release_failed_deadline_s=200",
                "--threshold",
                "critical_factor=4.999",
            ],
            {},
            [("release_failed_stuck", "critical", 200.0)],
            id="repeated",
        ),
        pytest.param(
            ["--threshold", "release_failed_deadline_s=200"],
            {"CORRELATOR_FINDINGS_CRITICAL_FACTOR": "5"},
            [("release_failed_stuck", "warning", 200.0)],
            id="flag-and-variable",
        ),
    ],
)
def test_findings_thresholds_from_the_flag_or_the_environment(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    options: list[str],
    environ: dict[str, str],
    found: list[tuple[str, str, float]],
) -> None:
    transitions = tmp_path / "workflow.ndjson"
    transitions.write_bytes(STUCK)
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "workflow", str(transitions)]) == 0
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()

    assert main(["--db", db, "findings", "--json", "--now", STUCK_NOW, *options]) == 0

    answer = orjson.loads(capsys.readouterr().out)
    assert [(f["rule"], f["severity"], f["threshold_s"]) for f in answer["findings"]] == found
    assert all(f["age_s"] == 1000.0 for f in answer["findings"])


_THRESHOLD_NAMES = (
    "release_failed_deadline_s, provision_job_deadline_s, outbox_publish_deadline_s, "
    "drift_threshold_s, orphan_grace_s, critical_factor"
)


@pytest.mark.parametrize(
    ("threshold", "message"),
    [
        ("drift=60", f"unknown threshold 'drift'; use one of {_THRESHOLD_NAMES}"),
        ("interval_s=60", f"unknown threshold 'interval_s'; use one of {_THRESHOLD_NAMES}"),
        ("drift_threshold_s", "expected NAME=SECONDS, not 'drift_threshold_s'"),
        ("drift_threshold_s=5m", "drift_threshold_s: expected a number of seconds, not '5m'"),
        ("drift_threshold_s=", "drift_threshold_s: expected a number of seconds, not ''"),
        ("drift_threshold_s=-1", "drift_threshold_s must be a number of at least 0, not -1.0"),
        ("orphan_grace_s=inf", "orphan_grace_s must be a number of at least 0, not inf"),
        ("critical_factor=0.5", "critical_factor must be a number of at least 1, not 0.5"),
    ],
)
def test_a_bad_threshold_is_an_argument_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], threshold: str, message: str
) -> None:
    argv = ["--db", str(tmp_path / "c.duckdb"), "findings", "--threshold", threshold]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"correlator findings: error: argument --threshold: {message}\n"
    )


def test_a_malformed_threshold_variable_is_named(
    ingested: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S", "5m")
    assert main(["--db", ingested, "findings"]) == 2
    assert capsys.readouterr().err == (
        "correlator: CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S must be a number of at least 0, "
        "not '5m'\n"
    )


def test_findings_can_be_logged_for_loki(demo_db: Path, captured) -> None:  # type: ignore[no-untyped-def]
    sink = captured(service="correlator", layer="api")
    assert (
        main(["--db", str(demo_db), "findings", "--json", "--log", "--now", str(DEMO_NOW_NS)]) == 0
    )
    logged = [r for r in sink.records if r["event"] == "finding"]
    assert [(r["rule"], r["level"]) for r in logged] == [
        ("projection_drift", "error"),
        ("release_failed_stuck", "warning"),
    ]
    assert logged[1]["allocation_id"] == STUCK_ALLOCATION


@pytest.mark.parametrize(
    "argv",
    [
        ["timeline", "--id", "allocation_id=a-9"],
        ["graph", "--id", "allocation_id=a-9"],
        ["findings"],
        ["latency", "--json"],
    ],
)
def test_reading_commands_refuse_a_missing_database_and_create_none(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    # Where no demo ran: a ./correlator-demo.duckdb (the README runs the demo before the tests)
    # would add its hint to the message.
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "typo.duckdb"
    assert main(["--db", str(typo), *argv]) == 2
    assert capsys.readouterr().err == (
        f"correlator: no database at {typo}: ingest evidence first (correlator ingest)"
        " or point --db / CORRELATOR_DB at one\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_ingest_still_creates_the_database(
    tmp_path: Path, evidence: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "new" / "c.duckdb"
    db.parent.mkdir()
    assert main(["--db", str(db), "ingest", "--source", "agent", "--quiet", str(evidence)]) == 0
    assert db.is_file()
    assert main(["--db", str(db), "timeline", "--id", "allocation_id=a-1", "--json"]) == 0
    assert len(orjson.loads(capsys.readouterr().out)["events"]) == 2


@pytest.mark.parametrize(
    ("folder", "reason"),
    [(False, "No such file or directory"), (True, "it is a directory, not a regular file")],
    ids=["missing", "directory"],
)
def test_an_ingest_that_can_read_none_of_its_files_creates_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: bool, reason: str
) -> None:
    # It left an empty ./correlator.duckdb behind, and the next timeline answered "no
    # evidence" instead of "no database".
    db = tmp_path / "c.duckdb"
    evidence = tmp_path / "app.jsonl"
    if folder:
        evidence.mkdir()
    assert main(["--db", str(db), "ingest", "--source", "agent", "--quiet", str(evidence)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"correlator: cannot read {evidence}: ") and reason in err
    assert not db.exists()


def test_an_unwritable_html_file_is_named_with_the_reason(
    tmp_path: Path, ingested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ingested
    page = tmp_path / "missing" / "t.html"
    argv = ["--db", db, "timeline", "--id", "allocation_id=a-1", "--html", str(page)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"correlator: cannot write {page}: No such file or directory\n"
    )
    assert not page.parent.exists()


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("0", "argument --limit: must be from 1 to 100000, not 0"),
        ("100001", "argument --limit: must be from 1 to 100000, not 100001"),
        (
            "9223372036854775808",  # one past DuckDB's BIGINT
            "argument --limit: must be from 1 to 100000, not 9223372036854775808",
        ),
        ("ten", "argument --limit: expected an integer, not 'ten'"),
    ],
)
def test_timeline_limit_is_bounded_like_the_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], limit: str, message: str
) -> None:
    argv = ["--db", str(tmp_path / "c.duckdb"), "timeline", "--id", "allocation_id=a-1"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--limit", limit])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"correlator timeline: error: {message}\n")


def test_timeline_limit_accepts_the_api_maximum(
    ingested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ingested
    argv = ["--db", db, "timeline", "--id", "allocation_id=a-1", "--json", "--limit", "100000"]
    assert main(argv) == 0
    assert len(orjson.loads(capsys.readouterr().out)["events"]) == 2


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "CORRELATOR_MAX_BODY_BYTES",
            "64MiB",
            "CORRELATOR_MAX_BODY_BYTES must be a whole number of at least 1, not '64MiB'",
        ),
        (
            "CORRELATOR_MAX_BODY_BYTES",
            "0",
            "CORRELATOR_MAX_BODY_BYTES must be a whole number of at least 1, not '0'",
        ),
        (
            "CORRELATOR_FINDINGS_INTERVAL_S",
            "5m",
            "CORRELATOR_FINDINGS_INTERVAL_S must be a number of at least 0, not '5m'",
        ),
        (
            "CORRELATOR_FINDINGS_INTERVAL_S",
            "nan",
            "CORRELATOR_FINDINGS_INTERVAL_S must be a number of at least 0, not 'nan'",
        ),
        (
            "CORRELATOR_FINDINGS_ORPHAN_GRACE_S",
            "10m",
            "CORRELATOR_FINDINGS_ORPHAN_GRACE_S must be a number of at least 0, not '10m'",
        ),
        (
            "CORRELATOR_FINDINGS_CRITICAL_FACTOR",
            "0",
            "CORRELATOR_FINDINGS_CRITICAL_FACTOR must be a number of at least 1, not '0'",
        ),
        (
            "CORRELATOR_NGINX_TZ",
            "Mars/Olympus",
            "CORRELATOR_NGINX_TZ: 'Mars/Olympus' is not a time zone: use UTC, an offset such as "
            "+01:00 or -0530, or an IANA name such as Europe/Berlin",
        ),
    ],
)
def test_serve_names_a_malformed_setting_before_serving(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv("CORRELATOR_FINDINGS_INTERVAL_S", "0")  # no logger thread, whatever
    monkeypatch.setenv(name, value)
    # Were the setting accepted, serve would block in uvicorn.run: fail instead.
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("serve started"))
    assert main(["--db", str(tmp_path / "c.duckdb"), "serve", "--port", "0"]) == 2
    assert capsys.readouterr().err == f"correlator: {message}\n"


def test_every_option_of_every_command_says_what_it_does() -> None:
    assert options_without_help(parser(), "correlator") == []


def test_db_is_taken_before_or_after_the_subcommand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.duckdb")
    evidence = tmp_path / "a.jsonl"
    evidence.write_bytes(
        b'{"ts":"2026-11-22T13:11:19Z","layer":"node","event":"claimed","allocation_id":"a-1"}\n'
    )
    assert main(["ingest", "--db", db, "--source", "agent", "--quiet", str(evidence)]) == 0
    assert main(["timeline", "--db", db, "--id", "a-1", "--json"]) == 0
    assert '"allocation_id": "a-1"' in capsys.readouterr().out.replace(":", ": ", 0)
    # Given in both places, the one after the subcommand wins.
    assert main(["--db", str(tmp_path / "nope.duckdb"), "timeline", "--db", db, "--id", "a-1"]) == 0


def test_a_busy_port_is_named_with_a_free_one_to_try(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"correlator: port {port} is in use on 127.0.0.1; try --port ")
        assert main(["demo", "--port", str(port)]) == 2  # before building anything
        assert f"port {port} is in use" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    # Far more than a pipe's 64 KiB buffer, so the writer meets the closed pipe.
    lines = b"".join(
        b'{"ts":"2026-11-22T%02d:%02d:%02dZ","layer":"node","event":"step","node_id":"n-1"}\n'
        % (10 + i // 3600, i // 60 % 60, i % 60)
        for i in range(3000)
    )
    (tmp_path / "a.jsonl").write_bytes(lines)
    assert (
        main(["--db", str(db), "ingest", "--source", "agent", "--quiet", str(tmp_path / "a.jsonl")])
        == 0
    )
    script = (
        f"{sys.executable} -m correlator --db {db} timeline --id n-1 | head -n 1; "
        "echo ${PIPESTATUS[0]}"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "0", done.stderr
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr


def test_the_cli_does_not_import_pyarrow_compute_at_start_up() -> None:
    # ~25 ms of every command: only a large insert and a native text batch need it, and
    # they import it themselves.
    check = "import sys, correlator.cli; print('pyarrow.compute' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"
