"""The correlator at scale: NDJSON ingest events/s and timeline latency at 10^5..10^7 events.

For each size a fleet is generated (seeded; ``benchmarks.fleet``) and written as agent JSON
lines, one file per layer, each in time order as the services would have written them
(generation time is not measured).

Measured, on a fresh on-disk DuckDB per size:

1. parse only: ``correlator.sources.ndjson.parse_table`` (the native mapping, the Python one
   for what it declines) over 50,000-line batches, as the ingest calls it, in one thread, no
   store (on the first 10^6 lines at most: the rate does not depend on the size);
2. ingest in one process: ``correlator.ingest.ingest_lines(store, "agent", ...)`` of the same
   lines into a fresh store, closed at the end (parse + insert, as ``correlator ingest``
   runs today);
3. ingest with workers: ``ingest_paths(store, "agent", files, workers=2)`` of every file, end
   to end (parse in two worker threads, the native mapping running without the GIL while
   the main thread inserts; the identifier indexes built after; the link cardinalities
   computed once at the end; the store closed): the store the queries read;
4. the floor DuckDB itself sets: its own NDJSON reader (``read_json``, columns and types
   detected, both threads) copying every file into a table of a fresh on-disk database,
   with no mapping, no validation, no indexes and no de-duplication: what an ingest that
   does all of those is measured against (the ratio ``ingest / DuckDB`` in the table);
5. timeline: ``correlator.incident.timeline_for`` for ``--queries`` random seeds, a quarter
   each of ``allocation_id``, ``correlation_id``, ``workflow_id`` and ``node_id`` of a busy
   node, on the store opened read-only (as the CLI does). The first query is reported apart
   (it reads the stored link cardinalities; "cardinalities s" is what computing them costs,
   i.e. what the first query paid before they were stored); p50 / p95 / max over the
   others, warm. "CPU stolen" is the share of the machine's CPU time the hypervisor gave to
   other guests while the queries ran (``/proc/stat``): on a shared host it is what makes one
   run slower than the next.

Run: ``python -m benchmarks.correlator [--sizes 1e5,1e6,1e7] [--queries 50] [--seed 1]
[--workers 2] [--cluster] [--keep DIR] [--json] [--record]``. ``--cluster`` runs
``Store.cluster()`` after the ingest (timed apart) and queries the clustered store.
``--keep DIR`` writes the fleet files and the store of each size into ``DIR/n<size>`` and
leaves them there; a later run with the same ``--keep`` reuses them (generation and ingest
skipped, the ingest figures shown are those of the run that built the store): for measuring
query changes without paying ~10 minutes per try at 10^7. ``--record`` rewrites the
section of ``benchmarks/RESULTS.md`` titled ``benchmarks._correlator_report.SECTION`` (or
appends it; other sections are left as they are).
The default run takes about 13 minutes on 2 cores (``--cluster``: 3 more) and needs about
6 GB in ``$TMPDIR`` at 10^7 events (the NDJSON files and the store; twice the store with
``--cluster``).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from agent_logging.owner import DEFAULT_RULES
from benchmarks._common import cpu_ticks, machine_note, rss_kib, steal_share
from benchmarks._correlator_report import kinds_table, load, record, section, table
from benchmarks.fleet import SEED_KINDS, Fleet, generate, load_fleet, save_fleet

CHUNK_LINES: Final = 50_000  # correlator.ingest.BATCH_EVENTS
#: Parse-only and one-process ingest are measured on at most this many lines (their rate
#: does not depend on the store's size; the full ingest is measured with workers).
SAMPLE_LINES: Final = 1_000_000

# -- measurement -----------------------------------------------------------------------------


def _sample(paths: Sequence[Path], limit: int) -> Iterator[bytes]:
    """The first ``limit`` lines of the files, file after file."""
    from correlator.ingest import read_lines

    def lines() -> Iterator[bytes]:
        for path in paths:
            with path.open("rb") as handle:
                yield from read_lines(handle)

    return itertools.islice(lines(), limit)


def _chunked(lines: Iterator[bytes]) -> Iterator[list[bytes]]:
    while chunk := list(itertools.islice(lines, CHUNK_LINES)):
        yield chunk


def measure_parse(paths: Sequence[Path], limit: int) -> dict[str, float]:
    """Parse only: the adapter's table path (the native mapping, what ingest runs) over the
    ingest's 50,000-line batches, in one thread."""
    from correlator.sources.ndjson import parse_table

    rows = rejects = 0
    started = time.perf_counter()
    for chunk in _chunked(_sample(paths, limit)):
        table, rejected = parse_table(chunk, "sample", source="agent", start_line=1)
        rows += table.num_rows
        rejects += len(rejected)
    elapsed = time.perf_counter() - started
    return {"events": rows, "rejects": rejects, "seconds": elapsed, "events_per_s": rows / elapsed}


def measure_ingest_one(paths: Sequence[Path], db: Path, limit: int) -> dict[str, float]:
    """``ingest_lines`` of the same lines in one process into a fresh store, closed at the end
    (parse + insert, what ``correlator ingest`` does today)."""
    from correlator.ingest import ingest_lines
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        result = ingest_lines(store, "agent", _sample(paths, limit), "sample")
    elapsed = time.perf_counter() - started
    return {
        "events": result.accepted,
        "seconds": elapsed,
        "events_per_s": result.accepted / elapsed,
    }


def measure_ingest(paths: Sequence[Path], db: Path, workers: int) -> dict[str, float]:
    """``ingest_paths(store, "agent", files, workers=...)`` into a fresh store, closed
    (checkpointed) at the end: the store the queries then read."""
    from correlator.ingest import ingest_paths
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        result = ingest_paths(store, "agent", list(paths), workers=workers)
    elapsed = time.perf_counter() - started
    return {
        "events": result.accepted,
        "duplicate": result.duplicate,
        "rejected": sum(result.rejected.values()),
        "seconds": elapsed,
        "events_per_s": result.accepted / elapsed,
        "db_mib": db.stat().st_size / 2**20,
    }


def measure_duckdb_floor(paths: Sequence[Path], db: Path) -> dict[str, float]:
    """DuckDB's own NDJSON reader copying the files into one table, nothing else: no mapping,
    no checks, no indexes, no content hash (``union_by_name``: the layers' files have
    different fields)."""
    import duckdb

    db.unlink(missing_ok=True)
    started = time.perf_counter()
    with duckdb.connect(str(db)) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(
            "CREATE TABLE lines AS SELECT * FROM read_json(?, format = 'newline_delimited', "
            "union_by_name = true)",
            [[str(path) for path in paths]],
        )
        row = con.execute("SELECT count(*) FROM lines").fetchone()
    elapsed = time.perf_counter() - started
    db.unlink()
    events = int(row[0]) if row else 0
    return {"events": events, "seconds": elapsed, "events_per_s": events / elapsed}


def _seeds(fleet: Fleet, queries: int, rng: random.Random) -> list[tuple[str, str]]:
    """``queries + 1`` seeds, the kinds taking turns, values drawn at random."""
    return [
        (kind, rng.choice(fleet.samples[kind]))
        for kind in (SEED_KINDS[i % len(SEED_KINDS)] for i in range(queries + 1))
    ]


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def measure_timelines(
    db: Path, seeds: Sequence[tuple[str, str]], *, profile: bool = False
) -> dict[str, Any]:
    """``timeline_for`` per seed on the built store, opened read-only as the CLI does; the
    first query in the process (it also reads or computes the link cardinalities) apart."""
    from correlator import incident
    from correlator.store import Store

    per_kind: dict[str, list[float]] = {k: [] for k in SEED_KINDS}
    sizes: dict[str, list[int]] = {k: [] for k in SEED_KINDS}
    truncated = 0
    with Store(db, read_only=True) as store:
        # Every query reads the store: what the store keeps of its reads until the next write
        # (for a service's bursts of one incident) would answer the second of each pair below.
        store.cache.max_bytes = 0
        started = time.perf_counter()
        first = incident.timeline_for(store, *seeds[0])
        first_s = time.perf_counter() - started
        profiler: Any = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        data: dict[str, Any] = first
        without_table: list[float] = []
        for number, (key, value) in enumerate(seeds[1:]):
            # The same query without the owner table's reading of the evidence's text (owners
            # from stamps and adapters only, as before the table was shared), in turn first and
            # second: what the table adds to a timeline, measured in the same run.
            for table in (True, False) if number % 2 else (False, True):
                # The previous answer is freed before the clock starts: rebinding ``data``
                # would free it inside the next query's time (~15 ms for a busy node's
                # 10,000 events).
                del data
                gc.collect()
                started = time.perf_counter()
                data = incident.timeline_for(
                    store, key, value, rules=DEFAULT_RULES if table else ()
                )
                took = time.perf_counter() - started
                if not table:
                    without_table.append(took)
                    continue
                per_kind[key].append(took)
                sizes[key].append(len(data["events"]))
                truncated += bool(data["truncated"])
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
        # What the first query would pay without the stored table (a scan per identifier pair).
        started = time.perf_counter()
        store._compute_cardinalities()
        cardinalities_s = time.perf_counter() - started
    warm = [s for values in per_kind.values() for s in values]
    return {
        "first_s": first_s,
        "first_seed": f"{seeds[0][0]}={seeds[0][1]}",
        "first_events": len(first["events"]),
        "cardinalities_s": cardinalities_s,
        "queries": len(warm),
        "p50_s": _percentile(warm, 0.5),
        "p95_s": _percentile(warm, 0.95),
        "max_s": max(warm),
        "p50_without_table_s": _percentile(without_table, 0.5),
        "p95_without_table_s": _percentile(without_table, 0.95),
        "truncated": truncated,
        "by_kind": {
            k: {
                "queries": len(v),
                "p50_s": _percentile(v, 0.5),
                "p95_s": _percentile(v, 0.95),
                "max_s": max(v),
                "events_p50": int(statistics.median(sizes[k])),
                "events_max": max(sizes[k]),
            }
            for k, v in per_kind.items()
            if v
        },
    }


def measure_cluster(db: Path) -> dict[str, float]:
    """``Store.cluster()`` on the built store, closed (checkpointed) at the end."""
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        store.cluster()
    return {"seconds": time.perf_counter() - started, "db_mib": db.stat().st_size / 2**20}


def fleet_in(directory: Path, events: int, seed: int, keep: bool) -> tuple[Fleet, float]:
    """The generated fleet, or (``--keep``) the one a previous run left in ``directory``."""
    saved = directory / "fleet.json"
    if keep and saved.exists():
        fleet = load_fleet(saved)
        if all(path.exists() for path in fleet.files):
            return fleet, 0.0
    for path in directory.glob("*.ndjson"):
        path.unlink()
    started = time.perf_counter()
    fleet = generate(directory, events, seed)
    generate_s = time.perf_counter() - started
    if keep:
        save_fleet(fleet, saved)
    return fleet, generate_s


def _ingested(
    fleet: Fleet, directory: Path, events: int, workers: int, keep: bool
) -> tuple[dict[str, Any], Path]:
    """Parse, one-process ingest and the full ingest (or, with ``--keep``, the figures and
    the store of the run that built it: ingest figures then describe that run's code)."""
    db = directory / "evidence.duckdb"
    saved = directory / "ingest.json"
    if keep and saved.exists() and db.exists():
        _say(f"{events:,}: reusing the store and ingest figures in {directory}")
        return orjson.loads(saved.read_bytes()), db
    sample = min(fleet.events, SAMPLE_LINES)
    parse = measure_parse(fleet.files, sample)
    _say(f"{events:,}: parse only {parse['events_per_s']:,.0f} events/s ({sample:,} lines)")
    one = measure_ingest_one(fleet.files, directory / "one.duckdb", sample)
    _say(f"{events:,}: ingest, 1 process {one['events_per_s']:,.0f} events/s ({sample:,} lines)")
    (directory / "one.duckdb").unlink()
    for stale in (db, directory / "evidence.duckdb.wal"):
        stale.unlink(missing_ok=True)
    ingest = measure_ingest(fleet.files, db, workers)
    _say(f"{events:,}: ingest_paths, workers={workers}: {ingest['events_per_s']:,.0f} events/s")
    floor = measure_duckdb_floor(fleet.files, directory / "floor.duckdb")
    _say(
        f"{events:,}: DuckDB's read_json alone {floor['events_per_s']:,.0f} events/s "
        f"(ingest / DuckDB {ingest['events_per_s'] / floor['events_per_s']:.2f})"
    )
    figures = {"parse": parse, "ingest_one": one, "ingest": ingest, "duckdb_floor": floor}
    if keep:
        saved.write_bytes(orjson.dumps(figures))
    return figures, db


def run_size(
    events: int,
    queries: int,
    seed: int,
    workdir: Path,
    *,
    workers: int,
    cluster: bool = False,
    profile: bool = False,
    keep: bool = False,
) -> dict[str, Any]:
    """Generate, parse, ingest and query one size.

    The files and the stores are removed afterwards, unless ``keep``: then they stay in
    ``workdir/n{events}`` and the next run with ``keep`` reuses them (generation and ingest
    are skipped; the ingest figures shown are those of the run that built the store).
    """
    directory = workdir / f"n{events}"
    directory.mkdir(parents=True, exist_ok=keep)
    fleet, generate_s = fleet_in(directory, events, seed, keep)
    _say(
        f"{events:,}: {'generated' if generate_s else 'reusing'} {fleet.events:,} events "
        f"({fleet.allocations:,} allocations, {fleet.nodes} nodes, busy ones "
        f"~{fleet.allocations_per_busy_node:.0f} allocations) in {generate_s:.0f} s"
    )
    figures, db = _ingested(fleet, directory, events, workers, keep)
    if not keep:
        for path in fleet.files:
            path.unlink()
    clustered = None
    if cluster:
        if keep:  # cluster a copy: the kept store stays as the ingest left it
            copy = directory / "clustered.duckdb"
            shutil.copyfile(db, copy)
            db = copy
        clustered = measure_cluster(db)
        _say(f"{events:,}: clustered in {clustered['seconds']:.0f} s")
    ticks = cpu_ticks()
    timelines = measure_timelines(db, _seeds(fleet, queries, random.Random(seed)), profile=profile)
    timelines["steal"] = steal_share(ticks)
    steal = (
        "" if timelines["steal"] is None else f" (CPU stolen by the host: {timelines['steal']:.0%})"
    )
    _say(
        f"{events:,}: timeline p50 {timelines['p50_s'] * 1000:.0f} ms, "
        f"p95 {timelines['p95_s'] * 1000:.0f} ms{steal}; without the owner table's reading "
        f"of the text p95 {timelines['p95_without_table_s'] * 1000:.0f} ms (ratio "
        f"{timelines['p95_s'] / timelines['p95_without_table_s']:.3f})"
    )
    if keep:
        if cluster:
            db.unlink()
    else:
        shutil.rmtree(directory)
    return {
        "size": events,
        "events": fleet.events,
        "allocations": fleet.allocations,
        "nodes": fleet.nodes,
        "busy_nodes": len(fleet.busy_nodes),
        "allocations_per_busy_node": round(fleet.allocations_per_busy_node),
        "node_instances": fleet.instances,
        "layers": dict(fleet.layers),
        "generate_s": generate_s,
        **figures,
        "workers": workers,
        "cluster": clustered,
        "timeline": timelines,
        "rss_kib": rss_kib(),
    }


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="store sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=50, help="timeline queries per size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="parse workers of the ingest")
    parser.add_argument(
        "--cluster", action="store_true", help="Store.cluster() after the ingest, then query"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm queries")
    parser.add_argument("--record", action="store_true", help="write the section of RESULTS.md")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write the fleet files and stores into DIR and keep them; reuse them when present",
    )
    args = parser.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    note = machine_note()
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--record"]
    command = " ".join(["python -m benchmarks.correlator", *shown])
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="correlator-bench-") as workdir:
        for size in sizes:
            rows.append(
                run_size(
                    size,
                    args.queries,
                    args.seed,
                    args.keep or Path(workdir),
                    workers=args.workers,
                    cluster=args.cluster,
                    profile=args.profile,
                    keep=args.keep is not None,
                )
            )
    total_s = time.perf_counter() - started
    if args.json:
        print(json.dumps({"machine": note, "total_s": total_s, "rows": rows}, indent=2))
    else:
        print(table(rows))
        print()
        print(kinds_table(rows))
        print(f"\n{note}; load average at the end {load()}; {total_s:.0f} s in all")
    if args.record:
        record(section(command, note, rows, total_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
