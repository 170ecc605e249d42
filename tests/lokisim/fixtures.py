"""Pytest fixtures for the Loki test server (register with ``pytest_plugins``).

- ``loki``: a started :class:`~tests.lokisim.LokiServer` with Loki 3 defaults,
  stopped after the test.
- ``loki_url``: the Loki base URL to test against: ``$LOKI_URL`` when that variable
  is set (a real Loki, e.g. ``http://127.0.0.1:3100``), otherwise a fresh test
  server's URL. Tests using it must only rely on behaviour both share.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.lokisim._server import LokiServer

__all__ = ["LOKI_URL_ENV", "loki", "loki_url"]

LOKI_URL_ENV = "LOKI_URL"
"""Environment variable naming a real Loki to test against instead of the test server."""


@pytest.fixture
def loki() -> Iterator[LokiServer]:
    """A running Loki test server for one test."""
    server = LokiServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def loki_url(request: pytest.FixtureRequest) -> str:
    """``$LOKI_URL`` when set, else the URL of a running test server."""
    real = os.environ.get(LOKI_URL_ENV)
    if real:
        return real.rstrip("/")
    server: LokiServer = request.getfixturevalue("loki")
    return server.url
