"""The devstack: time from fault injection to a correct verdict, per scenario.

One stack (real nginx, PostgreSQL, the services, three node agents, the Loki test server or
``$LOKI_URL``) is brought up; each scenario then runs ``--rounds`` times on it, exactly as
``python -m devstack scenario NAME`` runs it. Measured per run:

- ``fault→verdict``: from the moment the fault took effect (``Run.injected``: the reload
  that serves the expired certificate, the token file rewritten, the lock taken, the job
  canceled, the node powered off, ...) to the correlator's verdict computed from the
  ingested evidence. For ``healthy`` (no fault) it is from the start of the scenario.
- the phases after the fault: ``fault→symptom`` (until the failure has shown itself; it
  includes ``settle``, time spent on purpose letting a stuck state outlive the devstack's
  1 s finding thresholds), ``drain`` (``agent-logging drain`` of every spool),
  ``collect`` (log slices, CR and job snapshots, the audit table), ``ingest`` (the files,
  with the correlator's CLI into a fresh DuckDB), ``pull`` (``correlator timeline
  --loki-url``: the incident's records from Loki, the timeline and verdict), ``analyse``
  (the findings);
- whether the verdict named the true owner layer, and records logged vs in Loki.

Run: ``python -m benchmarks.devstack [--scenarios a,b] [--rounds 3] [--json]``. Needs the
Debian packages ``nginx`` and ``postgresql``. Prints a Markdown table (medians over the
rounds, and the worst ``fault→verdict``); the lead records it in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import machine_note
from devstack.scenarios import SCENARIOS, run_scenario
from devstack.supervisor import Stack, missing_binaries

_PHASES = ("settle", "drain", "collect", "ingest", "pull", "analyse")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the raw runs as JSON")
    args = parser.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    missing = missing_binaries()
    if missing:
        print(f"devstack benchmark: install {' '.join(missing)} first", file=sys.stderr)
        return 2
    note = machine_note()
    directory = Path(tempfile.mkdtemp(prefix="devstack-bench-"))
    started = time.monotonic()
    stack = Stack.up(directory)
    up_s = time.monotonic() - started
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for _ in range(args.rounds):
            for name in names:
                result = run_scenario(stack, SCENARIOS[name])
                runs[name].append(
                    {
                        "correct": result.correct,
                        "problems": result.problems,
                        "verdict": result.verdict["owner_layer"],
                        "fault_to_verdict_s": round(result.fault_to_verdict_s, 3),
                        "fault_to_symptom_s": round(result.fault_to_symptom_s, 3),
                        "phases": result.phases,
                        "records_logged": result.records_logged,
                        "records_seen": result.records_seen,
                    }
                )
    finally:
        stack.down()
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps({"machine": note, "stack_up_s": round(up_s, 2), "runs": runs}, indent=2))
        return 0
    print(f"devstack: {args.rounds} rounds; stack up in {up_s:.1f} s; {note}\n")
    header = ["scenario", "owner (true)", "correct", "fault→verdict p50 / max (s)"]
    header += ["fault→symptom (s)"] + [f"{phase} (s)" for phase in _PHASES]
    header += ["records logged/seen"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        results = runs[name]
        totals = [r["fault_to_verdict_s"] for r in results]
        cells = [
            f"`{name}`",
            f"{results[0]['verdict']} ({SCENARIOS[name].expected_owner_layer})",
            f"{sum(r['correct'] for r in results)}/{len(results)}",
            f"{_median(totals)} / {max(totals):.2f}",
            str(_median([r["fault_to_symptom_s"] for r in results])),
            *(str(_median([r["phases"].get(p, 0.0) for r in results])) for p in _PHASES),
            f"{results[-1]['records_logged']}/{results[-1]['records_seen']}",
        ]
        print("| " + " | ".join(cells) + " |")
    wrong = {n: r["problems"] for n, rs in runs.items() for r in rs if not r["correct"]}
    for name, problems in wrong.items():
        print(f"\n{name}: {'; '.join(problems)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
