"""Where an NDJSON ingest spends its CPU: the Python mapping, and DuckDB's insert by layout.

The issue asks for 200,000 events/s of NDJSON ingest on this 2-core machine, i.e. at most
10 µs of CPU per event with both cores busy. This benchmark measures the two halves of an
ingest apart, on generated agent records (``benchmarks.correlator``'s fleet, seeded):

1. the mapping: ``correlator.sources.ndjson.parse_columns`` + ``events_table`` per 50,000-line
   batch (what a parse worker does), CPU µs per line;
2. the insert: the same Arrow batches into a fresh on-disk store, in one transaction, as
   ``Store.insert_table`` does (anti-join on the content hash, five ART indexes), for the
   store's layout and for two alternatives of the ``raw`` column's compression (the column
   that dominates the insert: DuckDB's ``dict_fsst`` analysis of ~300-byte lines):

   - ``raw uncompressed``: ``dict_fsst`` disabled for the connection;
   - ``raw zstd``: ``raw VARCHAR USING COMPRESSION zstd``;

   each with its CPU and wall µs per event, the file size, and the p50 of an indexed lookup
   of one allocation's events with their ``raw`` (what a timeline reads), with ratios against
   the store's layout measured in the same run.

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
from correlator._schema import EVENTS_COLUMNS_DDL, events_table
from correlator.model import IDENTIFIER_KEYS
from correlator.sources.ndjson import parse_columns
from correlator.store import Store

#: Layouts: name, DDL of the events table's columns, settings for the connection.
_LAYOUTS: Final = (
    ("store layout (dict_fsst on raw)", EVENTS_COLUMNS_DDL, ()),
    (
        "raw uncompressed",
        EVENTS_COLUMNS_DDL,
        ("SET GLOBAL disabled_compression_methods = 'dict_fsst'",),
    ),
    (
        "raw zstd",
        EVENTS_COLUMNS_DDL.replace("raw VARCHAR", "raw VARCHAR USING COMPRESSION zstd"),
        (),
    ),
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


def measure_layout(
    directory: Path,
    name: str,
    ddl: str,
    settings: Sequence[str],
    tables: list[pa.Table],
    lookups: int,
) -> dict[str, float | str]:
    """Insert every table into a fresh store of this layout, then time indexed lookups."""
    path = directory / f"{abs(hash(name))}.duckdb"
    store = Store(path)  # the production DDL, then the layout's own table
    connection = store._db
    for setting in settings:
        connection.execute(setting)
    connection.execute("DROP TABLE events")
    connection.execute(f"CREATE TABLE events ({ddl})")
    for key in IDENTIFIER_KEYS:
        connection.execute(f"CREATE INDEX events_{key} ON events ({key})")  # as the store
    events = sum(t.num_rows for t in tables)
    cpu, wall = _cpu_s(), time.perf_counter()
    with store.bulk():
        for table in tables:
            store.insert_table(table)
    store.close()  # the checkpoint: part of the cost
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
            measure_layout(directory, name, ddl, settings, tables, args.lookups)
            for name, ddl, settings in _LAYOUTS
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
