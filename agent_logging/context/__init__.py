"""Identifiers across hops: what is bound now, and how it travels.

``_context`` holds the identifiers bound in this context (one ``ContextVar``); ``_propagation``
writes and reads them as HTTP headers (``traceparent``, ``baggage``, ``X-Correlation-ID``),
environment variables and SQL comments; ``_threads`` carries them into threads and executors;
``_otel`` reads the active OpenTelemetry span when ``opentelemetry-api`` is installed; ``_ids``
mints new ones. What a value may be is :mod:`agent_logging.schema`'s check.
"""

from __future__ import annotations

from agent_logging.context._propagation import parse_headers

__all__ = ["parse_headers"]
