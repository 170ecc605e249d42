"""A text record read by its format, made an event: its level, service, layer and
identifiers, and what it says of a request or a failure (:class:`Maker`).

- **level**: the format's word as the model's level (``ERROR``, ``warn``, klog's ``E``,
  syslog's and journald's severities ``0``-``7``); an unknown word is kept in
  ``attrs["level"]`` and the event is ``info``.
- **service**: ``--service``, else the first of the format's service fields
  (``_known.SERVICE_FIELDS``; a file name up to its first dot), else the input file's name up
  to its first dot.
- **layer**: the operator's layer rules, else ``--layer``, else (with the built-in rules) the
  service's name (``_known.NAMED_LAYERS``); a record none of them places is rejected with a
  reason that says what to give.
- **identifiers**: the operator's identifier rules, then the built-in ones
  (``_known.BUILTIN_IDS``); a value that fails the identifier check is left out and its
  problem noted in ``attrs["rejected_ids"]``, as for records of our own schema.
- **a request**: fields named as HTTP libraries name them (``method``, ``path``, ``status``,
  ...), else a request line quoted in the message (``"GET /v2/servers HTTP/1.1" status: 200
  ... time: 0.24``, as oslo's WSGI servers and access logs write it) give the ``http_*``
  columns and ``duration_s``.
- **a failure**: a record with lines after its first whose last line names an exception
  (``ValueError: ...``, ``requests.exceptions.SSLError: ...``, ``Caused by: x.y.Z: ...``)
  gives the ``error_type``, and ``attrs["error"]`` its type and message, which the owner
  table reads with the rest of the record (``correlator.ownership``).

The message is the record's first line of message (the rest is in ``raw``); every field the
format read is kept in ``attrs``, as text, but those whose whole value became an identifier
(its column holds it, ``raw`` the field).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath
from typing import Any, Final

from correlator.model import LAYERS, Event
from correlator.sources._fields import normalise_level
from correlator.sources.text._format import Parsed
from correlator.sources.text._known import NAMED_LAYERS, SERVICE_FIELDS
from correlator.sources.text._rules import IdRules, LayerRule, layer_of

__all__ = ["HTTP_FIELDS", "LEVEL_CODES", "Maker", "file_service", "origin_service"]

SOURCE: Final = "text"
_LAYER_LIST: Final = ", ".join(LAYERS)
#: Severities as numbers (syslog's PRI, journald's PRIORITY) and as klog's letters.
LEVEL_CODES: Final = {
    "0": "critical",
    "1": "critical",
    "2": "critical",
    "3": "error",
    "4": "warning",
    "5": "info",
    "6": "info",
    "7": "debug",
    "I": "info",
    "W": "warning",
    "E": "error",
    "F": "critical",
    "D": "debug",
}
_METHOD_FIELDS: Final = ("method", "http.method", "http.request.method", "http_method")
_PATH_FIELDS: Final = ("path", "url.path", "http.path", "http.target", "uri", "http_path")
_STATUS_FIELDS: Final = (
    "status",
    "status_code",
    "http.status_code",
    "http.response.status_code",
    "http_status",
)
#: The fields that name a request's method, path and status, first present first.
HTTP_FIELDS: Final = (_METHOD_FIELDS, _PATH_FIELDS, _STATUS_FIELDS)
_HTTP_FIELDS: Final = frozenset((*_METHOD_FIELDS, *_PATH_FIELDS, *_STATUS_FIELDS))
_REQUEST_LINE: Final = re.compile(
    r'"(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\S{1,2048}) HTTP/[0-9.]{1,3}"'
    r"(?: (?:status: )?([1-5][0-9][0-9])\b)?(?:.*? time: ([0-9]{1,6}(?:\.[0-9]{1,9})?)\b)?"
)
_EXCEPTION: Final = re.compile(
    r"(?:Caused by: )?([A-Za-z_][\w.$]{0,200}(?:Error|Exception|Exit|Interrupt|Failure|Fault|"
    r"Timeout|Warning)\w{0,40})(?::\s?(.*))?"
)


@lru_cache(maxsize=4096)
def file_service(name: str | None) -> str | None:
    """A service named by a file: its base name up to the first dot
    (``/var/log/nova/nova-compute.log.1`` is ``nova-compute``)."""
    if not name:
        return None
    stem = PurePath(name).name.split(".", 1)[0]
    return stem or None


def origin_service(origin: str) -> str | None:
    """The service an input's name gives (a file's; not standard input's or a request's)."""
    return None if origin in ("stdin", "http", "sample") else file_service(origin)


@lru_cache(maxsize=4096)
def _named_layer(service: str | None) -> str | None:
    """The layer a service's name places it in (the built-in names read only the service)."""
    return layer_of(NAMED_LAYERS, service, {})


def _level(word: str | None) -> str | None:
    if word is None:
        return "info"
    return normalise_level(word) or LEVEL_CODES.get(word.strip())


def _first(fields: Mapping[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        value = fields.get(name)
        if value:
            return value
    return None


def _request(message: str, fields: Mapping[str, str]) -> tuple[Any, ...]:
    """``(method, path, status, duration_s)`` a record says of a request; Nones if none."""
    if fields.keys() & _HTTP_FIELDS:
        method = _first(fields, _METHOD_FIELDS)
        path = _first(fields, _PATH_FIELDS)
        status_text = _first(fields, _STATUS_FIELDS)
    else:
        method = path = status_text = None
    duration: str | None = None
    if method is None and '"' in message:
        line = _REQUEST_LINE.search(message.partition("\n")[0])
        if line is not None:
            method, path, status_text, duration = line.groups()
    status = (
        int(status_text)
        if status_text and status_text.isdigit() and len(status_text) == 3
        else None
    )
    return method, path, status, float(duration) if duration else None


def _failure(message: str) -> tuple[str, str | None] | None:
    """The exception the last line of a multi-line message names, if it names one."""
    _, newline, rest = message.partition("\n")
    if not newline:
        return None
    for line in reversed(rest.split("\n")):
        if line.strip():
            match = _EXCEPTION.fullmatch(line.strip())
            return (match.group(1), match.group(2)) if match is not None else None
    return None


@dataclass(frozen=True, slots=True)
class Maker:
    """Makes the events of one input of one format (the module says how).

    Attributes:
        format_name: the format's name (which built-in rules and service fields apply).
        identifiers: the identifier rules.
        layers: the operator's layer rules.
        layer: ``--layer``, or None.
        named_layers: whether the built-in service names place records.
        service: ``--service``, or None.
        file_service: the service the input's file name gives, or None.
    """

    format_name: str
    identifiers: IdRules
    layers: tuple[LayerRule, ...]
    layer: str | None
    named_layers: bool
    service: str | None
    file_service: str | None

    def _service(self, fields: Mapping[str, str]) -> str | None:
        if self.service is not None:
            return self.service
        for name in SERVICE_FIELDS.get(self.format_name, ()):
            value = fields.get(name)
            if value:
                return file_service(value) if name == "file" else value
        return self.file_service

    def place(self, service: str | None) -> str | None:
        """The layer of a record of ``service`` when the layer rules read only the service
        (the built-in names do; ``text/_batch`` checks the operator's): None when none
        places it."""
        return self._layer(service, {})

    def _layer(self, service: str | None, fields: Mapping[str, str]) -> str | None:
        layer = (layer_of(self.layers, service, fields) if self.layers else None) or self.layer
        if layer is None and self.named_layers:
            layer = _named_layer(service)
        return layer

    def event(
        self, parsed: Parsed, raw: str, digest: int, origin: str, replaced: bool
    ) -> Event | str:
        """The event of a record, or why it cannot be placed on a layer.

        Args:
            parsed: the record as its format read it.
            raw: its lines.
            digest: the content hash of ``raw``.
            origin: the input.
            replaced: some of its bytes were not UTF-8.
        """
        fields = parsed.fields
        service = self._service(fields)
        layer = self._layer(service, fields)
        if layer is None:
            named = f"service {service!r}" if service else "no service"
            return (
                f"no layer for this record ({named}, which no layer rule places): give "
                f"--layer ({_LAYER_LIST}), or a [[layers]] rule in --text-rules"
            )
        refused: dict[str, str] = {}
        taken: set[str] = set()
        ids = self.identifiers.find(parsed.message, fields, refused, taken)
        attrs: dict[str, Any] = (
            {name: value for name, value in fields.items() if name not in taken}
            if taken
            else dict(fields)
        )
        level = _level(parsed.level)
        if level is None:
            attrs["level"] = parsed.level
            level = "info"
        if refused:
            attrs["rejected_ids"] = refused
        if replaced:
            attrs["encoding"] = "not UTF-8: undecodable bytes replaced with U+FFFD"
        method, path, status, duration_s = _request(parsed.message, fields)
        failure = _failure(parsed.message)
        error_type = None
        if failure is not None:
            error_type = failure[0]
            attrs["error"] = {"type": failure[0], "message": failure[1]}
        return Event(
            ts_ns=parsed.ts_ns,
            layer=layer,
            source=SOURCE,
            origin=origin,
            message=parsed.message.partition("\n")[0],
            raw=raw,
            hash=digest,
            service=service,
            level=level,
            node_id=ids.get("node_id"),
            node_instance_id=ids.get("node_instance_id"),
            correlation_id=ids.get("correlation_id"),
            allocation_id=ids.get("allocation_id"),
            workflow_id=ids.get("workflow_id"),
            trace_id=ids.get("trace_id"),
            span_id=ids.get("span_id"),
            http_method=method,
            http_path=path,
            http_status=status,
            duration_s=duration_s,
            error_type=error_type,
            attrs=attrs,
        )
