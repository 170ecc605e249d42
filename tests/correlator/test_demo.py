"""``correlator demo`` builds its own database and never replaces one that holds other
evidence (unless told to with ``--force``)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from correlator.cli import main
from correlator.demo import foreign_origin
from correlator.errors import SourceError
from correlator.ingest import ingest_lines
from correlator.store import Store

#: One event of an operator's own evidence.
RECORD = b'{"ts":"2026-11-22T13:11:19Z","layer":"node","event":"task claimed","node_id":"n-1"}'
#: What the demo says of a file it will not replace, after the file's name and before why.
REFUSED = (
    ", not a previous demo: the demo builds a database of its own; give it another file (--db), "
    "or add --force to replace this one\n"
)


def evidence_db(path: Path, origin: str = "/var/log/agent.jsonl") -> Path:
    """A database holding ``RECORD``, ingested from ``origin``."""
    with Store(path) as store:
        assert ingest_lines(store, "agent", [RECORD], origin).accepted == 1
    return path


def _named_like_the_demo(path: Path) -> Path:
    # The demo's file name, but not in a demo's directory.
    return evidence_db(path, "/var/log/agents/agent.ndjson")


def contents(path: Path) -> list[tuple[str, str]]:
    with Store(path, read_only=True) as store:
        rows = store.cursor().execute("SELECT origin, message FROM events").fetchall()
    return sorted((str(origin), str(message)) for origin, message in rows)


def demo_events(path: Path) -> int:
    """How many events ``path`` holds, each from a demo's evidence file."""
    with Store(path, read_only=True) as store:
        (count,) = store.cursor().execute(
            "SELECT count(*) FROM events "
            "WHERE regexp_matches(origin, '/correlator-demo-[^/]+/|[.]evidence/[^/]+$')"
        ).fetchone() or (0,)
        assert count == store.count()
    return int(count)


def _missing(path: Path) -> Path:
    return path


def _empty(path: Path) -> Path:
    Store(path).close()  # what ingest or serve create before any evidence arrives
    return path


def _text(path: Path) -> Path:
    path.write_text("notes, not a database\n")
    return path


def _other_duckdb(path: Path) -> Path:
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER)")
    return path


@pytest.mark.parametrize(
    ("setup", "foreign"),
    [
        pytest.param(_missing, None, id="missing"),
        pytest.param(_empty, None, id="empty-correlator-database"),
        pytest.param(evidence_db, "evidence from '/var/log/agent.jsonl'", id="evidence"),
        pytest.param(
            _named_like_the_demo,
            "evidence from '/var/log/agents/agent.ndjson'",
            id="a-demo-file-name-elsewhere",
        ),
        pytest.param(_text, "a file the correlator cannot read as its database (", id="text"),
        pytest.param(
            _other_duckdb, "a file the correlator cannot read as its database (", id="other-duckdb"
        ),
    ],
)
def test_foreign_origin(tmp_path: Path, setup: Callable[[Path], Path], foreign: str | None) -> None:
    found = foreign_origin(setup(tmp_path / "db.duckdb"))
    assert found is None if foreign is None else (found or "").startswith(foreign)


def test_a_previous_demo_is_recognised_and_not_one_with_evidence_added(
    tmp_path: Path, demo_db: Path
) -> None:
    assert foreign_origin(demo_db) is None
    added = tmp_path / "db.duckdb"
    shutil.copy(demo_db, added)
    with Store(added) as store:
        ingest_lines(store, "agent", [RECORD], "/var/log/agent.jsonl")
    assert foreign_origin(added) == "evidence from '/var/log/agent.jsonl'"


def test_a_demo_of_the_earlier_layout_is_recognised(tmp_path: Path, demo_db: Path) -> None:
    # A demo built before the raw texts left the events table: this version refuses to open
    # it as a store, and the demo must still replace it (a checkout's second `demo.sh`).
    earlier = tmp_path / "earlier.duckdb"
    shutil.copy(demo_db, earlier)
    with duckdb.connect(str(earlier)) as connection:
        connection.execute("ALTER TABLE events ADD COLUMN raw VARCHAR")
    with pytest.raises(SourceError, match="earlier version"):
        Store(earlier, read_only=True)
    assert foreign_origin(earlier) is None


def test_the_demo_ignores_correlator_db_and_keeps_the_evidence_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The audit's reproduction: CORRELATOR_DB names the evidence; the demo used to delete it.
    monkeypatch.chdir(tmp_path)
    prod = evidence_db(tmp_path / "prod.duckdb")
    monkeypatch.setenv("CORRELATOR_DB", str(prod))

    assert main(["demo", "--no-serve"]) == 0

    assert "into correlator-demo.duckdb" in capsys.readouterr().err
    assert contents(prod) == [("/var/log/agent.jsonl", "task claimed")]
    assert demo_events(tmp_path / "correlator-demo.duckdb") > 100


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        pytest.param(evidence_db, "evidence from '/var/log/agent.jsonl'", id="evidence"),
        pytest.param(_text, "a file the correlator cannot read as its database (", id="text"),
    ],
)
def test_the_demo_refuses_to_replace_other_evidence(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: Callable[[Path], Path],
    why: str,
) -> None:
    path = setup(tmp_path / "prod.duckdb")
    before = path.read_bytes()

    assert main(["--db", str(path), "demo", "--no-serve"]) == 2

    err = capsys.readouterr().err
    assert err.startswith(f"correlator: {path} holds {why}")
    assert err.endswith(REFUSED)
    assert path.read_bytes() == before


def test_the_demo_replaces_a_previous_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.duckdb"
    assert main(["--db", str(path), "demo", "--no-serve"]) == 0
    first = demo_events(path)

    assert main(["--db", str(path), "demo", "--no-serve"]) == 0

    assert demo_events(path) == first  # built afresh, not added to
    assert capsys.readouterr().err.count(f"into {path} (0 rejected)") == 2


def test_force_replaces_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = evidence_db(tmp_path / "prod.duckdb")

    assert main(["--db", str(path), "demo", "--no-serve", "--force"]) == 0

    assert f"into {path} (0 rejected)" in capsys.readouterr().err
    assert demo_events(path) > 100


def test_the_demo_keeps_its_evidence_beside_its_database_and_says_what_to_try_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.duckdb"
    assert main(["--db", str(path), "demo", "--no-serve"]) == 0
    folder = tmp_path / "demo.duckdb.evidence"
    assert sorted(p.name for p in folder.iterdir()) == [
        "agent.ndjson",
        "jobs.ndjson",
        "k8s-provisionrequests.json",
        "nginx-access.log",
        "nginx-error.log",
        "postgres.json",
        "workflow.ndjson",
    ]
    with Store(path, read_only=True) as store:
        rows = store.cursor().execute("SELECT DISTINCT origin FROM events").fetchall()
        origins = {str(origin) for (origin,) in rows}
    assert all(Path(origin).exists() for origin in origins)  # the timeline names real files
    err = capsys.readouterr().err
    assert f"correlator --db {path} timeline --id a-7f3c" in err
    # And the command it suggests works as printed.
    assert main(["--db", str(path), "timeline", "--id", "a-7f3c", "--json"]) == 0


def test_a_folder_of_yours_with_the_evidence_folders_name_is_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "demo.duckdb.evidence"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["--db", str(tmp_path / "demo.duckdb"), "demo", "--no-serve"]) == 2
    assert "holds more than a previous demo's evidence" in capsys.readouterr().err
    assert (folder / "notes.txt").read_text() == "mine"


def test_the_same_seed_tells_the_same_story_whatever_the_fraction_of_now(tmp_path: Path) -> None:
    from correlator import incident
    from correlator.demo import build

    stories = []
    for n, fraction_ns in enumerate((0, 477_000_000, 999_999_999)):
        path = tmp_path / f"d{n}.duckdb"
        build(path, now_ns=1_795_000_000_000_000_000 + fraction_ns, seed=7)
        with Store(path, read_only=True) as store:
            data = incident.timeline_for(store, "allocation_id", "a-7f3c")
        first = data["events"][0]["ts_ns"]
        stories.append(
            [
                (e.get("corrected_ts_ns", e["ts_ns"]) - first, e["message"], e.get("first_failure"))
                for e in data["events"]
            ]
            + [len(data["gaps"])]
        )
    assert stories[0] == stories[1] == stories[2]
