"""What an nginx log line says about a request, whatever the format it was read from.

Separate from ``_nginx_access`` (reading the JSON and ``combined`` formats into fields) and
``_nginx_error``: both use the pieces here (the request line, the service name, clipping,
rejects), and every access line, JSON or text, becomes an event here.

Identifiers: ``correlation_id`` comes from baggage, else the ``X-Correlation-ID`` header, else
``$request_id`` (the rules of :func:`agent_logging.context.parse_headers`, which the API
applies to the same headers); values that fail :func:`agent_logging.schema.id_problem` are left
out and named in ``attrs["rejected_ids"]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from agent_logging.context import parse_headers
from agent_logging.schema import id_problem
from correlator.model import Event, Reject, content_hash
from correlator.sources._lines import line_reject

__all__ = [
    "SOURCE",
    "access_event",
    "clip",
    "http_status",
    "reject",
    "request_line",
    "service_name",
]

#: The source kind of every nginx event and reject.
SOURCE: Final = "nginx"
_MAX_ATTR_CHARS: Final = 512

_REQUEST_LINE = re.compile(r"([A-Z][A-Z_-]{0,31}) (\S+)(?: (HTTP/\d(?:\.\d)?))?")
_COUNT = re.compile(r"\d{1,18}", re.ASCII)  # fits DuckDB's BIGINT (and JSON readers' int64)
_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", re.ASCII)


def reject(origin: str, line_no: int, reason: str, raw: bytes) -> Reject:
    """An nginx reject of line ``line_no``; ``reason`` follows ``line N``.

    Args:
        origin: where the line comes from.
        line_no: its number.
        reason: what is wrong (``is not valid JSON: ...``).
        raw: the line, for the excerpt.

    Returns:
        The reject.
    """
    return line_reject(SOURCE, origin, line_no, reason, raw)


def clip(value: str) -> str:
    """``value`` cut to 512 characters (an ellipsis marks the cut), for an attribute."""
    return value if len(value) <= _MAX_ATTR_CHARS else value[: _MAX_ATTR_CHARS - 1] + "…"


def service_name(*candidates: str | None) -> str:
    """The first host name among ``candidates`` (port dropped); addresses such as the
    ``0.0.0.0:443`` nginx names before a TLS handshake picked a server are not services.

    Args:
        candidates: ``$server_name``, ``$host`` or the error log's ``server``/``host``.

    Returns:
        That name, or ``nginx`` when none is a host name.
    """
    for candidate in candidates:
        if candidate:
            name = re.sub(r":\d+$", "", candidate)
            if _SERVICE.fullmatch(name) and re.search("[A-Za-z]", name):
                return name
    return "nginx"


def request_line(request: str) -> tuple[str | None, str | None, str | None]:
    """Method, path (query string dropped) and protocol of ``GET /x?y HTTP/1.1``.

    Args:
        request: nginx's ``$request``.

    Returns:
        The three parts, or three Nones when it is not a request line.
    """
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
        found, problems = parse_headers({header: value})
        for key, candidate in found.items():
            ids.setdefault(key, candidate)
        if problems:
            rejected[variable] = "; ".join(problems)
    request_id = fields.get("request_id")
    if request_id:
        attrs["request_id"] = clip(request_id)
        reason = id_problem("correlation_id", request_id)
        if reason is not None:
            rejected["request_id"] = f"correlation_id {reason}"
        elif "correlation_id" not in ids:
            ids["correlation_id"] = request_id
    if rejected:
        attrs["rejected_ids"] = rejected
    if "span_id" in ids:  # the caller's span (traceparent's parent-id), not one of nginx's
        attrs["parent_span_id"] = ids.pop("span_id")
    return ids


def access_event(
    ts_ns: int,
    fields: dict[str, str | None],
    status: int,
    raw: bytes,
    text: str,
    origin: str,
    log_format: str,
) -> Event:
    """The access event for a request's fields, whichever format they were read from.

    Args:
        ts_ns: the request's end (nginx writes the access line when the request ends).
        fields: field name (``method``, ``request_id``, ``upstream_status``, ...) to value.
        status: the HTTP status.
        raw: the line as read, for the hash.
        text: the line, decoded, for the event's ``raw``.
        origin: where it comes from.
        log_format: ``json`` or ``combined``.

    Returns:
        The event; the identifiers its headers name are validated (see the module doc).
    """
    method, path, protocol = fields.get("method"), fields.get("path"), fields.get("protocol")
    request = fields.get("request")
    if request and not (method and path):
        method, path, protocol = request_line(request)
    elif path:
        path = path.split("?", 1)[0]
    attrs: dict[str, Any] = {"log": "access", "format": log_format}
    ids = _identifiers(fields, attrs)
    for key in ("client", "remote_user", "upstream_status", "upstream_addr"):
        if value := fields.get(key):
            attrs[key] = clip(value)
    if value := fields.get("upstream_response_time"):
        attrs["upstream_response_time_s"] = clip(value)
    duration_s = _float(fields.get("request_time"))
    if duration_s is not None:
        attrs["request_time_s"] = duration_s
    if (sent := fields.get("bytes_sent")) and _COUNT.fullmatch(sent):
        attrs["bytes_sent"] = int(sent)
    for key in ("user_agent", "ssl_protocol", "host"):
        if value := fields.get(key):
            attrs[key] = clip(value)
    if protocol:
        attrs["protocol"] = protocol
    if request and not method:
        attrs["request"] = clip(request)
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
        source=SOURCE,
        origin=origin,
        message=clip(summary),
        raw=text,
        hash=content_hash(SOURCE, raw),
        service=service_name(fields.get("server_name"), fields.get("host")),
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


def http_status(text: str) -> int | None:
    """``text`` as an HTTP status (100-599), or None when it is not one."""
    if len(text) == 3 and text.isdigit() and text.isascii() and text[0] in "12345":
        return int(text)
    return None
