"""Fixtures for the Loki test server's own tests.

``loki`` and ``loki_url`` are imported from :mod:`tests.lokisim.fixtures` so these
tests run before (and after) the suite registers that module with ``pytest_plugins``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.lokisim._limits import Limits
from tests.lokisim._server import LokiServer
from tests.lokisim.fixtures import loki, loki_url

__all__ = ["NOW_NS", "http", "loki", "loki_url", "make_loki"]

NOW_NS = 1_700_000_000_000_000_000
"""The fixed clock of ``make_loki`` servers: 2023-11-14T22:13:20Z."""


@pytest.fixture
def make_loki() -> Iterator[Callable[..., LokiServer]]:
    """Start servers with a fixed clock (``NOW_NS``) and the given server/limit options.

    Keyword arguments named like :class:`Limits` fields go to the limits; the rest
    (``auth_enabled``, ``require_auth``) to :class:`LokiServer`.
    """
    servers: list[LokiServer] = []

    def factory(**options: object) -> LokiServer:
        fields = set(Limits.__dataclass_fields__)
        limit_options = {k: v for k, v in options.items() if k in fields}
        server_options = {k: v for k, v in options.items() if k not in fields}
        limits = Limits(**{"now": lambda: NOW_NS, **limit_options})  # type: ignore[arg-type]
        server = LokiServer(limits=limits, **server_options).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    try:
        yield factory
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    """One HTTP client for the session (a client per request costs an SSL context)."""
    with httpx.Client(timeout=10.0) as client:
        yield client
