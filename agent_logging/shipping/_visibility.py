"""What ``agent-logging drain`` must find in Loki, and the ``query_range`` check that it does.

A record is known to Loki by its stream, its timestamp and its line: Loki de-duplicates on
exactly these, within one stream; a record stored in two shards of its stream (the same labels
but ``__stream_shard__``) is one entry here too: the keys are per selector, which matches every
shard. :func:`collect` keys every spooled
record that way (:class:`Expected`), :func:`dead_letters` the records of the spools'
dead-letter files (entries Loki refused), and :func:`verify` queries Loki, window by window,
until each is seen or the deadline passes. Streams are keyed by ``service_name``, ``layer``
and ``env`` only: a selector of those matches the stream whether or not its owner also made
``node_id`` a label. Lines are compared by a 16-byte digest, so a drain of a large spool
holds keys, not lines.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from agent_logging.loki._client import LokiClient, LokiQueryError
from agent_logging.loki._entries import entry_from_record, render_labels
from agent_logging.spool._dirs import dead_letter_paths, spooled_records
from agent_logging.spool._segments import SpooledRecord

__all__ = [
    "POLL_S",
    "DeadLetters",
    "Expected",
    "Streams",
    "collect",
    "count",
    "dead_letters",
    "default_labels",
    "difference",
    "intersection",
    "record_key",
    "union",
    "verify",
]

#: How often drain looks again: at Loki for records not yet visible, at a live owner's spool.
POLL_S = 0.25
#: One query covers at most this span of a stream: Loki refuses a query longer than its
#: ``max_query_length`` (721 h by default), and dead letters can be months old.
_WINDOW_NS = 24 * 3600 * 10**9
_STREAM_LABELS = frozenset({"service_name", "layer", "env"})

Key = tuple[int, bytes]  # (ts_ns, digest of the line): one record, as Loki de-duplicates
Streams = dict[str, set[Key]]  # stream selector -> keys


@dataclass
class Expected:
    """What must be visible in Loki: per stream, the (ts_ns, line digest) of each record."""

    streams: Streams = field(default_factory=lambda: defaultdict(set))

    def __len__(self) -> int:
        return count(self.streams)


@dataclass
class DeadLetters:
    """The records of the spools' dead-letter files: refused by Loki, never shipped."""

    streams: Streams = field(default_factory=lambda: defaultdict(set))
    files: list[Path] = field(default_factory=list)
    #: Lines that could not be read (a torn last line, a foreign file): not verifiable.
    unreadable: int = 0


def count(streams: Streams) -> int:
    return sum(len(keys) for keys in streams.values())


def intersection(streams: Streams, other: Streams) -> Streams:
    return {s: keys & other[s] for s, keys in streams.items() if s in other and keys & other[s]}


def difference(streams: Streams, other: Streams) -> Streams:
    return {s: keys - other.get(s, set()) for s, keys in streams.items()}


def union(streams: Streams, other: Streams) -> Streams:
    merged = {s: set(keys) for s, keys in streams.items()}
    for s, keys in other.items():
        merged.setdefault(s, set()).update(keys)
    return merged


def _digest(line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def default_labels(directory: Path) -> dict[str, str]:
    """The labels of a spool's records that name none: the service from the directory's name."""
    service = directory.name.split(".", 1)[0] or "unknown"
    return {"service_name": service, "layer": "unknown", "env": "unknown"}


def record_key(record: SpooledRecord, defaults: Mapping[str, str]) -> tuple[str, Key]:
    """A spooled record as Loki will know it: its stream selector and its key.

    Args:
        record: the record.
        defaults: the labels of its spool's records that name none (:func:`default_labels`).
    """
    entry = entry_from_record(
        record.ts_ns, record.payload, node_id_label=False, default_labels=defaults
    )
    return render_labels(entry.labels), (entry.ts_ns, _digest(entry.line))


def collect(directories: Sequence[Path]) -> Expected:
    """Every record the spools hold now."""
    expected = Expected()
    for directory in directories:
        defaults = default_labels(directory)
        for record in spooled_records(directory):
            stream, key = record_key(record, defaults)
            expected.streams[stream].add(key)
    return expected


def dead_letters(directories: Sequence[Path]) -> DeadLetters:
    """Every record of the spools' dead-letter files, keyed as :func:`collect` keys them."""
    letters = DeadLetters()
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
                    # node_id may be a label of the letter's stream; a selector without it
                    # matches that stream too.
                    labels = tuple(
                        (str(k), str(v)) for k, v in letter["labels"].items() if k in _STREAM_LABELS
                    )
                    key = (int(letter["ts_ns"]), _digest(str(letter["line"])))
                except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                    letters.unreadable += 1
                    continue
                letters.streams[render_labels(labels)].add(key)
    return letters


def _windows(keys: set[Key]) -> list[tuple[int, int]]:
    """``[start, end)`` windows covering the keys' stamps, none longer than ``_WINDOW_NS``."""
    windows: list[list[int]] = []
    for ts_ns in sorted({ts for ts, _ in keys}):
        if windows and ts_ns - windows[-1][0] < _WINDOW_NS:
            windows[-1][1] = ts_ns
        else:
            windows.append([ts_ns, ts_ns])
    return [(low, high + 1) for low, high in windows]


def verify(
    client: LokiClient, expected: Streams, deadline: float, *, settled: Streams
) -> tuple[Streams, str]:
    """Query Loki until every expected record is visible; returns (missing, last error).

    Records in ``settled`` (dead letters: nothing will ship them any more) are looked for
    once and not waited for. Our label strings are already LogQL stream selectors with
    escaped values (``loki._entries.render_labels``).
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
                    for entry in client.iter_query_range(stream, start_ns=start_ns, end_ns=end_ns):
                        keys.discard((entry.ts_ns, _digest(entry.line)))
                except LokiQueryError as exc:
                    error = str(exc)
        awaited = count(difference(missing, settled))
        if awaited == 0 or time.monotonic() >= deadline:
            return missing, error
        time.sleep(POLL_S)
