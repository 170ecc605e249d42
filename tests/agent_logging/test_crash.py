"""Crash safety: a service SIGKILLed at random moments loses no record it had accepted.

The service is ``durable_child.py``, restarted on the same spool after every kill. A record
counts as accepted once the child reported its sequence number, which it does only after the
logging call returned; such a record must reach Loki exactly once, intact, by the time
``agent-logging drain`` says everything spooled is visible.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import pytest

import agent_logging
from agent_logging import _state
from agent_logging._durable import Durable
from agent_logging._render import rfc3339_ns
from tests.agent_logging.durable_child import BATCH_MAX_BYTES
from tests.lokisim import LokiServer
from tests.servers import free_port

CHILD = Path(__file__).with_name("durable_child.py")
SERVICE = "crashy"
CYCLES = 20
RECORD_KEYS = {"ts", "level", "event", "service", "layer", "env", "logger", "run", "seq"}


class Child:
    """One run of the child service, with a thread reading its progress reports."""

    def __init__(self, root: Path, url: str, run: int, stderr: IO[bytes], *extra: str) -> None:
        self.reported: list[int] = []
        self.target = 0
        self._stderr_path = Path(stderr.name)
        self.reached = threading.Event()
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), str(root), url, SERVICE, str(run), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if not line.endswith(b"\n"):
                break  # cannot happen: each report is one write of a whole line
            self.reported.append(int(line))
            if len(self.reported) >= self.target > 0:
                self.reached.set()

    def wait_reported(self, count: int, timeout_s: float) -> bool:
        self.target = count
        if len(self.reported) >= count:
            self.reached.set()
        return self.reached.wait(timeout_s)

    def kill(self) -> list[int]:
        """SIGKILL the child, reap it, and return every sequence number it reported.

        The child must have been running until the kill: one that ended by itself (a crash,
        an exit in the library) is a failure, not a kill.
        """
        os.kill(self.process.pid, signal.SIGKILL)
        returncode = self.process.wait(timeout=10.0)
        self._reader.join(timeout=10.0)
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.stdout is not None
        self.process.stdout.close()
        assert returncode == -signal.SIGKILL, (
            f"the child ended by itself, exit status {returncode}; the children's stderr ends "
            f"with:\n{self._stderr_path.read_bytes()[-4000:].decode(errors='replace')}"
        )
        return list(self.reported)


@pytest.fixture
def stderr_log(tmp_path: Path) -> Iterator[IO[bytes]]:
    """Where the children's stderr goes (shown by pytest on a failure)."""
    with (tmp_path / "children.stderr").open("w+b") as handle:
        yield handle


def drain(root: Path, url: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_logging._cli", "drain", "--spool-dir", str(root)]
    return subprocess.run(
        [*command, "--loki-url", url, "--timeout-s", str(timeout_s)],
        capture_output=True,
        text=True,
        timeout=timeout_s + 30.0,
        check=False,
    )


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("shipper", ["thread", "process"])
def test_records_survive_sigkill_at_random_moments(
    loki: LokiServer,
    tmp_path: Path,
    stderr_log: IO[bytes],
    monkeypatch: pytest.MonkeyPatch,
    shipper: str,
) -> None:
    # With a shipper process, the kill leaves it to notice its owner is gone (its stdin
    # ends) while the next run starts on the same spool: at most the push it had in flight
    # lands after the kill, one resent batch, within the bound below.
    monkeypatch.setenv("AGENT_LOGGING_SHIPPER", shipper)
    root = tmp_path / "spool"
    rng = random.Random(20261122)
    pause = threading.Event()  # never set: waits below are timed kills, not polling
    reported: dict[int, list[int]] = {}
    for run in range(CYCLES):
        child = Child(root, loki.url, run, stderr_log)
        if run % 2:
            # Any moment after spawn (start-up takes about a second on a slow machine):
            # opening and replaying the last run's spool, shipping it, logging.
            pause.wait(rng.uniform(0.3, 1.8))
        else:
            # Some way into its logging, wherever its shipper happens to be.
            assert child.wait_reported(rng.randint(1, 400), timeout_s=20.0)
        reported[run] = child.kill()

    result = drain(root, loki.url, timeout_s=30.0)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("drain: all ")

    seen: Counter[tuple[int, int]] = Counter()
    for entry in loki.entries():
        record: dict[str, Any] = orjson.loads(entry.line)  # every stored line is whole JSON
        assert set(record) == RECORD_KEYS
        assert record["ts"] == rfc3339_ns(entry.ts_ns)
        assert (record["event"], record["service"], record["layer"], record["env"]) == (
            "tick",
            SERVICE,
            "node",
            "test",
        )
        assert entry.labels == {"service_name": SERVICE, "layer": "node", "env": "test"}
        seen[record["run"], record["seq"]] += 1
    assert set(seen.values()) == {1}  # after Loki's de-duplication: each record once
    # At-least-once, and no more: a kill between Loki storing a batch and its ack makes the
    # next run (or the drain, after the last kill) send that batch again, but nothing acked
    # is sent twice. So each kill costs at most one resent batch, of at most BATCH_MAX_BYTES
    # of payload (a record's payload is at least its line).
    accepted = sum(r.entries_in_body for r in loki.requests if r.status == 204)
    resent = accepted - sum(seen.values())
    smallest = min(len(entry.line.encode()) for entry in loki.entries())
    assert resent <= CYCLES * (BATCH_MAX_BYTES // smallest), f"{accepted} records accepted"

    for run, numbers in reported.items():
        stored = sorted(seq for r, seq in seen if r == run)
        assert numbers == list(range(len(numbers)))
        # Every reported record, in order and without gaps; at most one more, logged but
        # killed before its report.
        assert stored[: len(numbers)] == numbers
        assert stored == list(range(len(stored)))
        assert len(stored) - len(numbers) in (0, 1)


@pytest.mark.integration
def test_the_spool_of_a_killed_process_is_adopted_by_the_next_one(
    loki: LokiServer, tmp_path: Path, stderr_log: IO[bytes]
) -> None:
    root = tmp_path / "spool"
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: everything stays spooled
    child = Child(root, nowhere, 7, stderr_log, "5")
    assert child.wait_reported(5, timeout_s=20.0)
    assert child.kill() == [0, 1, 2, 3, 4]

    agent_logging.configure(
        service="adopter",
        layer="node",
        env="test",
        loki_url=loki.url,
        spool_dir=root,
        output="none",
        health_interval_s=0,
    )
    pipeline = _state.pipeline
    assert pipeline is not None
    sink = pipeline.sinks[0]
    assert isinstance(sink, Durable)
    assert sink.wait_for_adoption(1, timeout_s=15.0)
    assert sorted(orjson.loads(entry.line)["seq"] for entry in loki.entries()) == [0, 1, 2, 3, 4]
    assert {entry.labels["service_name"] for entry in loki.entries()} == {SERVICE}
    assert sorted(path.name for path in root.iterdir()) == ["adopter"]
