"""The evidence schema, published once: the identifiers and their check, the layers, the Loki
stream schema, and how a time is written.

Every part of the project derives from this module rather than spelling the names again: the
library's pipeline and shipper, the correlator's model, sources and LogQL, the Grafana
dashboards, and the tests that hold the Alloy and OpenTelemetry Collector configs in
``collector-config/`` against it. It imports nothing of the package but its errors, so any
module may import it.

The Loki stream schema (version :data:`SCHEMA_VERSION`): a stream is labelled only by
:data:`STREAM_LABELS` (few, static, low cardinality), plus :data:`NODE_LABEL` on the direct
path when a deployment asks for a per-host stream; every identifier, the trace context and the
level travel as structured metadata (:data:`METADATA_KEYS`), queryable without a parser
(``| allocation_id="a-9"``) yet never a label, so they cost no streams.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

from agent_logging.errors import InvalidIdentifierError

__all__ = [
    "CONTEXT_KEYS",
    "ENV_LABEL",
    "EVIDENCE_LAYERS",
    "IDENTIFIER_KEYS",
    "LABEL_NAMES",
    "LAYERS",
    "LAYER_LABEL",
    "LEVELS",
    "MAX_ID_LENGTH",
    "METADATA_KEYS",
    "NODE_LABEL",
    "OWNER_LAYERS",
    "SCHEMA_VERSION",
    "SERVICE_LABEL",
    "STREAM_LABELS",
    "TRACE_KEYS",
    "check_id",
    "id_problem",
    "rfc3339_ns",
]

#: The five identifiers, in the order they are rendered and propagated.
IDENTIFIER_KEYS: Final = (
    "node_id",
    "node_instance_id",
    "correlation_id",
    "allocation_id",
    "workflow_id",
)

#: Trace context carried beside the identifiers (lower-case hex, 32 and 16 digits).
TRACE_KEYS: Final = ("trace_id", "span_id")

#: Everything the context carries across hops.
CONTEXT_KEYS: Final = IDENTIFIER_KEYS + TRACE_KEYS

#: The layers a service of the control plane logs as (the library's ``layer`` setting).
LAYERS: Final = ("node", "ingress", "api", "workflow", "db")

#: The layers evidence comes from: the services' five, the provider job itself (AAP/EDA) and
#: projections of it (a Kubernetes custom resource's status).
EVIDENCE_LAYERS: Final = (*LAYERS, "provider", "projection")

#: Who owns a failure; ``unknown`` when the evidence does not say.
OWNER_LAYERS: Final = (
    "deploy",
    "cert",
    "ingress",
    "api_auth",
    "api",
    "workflow_state",
    "db",
    "node",
    "provider",
    "unknown",
)

#: Record levels, lowest first.
LEVELS: Final = ("debug", "info", "warning", "error", "critical")

#: Raised when the meaning of the stream schema below changes (labels, metadata keys).
SCHEMA_VERSION: Final = 1

#: The service's name, the layer it logs as, and the deployment environment.
SERVICE_LABEL: Final = "service_name"
LAYER_LABEL: Final = "layer"
ENV_LABEL: Final = "env"

#: The labels of every stream: few, static, low cardinality.
STREAM_LABELS: Final = (SERVICE_LABEL, LAYER_LABEL, ENV_LABEL)

#: The per-host label a deployment may add (``node_id_label``): one value per host.
NODE_LABEL: Final = "node_id"

#: Every label a stream may carry, in the order they are written.
LABEL_NAMES: Final = (*STREAM_LABELS, NODE_LABEL)

#: Record keys shipped as structured metadata, in this order.
METADATA_KEYS: Final = (*IDENTIFIER_KEYS, *TRACE_KEYS, "level")

#: Longest accepted identifier. W3C baggage allows 8192 bytes for the whole header; five ids of
#: 256 characters stay well inside it, and inside Loki's 2048-byte structured-metadata values.
MAX_ID_LENGTH: Final = 256

# Identifiers travel into HTTP headers (baggage, traceparent), environment variables, SQL
# comments, LogQL queries and Loki structured metadata. Rather than escaping them differently
# at every edge and hoping, only values that are inert everywhere are accepted (each edge
# still escapes what it emits: defence in depth).
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9._:/@+~-]+")
_HEX32: Final = re.compile(r"[0-9a-f]{32}")
_HEX16: Final = re.compile(r"[0-9a-f]{16}")
_ALLOWED: Final = "ASCII letters, digits and . _ : / @ + ~ -"


def id_problem(key: str, value: object) -> str | None:
    """Say what is wrong with an identifier value, or None when it is acceptable.

    Acceptable: ASCII letters, digits and ``. _ : / @ + ~ -``, 1 to :data:`MAX_ID_LENGTH`
    characters (UUIDs, ULIDs, Kubernetes names, AAP job ids, inventory hostnames); ``trace_id``
    and ``span_id`` as W3C trace-context has them.

    Args:
        key: one of :data:`CONTEXT_KEYS`.
        value: the candidate value.

    Returns:
        A sentence naming the problem (the character and its position, the length), or None.
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
    """Return ``value`` if it is an acceptable identifier (:func:`id_problem`), else raise.

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
    reason = id_problem(key, value)
    if reason is not None:
        raise InvalidIdentifierError(key, reason)
    return value  # type: ignore[return-value]  # id_problem() proved it is a str


_NS: Final = 1_000_000_000
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
_TWO_DIGITS: Final = tuple(f"{number:02d}" for number in range(100))
_DAYS_KEPT: Final = 4096
# Days by their number since 1970, as text: a timeline of a busy node writes 10,000 instants
# over a few weeks, and the date is most of what one costs.
_day_text: dict[int, str] = {}
# The decimal digits of the last second written, and its text up to the dot: records come
# many per second, so only the nanoseconds are written per call. One tuple, replaced whole:
# threads read it safely.
_last_second: tuple[str, str] = ("", "")


def _second_text(seconds: int) -> str:
    days, second_of_day = divmod(seconds, 86_400)
    day = _day_text.get(days)
    if day is None:
        day = date.fromordinal(days + _EPOCH_ORDINAL).isoformat()
        if len(_day_text) >= _DAYS_KEPT:
            _day_text.clear()
        _day_text[days] = day
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    two = _TWO_DIGITS
    return f"{day}T{two[hour]}:{two[minute]}:{two[second]}."


def rfc3339_ns(ts_ns: int) -> str:
    """``2026-11-22T13:11:19.123456789Z`` for a UNIX time in nanoseconds: nine digits and ``Z``,
    the form every part of the project writes and reads fastest.

    Raises:
        ValueError: the instant is outside years 1 to 9999.
    """
    global _last_second
    if ts_ns < _NS:  # before 1970-01-01T00:00:01: not worth the fast path
        seconds, fraction = divmod(ts_ns, _NS)
        return f"{_second_text(seconds)}{fraction:09d}Z"
    # The last nine decimal digits are the nanoseconds, zero-padded; the others the second.
    digits = str(ts_ns)
    cached = _last_second
    if digits[:-9] != cached[0]:
        cached = _last_second = (digits[:-9], _second_text(ts_ns // _NS))
    return cached[1] + digits[-9:] + "Z"
