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

from agent_logging import _state
from agent_logging._types import OWNER_LAYERS, EventDict
from agent_logging.context import _context, _otel
from agent_logging.owner import error_info
from agent_logging.redaction._secrets import redact_text
from agent_logging.schema import (
    CONTEXT_KEYS,
    IDENTIFIER_KEYS,
    MAX_ID_LENGTH,
    TRACE_KEYS,
    id_problem,
)

__all__ = [
    "add_error",
    "add_span_ids",
    "check_call_site_ids",
    "check_late_trace_ids",
    "current_context",
]

#: Longest traceback text kept in ``error.stack``; Loki's line limit is 256 KB for everything.
MAX_STACK_CHARS: Final = 8192
#: Longest text of a rejected identifier's value kept in ``rejected_ids``.
MAX_REJECTED_CHARS: Final = 300
#: Longest invalid owner layer kept in ``error.owner_layer_invalid``.
MAX_OWNER_LAYER_CHARS: Final = 100

#: Call-site identifier and trace id values that passed ``problem``, and the key each passed
#: for (a trace id is no span id): a request's records repeat them, and the check is a
#: regular expression, ~0.4 µs.
_passed: dict[str, str] = {}
_PASSED_SIZE: Final = 4096

# Every cut below is of redacted text: a cut first could split a secret from what makes it
# recognisable (a PEM key's BEGIN line, the "@" after a URL's password), and the part kept
# would then pass redaction. Cutting redacted text can only lose text, never expose any.


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
    """Identifiers and trace ids passed as fields at the call site get the same checks as
    bound ones.

    A bad one is moved to ``rejected_ids`` with the reason, so the record still ships and
    the value stays visible (redacted, JSON-escaped) without reaching labels, metadata or
    queries; a ``trace_id`` must be 32 and a ``span_id`` 16 lower-case hex digits, not all
    zero (W3C trace-context). Runs before bound identifiers are merged in: those were checked
    when they were bound, and take the place of a rejected one.
    """
    rejected: dict[str, Any] | None = None
    for key in CONTEXT_KEYS:
        value = event_dict.get(key)
        if value is None:
            continue
        reason = _call_site_problem(event_dict, key, value)
        if reason is None:
            continue
        del event_dict[key]
        if rejected is None:
            rejected = _rejected_ids(event_dict)
        rejected[key] = _rejection(value, reason)
    return event_dict


def _call_site_problem(event_dict: EventDict, key: str, value: object) -> str | None:
    """What is wrong with a call-site value (``problem``), None if nothing. An identifier
    given as a number is replaced by its text, as ``bind`` takes it."""
    if isinstance(value, int) and not isinstance(value, bool) and key in IDENTIFIER_KEYS:
        try:
            value = event_dict[key] = str(value)
        except ValueError:  # past sys.get_int_max_str_digits(): it once lost the record
            return f"is an integer longer than {MAX_ID_LENGTH} digits"
    if type(value) is str and _passed.get(value) == key:
        return None
    reason = id_problem(key, value)
    if reason is None:
        _remember_passed(key, value)  # type: ignore[arg-type]  # id_problem() proved it is a str
    return reason


def _remember_passed(key: str, value: str) -> None:
    """Note that ``value`` passed ``problem`` for ``key`` (see ``_passed``)."""
    if len(_passed) >= _PASSED_SIZE:
        _passed.clear()  # values are per request: bound the memory, keep it simple
    _passed[value] = key


def _reject_trace_id(event_dict: EventDict, key: str, value: object, reason: str) -> None:
    """Take a ``trace_id``/``span_id`` that ``problem`` refused out of a record that was
    already built (a service's processor put it there), as :func:`check_call_site_ids` would
    have before: the bound one, if any, takes its place, and the value goes to
    ``rejected_ids`` with ``reason``. Unchecked, it would reach the line, Loki's structured
    metadata (whose size limit refuses the whole record) and queries.

    Args:
        event_dict: the record; edited in place.
        key: ``trace_id`` or ``span_id``.
        value: the value refused.
        reason: ``problem``'s sentence, which never quotes the value.
    """
    bound = _context.current().get(key)
    if bound is not None and id_problem(key, bound) is None:
        event_dict[key] = bound
    else:
        del event_dict[key]
    _rejected_ids(event_dict)[key] = _rejection(value, reason)


def check_late_trace_ids(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """A ``trace_id``/``span_id`` that a processor of the service's put in the record, checked
    as a call site's is (:func:`_reject_trace_id` takes a bad one out), just before redaction,
    which leaves trace ids as they are. In the chain only when the service has processors:
    every other way into a record (a call site, a binding, the OpenTelemetry span) checked its
    trace ids already.
    """
    for key in TRACE_KEYS:
        value = event_dict.get(key)
        if value is None:
            continue
        reason = _call_site_problem(event_dict, key, value)
        if reason is not None:
            _reject_trace_id(event_dict, key, value, reason)
    return event_dict


def _rejected_ids(event_dict: EventDict) -> dict[str, Any]:
    """The record's own ``rejected_ids`` dict, made on first use.

    A copy of a dict the call passed as rejected_ids (it is the caller's); any other value
    of that name is kept beside it, as rejected_ids_field.
    """
    given = event_dict.get("rejected_ids")
    if given is not None and not isinstance(given, dict):
        event_dict["rejected_ids_field"] = given
    rejected: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    event_dict["rejected_ids"] = rejected
    return rejected


def _rejection(value: object, reason: str) -> dict[str, str]:
    """A refused value as ``rejected_ids`` shows it: its repr, redacted, then cut."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__, an int past str()'s digit limit
        text = f"<unrepresentable {type(value).__name__} object>"
    return {"value": redact_text(text)[:MAX_REJECTED_CHARS], "reason": reason}


def add_error(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """``error = {type, message, owner_layer, chain, stack}`` for records with an exception.

    ``exc_info`` may be True (the exception being handled), an exception, or a
    ``sys.exc_info()`` tuple. ``owner_layer=`` given at the call site wins over classification.
    A failure logged without an exception but with ``owner_layer=`` still gets an ``error``
    whose type is ``"failure"``, so the correlator sees the owner hint either way. An
    exception is classified with the owner table ``configure()`` put in force
    (``_state.owner_rules``: an operator's rules file ahead of the built-in table).
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
        # The record carries the pipeline's service and layer (a call-site field of either
        # name was moved to <name>_field): an operator's rules may name them.
        service = event_dict.get("service")
        layer = event_dict.get("layer")
        error = error_info(
            exc,
            owner_layer=given,
            rules=_state.owner_rules,
            service=service if isinstance(service, str) else None,
            layer=layer if isinstance(layer, str) else None,
        )
        # The innermost cause is printed first: its message (a key the code failed to parse)
        # is the part most often cut, so the whole text is redacted before the cut.
        stack = redact_text("".join(traceback.format_exception(exc)))
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
            error["owner_layer_invalid"] = redact_text(text)[:MAX_OWNER_LAYER_CHARS]
        event_dict["error"] = error
    return event_dict
