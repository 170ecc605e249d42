"""A batch of record-schema JSON lines as the ``events`` table's Arrow table, mapped natively.

The ``ndjson``/``agent`` adapters' bulk path. ``_record_native`` (C, built with the package)
maps each line it can map with certainty in one pass without the GIL: the JSON, every check
and column of :func:`~correlator.sources._record.record_row_positional`, the attrs as orjson
writes them, and the content hash, into Arrow buffers. Every other line (a reject, a field the
mapping rewrites or refuses, a float orjson would write in another form, an integer past 64
bits...) it *declines*, and the Python mapping, the reference, maps it here or names why it is
refused. So the table holds the rows the Python path gives, hashes included; only their order
differs (the declined lines' rows come last), which the store's insert does not keep anyway.
``tests/correlator/sources/test_record_native.py`` feeds both paths the same generated and
hostile lines.

Without the compiled module (a checkout used without installing it) :func:`record_table` maps
every line in Python, and ``_native.NATIVE`` says so (``_native`` imports and configures it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from correlator._schema import events_table
from correlator.model import Reject
from correlator.sources._native import mappable, native, native_table

__all__ = ["NumberedColumns", "record_table"]

NumberedColumns = Callable[
    [Sequence[tuple[int, bytes]], str, str | None, str],
    tuple[dict[str, list[Any]], list[Reject]],
]
"""``columns(numbered, origin, default_layer, source)``: the Python mapping of numbered lines
into columns (``ndjson``'s), for the lines the native one declines."""


def record_table(
    columns: NumberedColumns,
    lines: Sequence[bytes],
    origin: str,
    default_layer: str | None,
    source: str,
    start_line: int,
) -> tuple[pa.Table, list[Reject]]:
    """One batch of lines as a table of the ``events`` schema, and its rejects.

    Args:
        columns: the Python mapping, for the lines the native one declines (all of them
            without it).
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).
        default_layer: the layer of records that name none.
        source: ``ndjson`` or ``agent``.
        start_line: the number of the first line.

    Returns:
        The rows (those the Python mapping made last) and the rejects, which only the Python
        mapping makes.
    """
    if native is None or not mappable(origin):
        parsed, rejects = columns(list(enumerate(lines, start_line)), origin, default_layer, source)
        return events_table(parsed), rejects
    rows, buffers, declined = native.map_lines(lines, source, origin, default_layer)
    table = native_table(rows, buffers)
    if not declined:
        return table, []
    numbered = [(start_line + index, lines[index]) for index in declined]
    parsed, rejects = columns(numbered, origin, default_layer, source)
    return pa.concat_tables([table, events_table(parsed)]), rejects
