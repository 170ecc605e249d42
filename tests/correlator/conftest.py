"""Fixtures for the correlator: a store on disk, the demo incident, an API client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from correlator import demo
from correlator.store import Store

DEMO_NOW_NS = 1_795_000_000_000_000_000


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
