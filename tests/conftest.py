"""Shared fixtures. Autouse fixtures only reset global state: logging configuration, the
identifier context and ``AGENT_LOGGING_*`` variables."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import agent_logging
from agent_logging import _state
from agent_logging.context import _context
from tests import real_parts

pytest_plugins = ["tests.lokisim.fixtures", "tests.pg"]


@pytest.fixture(autouse=True)
def _clean_logging_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("AGENT_LOGGING_"):
            monkeypatch.delenv(name)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    token = _context.set_ids({})
    yield
    _context.reset(token)
    agent_logging.shutdown(timeout_s=2.0)
    root.handlers[:] = handlers
    root.setLevel(level)
    _state.reset_reports()


class Captured:
    """Records written by the pipeline, parsed back from their JSON lines."""

    def __init__(self) -> None:
        self.stream = io.BytesIO()

    @property
    def lines(self) -> list[bytes]:
        return self.stream.getvalue().splitlines()

    @property
    def records(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.lines]

    def last(self) -> dict[str, Any]:
        return self.records[-1]


@pytest.fixture
def captured() -> Callable[..., Captured]:
    """``captured(**configure_kwargs)`` configures the library to write into memory."""

    def configure(**kwargs: Any) -> Captured:
        sink = Captured()
        options: dict[str, Any] = {"service": "svc", "layer": "api", "env": "test"}
        options.update(kwargs)
        agent_logging.configure(output=sink.stream, **options)
        return sink

    return configure


@pytest.fixture(scope="session")
def real_loki() -> str:
    """The base URL of the run's real Loki (``$LOKI_URL``, which ``scripts/test.sh`` starts).

    Without it the test skips, or fails in CI (:func:`tests.real_parts.missing`).
    """
    return real_parts.real_loki_url()


@pytest.fixture(scope="session")
def loki_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Loki binary (``../shared/bin/loki``), for tests that run one of their own."""
    return real_parts.loki_binary(tmp_path_factory.mktemp("loki-bin"))
