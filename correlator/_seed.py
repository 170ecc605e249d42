"""A timeline's seed read once for the expansion: its time bounds and its link counts.

Every timeline and graph starts from one identifier, the seed: the expansion's time window
comes from the seed's first and last evidence, and the expansion itself from the identifiers
seen with the seed. :func:`read_seed` reads the time and the other identifiers of every row of
the seed in one query (through the column's index when few rows match, a scan the zone maps
narrow down otherwise) and takes both from it: for a busy node at 10^7 events one query of
~20 ms where the bounds and the link counts were two of ~55-70 ms together
(``benchmarks/RESULTS.md``).

The link counts are those of every row of the seed: the expansion's window is the seed's
bounds widened, so it holds every one of them, and ``_links.link_counts`` over that window
counts the same.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from operator import is_not

import duckdb

from correlator.model import IDENTIFIER_KEYS

__all__ = ["Seed", "read_seed"]

_is_set = partial(is_not, None)


@dataclass(frozen=True, slots=True)
class Seed:
    """What the expansion needs of its seed identifier.

    Attributes:
        key: the identifier kind (one of IDENTIFIER_KEYS).
        value: its value.
        bounds: the earliest and latest ``ts_ns`` of its evidence, or None when there is none.
        link_counts: the other identifiers seen with it and on how many events,
            ``{other_key: {other_value: events}}`` (only kinds seen, in IDENTIFIER_KEYS order).
    """

    key: str
    value: str
    bounds: tuple[int, int] | None
    link_counts: dict[str, dict[str, int]]


def read_seed(cursor: duckdb.DuckDBPyConnection, key: str, value: str) -> Seed:
    """Read the seed ``key = value``. ``key`` must be one of IDENTIFIER_KEYS (the caller
    checks, ``Store.seed``: it is formatted into SQL)."""
    others = [k for k in IDENTIFIER_KEYS if k != key]
    table = cursor.sql(
        f"SELECT ts_ns, {', '.join(others)} FROM events WHERE {key} = ?",  # noqa: S608 - names from the fixed IDENTIFIER_KEYS, values bound
        params=[value],
    ).to_arrow_table()
    times, *columns = (column.to_pylist() for column in table.columns)
    link_counts: dict[str, dict[str, int]] = {}
    for other, values in zip(others, columns, strict=True):
        # The rows without this identifier (most rows of a node carry no correlation id) are
        # dropped in C before counting rather than counted and popped.
        counts = Counter(filter(_is_set, values))
        if counts:
            link_counts[other] = dict(counts)
    bounds = (min(times), max(times)) if times else None
    return Seed(key, value, bounds, link_counts)
