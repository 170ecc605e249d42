"""Findings and latency on a large store: what they read now, against every lifecycle event
read as events (the way before), each in a process of its own, in one run.

On one store (the one ``benchmarks.correlator --keep DIR`` leaves in
``DIR/n<events>/evidence.duckdb``, or a fleet of ``--events`` generated and ingested first),
four variants run in turn, each in a fresh Python process timed whole (wall and CPU seconds,
peak RSS), ``--repeat`` times:

1. findings: ``correlator.queries.findings``, which reads ``Store.finding_events`` (only the
   entities that can make a finding, chosen in SQL);
2. findings, baseline: ``correlator.findings.find`` over every lifecycle event
   (``Store.lifecycle_events``, no limit), as ``queries.findings`` did before;
3. latency: ``correlator.queries.latency``, samples computed in SQL
   (``Store.latency_samples``);
4. latency, baseline: ``correlator.latency.latency`` over every lifecycle event.

Each variant's answer is written to a file and compared with its baseline's: the report says
whether they are equal. The generated fleet has no stuck lifecycle and no projection, so
findings read almost nothing: a store with projections has every projection, provider job
and VM read too (the rules' reach, ``correlator.findings.RULES``). Run:
``python -m benchmarks.lifecycle [--events 1e6] [--keep DIR] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from benchmarks._common import machine_note
from benchmarks.correlator import fleet_in, measure_ingest

#: Variants: name, and the baseline its answer must equal (None: it is a baseline).
_VARIANTS: Final = {
    "findings": "findings, baseline",
    "findings, baseline": None,
    "latency": "latency, baseline",
    "latency, baseline": None,
}
#: No store holds this many lifecycle events: the baselines read them all.
_EVERY: Final = 10**12


def _answer(variant: str, db: str, now_ns: int) -> Any:
    """What one variant answers (run in the child process)."""
    from correlator import findings as rules
    from correlator import latency as phases
    from correlator import queries
    from correlator.model import hash_text
    from correlator.store import Store

    with Store(db, read_only=True) as store:
        if variant == "findings":
            return queries.findings(store, now_ns, rules.FindingsConfig())["findings"]
        if variant == "latency":
            return queries.latency(store)["phases"]
        events, _ = store.lifecycle_events(limit=_EVERY)
        if variant == "latency, baseline":
            return [p.as_dict() for p in phases.latency(events)]
        found = [f.as_dict() for f in rules.find(events, now_ns=now_ns)]
        for finding in found:
            finding["evidence"] = [hash_text(h) for h in finding["evidence"]]
        return found


def _child(variant: str, db: str, now_ns: int, out: str) -> int:
    Path(out).write_bytes(orjson.dumps(_answer(variant, db, now_ns)))
    return 0


def _run(variant: str, db: Path, now_ns: int, out: Path) -> dict[str, float]:
    """One variant in a fresh process: wall and CPU seconds, peak RSS in MiB."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.lifecycle", "--child", variant, "--db", str(db),
         "--now-ns", str(now_ns), "--out", str(out)],
    )  # fmt: skip
    # Reaped here rather than by Popen.wait: os.wait4 gives this child's own peak RSS.
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)  # Popen's record of the reaping
    if child.returncode != 0:
        raise SystemExit(f"benchmarks.lifecycle: {variant!r} failed ({child.returncode})")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,
    }


def _now_ns(db: Path) -> int:
    """An hour after the store's newest event: every stuck lifecycle is past its deadline."""
    from correlator.store import Store

    with Store(db, read_only=True) as store:
        bounds = store.time_bounds()
    return (bounds[1] if bounds else time.time_ns()) + 3600 * 10**9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", default="1e6", help="fleet size (events)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="reuse (or leave) the fleet in DIR/n<events>")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant")
    parser.add_argument("--child", choices=sorted(_VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--now-ns", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.db, args.now_ns, args.out)

    events = int(float(args.events))
    with tempfile.TemporaryDirectory(prefix="lifecycle-") as scratch:
        directory = (args.keep or Path(scratch)) / f"n{events}"
        directory.mkdir(parents=True, exist_ok=True)
        db = directory / "evidence.duckdb"
        print(machine_note())
        if not db.exists():
            fleet, _ = fleet_in(directory, events, args.seed, args.keep is not None)
            measure_ingest(fleet.files, db, 2)
        now_ns = _now_ns(db)
        print(f"store: {db} ({db.stat().st_size / 2**20:,.0f} MiB)")
        figures: dict[str, list[dict[str, float]]] = {name: [] for name in _VARIANTS}
        answers: dict[str, bytes] = {}
        for _ in range(args.repeat):
            for name in _VARIANTS:  # alternated, so that drift of the host hits all alike
                out = Path(scratch) / f"{name}.json"
                figures[name].append(_run(name, db, now_ns, out))
                answers[name] = out.read_bytes()
    print(f"{'':20} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'wall / baseline':>16}  answer")
    differs = False
    for name, baseline in _VARIANTS.items():
        wall, cpu, peak = (
            statistics.median(run[key] for run in figures[name])
            for key in ("wall_s", "cpu_s", "peak_mib")
        )
        if baseline is None:
            ratio, same = "", ""
        else:
            base = statistics.median(run["wall_s"] for run in figures[baseline])
            ratio = f"{wall / base:.3f}"
            differs = differs or answers[name] != answers[baseline]
            same = "same as baseline" if answers[name] == answers[baseline] else "DIFFERS"
        print(f"{name:20} {wall:>8.2f} {cpu:>8.2f} {peak:>9,.0f} {ratio:>16}  {same}")
    print(f"medians of {args.repeat} runs each; {len(orjson.loads(answers['findings']))} findings")
    return 1 if differs else 0  # an answer that is not its baseline's is a bug, not a figure


if __name__ == "__main__":
    raise SystemExit(main())
