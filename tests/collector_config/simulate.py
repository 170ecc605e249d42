"""Run a log line through the parsing steps of the collector configs, in Python.

Neither ``otelcol-contrib`` nor ``alloy`` can be installed from the registries this project
uses, so the tests execute the configs' own regular expressions and field moves here. Only
the operators and stages the configs use are modelled, each as its documentation describes
it; anything else raises :class:`Unsimulated`, so a config change the model does not cover
fails loudly instead of being skipped.

Regex semantics: both collectors use Go's ``regexp`` (RE2): ``FindStringSubmatch`` (leftmost
first, unanchored) and named groups only. Python's ``re.search`` agrees on the patterns the
configs use (no ``$`` before a trailing newline in the inputs, no lookaround, no
backreferences); ``test_configs`` checks the patterns stay inside that common subset.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from typing import Any, Final
from zoneinfo import ZoneInfo

import orjson

from tests.collector_config.alloy_syntax import Block, evaluate

__all__ = ["AlloyEntry", "OtelEntry", "Unsimulated", "parse_time_ns", "run_alloy", "run_filelog"]


class Unsimulated(AssertionError):
    """The config uses an operator, stage or condition the model does not cover."""


# ---- OpenTelemetry Collector (stanza operators of the filelog receiver) --------------------


@dataclasses.dataclass
class OtelEntry:
    """A stanza entry: body, attributes, resource and the trace context set by ``trace``."""

    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]
    trace: dict[str, str]


_FIELD: Final = re.compile(r'(attributes|resource|body)(?:\.([A-Za-z0-9_]+)|\["([^"]+)"\])?')
# The only `if` the model evaluates: a nil check on one attribute.
_IF_NOT_NIL: Final = re.compile(r"attributes\.([A-Za-z0-9_]+) != nil")


def _field(spec: str) -> tuple[str, str | None]:
    match = _FIELD.fullmatch(spec)
    if match is None:
        raise Unsimulated(f"field {spec!r}")
    return match.group(1), match.group(2) or match.group(3)


def _get(entry: OtelEntry, spec: str) -> tuple[bool, Any]:
    scope, key = _field(spec)
    if scope == "body":
        if key is None:
            return True, entry.body
        raise Unsimulated(f"body sub-field {spec!r}")
    values = entry.attributes if scope == "attributes" else entry.resource
    if key is None:
        return True, values
    return key in values, values.get(key)


def _set(entry: OtelEntry, spec: str, value: Any) -> None:
    scope, key = _field(spec)
    if key is None:
        raise Unsimulated(f"set whole {scope}")
    (entry.attributes if scope == "attributes" else entry.resource)[key] = value


def _delete(entry: OtelEntry, spec: str) -> None:
    scope, key = _field(spec)
    if key is None:
        raise Unsimulated(f"delete whole {scope}")
    (entry.attributes if scope == "attributes" else entry.resource).pop(key, None)


def _allowed(entry: OtelEntry, condition: str | None) -> bool:
    if condition is None:
        return True
    match = _IF_NOT_NIL.fullmatch(condition.strip())
    if match is None:
        raise Unsimulated(f"if {condition!r}")
    return entry.attributes.get(match.group(1)) is not None


def _apply_trace(entry: OtelEntry, trace: Mapping[str, Any]) -> None:
    # helper.TraceParser: hex-decodes the fields that exist and leaves them in place.
    for key in ("trace_id", "span_id"):
        spec = trace.get(key, {}).get("parse_from")
        if spec is None:
            raise Unsimulated(f"trace.{key} without parse_from")
        present, value = _get(entry, spec)
        if present and isinstance(value, str) and re.fullmatch(r"(?:[0-9a-f]{2})+", value):
            entry.trace[key] = value


def _parse(entry: OtelEntry, operator: Mapping[str, Any]) -> bool:
    """One parser operator; False where stanza would raise (then on_error decides)."""
    kind = operator["type"]
    present, value = _get(entry, operator.get("parse_from", "body"))
    if operator.get("parse_to", "attributes") != "attributes":
        raise Unsimulated(f"{kind} parse_to {operator['parse_to']!r}")
    if not present or not isinstance(value, str):
        return False
    if kind == "json_parser":
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(parsed, dict):
            return False
    else:
        match = re.search(operator["regex"], value)
        if match is None:
            return False
        parsed = match.groupdict(default="")
    entry.attributes.update(parsed)
    return True


def run_filelog(receiver: Mapping[str, Any], line: str, file_name: str = "x.log") -> OtelEntry:
    """Run ``line`` through a ``filelog`` receiver's ``resource`` and ``operators``.

    Args:
        receiver: the receiver's configuration, as loaded from YAML.
        line: one log line, as the receiver reads it.
        file_name: what ``include_file_name`` puts in ``log.file.name``.

    Returns:
        The entry as the receiver emits it.

    Raises:
        Unsimulated: an operator, field or condition the model does not cover.
    """
    entry = OtelEntry(
        body=line,
        attributes={"log.file.name": file_name} if receiver.get("include_file_name", True) else {},
        resource=dict(receiver.get("resource") or {}),
        trace={},
    )
    for operator in receiver.get("operators", []):
        if not _allowed(entry, operator.get("if")):
            continue
        kind = operator["type"]
        if kind in ("json_parser", "regex_parser"):
            if _parse(entry, operator) and "trace" in operator:
                _apply_trace(entry, operator["trace"])
        elif kind == "regex_replace":
            present, value = _get(entry, operator["field"])
            if present and isinstance(value, str):
                _set(
                    entry,
                    operator["field"],
                    re.sub(operator["regex"], operator["replace_with"], value),
                )
        elif kind in ("move", "copy"):
            present, value = _get(entry, operator["from"])
            if present:
                if kind == "move":
                    _delete(entry, operator["from"])
                _set(entry, operator["to"], value)
        elif kind == "add":
            value = operator["value"]
            # expr-lang expressions are not evaluated here; the field is marked as set.
            is_expr = isinstance(value, str) and value.startswith("EXPR(")
            _set(entry, operator["field"], "<expr>" if is_expr else value)
        elif kind == "retain":
            kept: dict[str, Any] = {}
            for spec in operator["fields"]:
                scope, key = _field(spec)
                if scope != "attributes" or key is None:
                    raise Unsimulated(f"retain {spec!r}")
                if key in entry.attributes:
                    kept[key] = entry.attributes[key]
            entry.attributes = kept
        else:
            raise Unsimulated(f"operator type {kind!r}")
    return entry


# ---- Grafana Alloy (loki.process stages) --------------------------------------------------


@dataclasses.dataclass
class AlloyEntry:
    """An entry inside ``loki.process``: labels, extracted map, structured metadata, and the
    timestamp the ``stage.timestamp`` stages set (None: the time the file was read, Alloy's
    default, which the model does not know)."""

    line: str
    labels: dict[str, str]
    extracted: dict[str, Any]
    structured_metadata: dict[str, str]
    timestamps: list[tuple[str, str]]
    ts_ns: int | None = None


# Go's reference-time tokens that the configs' layouts use, as regex groups. ``.999`` is an
# optional fraction (Go also accepts a fraction the layout does not name, after seconds).
_GO_TOKENS: Final = (
    ("2006", r"(?P<year>[0-9]{4})"),
    ("01", r"(?P<month>[0-9]{2})"),
    ("02", r"(?P<day>[0-9]{2})"),
    ("15", r"(?P<hour>[0-9]{2})"),
    ("04", r"(?P<minute>[0-9]{2})"),
    ("05", r"(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]{1,9}))?"),
    ("MST", r"(?P<zone>[A-Z]{3,5})"),
)
_RFC3339: Final = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})[Tt](?P<hour>[0-9]{2}):"
    r"(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_UNIX: Final = re.compile(r"(?P<seconds>[0-9]+)(?:\.(?P<fraction>[0-9]{1,9}))?")


def _go_layout(layout: str) -> re.Pattern[str]:
    """A Go reference layout made up of :data:`_GO_TOKENS` and literal text, as a regex."""
    pattern, rest = "", layout.replace(".999", "")  # the fraction group follows the seconds
    while rest:
        for token, group in _GO_TOKENS:
            if rest.startswith(token):
                pattern, rest = pattern + group, rest[len(token) :]
                break
        else:
            if rest[0].isalnum():
                raise Unsimulated(f"Go layout {layout!r} at {rest!r}")
            pattern, rest = pattern + re.escape(rest[0]), rest[1:]
    return re.compile(pattern)


def _nanoseconds(fraction: str | None) -> int:
    return int((fraction or "").ljust(9, "0"))


def parse_time_ns(value: str, layout: str, location: str = "UTC") -> int | None:
    """What ``stage.timestamp`` reads ``value`` as with ``format = layout``, in ns since the
    epoch; None where Alloy's parse fails (the entry then keeps its time).

    Modelled: ``Unix`` (seconds, an optional fraction), ``RFC3339Nano``, and reference
    layouts of the tokens in :data:`_GO_TOKENS`; a zone abbreviation (``MST``) must be UTC
    or GMT, as the configs require of their sources.

    Raises:
        Unsimulated: another layout or zone.
    """
    if layout == "Unix":
        unix = _UNIX.fullmatch(value)
        if unix is None:
            return None
        return int(unix["seconds"]) * 1_000_000_000 + _nanoseconds(unix["fraction"])
    match = (_RFC3339 if layout == "RFC3339Nano" else _go_layout(layout)).fullmatch(value)
    if match is None:
        return None
    fields = match.groupdict()
    zone: datetime.tzinfo = ZoneInfo(location)
    if fields.get("offset"):
        offset = fields["offset"].upper()
        zone = datetime.UTC
        if offset != "Z":
            sign = -1 if offset[0] == "-" else 1
            hours, minutes = int(offset[1:3]), int(offset[4:6])
            zone = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
    elif fields.get("zone"):
        if fields["zone"] not in ("UTC", "GMT"):
            raise Unsimulated(f"zone abbreviation {fields['zone']!r}")
        zone = datetime.UTC
    year, month, day, hour, minute, second = (
        int(fields[name]) for name in ("year", "month", "day", "hour", "minute", "second")
    )
    moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=zone)
    return int(moment.timestamp()) * 1_000_000_000 + _nanoseconds(fields.get("fraction"))


def _as_string(value: Any) -> str | None:
    # stages.getString: strings, numbers and booleans; nil and others are skipped.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return None


def _source(entry: AlloyEntry, stage: Block) -> str | None:
    source = stage.attributes.get("source")
    if source is None or source == "":
        return entry.line
    value = entry.extracted.get(str(source))
    return _as_string(value) if str(source) in entry.extracted else None


def _replace(expression: str, replacement: str, value: str) -> str:
    # stage.replace: every capture group of every match becomes `replace`.
    if "{{" in replacement:
        raise Unsimulated("stage.replace with a template")
    out, last = [], 0
    for match in re.finditer(expression, value):
        for group in range(1, (match.re.groups or 0) + 1):
            start, end = match.span(group)
            if start < 0 or start < last:
                continue
            out.append(value[last:start] + replacement)
            last = end
    return "".join(out) + value[last:]


def _json_stage(entry: AlloyEntry, stage: Block) -> None:
    text = _source(entry, stage)
    if text is None:
        return
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return
    if not isinstance(data, dict):
        return
    expressions = stage.attributes.get("expressions", {})
    if not isinstance(expressions, dict):
        raise Unsimulated("stage.json expressions")
    for name, expression in expressions.items():
        key = str(expression or name)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise Unsimulated(f"JMESPath expression {key!r}")
        if key in data:
            value = data[key]
            entry.extracted[name] = (
                orjson.dumps(value).decode() if isinstance(value, dict | list) else value
            )


def _metadata_stage(entry: AlloyEntry, stage: Block) -> None:
    values = stage.attributes.get("values", {})
    if not isinstance(values, dict) or "regex" in stage.attributes:
        raise Unsimulated("stage.structured_metadata form")
    for name, source in values.items():
        key = str(source or name)
        if key in entry.extracted:
            text = _as_string(entry.extracted[key])
            if text is not None:
                entry.structured_metadata[name] = text
    for name, source in values.items():  # labels listed here move into structured metadata
        key = str(source or name)
        if key in entry.labels:
            entry.structured_metadata[name] = entry.labels.pop(key)


def run_alloy(
    process: Block, line: str, labels: Mapping[str, str], environ: Mapping[str, str]
) -> AlloyEntry:
    """Run ``line`` through the stages of a ``loki.process`` block.

    Args:
        process: the parsed ``loki.process`` block.
        line: one log line, as ``loki.source.file`` forwards it.
        labels: the labels the source attached (``filename``).
        environ: the environment for ``sys.env``.

    Returns:
        The entry as ``loki.process`` forwards it.

    Raises:
        Unsimulated: a stage or form the model does not cover.
    """
    entry = AlloyEntry(line, dict(labels), {}, {}, [])
    for stage in process.blocks:
        kind = stage.name
        if kind == "stage.json":
            _json_stage(entry, stage)
        elif kind == "stage.regex":
            value = _source(entry, stage)
            if value is not None:
                match = re.search(str(stage.attributes["expression"]), value)
                if match is not None:
                    entry.extracted.update(match.groupdict(default=""))
        elif kind == "stage.replace":
            value = _source(entry, stage)
            source = str(stage.attributes.get("source") or "")
            if value is not None and source:
                entry.extracted[source] = _replace(
                    str(stage.attributes["expression"]), str(stage.attributes["replace"]), value
                )
        elif kind == "stage.static_labels":
            values = evaluate(stage.attributes["values"], environ)
            if not isinstance(values, dict):
                raise Unsimulated("stage.static_labels values")
            entry.labels.update({name: str(value) for name, value in values.items()})
        elif kind == "stage.labels":
            values = stage.attributes["values"]
            if not isinstance(values, dict) or "source_type" in stage.attributes:
                raise Unsimulated("stage.labels form")
            for label, lookup in values.items():
                text = _as_string(entry.extracted.get(str(lookup or label)))
                if text is not None:
                    entry.labels[label] = text
        elif kind == "stage.structured_metadata":
            _metadata_stage(entry, stage)
        elif kind == "stage.label_keep":
            keep = stage.attributes["values"]
            if not isinstance(keep, list):
                raise Unsimulated("stage.label_keep values")
            entry.labels = {name: value for name, value in entry.labels.items() if name in keep}
        elif kind == "stage.timestamp":
            source, layout = str(stage.attributes["source"]), str(stage.attributes["format"])
            entry.timestamps.append((source, layout))
            value = _as_string(entry.extracted.get(source))
            location = stage.attributes.get("location")
            if value is not None:
                ts_ns = parse_time_ns(
                    value, layout, str(evaluate(location, environ)) if location else "UTC"
                )
                entry.ts_ns = entry.ts_ns if ts_ns is None else ts_ns
        elif kind == "stage.template":
            # Go text/template is not evaluated here; the key is marked as set.
            entry.extracted[str(stage.attributes["source"])] = "<template>"
        elif kind == "stage.multiline":
            continue  # joins physical lines; the model is fed whole entries
        else:
            raise Unsimulated(f"stage {kind!r}")
    return entry
