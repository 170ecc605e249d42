"""Every environment variable the correlator reads, declared once."""

from __future__ import annotations

from typing import Final

DB: Final = "CORRELATOR_DB"
"""The DuckDB file (default ``./correlator.duckdb``); ``--db`` wins."""

TOKEN: Final = "CORRELATOR_TOKEN"  # noqa: S105 - a variable name
"""Bearer token required by ``POST /v1/evidence``. Unset: writes over HTTP are refused."""

READ_TOKEN: Final = "CORRELATOR_READ_TOKEN"  # noqa: S105 - a variable name
"""When set, every read endpoint (timeline, graph, findings, latency, the page's data) needs
this bearer token too (or the write token)."""

MAX_BODY_BYTES: Final = "CORRELATOR_MAX_BODY_BYTES"
"""Largest accepted ``POST /v1/evidence`` body. Default 67108864 (64 MiB)."""

LOKI_URL: Final = "CORRELATOR_LOKI_URL"
"""Loki base URL for ``ingest --source loki`` (falls back to ``AGENT_LOGGING_LOKI_URL``)."""

LOKI_TENANT: Final = "CORRELATOR_LOKI_TENANT"
"""``X-Scope-OrgID`` for queries."""

LOKI_USERNAME: Final = "CORRELATOR_LOKI_USERNAME"
"""Basic-auth user for Loki queries."""

LOKI_PASSWORD: Final = "CORRELATOR_LOKI_PASSWORD"  # noqa: S105 - a variable name
"""Basic-auth password for Loki queries."""

LOKI_BEARER_TOKEN: Final = "CORRELATOR_LOKI_BEARER_TOKEN"  # noqa: S105 - a variable name
"""Bearer token for Loki queries."""

LOKI_CA_BUNDLE: Final = "CORRELATOR_LOKI_CA_BUNDLE"
"""PEM CA bundle for Loki's TLS certificate."""

FINDINGS_INTERVAL_S: Final = "CORRELATOR_FINDINGS_INTERVAL_S"
"""``correlator serve`` logs every open finding as an ``event="finding"`` record this often
(seconds; default 300; 0 turns it off): a gauge the lifecycle dashboard reads from Loki."""
