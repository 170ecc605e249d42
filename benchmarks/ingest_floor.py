"""What an NDJSON ingest done by DuckDB alone reaches on this machine: the floors under issue 4's
200,000 events/s.

On one generated fleet (``benchmarks.fleet``, agent JSON lines, one file per layer), each into
a fresh on-disk DuckDB file, closed (checkpointed) at the end:

1. copy (the baseline): DuckDB's own NDJSON reader, ``read_json`` with columns and types
   detected (``union_by_name``), copying every file into one table: no mapping, no checks, no
   ``raw``, no hash, no indexes;
2. DuckDB mapping, no indexes: every line read as text (``read_csv``, one column), sixteen
   fields of DESIGN §4 taken with one ``json_extract_string`` per line (one parse for all the
   paths), the line kept as a ``raw`` column, DuckDB's 64-bit ``hash`` of it, inserted into
   the ``events`` table of ``correlator._schema`` (``raw`` a column in place of where the
   store keeps it) without its indexes. Less than the correlator's
   ingest does: no ``attrs``, no identifier or level checks, no rejects with line numbers, no
   de-duplication against stored events;
3. DuckDB mapping: the same into the ``events`` table with its five identifier indexes (what a
   timeline's lookups need);
4. the correlator: ``correlator.ingest.ingest_paths(store, "agent", files, workers=2)``, as
   ``benchmarks.correlator`` measures it (``--skip-correlator`` leaves it out: ~40 s per 10^6
   events);
5. storing alone, no indexes: the correlator's own events (every column as it stores them,
   the raw texts in their compressed blocks), read beforehand into memory as Arrow tables,
   untimed, then inserted into a fresh ``events`` table and ``raw_blocks`` table laid out as
   :class:`~correlator.store.Store` lays them out (16,384-row row groups) and checkpointed.
   No parsing, mapping, checks or de-duplication: what any ingest keeping these columns
   pays on top of reading its input;
6. storing alone, the five identifier indexes kept up during the insert (what every ingest
   into a store that already holds events pays);
7. storing alone, the indexes built after the insert in one pass each (what a first ingest
   into an empty store could pay instead);
8. the same with DuckDB free to write the rows in any order (``preserve_insertion_order =
   false``: each thread writes its own row groups; the store orders each batch by node and
   time instead, for the timelines' reads);
9. the same without the raw texts' blocks: what storing each line's text costs.

5-9 read the events of the store 4 wrote, or with ``--skip-correlator`` of the store
``benchmarks.correlator --keep DIR`` left (``DIR/n<events>/evidence.duckdb``); without either
they are left out. Each line is printed with its ratio to the copy measured in the same run. Run:
``python -m benchmarks.ingest_floor [--events 1e6] [--seed 1] [--keep DIR]
[--skip-correlator]``; ``--keep DIR`` reuses a fleet ``benchmarks.correlator --keep DIR``
generated (``DIR/n<events>``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import duckdb
import pyarrow as pa

from benchmarks._common import machine_note
from benchmarks.correlator import fleet_in, measure_duckdb_floor, measure_ingest
from correlator._raw_blocks import SPAN_COLUMNS
from correlator._schema import COLUMN_LIST, DDL, EVENTS_COLUMNS_DDL, INDEX_DDL
from correlator.model import IDENTIFIER_KEYS
from correlator.store import _ROW_GROUP_ROWS  # the row groups the store's file is attached with

#: The record fields the DuckDB mapping extracts, in the order of :data:`_MAPPED`'s columns
#: from ``service`` on.
_PATHS: Final = (
    "ts",
    "layer",
    "event",
    "service",
    "level",
    "node_id",
    "node_instance_id",
    "correlation_id",
    "allocation_id",
    "workflow_id",
    "trace_id",
    "span_id",
    "method",
    "path",
    "status",
    "duration_s",
)
_MAPPED: Final = (
    "ts_ns, layer, source, origin, message, raw, hash, service, level, node_id, "
    "node_instance_id, correlation_id, allocation_id, workflow_id, trace_id, span_id, "
    "http_method, http_path, http_status, duration_s"
)
_SPAN_TYPES: Final = tuple(zip(SPAN_COLUMNS, ("BIGINT", "INTEGER", "INTEGER"), strict=True))
#: The identifier indexes DDL creates, dropped for a load without them.
INDEX_DROP: Final = "".join(f"DROP INDEX events_{key};" for key in IDENTIFIER_KEYS)
_INSERT: Final = f"""
INSERT INTO events ({_MAPPED})
SELECT epoch_ns(CAST(f[1] AS TIMESTAMP_NS)), f[2], 'agent', filename, f[3], line,
       (hash(line) & 9223372036854775807)::BIGINT, f[4], f[5], f[6], f[7], f[8], f[9], f[10],
       f[11], f[12], f[13], f[14], TRY_CAST(f[15] AS INTEGER), TRY_CAST(f[16] AS DOUBLE)
FROM (
    SELECT line, filename,
           json_extract_string(line, [{", ".join(f"'$.{p}'" for p in _PATHS)}]) AS f
    FROM read_csv(?, columns = {{'line': 'VARCHAR'}}, delim = E'\\x01', quote = '',
                  escape = '', header = false, filename = true)
)
"""  # noqa: S608 - fixed text


#: The ``events`` columns with ``raw`` a column (DuckDB's mapping keeps the line so).
_RAW_COLUMN_DDL: Final = EVENTS_COLUMNS_DDL.replace(
    ", ".join(f"{name} {kind}" for name, kind in _SPAN_TYPES), "raw VARCHAR"
)


def measure_duckdb_mapping(paths: Sequence[Path], db: Path, *, indexes: bool) -> dict[str, float]:
    """Lines mapped and inserted by DuckDB alone (see the module docstring, 2 and 3)."""
    db.unlink(missing_ok=True)
    started = time.perf_counter()
    with duckdb.connect(str(db)) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"CREATE TABLE events ({_RAW_COLUMN_DDL})")
        if indexes:
            con.execute(INDEX_DDL)
        con.execute(_INSERT, [[str(path) for path in paths]])
        row = con.execute("SELECT count(*) FROM events").fetchone()
    elapsed = time.perf_counter() - started
    db.unlink()
    events = int(row[0]) if row else 0
    return {"events": events, "seconds": elapsed, "events_per_s": events / elapsed}


def read_events(store: Path) -> tuple[pa.Table, pa.Table]:
    """Every event of a correlator store, every column as stored, and its raw texts' blocks,
    as Arrow tables in memory."""
    with duckdb.connect(str(store), read_only=True) as con:
        events = con.sql(f"SELECT {COLUMN_LIST} FROM events").to_arrow_table()  # noqa: S608 - fixed names
        return events, con.sql("SELECT * FROM raw_blocks").to_arrow_table()


def measure_store_write(
    stored: tuple[pa.Table, pa.Table],
    db: Path,
    *,
    indexes: str,
    ordered: bool = True,
    raw: bool = True,
) -> dict[str, float]:
    """A store's events and blocks inserted into a fresh store (the module docstring, 5-9).

    Args:
        stored: what :func:`read_events` read.
        db: the file to create (removed afterwards).
        indexes: ``none``, ``kept`` (during the insert) or ``after`` (built after it).
        ordered: keep the rows in insertion order (DuckDB's default; the store's inserts
            order each batch by node and time, for the timelines' reads); False lets every
            thread write its own row groups (``preserve_insertion_order = false``).
        raw: store the raw texts' blocks (False: what storing the rest costs).
    """
    events, blocks = stored
    db.unlink(missing_ok=True)
    quoted = str(db).replace("'", "''")
    started = time.perf_counter()
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"ATTACH '{quoted}' AS floor (ROW_GROUP_SIZE {_ROW_GROUP_ROWS})")
        con.execute("USE floor")
        con.execute(DDL)
        if indexes != "kept":
            con.execute(INDEX_DROP)
        if not ordered:
            con.execute("SET preserve_insertion_order = false")
        con.register("batch", events)
        con.execute(f"INSERT INTO events SELECT {COLUMN_LIST} FROM batch")  # noqa: S608 - fixed names
        if raw:
            con.register("blocks", blocks)
            con.execute("INSERT INTO raw_blocks SELECT * FROM blocks")
        if indexes == "after":
            con.execute(INDEX_DDL)
        con.execute("CHECKPOINT")
    elapsed = time.perf_counter() - started
    db.unlink()
    rows = events.num_rows
    return {"events": rows, "seconds": elapsed, "events_per_s": rows / elapsed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", default="1e6", help="fleet size (events)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="reuse (or leave) the fleet in DIR/n<events>")
    parser.add_argument("--skip-correlator", action="store_true", help="leave out 4")
    args = parser.parse_args(argv)
    events = int(float(args.events))
    with tempfile.TemporaryDirectory(prefix="ingest-floor-") as scratch:
        base = args.keep or Path(scratch)
        directory = base / f"n{events}"
        directory.mkdir(parents=True, exist_ok=True)
        fleet, _ = fleet_in(directory, events, args.seed, args.keep is not None)
        print(machine_note())
        print(f"fleet: {fleet.events:,} events in {len(fleet.files)} files ({directory})")
        db = Path(scratch) / "floor.duckdb"
        rows = [("copy: DuckDB read_json", measure_duckdb_floor(fleet.files, db))]
        rows.append(
            (
                "DuckDB mapping, no indexes",
                measure_duckdb_mapping(fleet.files, db, indexes=False),
            )
        )
        rows.append(
            (
                "DuckDB mapping, 5 indexes",
                measure_duckdb_mapping(fleet.files, db, indexes=True),
            )
        )
        stored = directory / "evidence.duckdb"
        if not args.skip_correlator:
            stored = Path(scratch) / "correlator.duckdb"
            rows.append(
                ("correlator ingest_paths, workers=2", measure_ingest(fleet.files, stored, 2))
            )
        if stored.exists():
            events = read_events(stored)
            for name, indexes, ordered, raw in (
                ("storing alone, no indexes", "none", True, True),
                ("storing alone, 5 indexes kept", "kept", True, True),
                ("storing alone, 5 indexes after", "after", True, True),
                ("  ... in no order", "after", False, True),
                ("  ... in no order, without raw", "after", False, False),
            ):
                figures = measure_store_write(events, db, indexes=indexes, ordered=ordered, raw=raw)
                rows.append((name, figures))
            del events
        else:
            print(f"storing alone: left out, no store at {stored}")
    baseline = rows[0][1]["events_per_s"]
    print(f"{'':36} {'events/s':>10} {'seconds':>8} {'/ copy':>7}")
    for name, figures in rows:
        rate = figures["events_per_s"]
        print(f"{name:36} {rate:>10,.0f} {figures['seconds']:>8.1f} {rate / baseline:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
