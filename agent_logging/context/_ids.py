"""New identifiers, minted as the first edge that sees a request does (what is safe to carry
is :mod:`agent_logging.schema`'s check)."""

from __future__ import annotations

import os
import uuid

__all__ = [
    "new_correlation_id",
    "new_span_id",
    "new_trace_id",
]


def new_correlation_id() -> str:
    """Mint a correlation id: a random UUID, as the first edge that sees a request does."""
    return str(uuid.uuid4())


def new_trace_id() -> str:
    """Mint a W3C trace id (32 hex digits) for a request that arrived without one."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """Mint a W3C span id (16 hex digits)."""
    return os.urandom(8).hex()
