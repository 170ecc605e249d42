"""A batch of text lines as the ``events`` table's Arrow table: the single-line records of the
built-in formats mapped natively, every other line by the parser.

The ``text`` source's table path (``table=partial(text_table, parse)``). The compiled mapping
(``native/text_formats.c`` reads a line, ``text_lines.c`` makes its event) maps each line it
can read with certainty that is a record of its own (it starts a record, and so does the line
after it), without the GIL, as the format's ``read`` and ``_event.Maker.event`` do, and
declines the others: continuation lines and the
records they continue, rejects, lines that are not printable ASCII. A mapped line starts a
record and ends one, so the declined lines are parsed run by run, each run from its first
line's number: together they give what the parser gives for the whole batch.

The mapping leaves the layer to this module: with the built-in names and operator rules that
read only the service, a record's layer is its service's, placed once per distinct service
(:meth:`~correlator.sources.text._event.Maker.place`); the records none places are handed to
the parser with the declined lines, which rejects them saying what to give. The rest is the
parser's alone: another format, operator identifier rules, layer rules that read other
fields, rules without the built-in ones. A zone with daylight-saving rules is handed over as
its table of offsets by wall-clock time (``_civil.zone_table``), built once a year and zone.
``tests/correlator/sources/test_text_native.py`` feeds both paths the same generated and
hostile lines.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from itertools import chain
from typing import Any, Final

import pyarrow as pa

from correlator._schema import EVENTS_SCHEMA, events_table
from correlator.model import LEVELS, Reject
from correlator.sources._fields import normalise_level
from correlator.sources._native import mappable, native, native_table, with_declined
from correlator.sources._row_columns import row_columns
from correlator.sources._source import Parser
from correlator.sources.text._civil import FUTURE_SLACK_NS, now_year, zone_table
from correlator.sources.text._event import HTTP_FIELDS, LEVEL_CODES, Maker, origin_service
from correlator.sources.text._formats import FORMATS
from correlator.sources.text._known import SERVICE_FIELDS, rules_for
from correlator.sources.text._rules import ID_TARGETS, IdRules
from correlator.sources.text._rules_file import TextRules
from correlator.sources.text.journald import BOOKKEEPING
from correlator.sources.text.json import NUMBERED_LEVELS

__all__ = ["NATIVE_FORMATS", "mapped_natively", "text_table"]

#: The formats the compiled module maps.
NATIVE_FORMATS: Final = frozenset(FORMATS)
_NO_RULES: Final = TextRules()
_LAYER: Final = EVENTS_SCHEMA.get_field_index("layer")


def _level_index(word: str) -> int:
    """The index in the model's levels of the level a word names (json's numbered levels)."""
    level = normalise_level(word)
    if level is None:
        raise ValueError(f"json's numbered level {word!r} names no level")
    return list(LEVELS).index(level)


if native is not None:
    # The tables the compiled module reads a record's level, request, identifiers and
    # service with, from their homes (its pattern rules, oslo's only, are written in C).
    native.configure_text(
        {code: list(LEVELS).index(name) for code, name in LEVEL_CODES.items()},
        {str(number): _level_index(name) for number, name in NUMBERED_LEVELS.items()},
        HTTP_FIELDS,
        {
            name: (
                {
                    rule.field: ID_TARGETS.index(rule.to)
                    for rule in rules_for(name)
                    if rule.pattern is None
                },
                SERVICE_FIELDS.get(name, ()),
                BOOKKEEPING if name == "journald" else (),
            )
            for name in NATIVE_FORMATS
        },
    )


def text_table(
    parse: Parser,
    lines: Sequence[bytes],
    origin: str,
    *,
    start_line: int = 1,
    **values: Any,
) -> tuple[pa.Table, list[Reject]]:
    """One batch of text lines as a table of the ``events`` schema, and its rejects.

    Args:
        parse: ``text._source.parse``, for the lines the native mapping declines (all of
            them when it does not apply).
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``stdin``/``http``).
        start_line: the number of the first line.
        values: the parser's options, the format settled (not ``auto``).

    Returns:
        The rows and the rejects (only the parser makes those), in line order.
    """
    if native is None or not _native_rules(values) or not mappable(origin, values.get("service")):
        columns, rejects = row_columns(parse, lines, origin, start_line=start_line, **values)
        return events_table(columns), rejects
    zone: tzinfo = values.get("zone") or UTC
    now_ns = time.time_ns()
    year = now_year(zone, now_ns)
    rows, buffers, declined, row_lines = native.map_text(
        lines,
        origin,
        values["text_format"],
        *_zone(zone, year),
        values.get("service"),
        origin_service(origin),
        year,
        now_ns + FUTURE_SLACK_NS,
    )
    table, unplaced = _placed(native_table(rows, buffers), row_lines, _maker(values))
    if unplaced:
        declined = sorted(chain(declined, unplaced))
    return with_declined(table, declined, parse, lines, origin, start_line, values)


def mapped_natively(values: Mapping[str, Any]) -> bool:
    """Whether the compiled module maps the records of an input read with these options
    (settled): then threads parse its batches (``Source.threads``)."""
    return native is not None and _native_rules(values)


def _native_rules(values: Mapping[str, Any]) -> bool:
    """Whether the native mapping reads records with these options (the module says when)."""
    rules: TextRules = values.get("rules") or _NO_RULES
    return not (
        values.get("text_format") not in NATIVE_FORMATS
        or rules.identifiers
        or not rules.builtin
        or any(rule.field != "service" for rule in rules.layers)
    )


@lru_cache(maxsize=64)
def _zone(zone: tzinfo, year: int) -> tuple[bytes, bytes]:
    """A zone's offsets by wall-clock time around ``year`` (``_civil.zone_table``) as the
    compiled module takes them: int64 starts and int32 offsets."""
    starts, offsets = zone_table(zone, _year_ns(year))
    return array("q", starts).tobytes(), array("i", offsets).tobytes()


def _year_ns(year: int) -> int:
    """An instant in the middle of ``year`` (a zone's table is built around it)."""
    return int(datetime(year, 7, 1, tzinfo=UTC).timestamp()) * 1_000_000_000


def _maker(values: Mapping[str, Any]) -> Maker:
    """A maker that places records as the parser's does (its identifier rules are the
    compiled module's business)."""
    rules: TextRules = values.get("rules") or _NO_RULES
    return Maker(
        values["text_format"],
        IdRules(()),
        rules.layers,
        values.get("layer"),
        rules.builtin,
        values.get("service"),
        None,
    )


def _placed(table: pa.Table, row_lines: bytes, maker: Maker) -> tuple[pa.Table, list[int]]:
    """The mapped rows with their layers, placed by service, and the indexes of the lines of
    those no rule places (the parser rejects them)."""
    if not table.num_rows:
        return table, []
    # Imported here: ~25 ms of every CLI command's start-up, and only a native batch needs it.
    import pyarrow.compute as pc

    services = table.column(EVENTS_SCHEMA.get_field_index("service")).combine_chunks()
    distinct = pc.unique(services)
    layers = pa.array([maker.place(service) for service in distinct.to_pylist()], pa.string())
    layer = layers.take(pc.index_in(services, value_set=distinct, skip_nulls=False))
    table = table.set_column(_LAYER, EVENTS_SCHEMA.field(_LAYER), layer)
    if not layer.null_count:
        return table, []
    lines = pa.Array.from_buffers(pa.int32(), len(table), [None, pa.py_buffer(row_lines)])
    placed = pc.is_valid(layer)
    unplaced = lines.filter(pc.invert(placed)).to_pylist()
    return table.filter(placed), unplaced
