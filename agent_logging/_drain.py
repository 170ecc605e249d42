"""``agent-logging drain``: the gate before a reimage, and finding spools from the shell.

:func:`drain` ships everything spooled (its owner may be gone; a live owner is left to ship
its own, and waited for until what was spooled at the start has left its spool), then queries
Loki until every spooled record is visible, and looks up every record of the spools'
dead-letter files (entries Loki refused: they were never shipped, and a later run would find
the spool empty). It answers 0 only when all of them are in Loki, and 1 with the counts of
what is missing otherwise. A ``--spool-dir`` that holds no spool is a :class:`UsageError`
(naming spools found below it, if any): a mistyped path must not pass the gate having checked
nothing. The spool-reading helpers here (:func:`records`, :func:`owner_pid`, ...) serve
``agent-logging status`` too (``_cli``).
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

import orjson

from agent_logging import _environ
from agent_logging._entries import entry_from_record, render_labels
from agent_logging._loki_client import LokiClient, LokiQueryError
from agent_logging._shipper import Shipper
from agent_logging._spool import Spool, SpooledRecord, read_all
from agent_logging._spool_dirs import DEAD_LETTER_NAME, dead_letter_paths, is_spool_dir, spool_dirs
from agent_logging.errors import SpoolError

__all__ = [
    "UsageError",
    "check_spool_dir",
    "drain",
    "either",
    "nested_spool_roots",
    "owner_pid",
    "spooled_records",
]

_POLL_S = 0.25
#: One query covers at most this span of a stream: Loki refuses a query longer than its
#: ``max_query_length`` (721 h by default), and dead letters can be months old.
_WINDOW_NS = 24 * 3600 * 10**9
#: How many directories below ``--spool-dir`` are looked at for a misplaced spool.
_SEARCH_DIRS = 2000
_SEARCH_DEPTH = 3
_SPOOL_LOOKS = (
    "a spool is a directory holding a `lock` file and `seg-*.spool` segment files; "
    "a service configured with spool_dir=DIR (AGENT_LOGGING_SPOOL_DIR) keeps it in DIR/<service>/"
)


class UsageError(Exception):
    """A command-line argument is unusable: exit 2, as argparse does."""


def spooled_records(directory: Path) -> Iterator[SpooledRecord]:
    """The spool's unacknowledged records; none once its directory is gone.

    An adopting process removes an orphan spool it emptied, possibly while we look at it:
    a directory that vanished holds nothing, which is not an error.
    """
    try:
        yield from read_all(directory)
    except SpoolError:
        if directory.exists():
            raise


def owner_pid(directory: Path) -> str | None:
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


_Key = tuple[int, bytes]  # (ts_ns, digest of the line): one record, as Loki de-duplicates
_Streams = dict[str, set[_Key]]  # stream selector -> keys


@dataclass
class _Expected:
    """What must be visible in Loki: per stream, the (ts_ns, line digest) of each record."""

    streams: _Streams = field(default_factory=lambda: defaultdict(set))

    def add(self, label_string: str, ts_ns: int, line: str) -> None:
        self.streams[label_string].add((ts_ns, _digest(line)))

    def __len__(self) -> int:
        return _count(self.streams)


def _count(streams: _Streams) -> int:
    return sum(len(keys) for keys in streams.values())


def _intersection(streams: _Streams, other: _Streams) -> _Streams:
    return {s: keys & other[s] for s, keys in streams.items() if s in other and keys & other[s]}


def _difference(streams: _Streams, other: _Streams) -> _Streams:
    return {s: keys - other.get(s, set()) for s, keys in streams.items()}


def _union(streams: _Streams, other: _Streams) -> _Streams:
    merged = {s: set(keys) for s, keys in streams.items()}
    for s, keys in other.items():
        merged.setdefault(s, set()).update(keys)
    return merged


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
        for record in spooled_records(directory):
            entry = entry_from_record(
                record.ts_ns, record.payload, node_id_label=False, default_labels=defaults
            )
            expected.add(render_labels(entry.labels), entry.ts_ns, entry.line)
    return expected


def _node_id_label(choice: str, directory: Path) -> bool:
    """Whether to ship a spool with ``node_id`` as a label, as its owner would have."""
    if choice != "auto":
        return choice == "on"
    head = next(spooled_records(directory), None)
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
    head = next(spooled_records(directory), None)
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
        return f"{directory}: its owner (pid {owner_pid(directory)}) did not ship it in time"
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


@dataclass
class _DeadLetters:
    """The records of the spools' dead-letter files: refused by Loki, never shipped."""

    streams: _Streams = field(default_factory=lambda: defaultdict(set))
    files: list[Path] = field(default_factory=list)
    #: Lines that could not be read (a torn last line, a foreign file): not verifiable.
    unreadable: int = 0


_STREAM_LABELS = frozenset({"service_name", "layer", "env"})


def _dead_letters(directories: Sequence[Path]) -> _DeadLetters:
    letters = _DeadLetters()
    for directory in directories:
        for path in dead_letter_paths(directory):
            try:
                content = path.read_bytes()
            except FileNotFoundError:
                continue  # removed since it was listed
            letters.files.append(path)
            for raw in content.splitlines():
                try:
                    letter = orjson.loads(raw)
                    # Keyed as _collect keys a spooled record: node_id may be a label of the
                    # letter's stream, and a selector without it matches that stream too.
                    labels = tuple(
                        (str(k), str(v)) for k, v in letter["labels"].items() if k in _STREAM_LABELS
                    )
                    key = (int(letter["ts_ns"]), _digest(str(letter["line"])))
                except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                    letters.unreadable += 1
                    continue
                letters.streams[render_labels(labels)].add(key)
    return letters


def _selector(label_string: str) -> str:
    # Our label strings are already LogQL stream selectors with escaped values.
    return label_string


def _windows(keys: set[_Key]) -> list[tuple[int, int]]:
    """``[start, end)`` windows covering the keys' stamps, none longer than ``_WINDOW_NS``."""
    windows: list[list[int]] = []
    for ts_ns in sorted({ts for ts, _ in keys}):
        if windows and ts_ns - windows[-1][0] < _WINDOW_NS:
            windows[-1][1] = ts_ns
        else:
            windows.append([ts_ns, ts_ns])
    return [(low, high + 1) for low, high in windows]


def _verify(
    client: LokiClient, expected: _Streams, deadline: float, *, settled: _Streams
) -> tuple[_Streams, str]:
    """Query Loki until every expected record is visible; returns (missing, last error).

    Records in ``settled`` (dead letters: nothing will ship them any more) are looked for
    once and not waited for.
    """
    missing = {stream: set(keys) for stream, keys in expected.items()}
    windows = {stream: _windows(keys) for stream, keys in expected.items()}
    error = ""
    while True:
        for stream, keys in missing.items():
            for start_ns, end_ns in windows[stream]:
                if not any(start_ns <= ts < end_ns for ts, _ in keys):
                    continue
                try:
                    for entry in client.iter_query_range(
                        _selector(stream), start_ns=start_ns, end_ns=end_ns
                    ):
                        keys.discard((entry.ts_ns, _digest(entry.line)))
                except LokiQueryError as exc:
                    error = str(exc)
        awaited = _count(_difference(missing, settled))
        if awaited == 0 or time.monotonic() >= deadline:
            return missing, error
        time.sleep(_POLL_S)


def check_spool_dir(spool_dir: Path) -> None:
    if not spool_dir.is_dir():
        raise UsageError(f"--spool-dir {spool_dir} is not a directory")


def nested_spool_roots(root: Path) -> list[Path]:
    """Directories below ``root`` that hold spools: where ``--spool-dir`` may have meant.

    Looks ``_SEARCH_DEPTH`` levels down, at no more than ``_SEARCH_DIRS`` directories (a
    ``--spool-dir /`` must not walk the disk); symbolic links are not followed.
    """
    found: list[Path] = []
    level = [root]
    budget = _SEARCH_DIRS
    for _ in range(_SEARCH_DEPTH):
        below: list[Path] = []
        for directory in level:
            try:
                children = sorted(
                    p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()
                )
            except OSError:
                continue
            for child in children:
                budget -= 1
                if budget < 0:
                    return found
                if is_spool_dir(child):
                    if directory != root:
                        found.append(directory)
                        break  # one hit names the directory; its siblings need no look
                else:
                    below.append(child)
        level = below
    return sorted(set(found))


def either(paths: Sequence[Path]) -> str:
    return " or ".join(str(path) for path in paths[:3]) + (" or ..." if len(paths) > 3 else "")


def _spools_to_drain(root: Path, allow_empty: bool) -> list[Path]:
    """The spools under ``root``; an empty list only when ``allow_empty`` accepts that.

    A mistyped path must not pass the reimage gate as "all 0 records are visible".

    Raises:
        UsageError: ``root`` is missing or holds no spool (and ``allow_empty`` does not
            apply), naming where spools were found below it, if anywhere.
    """
    if not root.is_dir():
        if allow_empty and not root.exists():
            return []
        raise UsageError(f"--spool-dir {root} is not a directory")
    directories = spool_dirs(root)
    if directories:
        return directories
    nested = nested_spool_roots(root)
    if nested:
        # Never accepted as empty: this node did spool, somewhere else than was given.
        raise UsageError(
            f"--spool-dir {root} holds no spool; did you mean {either(nested)}? ({_SPOOL_LOOKS})"
        )
    if allow_empty:
        return []
    raise UsageError(
        f"--spool-dir {root} holds no spool ({_SPOOL_LOOKS}); give the spool_dir the "
        "service was configured with, or pass --allow-empty if this node never spooled"
    )


def drain(args: argparse.Namespace) -> int:
    if not args.loki_url:
        raise UsageError(f"give --loki-url or set {_environ.LOKI_URL}")
    if not (math.isfinite(args.timeout_s) and args.timeout_s > 0):
        raise UsageError(f"--timeout-s must be a positive number of seconds, not {args.timeout_s}")
    started = time.monotonic()
    deadline = started + args.timeout_s
    directories = _spools_to_drain(args.spool_dir, args.allow_empty)
    if not directories:
        print(f"drain: no spool under {args.spool_dir}: nothing to ship (--allow-empty)")
        return 0
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
        # Read after shipping: records refused just now are dead letters too.
        letters = _dead_letters(directories)
        # Accepted dead letters are not looked for: old ones may be past Loki's retention.
        wanted = (
            expected.streams
            if args.accept_dead_letters
            else _union(expected.streams, letters.streams)
        )
        missing, error = _verify(client, wanted, deadline, settled=letters.streams)
    spooled_missing = _intersection(missing, expected.streams)
    earlier_letters = _difference(letters.streams, expected.streams)
    for problem in problems:
        print(f"drain: {problem}", file=sys.stderr)
    return _verdict(
        _Outcome(
            spools=len(directories),
            total=len(expected),
            # Spooled records Loki refused (this run, or a run cut short before): dead letters.
            refused=_count(_intersection(spooled_missing, letters.streams)),
            # Spooled records missing for any other reason: accepted but lost, not yet
            # visible, or not shipped in time. Never accepted.
            lost=_count(_difference(spooled_missing, letters.streams)),
            # Records of the dead-letter files that were not spooled now: not in Loki (or, when
            # accepted, not looked for).
            earlier=_count(
                earlier_letters
                if args.accept_dead_letters
                else _intersection(missing, earlier_letters)
            ),
            letters=letters,
            took_s=time.monotonic() - started,
            error=error,
        ),
        accept_dead_letters=args.accept_dead_letters,
    )


@dataclass(frozen=True)
class _Outcome:
    """What a drain found: counts of records, as :func:`drain` works them out."""

    spools: int
    total: int
    refused: int
    lost: int
    earlier: int
    letters: _DeadLetters
    took_s: float
    error: str


def _verdict(outcome: _Outcome, *, accept_dead_letters: bool) -> int:
    """Print what drain found; 0 when the node may be reimaged, else 1."""
    o = outcome
    unconfirmed = o.refused + o.earlier + o.letters.unreadable  # dead letters not in Loki
    files = ", ".join(str(path) for path in o.letters.files)
    visible = o.total - o.lost - o.refused
    if o.lost == 0 and (unconfirmed == 0 or accept_dead_letters):
        text = (
            f"drain: all {visible} spooled records from {o.spools} spools are visible in Loki "
            f"({o.took_s:.1f} s)"
        )
        if unconfirmed:
            text += (
                f"; {unconfirmed} dead-lettered records, not confirmed in Loki, are accepted "
                f"as lost (--accept-dead-letters; see {files})"
            )
        elif o.letters.streams and not accept_dead_letters:
            text += f"; so are the {_count(o.letters.streams)} records of the dead-letter files"
        print(text)
        return 0
    parts = []
    if o.lost or o.refused:
        part = (
            f"{o.lost + o.refused} of {o.total} spooled records are NOT visible in Loki after "
            f"{o.took_s:.1f} s"
        )
        if o.refused:
            part += f"; {o.refused} were refused by Loki"
        parts.append(part)
    if o.earlier:
        parts.append(f"{o.earlier} records dead-lettered by an earlier run are NOT in Loki")
    if o.letters.unreadable:
        parts.append(f"{o.letters.unreadable} lines of the dead-letter files cannot be read")
    text = "drain: " + "; ".join(parts)
    if unconfirmed:
        text += f" (see {files})"
    if o.error:
        text += f"; last query error: {o.error}"
    text += ". Do not reimage yet."
    if unconfirmed and not accept_dead_letters:
        text += (
            " Dead letters are entries Loki refused, each with its labels, timestamp, line and "
            "Loki's reason: fix the cause and push them again, or pass --accept-dead-letters "
            "to accept their loss."
        )
    print(text, file=sys.stderr)
    return 1
