"""``python -m dashboards [--check] [--dir DIR]``: regenerate the dashboard JSON.

Without ``--check`` the files are (re)written. With it nothing is written, and the exit status
is 1 when a committed file differs from a fresh build (or is missing, or no dashboard produces
it any more), naming the files: the CI guard against hand-edited or stale JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dashboards import JSON_DIR, stale_files, write_all


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0, or 1 when ``--check`` finds stale files.
    """
    parser = argparse.ArgumentParser(
        prog="python -m dashboards",
        description="Regenerate the dashboard JSON. With --check nothing is written, and the "
        "exit status is 1 when a committed file differs from a fresh build (or is missing, or "
        "no dashboard produces it any more), naming the files.",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the files differ from a fresh build"
    )
    parser.add_argument(
        "--dir", type=Path, default=JSON_DIR, help=f"output directory (default {JSON_DIR})"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.dir)
        for name in stale:
            print(
                f"dashboards: {args.dir / name} is stale: run python -m dashboards", file=sys.stderr
            )
        return 1 if stale else 0
    for path in write_all(args.dir):
        print(f"dashboards: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
