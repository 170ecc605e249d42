"""Replay the ``n-*`` incidents with the correlator CLI and check what they hold.

Usage, from the repository root with the virtualenv active::

    python tests/incidents/_make/n_check.py [CASE_DIR...]   # default: tests/incidents/n-*

For each case: ingest every evidence file with its source kind (``truth.json`` "sources", else
the file name's prefix) into a scratch DuckDB, one ``ingest`` per kind so that nginx error
lines are linked to their access lines; then ask for the seed's timeline. Reports rejected
lines, the layers the timeline spans, whether ``first_failure_contains`` is in it and whether
an ``excluded`` identifier leaked into it (an event carrying it as an identifier). Exits
non-zero on rejects or a missing timeline. It does not look at the verdict: the truth is
written as the operator knows it.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

INCIDENTS = Path(__file__).resolve().parent.parent


def check(case: Path) -> bool:
    truth = json.loads((case / "truth.json").read_text())
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(case.iterdir()):
        if path.name == "truth.json":
            continue
        kind = truth.get("sources", {}).get(path.name) or re.split(r"[.\-_]", path.name)[0]
        groups[kind].append(str(path))
    with tempfile.TemporaryDirectory() as scratch:
        db = str(Path(scratch) / "case.duckdb")
        rejected = 0
        for kind, files in groups.items():
            done = subprocess.run(
                ["correlator", "--db", db, "ingest", "--source", kind, *files],
                capture_output=True,
                text=True,
                check=False,
            )
            counts = [int(n) for n in re.findall(r"rejected (\d+)", done.stdout + done.stderr)]
            rejected += sum(counts) + (1 if done.returncode else 0)
            if done.returncode or any(counts):
                print(f"  {kind}: {(done.stdout + done.stderr).strip()[-300:]}")
        done = subprocess.run(
            ["correlator", "--db", db, "timeline", "--id", truth["seed"], "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode:
        print(f"{case.name}: no timeline: {done.stderr.strip()}")
        return False
    events = json.loads(done.stdout)["events"]
    layers = collections.Counter(event.get("layer") for event in events)
    wanted = truth.get("first_failure_contains")
    held = (
        any(wanted in (e.get("message") or "") + (e.get("raw") or "") for e in events)
        if wanted
        else None
    )
    # An excluded identifier leaks when an event of the timeline carries it as an identifier
    # (the seed's own lines may mention it in text: a deadlock's DETAIL names both sessions).
    leaked = [
        key
        for key in truth.get("excluded", [])
        if any(event.get(key.split("=", 1)[0]) == key.split("=", 1)[1] for event in events)
    ]
    errors = sum(event.get("level") in {"error", "critical"} for event in events)
    print(
        f"{case.name:30} owner={truth['owner_layer']:9} rejected={rejected} "
        f"events={len(events)} errors={errors} layers={dict(layers)} "
        f"first_failure_text_in_timeline={held} leaked={leaked}"
    )
    return rejected == 0


def main(argv: list[str]) -> int:
    cases = [Path(arg) for arg in argv] or sorted(INCIDENTS.glob("n-*"))
    results = [check(case) for case in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
