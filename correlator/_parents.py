"""Parents' events: a shared identifier's own evidence inside an incident's window.

A parent is an identifier the expansion reached but would not follow to all its children (a
node shared by hundreds of allocations, a workflow by its steps): a timeline takes its events
inside the window whose child identifier is unset or one of the incident's own, and likewise
every other identifier of a unit of work (:meth:`~correlator.graph.Parent.sibling_filters`).
A busy expansion has twenty parents (a busy node at 10^5 events); read one by one they were a
count and a query each, 5-10 ms apiece, a third of such a timeline.
:func:`parent_events_many` reads them with one count per identifier kind, and the events of
every parent with few events in a handful of queries, each staying on the identifier index.
Identifier column names are formatted into SQL only from the caller's fixed tuple; values are
always bound."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import duckdb

from correlator._rows import INDEX_ROWS, fetch_events, one_of
from correlator._schema import COLUMN_LIST
from correlator.model import Event

__all__ = ["ParentQuery", "parent_events_many"]


class ParentQuery(NamedTuple):
    """One parent to read: ``key = value`` events whose ``child_key`` is unset or in
    ``child_values``, and whose every key of ``others`` is unset or one of its values."""

    key: str
    value: str
    child_key: str
    child_values: Sequence[str]
    others: Sequence[tuple[str, Sequence[str]]] = ()


def parent_events_many(
    cursor: duckdb.DuckDBPyConnection,
    parents: Sequence[ParentQuery],
    from_ns: int,
    to_ns: int,
    limit: int,
    table_rows: int,
) -> list[tuple[list[Event], bool]]:
    """Each parent's events in ``[from_ns, to_ns)``, oldest first (time, then hash).

    A parent with few events (at most :data:`INDEX_ROWS`) is read whole through the index,
    together with others of its kind, and filtered here; a busy one (a node) by a query over
    the window, which DuckDB narrows with the zone maps of the time column.

    Args:
        cursor: a cursor of the store (one snapshot for all the reads).
        parents: what to read; keys must be identifier columns (checked by the caller).
        from_ns: the window's start.
        to_ns: the window's end (excluded).
        limit: at most this many events per parent.
        table_rows: the events the store holds (``_rows.one_of``).

    Returns:
        ``(events, truncated)`` per parent, in the order given; truncated when more matched.
    """
    by_key = _by_key(parents)
    counts = _counts(cursor, by_key, table_rows)
    few = _few_events(cursor, by_key, counts, table_rows)
    answers: list[tuple[list[Event], bool]] = []
    for parent in parents:
        key, value = parent.key, parent.value
        # (column, the values allowed besides none): the child key first, then the others.
        filters = [
            (column, sorted(set(values)))
            for column, values in ((parent.child_key, parent.child_values), *parent.others)
        ]
        if counts.get((key, value), 0) <= INDEX_ROWS:
            sets = [(column, set(values)) for column, values in filters]
            rows = sorted(
                (
                    e
                    for e in few.get((key, value), ())
                    if from_ns <= e.ts_ns < to_ns
                    and all(
                        (own := getattr(e, column)) is None or own in allowed
                        for column, allowed in sets
                    )
                ),
                key=_order,
            )[: limit + 1]
        else:
            conditions = []
            params: list[object] = [value, from_ns, to_ns]
            for column, values in filters:
                condition = f"{column} IS NULL"
                if values:
                    condition += f" OR {column} IN ({', '.join('?' * len(values))})"
                conditions.append(f"({condition})")
                params.extend(values)
            rows = fetch_events(
                cursor,
                f"SELECT {COLUMN_LIST} FROM events "  # noqa: S608 - fixed names, bound values
                f"WHERE {key} = ? AND ts_ns >= ? AND ts_ns < ? AND {' AND '.join(conditions)} "
                "ORDER BY ts_ns, hash LIMIT ?",
                [*params, limit + 1],
            )
        answers.append((rows[:limit], len(rows) > limit))
    return answers


def _order(event: Event) -> tuple[int, int]:
    return event.ts_ns, event.hash


def _by_key(parents: Iterable[ParentQuery]) -> dict[str, list[str]]:
    """The parents' distinct values per identifier kind, in order of first appearance."""
    values: dict[str, dict[str, None]] = {}
    for parent in parents:
        values.setdefault(parent.key, {})[parent.value] = None
    return {key: list(kind) for key, kind in values.items()}


def _counts(
    cursor: duckdb.DuckDBPyConnection, by_key: dict[str, list[str]], table_rows: int
) -> dict[tuple[str, str], int]:
    """How many events carry each parent's identifier (``by_key``: values per identifier
    kind): one grouped count per kind."""
    counts: dict[tuple[str, str], int] = {}
    for key, values in by_key.items():
        condition, params = one_of(key, values, table_rows)
        rows = cursor.execute(
            f"SELECT {key}, count(*) FROM events WHERE {condition} GROUP BY ALL",  # noqa: S608 - fixed names, bound values
            params,
        ).fetchall()
        counts.update(((key, value), int(n)) for value, n in rows)
    return counts


def _few_events(
    cursor: duckdb.DuckDBPyConnection,
    by_key: dict[str, list[str]],
    counts: dict[tuple[str, str], int],
    table_rows: int,
) -> dict[tuple[str, str], list[Event]]:
    """Every event of the parents with few events, by parent.

    Read with one IN list per batch of values whose events add up to at most
    :data:`INDEX_ROWS`, so that each query stays on the identifier index.
    """
    found: dict[tuple[str, str], list[Event]] = {}
    for key, values in by_key.items():
        batch: list[str] = []
        rows_in_batch = 0
        batches: list[list[str]] = []
        for value in values:
            n = counts.get((key, value), 0)
            if not n or n > INDEX_ROWS:
                continue  # nothing to read, or a busy parent read by its window
            if batch and rows_in_batch + n > INDEX_ROWS:
                batches.append(batch)
                batch, rows_in_batch = [], 0
            batch.append(value)
            rows_in_batch += n
        if batch:
            batches.append(batch)
        for chosen in batches:
            condition, params = one_of(key, chosen, table_rows)
            events = fetch_events(
                cursor,
                f"SELECT {COLUMN_LIST} FROM events WHERE {condition}",  # noqa: S608 - fixed names, bound values
                params,
            )
            for event in events:
                found.setdefault((key, getattr(event, key)), []).append(event)
    return found
