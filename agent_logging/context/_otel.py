"""The OpenTelemetry bridge, used only when ``opentelemetry-api`` is installed.

- :func:`span_ids` reads the active span's ids for every record. Formatting two ints as hex on
  every call costs more than the rest of the lookup, so the last span's strings are cached:
  a request logs many records under one span.
- :func:`attach_baggage` mirrors bound identifiers into OpenTelemetry baggage, so peers called
  through OpenTelemetry-instrumented clients receive them too: only when a service opts in
  (``AgentLoggingMiddleware(..., otel_baggage=True)``), since OpenTelemetry's propagator sends
  baggage to every host, whatever ``propagate_hosts`` allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AVAILABLE", "attach_baggage", "baggage_ids", "detach", "span_ids"]

try:
    from opentelemetry import baggage as _baggage
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by the import-guard test in a subprocess
    AVAILABLE = False
else:
    AVAILABLE = True

_cache: list[Any] = [None, None]  # [span_context, (trace_id_hex, span_id_hex)]


def span_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` of the active, valid span, or None."""
    if not AVAILABLE:
        return None
    span_context = _trace.get_current_span().get_span_context()
    if span_context is _cache[0]:
        return _cache[1]  # type: ignore[no-any-return]
    if not span_context.is_valid:
        return None
    ids = (f"{span_context.trace_id:032x}", f"{span_context.span_id:016x}")
    _cache[0], _cache[1] = span_context, ids
    return ids


def attach_baggage(ids: Mapping[str, str]) -> object | None:
    """Put ``ids`` into OpenTelemetry baggage; returns a token for :func:`detach`."""
    if not AVAILABLE or not ids:
        return None
    ctx = _context.get_current()
    for key, value in ids.items():
        ctx = _baggage.set_baggage(key, value, context=ctx)
    return _context.attach(ctx)


def detach(token: object | None) -> None:
    """Undo :func:`attach_baggage`."""
    if token is not None and AVAILABLE:
        _context.detach(token)  # type: ignore[arg-type]


def baggage_ids(keys: tuple[str, ...]) -> dict[str, str]:
    """Identifiers found in the current OpenTelemetry baggage (unchecked strings)."""
    if not AVAILABLE:
        return {}
    entries = _baggage.get_all()
    return {key: str(entries[key]) for key in keys if key in entries}
