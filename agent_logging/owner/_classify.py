"""Which layer owns a failure: the owner table held against an exception or against text.

A wrapper error ("provisioning failed") says nothing about who must act; its innermost cause
usually does. Both entry points walk the causes innermost first and, for each, try the rules
in order; the first rule that matches the innermost cause any rule matches wins.

- :func:`classify` takes an exception object (at log time): an ``owner_layer`` attribute set
  on any exception of the chain wins (innermost first), then the table, then ``"unknown"``.
- :func:`classify_evidence` takes the text a record or log line carries (at correlation
  time, for evidence nobody stamped): its causes as written (``error.chain``), the exception
  lines of a stack trace (Python prints the innermost cause first, Java's ``Caused by:``
  last), the error's type and message, the record's own message, its HTTP status and exit
  code. It answers with the rule and the text it matched, so a verdict can quote it.

Text is looked at in bounded pieces (:data:`MAX_TEXT_CHARS` of each message; the head and
tail of a stack), so a multi-megabyte or binary error text costs no more than a long one.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent_logging._types import OWNER_LAYERS
from agent_logging.owner._rule import (
    Link,
    OwnerRule,
    errnos_in,
    exception_message,
    exit_codes_in,
)
from agent_logging.owner._table import DEFAULT_RULES
from agent_logging.redaction._secrets import redact_text

__all__ = [
    "MAX_CHAIN",
    "MAX_MESSAGE_CHARS",
    "MAX_TEXT_CHARS",
    "Evidence",
    "OwnerMatch",
    "classify",
    "classify_evidence",
    "error_info",
    "exception_chain",
    "is_wrapper",
    "stack_links",
]

#: The longest chain followed; a longer one (or a cycle) is cut, never an error.
MAX_CHAIN: Final = 32

#: Exception messages are cut to this many characters in :func:`error_info`, once redacted.
MAX_MESSAGE_CHARS: Final = 2048

#: How much of one piece of evidence text the rules read (a stack: this much of each end).
MAX_TEXT_CHARS: Final = 8192

#: How many exception lines of a stack trace are read.
_MAX_STACK_LINKS: Final = 16


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first, innermost last.

    Follows ``__cause__``, else ``__context__`` unless ``__suppress_context__`` is set, as
    Python's own traceback printing does. Stops at a cycle or after :data:`MAX_CHAIN`.

    Args:
        exc: the exception that was caught or logged.

    Returns:
        The chain; ``[exc]`` when it has no cause.
    """
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < MAX_CHAIN:
        chain.append(current)
        seen.add(id(current))
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return chain


def _explicit(exc: BaseException) -> str | None:
    try:
        layer = getattr(exc, "owner_layer", None)
    except Exception:  # noqa: BLE001 - a property of a third-party exception: never raise
        return None
    return layer if isinstance(layer, str) and layer in OWNER_LAYERS else None


def classify(
    exc: BaseException,
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
    *,
    service: str | None = None,
    layer: str | None = None,
) -> str:
    """The owner layer of a failure; never raises.

    Args:
        exc: the exception (usually the outermost wrapper).
        rules: the table to apply, in priority order.
        service: the service logging it (for rules that name services).
        layer: the layer logging it (for rules that name layers).

    Returns:
        An owner layer from :data:`agent_logging.OWNER_LAYERS`; ``"unknown"`` when
        neither an explicit attribute nor a rule applies.
    """
    innermost_first = exception_chain(exc)[::-1]
    for link in innermost_first:
        explicit = _explicit(link)
        if explicit is not None:
            return explicit
    for link in innermost_first:
        for rule in rules:
            if rule.matches(link, service=service, layer=layer):
                return rule.owner_layer
    return "unknown"


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or module == "builtins":
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def error_info(
    exc: BaseException,
    *,
    owner_layer: str | None = None,
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
    service: str | None = None,
    layer: str | None = None,
) -> dict[str, object]:
    """The record's ``error`` field (DESIGN §4) for an exception; never raises.

    Args:
        exc: the exception being logged.
        owner_layer: the caller's own verdict (``log.error(..., owner_layer="db")``); it
            wins over classification. An invalid one gives ``"unknown"`` and is kept under
            ``owner_layer_invalid``.
        rules: the owner table for classification.
        service: the service logging it (for rules that name services).
        layer: the layer logging it (for rules that name layers).

    Returns:
        ``{"type", "message", "owner_layer", "chain"}``: ``type`` module-qualified
        (``httpx.ConnectError``; builtins bare), ``message`` redacted (``redact_text``) and
        then cut to 2048 characters, and ``chain`` the ``{"type", "message"}`` of every
        exception, ``exc`` first and the innermost cause last.
    """
    # exc is the chain's first link: its message is redacted once, for both places.
    chain = [
        {"type": _type_name(link), "message": _shown_message(link)} for link in exception_chain(exc)
    ]
    info: dict[str, object] = {"type": chain[0]["type"], "message": chain[0]["message"]}
    if owner_layer is None:
        info["owner_layer"] = classify(exc, rules, service=service, layer=layer)
    elif isinstance(owner_layer, str) and owner_layer in OWNER_LAYERS:
        info["owner_layer"] = owner_layer
    else:
        info["owner_layer"] = "unknown"
        info["owner_layer_invalid"] = owner_layer
    info["chain"] = chain
    return info


def _shown_message(exc: BaseException) -> str:
    """The message as a record shows it: redacted, then cut. Cut first, a secret split by
    the cut (a URL's password without the "@" after it) would no longer be recognised."""
    return redact_text(exception_message(exc))[:MAX_MESSAGE_CHARS]


@dataclass(frozen=True, slots=True)
class Evidence:
    """The text of one failure as evidence carries it (no exception object at hand).

    Attributes:
        type: the error's type as written (``ssl.SSLCertVerificationError``,
            ``javax.net.ssl.SSLHandshakeException``, ``psycopg.errors.LockNotAvailable``).
        message: the error's message (or, for a plain log line, its text).
        chain: the causes as written, ``(type, message)`` each, outermost first and the
            innermost last (the record's ``error.chain``).
        stack: a stack trace as text (Python's or Java's).
        event: the record's own message, when it is not the error's (``provision failed``).
        status: an HTTP status the evidence reports.
        exit_code: a process exit code the evidence reports.
        service: the service that logged it.
        layer: the layer that logged it.
    """

    type: str | None = None
    message: str | None = None
    chain: tuple[Link, ...] = ()
    stack: str | None = None
    event: str | None = None
    status: int | None = None
    exit_code: int | None = None
    service: str | None = None
    layer: str | None = None


@dataclass(frozen=True, slots=True)
class OwnerMatch:
    """What the owner table says of a piece of evidence.

    Attributes:
        owner_layer: the owner layer the rule names.
        rule: the rule's name.
        quote: the text that matched (a message's words, a type, ``HTTP 401``...).
        weak: the rule rests on an HTTP status alone (see :attr:`OwnerRule.is_weak`).
    """

    owner_layer: str
    rule: str
    quote: str
    weak: bool = False


# An exception line of a stack trace: Python's last line ("ssl.SSLError: [SSL...] ..."), a
# chained one, Java's first line and its "Caused by: java.net.ConnectException: ...".
# A qualified name may end in anything (psycopg.errors.LockNotAvailable); a bare one must
# look like an exception's (KeyError), or every "Note: ..." line would be one.
_STACK_LINE: Final = re.compile(
    r"^(?:Caused by: )?([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+"
    r"|[A-Za-z_$][\w$]*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Timeout|Refused))"
    r"(?:: (.{0,2000}))?$",
    re.MULTILINE,
)


def stack_links(stack: str) -> list[Link]:
    """The exception lines of a stack trace as ``(type, message)``, innermost first.

    Python prints the innermost cause first ("The above exception was the direct cause of
    the following exception"); Java prints it last (``Caused by:``).

    Args:
        stack: the trace as text (only its first and last :data:`MAX_TEXT_CHARS` are read).

    Returns:
        At most 16 links.
    """
    if len(stack) > 2 * MAX_TEXT_CHARS:
        stack = f"{stack[:MAX_TEXT_CHARS]}\n{stack[-MAX_TEXT_CHARS:]}"
    links: list[Link] = [
        (m.group(1), m.group(2)) for m in _STACK_LINE.finditer(stack.replace("\r", ""))
    ]
    if "Caused by: " in stack:
        links.reverse()
    return links[:_MAX_STACK_LINKS]


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS]


def _links(evidence: Evidence) -> list[Link]:
    """The pieces of evidence text to try, innermost cause first, the record's words last."""
    links: list[Link] = [(t, _clip(m)) for t, m in reversed(evidence.chain)]
    if evidence.stack:
        links.extend(stack_links(evidence.stack))
    top = (evidence.type, _clip(evidence.message))
    if top not in links and (top[0] or top[1]):
        links.append(top)
    if evidence.event and evidence.event != evidence.message:
        links.append((None, _clip(evidence.event)))
    if not links and (evidence.status is not None or evidence.exit_code is not None):
        links.append((None, None))
    return links


def classify_evidence(
    evidence: Evidence, rules: Sequence[OwnerRule] = DEFAULT_RULES
) -> OwnerMatch | None:
    """The owner the table finds in the text of one failure; never raises.

    Args:
        evidence: the failure's text, status and exit code.
        rules: the table to apply, in priority order.

    Returns:
        The first rule's match on the innermost piece any rule matches, or None. A rule on
        the HTTP status alone is tried only when no rule matches the text (it is weak).
    """
    links = _links(evidence)
    weak: OwnerMatch | None = None
    prefilter = _prefilter(rules)
    for link in links:
        text = link[1] or ""
        # Read once per piece of text, when the first rule that needs them is reached.
        hits: set[int] | None = None
        filtered = False
        errnos: set[int] | None = None
        codes: set[int] | None = None
        for index, rule in enumerate(rules):
            if rule.message_patterns and prefilter is not None:
                if not filtered:
                    hits, filtered = prefilter.hits(text), True
                if hits is not None and index not in hits:
                    continue  # its patterns cannot match this text: no need to search it
            if rule.errnos and errnos is None:
                errnos = errnos_in(text)
            if rule.exit_codes and codes is None:
                codes = exit_codes_in(text)
            quote = rule.matches_link(
                link,
                status=evidence.status,
                exit_code=evidence.exit_code,
                service=evidence.service,
                layer=evidence.layer,
                errnos=errnos,
                codes=codes,
            )
            if quote is None:
                continue
            if rule.is_weak:
                weak = weak or OwnerMatch(rule.owner_layer, rule.name, quote, weak=True)
                continue
            return OwnerMatch(rule.owner_layer, rule.name, quote)
    return weak


class _Prefilter:
    """Which rules' patterns can match a text, in one pass: an RE2 set of every rule's
    alternation, a DFA that reads the text once (about 1 µs for a message, where trying the
    rules' patterns one by one takes 50-150 µs when none matches: the common case of a
    failure no rule knows, and of a wrapper).

    Only ASCII text is filtered: there RE2 and Python's ``re`` agree on every construct the
    tables use (``\\b``, ``\\w``, case folding); other text is searched rule by rule."""

    __slots__ = ("_indexes", "_set")

    def __init__(self, rules: Sequence[OwnerRule]) -> None:
        import re2  # the google-re2 package: a dependency of agent_logging

        options = re2.Options()
        options.case_sensitive = False
        options.never_capture = True
        options.log_errors = False  # its C++ logger writes to stderr
        options.max_mem = 64 << 20  # the DFA of ~200 alternatives needs more than the default
        self._set = re2.Set.SearchSet(options)
        self._indexes: list[int] = []
        for index, rule in enumerate(rules):
            if rule.message_patterns:
                self._set.Add("|".join(f"(?:{p})" for p in rule.message_patterns))
                self._indexes.append(index)
        self._set.Compile()

    def hits(self, text: str | None) -> set[int] | None:
        """The indexes of the rules whose patterns match ``text``; None: search them all."""
        if not text:
            return set()
        if not text.isascii():
            return None
        indexes = self._indexes
        return {indexes[i] for i in self._set.Match(text) or ()}


_PREFILTERS: dict[int, tuple[Sequence[OwnerRule], _Prefilter | None]] = {}
_PREFILTERS_LOCK: Final = threading.Lock()


def _prefilter(rules: Sequence[OwnerRule]) -> _Prefilter | None:
    """The prefilter of a table, built once per table (a tuple: a list may change under
    it); None when the table cannot have one (then every rule is searched)."""
    if not isinstance(rules, tuple):
        return None
    found = _PREFILTERS.get(id(rules))
    if found is not None and found[0] is rules:
        return found[1]
    try:
        built: _Prefilter | None = _Prefilter(rules)
    except Exception:  # noqa: BLE001 - no set (memory, a pattern RE2 refuses): search them all
        built = None
    with _PREFILTERS_LOCK:
        if len(_PREFILTERS) >= 16:
            _PREFILTERS.clear()
        _PREFILTERS[id(rules)] = (rules, built)
    return built


_WRAPPER: Final = re.compile(
    r"^\W{0,3}(?:(?:the |an? )?(?:\w+[ _-]){0,3}"
    r"(?:failed|failure|error|errored|aborted|unsuccessful)"
    r"|internal(?: server)? error|unexpected error|unknown error|unhandled (?:error|exception)"
    r"|an? (?:error|exception|failure) (?:has )?occurred|something went wrong"
    r"|(?:HTTP )?5\d\d(?: [\w ]{1,30})?)"
    r"(?:[ .!:,;-]{0,3}(?:see |check |for |after |with |in |on )[^\n]{0,80})?\W{0,3}$",
    re.IGNORECASE,
)


def is_wrapper(text: str | None) -> bool:
    """Whether a failure's message is generic: it says that something failed, not why
    ("provision failed", "internal server error", "job failed; see logs", "HTTP 500").

    Args:
        text: the message.

    Returns:
        True for a wrapper's words (and for no words at all).
    """
    if not text:
        return True
    return len(text) <= 160 and _WRAPPER.match(text.strip()) is not None
