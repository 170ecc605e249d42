"""Capture every fixture of ../wording.jsonl from real programs run against 127.0.0.1.

Run from the repository root with its virtualenv active (see README.md for the tools):

    python tests/agent_logging/owner/programs/capture.py [--root /tmp/wording] [--family F]

It starts the servers of env.py, runs each family's cases, and rewrites wording.jsonl: the
captured entries, family by family, then the documented ones of documented.jsonl (wording of
programs that cannot run here, each naming its public source). ``--family F`` (repeatable)
captures only those families (python, go, java, cli, ansible), e.g. with ``--out`` to try them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import cases_python
import cases_tools
from env import Environment

FIXTURE = Path(__file__).parent.parent / "wording.jsonl"
DOCUMENTED = Path(__file__).parent / "documented.jsonl"
FAMILIES = {
    "python": cases_python.cases,
    "go": cases_tools.go_cases,
    "java": cases_tools.java_cases,
    "cli": cases_tools.cli_cases,
    "ansible": cases_tools.ansible_cases,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root", type=Path, default=Path("/tmp/wording"), help="deleted and made anew"
    )
    parser.add_argument("--family", action="append", choices=list(FAMILIES), help="repeatable")
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    families = args.family or list(FAMILIES)
    if args.root.exists():  # a fresh root each run (initdb wants an empty directory)
        shutil.rmtree(args.root)
    environment = Environment(args.root)
    try:
        env = environment.start()
        captured = {family: FAMILIES[family](env) for family in families}
    finally:
        environment.stop()
    documented = [json.loads(line) for line in DOCUMENTED.read_text().splitlines() if line.strip()]
    entries = [entry for family in families for entry in captured[family]] + documented
    args.out.write_text("".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries))
    for family, found in captured.items():
        print(f"{family}: {len(found)} entries", file=sys.stderr)


if __name__ == "__main__":
    main()
