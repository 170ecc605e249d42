"""How the store reads many rows: chosen by row id, and as Events a column at a time.

A busy identifier's timeline first picks which rows and in what order from a few narrow
columns, then reads every column of just those rows (``Store.events_matching``). How to read
them depends on where they lie: few rows through the identifier indexes; rows in a few runs of
consecutive row ids by ranges; rows a few in every row group by a list of row ids; rows side
by side by a scan the zone maps narrow down (:func:`row_filter`). Rows become
:class:`~correlator.model.Event` objects through Arrow (:func:`fetch_events`), their raw
texts read from their blocks (``_raw_blocks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import duckdb
import orjson

from correlator._raw_blocks import SPAN_COLUMNS, raw_texts
from correlator.model import EVENT_COLUMNS, Event

__all__ = [
    "FETCH_ROWS",
    "INDEX_ROWS",
    "by_row_id",
    "fetch_events",
    "row_filter",
    "row_runs",
    "time_window",
]

_ATTRS_AT: Final = EVENT_COLUMNS.index("attrs")
#: Where ``raw`` is among the EVENT_COLUMNS, and the span columns in its place in a row read.
_RAW_AT: Final = EVENT_COLUMNS.index("raw")
_SPANS: Final = slice(_RAW_AT, _RAW_AT + len(SPAN_COLUMNS))
#: At most this many matching rows are read through an index (DuckDB's index_scan_max_count,
#: set on every connection of the store with index_scan_percentage = 0); more, and DuckDB
#: scans the table.
INDEX_ROWS: Final = 2048
#: A list of identifiers is looked for by a scan when the table holds fewer than this many
#: rows per identifier in the list (see :func:`one_of`).
SCAN_ROWS_PER_VALUE: Final = 3000
#: Up to this many rows are read through the identifier indexes (a timeline of an allocation:
#: ~100 rows, ~0.1 ms each at 10^7 events); more are read by row id or by a scan.
FETCH_ROWS: Final = 256
#: DuckDB decodes a column a vector (2,048 rows) at a time.
_VECTOR_ROWS: Final = 2048
#: Rows are read by row id when they lie in at least 1 in this many vectors of their span:
#: a busy node's rows in a store in arrival order (10^4 rows in ~2,000 of ~2,400 vectors at
#: 10^7 events: 0.25 s by row id, 1 s by node), or any large answer at 10^5 events. Rows in
#: few vectors over a long span (a store ordered by node) are cheaper to scan for.
_SPAN_SHARE: Final = 4
#: Rows in at most this many runs of consecutive row ids are read by ranges of row ids.
_MAX_RUNS: Final = 256


def by_row_id(row_ids: Sequence[int]) -> bool:
    """Whether rows are best read by row id rather than again by their identifiers.

    A few rows are cheapest through the identifier indexes. Many are not (DuckDB fetches
    index hits one row at a time, every column decoded per row): they are read by row id
    when they fill a good share of the vectors between the first and the last of them
    (DuckDB reads that whole span), and otherwise by a scan the zone maps narrow down to
    the row groups holding them (rows side by side, as in a store ordered by node).
    """
    if len(row_ids) <= FETCH_ROWS:
        return False
    span = (max(row_ids) - min(row_ids)) // _VECTOR_ROWS + 1
    touched = len({row_id // _VECTOR_ROWS for row_id in row_ids})
    return touched * _SPAN_SHARE >= span


def fetch_events(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any],
    *,
    order: Sequence[int] | None = None,
    few: bool = False,
) -> list[Event]:
    """The rows of ``sql`` (all the stored columns, ``_schema.COLUMN_LIST`` order) as Events.

    Through Arrow, a column at a time: DuckDB hands over its vectors, each column becomes
    one Python list, and ``map(Event, ...)`` zips them. Half the Python time of converting
    row tuples one value at a time (``fetchall``) for a busy node's 10,000 rows. For a few
    rows (``few``: at most :data:`FETCH_ROWS` expected) it is the other way round: what
    Arrow costs to set up for 27 columns is more than converting them, and row tuples cost
    a third less (2.0 against 3.0 ms of CPU for 11 rows, 4.3 against 5.2 for 68).

    With ``order`` (row ids, in the order wanted), the first column of ``sql`` is the row id,
    before the EVENT_COLUMNS, and the events come back in that order, one per row id: rows
    chosen by row id in an order already known are fetched without an ``ORDER BY`` (a sort
    of every column: a quarter of the fetch of a busy node's 10,000 rows).

    Raises:
        LookupError: ``order`` names a row the query did not return.
    """
    if few:
        return _fetch_few(cursor, sql, params, order)
    table = cursor.sql(sql, params=params).to_arrow_table()
    rows = table.num_rows
    # Columns no row sets (a node's trace ids) are not converted value by value.
    columns = [[None] * rows if c.null_count == rows else c.to_pylist() for c in table.columns]
    row_ids: list[Any] = columns.pop(0) if order is not None else []
    columns[_SPANS] = [raw_texts(cursor, *columns[_SPANS])]
    loads = orjson.loads
    columns[_ATTRS_AT] = [loads(attrs) if attrs else {} for attrs in columns[_ATTRS_AT]]
    events = list(map(Event, *columns))
    if order is None:
        return events
    return _in_order(dict(zip(row_ids, events, strict=True)), order)


def _fetch_few(
    cursor: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any],
    order: Sequence[int] | None,
) -> list[Event]:
    """:func:`fetch_events` of a few rows, as row tuples."""
    loads = orjson.loads
    rows = cursor.execute(sql, params).fetchall()
    values = [list(row) for row in rows] if order is None else [list(row[1:]) for row in rows]
    texts = raw_texts(cursor, *zip(*(row[_SPANS] for row in values), strict=True)) if rows else []
    events = [_event(row, text, loads) for row, text in zip(values, texts, strict=True)]
    if order is None:
        return events
    return _in_order({row[0]: event for row, event in zip(rows, events, strict=True)}, order)


def _event(values: list[Any], raw: str | None, loads: Any) -> Event:
    values[_SPANS] = [raw]
    attrs = values[_ATTRS_AT]
    values[_ATTRS_AT] = loads(attrs) if attrs else {}
    return Event(*values)


def _in_order(by_row: dict[int, Event], order: Sequence[int]) -> list[Event]:
    try:
        return [by_row[row_id] for row_id in order]
    except KeyError as exc:
        raise LookupError(f"row {exc.args[0]} was chosen but not read back") from None


def row_filter(row_ids: Sequence[int]) -> tuple[str, list[Any]] | None:
    """How to read many rows chosen by row id: a SQL condition and its parameters, or None
    when reading them again by their identifiers is cheaper (few rows: through the indexes;
    rows side by side: a scan the zone maps narrow down).

    Rows in a few runs of consecutive row ids (a busy node's 10^4 rows in ~20 runs, one per
    ingest batch, each batch stored ordered by node) are read by ranges, which DuckDB narrows
    to their row groups: 4-5 times cheaper than a list of row ids, which it tests every row of
    the table against. Rows a few in every row group (a busy node's 10^4 of 10^7 events on a
    table in arrival order) are read by that list, rather than every vector the identifier's
    rows touch: 0.25 s instead of 1 s at 10^7 events on 2 cores.
    """
    if len(row_ids) <= FETCH_ROWS:
        return None
    runs = row_runs(row_ids)
    if len(runs) <= _MAX_RUNS:
        ranges = " OR ".join(["rowid BETWEEN ? AND ?"] * len(runs))
        return f"({ranges})", [bound for run in runs for bound in run]
    if by_row_id(row_ids):
        return "rowid = ANY(?::BIGINT[])", [list(row_ids)]
    return None


def row_runs(row_ids: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted row ids as runs of consecutive ids: ``[(first, last), ...]``."""
    runs: list[tuple[int, int]] = []
    ordered = sorted(row_ids)
    first = last = ordered[0]
    for row_id in ordered[1:]:
        if row_id != last + 1:
            runs.append((first, last))
            first = row_id
        last = row_id
    runs.append((first, last))
    return runs


def time_window(from_ns: int | None, to_ns: int | None) -> tuple[str, list[Any]]:
    """``AND`` conditions for ``from_ns <= ts_ns < to_ns`` (either bound optional), and their
    parameters."""
    condition = ""
    params: list[Any] = []
    if from_ns is not None:
        condition += " AND ts_ns >= ?"
        params.append(from_ns)
    if to_ns is not None:
        condition += " AND ts_ns < ?"
        params.append(to_ns)
    return condition, params


def one_of(column: str, values: Sequence[str], table_rows: int) -> tuple[str, list[Any]]:
    """A condition that ``column`` is one of ``values``, and its parameters.

    ``column IN (?, ?, ...)`` is answered through the column's index (while at most
    :data:`INDEX_ROWS` rows match) at about 0.08 ms per value; ``column = ANY(?)``, the list
    as one parameter, is never answered through the index but by a scan of the column, about
    0.03 µs per row. The scan is the cheaper one when the table holds fewer than
    :data:`SCAN_ROWS_PER_VALUE` rows per value looked for: a busy node's expansion on a
    10^5-event store (hundreds of identifiers) reads 400 correlation ids in 7 ms instead of
    28; at 10^7 events the same scan takes 290 ms, against 33 through the index.

    Args:
        column: an identifier column name (from a fixed tuple: it is formatted into SQL).
        values: the values; not empty.
        table_rows: how many rows the table holds (an estimate will do).
    """
    if len(values) * SCAN_ROWS_PER_VALUE >= table_rows:
        return f"{column} = ANY(?::VARCHAR[])", [list(values)]
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)
