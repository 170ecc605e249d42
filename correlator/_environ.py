"""Every environment variable the correlator reads, declared once (the findings' thresholds
by their rules, in ``correlator.findings``)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from correlator.findings import RULES

DB: Final = "CORRELATOR_DB"
"""The DuckDB file (default ``./correlator.duckdb``); ``--db`` wins. ``correlator demo`` does not
read it: the demo writes its own file (``./correlator-demo.duckdb``), never the evidence's."""

TOKEN: Final = "CORRELATOR_TOKEN"  # noqa: S105 - a variable name
"""Bearer token required by ``POST /v1/evidence``. Unset: writes over HTTP are refused."""

READ_TOKEN: Final = "CORRELATOR_READ_TOKEN"  # noqa: S105 - a variable name
"""When set, every read endpoint (timeline, graph, findings, latency, the page's data) needs
this bearer token too (or the write token)."""

MAX_BODY_BYTES: Final = "CORRELATOR_MAX_BODY_BYTES"
"""Largest accepted ``POST /v1/evidence`` body. Default 67108864 (64 MiB)."""

ALLOWED_HOSTS: Final = "CORRELATOR_ALLOWED_HOSTS"
"""Host names (comma-separated; a port is not compared) that ``correlator serve`` answers in
a request's ``Host`` header besides its own address (``--host`` and the port; ``localhost``,
``127.0.0.1`` and ``[::1]`` on a loopback connection): the name a reverse proxy or an
operator's browser uses for it. ``*`` turns the check off. Any other ``Host`` is a 400, so a
web page cannot read the service through DNS rebinding."""

READ_THREADS: Final = "CORRELATOR_READ_THREADS"
"""Threads ``correlator serve`` answers reads with (default 2); further reads wait their turn
without a thread. Writes have a thread of their own; ``/healthz`` needs none."""

READ_CACHE_MB: Final = "CORRELATOR_READ_CACHE_MB"
"""MiB ``correlator serve`` may keep answers in until the next write (default 64), and as many
for the store's reads they are built from; 0 keeps none (every read asks the store)."""

MAX_CONNECTIONS: Final = "CORRELATOR_MAX_CONNECTIONS"
"""Connections ``correlator serve`` holds at once (default 512); one more is closed as it
opens."""

HEADER_TIMEOUT_S: Final = "CORRELATOR_HEADER_TIMEOUT_S"
"""Seconds a client has to send a request's line and headers, from the connection's start or
the end of its previous response (default 10); then the connection is closed."""

BODY_TIMEOUT_S: Final = "CORRELATOR_BODY_TIMEOUT_S"
"""Seconds ``POST /v1/evidence`` waits in all for its body to arrive (default 60; the time
spent storing it is not counted); then it is a 408 and nothing of it is stored."""

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

FINDINGS_CRITICAL_FACTOR: Final = "CORRELATOR_FINDINGS_CRITICAL_FACTOR"
"""A finding is critical past this multiple of its threshold (default 4; at least 1)."""

#: The findings' deadlines and thresholds by the ``correlator.findings.FindingsConfig`` field
#: each sets: one ``CORRELATOR_FINDINGS_<THRESHOLD>`` per rule's threshold (each rule of
#: ``correlator.findings.RULES`` says what it bounds and its default), then the critical
#: factor. ``queries.findings_config`` reads them; ``correlator findings --threshold
#: NAME=SECONDS`` overrides one by its field name.
FINDINGS_THRESHOLDS: Final = MappingProxyType(
    {rule.threshold: rule.variable for rule in RULES}
    | {"critical_factor": FINDINGS_CRITICAL_FACTOR}
)

OWNER_RULES: Final = "CORRELATOR_OWNER_RULES"
"""A TOML file of owner rules (the format of ``agent_logging.owner.load_rules``) tried before
the built-in owner table when a verdict reads the evidence's text; ``--owner-rules`` wins.
Read by ``timeline``, ``eval`` and ``serve``; a bad file is refused at start, naming the
rule and the field."""

NGINX_TZ: Final = "CORRELATOR_NGINX_TZ"
"""The time zone of nginx error-log times (which carry none) for ``ingest --source nginx``
and for nginx bodies posted to ``correlator serve`` without ``?tz=``:
``UTC``, a fixed offset (``+01:00``) or an IANA name (``Europe/Berlin``); default UTC;
``--nginx-tz`` wins."""

TEXT_TZ: Final = "CORRELATOR_TEXT_TZ"
"""The time zone of plain-text log times written without one (oslo.log, klog, Python's
``asctime``, RFC 3164 syslog) for ``ingest --source text`` and text bodies posted to
``correlator serve`` without ``?tz=``; as :data:`NGINX_TZ` reads it; ``--text-tz`` wins."""

TEXT_RULES: Final = "CORRELATOR_TEXT_RULES"
"""A TOML file of an operator's text formats, identifier rules and layer rules (the format
of ``correlator.sources.text._rules_file``) for ``ingest --source text`` and for text
bodies posted to ``correlator serve``; ``--text-rules`` wins. A bad file is refused when it
is read, naming the file and the place."""
