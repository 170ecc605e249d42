"""nginx evidence: access logs (a JSON ``log_format`` or ``combined`` + ``$request_id``) and the
error log, told apart line by line.

Access log, JSON (``log_format NAME escape=json '{...}'``; without ``escape=json`` nginx writes
its default ``\\xHH`` escapes, which are read too): one object per line. Accepted field names
(the first present wins; ``""`` and ``"-"`` count as absent):

- time: ``msec`` (``1795353079.123``), ``time_iso8601``, ``time_local``, ``timestamp``,
  ``@timestamp``, ``time``, ``ts``;
- ``status`` (required), ``request_method``/``method``, ``request_uri``/``uri``/``path`` or
  ``request`` (the request line), ``server_protocol``/``protocol``;
- ``request_id``/``req_id``, ``http_x_correlation_id``/``x_correlation_id``/``correlation_id``,
  ``http_traceparent``/``traceparent``, ``http_baggage``/``baggage``;
- ``remote_addr``/``client_addr``/``client``, ``remote_user``, ``request_time``,
  ``upstream_status``, ``upstream_addr``, ``upstream_response_time``, ``body_bytes_sent``/
  ``bytes_sent``, ``http_user_agent``/``user_agent``, ``ssl_protocol``, ``server_name``,
  ``http_host``/``host``.

Access log, text: nginx's ``combined`` (or ``common``) format, optionally followed by
``$request_id`` (quoted or bare) and then further fields, each quoted or bare: ``key=value``
tokens (``rid``, ``rt``, ``us``/``ups``, ``ua``/``upstream``, ``urt``, ``cid``, or the nginx
variable names: ``rt=0.012 us=502 ua=127.0.0.1:8001 ...``), or bare values recognised by
shape: an HTTP status list (``502`` or ``502, 504``) is ``$upstream_status``, the first duration
(``0.012``) ``$request_time`` and the second ``$upstream_response_time``, ``host:port`` or
``unix:...`` ``$upstream_addr``. Quoted strings use
nginx's access-log escaping (``"`` as ``\\x22``, ``\\`` as ``\\x5C``, bytes outside printable ASCII
as ``\\xHH``).

Identifiers: ``correlation_id`` comes from baggage, else the ``X-Correlation-ID`` header, else
``$request_id`` (the rules of :func:`agent_logging._propagation.parse_headers`, which the API
applies to the same headers); values that fail :func:`agent_logging._ids.problem` are left out
and named in ``attrs["rejected_ids"]``.

Error log: ``2026/11/22 13:11:19 [error] 1234#1234: *5 MESSAGE, client: ..., server: ...,
request: "...", upstream: "...", host: "..."``, in the server's local time (``tz_offset_s``).
A message holding an unclosed quote (``FastCGI sent in stderr: "...`` with newlines) continues
on the following lines until the quote closes; those lines make one event. An error line cannot
name its request's ``$request_id``: :func:`link_errors_to_access` links it to the access line of
the same request afterwards, per batch.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import orjson

from agent_logging._ids import problem
from agent_logging._propagation import parse_headers
from correlator.model import MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources._time import (
    parse_epoch_seconds_ns,
    parse_nginx_error_ns,
    parse_nginx_local_ns,
    parse_rfc3339_ns,
)

__all__ = ["link_errors_to_access", "parse"]

_SOURCE: Final = "nginx"
_NS: Final = 1_000_000_000
_MAX_ATTR_CHARS: Final = 512

_ERROR_HEAD = re.compile(
    r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[([a-z]+)\] (\d{1,10})#(\d{1,10}): (?:\*(\d{1,18}) )?",
    re.ASCII,
)
_ERROR_HEAD_BYTES = re.compile(rb"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[")
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_COMBINED = re.compile(
    rf"(\S+) \S+ (\S+) \[([^\]]+)\] {_QUOTED} (\d{{3}}) (\d+|-)(?: {_QUOTED} {_QUOTED})?(.*)"
)
_COMBINED_BYTES = re.compile(rb"\S+ \S+ \S+ \[\d\d/[A-Za-z]{3}/\d{4}:")
_TOKEN = re.compile(rf'\s*(?:{_QUOTED}|([^\s"]+))')
_REQUEST_LINE = re.compile(r"([A-Z][A-Z_-]{0,31}) (\S+)(?: (HTTP/\d(?:\.\d)?))?")
_CONTEXT_KEY = re.compile(r", (client|server|request|subrequest|upstream|host|referrer): ")
_ERRNO = re.compile(r"\((\d{1,5}): ([^)]*)\)", re.ASCII)
_ACTION = re.compile(r" while ([^,]+)$")
_COUNT = re.compile(r"\d{1,18}", re.ASCII)  # fits DuckDB's BIGINT (and JSON readers' int64)
_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")
_ESCAPE_RUN = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+")
_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", re.ASCII)
_STATUS_LIST = re.compile(r"\d{3}(?:\s*[,:]\s*\d{3})*")
_DURATION = re.compile(r"\d+\.\d+(?:\s*[,:]\s*(?:\d+\.\d+|-))*")
_ADDRESS = re.compile(r"(?:unix:\S+|\[?[0-9A-Za-z.:_-]+\]?:\d+)(?:\s*[,:]\s*\S+)*")

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

_TIME_FIELDS: Final = (
    "msec",
    "time_iso8601",
    "time_local",
    "timestamp",
    "@timestamp",
    "time",
    "ts",
)

#: ``key=value`` tokens after ``$request_id`` in a text access line: field to accepted keys.
_EXTRA_KEYS: Final = {
    key: field
    for field, keys in (
        ("request_id", ("request_id", "rid")),
        ("request_time", ("request_time", "rt")),
        ("upstream_status", ("upstream_status", "us", "ups")),
        ("upstream_addr", ("upstream_addr", "upstream", "ua")),
        ("upstream_response_time", ("upstream_response_time", "urt")),
        (
            "x_correlation_id",
            ("http_x_correlation_id", "x_correlation_id", "correlation_id", "cid"),
        ),
        ("traceparent", ("traceparent",)),
        ("host", ("host",)),
        ("server_name", ("server_name",)),
    )
    for key in keys
}


def parse(
    lines: Iterable[bytes], origin: str, *, tz_offset_s: float = 0.0
) -> Iterator[Event | Reject]:
    """Read nginx access and error logs, one event per line (per record for multi-line errors).

    Args:
        lines: raw lines without their ``\\n``, numbered from 1.
        origin: where they come from (a path, ``http``).
        tz_offset_s: the server's UTC offset, for error-log times (which carry none).

    Returns:
        An iterator of events and, for lines that cannot be read, rejects naming the line and
        the problem. It never raises on bad input.
    """
    pending: _Pending | None = None
    for line_no, raw in enumerate(lines, 1):
        if pending is not None:
            if _continues(pending, raw):
                pending.add(raw)
                if pending.closed:
                    yield pending.finish(origin, tz_offset_s)
                    pending = None
                continue
            yield pending.finish(origin, tz_offset_s)
            pending = None
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            yield _reject(
                origin, line_no, f"is {len(raw):,} bytes; the limit is {MAX_LINE_BYTES:,}", raw
            )
            continue
        try:
            text = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            reason = f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
            yield _reject(origin, line_no, reason, raw)
            continue
        head = _ERROR_HEAD.match(text)
        if head is not None and text.count('"') % 2:
            pending = _Pending(line_no, head, [raw], [text], len(raw), text.count('"'))
            continue
        yield _read_line(text, raw, line_no, origin, tz_offset_s, head)
    if pending is not None:
        yield pending.finish(origin, tz_offset_s)


def _read_line(
    text: str,
    raw: bytes,
    line_no: int,
    origin: str,
    tz_offset_s: float,
    head: re.Match[str] | None,
) -> Event | Reject:
    if text.lstrip()[:1] in ("{", "["):
        return _access_json(text, raw, line_no, origin)
    if head is not None:
        return _error(text, raw, line_no, origin, tz_offset_s, head)
    combined = _COMBINED.fullmatch(text)
    if combined is not None:
        return _access_combined(combined, text, raw, line_no, origin)
    return _reject(
        origin,
        line_no,
        "is neither an nginx access-log line (JSON or combined) nor an error-log line",
        raw,
    )


@dataclasses.dataclass(slots=True)
class _Pending:
    """An error-log record whose message opened a quote that a later line closes."""

    line_no: int
    head: re.Match[str]  # of the first line, which the joined text starts with
    raws: list[bytes]
    texts: list[str]
    size: int
    quotes: int

    @property
    def closed(self) -> bool:
        return self.quotes % 2 == 0

    def add(self, raw: bytes) -> None:
        text = raw.decode("utf-8").rstrip("\r")
        self.raws.append(raw)
        self.texts.append(text)
        self.size += len(raw) + 1
        self.quotes += text.count('"')

    def finish(self, origin: str, tz_offset_s: float) -> Event | Reject:
        text, raw = "\n".join(self.texts), b"\n".join(self.raws)
        return _error(text, raw, self.line_no, origin, tz_offset_s, self.head)


def _continues(pending: _Pending, raw: bytes) -> bool:
    """Whether ``raw`` continues the pending multi-line error message."""
    if pending.size + len(raw) + 1 > MAX_LINE_BYTES:
        return False
    if (
        _ERROR_HEAD_BYTES.match(raw)
        or _COMBINED_BYTES.match(raw)
        or raw.lstrip()[:1] in (b"{", b"[")
    ):
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _reject(origin: str, line_no: int, reason: str, raw: bytes) -> Reject:
    excerpt = raw[:800].decode("utf-8", "replace")[:200]
    return Reject(_SOURCE, origin, line_no, f"line {line_no} {reason}", excerpt)


def _unescape(value: str) -> str:
    """Undo nginx's access-log escaping (``\\xHH`` for a byte)."""
    if "\\x" not in value:
        return value
    data = _ESCAPE.sub(lambda match: bytes([int(match[1], 16)]), value.encode("utf-8"))
    return data.decode("utf-8", "backslashreplace")


def _json_escape(run: re.Match[str]) -> str:
    """A run of ``\\xHH`` escapes as the JSON string content of the bytes they stand for."""
    data = bytes.fromhex(run[0].replace("\\x", ""))
    return orjson.dumps(data.decode("utf-8", "backslashreplace")).decode()[1:-1]


def _clip(value: str) -> str:
    return value if len(value) <= _MAX_ATTR_CHARS else value[: _MAX_ATTR_CHARS - 1] + "…"


def _service(*candidates: str | None) -> str:
    """The first host name among ``candidates`` (port dropped); addresses such as the
    ``0.0.0.0:443`` nginx names before a TLS handshake picked a server are not services."""
    for candidate in candidates:
        if candidate:
            name = re.sub(r":\d+$", "", candidate)
            if _SERVICE.fullmatch(name) and re.search("[A-Za-z]", name):
                return name
    return "nginx"


def _request_line(request: str) -> tuple[str | None, str | None, str | None]:
    match = _REQUEST_LINE.fullmatch(request)
    if match is None:
        return None, None, None
    method, target, protocol = match.groups()
    return method, target.split("?", 1)[0], protocol


def _identifiers(fields: Mapping[str, str | None], attrs: dict[str, Any]) -> dict[str, str]:
    """Identifiers from the request headers nginx logged, by ``parse_headers``'s rules.

    Baggage wins over ``X-Correlation-ID``, which wins over ``$request_id``. Refused values are
    noted in ``attrs["rejected_ids"]`` by nginx variable name.
    """
    ids: dict[str, str] = {}
    rejected: dict[str, str] = {}
    for field, header, variable in (
        ("traceparent", "traceparent", "http_traceparent"),
        ("baggage", "baggage", "http_baggage"),
        ("x_correlation_id", "x-correlation-id", "http_x_correlation_id"),
    ):
        value = fields.get(field)
        if not value:
            continue
        try:
            found, problems = parse_headers({header: value})
        except ValueError:  # parse_headers raises on %-escapes that are not UTF-8
            found, problems = {}, [f"{header} header is not valid percent-encoded UTF-8"]
        for key, candidate in found.items():
            ids.setdefault(key, candidate)
        if problems:
            rejected[variable] = "; ".join(problems)
    request_id = fields.get("request_id")
    if request_id:
        attrs["request_id"] = _clip(request_id)
        reason = problem("correlation_id", request_id)
        if reason is not None:
            rejected["request_id"] = f"correlation_id {reason}"
        elif "correlation_id" not in ids:
            ids["correlation_id"] = request_id
    if rejected:
        attrs["rejected_ids"] = rejected
    if "span_id" in ids:  # the caller's span (traceparent's parent-id), not one of nginx's
        attrs["parent_span_id"] = ids.pop("span_id")
    return ids


def _access_event(
    ts_ns: int,
    fields: dict[str, str | None],
    status: int,
    raw: bytes,
    text: str,
    origin: str,
    log_format: str,
) -> Event:
    method, path, protocol = fields.get("method"), fields.get("path"), fields.get("protocol")
    request = fields.get("request")
    if request and not (method and path):
        method, path, protocol = _request_line(request)
    elif path:
        path = path.split("?", 1)[0]
    attrs: dict[str, Any] = {"log": "access", "format": log_format}
    ids = _identifiers(fields, attrs)
    for key in ("client", "remote_user", "upstream_status", "upstream_addr"):
        if value := fields.get(key):
            attrs[key] = _clip(value)
    if value := fields.get("upstream_response_time"):
        attrs["upstream_response_time_s"] = _clip(value)
    duration_s = _float(fields.get("request_time"))
    if duration_s is not None:
        attrs["request_time_s"] = duration_s
    if (sent := fields.get("bytes_sent")) and _COUNT.fullmatch(sent):
        attrs["bytes_sent"] = int(sent)
    for key in ("user_agent", "ssl_protocol", "host"):
        if value := fields.get(key):
            attrs[key] = _clip(value)
    if protocol:
        attrs["protocol"] = protocol
    if request and not method:
        attrs["request"] = _clip(request)
    level, owner, error_type = "info", None, None
    if status >= 500:
        level, error_type = "error", f"HTTP {status}"
        owner = "ingress" if status in (502, 504) else None
    elif status >= 400:
        level, error_type = "warning", f"HTTP {status}"
        owner = "api_auth" if status in (401, 403) else None
    summary = f"{method} {path} {status}" if method and path else f"{request or '-'} {status}"
    return Event(
        ts_ns=ts_ns,
        layer="ingress",
        source=_SOURCE,
        origin=origin,
        message=_clip(summary),
        raw=text,
        hash=content_hash(_SOURCE, raw),
        service=_service(fields.get("server_name"), fields.get("host")),
        level=level,
        correlation_id=ids.get("correlation_id"),
        allocation_id=ids.get("allocation_id"),
        node_id=ids.get("node_id"),
        node_instance_id=ids.get("node_instance_id"),
        workflow_id=ids.get("workflow_id"),
        trace_id=ids.get("trace_id"),
        http_method=method,
        http_path=path,
        http_status=status,
        duration_s=duration_s,
        owner_hint=owner,
        error_type=error_type,
        attrs=attrs,
    )


def _float(value: str | None) -> float | None:
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


_JSON_FIELDS: Final = {
    "method": ("request_method", "method"),
    "path": ("request_uri", "uri", "path"),
    "request": ("request",),
    "protocol": ("server_protocol", "protocol"),
    "request_id": ("request_id", "req_id"),
    "x_correlation_id": ("http_x_correlation_id", "x_correlation_id", "correlation_id"),
    "traceparent": ("http_traceparent", "traceparent"),
    "baggage": ("http_baggage", "baggage"),
    "client": ("remote_addr", "client_addr", "client"),
    "remote_user": ("remote_user",),
    "request_time": ("request_time",),
    "upstream_status": ("upstream_status",),
    "upstream_addr": ("upstream_addr",),
    "upstream_response_time": ("upstream_response_time",),
    "bytes_sent": ("body_bytes_sent", "bytes_sent"),
    "user_agent": ("http_user_agent", "user_agent"),
    "ssl_protocol": ("ssl_protocol",),
    "server_name": ("server_name",),
    "host": ("http_host", "host"),
}
#: JSON key to (field, rank): the first name listed for a field wins when several are present.
_JSON_NAMES: Final = {
    name: (field, rank) for field, names in _JSON_FIELDS.items() for rank, name in enumerate(names)
}


def _scalar(value: object) -> str | None:
    if isinstance(value, str):
        return None if value in ("", "-") else value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _access_json(text: str, raw: bytes, line_no: int, origin: str) -> Event | Reject:
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # A JSON log_format without escape=json gets nginx's default escaping (\x22): JSON
        # that is invalid only for that is read after turning the escapes into JSON ones.
        if "\\x" not in text:
            return _reject(origin, line_no, f"is not valid JSON: {exc}", raw)
        try:
            obj = orjson.loads(_ESCAPE_RUN.sub(_json_escape, text))
        except orjson.JSONDecodeError:
            return _reject(origin, line_no, f"is not valid JSON: {exc}", raw)
    if not isinstance(obj, dict):
        return _reject(origin, line_no, f"is a JSON {type(obj).__name__}, not an object", raw)
    ts_ns: int | None = None
    for name in _TIME_FIELDS:
        value = _scalar(obj.get(name))
        if value is None:
            continue
        try:
            ts_ns = _json_time(name, value)
        except ValueError as exc:
            return _reject(origin, line_no, f"has an unreadable {name!r}: {exc}", raw)
        break
    if ts_ns is None:
        return _reject(
            origin, line_no, f"has no time field (one of {', '.join(_TIME_FIELDS)})", raw
        )
    status_text = _scalar(obj.get("status"))
    if status_text is None:
        return _reject(origin, line_no, "has no 'status' field", raw)
    status = _status(status_text)
    if status is None:
        return _reject(
            origin, line_no, f"has status {status_text[:40]!r}, which is not an HTTP status", raw
        )
    fields: dict[str, str | None] = {}
    ranks: dict[str, int] = {}
    for name, value in obj.items():  # one pass over the object: ~15 keys, not ~40 lookups
        known = _JSON_NAMES.get(name)
        if known is not None and known[1] < ranks.get(known[0], len(_JSON_NAMES)):
            scalar = _scalar(value)
            if scalar is not None:
                fields[known[0]], ranks[known[0]] = scalar, known[1]
    return _access_event(ts_ns, fields, status, raw, text, origin, "json")


def _json_time(name: str, value: str) -> int:
    if name == "msec":
        return parse_epoch_seconds_ns(value)
    if name == "time_local":
        return parse_nginx_local_ns(value)
    try:
        return parse_rfc3339_ns(value)
    except ValueError:
        if "/" in value:
            return parse_nginx_local_ns(value)
        if value[:1].isdigit() and "-" not in value:
            return parse_epoch_seconds_ns(value)
        raise


def _status(text: str) -> int | None:
    if len(text) == 3 and text.isdigit() and text.isascii() and text[0] in "12345":
        return int(text)
    return None


def _access_combined(
    match: re.Match[str], text: str, raw: bytes, line_no: int, origin: str
) -> Event | Reject:
    # The referer stays in raw only: it is not worth a column.
    client, user, time_local, request, status_text, sent, _referer, agent, rest = match.groups()
    try:
        ts_ns = parse_nginx_local_ns(time_local)
    except ValueError as exc:
        return _reject(origin, line_no, f"has an unreadable [time_local]: {exc}", raw)
    status = _status(status_text)
    if status is None:
        return _reject(
            origin, line_no, f"has status {status_text!r}, which is not an HTTP status", raw
        )
    fields: dict[str, str | None] = {
        "client": client,
        "remote_user": None if user == "-" else _unescape(user),
        "request": _unescape(request),
        "bytes_sent": sent,
        "user_agent": _unescape(agent) if agent and agent != "-" else None,
    }
    _extras(rest, fields)
    return _access_event(ts_ns, fields, status, raw, text, origin, "combined")


def _extras(rest: str, fields: dict[str, str | None]) -> None:
    """Fields appended after the user agent: ``$request_id`` first, then the documented ones."""
    durations = ("request_time", "upstream_response_time")
    first = True
    position = 0
    while position < len(rest):
        token = _TOKEN.match(rest, position)
        if token is None or token.end() == position:
            break
        position = token.end()
        quoted, bare = token.groups()
        value = _unescape(quoted if quoted is not None else bare)
        key, sep, keyed = value.partition("=")
        if sep and key in _EXTRA_KEYS:
            if keyed not in ("", "-"):
                fields[_EXTRA_KEYS[key]] = keyed
            first = False
            continue
        if first:
            first = False
            if value != "-":
                fields["request_id"] = value
            continue
        if value in ("", "-"):
            continue
        if _STATUS_LIST.fullmatch(value) and not fields.get("upstream_status"):
            fields["upstream_status"] = value
        elif _DURATION.fullmatch(value):
            slot = next((name for name in durations if not fields.get(name)), None)
            if slot is not None:
                fields[slot] = value
        elif _ADDRESS.fullmatch(value) and not fields.get("upstream_addr"):
            fields["upstream_addr"] = value


def _error(
    text: str,
    raw: bytes,
    line_no: int,
    origin: str,
    tz_offset_s: float,
    head: re.Match[str],
) -> Event | Reject:
    stamp, nginx_level, pid, tid, connection = head.groups()
    try:
        ts_ns = parse_nginx_error_ns(stamp, tz_offset_s)
    except ValueError as exc:
        return _reject(origin, line_no, f"has an unreadable error-log time: {exc}", raw)
    body = text[head.end() :]
    start = body.find(", client: ")
    message, context = (body, {}) if start < 0 else (body[:start], _context(body[start:]))
    attrs: dict[str, Any] = {"log": "error", "nginx_level": nginx_level, "pid": int(pid)}
    attrs["tid"] = int(tid)
    if connection:
        attrs["connection"] = int(connection)
    for key, value in context.items():
        attrs[key] = _clip(value)
    if action := _ACTION.search(message):
        attrs["action"] = action[1]
    if errno := _ERRNO.search(message):
        attrs["errno"], attrs["errno_text"] = int(errno[1]), errno[2]
    ssl_error = _ssl_error(message)
    if ssl_error:
        attrs["ssl_error"] = _clip(ssl_error)
    error_type, owner = next(
        ((kind, who) for pattern, kind, who in _ERROR_CLASSES if pattern.search(message)),
        (None, None),
    )
    method, path, protocol = _request_line(context.get("request", ""))
    if protocol:
        attrs["protocol"] = protocol
    return Event(
        ts_ns=ts_ns,
        layer="ingress",
        source=_SOURCE,
        origin=origin,
        message=_clip(" ".join(message.split())),
        raw=text,
        hash=content_hash(_SOURCE, raw),
        service=_service(context.get("server"), context.get("host")),
        level=_LEVELS.get(nginx_level, "info"),
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


def link_errors_to_access(events: Sequence[Event], *, max_gap_s: float = 5.0) -> list[Event]:
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
        key = _request_key(event, "access")
        if key is not None:
            duration_ns = round((event.duration_s or 0.0) * _NS)
            requests.setdefault(key, []).append((event.ts_ns, event.ts_ns - duration_ns, event))
    longest_ns: dict[tuple[str, str, str], int] = {}
    for key, entries in requests.items():
        entries.sort(key=lambda entry: entry[0])
        longest_ns[key] = max(end - start for end, start, _ in entries)
    linked: list[Event] = []
    for event in events:
        key = _request_key(event, "error")
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


def _request_key(event: Event, log: str) -> tuple[str, str, str] | None:
    if event.source != _SOURCE or event.attrs.get("log") != log:
        return None
    client = event.attrs.get("client")
    if not (client and event.http_method and event.http_path):
        return None
    return str(client), event.http_method, event.http_path
