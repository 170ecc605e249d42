"""The processors every record goes through, in order, after it is stamped.

Each is a plain structlog processor ``(logger, method_name, event_dict) -> event_dict`` that
edits the record in place (the pipeline built it, so nobody else holds it) and returns it. They
run on every log call: each does nothing but a dict lookup unless its case applies.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any, Final

from agent_logging import _otel
from agent_logging._ids import problem
from agent_logging._owner import error_info
from agent_logging._types import IDENTIFIER_KEYS, OWNER_LAYERS, EventDict

__all__ = ["add_error", "add_span_ids", "check_call_site_ids", "current_context"]

#: Longest traceback text kept in ``error.stack``; Loki's line limit is 256 KB for everything.
MAX_STACK_CHARS: Final = 8192


# The span ids are a function of OpenTelemetry's current Context, an immutable mapping that
# is replaced, never changed, when a span starts or ends: while the same Context object is
# current, the last answer stands. One ContextVar read instead of the span lookup, which
# costs about a microsecond per record. One tuple, replaced whole: threads read it safely.
_last_span: tuple[object, tuple[str, str] | None] = (object(), None)


def _no_context() -> object:
    return None


current_context: Callable[[], object] = _no_context
if _otel.AVAILABLE:
    from opentelemetry.context import get_current

    current_context = get_current


def add_span_ids(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """``trace_id``/``span_id`` of the active OpenTelemetry span, when one is active.

    An active span wins over ids bound by middleware: it is the more precise of the two.
    """
    global _last_span
    context = current_context()
    last = _last_span
    if context is last[0]:
        ids = last[1]
    else:
        ids = _otel.span_ids()
        _last_span = (context, ids)
    if ids is not None:
        event_dict["trace_id"], event_dict["span_id"] = ids
    return event_dict


def check_call_site_ids(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """Identifiers passed as fields at the call site get the same checks as bound ones.

    A bad one is moved to ``rejected_ids`` with the reason, so the record still ships and
    the value stays visible (JSON-escaped) without reaching labels, metadata or queries.
    Runs before bound identifiers are merged in: those were checked when they were bound.
    """
    rejected: dict[str, Any] | None = None
    for key in IDENTIFIER_KEYS:
        value = event_dict.get(key)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            value = event_dict[key] = str(value)
        reason = problem(key, value)
        if reason is None:
            continue
        del event_dict[key]
        if rejected is None:
            # A copy of a dict the call passed as rejected_ids (it is the caller's); any
            # other value of that name is kept beside it, as rejected_ids_field.
            given = event_dict.get("rejected_ids")
            if given is not None and not isinstance(given, dict):
                event_dict["rejected_ids_field"] = given
            rejected = event_dict["rejected_ids"] = dict(given) if isinstance(given, dict) else {}
        rejected[key] = {"value": repr(value)[:300], "reason": reason}
    return event_dict


def add_error(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """``error = {type, message, owner_layer, chain, stack}`` for records with an exception.

    ``exc_info`` may be True (the exception being handled), an exception, or a
    ``sys.exc_info()`` tuple. ``owner_layer=`` given at the call site wins over classification.
    A failure logged without an exception but with ``owner_layer=`` still gets an ``error``
    whose type is ``"failure"``, so the correlator sees the owner hint either way.
    """
    exc_info = event_dict.pop("exc_info", None)
    owner_layer = event_dict.pop("owner_layer", None)
    exc: BaseException | None = None
    if exc_info is True:
        exc = sys.exc_info()[1]
    elif isinstance(exc_info, BaseException):
        exc = exc_info
    elif isinstance(exc_info, tuple) and len(exc_info) == 3:
        exc = exc_info[1]
    if exc is not None:
        given = (
            owner_layer
            if owner_layer is None or isinstance(owner_layer, str)
            else repr(owner_layer)
        )
        error = error_info(exc, owner_layer=given)
        stack = "".join(traceback.format_exception(exc))
        error["stack"] = stack[-MAX_STACK_CHARS:]
        event_dict["error"] = error
    elif owner_layer is not None:
        valid = isinstance(owner_layer, str) and owner_layer in OWNER_LAYERS
        error = {
            "type": "failure",
            "message": str(event_dict.get("event", "")),
            "owner_layer": owner_layer if valid else "unknown",
            "chain": [],
        }
        if not valid:
            text = owner_layer if isinstance(owner_layer, str) else repr(owner_layer)
            error["owner_layer_invalid"] = text[:100]
        event_dict["error"] = error
    return event_dict
