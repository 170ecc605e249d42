"""Replay hold-out cases with the CLI: no rejects, and the seed's timeline holds the failure.

``python h_check.py [CASE...]`` (all ``h-*`` folders when none is named). For each case:
every evidence file is ingested into a scratch store with ``correlator ingest --source KIND``
(KIND from truth.json's ``sources`` or the file name); then ``correlator timeline --id SEED
--json``'s events must hold ``first_failure_contains`` (in a message or raw line) and no
identifier of ``excluded``. Only the events are read, never the verdict.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HOLDOUT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "correlator"]


def kind_of(path: Path, sources: dict[str, str]) -> str:
    return sources.get(path.name) or re.split(r"[.\-_]", path.name, maxsplit=1)[0]


def check(folder: Path) -> list[str]:
    truth = json.loads((folder / "truth.json").read_text())
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        db = str(Path(scratch) / "case.duckdb")
        for path in sorted(folder.iterdir()):
            if path.name == "truth.json" or path.is_dir():
                continue
            kind = kind_of(path, truth.get("sources", {}))
            done = subprocess.run(
                [*CLI, "--db", db, "ingest", "--source", kind, str(path)],
                capture_output=True,
                text=True,
                check=False,
            )
            output = done.stdout + done.stderr
            summary = next((x for x in output.splitlines() if x.startswith("accepted")), "")
            if done.returncode != 0 or "rejected 0" not in summary:
                problems.append(f"{path.name} ({kind}): {output.strip()[-600:]}")
        done = subprocess.run(
            [*CLI, "--db", db, "timeline", "--id", truth["seed"], "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return [*problems, f"timeline failed: {done.stderr.strip()}"]
        events = json.loads(done.stdout)["events"]
    text = [f"{e.get('message') or ''}\n{e.get('raw') or ''}" for e in events]
    wanted = truth.get("first_failure_contains")
    if wanted and not any(wanted in t for t in text):
        problems.append(f"no event of the seed's timeline holds {wanted!r}")
    for excluded in truth.get("excluded", []):
        key, value = excluded.split("=", 1)
        if any(e.get(key) == value for e in events):
            problems.append(f"the timeline holds {excluded}")
    print(f"{folder.name}: {len(events)} events, {len(problems)} problems")
    return problems


def main(names: list[str]) -> int:
    folders = [HOLDOUT / n for n in names] or sorted(HOLDOUT.glob("h-*"))
    failed = 0
    for folder in folders:
        for problem in check(folder):
            failed += 1
            print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
