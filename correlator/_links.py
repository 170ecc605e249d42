"""What the identifier graph is built from: link counts and link cardinalities, in SQL.

A link is two identifiers seen on the same event. :func:`link_counts` says, for one
identifier, which others were seen with it and on how many events (in a time window);
:func:`link_counts_many` does the same for many at once; :func:`compute_cardinalities`
measures, over all evidence, the most values of one kind seen with a single value of another
(1:1, 1:n, m:n come from these). Identifier column names are formatted into SQL only from the
fixed ``IDENTIFIER_KEYS``; values are always bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb

from correlator._rows import FETCH_ROWS, by_row_id, one_of, time_window
from correlator.errors import QueryError
from correlator.model import IDENTIFIER_KEYS

__all__ = [
    "compute_cardinalities",
    "link_counts",
    "link_counts_many",
    "store_cardinalities",
    "stored_cardinalities",
]


def link_counts(
    cursor: duckdb.DuckDBPyConnection,
    key: str,
    value: str,
    from_ns: int | None,
    to_ns: int | None,
) -> dict[str, dict[str, int]]:
    """For events with ``key = value`` in ``[from_ns, to_ns)``: the other identifiers seen with
    it and how often, ``{other_key: {other_value: events}}``. ``key`` must be an identifier
    column (the caller checks)."""
    others = [k for k in IDENTIFIER_KEYS if k != key]
    low = from_ns if from_ns is not None else -(2**63)
    high = to_ns if to_ns is not None else 2**63
    cursor.execute("BEGIN TRANSACTION")  # the row ids must name the same rows twice
    row_ids = [
        row[0]
        for row in cursor.execute(
            f"SELECT rowid FROM events WHERE {key} = ?",  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
            [value],
        ).fetchall()
    ]
    if len(row_ids) > FETCH_ROWS:
        found = _counted(cursor, key, value, others, row_ids, from_ns, to_ns)
        cursor.execute("COMMIT")
        return found
    # The rows themselves, filtered by time and counted here: with the window in the SQL,
    # DuckDB prefers a scan of the row groups the window spans over the index (~20 ms against
    # ~1 ms at 10^7 events), and grouping in SQL costs more in planning than it saves for the
    # few rows most identifiers have.
    rows = cursor.execute(
        f"SELECT ts_ns, {', '.join(others)} FROM events WHERE {key} = ?",  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
        [value],
    ).fetchall()
    cursor.execute("COMMIT")
    rows = [row for row in rows if low <= row[0] < high]
    result: dict[str, dict[str, int]] = {}
    for i, other in enumerate(others, 1):
        counts = Counter(row[i] for row in rows if row[i] is not None)
        if counts:
            result[other] = dict(counts)
    return result


def _counted(
    cursor: duckdb.DuckDBPyConnection,
    key: str,
    value: str,
    others: Sequence[str],
    row_ids: Sequence[int],
    from_ns: int | None,
    to_ns: int | None,
) -> dict[str, dict[str, int]]:
    """link_counts of an identifier with many rows (a busy node's 10^4): counted by DuckDB,
    the rows read by row id when spread out (~70 ms instead of ~250 ms at 10^7 events, see
    ``_rows``) or by a scan the zone maps narrow down."""
    # By the list of row ids even where they form a few runs: with five narrow columns to
    # read, ranges are no cheaper here (timed: 30-38 ms either way at 10^7 events).
    params: list[Any]
    if by_row_id(row_ids):
        where, params = "rowid = ANY(?::BIGINT[])", [list(row_ids)]
    else:
        cursor.execute("SET SESSION index_scan_max_count = 0")
        where, params = f"{key} = ?", [value]
    window, window_params = time_window(from_ns, to_ns)
    where += window
    params += window_params
    counted = " UNION ALL ".join(
        f"SELECT {i}, {other}, count(*) FROM linked WHERE {other} IS NOT NULL GROUP BY 2"  # noqa: S608 - names from the fixed IDENTIFIER_KEYS
        for i, other in enumerate(others)
    )
    rows = cursor.execute(
        f"WITH linked AS MATERIALIZED (SELECT {', '.join(others)} FROM events "  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
        f"WHERE {where}) {counted}",
        params,
    ).fetchall()
    result: dict[str, dict[str, int]] = {}
    for i, other_value, count in rows:
        result.setdefault(others[i], {})[other_value] = int(count)
    return {other: result[other] for other in others if other in result}


def link_counts_many(
    cursor: duckdb.DuckDBPyConnection,
    pairs: Iterable[tuple[str, str]],
    from_ns: int | None,
    to_ns: int | None,
    table_rows: int,
) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
    """:func:`link_counts` of many identifiers at once: one query instead of one each.

    ``table_rows`` (the events the store holds) decides how each kind's list is looked for
    (``_rows.one_of``).

    Returns:
        ``{(key, value): {other_key: {other_value: events}}}`` for every pair given (an empty
        mapping when nothing links it).

    Raises:
        QueryError: an unknown identifier key.
    """
    wanted = list(dict.fromkeys(pairs))
    result: dict[tuple[str, str], dict[str, dict[str, int]]] = {p: {} for p in wanted}
    by_key: dict[str, list[str]] = {}
    for key, value in wanted:
        if key not in IDENTIFIER_KEYS:
            raise QueryError(f"unknown identifier key {key!r}")
        by_key.setdefault(key, []).append(value)
    if not by_key:
        return result
    # One branch per identifier kind, its column the branch's one filter, so that DuckDB
    # answers it from that column's index while at most 2,048 rows match (an IN list of 20
    # allocations: ~18 ms at 10^7 events, against ~45 ms for 20 lookups and ~2 s for a UNION of
    # 500 one-value branches, which DuckDB spends planning), or by a scan on a small store. The
    # time window is applied here, after the lookup (see link_counts).
    ids = ", ".join(IDENTIFIER_KEYS)
    branches: list[str] = []
    params: list[Any] = []
    for key, values in by_key.items():
        position = IDENTIFIER_KEYS.index(key)
        condition, condition_params = one_of(key, values, table_rows)
        branches.append(
            f"SELECT {position} AS own, ts_ns, {ids} FROM events WHERE {condition}"  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
        )
        params.extend(condition_params)
    rows = cursor.execute(" UNION ALL ".join(branches), params).fetchall()
    low = from_ns if from_ns is not None else -(2**63)
    high = to_ns if to_ns is not None else 2**63
    counters: dict[tuple[str, str], dict[int, Counter[str]]] = {}
    for row in rows:
        if not low <= row[1] < high:
            continue
        own = row[0]
        per_kind = counters.setdefault((IDENTIFIER_KEYS[own], row[2 + own]), {})
        for i in range(len(IDENTIFIER_KEYS)):
            value = row[2 + i]
            if i != own and value is not None:
                counter = per_kind.get(i)
                if counter is None:
                    counter = per_kind[i] = Counter()
                counter[value] += 1
    for pair, per_kind in counters.items():
        result[pair] = {IDENTIFIER_KEYS[i]: dict(per_kind[i]) for i in sorted(per_kind)}
    return result


def stored_cardinalities(
    cursor: duckdb.DuckDBPyConnection, count: int
) -> dict[tuple[str, str], tuple[int, int]] | None:
    """The cardinalities the ``link_cardinality`` table holds for a store of ``count`` events,
    or None (none stored for that count, or a file written before the table existed)."""
    try:
        rows = cursor.execute(
            "SELECT near, far, far_per_near, near_per_far FROM link_cardinality WHERE events = ?",
            [count],
        ).fetchall()
    except duckdb.CatalogException:
        return None
    if len(rows) != len(IDENTIFIER_KEYS) * (len(IDENTIFIER_KEYS) - 1):
        return None
    return {(near, far): (int(a), int(b)) for near, far, a, b in rows}


def store_cardinalities(
    cursor: duckdb.DuckDBPyConnection,
    result: Mapping[tuple[str, str], tuple[int, int]],
    count: int,
) -> None:
    """Replace the ``link_cardinality`` table's rows with ``result``, for ``count`` events."""
    cursor.execute("DELETE FROM link_cardinality")
    cursor.executemany(
        "INSERT INTO link_cardinality VALUES (?, ?, ?, ?, ?)",
        [(near, far, a, b, count) for (near, far), (a, b) in sorted(result.items())],
    )


def compute_cardinalities(
    cursor: duckdb.DuckDBPyConnection,
) -> dict[tuple[str, str], tuple[int, int]]:
    """For each pair of identifier kinds (a, b): the most b values seen with one a value, and
    the most a values seen with one b value, over all evidence: one scan per pair, for the
    distinct (a, b) pairs both counts are taken from (1.7 against 3.0 s at 10^7 events for
    a scan per count)."""
    pairs, parts = [], []
    for i, a in enumerate(IDENTIFIER_KEYS):
        for b in IDENTIFIER_KEYS[i + 1 :]:
            name = f"{a}__{b}"
            pairs.append(
                f"{name} AS MATERIALIZED (SELECT DISTINCT {a}, {b} FROM events "  # noqa: S608 - names from the fixed IDENTIFIER_KEYS
                f"WHERE {a} IS NOT NULL AND {b} IS NOT NULL)"
            )
            parts.append(
                f"SELECT '{a}', '{b}', "  # noqa: S608 - names from the fixed IDENTIFIER_KEYS
                f"(SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM {name} GROUP BY {a})), "
                f"(SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM {name} GROUP BY {b}))"
            )
    rows = cursor.execute("WITH " + ", ".join(pairs) + " " + " UNION ALL ".join(parts)).fetchall()
    result: dict[tuple[str, str], tuple[int, int]] = {}
    for a, b, b_per_a, a_per_b in rows:
        result[(a, b)] = (int(b_per_a), int(a_per_b))
        result[(b, a)] = (int(a_per_b), int(b_per_a))
    return result
