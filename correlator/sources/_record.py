"""The mapping of one record of DESIGN §4 to a row of the ``events`` table.

Shared by the ``ndjson``/``agent`` adapters (a JSON line each) and the ``loki`` adapter (an
entry whose line is such a record).

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

A record without ``ts``, with an unreadable one, or without ``layer`` (unless a default layer
is given) is refused with a reason naming the field, which the adapter turns into a
:class:`~correlator.model.Reject`. :func:`record_row` takes its options by keyword;
:func:`record_row_positional` is the same mapping called positionally, from the ``ndjson``
adapter's per-line loop, the hot loop of ingest.

Integers past 64 bits (below -9223372036854775808 or above 18446744073709551615) keep every
digit: such an integer is kept in ``attrs`` as its decimal text, a JSON string
(``{"job_seq": "123456789012345678901234567890"}``), so that every later step (orjson, DuckDB's
JSON functions, the timeline) carries it unchanged; integers within 64 bits stay JSON numbers
and floats stay floats, exactly as orjson reads them. orjson reads such an integer as a float
(17 digits), which it writes with an exponent (``1.2345678901234568e+29``, as every float of
magnitude 10^16 or more): when the attrs' JSON text, a record's ``event`` written as JSON, or
an identifier refused for being a float shows one, the line is mapped once more from ``raw``
read by the stdlib parser, every integer exact (:mod:`~correlator.sources._integers`). That
second mapping reads such an integer as the string of its digits wherever it is: an
identifier takes it as its text (as it takes any integer), the columns of text fields
(``service``, ``method``...) take it as text. A line without an exponent pays one ``memchr``
over its attrs text (the JSON path) or one render of its attrs (the :class:`dict` path).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from correlator.model import IDENTIFIER_KEYS, LAYERS, OWNER_LAYERS
from correlator.sources import _fields
from correlator.sources._fields import ZERO_SPAN, ZERO_TRACE, check_ids, normalise_level, take_id
from correlator.sources._integers import exponent_in, may_hold_wide, reread
from correlator.sources._time import parse_rfc3339_ns

__all__ = [
    "BULKY_KEYS",
    "JSON_TYPES",
    "MAX_DEPTH",
    "Row",
    "record_row",
    "record_row_positional",
    "too_deep",
]

# The tables and patterns whose methods record_row_positional calls on every record, bound here
# by assignment rather than imported: CPython compiles ``name.method(...)`` on an imported name
# as an attribute load and a call (a bound method object made per call), not a method call.
_LEVELS: Final = _fields.LEVEL_WORDS
_good_ids: Final = _fields.good_ids  # the same set: _fields empties it in place, never rebinds
_HEX32: Final = _fields.HEX32
_HEX16: Final = _fields.HEX16

#: Top-level keys (beside ``error.stack``) left out of ``attrs``: tracebacks are long, and the
#: raw line keeps them.
BULKY_KEYS: Final = ("exception", "stack", "exc_info", "stack_info")

# Keys read from every record, in the order record_row_positional unpacks them.
_HEAD_KEYS: Final = ("ts", "layer", "service", "level", "event", "error")
_NONES: Final = (None,) * 8

_LAYER_SET: Final = frozenset(LAYERS)
_OWNER_SET: Final = frozenset(OWNER_LAYERS)
_LAYER_LIST: Final = ", ".join(LAYERS)

# Keys of ``error`` that have columns of their own, or are too long for attrs.
_ERROR_TAKEN: Final = frozenset({"type", "owner_layer", "stack"})

# Access-record keys and lifecycle keys: each kind present on few lines (an access record
# has no lifecycle keys, a transition no access keys), looked up only when one of it is.
_HTTP_KEYS: Final = frozenset({"method", "path", "status", "duration_s"})
_ENTITY_KEYS: Final = frozenset(
    {"entity_kind", "entity_id", "state_from", "from_state", "state_to", "to_state"}
)

# How JSON names what orjson parsed, for reasons.
JSON_TYPES: Final[dict[type, str]] = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}

Row = tuple[Any, ...]


def _clip(value: object) -> str:
    try:
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return f"a value nested deeper than {MAX_DEPTH} levels"
    return repr(text if len(text) <= 64 else text[:64] + "...")


#: The deepest nesting of objects and arrays a record may have: what orjson can write (it
#: reads deeper), so what ``attrs`` and the store can hold. A deeper record is refused.
MAX_DEPTH: Final = 254


def _too_deep(line_no: int, field: str, unit: str = "line") -> str:
    return (
        f"{unit} {line_no} has a field {field!r} nested deeper than the {MAX_DEPTH} levels of "
        "objects and arrays a record may have"
    )


def too_deep(line_no: int, record: dict[str, Any], unit: str = "line") -> str:
    """Why a record orjson cannot write is refused, naming its field nested too deep.

    For the adapters that store a parsed line's fields in ``attrs`` without this mapping
    (``workflow``): what orjson cannot write, the store cannot hold.

    Args:
        line_no: the line's number.
        record: the parsed line, which ``orjson.dumps`` refused.
        unit: what ``line_no`` counts: ``line`` or ``row``.

    Returns:
        ``line 3 has a field 'x' nested deeper than the 254 levels ...``.
    """
    return _too_deep(line_no, _deepest(record), unit)


def _deepest(record: dict[str, Any]) -> str:
    """The first field of ``record`` that orjson cannot write (nested too deep)."""
    for key, value in record.items():
        try:
            orjson.dumps({key: value})  # at its depth in the record
        except orjson.JSONEncodeError:
            return str(key)
    return "?"  # pragma: no cover - only called once the whole record failed to render


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
        The row (``attrs`` last, as a dict; an integer past 64 bits in it as its decimal
        text, see the module docstring), or the reason the record is refused.
    """
    return record_row_positional(
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
        return f"{prefix}: {_clip(ts)} is a JSON {JSON_TYPES.get(type(ts), 'object')}"
    try:
        parse_rfc3339_ns(ts)
    except ValueError as exc:
        return f"{prefix}: {exc}"
    return prefix  # pragma: no cover - only called after parse_rfc3339_ns refused ts


def record_row_positional(
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
    exact: bool = False,
) -> Row | str:
    """:func:`record_row`, positional; with ``attrs_json`` the attrs come as JSON text.

    A record that may have lost an integer's digits to orjson is mapped again from ``raw``
    read exactly (the module docstring says when and how); ``exact`` says this is that
    second mapping, which is never repeated.
    """
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
            return f"line {line_no} lacks field 'layer' (one of {_LAYER_LIST})"
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

    # Whether the record may hold an integer past 64 bits that orjson read as a float: set
    # where such a float would not reach attrs; the attrs themselves are looked at last.
    wide = False
    if type(message) is not str:
        if message is None:
            message = pop("msg", None) or pop("message", None) or ""
        if type(message) is not str:
            try:
                message = orjson.dumps(message).decode()
            except orjson.JSONEncodeError:
                return _too_deep(line_no, "event")
            wide = "+" in message and exponent_in(message)

    rejected: dict[str, str] = {}
    ids = tuple(map(pop, IDENTIFIER_KEYS, _NONES))
    try:
        known = _good_ids.issuperset(ids)
    except TypeError:  # an unhashable value (a list, an object) where an identifier belongs
        known = False
    if not known:
        given = ids
        ids = check_ids(given, rejected)
        # An integer identifier is taken as its text, a float refused: an integer past 64
        # bits is refused only until the line is read exactly.
        if rejected and float in map(type, given):
            wide = True
    node_id, node_instance_id, correlation_id, allocation_id, workflow_id = ids
    # Trace and span ids are new with every request (span: every record), so a cache would
    # only churn; the regex is one C call.
    trace_id = pop("trace_id", None)
    if trace_id is not None and (
        type(trace_id) is not str or not _HEX32.fullmatch(trace_id) or trace_id == ZERO_TRACE
    ):
        wide = wide or type(trace_id) is float
        trace_id = take_id("trace_id", trace_id, rejected)
    span_id = pop("span_id", None)
    if span_id is not None and (
        type(span_id) is not str or not _HEX16.fullmatch(span_id) or span_id == ZERO_SPAN
    ):
        wide = wide or type(span_id) is float
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
    # set test per kind skips its lookups for the common line.
    http_method = http_path = http_status = duration_s = None
    entity_kind = entity_id = state_from = state_to = None
    keys = record.keys()
    if not keys.isdisjoint(_HTTP_KEYS):
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
    if not keys.isdisjoint(_ENTITY_KEYS):
        entity_kind = _text(record, "entity_kind")
        entity_id = _text(record, "entity_id", numbers=True)
        state_from = _text(record, "state_from") or _text(record, "from_state")
        state_to = _text(record, "state_to") or _text(record, "to_state")

    if not keys.isdisjoint(BULKY_KEYS):
        for key in BULKY_KEYS:
            record.pop(key, None)
    if rejected:
        record["rejected_ids"] = rejected

    attrs: dict[str, Any] | str | None
    if attrs_json:
        try:
            attrs = orjson.dumps(record).decode() if record else None
        except orjson.JSONEncodeError:
            return _too_deep(line_no, _deepest(record))
        # "+" first: one memchr (~0.05 µs) clears nearly every line; the regex costs ~1 µs.
        wide = wide or (attrs is not None and "+" in attrs and exponent_in(attrs))
    else:
        attrs = record
        if not exact:  # rendered only to look: for an exponent, and that it can be stored
            try:
                rendered = orjson.dumps(record)
            except orjson.JSONEncodeError:
                return _too_deep(line_no, _deepest(record))
            wide = wide or may_hold_wide(rendered)
    if wide and not exact:
        again = reread(raw, None)
        if again is not None:
            return record_row_positional(
                again,
                raw,
                digest,
                source,
                origin,
                line_no,
                default_layer,
                default_service,
                default_ts_ns,
                attrs_json,
                True,
            )

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
        attrs,
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
