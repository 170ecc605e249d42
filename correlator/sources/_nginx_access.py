"""nginx access logs: a JSON ``log_format``, or ``combined`` followed by ``$request_id``.

Separate from ``nginx`` (which tells the formats apart line by line), ``_nginx_error`` (the
error log) and ``_nginx_request`` (what an access line says about its request, whatever the
format): this module reads the two formats into the fields ``_nginx_request`` makes an event
of.

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
"""

from __future__ import annotations

import re
from typing import Final

import orjson

from correlator.model import Event, Reject
from correlator.sources._nginx_request import access_event, http_status, reject
from correlator.sources._time import (
    parse_epoch_seconds_ns,
    parse_nginx_local_ns,
    parse_rfc3339_ns,
)

__all__ = ["COMBINED", "COMBINED_BYTES", "access_combined", "access_json"]


# Possessive (`*+`): the content never gives back what it took (a `"` cannot follow a shorter
# content anyway), so an unterminated quote costs one pass: with `*`, a 1 MiB line holding
# one took 0.46 s, backtracking (7 ms now).
_QUOTED = r'"((?:[^"\\]|\\.)*+)"'
COMBINED = re.compile(
    rf"(\S+) \S+ (\S+) \[([^\]]+)\] {_QUOTED} (\d{{3}}) (\d+|-)(?: {_QUOTED} {_QUOTED})?(.*)"
)
COMBINED_BYTES = re.compile(rb"\S+ \S+ \S+ \[\d\d/[A-Za-z]{3}/\d{4}:")
_TOKEN = re.compile(rf'\s*(?:{_QUOTED}|([^\s"]+))')
_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")
_ESCAPE_RUN = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+")
_STATUS_LIST = re.compile(r"\d{3}(?:\s*[,:]\s*\d{3})*")
_DURATION = re.compile(r"\d+\.\d+(?:\s*[,:]\s*(?:\d+\.\d+|-))*")
_ADDRESS = re.compile(r"(?:unix:\S+|\[?[0-9A-Za-z.:_-]+\]?:\d+)(?:\s*[,:]\s*\S+)*")

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


def access_json(text: str, raw: bytes, line_no: int, origin: str) -> Event | Reject:
    """One JSON access-log line as an event, or a reject naming what is missing or wrong.

    Args:
        text: the line, decoded, without ``\\r``.
        raw: the line as read, for the hash.
        line_no: its number.
        origin: where it comes from.

    Returns:
        The event or the reject.
    """
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # A JSON log_format without escape=json gets nginx's default escaping (\x22): JSON
        # that is invalid only for that is read after turning the escapes into JSON ones.
        if "\\x" not in text:
            return reject(origin, line_no, f"is not valid JSON: {exc}", raw)
        try:
            obj = orjson.loads(_ESCAPE_RUN.sub(_json_escape, text))
        except orjson.JSONDecodeError:
            return reject(origin, line_no, f"is not valid JSON: {exc}", raw)
    if not isinstance(obj, dict):
        return reject(origin, line_no, f"is a JSON {type(obj).__name__}, not an object", raw)
    ts_ns: int | None = None
    for name in _TIME_FIELDS:
        value = _scalar(obj.get(name))
        if value is None:
            continue
        try:
            ts_ns = _json_time(name, value)
        except ValueError as exc:
            return reject(origin, line_no, f"has an unreadable {name!r}: {exc}", raw)
        break
    if ts_ns is None:
        return reject(origin, line_no, f"has no time field (one of {', '.join(_TIME_FIELDS)})", raw)
    status_text = _scalar(obj.get("status"))
    if status_text is None:
        return reject(origin, line_no, "has no 'status' field", raw)
    status = http_status(status_text)
    if status is None:
        return reject(
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
    return access_event(ts_ns, fields, status, raw, text, origin, "json")


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


def access_combined(
    match: re.Match[str], text: str, raw: bytes, line_no: int, origin: str
) -> Event | Reject:
    """One ``combined`` access-log line as an event, or a reject naming what is wrong.

    Args:
        match: :data:`COMBINED`'s full match of ``text``.
        text: the line, decoded, without ``\\r``.
        raw: the line as read, for the hash.
        line_no: its number.
        origin: where it comes from.

    Returns:
        The event or the reject.
    """
    # The referer stays in raw only: it is not worth a column.
    client, user, time_local, request, status_text, sent, _referer, agent, rest = match.groups()
    try:
        ts_ns = parse_nginx_local_ns(time_local)
    except ValueError as exc:
        return reject(origin, line_no, f"has an unreadable [time_local]: {exc}", raw)
    status = http_status(status_text)
    if status is None:
        return reject(
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
    return access_event(ts_ns, fields, status, raw, text, origin, "combined")


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
