"""What the store writes: new events without duplicates, rejects, links, the clustered rewrite,
and the identifier indexes dropped for a bulk load and built again after it.

A batch is an Arrow table of ``_schema``'s ``events_table`` form, registered with DuckDB as
``staged_events`` and inserted with an anti-join on the content hash (:func:`insert_sql`,
:func:`insert_staged`), so re-ingesting the same input adds nothing. Rejected lines go to the
``rejects`` table (:func:`insert_rejects`), counted by reason (:class:`IngestResult`).
:func:`set_links` stores the identifiers linking gave events; :func:`cluster` rewrites
``events`` in node order. Each function writes with the cursor it is given: the store's
writer, under its lock. Column names are formatted into SQL only from the fixed
``EVENT_COLUMNS``; values are always bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import duckdb
import pyarrow as pa

from correlator._schema import COLUMN_LIST, EVENTS_COLUMNS_DDL, INDEX_DDL
from correlator.model import Reject

__all__ = [
    "IngestResult",
    "build_indexes",
    "cluster",
    "drop_indexes",
    "index_names",
    "insert_rejects",
    "insert_sql",
    "insert_staged",
    "rejected",
    "set_links",
]

_INSERT_ORDER: Final = "ORDER BY node_id, ts_ns, hash"


@dataclass
class IngestResult:
    """What one ingest did: accepted (new), duplicate (already stored), rejected by reason,
    and what a source said of its inputs (``--format auto chose oslo ...``)."""

    accepted: int = 0
    duplicate: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def add(self, other: IngestResult) -> None:
        self.accepted += other.accepted
        self.duplicate += other.duplicate
        self.rejected.update(other.rejected)
        self.notes.extend(other.notes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(self.rejected.most_common()),
            "notes": list(self.notes),
        }


def _reason_kind(reason: str) -> str:
    """Group reject reasons for the summary: the text before any line-specific detail."""
    text = reason.split(":", 1)[0]
    return " ".join(word for word in text.split() if not word.isdigit())[:80]


def insert_sql(table: pa.Table) -> str:
    """The statement inserting the new rows of ``table`` (not empty), once registered as
    ``staged_events``: rows whose hash is not stored yet, one per hash."""
    # A batch rarely repeats a line: only then is the window that keeps one copy needed
    # (it costs a quarter of the insert; the anti-join against what is stored is cheap).
    # Rows go in ordered by node, then time: with the small row groups of Store.__init__
    # a node's events of one batch sit side by side, which is what a timeline reads.
    if _distinct(table.column("hash")):
        return (
            f"INSERT INTO events ({COLUMN_LIST}) SELECT {COLUMN_LIST} FROM staged_events s "  # noqa: S608 - column names come from EVENT_COLUMNS
            "WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.hash = s.hash) "
            f"{_INSERT_ORDER}"
        )
    return f"""
                INSERT INTO events ({COLUMN_LIST})
                SELECT {COLUMN_LIST} FROM (
                    SELECT *, row_number() OVER (PARTITION BY hash) AS n FROM staged_events
                ) AS s
                WHERE n = 1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.hash = s.hash)
                {_INSERT_ORDER}
                """  # noqa: S608 - column names come from EVENT_COLUMNS, values are bound


#: Batches of up to this many rows are checked for repeated hashes in Python: importing
#: ``pyarrow.compute`` takes 60 ms, a tenth of a pull from Loki, for a set of a few rows.
_SMALL_BATCH: Final = 8192


def _distinct(hashes: pa.ChunkedArray) -> bool:
    """Whether no hash repeats."""
    if len(hashes) <= _SMALL_BATCH:
        return len(set(hashes.to_pylist())) == len(hashes)
    # Imported here: 60 ms of every CLI query's start-up, and only a large insert needs it.
    import pyarrow.compute as pc

    return bool(pc.count_distinct(hashes).as_py() == len(hashes))


def insert_staged(cursor: duckdb.DuckDBPyConnection, table: pa.Table, sql: str) -> int:
    """Run :func:`insert_sql`'s ``sql`` with ``table`` as ``staged_events``; the rows inserted."""
    cursor.register("staged_events", table)
    try:
        row = cursor.execute(sql).fetchone()
    finally:
        cursor.unregister("staged_events")
    return int(row[0]) if row else 0


def insert_rejects(cursor: duckdb.DuckDBPyConnection, rejects: Sequence[Reject]) -> None:
    """Keep rejected lines with file, line number and reason, each once: re-ingesting the
    same input adds no second copy of its rejects (the same source, origin, line number,
    reason and excerpt)."""
    batch = pa.table(
        {
            "source": [r.source for r in rejects],
            "origin": [r.origin for r in rejects],
            "line_no": pa.array([r.line_no for r in rejects], pa.int64()),
            "reason": [r.reason for r in rejects],
            "excerpt": pa.array([r.excerpt for r in rejects], pa.string()),
        }
    )
    cursor.register("rejects_batch", batch)
    try:
        cursor.execute(
            "INSERT INTO rejects (source, origin, line_no, reason, excerpt) "
            "SELECT DISTINCT * FROM rejects_batch b WHERE NOT EXISTS (SELECT 1 FROM rejects r "
            "WHERE r.source = b.source AND r.origin = b.origin AND r.line_no = b.line_no "
            "AND r.reason = b.reason AND r.excerpt IS NOT DISTINCT FROM b.excerpt)"
        )
    finally:
        cursor.unregister("rejects_batch")


def rejected(rejects: Sequence[Reject]) -> IngestResult:
    """The rejects as an ingest's result: counted by the kind of their reason."""
    return IngestResult(rejected=Counter(_reason_kind(r.reason) for r in rejects))


def set_links(
    cursor: duckdb.DuckDBPyConnection, rows: Sequence[tuple[str | None, str, int]]
) -> None:
    """Set ``(correlation_id, attrs)`` of the events with each row's hash, and forget the
    stored link cardinalities."""
    cursor.executemany("UPDATE events SET correlation_id = ?, attrs = ? WHERE hash = ?", rows)
    # The links changed without the event count changing: the cardinalities are stale.
    cursor.execute("DELETE FROM link_cardinality")


def cluster(cursor: duckdb.DuckDBPyConnection) -> None:
    """Rewrite ``events`` in ``(node_id, ts_ns, hash)`` order, indexes included
    (``Store.cluster`` says when it pays)."""
    cursor.execute(f"CREATE TABLE events_clustered ({EVENTS_COLUMNS_DDL})")
    cursor.execute(
        f"INSERT INTO events_clustered SELECT {COLUMN_LIST} FROM events "  # noqa: S608 - fixed names
        "ORDER BY node_id, ts_ns, hash"
    )
    cursor.execute("DROP TABLE events")  # its indexes go with it
    cursor.execute("ALTER TABLE events_clustered RENAME TO events")
    build_indexes(cursor)


def index_names(cursor: duckdb.DuckDBPyConnection) -> list[str]:
    """The names of the indexes of ``events`` in the cursor's database, sorted."""
    rows = cursor.execute(
        "SELECT index_name FROM duckdb_indexes() "
        "WHERE table_name = 'events' AND database_name = current_database() ORDER BY 1"
    ).fetchall()
    return [name for (name,) in rows]


def drop_indexes(cursor: duckdb.DuckDBPyConnection) -> None:
    """Drop the indexes of ``events`` (:func:`build_indexes` builds them again)."""
    for name in index_names(cursor):
        cursor.execute(f'DROP INDEX "{name}"')


def build_indexes(cursor: duckdb.DuckDBPyConnection) -> None:
    """Build the identifier indexes of ``events`` that are missing, one pass over it each."""
    cursor.execute(INDEX_DDL)
