"""LogQL built from values, with escaping that cannot be talked out of.

Identifiers pasted by an operator end up inside LogQL queries sent to Loki. A value is never
spliced into a query as text: it becomes a Go string literal (``"..."``) escaped by
:func:`string_literal`, which Loki's lexer (Go ``text/scanner`` + ``strconv.Unquote``) reads
back to exactly the same value, whatever quotes, backslashes, braces, pipes, backticks or
newlines it holds. Label names cannot be quoted in LogQL, so they are checked against the
Prometheus label-name syntax instead and refused with :class:`~correlator.errors.QueryError`.

Strategy for "everything about any of these identifiers" (:func:`query_for`): one query whose
pipeline ends in a label-filter expression joined with ``or``::

    {service_name=~".+"} | allocation_id="a-9" or correlation_id="c-1"

LogQL label filters may be chained with ``and``/``or`` (Loki docs, "Label filter
expression"), and they see stream labels and structured metadata alike, which is where
``agent_logging`` ships the identifiers (DESIGN §5). One query keeps paging by time simple and
returns each entry once even when it carries several of the identifiers. Records shipped
without structured metadata (by a collector that puts everything in the line) are not found by
label filters; for those a ``| json`` stage can be added to the base query by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from agent_logging.schema import CONTEXT_KEYS, SERVICE_LABEL
from correlator.errors import QueryError

__all__ = [
    "DEFAULT_BASE_SELECTOR",
    "LABEL_NAME_RE",
    "metadata_filter",
    "query_for",
    "selector",
    "string_literal",
]

#: Prometheus' label-name syntax, the only one LogQL accepts unquoted.
LABEL_NAME_RE: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

#: Every stream that has a service name: LogQL requires at least one matcher that does not
#: match the empty string, and ``agent_logging`` always sets ``service_name``.
DEFAULT_BASE_SELECTOR: Final = f'{{{SERVICE_LABEL}=~".+"}}'

# Go's strconv escapes for the control characters that have a short form; the rest of C0 and
# DEL are written as \xNN (valid UTF-8 once decoded, unlike \x80-\xff).
_SHORT_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}
# Characters a literal can hold unescaped: printable ASCII except the two that end or escape it.
_PLAIN: Final = re.compile(r"[ !#-\[\]-~]*")


def string_literal(value: str) -> str:
    """Quote a value as a LogQL (Go) double-quoted string literal.

    ``\\`` and ``"`` are backslash-escaped, control characters use Go's short escapes
    (``\\n``, ``\\t``, ...) or ``\\xNN``, other non-printable characters ``\\uNNNN`` /
    ``\\UNNNNNNNN``; printable non-ASCII text is kept as UTF-8, as ``strconv.Quote`` does.

    Args:
        value: any text.

    Returns:
        The literal, quotes included, e.g. ``"a\\"b"``.

    Raises:
        QueryError: the value holds a lone surrogate, which no UTF-8 query can carry.
    """
    if _PLAIN.fullmatch(value):
        return f'"{value}"'
    out = ['"']
    for char in value:
        code = ord(char)
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            # strconv.Unquote refuses \uD800-\uDFFF and UTF-8 cannot encode them.
            raise QueryError(f"value holds a lone surrogate U+{code:04X}; it cannot be queried")
        elif char.isprintable():
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _label_name(name: str) -> str:
    if not isinstance(name, str) or not LABEL_NAME_RE.fullmatch(name):
        raise QueryError(
            f"{name!r} is not a valid label name: LogQL label names match [a-zA-Z_][a-zA-Z0-9_]*"
        )
    return name


def _value(name: str, value: str) -> str:
    if not isinstance(value, str):
        raise QueryError(f"the value of {name} must be a string, got {type(value).__name__}")
    return string_literal(value)


def selector(**matchers: str) -> str:
    """Build a stream selector of equality matchers.

    Args:
        **matchers: label name to value, e.g. ``service_name="api"``; kept in the given order.

    Returns:
        e.g. ``{service_name="api", layer="node"}``.

    Raises:
        QueryError: no matchers (Loki needs one that is not empty-compatible), an empty value,
            an invalid label name, or a value that cannot be quoted.
    """
    if not matchers:
        raise QueryError("a stream selector needs at least one matcher")
    parts = []
    for name, value in matchers.items():
        _label_name(name)
        if value == "":
            raise QueryError(
                f"selector value for {name} is empty; it would match every stream without it"
            )
        parts.append(f"{name}={_value(name, value)}")
    return "{" + ", ".join(parts) + "}"


def metadata_filter(key: str, value: str) -> str:
    """Build a label-filter stage matching a label or structured-metadata value exactly.

    Args:
        key: the label or metadata name, e.g. ``allocation_id``.
        value: the value to match; any text, escaped.

    Returns:
        e.g. ``| allocation_id="a-9"``.

    Raises:
        QueryError: an invalid label name, or a value that cannot be quoted.
    """
    return f"| {_label_name(key)}={_value(key, value)}"


def query_for(ids: Mapping[str, str], *, base_selector: str = DEFAULT_BASE_SELECTOR) -> str:
    """Build one log query for entries carrying any of the given identifiers.

    Args:
        ids: identifier key (``allocation_id``, ``correlation_id``, ..., ``trace_id``) to value.
        base_selector: the stream selector (and any stages) the filter is appended to; it is
            trusted text, written by the operator, not built from identifier values.

    Returns:
        e.g. ``{service_name=~".+"} | allocation_id="a-9" or node_id="n-17"``.

    Raises:
        QueryError: no identifiers, an unknown key, an empty value, or a value that cannot be
            quoted.
    """
    if not ids:
        raise QueryError("query_for needs at least one identifier")
    terms = []
    for key, value in ids.items():
        if key not in CONTEXT_KEYS:
            raise QueryError(
                f"unknown identifier key {key!r}; expected one of {', '.join(CONTEXT_KEYS)}"
            )
        if value == "":
            # An absent label reads as "" in LogQL: the filter would match everything without it.
            raise QueryError(f"{key} is empty; an empty value would match every entry without it")
        terms.append(f"{key}={_value(key, value)}")
    return f"{base_selector} | {' or '.join(terms)}"
