"""``agent-logging``: inspect and drain spools from the shell.

- ``agent-logging status --spool-dir DIR [--json]``: depth, oldest unsent age, owner and
  dead letters of every spool under DIR, read without disturbing a live owner.
- ``agent-logging drain --spool-dir DIR --loki-url URL [--timeout-s N]``: the gate before a
  reimage. Ships everything spooled (its owner may be gone; a live owner is left to ship its
  own, and waited for until what was spooled at the start has left its spool), then queries
  Loki until every spooled record is visible. Exit 0 only then; exit 1 with the count of
  what is missing otherwise; exit 2 for bad arguments (a missing DIR included).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agent_logging import _environ
from agent_logging._durable import DEAD_LETTER_NAME, spool_dirs
from agent_logging._entries import entry_from_record, render_labels
from agent_logging._loki_client import LokiClient, LokiQueryError
from agent_logging._shipper import Shipper
from agent_logging._spool import Spool, SpooledRecord, read_all
from agent_logging.errors import AgentLoggingError, SpoolError

__all__ = ["main"]

_POLL_S = 0.25


class _UsageError(Exception):
    """A command-line argument is unusable: exit 2, as argparse does."""


def _records(directory: Path) -> Iterator[SpooledRecord]:
    """The spool's unacknowledged records; none once its directory is gone.

    An adopting process removes an orphan spool it emptied, possibly while we look at it:
    a directory that vanished holds nothing, which is not an error.
    """
    try:
        yield from read_all(directory)
    except SpoolError:
        if directory.exists():
            raise


def _owner(directory: Path) -> str | None:
    """The pid holding the spool's lock, or None when nobody does."""
    lock = directory / "lock"
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # no lock file, or the spool was removed meanwhile
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            text = lock.read_text("ascii", "replace").strip()
        except OSError:
            text = ""
        return text or "unknown"
    finally:
        os.close(fd)  # closing drops our shared lock, if we got it
    return None


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def spool_status(directory: Path) -> dict[str, Any]:
    """Depth and age of one spool directory, read without its lock."""
    records = size = 0
    oldest: int | None = None
    for record in _records(directory):
        records += 1
        size += len(record.payload)
        oldest = record.ts_ns if oldest is None else min(oldest, record.ts_ns)
    return {
        "spool": str(directory),
        "owner_pid": _owner(directory),
        "records": records,
        "bytes": size,
        "oldest_unsent_age_s": round((time.time_ns() - oldest) / 1e9, 3) if oldest else 0.0,
        "dead_lettered": _count_lines(directory / DEAD_LETTER_NAME),
    }


def _status(args: argparse.Namespace) -> int:
    _check_spool_dir(args.spool_dir)
    rows = [spool_status(directory) for directory in spool_dirs(args.spool_dir)]
    if args.json:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return 0
    if not rows:
        print(f"no spools under {args.spool_dir}")
        return 0
    print(f"{'spool':<40} {'owner':>8} {'records':>9} {'bytes':>11} {'oldest_s':>9} {'dead':>6}")
    for row in rows:
        print(
            f"{row['spool']:<40} {row['owner_pid'] or '-':>8} {row['records']:>9} "
            f"{row['bytes']:>11} {row['oldest_unsent_age_s']:>9} {row['dead_lettered']:>6}"
        )
    return 0


@dataclass
class _Expected:
    """What must be visible in Loki: per stream, the (ts_ns, line digest) of each record."""

    streams: dict[str, set[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(set))
    window: dict[str, list[int]] = field(default_factory=dict)

    def add(self, label_string: str, ts_ns: int, line: str) -> None:
        self.streams[label_string].add((ts_ns, _digest(line)))
        low_high = self.window.setdefault(label_string, [ts_ns, ts_ns])
        low_high[0], low_high[1] = min(low_high[0], ts_ns), max(low_high[1], ts_ns)

    def __len__(self) -> int:
        return sum(len(keys) for keys in self.streams.values())


def _digest(line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _default_labels(directory: Path) -> dict[str, str]:
    service = directory.name.split(".", 1)[0] or "unknown"
    return {"service_name": service, "layer": "unknown", "env": "unknown"}


def _collect(directories: Sequence[Path]) -> _Expected:
    # Streams are keyed by service_name, layer and env only: a selector of those matches the
    # stream whether or not its owner also made node_id a label.
    expected = _Expected()
    for directory in directories:
        defaults = _default_labels(directory)
        for record in _records(directory):
            entry = entry_from_record(
                record.ts_ns, record.payload, node_id_label=False, default_labels=defaults
            )
            expected.add(render_labels(entry.labels), entry.ts_ns, entry.line)
    return expected


def _node_id_label(choice: str, directory: Path) -> bool:
    """Whether to ship a spool with ``node_id`` as a label, as its owner would have."""
    if choice != "auto":
        return choice == "on"
    head = next(_records(directory), None)
    if head is None:
        return False
    try:
        layer = orjson.loads(head.payload).get("layer")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return bool(layer == "node")


def _shipped_by_owner(directory: Path, expected: _Expected) -> bool:
    """Whether a live owner has shipped every record its spool held when drain started.

    The owner goes on logging, so its spool may never be empty; but it acknowledges in
    order, so once the oldest record left is not one drain collected, all those are gone.
    """
    head = next(_records(directory), None)
    if head is None:
        return True
    entry = entry_from_record(
        head.ts_ns, head.payload, node_id_label=False, default_labels=_default_labels(directory)
    )
    keys = expected.streams.get(render_labels(entry.labels), set())
    return (entry.ts_ns, _digest(entry.line)) not in keys


def _ship(
    directory: Path,
    client: LokiClient,
    args: argparse.Namespace,
    deadline: float,
    expected: _Expected,
) -> str:
    """Ship one spool; returns a problem sentence or ""."""
    if not directory.exists():
        return ""  # adopted, emptied and removed by a live process since we listed it
    spool = Spool.try_open(directory)
    if spool is None:
        # A live owner ships its own spool: wait until what drain collected has left it.
        while time.monotonic() < deadline:
            if _shipped_by_owner(directory, expected):
                return ""
            time.sleep(_POLL_S)
        return f"{directory}: its owner (pid {_owner(directory)}) did not ship it in time"
    with spool:
        shipper = Shipper(
            spool,
            client,
            dead_letter_path=directory / DEAD_LETTER_NAME,
            node_id_label=_node_id_label(args.node_id_label, directory),
            default_labels=_default_labels(directory),
            backoff_max_s=5.0,
        )
        if not shipper.ship_pending(max(0.0, deadline - time.monotonic())):
            last_error = shipper.stats()["last_error"]
            return f"{directory}: Loki did not accept everything in time ({last_error})"
    return ""


def _dead_lettered(directories: Sequence[Path]) -> set[tuple[int, bytes]]:
    keys: set[tuple[int, bytes]] = set()
    for directory in directories:
        path = directory / DEAD_LETTER_NAME
        if not path.exists():
            continue
        for raw in path.read_bytes().splitlines():
            try:
                letter = orjson.loads(raw)
                keys.add((int(letter["ts_ns"]), _digest(str(letter["line"]))))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return keys


def _selector(label_string: str) -> str:
    # Our label strings are already LogQL stream selectors with escaped values.
    return label_string


def _verify(client: LokiClient, expected: _Expected, deadline: float) -> tuple[int, str]:
    """Query Loki until every expected record is visible; returns (missing, last error)."""
    missing = {stream: set(keys) for stream, keys in expected.streams.items()}
    error = ""
    while True:
        for stream in [s for s, keys in missing.items() if keys]:
            low, high = expected.window[stream]
            try:
                for entry in client.iter_query_range(
                    _selector(stream), start_ns=low, end_ns=high + 1
                ):
                    missing[stream].discard((entry.ts_ns, _digest(entry.line)))
            except LokiQueryError as exc:
                error = str(exc)
        left = sum(len(keys) for keys in missing.values())
        if left == 0 or time.monotonic() >= deadline:
            return left, error
        time.sleep(_POLL_S)


def _check_spool_dir(spool_dir: Path) -> None:
    # A mistyped path must not pass the reimage gate as "all 0 records are visible".
    if not spool_dir.is_dir():
        raise _UsageError(f"--spool-dir {spool_dir} is not a directory")


def _drain(args: argparse.Namespace) -> int:
    _check_spool_dir(args.spool_dir)
    if not args.loki_url:
        raise _UsageError(f"give --loki-url or set {_environ.LOKI_URL}")
    if not (math.isfinite(args.timeout_s) and args.timeout_s > 0):
        raise _UsageError(f"--timeout-s must be a positive number of seconds, not {args.timeout_s}")
    started = time.monotonic()
    deadline = started + args.timeout_s
    directories = spool_dirs(args.spool_dir)
    expected = _collect(directories)
    basic = (args.username, args.password or "") if args.username else None
    client = LokiClient(
        args.loki_url,
        tenant=args.tenant,
        basic_auth=basic,
        bearer_token=args.bearer_token,
        ca_bundle=args.ca_bundle,
    )
    problems = []
    with client:
        for directory in directories:
            problem = _ship(directory, client, args, deadline, expected)
            if problem:
                problems.append(problem)
        refused = _dead_lettered(directories)
        missing, error = _verify(client, expected, deadline)
    took = time.monotonic() - started
    total = len(expected)
    for problem in problems:
        print(f"drain: {problem}", file=sys.stderr)
    if missing == 0:
        print(
            f"drain: all {total} spooled records from {len(directories)} spools are visible "
            f"in Loki ({took:.1f} s)"
        )
        return 0
    detail = f"; {len(refused)} were refused by Loki (see {DEAD_LETTER_NAME})" if refused else ""
    detail += f"; last query error: {error}" if error else ""
    print(
        f"drain: {missing} of {total} spooled records are NOT visible in Loki after {took:.1f} s"
        f"{detail}. Do not reimage yet.",
        file=sys.stderr,
    )
    return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-logging", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="show the health of spools")
    status.add_argument("--spool-dir", type=Path, required=True)
    status.add_argument("--json", action="store_true", help="print JSON")
    drain = sub.add_parser("drain", help="ship every spooled record and confirm it in Loki")
    drain.add_argument("--spool-dir", type=Path, required=True)
    # Each Loki option defaults to the variable configure() reads, so a node's environment
    # serves its reimage gate as it served the service.
    env = os.environ.get
    drain.add_argument(
        "--loki-url", default=env(_environ.LOKI_URL), help=f"default: ${_environ.LOKI_URL}"
    )
    drain.add_argument("--timeout-s", type=float, default=120.0)
    drain.add_argument("--tenant", default=env(_environ.LOKI_TENANT))
    drain.add_argument("--username", default=env(_environ.LOKI_USERNAME))
    drain.add_argument("--password", default=env(_environ.LOKI_PASSWORD))
    drain.add_argument("--bearer-token", default=env(_environ.LOKI_BEARER_TOKEN))
    drain.add_argument("--ca-bundle", default=env(_environ.LOKI_CA_BUNDLE))
    drain.add_argument(
        "--node-id-label",
        choices=("auto", "on", "off"),
        default="auto",
        help="ship orphaned spools with node_id as a stream label (auto: for layer=node, as "
        "configure() does)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agent-logging`` command."""
    args = _parser().parse_args(argv)
    try:
        return _status(args) if args.command == "status" else _drain(args)
    except (AgentLoggingError, _UsageError) as exc:
        print(f"agent-logging: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # ``python -m agent_logging._cli``
    sys.exit(main())
