"""What the store writes: new events without duplicates, rejects, links, the clustered rewrite,
and the identifier indexes dropped for a bulk load and built again after it.

A batch is a ``_raw_blocks.Packed`` one (an Arrow table of ``_schema``'s ``events_table``
form, its raw texts in compressed blocks), its table registered with DuckDB as
``staged_events`` and inserted with an anti-join on the content hash (:func:`insert_sql`,
:func:`insert_staged`), so re-ingesting the same input adds nothing; its blocks follow, those
an inserted row points into, numbered on from the store's last. Rejected lines go to the
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

from correlator._raw_blocks import BLOCK_BYTES, SMALL_BATCH, Packed
from correlator._schema import COLUMN_LIST, EVENTS_COLUMNS_DDL, INDEX_DDL
from correlator.model import Reject

__all__ = [
    "IngestResult",
    "build_indexes",
    "cluster",
    "drop_indexes",
    "drop_repeats",
    "index_names",
    "insert_rejects",
    "insert_sql",
    "insert_staged",
    "mark_unchecked",
    "rejected",
    "set_links",
    "unchecked",
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


#: The staged columns as inserted: the block numbers moved on past the stored ones ($1).
_STAGED_LIST: Final = COLUMN_LIST.replace("raw_block", "raw_block + $1")


def insert_sql(batch: Packed, *, checked: bool = True) -> str:
    """The statement inserting the new rows of ``batch`` (not empty), its table once
    registered as ``staged_events``: rows whose hash is not stored yet, one per hash, their
    blocks numbered from ``$1``. Not ``checked`` (a bulk load, :func:`drop_repeats` at its
    end): every row, as it comes when the batch is ``ordered``."""
    table = batch.table
    if not checked:
        order = "" if batch.ordered else _INSERT_ORDER
        return (
            f"INSERT INTO events ({COLUMN_LIST}) SELECT {_STAGED_LIST} FROM staged_events "  # noqa: S608 - column names come from EVENT_COLUMNS
            f"{order}"
        )
    # A batch rarely repeats a line: only then is the window that keeps one copy needed
    # (it costs a quarter of the insert; the anti-join against what is stored is cheap).
    # Rows go in ordered by node, then time: with the small row groups of Store.__init__
    # a node's events of one batch sit side by side, which is what a timeline reads.
    if _distinct(table.column("hash")):
        return (
            f"INSERT INTO events ({COLUMN_LIST}) SELECT {_STAGED_LIST} FROM staged_events s "  # noqa: S608 - column names come from EVENT_COLUMNS
            "WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.hash = s.hash) "
            f"{_INSERT_ORDER}"
        )
    return f"""
                INSERT INTO events ({COLUMN_LIST})
                SELECT {_STAGED_LIST} FROM (
                    SELECT *, row_number() OVER (PARTITION BY hash) AS n FROM staged_events
                ) AS s
                WHERE n = 1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.hash = s.hash)
                {_INSERT_ORDER}
                """  # noqa: S608 - column names come from EVENT_COLUMNS, values are bound


def _distinct(hashes: pa.ChunkedArray) -> bool:
    """Whether no hash repeats (a small batch's checked in Python: ``SMALL_BATCH``)."""
    if len(hashes) <= SMALL_BATCH:
        return len(set(hashes.to_pylist())) == len(hashes)
    # Imported here: 60 ms of every CLI query's start-up, and only a large insert needs it.
    import pyarrow.compute as pc

    return bool(pc.count_distinct(hashes).as_py() == len(hashes))


#: The number the next block stored takes.
_NEXT_BLOCK: Final = "SELECT coalesce(max(block) + 1, 0) FROM raw_blocks"
#: The blocks (from ``$1`` on) the texts of stored rows lie in.
_NEW_BLOCKS: Final = (
    "SELECT DISTINCT unnest(range(raw_block, raw_block + (raw_at + raw_len - 1) "  # noqa: S608 - a constant
    f"// {BLOCK_BYTES} + 1)) FROM events WHERE raw_block >= $1 AND raw_len > 0"
)


def insert_staged(cursor: duckdb.DuckDBPyConnection, batch: Packed, sql: str) -> int:
    """Run :func:`insert_sql`'s ``sql`` with ``batch``'s table as ``staged_events``, and store
    the blocks its inserted rows point into; the rows inserted."""
    ((base,),) = cursor.execute(_NEXT_BLOCK).fetchall()
    cursor.register("staged_events", batch.table)
    try:
        row = cursor.execute(sql, [base]).fetchone()
    finally:
        cursor.unregister("staged_events")
    inserted = int(row[0]) if row else 0
    if not inserted:
        return 0
    numbers = list(range(len(batch.blocks)))
    if inserted < batch.num_rows:
        # Some rows were stored already: only the blocks the others' texts lie in.
        rows = cursor.execute(_NEW_BLOCKS, [base]).fetchall()
        kept = {int(number) - base for (number,) in rows}
        numbers = [n for n in numbers if n in kept]
    if numbers:
        blocks = pa.table(
            {
                "block": pa.array([base + n for n in numbers], pa.int64()),
                "size": pa.array([batch.sizes[n] for n in numbers], pa.int32()),
                "data": pa.array([batch.blocks[n] for n in numbers], pa.binary()),
            }
        )
        cursor.register("staged_blocks", blocks)
        try:
            cursor.execute("INSERT INTO raw_blocks SELECT * FROM staged_blocks")
        finally:
            cursor.unregister("staged_blocks")
    return inserted


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
    """Set ``(correlation_id, attrs)`` of the events with each row's hash (the last row of a
    hash given twice), and forget the stored link cardinalities.

    One ``UPDATE ... FROM`` the rows as an Arrow table: an ``executemany`` of one update per
    row took 3 ms a row (15 s for the 4,952 links of an hour of access log at 1 % errors).
    """
    last = {row[2]: row for row in rows}
    links = pa.table(
        {
            "correlation_id": pa.array([row[0] for row in last.values()], pa.string()),
            "attrs": pa.array([row[1] for row in last.values()], pa.string()),
            "hash": pa.array(list(last), pa.int64()),
        }
    )
    cursor.register("new_links", links)
    try:
        cursor.execute(
            "UPDATE events SET correlation_id = l.correlation_id, attrs = l.attrs "
            "FROM new_links l WHERE events.hash = l.hash"
        )
    finally:
        cursor.unregister("new_links")
    # The links changed without the event count changing: the cardinalities are stale.
    cursor.execute("DELETE FROM link_cardinality")


def mark_unchecked(cursor: duckdb.DuckDBPyConnection) -> None:
    """Note in the store that rows are about to go in unchecked for repeats (a bulk load),
    and the first block their texts can lie in, so that a writer opening it after a crash
    still drops them (:func:`drop_repeats`)."""
    cursor.execute(f"INSERT INTO unchecked_loads SELECT now(), ({_NEXT_BLOCK})")


def drop_repeats(cursor: duckdb.DuckDBPyConnection) -> int:
    """Delete every row whose hash an earlier row has (rows a bulk load inserted unchecked:
    a line given twice, or stored already), the blocks only they pointed into, and the note
    :func:`mark_unchecked` left; the rows deleted. One pass over the hashes when none repeats
    (1 s at 10^7 events): far less than checking each batch against every stored hash as it
    goes in (12 s)."""
    ((repeats,),) = cursor.execute("SELECT count(*) - count(DISTINCT hash) FROM events").fetchall()
    if repeats:
        cursor.execute(
            "DELETE FROM events WHERE rowid IN (SELECT rowid FROM (SELECT rowid, "
            "row_number() OVER (PARTITION BY hash ORDER BY rowid) AS n FROM events "
            "WHERE hash IN (SELECT hash FROM events GROUP BY hash HAVING count(*) > 1)) "
            "WHERE n > 1)"
        )
        # The rows kept are the earliest: a block from before the load is a kept row's.
        cursor.execute(
            f"DELETE FROM raw_blocks WHERE block >= $1 AND block NOT IN ({_NEW_BLOCKS})",  # noqa: S608 - a constant
            [_first_unchecked_block(cursor)],
        )
    cursor.execute("DELETE FROM unchecked_loads")
    return int(repeats)


def _first_unchecked_block(cursor: duckdb.DuckDBPyConnection) -> int:
    """The first block an unchecked load's rows can point into (0 when no load noted one)."""
    ((first,),) = cursor.execute(
        "SELECT coalesce(min(first_block), 0) FROM unchecked_loads"
    ).fetchall()
    return int(first)


def unchecked(cursor: duckdb.DuckDBPyConnection) -> bool:
    """Whether a bulk load's rows were left unchecked for repeats (it did not end)."""
    ((count,),) = cursor.execute("SELECT count(*) FROM unchecked_loads").fetchall()
    return bool(count)


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
