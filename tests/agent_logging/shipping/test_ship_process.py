"""``shipper="process"``: the spool shipped from a helper process, end to end.

Each test runs the real helper (``python -m agent_logging.shipping._child``) against the test
server; faults come from the server, from signals, and from a helper command that cannot work.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import agent_logging
from agent_logging import _state
from agent_logging.shipping import _child, _process
from agent_logging.shipping._durable import Durable
from agent_logging.shipping._process import ProcessShipper
from agent_logging.spool._dirs import DEAD_LETTER_NAME
from tests.lokisim import Limits, LokiServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).absolute().parents[3]


def configure(url: str, root: Path, **options: Any) -> None:
    agent_logging.configure(
        service="svc",
        layer="node",
        env="test",
        loki_url=url,
        spool_dir=root,
        output="none",
        batch_interval_s=0.05,
        health_interval_s=0,
        shipper="process",
        **options,
    )


def shipper() -> ProcessShipper:
    pipeline = _state.pipeline
    assert pipeline is not None
    sink = pipeline.sinks[0]
    assert isinstance(sink, Durable)
    assert isinstance(sink.shipper, ProcessShipper)
    return sink.shipper


def child_pid() -> int:
    process = shipper()._process
    assert process is not None
    return process.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: it ships nothing. It may also be reaped between the
    # kill and the read (the read then fails with ESRCH, or the open with ENOENT).
    try:
        with Path(f"/proc/{pid}/stat").open() as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def seqs(loki: LokiServer) -> list[int]:
    return sorted(orjson.loads(entry.line)["seq"] for entry in loki.entries())


@pytest.fixture
def said() -> Iterator[list[str]]:
    """What the library says on its internal logger during the test."""
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    _state.internal_logger.addHandler(handler)
    try:
        yield messages
    finally:
        _state.internal_logger.removeHandler(handler)


def test_records_reach_loki_from_the_helper_process(loki: LokiServer, tmp_path: Path) -> None:
    configure(loki.url, tmp_path / "spool")
    pid = child_pid()
    assert pid != os.getpid()
    log = agent_logging.get_logger("tests")
    with agent_logging.bound(allocation_id="a-7"):
        for seq in range(3000):
            log.info("claimed", seq=seq)
    assert agent_logging.flush(timeout_s=15.0) is True
    assert seqs(loki) == list(range(3000))
    entry = loki.entries()[0]
    assert entry.metadata["allocation_id"] == "a-7"
    assert (entry.labels["service_name"], entry.labels["layer"]) == ("svc", "node")
    health = agent_logging.health()
    assert (health["sent"], health["spool_records"], health["retried"]) == (3000, 0, 0)
    agent_logging.shutdown(timeout_s=5.0)
    assert wait_until(lambda: not alive(pid), 5.0)  # the helper ends with the service's shipping


def test_an_outage_is_retried_by_the_helper_and_counted_here(
    loki: LokiServer, tmp_path: Path
) -> None:
    loki.go_down()
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests")
    for seq in range(50):
        log.info("queued", seq=seq)
    assert agent_logging.flush(timeout_s=0.5) is False
    assert wait_until(lambda: agent_logging.health()["retried"] > 0, 10.0)
    health = agent_logging.health()
    assert health["spool_records"] == 50
    assert "Connection refused" in health["last_error"]
    loki.come_up()
    assert agent_logging.flush(timeout_s=20.0) is True
    assert seqs(loki) == list(range(50))
    assert agent_logging.health()["sent"] == 50


def test_a_poison_entry_is_dead_lettered_by_the_helper(tmp_path: Path) -> None:
    with LokiServer(limits=Limits(max_line_size=1024)) as loki:
        loki.go_down()  # everything goes out in one batch once Loki is up
        configure(loki.url, tmp_path / "spool")
        log = agent_logging.get_logger("tests")
        for seq in range(7):
            log.info("batch mate", seq=seq, pad="x" * (2000 if seq == 3 else 10))
        loki.come_up()
        assert agent_logging.flush(timeout_s=20.0) is True
        assert seqs(loki) == [0, 1, 2, 4, 5, 6]
        assert agent_logging.health()["dead_lettered"] == 1
    letters = (tmp_path / "spool" / "svc" / DEAD_LETTER_NAME).read_bytes().splitlines()
    assert [orjson.loads(orjson.loads(letter)["line"])["seq"] for letter in letters] == [3]


def test_a_helper_that_dies_is_replaced_and_nothing_is_lost(
    loki: LokiServer, tmp_path: Path, said: list[str]
) -> None:
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests")
    for seq in range(100):
        log.info("before", seq=seq)
    assert agent_logging.flush(timeout_s=15.0) is True
    first = child_pid()
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: not alive(first), 5.0)
    for seq in range(100, 200):
        log.info("after", seq=seq)  # spooled while no helper runs
    assert wait_until(lambda: shipper().running and child_pid() != first, 10.0)
    assert agent_logging.flush(timeout_s=15.0) is True
    assert seqs(loki) == list(range(200))
    assert agent_logging.health()["sent"] == 200  # the first helper's count is kept
    assert any(
        message.startswith("shipping: the shipper process exited (status -9); starting another")
        for message in said
    )


def test_a_flush_while_no_helper_runs_ships_from_this_process(
    loki: LokiServer, tmp_path: Path
) -> None:
    configure(loki.url, tmp_path / "spool")
    pid = child_pid()
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not shipper().running, 5.0)
    log = agent_logging.get_logger("tests")
    for seq in range(20):
        log.info("orphaned", seq=seq)
    assert agent_logging.flush(timeout_s=10.0) is True  # before the replacement starts (1 s)
    assert seqs(loki) == list(range(20))


def test_the_helper_ends_when_the_service_is_killed_and_its_records_ship_later(
    loki: LokiServer, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        import agent_logging
        agent_logging.configure(
            service="svc", layer="node", env="test", loki_url={loki.url!r},
            spool_dir={str(spool)!r}, output="none", health_interval_s=0,
            batch_interval_s=3600, shipper="process",
        )
        log = agent_logging.get_logger("tests")
        for seq in range(500):
            log.info("spooled", seq=seq)
        sink = agent_logging._state.pipeline.sinks[0]
        print(sink.shipper._process.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    helper = int(done.stdout.split()[0])
    assert wait_until(lambda: not alive(helper), 10.0)  # no orphaned helper
    configure(loki.url, spool)  # the next run of the service: same spool directory
    assert agent_logging.flush(timeout_s=20.0) is True
    assert seqs(loki) == list(range(500))


def test_without_a_usable_interpreter_shipping_falls_back_to_a_thread(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    monkeypatch.setattr(_child, "command", lambda: [str(tmp_path / "no-python")])
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests")
    for seq in range(10):
        log.info("via the fallback", seq=seq)
    assert agent_logging.flush(timeout_s=10.0) is True
    assert seqs(loki) == list(range(10))
    assert shipper().running and shipper()._process is None
    assert any("cannot start the shipper process" in message for message in said)
    assert any("shipping from a thread of this process instead" in message for message in said)


def test_a_helper_that_keeps_dying_at_start_is_given_up_for_a_thread(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    monkeypatch.setattr(_process, "_RESTART_INITIAL_S", 0.05)
    monkeypatch.setattr(_child, "command", lambda: [sys.executable, "-c", "raise SystemExit(3)"])
    configure(loki.url, tmp_path / "spool")
    log = agent_logging.get_logger("tests")
    for seq in range(10):
        log.info("via the fallback", seq=seq)
    assert wait_until(lambda: shipper()._gave_up, 15.0)
    assert agent_logging.flush(timeout_s=10.0) is True
    assert seqs(loki) == list(range(10))
    assert any("exited (status 3) within 2 s of its start, 3 times in a row" in m for m in said)


def test_a_forked_child_ships_through_a_helper_of_its_own(loki: LokiServer, tmp_path: Path) -> None:
    configure(loki.url, tmp_path / "spool")
    parent_helper = child_pid()
    log = agent_logging.get_logger("tests")
    log.info("parent", seq=0)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            log.info("child", seq=1)
            ok = agent_logging.flush(timeout_s=15.0) and child_pid() != parent_helper
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    log.info("parent", seq=2)
    assert agent_logging.flush(timeout_s=15.0) is True
    assert child_pid() == parent_helper
    assert seqs(loki) == [0, 1, 2]
