"""An operator's rules for the ``text`` source, read from a TOML file (``--text-rules``,
``CORRELATOR_TEXT_RULES``): their own formats, identifier rules and layer rules.

::

    builtin = true              # the built-in rules apply after these (default true)

    [formats.billing]           # --format billing
    pattern = '^(?P<time>\\S+ \\S+) (?P<level>[A-Z]+) \\[(?P<request_id>[^\\]]*)\\] '
    start = '^\\d{4}-'           # what starts a record (default: the pattern)
    time_format = '%Y-%m-%d %H:%M:%S,%f'   # strptime; default RFC 3339, ISO 8601 or epoch
    zone = 'Europe/Berlin'      # of times without an offset (default --text-tz)
    example = '2026-11-29 04:29:29,123 ERROR [req-1] charge failed'

    [[identifiers]]
    field = 'request_id'        # a field of the record (default: the message)
    to = 'correlation_id'       # node_id, node_instance_id, correlation_id, allocation_id,
                                # workflow_id, trace_id or span_id
    [[identifiers]]
    pattern = '/allocations/(?P<id>[0-9a-f-]{36})'   # searched in the field's text
    to = 'allocation_id'
    formats = ['billing']       # default: every format

    [[layers]]
    match = '^billing'          # searched in the field's value
    field = 'service'           # default: the record's service
    layer = 'api'

Everything is checked when the file is read, and the first problem stops the ingest with a
message that names the file, the table and the key (``rules.toml: identifiers[2].to: 'host'
is not an identifier; use one of ...``): a rules file never half-applies. Regular expressions
are Python's; one that cannot compile is named with the compiler's reason.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from correlator.errors import QueryError
from correlator.model import LAYERS
from correlator.sources._time import parse_zone
from correlator.sources.text._format import TextFormat
from correlator.sources.text._pattern import pattern_format
from correlator.sources.text._rules import ID_TARGETS, MESSAGE, IdRule, LayerRule

__all__ = ["MAX_RULES_BYTES", "TextRules", "read_rules"]

#: A rules file larger than this is refused unread (it is an operator's file, not evidence).
MAX_RULES_BYTES: Final = 1024 * 1024
_NAME: Final = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_FORMAT_KEYS: Final = frozenset({"pattern", "start", "time_format", "zone", "example"})
_ID_KEYS: Final = frozenset({"to", "field", "pattern", "formats"})
_LAYER_KEYS: Final = frozenset({"layer", "match", "field"})
_TOP_KEYS: Final = frozenset({"builtin", "formats", "identifiers", "layers"})


@dataclass(frozen=True, slots=True)
class TextRules:
    """What a rules file declares.

    Attributes:
        formats: the operator's formats, by name.
        identifiers: their identifier rules, first first (before the built-in ones).
        layers: their layer rules, first first.
        builtin: whether the built-in identifier and layer rules apply after theirs.
        path: the file, for messages.
    """

    formats: dict[str, TextFormat] = field(default_factory=dict)
    identifiers: tuple[IdRule, ...] = ()
    layers: tuple[LayerRule, ...] = ()
    builtin: bool = True
    path: str = ""


class _Problem(Exception):
    """A problem at a place in the file (``identifiers[2].to``)."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


def _text(table: dict[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise _Problem(f"{where}.{key}", "is required")
        return None
    if not isinstance(value, str) or not value:
        raise _Problem(f"{where}.{key}", f"must be a non-empty string, not {value!r:.80}")
    return value


def _regex(text: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise _Problem(where, f"is not a regular expression: {exc}") from None


def _unknown(table: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise _Problem(
            where, f"unknown key {extra[0]!r}; the keys are {', '.join(sorted(allowed))}"
        )


def _tables(document: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _Problem(key, f"must be an array of tables ([[{key}]])")
    return value


def _format(name: str, table: Any, builtin_names: frozenset[str]) -> TextFormat:
    where = f"formats.{name}"
    if not _NAME.fullmatch(name):
        raise _Problem(
            where, "a format's name is 1-40 of a-z, 0-9, _ and -, starting with a letter"
        )
    if name in builtin_names or name == "auto":
        raise _Problem(where, f"{name!r} is a built-in format's name; choose another")
    if not isinstance(table, dict):
        raise _Problem(where, "must be a table")
    _unknown(table, _FORMAT_KEYS, where)
    pattern = _regex(_text(table, "pattern", where, required=True) or "", f"{where}.pattern")
    if "time" not in pattern.groupindex:
        raise _Problem(f"{where}.pattern", "has no (?P<time>...) group: a record needs a time")
    start_text = _text(table, "start", where)
    zone_text = _text(table, "zone", where)
    try:
        zone = parse_zone(zone_text) if zone_text is not None else None
    except ValueError as exc:
        raise _Problem(f"{where}.zone", str(exc)) from None
    return pattern_format(
        name,
        pattern,
        start=_regex(start_text, f"{where}.start") if start_text is not None else None,
        time_format=_text(table, "time_format", where),
        zone=zone,
        looks_like=_text(table, "example", where) or "",
    )


def _identifier(table: dict[str, Any], where: str, known_formats: frozenset[str]) -> IdRule:
    _unknown(table, _ID_KEYS, where)
    to = _text(table, "to", where, required=True)
    if to not in ID_TARGETS:
        raise _Problem(
            f"{where}.to", f"{to!r:.80} is not an identifier; use one of {', '.join(ID_TARGETS)}"
        )
    name = _text(table, "field", where) or MESSAGE
    pattern_text = _text(table, "pattern", where)
    if pattern_text is None and name == MESSAGE:
        raise _Problem(where, "give a field, a pattern, or both")
    formats = table.get("formats", [])
    if not isinstance(formats, list) or not all(isinstance(item, str) for item in formats):
        raise _Problem(f"{where}.formats", "must be an array of format names")
    unknown = sorted(set(formats) - known_formats)
    if unknown:
        raise _Problem(f"{where}.formats", f"no format is named {unknown[0]!r}")
    return IdRule(
        to,
        field=name,
        pattern=_regex(pattern_text, f"{where}.pattern") if pattern_text is not None else None,
        formats=frozenset(formats),
        name=where,
    )


def _layer(table: dict[str, Any], where: str) -> LayerRule:
    _unknown(table, _LAYER_KEYS, where)
    layer = _text(table, "layer", where, required=True)
    if layer not in LAYERS:
        raise _Problem(
            f"{where}.layer", f"{layer!r:.80} is not a layer; use one of {', '.join(LAYERS)}"
        )
    return LayerRule(
        layer,
        _regex(_text(table, "match", where, required=True) or "", f"{where}.match"),
        field=_text(table, "field", where) or "service",
        name=where,
    )


def read_rules(path: str, builtin_names: frozenset[str]) -> TextRules:
    """Read and check a rules file (the module shows one).

    Args:
        path: the file.
        builtin_names: the built-in formats' names (a format of the file may not take one).

    Raises:
        QueryError: the file cannot be read, is not TOML, or declares something wrong; the
            message names the file and the place.
    """
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_RULES_BYTES + 1)
    except OSError as exc:
        raise QueryError(f"cannot read the text rules file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_RULES_BYTES:
        raise QueryError(f"{path}: a rules file is at most {MAX_RULES_BYTES:,} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise QueryError(f"{path} is not a TOML file: {exc}") from None
    try:
        return _declared(document, builtin_names, path)
    except _Problem as problem:
        raise QueryError(f"{path}: {problem}") from None


def _declared(document: dict[str, Any], builtin_names: frozenset[str], path: str) -> TextRules:
    """What a rules file's document declares, checked.

    Raises:
        _Problem: the first thing wrong, and where.
    """
    _unknown(document, _TOP_KEYS, "the file")
    builtin = document.get("builtin", True)
    if not isinstance(builtin, bool):
        raise _Problem("builtin", "must be true or false")
    formats_table = document.get("formats", {})
    if not isinstance(formats_table, dict):
        raise _Problem("formats", "must be a table of formats ([formats.NAME])")
    formats = {name: _format(name, table, builtin_names) for name, table in formats_table.items()}
    known = builtin_names | frozenset(formats)
    identifiers = tuple(
        _identifier(table, f"identifiers[{index}]", known)
        for index, table in enumerate(_tables(document, "identifiers"), 1)
    )
    layers = tuple(
        _layer(table, f"layers[{index}]")
        for index, table in enumerate(_tables(document, "layers"), 1)
    )
    return TextRules(formats, identifiers, layers, builtin, path)
