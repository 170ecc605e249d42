"""Identifier values: what is safe to carry, and how new ones are minted.

Identifiers travel into HTTP headers (``baggage``, ``traceparent``), environment variables, SQL
comments, LogQL queries and Loki structured metadata. Rather than escaping them differently at
every edge and hoping, the library accepts only values that are inert everywhere: ASCII letters,
digits and ``. _ : / @ + ~ -``, at most 256 characters. That covers UUIDs, ULIDs, Kubernetes
names, AAP job ids and inventory hostnames; quotes, backslashes, whitespace, commas, semicolons,
``=`` and non-ASCII are refused with a message that names the key, the character and its
position. (Each edge still escapes what it emits: defence in depth.)
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Final

from agent_logging._types import CONTEXT_KEYS, IDENTIFIER_KEYS
from agent_logging.errors import InvalidIdentifierError

__all__ = [
    "MAX_ID_LENGTH",
    "check_id",
    "new_correlation_id",
    "new_span_id",
    "new_trace_id",
    "problem",
]

#: Longest accepted identifier. W3C baggage allows 8192 bytes for the whole header; five ids of
#: 256 characters stay well inside it, and inside Loki's 2048-byte structured-metadata values.
MAX_ID_LENGTH: Final = 256

_SAFE_ID = re.compile(r"[A-Za-z0-9._:/@+~-]+")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_ALLOWED = "ASCII letters, digits and . _ : / @ + ~ -"


def problem(key: str, value: object) -> str | None:
    """Say what is wrong with an identifier value, or None when it is acceptable.

    Args:
        key: one of the identifier or trace keys.
        value: the candidate value.

    Returns:
        A sentence naming the problem, or None.
    """
    if key not in CONTEXT_KEYS:
        return f"unknown identifier key {key!r}; expected one of {', '.join(CONTEXT_KEYS)}"
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "is empty (leave an unknown identifier out instead)"
    if key == "trace_id":
        if not _HEX32.fullmatch(value) or value == "0" * 32:
            return "must be 32 lower-case hex digits, not all zero (W3C trace-context)"
        return None
    if key == "span_id":
        if not _HEX16.fullmatch(value) or value == "0" * 16:
            return "must be 16 lower-case hex digits, not all zero (W3C trace-context)"
        return None
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed"
    if _SAFE_ID.fullmatch(value):
        return None
    for position, char in enumerate(value):
        if not _SAFE_ID.fullmatch(char):
            return f"holds {char!r} (U+{ord(char):04X}) at position {position}; allowed: {_ALLOWED}"
    return None  # pragma: no cover - fullmatch failed, so some character is not allowed


def check_id(key: str, value: object) -> str:
    """Return ``value`` if it is an acceptable identifier, else raise.

    Integers are accepted for the five identifiers and converted to text, since inventories
    often number their nodes.

    Raises:
        InvalidIdentifierError: naming the key and what is wrong.
    """
    if isinstance(value, int) and not isinstance(value, bool) and key in IDENTIFIER_KEYS:
        try:
            value = str(value)
        except ValueError:  # past sys.get_int_max_str_digits(): far past 256 characters anyway
            raise InvalidIdentifierError(
                key, f"is an integer longer than {MAX_ID_LENGTH} digits"
            ) from None
    reason = problem(key, value)
    if reason is not None:
        raise InvalidIdentifierError(key, reason)
    return value  # type: ignore[return-value]  # problem() proved it is a str


def new_correlation_id() -> str:
    """Mint a correlation id: a random UUID, as the first edge that sees a request does."""
    return str(uuid.uuid4())


def new_trace_id() -> str:
    """Mint a W3C trace id (32 hex digits) for a request that arrived without one."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """Mint a W3C span id (16 hex digits)."""
    return os.urandom(8).hex()
