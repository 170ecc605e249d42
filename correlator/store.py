"""The DuckDB store: one ``events`` table, one ``rejects`` table, one writer.

Ingest is columnar: adapters' events become one Arrow table per batch, which DuckDB inserts in
bulk with an anti-join on the content hash, so re-ingesting the same input adds nothing and
costs one hash join, not a per-row lookup. Readers get their own cursor (DuckDB cursors are
independent connections to the same database); the writer is serialised by a lock.

The store keeps nothing that cannot be rebuilt from its sources: deleting the file and
re-ingesting gives the same answers.

What keeps a timeline fast at 10^7 events (``benchmarks/correlator.py``, figures in
``benchmarks/RESULTS.md``): an ART index per identifier column (a lookup costs 1-3 ms where a
scan costs ~80 ms at 10^6 events; keeping them costs ~2.5 µs per inserted event), used only
while the indexed column is the scan's one filter and at most ``index_scan_max_count`` rows
match, so the queries (``_reads``, ``_seed``, ``_links``, ``_parents``) keep other conditions
out of the scan: a ``UNION`` of one branch per identifier kind rather than an ``OR``, time
windows applied after the lookup. Large answers (a busy node's 10,000 events) are read in two
steps: which rows, in order, from a few narrow columns; then every column of just those rows
(``_rows``). Each inserted batch is sorted by node, then time, into row groups of 16,384 rows
(see :class:`Store`), so a busy node's events of one batch sit side by side. The link
cardinalities are kept in a table of their own, so that a process opening the store for one
question (the CLI) does not rescan every event first. Ingest runs one transaction per input
(:meth:`Store.bulk`): DuckDB writes full row groups straight to the file instead of logging
every row to the WAL. The tables' columns, types and DDL are in ``_schema``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final

import duckdb
import orjson
import pyarrow as pa

from correlator import _lifecycle, _links, _reads, _writes
from correlator._parents import ParentQuery, parent_events_many
from correlator._raw_blocks import Packed, pack, raw_texts
from correlator._read_cache import EVENT_BYTES, ReadCache, first, same
from correlator._reads import ID_COLUMNS
from correlator._rows import INDEX_ROWS
from correlator._schema import DDL, columns_from_events, events_table
from correlator._seed import Seed, read_seed
from correlator._writes import IngestResult
from correlator.errors import QueryError, SourceError
from correlator.latency import DEFAULT_PHASES, Incomplete, Samples
from correlator.model import IDENTIFIER_KEYS, Event, Reject

__all__ = ["LIFECYCLE_LIMIT", "IngestResult", "Store"]

#: The name the database file is attached under, and the row-group size of new rows (DuckDB's
#: default is 122,880): see Store.__init__.
_DATABASE: Final = "evidence"
_ROW_GROUP_ROWS: Final = 16_384
#: The WAL a bulk load lets grow before DuckDB checkpoints (Store.indexes_after).
_LOAD_CHECKPOINT: Final = "1TB"
#: Findings read at most this many lifecycle events, as Python objects (~7 KB each while they
#: are read: all 793,000 of a 10^7-event store took 5.7 GB and 13-29 s); past it their answer
#: says ``truncated``. They read only the events of entities that can make a finding
#: (:meth:`Store.finding_events`), so a store reaches it only when that many are stuck.
LIFECYCLE_LIMIT: Final = 1_000_000


class Store:
    """A DuckDB database file (or ``:memory:``) holding the evidence.

    Reads of the evidence a timeline is built from (its seed, links, events and parents'
    events) are kept in :attr:`cache` until the next write (``_read_cache``): each write that
    commits adds one to :attr:`generation`. No other process can write the file meanwhile
    (DuckDB locks it), so the generation counts every change a read could see; a write that
    stores nothing new (every row a duplicate) does not move it.

    Args:
        path: the database file; created with its tables when missing.
        read_only: open without write access (several processes may read one file).

    Raises:
        SourceError: the file cannot be opened (locked by a writer, not a database).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        # The file is attached rather than opened: DuckDB takes the row-group size of a table's
        # new rows from the attach, not from the file. Small row groups of rows sorted by node
        # (see insert_table) put a busy node's 10,000 events in ~20 vectors instead of ~2,000
        # (DuckDB reads them in 18 ms instead of ~1 s at 10^7 events), for no measurable cost
        # per inserted event and a 17 % smaller file. Every connection (cursor) must USE it.
        mode = ", READ_ONLY" if read_only else ""
        quoted = self.path.replace("'", "''")
        try:
            self._db = duckdb.connect(":memory:")
            self._db.execute(
                f"ATTACH '{quoted}' AS {_DATABASE} (ROW_GROUP_SIZE {_ROW_GROUP_ROWS}{mode})"
            )
            self._db.execute(f"USE {_DATABASE}")
        except duckdb.Error as exc:
            raise SourceError(f"cannot open the correlator database {self.path}: {exc}") from exc
        # Reentrant: an insert inside bulk() takes it again on the same thread.
        self._write_lock = threading.RLock()
        self._bulk: duckdb.DuckDBPyConnection | None = None
        self._read_only = read_only
        # (events, generation, cardinalities): valid while the generation is the store's.
        self._cardinality: tuple[int, int, dict[tuple[str, str], tuple[int, int]]] | None = None
        self.generation = 0
        #: Whether the write transaction in progress changed what reads answer (under the
        #: write lock; read by bulk() and _writer() at its commit).
        self._changed = False
        #: Inside indexes_after(): inserts leave the check for repeats to its end.
        self._unchecked = False
        self.cache = ReadCache()
        # An index lookup only for up to 2,048 rows (DuckDB's index_scan_max_count), not 0.1 %
        # of the table: fetching a busy node's 10,000 rows one by one through the index is
        # slower than scanning, and far slower than the one row group they fill once clustered.
        self._db.execute(f"SET index_scan_max_count = {INDEX_ROWS}")
        self._db.execute("SET index_scan_percentage = 0")
        self._refuse_old_layout()  # before the DDL, which would change the file
        if not read_only:
            self._db.execute(DDL)
        if not read_only and _writes.unchecked(self._db):
            # A bulk load did not end (the indexes DDL has just built again): its repeats.
            with self._writer() as cursor:
                _writes.drop_repeats(cursor)

    def _refuse_old_layout(self) -> None:
        """Refuse a store whose ``events`` still hold ``raw`` (written before the raw texts
        moved to ``raw_blocks``): its rows cannot be read as this version reads them."""
        row = self._db.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
            "AND table_name = 'events' AND column_name = 'raw'"
        ).fetchone()
        if row and row[0]:
            self._db.close()
            raise SourceError(
                f"the correlator database {self.path} was written by an earlier version "
                "(its events table keeps each raw line in a column): ingest its evidence "
                "into a new database file"
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a reader (one per request or thread)."""
        cursor = self._db.cursor()
        cursor.execute(f"USE {_DATABASE}")
        return cursor

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Run the inserts inside the block as one transaction, committed at its end.

        DuckDB writes the row groups of a large transaction straight to the database file
        (optimistic writes) instead of logging each row to the WAL and rewriting it at the next
        checkpoint: about three times cheaper per event for a 50,000-event batch. The write lock
        is held throughout, so other writers wait; readers see the new events at the commit.
        Nested blocks join the outer one.

        Raises:
            duckdb.Error: the commit failed (everything inside the block is rolled back, as it
                is when the block raises).
        """
        with self._write_lock:
            if self._bulk is not None:
                yield
                return
            cursor = self.cursor()
            cursor.execute("BEGIN")
            self._bulk = cursor
            self._changed = False
            try:
                yield
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            else:
                cursor.execute("COMMIT")
                self.generation += self._changed
            finally:
                self._bulk = None
                cursor.close()

    @contextmanager
    def _writer(self, *, evidence: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """The cursor to write with: the bulk transaction's, or a new one in a transaction.
        ``evidence``: the write changes what reads answer (not only what the store keeps
        for itself, as the link cardinalities), so its commit moves :attr:`generation`. A
        write that knows whether it changed anything (an insert whose rows were all stored
        already) passes False and sets :attr:`_changed` itself."""
        with self._write_lock:
            if self._bulk is not None:
                self._changed |= evidence
                yield self._bulk
                return
            cursor = self.cursor()
            try:
                cursor.execute("BEGIN")
                self._changed = evidence
                try:
                    yield cursor
                except BaseException:
                    cursor.execute("ROLLBACK")
                    raise
                cursor.execute("COMMIT")
                self.generation += self._changed
            finally:
                cursor.close()

    @contextmanager
    def indexes_after(self) -> Iterator[IngestResult]:
        """Load inside the block without the identifier indexes and without checking each
        batch for rows stored already; drop the repeats and build the indexes at its end.

        Building an index over the rows in one pass costs less than keeping it up row by row:
        storing 10^7 events took 54.7 s with the indexes built after, 62.5 s kept up
        (``benchmarks/RESULTS.md``, eleventh session). Checking the whole load for repeated
        hashes once costs less than joining each batch against every stored hash (1 against
        12 s at 10^7 events, ``_writes.drop_repeats``). Worth it for a load into an empty or
        small store (the build and the check read every stored row too). Queries meanwhile
        find no index and may see a line given twice twice: slower, and only until the end.
        Both are done at the end whatever happens inside, and a writer opening the store
        does them when a load did not end (a crash, say: ``unchecked_loads`` says so).
        Meanwhile DuckDB does not checkpoint at each input's commit (its WAL past 16 MB:
        an input's raw texts' blocks, fewer rows than a row group, are logged) but once,
        after the repeats are dropped and before the indexes are built: 0.8 s at 10^7
        events, where the same checkpoint at the commit that built them took 1.3-2.8 s.
        (A crash between the two commits leaves the indexes to the next writer's DDL.)

        Yields:
            What the check at the end takes back from the load's counts (filled in then):
            rows counted accepted that were repeats.
        """
        with self._writer(evidence=False) as cursor:
            _writes.drop_indexes(cursor)
            _writes.mark_unchecked(cursor)
        correction = IngestResult()
        self._unchecked = True
        self._db.execute(f"SET checkpoint_threshold = '{_LOAD_CHECKPOINT}'")
        try:
            yield correction
        finally:
            self._unchecked = False
            self._db.execute("RESET checkpoint_threshold")
            with self._writer(evidence=False) as cursor:
                repeats = _writes.drop_repeats(cursor)
                self._changed |= repeats > 0
            self._db.execute("CHECKPOINT")
            with self._writer(evidence=False) as cursor:
                _writes.build_indexes(cursor)
            correction.accepted -= repeats
            correction.duplicate += repeats

    def insert_columns(self, columns: Mapping[str, Sequence[Any]]) -> IngestResult:
        """Insert one batch given as columns; duplicates (by content hash) are skipped."""
        return self.insert_table(events_table(columns))

    def insert_table(self, table: pa.Table | Packed) -> IngestResult:
        """Insert one batch given as an Arrow table of :func:`events_table`'s schema, or as
        such a table packed (:func:`~correlator._raw_blocks.pack`, which workers can run);
        duplicates (by content hash, within the batch or already stored) are skipped."""
        staged = table.num_rows
        if staged == 0:
            return IngestResult()
        batch = table if isinstance(table, Packed) else pack(table)
        sql = _writes.insert_sql(batch, checked=not self._unchecked)
        # Only new rows move the generation: a pull that asks Loki again, or a file ingested
        # twice, leaves what reads answer (and the answers the service keeps) as they were.
        with self._writer(evidence=False) as cursor:
            inserted = _writes.insert_staged(cursor, batch, sql)
            self._changed |= inserted > 0
        return IngestResult(accepted=inserted, duplicate=staged - inserted)

    @staticmethod
    def _count(cursor: duckdb.DuckDBPyConnection) -> int:
        row = cursor.execute("SELECT count(*) FROM events").fetchone()
        return int(row[0]) if row else 0

    def insert_events(self, events: Sequence[Event]) -> IngestResult:
        """Insert events (as the adapters yield them)."""
        return self.insert_columns(columns_from_events(events))

    def insert_rejects(self, rejects: Sequence[Reject]) -> IngestResult:
        """Keep rejected lines with file, line number and reason."""
        if not rejects:
            return IngestResult()
        with self._writer() as cursor:
            _writes.insert_rejects(cursor, rejects)
        return _writes.rejected(rejects)

    # -- reading -------------------------------------------------------------------------

    @contextmanager
    def _reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own for one read, closed at the end of the block."""
        cursor = self.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def count(self) -> int:
        with self._reader() as cursor:
            return self._count(cursor)

    def raw_texts(self, source: str) -> list[str]:
        """The raw evidence (line, or document entry) of every event of one source kind, in
        no order: what a check compares with what was logged."""
        with self._reader() as cursor:
            cursor.execute("BEGIN TRANSACTION")  # the blocks read as of the rows
            rows = cursor.execute(
                "SELECT raw_block, raw_at, raw_len FROM events WHERE source = ?", [source]
            ).fetchall()
            texts = raw_texts(cursor, *zip(*rows, strict=True)) if rows else []
            cursor.execute("COMMIT")
        return [text for text in texts if text is not None]

    def _rows_hint(self) -> int:
        """The events the store holds, as of the last cardinalities (every expansion asks for
        them first), else counted: it only decides how lists of identifiers are looked for."""
        known = self._cardinality
        return known[0] if known is not None else self.count()

    def rejects(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The most recent rejects, newest first."""
        with self._reader() as cursor:
            return _reads.rejects(cursor, limit)

    def events_without_identifiers(self, origins: Sequence[str]) -> int:
        """How many events from ``origins`` carry none of the five identifiers nor a trace id:
        evidence that can never join a timeline."""
        with self._reader() as cursor:
            return _reads.events_without_identifiers(cursor, origins)

    def events_matching(
        self,
        ids: Mapping[str, Iterable[str]],
        *,
        from_ns: int | None = None,
        to_ns: int | None = None,
        limit: int = 10_000,
    ) -> tuple[list[Event], bool]:
        """Events mentioning any of ``ids`` (key → values), oldest first.

        Returns:
            ``(events, truncated)``: at most ``limit`` events; truncated when more matched.

        Raises:
            QueryError: an unknown identifier key.
        """
        wanted = tuple(sorted((k, tuple(sorted(set(v)))) for k, v in ids.items()))
        branches, params = _reads.matching_branches(dict(wanted), from_ns, to_ns, self._rows_hint())
        if not branches:
            return [], False

        def read() -> tuple[list[Event], bool, int]:
            with self._reader() as cursor:
                return (*_reads.events_matching(cursor, branches, params, limit), limit)

        return self.cache.kept_or_read(
            self.generation,
            ("events", wanted, from_ns, to_ns),
            read,
            lambda kept: EVENT_BYTES * (len(kept[0]) + 1),
            partial(first, limit=limit),
        )

    def seed(self, key: str, value: str) -> Seed:
        """One identifier's bounds and link counts, read once for an expansion (``_seed``).

        Raises:
            QueryError: an unknown identifier key.
        """
        if key not in IDENTIFIER_KEYS:
            raise QueryError(f"unknown identifier key {key!r}")

        def read() -> Seed:
            with self._reader() as cursor:
                return read_seed(cursor, key, value)

        return self.cache.kept_or_read(
            self.generation,
            ("seed", key, value),
            read,
            lambda seed: _links_weight(seed.link_counts),
            same,
        )

    def parent_events_many(
        self, parents: Sequence[ParentQuery], *, from_ns: int, to_ns: int, limit: int
    ) -> list[tuple[list[Event], bool]]:
        """Shared identifiers' own events inside a window, without their other children's.

        For each parent: events with ``key = value`` in ``[from_ns, to_ns)`` whose
        ``child_key`` is unset or one of ``child_values``, and each key of ``others`` unset or
        one of its values, oldest first, at most ``limit`` (``_parents``: a few queries for
        all of them, not two per parent).

        Returns:
            ``(events, truncated)`` per parent, in the order given; truncated when more
            matched than ``limit``.

        Raises:
            QueryError: an unknown identifier key.
        """
        for parent in parents:
            # Column names are formatted into the SQL: only the fixed identifier columns.
            for column in (parent.key, parent.child_key, *(k for k, _ in parent.others)):
                if column not in ID_COLUMNS:
                    raise QueryError(f"unknown identifier key {column!r}")
        if not parents:
            return []
        key = (
            "parents",
            tuple(
                (p.key, p.value, p.child_key, tuple(p.child_values), _frozen(p.others))
                for p in parents
            ),
            from_ns,
            to_ns,
        )

        def read() -> list[tuple[list[Event], bool, int]]:
            with self._reader() as cursor:
                answers = parent_events_many(
                    cursor, parents, from_ns, to_ns, limit, self._rows_hint()
                )
            return [(events, more, limit) for events, more in answers]

        def answer(
            kept: list[tuple[list[Event], bool, int]],
        ) -> list[tuple[list[Event], bool]] | None:
            answers = [first(one, limit) for one in kept]
            found = [one for one in answers if one is not None]
            return found if len(found) == len(answers) else None

        return self.cache.kept_or_read(
            self.generation,
            key,
            read,
            lambda kept: EVENT_BYTES * (sum(len(events) for events, _, _ in kept) + 1),
            answer,
        )

    def nginx_events(
        self,
        *,
        unlinked_errors: bool,
        from_ns: int = 0,
        to_ns: int = 2**62,
        near: Sequence[tuple[str, str, str, int]] | None = None,
        slack_ns: int = 0,
    ) -> list[Event]:
        """nginx error events not yet linked to their request, or nginx access events, near a
        window (for linking the two across files: they arrive in different files).

        An access line's time is when its request ended; an error line of that request may
        be from any time since the request began (its ``duration_s`` earlier). So an access
        event is returned when its request ``[ts_ns - duration_s, ts_ns]`` meets the window,
        an error event when its time is inside it.

        Args:
            unlinked_errors: True for error events without a ``correlation_id``, False for
                access events.
            from_ns: the window's start (included).
            to_ns: the window's end (excluded).
            near: access events only of a request ``(client, method, path, ts_ns)`` whose
                interval, widened by ``slack_ns``, holds its time: the errors to link, as
                ``_nginx_error.request_key`` names their requests (no other access event can
                be linked to them).
            slack_ns: how far outside its interval a request may lie from an error.

        Returns:
            The events, oldest first.
        """
        with self._reader() as cursor:
            return _reads.nginx_events(cursor, unlinked_errors, from_ns, to_ns, near, slack_ns)

    def cluster(self) -> None:
        """Rewrite the events in ``(node_id, ts_ns, hash)`` order, indexes included.

        A busy node's events end up in many row groups (evidence arrives in time order, one
        file per service); clustered, they sit in one or two. Since each ingest batch is
        stored ordered by node, this gains little: busy-node timelines at 10^7 events took
        170-198 ms at p50 clustered, 149-241 unclustered (``benchmarks/RESULTS.md``, tenth
        session). The price: a sort of every event (71-83 s for 10 million on 2 cores) and,
        until DuckDB reuses it, the old table's space in the file. Events ingested later are
        appended unclustered; readers see the old table until the rewrite commits.
        """
        with self._writer() as cursor:
            _writes.cluster(cursor)

    def set_links(self, linked: Sequence[Event]) -> int:
        """Store the identifiers an event gained by linking (matched by content hash)."""
        rows = [
            (e.correlation_id, orjson.dumps(e.attrs, default=str).decode(), e.hash) for e in linked
        ]
        if not rows:
            return 0
        with self._writer() as cursor:
            _writes.set_links(cursor, rows)
            self._cardinality = None
        return len(rows)

    def lifecycle_events(self, *, limit: int | None = None) -> tuple[list[Event], bool]:
        """Lifecycle events: entity transitions, provider jobs, projections, and any record
        that reports a node's ``occupancy`` (findings and latency read them all).

        Returns:
            ``(events, truncated)``: the oldest ``limit`` (default :data:`LIFECYCLE_LIMIT`),
            oldest first, and whether the store holds more.
        """
        with self._reader() as cursor:
            return _lifecycle.lifecycle_events(cursor, LIFECYCLE_LIMIT if limit is None else limit)

    def finding_events(self, *, limit: int | None = None) -> tuple[list[Event], bool]:
        """The lifecycle events findings can depend on: every event of each entity that can
        make a finding or that such a finding consults (each rule's reach, ``findings.RULES``), not
        the healthy rest. ``findings.find`` of them equals ``findings.find`` of
        :meth:`lifecycle_events`.

        Returns:
            ``(events, truncated)``: the oldest ``limit`` (default :data:`LIFECYCLE_LIMIT`),
            oldest first, and whether there are more.
        """
        with self._reader() as cursor:
            return _lifecycle.finding_events(cursor, LIFECYCLE_LIMIT if limit is None else limit)

    def latency_samples(
        self, phases: Mapping[str, tuple[str, str]] = DEFAULT_PHASES
    ) -> tuple[Samples, Incomplete]:
        """What ``correlator.latency.latency`` would take from every lifecycle event, computed
        in SQL: durations and incomplete phases by (phase, provider), for
        ``correlator.latency.statistics``.

        Raises:
            QueryError: a phase is not a pair of two different non-empty state names.
        """
        with self._reader() as cursor:
            return _lifecycle.latency_samples(cursor, phases)

    def link_counts(
        self, key: str, value: str, *, from_ns: int | None = None, to_ns: int | None = None
    ) -> dict[str, dict[str, int]]:
        """For events with ``key = value``: the other identifiers seen with it and how often.

        Returns:
            ``{other_key: {other_value: events}}``.

        Raises:
            QueryError: an unknown identifier key.
        """
        if key not in ID_COLUMNS:
            raise QueryError(f"unknown identifier key {key!r}")

        def read() -> dict[str, dict[str, int]]:
            with self._reader() as cursor:
                return _links.link_counts(cursor, key, value, from_ns, to_ns)

        return self.cache.kept_or_read(
            self.generation, ("link", key, value, from_ns, to_ns), read, _links_weight, same
        )

    def link_counts_many(
        self,
        pairs: Iterable[tuple[str, str]],
        *,
        from_ns: int | None = None,
        to_ns: int | None = None,
    ) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
        """:meth:`link_counts` of many ``(key, value)`` identifiers at once, one query.

        Returns:
            ``{(key, value): {other_key: {other_value: events}}}`` for every pair given
            (an empty mapping when nothing links it).

        Raises:
            QueryError: an unknown identifier key.
        """
        generation = self.generation
        wanted = list(dict.fromkeys(pairs))
        found: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        missing = []
        for pair in wanted:
            kept = self.cache.get(generation, ("links", *pair, from_ns, to_ns))
            if kept is None:
                missing.append(pair)
            else:
                found[pair] = kept
        if missing:
            with self._reader() as cursor:
                read = _links.link_counts_many(cursor, missing, from_ns, to_ns, self._rows_hint())
            for pair, counts in read.items():
                self.cache.put(
                    generation, ("links", *pair, from_ns, to_ns), counts, _links_weight(counts)
                )
            found.update(read)
        return {pair: found[pair] for pair in wanted}

    def cardinalities(self) -> dict[tuple[str, str], tuple[int, int]]:
        """For each pair of identifier kinds (a, b): the most b values seen with one a value,
        and the most a values seen with one b value, over all evidence.

        Kept per state of the store (its event count): in memory, and in the
        ``link_cardinality`` table so that the next process to open the file (a CLI query, a
        read-only reader) need not scan every event again; recomputed when the count differs
        (an insert) or the table was cleared (linking changed identifiers in place).
        """
        generation = self.generation
        known = self._cardinality
        if known is not None and known[1] == generation:
            return known[2]  # no write since: no count to check them against
        count = self.count()
        if known is not None and known[0] == count:
            self._cardinality = (count, generation, known[2])
            return known[2]
        result = self._stored_cardinalities(count)
        if result is None:
            result = self._compute_cardinalities()
            if not self._read_only:
                with self._writer(evidence=False) as writer:
                    _links.store_cardinalities(writer, result, count)
        self._cardinality = (count, generation, result)
        return result

    def _stored_cardinalities(self, count: int) -> dict[tuple[str, str], tuple[int, int]] | None:
        with self._reader() as cursor:
            return _links.stored_cardinalities(cursor, count)

    def _compute_cardinalities(self) -> dict[tuple[str, str], tuple[int, int]]:
        with self._reader() as cursor:
            return _links.compute_cardinalities(cursor)

    def time_bounds(self) -> tuple[int, int] | None:
        """The earliest and latest event's time, or None when the store is empty."""
        with self._reader() as cursor:
            return _reads.time_bounds(cursor)


def _links_weight(counts: Mapping[str, Mapping[str, int]]) -> int:
    """The memory link counts are counted for in the cache: ~100 bytes a value."""
    return 100 * (sum(len(values) for values in counts.values()) + 1)


def _frozen(others: Sequence[tuple[str, Sequence[str]]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((key, tuple(values)) for key, values in others)
