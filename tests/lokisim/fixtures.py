"""Pytest fixtures for the Loki test server (register with ``pytest_plugins``).

- ``loki``: a started :class:`~tests.lokisim.LokiServer` with Loki 3 defaults,
  stopped after the test.
- ``loki_url``: the Loki base URL to test against: ``$LOKI_URL`` when that variable
  is set (a real Loki, e.g. ``http://127.0.0.1:3100``), otherwise a fresh test
  server's URL. Tests using it must only rely on behaviour both share.
- ``loki_tenant``: the tenant to send as ``X-Scope-OrgID`` to ``loki_url``:
  ``$LOKI_TENANT`` when a real Loki is in use and that variable is set, else None.

What "behaviour both share" means for a test using ``loki_url`` (a real Loki may be shared,
hold other data, and differ from the test server in ways these rules absorb):

- stamp entries near ``time.time_ns()``: Loki refuses entries older than
  ``reject_old_samples_max_age`` (7 days), newer than now + ``creation_grace_period``
  (10 minutes), or more than ``max_chunk_age / 2`` (1 hour) behind their stream's newest;
- give every stream a label value unique to the run (a uuid), so earlier runs on the same Loki
  cannot be counted or de-duplicate this run's entries, and select by it in every query;
- after a 2xx push, poll ``query_range`` with a deadline (:data:`VISIBILITY_TIMEOUT_S`):
  an entry may take a moment to become queryable;
- send ``loki_tenant`` wherever a client is configured;
- inject no faults (429, 5xx, stalls) and assert no test-server error texts: use ``loki``;
- mind the stock limits both enforce: a tenant takes 4 MiB/s (6 MiB at once, then 429), a
  stream pushed faster than 1.5 MB/s is sharded (its entries come back under streams with a
  ``__stream_shard__`` label), and an answer over 4 MiB never comes (page by size).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.lokisim._server import LokiServer

__all__ = [
    "LOKI_TENANT_ENV",
    "LOKI_URL_ENV",
    "VISIBILITY_TIMEOUT_S",
    "loki",
    "loki_tenant",
    "loki_url",
]

LOKI_URL_ENV = "LOKI_URL"
"""Environment variable naming a real Loki to test against instead of the test server."""

LOKI_TENANT_ENV = "LOKI_TENANT"
"""Environment variable naming the tenant (``X-Scope-OrgID``) of the real Loki at ``LOKI_URL``."""

VISIBILITY_TIMEOUT_S = 30.0
"""How long a test waits for pushed entries to become queryable (a real Loki may lag)."""


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


@pytest.fixture
def loki_tenant() -> str | None:
    """``$LOKI_TENANT`` when ``$LOKI_URL`` names a real Loki and it is set, else None.

    The test server runs with ``auth_enabled: false`` (every request is tenant ``fake``), so
    a tenant only means something for a real, possibly multi-tenant, Loki.
    """
    if not os.environ.get(LOKI_URL_ENV):
        return None
    return os.environ.get(LOKI_TENANT_ENV) or None
