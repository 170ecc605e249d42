"""Fixtures for the correlator: a store on disk, the demo incident, an API client; autouse, no
``CORRELATOR_*`` variable of the shell that runs the tests."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import pytest

from correlator import demo, ingest
from correlator.store import Store

DEMO_NOW_NS = 1_795_000_000_000_000_000


@pytest.fixture(autouse=True)
def _clean_correlator_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # An operator's CORRELATOR_DB, CORRELATOR_FINDINGS_* or CORRELATOR_NGINX_TZ would change
    # what the tests read and write.
    for name in list(os.environ):
        if name.startswith("CORRELATOR_"):
            monkeypatch.delenv(name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty store in a DuckDB file."""
    with Store(tmp_path / "evidence.duckdb") as opened:
        yield opened


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo incident, built once per session (read it, do not write to it)."""
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    demo.build(path, now_ns=DEMO_NOW_NS, seed=7)
    return path


@pytest.fixture
def demo_store(demo_db: Path) -> Iterator[Store]:
    with Store(demo_db, read_only=True) as opened:
        yield opened


def now_ns() -> int:
    return time.time_ns()


class RecordingPool(Executor):
    """A worker pool of ``ingest.parse_pool`` that records what it was given and where it ran."""

    def __init__(self, workers: int | None, threads: bool) -> None:
        self.workers = workers
        self.threads = threads
        self.pool = _parse_pool(workers, threads=threads)
        self.submitted = 0
        #: The (process id, thread id) pairs that ran a batch (asked of the pool after each).
        self.runners: set[tuple[int, int]] = set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        future = self.pool.submit(fn, *args, **kwargs)
        self.runners.add(self.pool.submit(_runner).result())
        return future

    def ran_elsewhere(self) -> bool:
        """Whether every batch ran in a worker: another process, or another thread."""
        here = _runner()
        if self.threads:
            return bool(self.runners) and all(
                pid == here[0] and thread != here[1] for pid, thread in self.runners
            )
        return bool(self.runners) and all(pid != here[0] for pid, _ in self.runners)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)

    def __repr__(self) -> str:
        return f"RecordingPool(workers={self.workers}, submitted={self.submitted})"


def _runner() -> tuple[int, int]:
    return os.getpid(), threading.get_ident()


_parse_pool = ingest.parse_pool


@pytest.fixture
def started_pools(monkeypatch: pytest.MonkeyPatch) -> list[RecordingPool]:
    """The worker pools ingest starts (``parse_pool``), in order, each recording its batches."""
    pools: list[RecordingPool] = []

    def recording(workers: int | None = None, *, threads: bool = False) -> RecordingPool:
        pools.append(RecordingPool(workers, threads))
        return pools[-1]

    monkeypatch.setattr("correlator.ingest.parse_pool", recording)
    return pools
