"""The ``ndjson`` and ``agent`` adapters: JSON lines in the record schema of DESIGN §4.

One JSON object per line, as ``agent_logging`` writes them::

    {"ts": "2024-05-01T12:00:00.123456789Z", "level": "error", "event": "provisioning failed",
     "service": "api", "layer": "api", "env": "prod", "allocation_id": "a-9",
     "correlation_id": "c-1", "trace_id": "4bf9...", "span_id": "00f0...",
     "error": {"type": "ProvisionError", "message": "...", "owner_layer": "cert",
               "chain": [{"type": "SSLError", "message": "..."}], "stack": "..."}}

Mapping: ``ts`` (RFC 3339) to ``ts_ns``; ``layer``, ``service``, ``level`` (normalised to
:data:`~correlator.model.LEVELS`; an unknown one is kept in ``attrs["level"]``), ``event`` to
``message`` (``msg``/``message`` when ``event`` is absent); the five identifiers and
``trace_id``/``span_id``, validated as ``agent_logging`` validates them (a value that fails is
dropped and its problem noted in ``attrs["rejected_ids"]``, so hostile text never reaches an
identifier column); ``error.owner_layer`` to ``owner_hint``, ``error.type`` to ``error_type``
(the rest of ``error`` but its ``stack`` stays in ``attrs["error"]``); the access-record fields
``method``, ``path``, ``status``, ``duration_s`` to the ``http_*``/``duration_s`` columns;
``entity_kind``, ``entity_id``, ``state_from``/``from_state`` and ``state_to``/``to_state`` to
the lifecycle columns. Every other field goes to ``attrs``, except the bulky ones of
:data:`BULKY_KEYS` (tracebacks), which stay in ``raw`` only.

A line without ``ts``, with an unreadable one, or without ``layer`` (unless a default layer is
given) is a :class:`~correlator.model.Reject` naming the field. A trailing ``\\r`` is dropped
before anything else, so CRLF files hash like LF files.

Two entry points share one mapping: :func:`parse` yields :class:`~correlator.model.Event`
objects; :func:`parse_columns` fills one list per column of the ``events`` table (the store's
bulk path) without building them. ``benchmarks/RESULTS.md`` has the ingest figures: about
30,000 events/s on 2 cores, short of the issue's 200,000, and where the time goes.
The line framing (:func:`iter_lines`), identifier checks (:func:`take_id`) and level
normalisation (:func:`normalise_level`) are shared with the other JSON adapters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, Final

import orjson

from agent_logging._ids import MAX_ID_LENGTH, problem
from correlator.model import (
    EVENT_COLUMNS,
    IDENTIFIER_KEYS,
    LAYERS,
    MAX_LINE_BYTES,
    OWNER_LAYERS,
    Event,
    Reject,
)
from correlator.sources._time import parse_rfc3339_ns

__all__ = [
    "BULKY_KEYS",
    "excerpt",
    "hasher",
    "iter_lines",
    "normalise_level",
    "parse",
    "parse_agent",
    "parse_columns",
    "record_row",
    "take_id",
]

#: Top-level keys (beside ``error.stack``) left out of ``attrs``: tracebacks are long, and the
#: raw line keeps them.
BULKY_KEYS: Final = ("exception", "stack", "exc_info", "stack_info")

# agent_logging._ids' rule for the five identifiers, as one regex so that the common case is a
# single C call; tests/correlator/sources/test_ndjson.py proves it agrees with problem().
_SAFE_ID: Final = re.compile(rf"[A-Za-z0-9._:/@+~-]{{1,{MAX_ID_LENGTH}}}")
_HEX32: Final = re.compile(r"[0-9a-f]{32}")
_HEX16: Final = re.compile(r"[0-9a-f]{16}")
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16

# Identifier values already proven acceptable, plus None (absent is fine). A log repeats its
# node, allocation, workflow and (within a request) correlation ids many times; one set test
# for all five costs a fraction of five regex calls. Bounded: emptied when full, like the
# timestamp caches of _time.
_CACHE_LIMIT: Final = 65_536
_good_ids: set[str | None] = {None}

# Keys read from every record, in the order _row unpacks them.
_HEAD_KEYS: Final = ("ts", "layer", "service", "level", "event", "error")
_NONES: Final = (None,) * 8

_LAYER_SET: Final = frozenset(LAYERS)
_OWNER_SET: Final = frozenset(OWNER_LAYERS)
_LAYER_LIST: Final = ", ".join(LAYERS)

# Severity words seen in the wild (structlog, stdlib logging, syslog, Go's slog/zap, Java) to
# the five levels of the model.
_LEVELS: Final = {
    "trace": "debug",
    "debug": "debug",
    "info": "info",
    "information": "info",
    "informational": "info",
    "notice": "info",
    "log": "info",
    "warn": "warning",
    "warning": "warning",
    "err": "error",
    "error": "error",
    "exception": "error",
    "crit": "critical",
    "critical": "critical",
    "fatal": "critical",
    "panic": "critical",
    "dpanic": "critical",
    "alert": "critical",
    "emerg": "critical",
    "emergency": "critical",
}

# Keys of ``error`` that have columns of their own, or are too long for attrs.
_ERROR_TAKEN: Final = frozenset({"type", "owner_layer", "stack"})

# Access-record and lifecycle keys: present on few lines, looked up only when one is.
_OPTIONAL_KEYS: Final = frozenset(
    {
        "method",
        "path",
        "status",
        "duration_s",
        "entity_kind",
        "entity_id",
        "state_from",
        "from_state",
        "state_to",
        "to_state",
    }
)

_EXCERPT_CHARS: Final = 200
_CHUNK_ROWS: Final = 1024

# How JSON names what orjson parsed, for reasons.
_JSON_TYPES: Final[dict[type, str]] = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}

Row = tuple[Any, ...]


def excerpt(data: bytes) -> str:
    """The first 200 characters of a line, decoded leniently, for a reject."""
    return data[: _EXCERPT_CHARS * 4].decode("utf-8", "replace")[:_EXCERPT_CHARS]


def hasher(source: str) -> Any:
    """A blake2b state equal to the one :func:`~correlator.model.content_hash` starts from.

    ``hasher(kind).copy()`` + ``update(raw)`` gives the same digest as ``content_hash(kind,
    raw)`` for less than building the state, person string and all, for every line.

    Args:
        source: the source kind.

    Returns:
        A ``hashlib.blake2b`` object to copy, never to update directly.
    """
    return hashlib.blake2b(digest_size=8, person=source.encode()[:16])


def iter_lines(
    lines: Iterable[bytes], source: str, origin: str
) -> Iterator[tuple[int, bytes, str] | Reject]:
    """Number lines from 1 and screen them: oversized and non-UTF-8 lines become rejects.

    Args:
        lines: raw lines without their ``\\n``.
        source: the adapter kind, for the rejects.
        origin: file path or query, for the rejects.

    Yields:
        ``(line_no, data, text)`` for each non-blank line (a trailing ``\\r`` removed), or a
        :class:`Reject`.
    """
    for line_no, line in enumerate(lines, 1):
        data = bytes(line)
        if data[-1:] == b"\r":
            data = data[:-1]
        reason = _screen(data, line_no)
        if reason is not None:
            yield Reject(source, origin, line_no, reason, excerpt(data))
            continue
        text = data.decode()
        if text and not text.isspace():
            yield line_no, data, text


def _screen(data: bytes, line_no: int) -> str | None:
    """Why a line cannot be read at all (too long, not UTF-8), or None."""
    if len(data) > MAX_LINE_BYTES:
        return f"line {line_no} is {len(data):,} bytes; the limit is {MAX_LINE_BYTES:,}"
    try:
        data.decode()
    except UnicodeDecodeError as exc:
        return (
            f"line {line_no} is not valid UTF-8 "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        )
    return None


def normalise_level(value: object) -> str | None:
    """Map a severity word (any case) to one of the model's levels.

    Args:
        value: e.g. ``WARN``, ``err``, ``fatal``.

    Returns:
        ``debug``, ``info``, ``warning``, ``error`` or ``critical``; None when unknown.
    """
    if type(value) is not str:
        return None
    return _LEVELS.get(value) or _LEVELS.get(value.strip().lower())


def take_id(key: str, value: object, rejected: dict[str, str]) -> str | None:
    """Validate one identifier (or ``trace_id``/``span_id``) value.

    Integers are accepted for the five identifiers (inventories number their nodes).

    Args:
        key: the identifier key.
        value: the candidate; None means absent.
        rejected: where a refused value's problem is noted, by key.

    Returns:
        The value as text, or None when absent or refused.
    """
    if value is None:
        return None
    if type(value) is str:
        if key in IDENTIFIER_KEYS:
            if _SAFE_ID.fullmatch(value):
                return _remember(_good_ids, value)
        elif key == "trace_id":
            if _HEX32.fullmatch(value) and value != _ZERO_TRACE:
                return value
        elif key == "span_id" and _HEX16.fullmatch(value) and value != _ZERO_SPAN:
            return value
    elif type(value) is int and key in IDENTIFIER_KEYS:
        return take_id(key, str(value), rejected)
    rejected[key] = problem(key, value) or "is not acceptable"
    return None


def _check_ids(values: tuple[Any, ...], rejected: dict[str, str]) -> tuple[str | None, ...]:
    """The five identifiers checked one by one: only values not already known cost a regex."""
    checked = []
    for key, value in zip(IDENTIFIER_KEYS, values, strict=True):
        try:
            known = value in _good_ids
        except TypeError:  # unhashable
            known = False
        checked.append(value if known else take_id(key, value, rejected))
    return tuple(checked)


def _remember(cache: set[str | None], value: str) -> str:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
        cache.add(None)
    cache.add(value)
    return value


def _clip(value: object) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return repr(text if len(text) <= 64 else text[:64] + "...")


def record_row(
    record: dict[str, Any],
    raw: str,
    digest: int,
    *,
    source: str,
    origin: str,
    line_no: int,
    default_layer: str | None = None,
    default_service: str | None = None,
    default_ts_ns: int | None = None,
) -> Row | str:
    """Map one record to a row of :data:`~correlator.model.EVENT_COLUMNS`, or say why not.

    ``record`` is consumed: what is left of it becomes the row's ``attrs``.

    Args:
        record: the parsed JSON object.
        raw: the line as read.
        digest: its content hash.
        source: the adapter kind.
        origin: file path or query.
        line_no: for the reason.
        default_layer: the layer of a record that names none.
        default_service: the service of a record that names none.
        default_ts_ns: the time of a record whose ``ts`` is missing or unreadable (a Loki
            entry's own timestamp); without it such a record is refused.

    Returns:
        The row (``attrs`` last, as a dict), or the reason the record is refused.
    """
    return _row(
        record,
        raw,
        digest,
        source,
        origin,
        line_no,
        default_layer,
        default_service,
        default_ts_ns,
        False,
    )


def _ts_problem(ts: object, line_no: int) -> str:
    prefix = f"line {line_no} has a field 'ts' that is not an RFC 3339 timestamp"
    if ts is None:
        return f"line {line_no} lacks field 'ts'"
    if type(ts) is not str:
        return f"{prefix}: {_clip(ts)} is a JSON {_JSON_TYPES.get(type(ts), 'object')}"
    try:
        parse_rfc3339_ns(ts)
    except ValueError as exc:
        return f"{prefix}: {exc}"
    return prefix  # pragma: no cover - only called after parse_rfc3339_ns refused ts


def _row(
    record: dict[str, Any],
    raw: str,
    digest: int,
    source: str,
    origin: str,
    line_no: int,
    default_layer: str | None,
    default_service: str | None,
    default_ts_ns: int | None,
    attrs_json: bool,
) -> Row | str:
    """:func:`record_row`, positional; with ``attrs_json`` the attrs come as JSON text."""
    pop = record.pop
    # One C-level pass pops the keys every record has (map calls pop without bytecode).
    ts, layer, service, level, message, error = map(pop, _HEAD_KEYS, _NONES)
    try:
        if type(ts) is not str:
            raise ValueError  # noqa: TRY301 - joins the unreadable-ts path below
        ts_ns = parse_rfc3339_ns(ts)
    except ValueError:
        if default_ts_ns is None:
            return _ts_problem(ts, line_no)
        if ts is not None:
            record["ts"] = ts
        ts_ns = default_ts_ns

    if type(layer) is not str or layer not in _LAYER_SET:
        if layer is not None:
            return (
                f"line {line_no} has a field 'layer' outside the known layers: {_clip(layer)} "
                f"(expected one of {_LAYER_LIST})"
            )
        if default_layer is None:
            return f"line {line_no} lacks field 'layer' and no default layer was given"
        layer = default_layer

    if type(service) is not str or not service:
        if service is not None:
            record["service"] = service
        service = default_service

    level_name = _LEVELS.get(level) if type(level) is str else None
    if level_name is None:
        level_name = normalise_level(level)
        if level_name is None:
            if level is not None:
                record["level"] = level
            level_name = "info"

    if type(message) is not str:
        if message is None:
            message = pop("msg", None) or pop("message", None) or ""
        if type(message) is not str:
            message = orjson.dumps(message).decode()

    rejected: dict[str, str] = {}
    ids = tuple(map(pop, IDENTIFIER_KEYS, _NONES))
    try:
        known = _good_ids.issuperset(ids)
    except TypeError:  # an unhashable value (a list, an object) where an identifier belongs
        known = False
    if not known:
        ids = _check_ids(ids, rejected)
    node_id, node_instance_id, correlation_id, allocation_id, workflow_id = ids
    # Trace and span ids are new with every request (span: every record), so a cache would
    # only churn; the regex is one C call.
    trace_id = pop("trace_id", None)
    if trace_id is not None and (
        type(trace_id) is not str or not _HEX32.fullmatch(trace_id) or trace_id == _ZERO_TRACE
    ):
        trace_id = take_id("trace_id", trace_id, rejected)
    span_id = pop("span_id", None)
    if span_id is not None and (
        type(span_id) is not str or not _HEX16.fullmatch(span_id) or span_id == _ZERO_SPAN
    ):
        span_id = take_id("span_id", span_id, rejected)

    owner_hint = error_type = None
    if error is not None:
        if type(error) is dict:
            owner_hint, error_type, kept = _error_fields(error)
            if kept:
                record["error"] = kept
        else:
            record["error"] = error

    # The access-record fields and lifecycle keys are rare outside their own records, so a
    # single set test skips all ten lookups for the common line.
    http_method = http_path = http_status = duration_s = None
    entity_kind = entity_id = state_from = state_to = None
    if not record.keys().isdisjoint(_OPTIONAL_KEYS):
        http_method = _text(record, "method")
        http_path = _text(record, "path")
        status = pop("status", None)
        if type(status) is int and 100 <= status <= 599:
            http_status = status
        elif status is not None:
            record["status"] = status
        duration = pop("duration_s", None)
        if type(duration) is float or type(duration) is int:
            duration_s = float(duration)
        elif duration is not None:
            record["duration_s"] = duration
        entity_kind = _text(record, "entity_kind")
        entity_id = _text(record, "entity_id", numbers=True)
        state_from = _text(record, "state_from") or _text(record, "from_state")
        state_to = _text(record, "state_to") or _text(record, "to_state")

    if not record.keys().isdisjoint(BULKY_KEYS):
        for key in BULKY_KEYS:
            record.pop(key, None)
    if rejected:
        record["rejected_ids"] = rejected

    return (
        ts_ns,
        layer,
        source,
        origin,
        message,
        raw,
        digest,
        service,
        level_name,
        node_id,
        node_instance_id,
        correlation_id,
        allocation_id,
        workflow_id,
        trace_id,
        span_id,
        http_method,
        http_path,
        http_status,
        duration_s,
        owner_hint,
        error_type,
        entity_kind,
        entity_id,
        state_from,
        state_to,
        (orjson.dumps(record).decode() if record else None) if attrs_json else record,
    )


def _error_fields(error: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    """``error`` of a record: (owner_hint, error_type, what stays in attrs)."""
    kept = {k: v for k, v in error.items() if k not in _ERROR_TAKEN}
    owner_hint = error.get("owner_layer")
    if type(owner_hint) is not str or owner_hint not in _OWNER_SET:
        if owner_hint is not None:
            kept["owner_layer"] = owner_hint  # not one of DESIGN §4's: kept, not trusted
        owner_hint = None
    error_type = error.get("type")
    if type(error_type) is not str or not error_type:
        if error_type is not None:
            kept["type"] = error_type
        error_type = None
    return owner_hint, error_type, kept


def _text(record: dict[str, Any], key: str, *, numbers: bool = False) -> str | None:
    """Pop ``key`` if it holds text (or, with ``numbers``, an integer); otherwise leave it."""
    value = record.get(key)
    if type(value) is str and value:
        del record[key]
        return value
    if numbers and type(value) is int:
        del record[key]
        return str(value)
    return None


def _rows(
    lines: Iterable[bytes],
    origin: str,
    default_layer: str | None,
    source: str,
    start_line: int,
    attrs_json: bool,
) -> Iterator[Row | Reject]:
    """The shared loop of :func:`parse` and :func:`parse_columns`: rows or rejects."""
    base = hasher(source)
    loads = orjson.loads
    from_bytes = int.from_bytes
    for line_no, line in enumerate(lines, start_line):
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > MAX_LINE_BYTES:
            yield Reject(source, origin, line_no, _screen(line, line_no) or "", excerpt(line))
            continue
        try:
            record = loads(line)
        except orjson.JSONDecodeError as exc:
            if line.isspace() or not line:
                continue
            reason = _screen(line, line_no) or f"line {line_no} is not valid JSON: {exc}"
            yield Reject(source, origin, line_no, reason, excerpt(line))
            continue
        if type(record) is not dict:
            yield Reject(
                source,
                origin,
                line_no,
                f"line {line_no} is a JSON {_JSON_TYPES.get(type(record), 'value')}, not an object",
                excerpt(line),
            )
            continue
        state = base.copy()
        state.update(line)
        row = _row(
            record,
            line.decode(),  # orjson accepted it, so it is valid UTF-8
            from_bytes(state.digest(), "big", signed=True),
            source,
            origin,
            line_no,
            default_layer,
            None,
            None,
            attrs_json,
        )
        if isinstance(row, str):
            yield Reject(source, origin, line_no, row, excerpt(line))
        else:
            yield row


def parse(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    source: str = "ndjson",
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """Read record-schema JSON lines into events.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``) they come from.
        default_layer: the layer of records that name none (otherwise they are rejected).
        source: the source kind to stamp: ``ndjson`` or ``agent``.
        start_line: the number of the first line (a batch of a longer file starts later).

    Yields:
        An :class:`Event` per record, a :class:`Reject` per unreadable line; blank lines are
        skipped.
    """
    for item in _rows(lines, origin, default_layer, source, start_line, False):
        if type(item) is tuple:
            yield Event(*item)
        else:
            yield item  # type: ignore[misc]  # a Reject


def parse_agent(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """:func:`parse` for the ``agent`` source kind (agent_logging's own JSON-lines files).

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path.
        default_layer: the layer of records that name none.
        start_line: the number of the first line.

    Yields:
        Events and rejects, as :func:`parse`.
    """
    return parse(lines, origin, default_layer=default_layer, source="agent", start_line=start_line)


def parse_columns(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    source: str = "ndjson",
    start_line: int = 1,
) -> tuple[dict[str, list[Any]], list[Reject]]:
    """Read record-schema JSON lines straight into columns, for the store's bulk insert.

    The same mapping as :func:`parse`, without building an :class:`Event` per line. ``attrs``
    is rendered as JSON text (None when empty), as the ``events`` table stores it. Everything
    is held in memory: call it per batch of lines.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).
        default_layer: the layer of records that name none.
        source: ``ndjson`` or ``agent``.
        start_line: the number of the first line (a batch of a longer file starts later).

    Returns:
        One list per name of :data:`~correlator.model.EVENT_COLUMNS`, and the rejects.
    """
    columns: list[list[Any]] = [[] for _ in EVENT_COLUMNS]
    extends = [column.extend for column in columns]
    rejects: list[Reject] = []
    items = _rows(lines, origin, default_layer, source, start_line, True)
    # Rows are transposed a chunk at a time: one pass over a million rows per column would
    # walk memory 27 times; a chunk stays in the CPU cache.
    while chunk := list(islice(items, _CHUNK_ROWS)):
        rows = [item for item in chunk if type(item) is tuple]
        if len(rows) < len(chunk):
            rejects.extend(item for item in chunk if type(item) is not tuple)  # type: ignore[misc]
        if rows:
            for extend, values in zip(extends, zip(*rows, strict=True), strict=True):
                extend(values)
    return dict(zip(EVENT_COLUMNS, columns, strict=True)), rejects
