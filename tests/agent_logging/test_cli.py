"""``agent-logging status`` and ``agent-logging drain`` against spools and the Loki test server.

Spools are written with ``Spool.open`` as a service would have left them (closed: their owner
is dead; held open: it is alive), or by configuring the library in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import agent_logging
from agent_logging import _cli, _state
from agent_logging.loki._client import LokiClient
from agent_logging.loki._entries import PushEntry
from agent_logging.schema import rfc3339_ns
from agent_logging.shipping._dead_letter import append_dead_letter
from agent_logging.shipping._durable import Durable
from agent_logging.spool import _dirs
from agent_logging.spool._dirs import DEAD_LETTER_NAME
from agent_logging.spool._spool import Spool, read_all
from tests.argparse_help import options_without_help
from tests.lokisim import Limits, LokiServer


def record_line(service: str, seq: int, ts_ns: int, pad: str = "") -> bytes:
    record: dict[str, Any] = {
        "ts": rfc3339_ns(ts_ns),
        "level": "info",
        "event": "spooled",
        "service": service,
        "layer": "node",
        "env": "test",
        "seq": seq,
    }
    if pad:
        record["pad"] = pad
    return orjson.dumps(record)


def fill(spool: Spool, service: str, count: int, pad: str = "") -> int:
    """Append ``count`` records of ``service`` from 5 s ago; returns their payload bytes."""
    base = time.time_ns() - 5_000_000_000
    size = 0
    for seq in range(count):
        line = record_line(service, seq, base + seq * 1000, pad)
        assert spool.append(base + seq * 1000, line)
        size += len(line)
    return size


def dead_spool(directory: Path, count: int, pad: str = "") -> int:
    """A spool whose owner is gone; returns its payload bytes."""
    with Spool.open(directory) as spool:
        return fill(spool, directory.name, count, pad)


def refusing_spool(directory: Path) -> None:
    """A spool whose owner is gone: two records, then one over a ``max_line_size`` of 400."""
    with Spool.open(directory) as spool:
        fill(spool, directory.name, 2)
        fill(spool, directory.name, 1, pad="x" * 500)


@pytest.fixture
def live_spool(tmp_path: Path) -> Iterator[int]:
    """A spool held open by this process, with two records; gives their payload bytes."""
    with Spool.open(tmp_path / "spool" / "live") as spool:
        yield fill(spool, "live", 2)


def drain_args(root: Path, url: str, timeout_s: float) -> list[str]:
    return ["drain", "--spool-dir", str(root), "--loki-url", url, "--timeout-s", str(timeout_s)]


NO_SPOOL = (
    "a spool is a directory holding a `lock` file and `seg-*.spool` segment files; a service "
    "configured with spool_dir=DIR (AGENT_LOGGING_SPOOL_DIR) keeps it in DIR/<service>/"
)


def dead_letter(path: Path, seq: int) -> PushEntry:
    """Write one entry Loki refused to the dead-letter file ``path``, as the shipper does."""
    ts_ns = time.time_ns() - 5_000_000_000 + seq * 1000
    entry = PushEntry(
        labels=(("env", "test"), ("layer", "node"), ("node_id", "n-1"), ("service_name", "dl")),
        ts_ns=ts_ns,
        line=record_line("dl", seq, ts_ns).decode(),
        metadata=(),
    )
    append_dead_letter(path, entry, 400, "line too long", now_unix_s=time.time(), max_bytes=1 << 20)
    return entry


# -- status ---------------------------------------------------------------------------------------


def test_status_without_spools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["status", "--spool-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no spools under {tmp_path}\n"


def test_status_json_shows_dead_and_live_spools(
    tmp_path: Path, live_spool: int, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    dead_bytes = dead_spool(root / "dead", 3)

    assert _cli.main(["status", "--spool-dir", str(root), "--json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    for row in rows:
        assert row.pop("oldest_unsent_age_s") >= 5.0
    assert rows == [
        {
            "spool": str(root / "dead"),
            "owner_pid": None,
            "records": 3,
            "bytes": dead_bytes,
            "dead_lettered": 0,
            "torn": 0,
            "corrupt": 0,
            "lost": 0,
            "losses": [],
            "quarantine": None,
        },
        {
            "spool": str(root / "live"),
            "owner_pid": str(os.getpid()),
            "records": 2,
            "bytes": live_spool,
            "dead_lettered": 0,
            "torn": 0,
            "corrupt": 0,
            "lost": 0,
            "losses": [],
            "quarantine": None,
        },
    ]


def test_status_table_names_the_owner_of_a_live_spool(
    tmp_path: Path, live_spool: int, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    dead_spool(root / "dead", 3)
    assert _cli.main(["status", "--spool-dir", str(root)]) == 0
    header, dead, live = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "spool",
        "owner",
        "records",
        "bytes",
        "oldest_s",
        "dead",
        "torn",
        "corrupt",
        "lost",
    ]
    assert dead.split()[:3] == [str(root / "dead"), "-", "3"]
    assert live.split()[:3] == [str(root / "live"), str(os.getpid()), "2"]


def test_status_one_level_too_high_suggests_where_the_spools_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead_spool(tmp_path / "spool" / "dead", 1)
    assert _cli.main(["status", "--spool-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"no spools under {tmp_path}\n"
    assert captured.err == f"did you mean {tmp_path / 'spool'}?\n"


def test_status_counts_the_rotated_dead_letter_file_too(tmp_path: Path) -> None:
    dead_spool(tmp_path / "dead", 1)
    dead_letter(tmp_path / "dead" / f"{DEAD_LETTER_NAME}.1", 0)
    dead_letter(tmp_path / "dead" / DEAD_LETTER_NAME, 1)
    assert _cli.spool_status(tmp_path / "dead")["dead_lettered"] == 2


def test_status_of_a_spool_removed_meanwhile_is_empty(tmp_path: Path) -> None:
    # An adopting process deletes the orphans it emptied, possibly while status reads.
    status = _cli.spool_status(tmp_path / "gone")
    assert {k: status[k] for k in ("owner_pid", "records", "bytes", "dead_lettered")} == {
        "owner_pid": None,
        "records": 0,
        "bytes": 0,
        "dead_lettered": 0,
    }


@pytest.mark.integration
def test_the_command_runs_as_a_module(tmp_path: Path) -> None:
    dead_spool(tmp_path / "spool" / "dead", 1)
    command = [sys.executable, "-m", "agent_logging._cli", "status", "--json"]
    result = subprocess.run(
        [*command, "--spool-dir", str(tmp_path / "spool")],
        capture_output=True,
        timeout=60.0,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [row["records"] for row in orjson.loads(result.stdout)] == [1]


# -- drain ----------------------------------------------------------------------------------------


@pytest.mark.integration
def test_drain_ships_a_dead_spool_and_confirms_every_record(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    dead_spool(root / "dead", 3)
    assert _cli.main(drain_args(root, loki.url, 20.0)) == 0
    out = capsys.readouterr().out
    assert out.startswith("drain: all 3 spooled records from 1 spools are visible in Loki (")
    assert sorted(orjson.loads(e.line)["seq"] for e in loki.entries()) == [0, 1, 2]
    assert list(read_all(root / "dead")) == []


@pytest.mark.integration
def test_drain_reads_loki_url_and_tenant_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = LokiServer(auth_enabled=True).start()  # refuses a push without X-Scope-OrgID
    try:
        monkeypatch.setenv("AGENT_LOGGING_LOKI_URL", server.url)
        monkeypatch.setenv("AGENT_LOGGING_LOKI_TENANT", "team-a")
        root = tmp_path / "spool"
        dead_spool(root / "dead", 2)
        assert _cli.main(["drain", "--spool-dir", str(root), "--timeout-s", "20"]) == 0
        assert "all 2 spooled records" in capsys.readouterr().out
        assert len(server.entries("team-a")) == 2
    finally:
        server.stop()


def test_drain_needs_a_loki_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_LOGGING_LOKI_URL", raising=False)
    assert _cli.main(["drain", "--spool-dir", str(tmp_path)]) == 2
    assert "give --loki-url or set AGENT_LOGGING_LOKI_URL" in capsys.readouterr().err


@pytest.mark.integration
def test_drain_fails_when_loki_lost_what_it_accepted(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    dead_spool(root / "a", 2)
    dead_spool(root / "b", 3)
    # The first push (spool "a", shipped first) is answered 204 but not stored: accepted,
    # acknowledged, removed from the spool, and lost.
    loki.fail_next(1, 204)
    assert _cli.main(drain_args(root, loki.url, 1.5)) == 1
    err = capsys.readouterr().err
    assert "drain: 2 of 5 spooled records are NOT visible in Loki after " in err
    assert err.rstrip().endswith("Do not reimage yet.")
    assert {e.labels["service_name"] for e in loki.entries()} == {"b"}


@pytest.mark.integration
def test_drain_fails_while_loki_is_down(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    dead_spool(root / "dead", 3)
    loki.go_down()
    assert _cli.main(drain_args(root, loki.url, 1.0)) == 1
    err = capsys.readouterr().err
    assert "Loki did not accept everything in time" in err
    assert "drain: 3 of 3 spooled records are NOT visible in Loki" in err
    assert "last query error: Loki query failed: ConnectError" in err
    assert len(list(read_all(root / "dead"))) == 3  # kept for the next attempt


@pytest.mark.integration
def test_drain_counts_dead_lettered_records_as_not_visible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    refusing_spool(root / "dead")
    with LokiServer(limits=Limits(max_line_size=400)) as loki:
        assert _cli.main(drain_args(root, loki.url, 1.5)) == 1
        assert loki.count() == 2
    err = capsys.readouterr().err
    assert "drain: 1 of 3 spooled records are NOT visible" in err
    assert f"1 were refused by Loki (see {root / 'dead' / DEAD_LETTER_NAME}). " in err
    assert len((root / "dead" / DEAD_LETTER_NAME).read_bytes().splitlines()) == 1


@pytest.mark.integration
def test_drain_keeps_failing_while_dead_letters_are_not_in_loki(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    refusing_spool(root / "dead")
    letters = root / "dead" / DEAD_LETTER_NAME
    advice = (
        "Do not reimage yet. Dead letters are entries Loki refused, each with its labels, "
        "timestamp, line and Loki's reason: fix the cause and push them again, or pass "
        "--accept-dead-letters to accept their loss.\n"
    )
    with LokiServer(limits=Limits(max_line_size=400)) as loki:
        assert _cli.main(drain_args(root, loki.url, 10.0)) == 1
        first = capsys.readouterr().err
        assert first.startswith("drain: 1 of 3 spooled records are NOT visible in Loki after ")
        assert first.endswith(f"; 1 were refused by Loki (see {letters}). {advice}")
        # The spool is empty now: a second run must not pass for that.
        assert list(read_all(root / "dead")) == []
        assert _cli.main(drain_args(root, loki.url, 10.0)) == 1
        assert capsys.readouterr().err == (
            f"drain: 1 records dead-lettered by an earlier run are NOT in Loki (see {letters}). "
            + advice
        )
        assert _cli.main([*drain_args(root, loki.url, 10.0), "--accept-dead-letters"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("drain: all 0 spooled records from 1 spools are visible in Loki (")
    assert out.endswith(
        "; 1 dead-lettered records, not confirmed in Loki, are accepted as lost "
        f"(--accept-dead-letters; see {letters})\n"
    )


@pytest.mark.integration
def test_drain_passes_once_every_dead_letter_is_in_loki(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dead spool whose records all left, with a dead letter in each file (rotated and
    # current); node_id was a label of their stream, as configure() makes it for node agents.
    root = tmp_path / "spool"
    dead_spool(root / "dl", 0)
    older = dead_letter(root / "dl" / f"{DEAD_LETTER_NAME}.1", 0)
    newer = dead_letter(root / "dl" / DEAD_LETTER_NAME, 1)
    files = f"{root / 'dl' / (DEAD_LETTER_NAME + '.1')}, {root / 'dl' / DEAD_LETTER_NAME}"
    with LokiClient(loki.url) as client:
        assert client.push([older]).outcome == "ok"  # once the cause was fixed, say
        assert _cli.main(drain_args(root, loki.url, 10.0)) == 1
        assert capsys.readouterr().err.startswith(
            f"drain: 1 records dead-lettered by an earlier run are NOT in Loki (see {files}). "
        )
        assert client.push([newer]).outcome == "ok"
    assert _cli.main(drain_args(root, loki.url, 10.0)) == 0
    out = capsys.readouterr().out
    assert out.startswith("drain: all 0 spooled records from 1 spools are visible in Loki (")
    assert out.endswith(" s); so are the 2 records of the dead-letter files\n")


@pytest.mark.integration
def test_drain_waits_for_a_live_owner_to_ship_what_it_had_spooled(
    loki: LokiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "spool"
    loki.go_down()
    agent_logging.configure(
        service="owner",
        layer="node",
        env="test",
        loki_url=loki.url,
        spool_dir=root,
        output="none",
        batch_interval_s=0.05,
        health_interval_s=0,
    )
    log = agent_logging.get_logger("tests.cli")
    for seq in range(4):
        log.info("owned", seq=seq)

    # drain reads the spool once to collect what must become visible; every later read is
    # its wait for the owner (it cannot take the spool's lock from a live owner). The first
    # of those waits is held until the test has set the scene.
    reads = 0
    waiting, go_on = threading.Event(), threading.Event()

    def watched_read_all(directory: Path, on_damage: Any = None) -> Any:
        nonlocal reads
        reads += 1
        if reads == 2:
            waiting.set()
            go_on.wait(20.0)
        return read_all(directory, on_damage)

    monkeypatch.setattr(_dirs, "read_all", watched_read_all)
    codes: list[int] = []
    drainer = threading.Thread(
        target=lambda: codes.append(_cli.main(drain_args(root, loki.url, 10.0)))
    )
    drainer.start()
    try:
        assert waiting.wait(10.0)
        assert len(list(read_all(root / "owner"))) == 4  # drain left the owner's spool alone
        loki.come_up()
        pipeline = _state.pipeline
        assert pipeline is not None
        owner = pipeline.sinks[0]
        assert isinstance(owner, Durable)
        assert owner.flush(timeout_s=15.0)  # the owner ships the four, cutting its backoff
        # The owner goes on logging, and this record cannot leave its spool for a while: the
        # spool is not empty again before the drain's deadline, which must not matter.
        loki.fail_next(50, 503)
        log.info("owned, later")
        assert len(list(read_all(root / "owner"))) == 1
    finally:
        go_on.set()
        drainer.join(30.0)
    assert codes == [0]
    captured = capsys.readouterr()
    assert captured.out.startswith("drain: all 4 spooled records from 1 spools are visible in ")
    assert "drain:" not in captured.err  # no problem to report (the owner's warnings are there)
    agent_logging.shutdown(timeout_s=0.5)  # "owned, later" stays spooled


# -- where the spools are -------------------------------------------------------------------------


def test_drain_of_a_directory_without_spools_fails_saying_what_a_spool_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "unrelated").mkdir()
    assert _cli.main(drain_args(tmp_path, "http://127.0.0.1:9", 5.0)) == 2
    assert capsys.readouterr().err == (
        f"agent-logging: --spool-dir {tmp_path} holds no spool ({NO_SPOOL}); give the "
        "spool_dir the service was configured with, or pass --allow-empty if this node never "
        "spooled\n"
    )


@pytest.mark.parametrize("allow_empty", [[], ["--allow-empty"]])
def test_drain_one_level_too_high_fails_and_names_the_spool_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], allow_empty: list[str]
) -> None:
    # The reimage gate given the parent of the real spool_dir: "all 0 records are visible"
    # would let a node with records spooled be reimaged.
    dead_spool(tmp_path / "var" / "spool" / "svc", 3)
    args = [*drain_args(tmp_path / "var", "http://127.0.0.1:9", 5.0), *allow_empty]
    assert _cli.main(args) == 2
    assert capsys.readouterr().err == (
        f"agent-logging: --spool-dir {tmp_path / 'var'} holds no spool; did you mean "
        f"{tmp_path / 'var' / 'spool'}? ({NO_SPOOL})\n"
    )


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_drain_allow_empty_passes_a_node_that_never_spooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    spool_dir = tmp_path / where
    if where == "empty":
        spool_dir.mkdir()
    args = [*drain_args(spool_dir, "http://127.0.0.1:9", 5.0), "--allow-empty"]
    assert _cli.main(args) == 0
    assert capsys.readouterr().out == (
        f"drain: no spool under {spool_dir}: nothing to ship (--allow-empty)\n"
    )


# -- bad arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["status", "--spool-dir", "{missing}"], "is not a directory"),
        (["drain", "--spool-dir", "{missing}", "--loki-url", "http://127.0.0.1:9"], "is not a"),
        (["drain", "--spool-dir", "{root}", "--loki-url", "ftp://loki"], "must be http"),
        (["drain", "--spool-dir", "{root}", "--loki-url", "http://h", "--timeout-s", "0"], "posit"),
        (["drain", "--spool-dir", "{root}", "--loki-url", "http://h", "--timeout-s", "nan"], "pos"),
    ],
)
def test_unusable_arguments_exit_2_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    dead_spool(tmp_path / "dead", 1)
    args = [a.format(missing=tmp_path / "missing", root=tmp_path) for a in argv]
    assert _cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-logging: ")
    assert message in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["drain", "--spool-dir", "x", "--loki-url", "http://h", "--timeout-s", "soon"],
        ["compact", "--spool-dir", "x"],
    ],
)
def test_malformed_command_lines_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _cli.main(argv)
    assert exited.value.code == 2
    assert "usage: agent-logging" in capsys.readouterr().err


def test_every_option_of_every_command_says_what_it_does() -> None:
    assert options_without_help(_cli._parser(), "agent-logging") == []


@pytest.mark.parametrize("command", [[], ["status"], ["drain"]])
def test_help_is_plain_text_not_restructured_text(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_logging._cli import main

    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: agent-logging")
    assert "``" not in out
