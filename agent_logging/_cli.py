"""``agent-logging``: inspect and drain spools from the shell.

- ``agent-logging status --spool-dir DIR [--json]``: depth, oldest unsent age, owner, dead
  letters, damaged regions (``torn``, ``corrupt``: ``health()``'s counters, for what is on disk
  now) and records lost to damage (the quarantine's reports, and what the check against the
  ledger finds now) of every spool under DIR, read without disturbing a live owner.
- ``agent-logging drain --spool-dir DIR --loki-url URL [--timeout-s N]``: the gate before a
  reimage. Ships everything spooled (its owner may be gone; a live owner is left to ship its
  own, and waited for until what was spooled at the start has left its spool), then queries
  Loki until every spooled record is visible, and looks up every record of the spools'
  dead-letter files (entries Loki refused: they were never shipped, and a later run would
  find the spool empty). Exit 0 only when all of them are in Loki; exit 1 with the counts of
  what is missing otherwise; exit 2 for bad arguments: a missing DIR, or one that holds no
  spool (a spool is a directory with a ``lock`` file and ``seg-*.spool`` segments,
  ``<spool_dir>/<service>/``). ``--allow-empty`` accepts a DIR without spools, a node that
  never spooled anything; ``--accept-dead-letters`` accepts the loss of dead-lettered records
  (they are still counted and their files named). Records lost to damage (a segment cut short,
  flipped, emptied, overwritten or deleted) fail the gate too, with their count and where,
  while the spool's quarantine holds their reports; ``--accept-loss`` accepts them (still
  counted and named). The drain itself is in ``shipping._drain``.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from agent_logging import _environ
from agent_logging.errors import AgentLoggingError
from agent_logging.shipping._drain import (
    QUARANTINE_ADVICE,
    Losses,
    UsageError,
    check_spool_dir,
    drain,
    either,
    nested_spool_roots,
)
from agent_logging.spool._dirs import (
    DEAD_LETTER_NAME,
    dead_letter_paths,
    live_owner_pid,
    spool_dirs,
    spooled_records,
)
from agent_logging.spool._framing import Corrupt, TornTail

__all__ = ["main", "spool_status"]


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def spool_status(directory: Path) -> dict[str, Any]:
    """Depth, age and damage of one spool directory, read without its lock."""
    records = size = 0
    oldest: int | None = None
    damage = {"torn": 0, "corrupt": 0}

    def on_damage(path: Path, item: Corrupt | TornTail) -> None:
        damage["corrupt" if isinstance(item, Corrupt) else "torn"] += 1

    for record in spooled_records(directory, on_damage):
        records += 1
        size += len(record.payload)
        oldest = record.ts_ns if oldest is None else min(oldest, record.ts_ns)
    losses = Losses.of(directory)
    return {
        "spool": str(directory),
        "owner_pid": live_owner_pid(directory),
        "records": records,
        "bytes": size,
        "oldest_unsent_age_s": round((time.time_ns() - oldest) / 1e9, 3) if oldest else 0.0,
        "dead_lettered": sum(_count_lines(path) for path in dead_letter_paths(directory)),
        **damage,
        "lost": losses.records,
        "losses": losses.where(),
        "quarantine": str(losses.quarantine.folder) if losses.quarantine.folder.exists() else None,
    }


def _status(args: argparse.Namespace) -> int:
    check_spool_dir(args.spool_dir)
    rows = [spool_status(directory) for directory in spool_dirs(args.spool_dir)]
    if args.json:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return 0
    if not rows:
        print(f"no spools under {args.spool_dir}")
        nested = nested_spool_roots(args.spool_dir)
        if nested:
            print(f"did you mean {either(nested)}?", file=sys.stderr)
        return 0
    print(
        f"{'spool':<40} {'owner':>8} {'records':>9} {'bytes':>11} {'oldest_s':>9} {'dead':>6} "
        f"{'torn':>5} {'corrupt':>7} {'lost':>7}"
    )
    for row in rows:
        print(
            f"{row['spool']:<40} {row['owner_pid'] or '-':>8} {row['records']:>9} "
            f"{row['bytes']:>11} {row['oldest_unsent_age_s']:>9} {row['dead_lettered']:>6} "
            f"{row['torn']:>5} {row['corrupt']:>7} {row['lost']:>7}"
        )
    losses = [phrase for row in rows for phrase in row["losses"]]
    if losses:
        print("\nrecords lost to damage:\n  " + "\n  ".join(losses))
        print(textwrap.fill(QUARANTINE_ADVICE, width=100))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-logging",
        description="Inspect and drain agent_logging spools from the shell: status shows a "
        "spool's health, drain is the gate before a reimage.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="show the health of spools")
    status.add_argument(
        "--spool-dir",
        type=Path,
        required=True,
        help="the spool_dir the service was configured with, or one spool directory",
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    drain = sub.add_parser(
        "drain",
        help="ship every spooled record and confirm it in Loki",
        description="The gate before a reimage: ship every spooled record, then confirm in "
        "Loki that every one of them, and every record of the spools' dead-letter files "
        "(entries Loki refused), is there. Exit 0 only then; 1 with what is missing; 2 for "
        "bad arguments, including a --spool-dir that holds no spool.",
    )
    drain.add_argument(
        "--spool-dir",
        type=Path,
        required=True,
        help="the spool_dir the service was configured with ($AGENT_LOGGING_SPOOL_DIR), whose "
        "subdirectories are spools, or one spool directory (a `lock` file and `seg-*.spool` "
        "segments)",
    )
    # Each Loki option defaults to the variable configure() reads, so a node's environment
    # serves its reimage gate as it served the service.
    env = os.environ.get
    drain.add_argument(
        "--loki-url", default=env(_environ.LOKI_URL), help=f"default: ${_environ.LOKI_URL}"
    )
    drain.add_argument(
        "--timeout-s",
        type=float,
        default=120.0,
        help="give up after this many seconds of shipping and querying (default 120)",
    )
    # A command line is visible to every user of the machine (ps): secrets are better given
    # through the environment.
    for flag, variable, meaning in (
        ("--tenant", _environ.LOKI_TENANT, "X-Scope-OrgID of a multi-tenant Loki"),
        ("--username", _environ.LOKI_USERNAME, "basic auth user"),
        ("--password", _environ.LOKI_PASSWORD, "basic auth password (the variable is safer)"),
        ("--bearer-token", _environ.LOKI_BEARER_TOKEN, "bearer token (the variable is safer)"),
        ("--ca-bundle", _environ.LOKI_CA_BUNDLE, "CA certificates (a file) for Loki's TLS"),
    ):
        drain.add_argument(flag, default=env(variable), help=f"{meaning}; default: ${variable}")
    drain.add_argument(
        "--node-id-label",
        choices=("auto", "on", "off"),
        default="auto",
        help="ship orphaned spools with node_id as a stream label (auto: for layer=node, as "
        "configure() does)",
    )
    drain.add_argument(
        "--allow-empty",
        action="store_true",
        help="pass when --spool-dir is missing or holds no spool (a node that never spooled, "
        "freshly installed); without it that is an error, as a mistyped path would pass the "
        "gate having checked nothing. Spools found below --spool-dir still fail",
    )
    drain.add_argument(
        "--accept-loss",
        action="store_true",
        help="pass although records were lost to damage (the reports in each spool's "
        "quarantine/ folder: a segment cut short, flipped, emptied, overwritten or deleted): "
        "accept their loss. Without it they fail the gate on every run until the folder is "
        "removed; with it they are still counted and named",
    )
    drain.add_argument(
        "--accept-dead-letters",
        action="store_true",
        help="pass although records of the dead-letter files (entries Loki refused, kept in "
        f"each spool's {DEAD_LETTER_NAME} and {DEAD_LETTER_NAME}.1) are not in Loki: accept "
        "their loss. Without it they fail the gate on every run until they are in Loki; with "
        "it they are still counted and their files named",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agent-logging`` command."""
    args = _parser().parse_args(argv)
    try:
        return _status(args) if args.command == "status" else drain(args)
    except (AgentLoggingError, UsageError) as exc:
        print(f"agent-logging: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # ``python -m agent_logging._cli``
    sys.exit(main())
