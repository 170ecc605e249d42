"""Who owns one failure, and how we know: the owner an event's evidence names.

Owners come, in order of trust:

1. ``stamped``: the record says so itself (``error.owner_layer``, written by ``agent_logging``
   or by any service that writes the record schema), unless it says ``unknown``;
2. ``adapter``: the source adapter knows its own failures (nginx's TLS and upstream lines, a
   PostgreSQL SQLSTATE, a workflow state, an AAP job's status);
3. ``inferred``: the one owner table of :mod:`agent_logging.owner`, the same table the library
   applies to exception objects, applied to the evidence's text: the error's type, message
   and causes, a stack trace, the record's message, an exit code, an HTTP status;
4. ``fallback``: nothing names an owner; the verdict (:mod:`correlator.verdict`) then names
   the layer of the first failure, with a low confidence.

An owner that rests on an HTTP status alone (an access log's 401 or 502, or a rule on the
status) is *weak*: it says which layer answered, not why, and any owner read from a failure's
own words outranks it.

This runs at query time, over the failures of one timeline, never at ingest: a new rules file
(``--owner-rules``) takes effect on the evidence already stored, and ingest pays nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agent_logging.owner import DEFAULT_RULES, Evidence, OwnerRule, classify_evidence, is_wrapper
from correlator.model import Event

__all__ = [
    "FALLBACK_OWNERS",
    "RECORD_SOURCES",
    "Ownership",
    "evidence_of",
    "fallback_owner",
    "owner_of",
    "says_why",
]

#: Sources whose events are records of DESIGN §4: an ``owner_hint`` there is a stamp.
RECORD_SOURCES: Final = frozenset({"ndjson", "agent", "loki"})

#: The source of plain-text records, whose lines after the first are a folded stack trace.
TEXT_SOURCE: Final = "text"

#: The owner a failure's layer gives when nothing else names one (the fallback).
FALLBACK_OWNERS: Final = {
    "node": "node",
    "ingress": "ingress",
    "api": "api",
    "workflow": "workflow_state",
    "db": "db",
    "provider": "provider",
    "projection": "workflow_state",  # an operator's custom resource: the workflow's view
}

#: Keys of a record (beside ``error``) in which other logging libraries put an error's text.
_TEXT_KEYS: Final = (
    "err",
    "error_message",
    "exception_message",
    "stderr",
    "reason",
    "detail",
    "job_explanation",
    "result_traceback",
)
#: Keys that hold a process's exit code.
_EXIT_KEYS: Final = ("exit_code", "rc", "returncode", "return_code", "exit_status", "exitcode")
#: Keys of a record's raw line that hold a stack trace (kept out of ``attrs``: they are long).
_STACK_KEYS: Final = (
    "exception",
    "stack",
    "exc_info",
    "stack_info",
    "stacktrace",  # zap
    "stack_trace",  # logstash-logback-encoder, ECS's error.stack_trace
    "traceback",
)
#: Relayed statuses: an ingress passes its upstream's 500 and 503 on; 502 and 504 are its own.
_RELAYED: Final = frozenset({500, 501, 503, 505})


@dataclass(frozen=True, slots=True)
class Ownership:
    """The owner one failure's evidence names.

    Attributes:
        owner_layer: the owner layer.
        source: ``stamped``, ``adapter``, ``inferred`` or ``fallback``.
        rule: the rule that matched (``inferred``), or the adapter (``adapter``).
        matched: the text that matched, quoted by the verdict.
        weak: it rests on an HTTP status alone.
    """

    owner_layer: str
    source: str
    rule: str | None = None
    matched: str | None = None
    weak: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON form a timeline's failure events carry as ``owner``."""
        shown: dict[str, Any] = {"layer": self.owner_layer, "source": self.source}
        if self.rule is not None:
            shown["rule"] = self.rule
        if self.matched is not None:
            shown["matched"] = self.matched
        if self.weak:
            shown["weak"] = True
        return shown


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _exit_code(attrs: dict[str, Any]) -> int | None:
    for key in _EXIT_KEYS:
        value = attrs.get(key)
        if type(value) is int and 0 <= value <= 255:
            return value
    return None


def evidence_of(event: Event, *, with_stack: bool = False) -> Evidence:
    """The text of an event's failure, as the owner table reads it.

    Args:
        event: the event.
        with_stack: also read a stack trace from the raw line (a record's ``error.stack`` and
            top-level ``exception``/``stack``), which ``attrs`` leaves out for its length.

    Returns:
        The evidence: the error's type, message and causes, the event's message, its HTTP
        status and exit code, its service and layer.
    """
    attrs = event.attrs if isinstance(event.attrs, dict) else {}
    error = attrs.get("error")
    message: str | None = None
    chain: list[tuple[str | None, str | None]] = []
    if isinstance(error, dict):
        message = _text(error.get("message"))
        causes = error.get("chain")
        if isinstance(causes, list):
            chain.extend(
                (_text(c.get("type")), _text(c.get("message")))
                for c in causes[:32]
                if isinstance(c, dict)
            )
    elif isinstance(error, str):
        message = error
    # Other libraries' error fields, outermost: the causes above are more specific.
    extra = [(None, text) for key in _TEXT_KEYS if (text := _text(attrs.get(key))) is not None]
    stack = _stack(event) if with_stack else None
    return Evidence(
        type=event.error_type,
        message=message,
        chain=tuple(extra + chain),
        stack=stack,
        event=event.message,
        status=event.http_status,
        exit_code=_exit_code(attrs),
        service=event.service,
        layer=event.layer,
    )


#: How a stack key looks in a raw JSON line (a substring test before any parse).
_STACK_MARKS: Final = tuple(f'"{key}"' for key in _STACK_KEYS)


def _has_stack(event: Event) -> bool:
    raw = event.raw
    if event.source == TEXT_SOURCE:
        return "\n" in raw or any(key in event.attrs for key in _STACK_KEYS)
    return event.source in RECORD_SOURCES and any(mark in raw for mark in _STACK_MARKS)


def _stack(event: Event) -> str | None:
    """A record's stack trace, read back from its raw line; a text record's is the lines
    after its first (a traceback folded into it), else its fields that hold one (zap's
    ``stacktrace``)."""
    if event.source == TEXT_SOURCE:
        held = [text for key in _STACK_KEYS if (text := _text(event.attrs.get(key)))]
        return event.raw.partition("\n")[2] or "\n".join(held) or None
    if event.source not in RECORD_SOURCES or not event.raw.startswith("{"):
        return None
    try:
        record = orjson.loads(event.raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    texts: list[str] = []
    error = record.get("error")
    if isinstance(error, dict):
        texts.extend(text for key in _STACK_KEYS if (text := _text(error.get(key))))
    texts.extend(text for key in _STACK_KEYS if (text := _text(record.get(key))))
    return "\n".join(texts) or None


def owner_of(event: Event, rules: Sequence[OwnerRule] = DEFAULT_RULES) -> Ownership | None:
    """The owner an event's evidence names, and how we know; None when nothing names one.

    Args:
        event: a failure.
        rules: the owner table (an operator's rules first, then the built-in table).

    Returns:
        The ownership, or None (a wrapper, or words no rule knows).
    """
    hint = event.owner_hint
    if hint is not None and hint != "unknown":
        if event.source in RECORD_SOURCES:
            return Ownership(hint, "stamped", "error.owner_layer", event.error_type)
        # An access log's 401 or 502 names the layer that answered, not why; a transition to a
        # failed state (provision_failed) says that the workflow gave up, usually because of
        # a failure elsewhere that names its cause.
        weak = (
            event.http_status is not None and event.http_method is not None
        ) or event.state_to is not None
        return Ownership(hint, "adapter", f"{event.source} adapter", event.error_type, weak)
    match = classify_evidence(evidence_of(event), rules)
    if (match is None or match.weak) and _has_stack(event):
        deeper = classify_evidence(evidence_of(event, with_stack=True), rules)
        if deeper is not None and not deeper.weak:
            match = deeper
    if match is None:
        return None
    return Ownership(match.owner_layer, "inferred", match.rule, match.quote, match.weak)


def says_why(event: Event) -> bool:
    """Whether a failure's words say more than that something failed: not a wrapper
    ("provision failed", "internal server error") and not an access record, whose status
    says only that a request failed."""
    if event.http_status is not None and event.http_method is not None:
        return False
    return not is_wrapper(event.message)


def fallback_owner(event: Event) -> str:
    """The owner a failure's layer gives when nothing names one (an ingress relaying its
    upstream's 500 or 503 gives ``api``: the upstream answered it)."""
    if event.layer == "ingress" and event.http_status in _RELAYED:
        return "api"
    return FALLBACK_OWNERS.get(event.layer, "unknown")
