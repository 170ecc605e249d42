from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from correlator._demo_story import STUCK_ALLOCATION
from correlator.cli import main
from correlator.store import Store
from tests.correlator.conftest import DEMO_NOW_NS

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
def test_ingest_parses_large_files_in_worker_processes(
    tmp_path: Path,
    evidence: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("correlator.ingest.PARALLEL_MIN_BYTES", 0)  # every file is "large"
    pooled, alone = str(tmp_path / "pooled.duckdb"), str(tmp_path / "alone.duckdb")
    assert (
        main(["--db", pooled, "ingest", "--source", "agent", "--workers", "2", str(evidence)]) == 0
    )
    assert capsys.readouterr().err.startswith("accepted 2, duplicate 0, rejected 2 in ")
    assert (
        main(["--db", alone, "ingest", "--source", "agent", "--workers", "1", str(evidence)]) == 0
    )
    capsys.readouterr()
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
    tmp_path: Path, evidence: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.duckdb")
    main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)])
    capsys.readouterr()
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


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (
            ["timeline", "--id", "allocation_id=a-404"],
            1,
            "no evidence mentions allocation_id=a-404",
        ),
        (["timeline", "--id", "allocation_id=a'1"], 2, 'allocation_id holds "\'"'),
        (["timeline", "--id", "nonsense"], 2, "expected KEY=VALUE"),
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
    tmp_path: Path,
    evidence: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    code: int,
    message: str,
) -> None:
    monkeypatch.delenv("CORRELATOR_LOKI_URL", raising=False)
    db = str(tmp_path / "c.duckdb")
    main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)])
    capsys.readouterr()
    assert main(["--db", db, *argv]) == code
    assert message in capsys.readouterr().err


def test_findings_and_latency_of_the_demo(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = str(DEMO_NOW_NS)
    assert main(["--db", str(demo_db), "findings", "--json", "--now", now]) == 0
    rules = [f["rule"] for f in orjson.loads(capsys.readouterr().out)["findings"]]
    assert rules == ["projection_drift", "release_failed_stuck"]
    assert main(["--db", str(demo_db), "latency", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["phases"]
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
