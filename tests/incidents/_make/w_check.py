"""Check the ``w-*`` incidents: every file ingests without rejects, the seed's timeline holds
the first failure's text, and what the timeline shows of the excluded identifiers.

    .venv/bin/python tests/incidents/_make/w_check.py [tests/incidents]

Uses the CLI as the brief says (``correlator --db X ingest --source KIND FILE``, then
``correlator --db X timeline --id KEY=VALUE --json``), one scratch store per case. Prints
the verdict beside the truth for information only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("correlator"))
_KIND = re.compile(r"[.\-_]")


def kind_of(path: Path, sources: dict[str, str]) -> str:
    return sources.get(path.name) or _KIND.split(path.name, maxsplit=1)[0]


def check(folder: Path) -> bool:
    truth = json.loads((folder / "truth.json").read_text("utf-8"))
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        db = str(Path(scratch) / "case.duckdb")
        for path in sorted(folder.iterdir()):
            if path.name == "truth.json":
                continue
            kind = kind_of(path, truth.get("sources", {}))
            done = subprocess.run(
                [CLI, "--db", db, "ingest", "--source", kind, str(path)],
                capture_output=True,
                text=True,
                check=False,
            )
            summary = (done.stdout + done.stderr).strip().splitlines()
            last = summary[-1] if summary else ""
            if done.returncode != 0 or "rejected 0" not in last:
                ok = False
                print(f"  {path.name} ({kind}): {last or done.returncode}")
                print("   ", "\n    ".join(summary[-8:]))
        done = subprocess.run(
            [CLI, "--db", db, "timeline", "--id", truth["seed"], "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
    timeline = json.loads(done.stdout)
    events = timeline["events"]
    wanted = truth.get("first_failure_contains")
    if wanted and not any(wanted in e["message"] or wanted in (e.get("raw") or "") for e in events):
        ok = False
        print(f"  timeline of {truth['seed']} lacks {wanted!r}")
    leaked = []
    for excluded in truth.get("excluded", []):
        key, _, value = excluded.partition("=")
        if any(e.get(key) == value for e in events):
            leaked.append(excluded)
    verdict = timeline["verdict"] or {}
    print(
        f"{'ok ' if ok else 'BAD'} {folder.name}: {len(events)} events, truth "
        f"{truth['owner_layer']}, verdict {verdict.get('owner_layer')}"
        + (f", excluded ids in timeline: {', '.join(leaked)}" if leaked else "")
    )
    return ok


def main() -> None:
    folders = sorted(p for p in ROOT.glob("w-*") if (p / "truth.json").exists())
    results = [check(folder) for folder in folders]
    print(f"{sum(results)}/{len(results)} cases ingest cleanly and hold their failure")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
