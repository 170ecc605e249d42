"""Where an NDJSON ingest spends its CPU: the Python mapping, and DuckDB's insert by layout.

The issue asks for 200,000 events/s of NDJSON ingest on this 2-core machine, i.e. at most
10 µs of CPU per event with both cores busy. This benchmark measures the two halves of an
ingest apart, on generated agent records (``benchmarks.correlator``'s fleet, seeded):

1. the mapping: ``correlator.sources.ndjson.parse_columns`` + ``events_table`` per 50,000-line
   batch (what a parse worker does), CPU µs per line;
2. the insert: the same Arrow batches into a fresh on-disk store, in one transaction, as
   ``Store.insert_table`` does (anti-join on the content hash, five ART indexes), for the
   store's layout (each line's text in zstd blocks of ``raw_blocks``: ``_raw_blocks``) and
   for the layouts it replaced, ``raw`` a column of ``events``:

   - ``raw column (dict_fsst)``: DuckDB's own choice for it, the store's layout until the
     sixteenth session;
   - ``raw column, zstd``: ``raw VARCHAR USING COMPRESSION zstd``;

   each with its CPU and wall µs per event, the file size, and the p50 of an indexed lookup
   of one allocation's events with their raw texts (what a timeline reads), with ratios
   against the store's layout measured in the same run.

Run: ``python -m benchmarks.store_insert [--events 500000] [--lookups 40]`` (about 2 minutes
at the default size; it needs ~1 GB in ``$TMPDIR``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import duckdb
import pyarrow as pa

from benchmarks._common import machine_note
from benchmarks.correlator import CHUNK_LINES
from benchmarks.fleet import generate
from correlator._raw_blocks import raw_texts
from correlator._schema import EVENTS_COLUMNS_DDL, events_table
from correlator.model import EVENT_COLUMNS, IDENTIFIER_KEYS
from correlator.sources.ndjson import parse_columns
from correlator.store import Store

_SPANS_DDL: Final = "raw_block BIGINT, raw_at INTEGER, raw_len INTEGER"
#: The columns of ``events`` with ``raw`` a column, in EVENT_COLUMNS order.
_RAW_COLUMN_DDL: Final = EVENTS_COLUMNS_DDL.replace(_SPANS_DDL, "raw VARCHAR")
#: Layouts: name, DDL of the events table's columns (None: the store's own).
_LAYOUTS: Final = (
    ("store layout (raw in zstd blocks)", None),
    ("raw column (dict_fsst)", _RAW_COLUMN_DDL),
    (
        "raw column, zstd",
        _RAW_COLUMN_DDL.replace("raw VARCHAR", "raw VARCHAR USING COMPRESSION zstd"),
    ),
)
_EVENT_LIST: Final = ", ".join(EVENT_COLUMNS)
#: The store's insert (anti-join on the hash, rows ordered by node) with ``raw`` a column.
_RAW_COLUMN_INSERT: Final = (
    f"INSERT INTO events ({_EVENT_LIST}) SELECT {_EVENT_LIST} FROM staged_events s "  # noqa: S608 - fixed names
    "WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.hash = s.hash) "
    "ORDER BY node_id, ts_ns, hash"
)


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _lines(paths: Sequence[Path], limit: int) -> list[bytes]:
    lines: list[bytes] = []
    for path in paths:
        with path.open("rb") as handle:
            for line in handle:
                lines.append(line.rstrip(b"\n"))
                if len(lines) >= limit:
                    return lines
    return lines


def measure_mapping(lines: list[bytes]) -> tuple[list[pa.Table], float]:
    """The Python mapping, batch by batch: the tables, and CPU µs per line."""
    tables = []
    started = _cpu_s()
    for at in range(0, len(lines), CHUNK_LINES):
        columns, _ = parse_columns(lines[at : at + CHUNK_LINES], "bench", source="agent")
        tables.append(events_table(columns))
    return tables, (_cpu_s() - started) / len(lines) * 1e6


_BY_ALLOCATION: Final = (
    "SELECT ts_ns, raw_block, raw_at, raw_len, attrs FROM events WHERE allocation_id = ?"
)


def _insert_raw_column(path: Path, ddl: str, tables: list[pa.Table]) -> None:
    """The tables into a fresh file whose ``events`` keep ``raw`` as a column (``ddl``), as
    the store inserted them then: one transaction, the anti-join, the five indexes kept."""
    with duckdb.connect(str(path)) as connection:
        connection.execute(f"CREATE TABLE events ({ddl})")
        for key in IDENTIFIER_KEYS:
            connection.execute(f"CREATE INDEX events_{key} ON events ({key})")  # as the store
        connection.execute("BEGIN")
        for table in tables:
            connection.register("staged_events", table)
            connection.execute(_RAW_COLUMN_INSERT)
            connection.unregister("staged_events")
        connection.execute("COMMIT")
    # Closed: the checkpoint is part of the cost.


def measure_layout(
    directory: Path, name: str, ddl: str | None, tables: list[pa.Table], lookups: int
) -> dict[str, float | str]:
    """Insert every table into a fresh store of this layout, then time indexed lookups of
    an allocation's events with their raw texts."""
    path = directory / f"{abs(hash(name))}.duckdb"
    events = sum(t.num_rows for t in tables)
    cpu, wall = _cpu_s(), time.perf_counter()
    if ddl is None:
        with Store(path) as store, store.bulk():
            for table in tables:
                store.insert_table(table)
    else:
        _insert_raw_column(path, ddl, tables)
    cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
    size_mib = path.stat().st_size / 2**20
    reader = duckdb.connect(str(path), read_only=True)
    allocations = [
        row[0]
        for row in reader.execute(
            "SELECT DISTINCT allocation_id FROM events WHERE allocation_id IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    picks = random.Random(1).sample(allocations, min(lookups, len(allocations)))
    timings = []
    for allocation in picks:
        started = time.perf_counter()
        if ddl is None:  # the store's read: the rows, then their texts from their blocks
            rows = reader.execute(_BY_ALLOCATION, [allocation]).fetchall()
            raw_texts(reader, *zip(*((block, at, n) for _, block, at, n, _ in rows), strict=True))
        else:
            reader.execute(
                "SELECT ts_ns, raw, attrs FROM events WHERE allocation_id = ?", [allocation]
            ).fetchall()
        timings.append(time.perf_counter() - started)
    reader.close()
    return {
        "layout": name,
        "insert_cpu_us": cpu / events * 1e6,
        "insert_wall_us": wall / events * 1e6,
        "size_mib": size_mib,
        "lookup_p50_ms": statistics.median(timings) * 1e3,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=float, default=5e5)
    parser.add_argument("--lookups", type=int, default=40)
    args = parser.parse_args(argv)
    say: Callable[[str], None] = lambda text: print(text, flush=True)  # noqa: E731
    directory = Path(tempfile.mkdtemp(prefix="store-insert-"))
    try:
        fleet = generate(directory, int(args.events), 1)
        lines = _lines(fleet.files, int(args.events))
        tables, mapping_us = measure_mapping(lines)
        events = sum(t.num_rows for t in tables)
        say(f"{machine_note()}; {events:,} generated agent records")
        say(f"mapping (parse_columns + Arrow), CPU µs per line: {mapping_us:.1f}")
        rows = [
            measure_layout(directory, name, ddl, tables, args.lookups) for name, ddl in _LAYOUTS
        ]
        base = rows[0]
        say(
            "| layout | insert CPU µs/event | wall µs/event | DB MiB | lookup p50 ms | "
            "CPU / store's | MiB / store's | lookup / store's |"
        )
        say("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            say(
                f"| {row['layout']} | {row['insert_cpu_us']:.1f} | {row['insert_wall_us']:.1f} | "
                f"{row['size_mib']:.0f} | {row['lookup_p50_ms']:.1f} | "
                f"{float(row['insert_cpu_us']) / float(base['insert_cpu_us']):.2f} | "
                f"{float(row['size_mib']) / float(base['size_mib']):.2f} | "
                f"{float(row['lookup_p50_ms']) / float(base['lookup_p50_ms']):.2f} |"
            )
        ceiling = 2 / ((mapping_us + float(base["insert_cpu_us"])) * 1e-6)
        say(
            f"ceiling on 2 cores with the store's layout: 2 / ({mapping_us:.1f} + "
            f"{float(base['insert_cpu_us']):.1f}) µs = {ceiling:,.0f} events/s (goal 200,000)"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
