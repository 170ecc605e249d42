"""Carriers: the current identifiers as HTTP headers, environment variables and SQL comments,
and back.

- HTTP: W3C ``traceparent`` (https://www.w3.org/TR/trace-context/) carries ``trace_id`` and the
  caller's ``span_id``; W3C ``baggage`` (https://www.w3.org/TR/baggage/) carries the five
  identifiers; ``X-Correlation-ID`` is for peers that know nothing else.
- Subprocesses: ``AGENT_LOGGING_<KEY>`` variables plus ``AGENT_LOGGING_TRACEPARENT``.
- SQL: a sqlcommenter comment (https://google.github.io/sqlcommenter/spec/): keys sorted, values
  URL-encoded then single-quoted, so the comment can never close early or break out of SQL.

Parsing never raises on hostile input: a bad value is left out and the problem is reported to
the caller, who decides whether to log it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final
from urllib.parse import quote, unquote

from agent_logging import _environ
from agent_logging.redaction._secrets import redact_text
from agent_logging.schema import IDENTIFIER_KEYS, id_problem

__all__ = [
    "CORRELATION_HEADER",
    "env_for_child",
    "host_allowed",
    "ids_from_env",
    "parse_headers",
    "render_headers",
    "sql_comment_for",
]

CORRELATION_HEADER: Final = "X-Correlation-ID"

#: W3C baggage limits: 8192 bytes for the header, 180 list members.
_BAGGAGE_MAX_BYTES: Final = 8192
_BAGGAGE_MAX_MEMBERS: Final = 180
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def render_headers(ids: Mapping[str, str]) -> dict[str, str]:
    """Outbound headers for ``ids`` (already validated values).

    Returns:
        ``traceparent`` when a trace is known, ``baggage`` with the identifiers, and
        ``X-Correlation-ID`` when a correlation id is known.
    """
    headers: dict[str, str] = {}
    traceparent = _traceparent(ids)
    if traceparent:
        headers["traceparent"] = traceparent
    members = [f"{key}={quote(ids[key], safe='')}" for key in IDENTIFIER_KEYS if key in ids]
    if members:
        headers["baggage"] = ",".join(members)
    if "correlation_id" in ids:
        headers[CORRELATION_HEADER] = ids["correlation_id"]
    return headers


def _traceparent(ids: Mapping[str, str]) -> str | None:
    trace_id, span_id = ids.get("trace_id"), ids.get("span_id")
    if trace_id and span_id:
        return f"00-{trace_id}-{span_id}-01"
    return None


def _header_items(headers: object, problems: list[str]) -> Iterator[tuple[str, str]]:
    """``(lower-case name, value)`` for each header; what is not a header is left out.

    A header with the value None is absent. Anything that is not a mapping or an iterable of
    ``(name, value)`` pairs gives one problem, and nothing.
    """
    if isinstance(headers, str | bytes | bytearray) or not isinstance(headers, Iterable):
        problems.append(
            f"headers must be a mapping or (name, value) pairs, not {type(headers).__name__}"
        )
        return
    malformed = 0
    try:
        items = headers.items() if isinstance(headers, Mapping) else headers
        for item in items:
            if not isinstance(item, tuple | list) or len(item) != 2:
                malformed += 1
                continue
            name, value = item
            if value is None:
                continue
            yield _text(name).lower(), _text(value)
    except Exception as exc:  # noqa: BLE001 - hostile input: a broken mapping or iterator
        problems.append(f"headers could not be read: {type(exc).__name__}")
    if malformed:
        problems.append(f"{malformed} header item(s) are not (name, value) pairs; ignored")


def _text(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return value.decode("latin-1")  # ASGI header bytes (RFC 9110 §5.5: ISO-8859-1)
    return value if isinstance(value, str) else str(value)


def parse_headers(headers: object) -> tuple[dict[str, str], list[str]]:
    """Read identifiers from request headers.

    Args:
        headers: a mapping or an iterable of (name, value) pairs, str or bytes (ASGI scopes
            give bytes). Anything else, or an item that is not a pair, is a problem, not an
            error.

    Returns:
        ``(ids, problems)``: the acceptable identifiers (``span_id`` is the caller's span) and
        one sentence per value that was left out.
    """
    ids: dict[str, str] = {}
    problems: list[str] = []
    correlation_header: str | None = None
    for name, value in _header_items(headers, problems):
        if name == "traceparent":
            _parse_traceparent(value, ids, problems)
        elif name == "baggage":
            _parse_baggage(value, ids, problems)
        elif name == "x-correlation-id":
            correlation_header = value.strip()
    if correlation_header is not None and "correlation_id" not in ids:
        reason = id_problem("correlation_id", correlation_header)
        if reason is None:
            ids["correlation_id"] = correlation_header
        else:
            problems.append(f"{CORRELATION_HEADER} header: correlation_id {reason}")
    return ids, problems


def _shown(value: str) -> str:
    """A header value as a problem quotes it: redacted before it is cut to 80 characters, so
    that a cut cannot leave part of a secret no pattern recognises any more."""
    return repr(redact_text(value)[:80])


def _parse_traceparent(value: str, ids: dict[str, str], problems: list[str]) -> None:
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None:
        problems.append(f"traceparent header is malformed: {_shown(value)}")
        return
    version, trace_id, span_id, _flags, rest = match.groups()
    # Trace-context §3.2.2: version ff is invalid; version 00 has no trailing fields.
    if version == "ff" or (version == "00" and rest):
        problems.append(f"traceparent header has an invalid version: {_shown(value)}")
        return
    for key, candidate in (("trace_id", trace_id), ("span_id", span_id)):
        reason = id_problem(key, candidate)
        if reason is not None:
            problems.append(f"traceparent header: {key} {reason}")
            return
    ids["trace_id"], ids["span_id"] = trace_id, span_id


def _parse_baggage(value: str, ids: dict[str, str], problems: list[str]) -> None:
    if len(value.encode("utf-8", "replace")) > _BAGGAGE_MAX_BYTES:
        problems.append(f"baggage header is over {_BAGGAGE_MAX_BYTES} bytes; ignored")
        return
    members = value.split(",")
    if len(members) > _BAGGAGE_MAX_MEMBERS:
        problems.append(f"baggage header has over {_BAGGAGE_MAX_MEMBERS} members; ignored")
        return
    for member in members:
        # list-member = key OWS "=" OWS value *( OWS ";" OWS property )
        key, sep, rest = member.partition("=")
        key = key.strip()
        if not sep or key not in IDENTIFIER_KEYS:
            continue  # other vendors' entries are theirs, not ours
        raw = rest.split(";", 1)[0].strip()
        # Invalid UTF-8 after decoding becomes U+FFFD, which the identifier check refuses.
        decoded = unquote(raw, errors="replace") if "%" in raw else raw
        reason = id_problem(key, decoded)
        if reason is None:
            ids[key] = decoded
        else:
            problems.append(f"baggage header: {key} {reason}")


def env_for_child(ids: Mapping[str, str]) -> dict[str, str]:
    """``AGENT_LOGGING_*`` variables that hand ``ids`` to a subprocess."""
    variables = {_environ.IDENTIFIERS[key]: ids[key] for key in IDENTIFIER_KEYS if key in ids}
    traceparent = _traceparent(ids)
    if traceparent:
        variables[_environ.TRACEPARENT] = traceparent
    return variables


def ids_from_env(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The inverse of :func:`env_for_child`: ``(ids, problems)``."""
    ids: dict[str, str] = {}
    problems: list[str] = []
    for key, name in _environ.IDENTIFIERS.items():
        value = environ.get(name)
        if value is None or value == "":
            continue
        reason = id_problem(key, value)
        if reason is None:
            ids[key] = value
        else:
            problems.append(f"{name}: {key} {reason}")
    traceparent = environ.get(_environ.TRACEPARENT)
    if traceparent:
        _parse_traceparent(traceparent, ids, problems)
    return ids, problems


def sql_comment_for(ids: Mapping[str, str]) -> str:
    """A sqlcommenter comment for ``ids``, or ``""`` when there is nothing to say.

    Values are URL-encoded with nothing left safe but unreserved characters, so ``'``, ``*``,
    ``/`` and newlines cannot appear raw; the comment is safe to append to any statement.
    """
    pairs = {key: ids[key] for key in IDENTIFIER_KEYS if key in ids}
    traceparent = _traceparent(ids)
    if traceparent:
        pairs["traceparent"] = traceparent
    if not pairs:
        return ""
    body = ",".join(
        f"{quote(key, safe='')}='{quote(value, safe='')}'" for key, value in sorted(pairs.items())
    )
    return f"/*{body}*/"


def _split_pattern(pattern: str) -> tuple[str, int | None]:
    pattern = pattern.strip().lower()
    if pattern.startswith("["):  # "[::1]:8080"
        host, _, rest = pattern[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif pattern.count(":") == 1:  # "host:port"; more colons is a bare IPv6 address
        host, _, port = pattern.partition(":")
    else:
        host, port = pattern, ""
    return host.rstrip("."), int(port) if port.isdigit() else None


def host_allowed(host: str, port: int | None, patterns: Iterable[str]) -> bool:
    """Whether identifiers may be sent to ``host``.

    Patterns are ``host``, ``host:port``, ``[v6]:port`` or ``*.suffix`` (any subdomain of
    ``suffix``, not ``suffix`` itself); matching is case-insensitive. No pattern, no
    propagation: baggage must not leak to third parties that nobody allowed.
    """
    host = host.strip("[]").lower().rstrip(".")
    for pattern in patterns:
        name, pattern_port = _split_pattern(pattern)
        if pattern_port is not None and port is not None and pattern_port != port:
            continue
        if (name.startswith("*.") and host.endswith(name[1:])) or host == name:
            return True
    return False
