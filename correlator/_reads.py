"""What the store reads back: events by the identifiers they mention, and nginx's.

:func:`matching_branches` and :func:`events_matching` are ``Store.events_matching``: one
``UNION`` branch per identifier kind, each on that column's index, read in two steps (which
rows, in order, from the identifier, time and hash columns alone; then every column of just
those rows, :func:`fetch_chosen`). :func:`nginx_events` finds the two halves of an nginx
request in different files; :func:`time_bounds` all evidence's first and last;
:func:`rejects` the lines ingest rejected. Identifier column names are formatted into SQL
only from the fixed :data:`ID_COLUMNS`; values are always bound. (What findings and latency
read is in ``_lifecycle``.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import duckdb
import pyarrow as pa

from correlator._rows import FETCH_ROWS, fetch_events, one_of, row_filter, time_window
from correlator._schema import COLUMN_LIST
from correlator.errors import QueryError
from correlator.model import IDENTIFIER_KEYS, MAX_NS, MIN_NS, Event

__all__ = [
    "ID_COLUMNS",
    "events_matching",
    "events_without_identifiers",
    "fetch_chosen",
    "matching_branches",
    "nginx_events",
    "rejects",
    "time_bounds",
]

#: Identifier columns, the only names ever formatted into SQL (from this fixed tuple).
ID_COLUMNS: Final = (*IDENTIFIER_KEYS, "trace_id")


def matching_branches(
    ids: Mapping[str, Iterable[str]],
    from_ns: int | None,
    to_ns: int | None,
    table_rows: int,
) -> tuple[list[str], list[Any]]:
    """The ``FROM ... WHERE ...`` of one branch per identifier kind of ``ids`` (key → values)
    with values, in ``[from_ns, to_ns)``, and their parameters, for :func:`events_matching`.

    ``table_rows`` (the events the store holds) decides how each kind's list is looked for
    (``_rows.one_of``).

    Raises:
        QueryError: an unknown identifier key.
    """
    # One branch per identifier kind, each answered from that column's index; UNION (not
    # ALL) keeps a row matched by several kinds once, as the equivalent OR would (rows are
    # distinct: the content hash is unique). DuckDB answers an OR across columns, or a
    # branch excluding the others' values, with a full scan: 4 s at 10^7 events.
    branches: list[str] = []
    params: list[Any] = []
    window, window_params = time_window(from_ns, to_ns)
    for key, values in ids.items():
        if key not in ID_COLUMNS:
            raise QueryError(f"unknown identifier key {key!r}; use one of {ID_COLUMNS}")
        value_list = sorted(set(values))
        if not value_list:
            continue
        condition, condition_params = one_of(key, value_list, table_rows)
        branches.append(f"FROM events WHERE {condition}{window}")
        params.extend(condition_params)
        params.extend(window_params)
    return branches, params


def events_matching(
    cursor: duckdb.DuckDBPyConnection, branches: list[str], params: list[Any], limit: int
) -> tuple[list[Event], bool]:
    """The events of :func:`matching_branches`' ``branches`` (not empty), oldest first (time,
    then hash): at most ``limit``, and whether more matched."""
    # One snapshot for both steps: the row ids of the first must name the same rows in
    # the second (a concurrent cluster() rewrites the table).
    cursor.execute("BEGIN TRANSACTION")
    # First which rows, in order, from the identifier and time columns alone: three
    # columns are cheap to read even where a branch scans (a busy node).
    # MATERIALIZED: ORDER BY + LIMIT straight over the union lets DuckDB's late
    # materialisation turn the index lookups into a full scan (4-8 s at 10^7 events).
    chosen = cursor.execute(
        f"WITH matched AS MATERIALIZED ({_union('rowid AS row_id, ts_ns, hash', branches)}) "  # noqa: S608 - fixed names
        "SELECT row_id FROM matched ORDER BY ts_ns, hash LIMIT ?",
        [*params, limit + 1],
    ).fetchall()
    truncated = len(chosen) > limit
    row_ids = [row[0] for row in chosen[:limit]]
    events = fetch_chosen(cursor, row_ids, branches, params, every_match=not truncated)
    cursor.execute("COMMIT")
    return events, truncated


def _union(columns: str, branches: list[str], *, every: bool = False) -> str:
    """``SELECT columns`` of every branch, as a ``UNION`` (``every``: ``UNION ALL``)."""
    union = " UNION ALL " if every else " UNION "
    return union.join(f"SELECT {columns} {branch}" for branch in branches)


def fetch_chosen(
    cursor: duckdb.DuckDBPyConnection,
    row_ids: list[int],
    branches: list[str],
    params: list[Any],
    *,
    every_match: bool = False,
) -> list[Event]:
    """Every column of the rows ``row_ids`` (chosen from ``branches``, in the order wanted:
    time, then hash), as Events in that order; the cursor's transaction must be the one they
    were chosen in. ``every_match``: the rows are every row the branches match."""
    if not row_ids:
        return []
    if every_match and len(row_ids) <= FETCH_ROWS:
        # Few rows, and no others match: the branches again with every column, each through
        # its index, as they come (UNION ALL: a row two branches match comes twice), put in
        # the order chosen by row id here. A UNION of every column (hashing each row's
        # ``raw`` to drop the second copy) and an ORDER BY cost twice as much: 6.5 against
        # 3.0 ms of CPU for an allocation's 11 rows of a 132-event store, 9.0 against 5.6 for
        # its 68 at 10^6 events; the planning is most of it.
        return fetch_events(
            cursor,
            _union(f"rowid, {COLUMN_LIST}", branches, every=True),
            params,
            order=row_ids,
            few=True,
        )
    by_row = row_filter(row_ids)
    if by_row is not None:
        where, row_params = by_row
        return fetch_events(
            cursor,
            f"SELECT rowid, {COLUMN_LIST} FROM events WHERE {where}",  # noqa: S608 - fixed names, bound values
            row_params,
            order=row_ids,
        )
    # Few rows of more that match (a limit under the matches): the branches again with
    # every column, through the indexes. Many rows side by side (a store ordered by node):
    # the branches again as scans the zone maps narrow down, not through the indexes (one
    # row at a time). The first len(row_ids) of them in the store's order are the rows chosen.
    few = len(row_ids) <= FETCH_ROWS
    if not few:
        cursor.execute("SET SESSION index_scan_max_count = 0")
    return fetch_events(
        cursor,
        f"WITH matched AS MATERIALIZED ({_union(COLUMN_LIST, branches)}) "  # noqa: S608 - fixed names
        "SELECT * FROM matched ORDER BY ts_ns, hash LIMIT ?",
        [*params, len(row_ids)],
        few=few,
    )


def nginx_events(
    cursor: duckdb.DuckDBPyConnection,
    unlinked_errors: bool,
    from_ns: int,
    to_ns: int,
    near: Sequence[tuple[str, str, str, int]] | None = None,
    slack_ns: int = 0,
) -> list[Event]:
    """nginx error events without a ``correlation_id`` (``unlinked_errors``) whose time is in
    ``[from_ns, to_ns)``, or access events whose request meets it, oldest first
    (``Store.nginx_events`` says why; equal times by content hash, so that the linker's
    choice between requests alike in all is the same whatever the order they were stored
    in); with ``near``, access events only of a request
    ``(client, method, path)`` whose interval, widened by ``slack_ns``, holds its time
    (``(client, method, path, ts_ns)``: an error's, as ``_nginx_error.request_key`` has it)."""
    if unlinked_errors:
        where = (
            "json_extract_string(attrs, '$.log') = 'error' AND correlation_id IS NULL AND ts_ns < ?"
        )
    else:
        # ts_ns - duration < to_ns, with the duration unrounded: never later than the
        # linker's start (it rounds to whole nanoseconds), and no cast of a huge duration
        # to BIGINT that could overflow; ts_ns - to_ns in HUGEINT, for the same reason (a
        # time at one end of the range, a window at the other).
        where = (
            "json_extract_string(attrs, '$.log') = 'access' "
            "AND CAST(ts_ns AS HUGEINT) - ? < coalesce(duration_s, 0) * 1e9"
        )
    if near is not None and not unlinked_errors:
        # The errors go in as an Arrow table of this cursor's (no text of theirs in the SQL),
        # each with the earliest end and the latest start of a request that can hold it. An
        # interval's start is computed in doubles here: 1 ms more slack keeps every access
        # line the linker's whole nanoseconds could choose.
        cursor.register(
            "linked_errors",
            pa.table(
                {
                    "client": [row[0] for row in near],
                    "m": [row[1] for row in near],
                    "p": [row[2] for row in near],
                    "lo": pa.array([max(row[3] - slack_ns, MIN_NS) for row in near], pa.int64()),
                    "hi": pa.array(
                        [min(row[3] + slack_ns + 1_000_000, MAX_NS) for row in near], pa.int64()
                    ),
                }
            ),
        )
        where += (
            " AND EXISTS (SELECT 1 FROM linked_errors k WHERE "
            "k.client = json_extract_string(attrs, '$.client') "
            "AND k.m = http_method AND k.p = http_path "
            "AND ts_ns >= k.lo AND ts_ns - coalesce(duration_s, 0) * 1e9 <= k.hi)"
        )
    sql = (
        f"SELECT {COLUMN_LIST} FROM events WHERE source = 'nginx' AND ts_ns >= ? "  # noqa: S608 - fixed text
        f"AND {where} ORDER BY ts_ns, hash"
    )
    return fetch_events(cursor, sql, [from_ns, to_ns])


def time_bounds(cursor: duckdb.DuckDBPyConnection) -> tuple[int, int] | None:
    """Earliest and latest ``ts_ns`` of all events, or None when there are none."""
    row = cursor.execute("SELECT min(ts_ns), max(ts_ns) FROM events").fetchone()
    return _bounds(row)


def _bounds(row: tuple[Any, ...] | None) -> tuple[int, int] | None:
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1])


def rejects(cursor: duckdb.DuckDBPyConnection, limit: int) -> list[dict[str, Any]]:
    """The most recent ``limit`` rejected lines, newest first, as ``{column: value}``."""
    rows = cursor.execute(
        "SELECT source, origin, line_no, reason, excerpt FROM rejects "
        "ORDER BY ingested_at DESC, origin, line_no LIMIT ?",
        [limit],
    )
    names = [d[0] for d in rows.description or ()]
    return [dict(zip(names, row, strict=True)) for row in rows.fetchall()]


def events_without_identifiers(cursor: duckdb.DuckDBPyConnection, origins: Sequence[str]) -> int:
    """How many events of ``origins`` have no identifier and no trace id."""
    if not origins:
        return 0
    unjoinable = " AND ".join(f"{column} IS NULL" for column in ID_COLUMNS)
    row = cursor.execute(
        f"SELECT count(*) FROM events WHERE origin IN (SELECT unnest(?)) AND {unjoinable}",  # noqa: S608 - fixed column names
        [list(origins)],
    ).fetchone()
    return int(row[0]) if row else 0
