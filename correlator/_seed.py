"""A timeline's seed read once: its time bounds, its link counts and its rows, from one scan.

Every timeline and graph starts from one identifier, the seed: the expansion's time window
comes from the seed's first and last evidence, the expansion itself from the identifiers seen
with the seed, and most of a busy seed's answer is its own events. :func:`read_seed` reads the
row id, time and other identifiers of every row of the seed in one query (through the
column's index when few rows match, a scan the zone maps narrow down otherwise), in the
store's order (time, then hash), and takes all three from it. For a busy node at 10^7 events
that is one query of ~25 ms where the bounds, the link counts and the choice of rows were
three of ~70-80 ms together, all of it on the critical path of a timeline
(``benchmarks/RESULTS.md``).

The link counts are those of every row of the seed: the expansion's window is the seed's
bounds widened, so it holds every one of them, and ``_links.link_counts`` over that window
counts the same. :meth:`Seed.events` then reads every column of the rows chosen, in the
transaction the row ids were read in: a concurrent ``cluster()`` rewrites the table, and a
row id names a row only within one snapshot.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb

from correlator._reads import fetch_chosen
from correlator._rows import time_window
from correlator.model import IDENTIFIER_KEYS, Event

__all__ = ["Seed", "read_seed"]


class Seed:
    """One identifier's rows, read by :func:`read_seed` on a cursor in an open transaction.

    Attributes:
        key: the identifier kind (one of IDENTIFIER_KEYS).
        value: its value.
        bounds: the earliest and latest ``ts_ns`` of its evidence, or None when there is none.
        link_counts: the other identifiers seen with it and on how many events,
            ``{other_key: {other_value: events}}`` (only kinds seen, in IDENTIFIER_KEYS order).
    """

    def __init__(
        self,
        cursor: duckdb.DuckDBPyConnection,
        key: str,
        value: str,
        row_ids: list[int],
        times: list[int],
        link_counts: dict[str, dict[str, int]],
    ) -> None:
        self._cursor = cursor
        self.key = key
        self.value = value
        self._row_ids = row_ids
        self._times = times
        self.bounds = (times[0], times[-1]) if times else None
        self.link_counts = link_counts

    def events(
        self, from_ns: int | None, to_ns: int | None, limit: int
    ) -> tuple[list[Event], bool]:
        """The seed's events in ``[from_ns, to_ns)`` (either bound optional), oldest first
        (time, then hash): at most ``limit``, and whether more matched. What
        ``Store.events_matching({key: [value]}, ...)`` answers, without choosing the rows
        again. Call it once, before the transaction ends (from any one thread)."""
        low = from_ns if from_ns is not None else -(2**63)
        high = to_ns if to_ns is not None else 2**63
        if from_ns is None and to_ns is None:
            chosen = self._row_ids[: limit + 1]
        else:
            chosen = [
                r for r, ts in zip(self._row_ids, self._times, strict=True) if low <= ts < high
            ]
        truncated = len(chosen) > limit
        window, window_params = time_window(from_ns, to_ns)
        branch = f"FROM events WHERE {self.key} = ?{window}"  # the key is an identifier column
        events = fetch_chosen(self._cursor, chosen[:limit], [branch], [self.value, *window_params])
        return events, truncated


def read_seed(cursor: duckdb.DuckDBPyConnection, key: str, value: str) -> Seed:
    """Read the seed ``key = value`` on ``cursor``, which must be in a transaction that lasts
    until :meth:`Seed.events` has been called. ``key`` must be one of IDENTIFIER_KEYS (the
    caller checks: it is formatted into SQL)."""
    if key not in IDENTIFIER_KEYS:
        raise ValueError(f"{key!r} is not an identifier kind")
    others = [k for k in IDENTIFIER_KEYS if k != key]
    table = cursor.sql(
        f"SELECT rowid, ts_ns, {', '.join(others)} FROM events WHERE {key} = ? "  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
        "ORDER BY ts_ns, hash",
        params=[value],
    ).to_arrow_table()
    columns: list[list[Any]] = [column.to_pylist() for column in table.columns]
    link_counts: dict[str, dict[str, int]] = {}
    for other, values in zip(others, columns[2:], strict=True):
        counts = Counter(values)
        counts.pop(None, None)
        if counts:
            link_counts[other] = dict(counts)
    return Seed(cursor, key, value, columns[0], columns[1], link_counts)
