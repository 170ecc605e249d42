"""nginx error logs, and linking an error line to the access line of its request.

Separate from ``_nginx_access``: the error log is nginx's own diagnostics (TLS, upstream
connections) in another format and another clock, and what links it to a request is a
question asked of a whole batch, after parsing.

Error log: ``2026/11/22 13:11:19 [error] 1234#1234: *5 MESSAGE, client: ..., server: ...,
request: "...", upstream: "...", host: "..."``, in the server's local time (read in its zone).
A message holding an unclosed quote (``FastCGI sent in stderr: "...`` with newlines) continues
on the following lines until the quote closes; those lines make one event. An error line cannot
name its request's ``$request_id``: :func:`link_errors_to_access` links it to the access line of
the same request afterwards, per batch.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Sequence
from datetime import tzinfo
from typing import Any, Final

from correlator.model import Event, Reject, content_hash, request_start_ns
from correlator.sources._nginx_request import SOURCE, clip, reject, request_line, service_name
from correlator.sources._time import parse_nginx_error_ns

__all__ = [
    "ERROR_HEAD",
    "ERROR_HEAD_BYTES",
    "LINK_GAP_S",
    "PendingRecord",
    "error_event",
    "link_errors_to_access",
    "request_key",
]

_NS: Final = 1_000_000_000
#: How far outside a request's interval an error line may lie and still be linked to it:
#: error-log times have whole seconds.
LINK_GAP_S: Final = 5.0

ERROR_HEAD = re.compile(
    r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[([a-z]+)\] (\d{1,10})#(\d{1,10}): (?:\*(\d{1,18}) )?",
    re.ASCII,
)
ERROR_HEAD_BYTES = re.compile(rb"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[")
_CONTEXT_KEY = re.compile(r", (client|server|request|subrequest|upstream|host|referrer): ")
# The start of "(111: Connection refused)". Not the whole: `\((\d{1,5}): ([^)]*)\)` tries
# every "(1: " against the rest of the message when no ")" follows, so a 256 KB line of them
# took 3 minutes (_errno finds the same in one pass).
_ERRNO_HEAD = re.compile(r"\((\d{1,5}): ", re.ASCII)
_WHILE: Final = " while "

_LEVELS: Final = {
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warn": "warning",
    "error": "error",
    "crit": "critical",
    "alert": "critical",
    "emerg": "critical",
}

#: Error-log messages the evidence classifies, first match wins: (pattern, error_type, owner).
#: Certificate and TLS failures belong to ``cert``; failing to reach the upstream at all
#: (refused, unroutable, timed out, none alive) is the ingress path's.
_ERROR_CLASSES: Final = tuple(
    (re.compile(pattern), error_type, owner)
    for pattern, error_type, owner in (
        (r"certificate has expired|certificate expired", "certificate_expired", "cert"),
        (r"certificate verify failed", "certificate_verify_failed", "cert"),
        (r"cannot load certificate", "certificate_load_failed", "cert"),
        (r"peer closed connection in SSL handshake", "ssl_handshake_closed", "cert"),
        (r"SSL_do_handshake\(\) failed|SSL handshaking", "ssl_handshake_failed", "cert"),
        (r"SSL_\w+\(\) failed|\(SSL:", "ssl_error", "cert"),
        (r"\(111: Connection refused\)", "connection_refused", "ingress"),
        (r"\(113: No route to host\)", "no_route_to_host", "ingress"),
        (r"no live upstreams", "no_live_upstreams", "ingress"),
        (r"upstream timed out|\(110: Connection timed out\)", "upstream_timed_out", "ingress"),
        (r"\(104: Connection reset by peer\)", "connection_reset", None),
        (r"upstream prematurely closed connection", "upstream_closed", None),
    )
)


#: Error-log messages about a client's request for a file that is missing or forbidden:
#: the 404s and 403s of the access log, which nginx also logs at ``[error]``.
_BENIGN: Final = re.compile(
    r'(?P<file_not_found>open\(\) "[^"\n]{0,4096}" failed \((?:2|20): )'
    r'|(?P<directory_index_forbidden>directory index of "[^"\n]{0,4096}" is forbidden)'
    r"|(?P<forbidden_by_rule>access forbidden by rule)"
)


@dataclasses.dataclass(slots=True)
class PendingRecord:
    """An error-log record whose message opened a quote that a later line closes."""

    line_no: int
    head: re.Match[str]  # of the first line, which the joined text starts with
    raws: list[bytes]
    texts: list[str]
    size: int
    quotes: int

    @property
    def closed(self) -> bool:
        """Whether the quotes are balanced: the record is complete."""
        return self.quotes % 2 == 0

    def add(self, raw: bytes) -> None:
        """Append a continuation line (valid UTF-8: the caller checked)."""
        text = raw.decode("utf-8").rstrip("\r")
        self.raws.append(raw)
        self.texts.append(text)
        self.size += len(raw) + 1
        self.quotes += text.count('"')

    def finish(self, origin: str, zone: tzinfo) -> Event | Reject:
        """The record's lines, joined with ``\\n``, as one event (see :func:`error_event`)."""
        text, raw = "\n".join(self.texts), b"\n".join(self.raws)
        return error_event(text, raw, self.line_no, origin, zone, self.head)


def error_event(
    text: str,
    raw: bytes,
    line_no: int,
    origin: str,
    zone: tzinfo,
    head: re.Match[str],
) -> Event | Reject:
    """One error-log record as an event, or a reject when its time cannot be read.

    Args:
        text: the record, decoded (its lines joined with ``\\n``).
        raw: the record as read, for the hash.
        line_no: the number of its first line.
        origin: where it comes from.
        zone: the server's time zone (error-log times carry none).
        head: :data:`ERROR_HEAD`'s match at the start of ``text``.

    Returns:
        The event or the reject.
    """
    stamp, nginx_level, pid, tid, connection = head.groups()
    try:
        ts_ns = parse_nginx_error_ns(stamp, zone=zone)
    except ValueError as exc:
        return reject(origin, line_no, f"has an unreadable error-log time: {exc}", raw)
    body = text[head.end() :]
    start = body.find(", client: ")
    message, context = (body, {}) if start < 0 else (body[:start], _context(body[start:]))
    attrs: dict[str, Any] = {"log": "error", "nginx_level": nginx_level, "pid": int(pid)}
    attrs["tid"] = int(tid)
    if connection:
        attrs["connection"] = int(connection)
    for key, value in context.items():
        attrs[key] = clip(value)
    if action := _action(message):
        attrs["action"] = action
    if errno := _errno(message):
        attrs["errno"], attrs["errno_text"] = errno
    ssl_error = _ssl_error(message)
    if ssl_error:
        attrs["ssl_error"] = clip(ssl_error)
    error_type, owner = next(
        ((kind, who) for pattern, kind, who in _ERROR_CLASSES if pattern.search(message)),
        (None, None),
    )
    level = _LEVELS.get(nginx_level, "info")
    if error_type is None and (benign := _BENIGN.search(message)) is not None:
        # nginx logs a client's request for a missing or forbidden file at [error]; it is the
        # access log's 404 or 403, not a failure of the ingress (nor a missing prerequisite).
        error_type = next(kind for kind, group in benign.groupdict().items() if group)
        level = "warning" if level in ("error", "critical") else level
    method, path, protocol = request_line(context.get("request", ""))
    if protocol:
        attrs["protocol"] = protocol
    return Event(
        ts_ns=ts_ns,
        layer="ingress",
        source=SOURCE,
        origin=origin,
        message=clip(" ".join(message.split())),
        raw=text,
        hash=content_hash(SOURCE, raw),
        service=service_name(context.get("server"), context.get("host")),
        level=level,
        http_method=method,
        http_path=path,
        owner_hint=owner,
        error_type=error_type,
        attrs=attrs,
    )


def _context(tail: str) -> dict[str, str]:
    """``, client: 127.0.0.1, server: api.local, request: "POST / HTTP/1.1", ...``.

    Values are cut at the next known key rather than at a quote, since nginx writes the
    request line and host into the error log unescaped.
    """
    keys = list(_CONTEXT_KEY.finditer(tail))
    context: dict[str, str] = {}
    for index, key in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(tail)
        value = tail[key.end() : end]
        if value.startswith('"'):
            close = value.rfind('"')
            value = value[1:close] if close > 0 else value[1:]
        else:
            value = value.split(", ", 1)[0]
        if value:
            context.setdefault(key[1], value)
    return context


def _action(message: str) -> str | None:
    """What nginx was doing: the text after the first `` while `` that no comma follows
    (``re.search(r" while ([^,]+)$", message)``, in one pass: that pattern scanned to the next
    comma from every `` while ``, quadratic in a message of them)."""
    start = message.find(_WHILE, message.rfind(",") + 1)
    if start < 0 or start + len(_WHILE) == len(message):
        return None
    return message[start + len(_WHILE) :]


def _errno(message: str) -> tuple[int, str] | None:
    """The first ``(111: Connection refused)`` of a message that a ``)`` closes, as (number,
    text), or None."""
    close = message.rfind(")")
    head = _ERRNO_HEAD.search(message, 0, close) if close > 0 else None
    if head is None:
        return None
    return int(head[1]), message[head.end() : message.index(")", head.end())]


def _ssl_error(message: str) -> str | None:
    """The text inside ``(SSL: ...)``, nested parentheses included."""
    start = message.find("(SSL: ")
    if start < 0:
        return None
    depth = 0
    for index in range(start, len(message)):
        char = message[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return message[start + 6 : index]
    return message[start + 6 :]


def link_errors_to_access(events: Sequence[Event], *, max_gap_s: float = LINK_GAP_S) -> list[Event]:
    """Give nginx error events the identifiers of the access line of the same request.

    An error line names the client and the request line but not ``$request_id``; the access
    line of that request, written when the request ends, carries it. An error event is linked to
    the access event with the same client, method and path whose request interval
    (``[end - request_time, end]``, or just ``end`` when the duration is unknown) is nearest to
    the error's time, if no more than ``max_gap_s`` away. The linked copy gains the access
    event's ``correlation_id``, ``attrs["request_id"]`` and ``attrs["linked_access_hash"]``.

    Args:
        events: one batch of events (any sources; only nginx ones are looked at).
        max_gap_s: how far outside the request interval an error may lie (clock granularity:
            error-log times have whole seconds).

    Returns:
        The events in the same order, linked error events replaced by linked copies.
    """
    slack_ns = round(max_gap_s * _NS)
    requests: dict[tuple[str, str, str], list[tuple[int, int, Event]]] = {}
    for event in events:
        key = request_key(event, "access")
        if key is not None:
            start_ns = request_start_ns(event.ts_ns, event.duration_s)
            requests.setdefault(key, []).append((event.ts_ns, start_ns, event))
    longest_ns: dict[tuple[str, str, str], int] = {}
    for key, entries in requests.items():
        entries.sort(key=lambda entry: entry[0])
        longest_ns[key] = max(end - start for end, start, _ in entries)
    linked: list[Event] = []
    for event in events:
        key = request_key(event, "error")
        entries = requests.get(key, []) if key is not None else []
        if key is None or not entries or event.correlation_id is not None:
            linked.append(event)
            continue
        first = bisect.bisect_left(entries, event.ts_ns - slack_ns, key=lambda entry: entry[0])
        best: tuple[int, int, Event] | None = None
        for index in range(first, len(entries)):
            end, start, access = entries[index]
            distance = abs(end - event.ts_ns)
            if end > event.ts_ns + slack_ns + longest_ns[key]:
                break
            if best is not None and best[0] == 0 and end >= event.ts_ns and distance >= best[1]:
                break  # ends are sorted: no later request holds the error and ends nearer
            gap = max(start - event.ts_ns, event.ts_ns - end, 0)
            # Among requests whose interval holds the error, the one ending nearest wins.
            if gap <= slack_ns and (best is None or (gap, distance) < best[:2]):
                best = (gap, distance, access)
        if best is None:
            linked.append(event)
            continue
        access = best[2]
        attrs = dict(event.attrs, linked_access_hash=access.hash)
        if "request_id" in access.attrs:
            attrs["request_id"] = access.attrs["request_id"]
        linked.append(dataclasses.replace(event, correlation_id=access.correlation_id, attrs=attrs))
    return linked


def request_key(event: Event, log: str) -> tuple[str, str, str] | None:
    """The request an nginx event of ``log`` (``access`` or ``error``) names, as the linker
    matches the two: ``(client, method, path)``; None for another event or one naming none."""
    if event.source != SOURCE or event.attrs.get("log") != log:
        return None
    client = event.attrs.get("client")
    if not (client and event.http_method and event.http_path):
        return None
    return str(client), event.http_method, event.http_path
