"""The test server's storage: Loki's distributor + ingester rules over in-memory lists.

A push goes through the distributor's checks (:mod:`tests.lokisim._limits`): labels
that do not parse refuse the whole push, bad labels refuse one stream, bad entries
refuse one entry each. The valid entries then meet the ingester
(``pkg/ingester/stream.go``):

- an entry identical (timestamp, line, metadata) to one the stream holds is
  silently ignored: Loki de-duplicates resent entries;
- an entry older than the stream's newest timestamp minus ``max_chunk_age / 2``
  (1 h) is refused as "too far behind", even when it was stored before.

Loki's ingester keeps only the *last* stream's error of a push
(``instance.Push`` overwrites ``appendErr``), and an ingester error replaces the
distributor's validation errors in the response; both quirks are reproduced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.lokisim._labels import format_labels
from tests.lokisim._levels import (
    LEVEL_LABEL,
    detect_level,
    normalize_level,
    normalize_metadata_name,
)
from tests.lokisim._limits import (
    MISSING_STREAMS,
    Limits,
    go_rfc3339,
    go_time_string,
    group_errors,
    parse_stream_labels,
    validate_entry,
    validate_labels,
)
from tests.lokisim._logql import LogQuery
from tests.lokisim._proto import PushEntry, PushStream

__all__ = ["Hit", "PushResult", "Store", "StoredEntry"]

_NS_PER_S = 1_000_000_000
_Key = tuple[int, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class StoredEntry:
    """One entry as Loki stored it.

    Attributes:
        labels: the stream's labels after Loki's normalisation (``service_name`` added).
        ts_ns: timestamp in ns since the epoch.
        line: the log line.
        metadata: structured metadata, names normalised, ``detected_level`` added.
    """

    labels: dict[str, str]
    ts_ns: int
    line: str
    metadata: dict[str, str]


@dataclass(frozen=True)
class PushResult:
    """What the push endpoint answers: 204 with no message, or an error status and text."""

    status: int
    message: str = ""


@dataclass(frozen=True)
class Hit:
    """A query match: the entry, its printed labels (stream, metadata and parsed), the
    parsed labels, and its arrival index."""

    entry: StoredEntry
    stream: str
    parsed: dict[str, str]
    seq: int


@dataclass
class _Stream:
    highest_ts: int | None = None
    last_line: _Key | None = None
    keys: set[_Key] = field(default_factory=set)


@dataclass
class _Tenant:
    records: list[tuple[StoredEntry, str]] = field(default_factory=list)
    streams: dict[str, _Stream] = field(default_factory=dict)


@dataclass(frozen=True)
class _Batch:
    labels: dict[str, str]
    shown: str
    entries: list[tuple[PushEntry, _Key]]


class Store:
    """Thread-safe per-tenant storage with Loki's acceptance rules."""

    def __init__(self, limits: Limits) -> None:
        """Create an empty store.

        Args:
            limits: the limits every tenant gets.
        """
        self._limits = limits
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tenants: dict[str, _Tenant] = {}

    def push(self, tenant: str, streams: list[PushStream]) -> PushResult:
        """Validate and store a decoded push.

        Args:
            tenant: the tenant ID.
            streams: the decoded streams, in wire order.

        Returns:
            The status and message Loki would answer.
        """
        if not streams:
            return PushResult(422, MISSING_STREAMS)
        try:
            parsed = [
                (parse_stream_labels(stream.labels, self._limits), stream) for stream in streams
            ]
        except ValueError as exc:
            return PushResult(400, str(exc))
        now_ns = self._limits.now()
        errors: list[str] = []
        batches: list[_Batch] = []
        for pairs, stream in parsed:
            if not stream.entries:
                continue
            problem = validate_labels(self._limits, pairs)
            if problem is not None:
                errors.append(problem)
                continue
            labels, shown = dict(pairs), format_labels(pairs)
            good = []
            for entry in stream.entries:
                problem = validate_entry(self._limits, shown, entry, now_ns)
                if problem is not None:
                    errors.append(problem)
                    continue
                try:
                    good.append(self._finish(labels, entry))
                except ValueError as exc:
                    # Loki's distributor returns this error as is: a 500, nothing stored.
                    return PushResult(500, str(exc))
            if good:
                batches.append(_Batch(labels, shown, good))
        ingester_error: str | None = None
        with self._lock:
            state = self._tenants.setdefault(tenant, _Tenant())
            for batch in batches:
                ingester_error = self._append(tenant, state, batch)
            self._changed.notify_all()
        if ingester_error is not None:
            return PushResult(400, ingester_error)
        if errors:
            return PushResult(400, group_errors(errors))
        return PushResult(204)

    def _finish(self, labels: dict[str, str], entry: PushEntry) -> tuple[PushEntry, _Key]:
        """Normalise metadata and add ``detected_level``, as the distributor does."""
        metadata: dict[str, str] = {}
        for name, value in entry.metadata:
            metadata[normalize_metadata_name(name)] = value.replace("\ufffd", " ")
        if self._limits.discover_log_levels and self._limits.allow_structured_metadata:
            if LEVEL_LABEL in metadata:
                metadata[LEVEL_LABEL] = normalize_level(metadata[LEVEL_LABEL])
            else:
                metadata[LEVEL_LABEL] = detect_level(labels, metadata, entry.line)
        pairs = tuple(sorted(metadata.items()))
        return PushEntry(entry.ts_ns, entry.line, pairs), (entry.ts_ns, entry.line, pairs)

    def _append(self, tenant: str, state: _Tenant, batch: _Batch) -> str | None:
        """Apply the ingester's rules to one stream's valid entries; return its error."""
        stream = state.streams.setdefault(batch.shown, _Stream())
        window_ns = int(self._limits.max_chunk_age_s * _NS_PER_S) // 2
        refused: list[tuple[int, str]] = []
        for entry, key in batch.entries:
            if key == stream.last_line:
                continue
            if stream.highest_ts is not None and entry.ts_ns < stream.highest_ts - window_ns:
                cutoff = stream.highest_ts - window_ns
                reason = (
                    f"entry too far behind, entry timestamp is: {go_rfc3339(entry.ts_ns)}, "
                    f"oldest acceptable timestamp is: {go_rfc3339(cutoff)}"
                )
                refused.append((entry.ts_ns, reason))
                continue
            stream.last_line = key
            stream.highest_ts = max(stream.highest_ts or entry.ts_ns, entry.ts_ns)
            if key in stream.keys:
                continue
            stream.keys.add(key)
            stored = StoredEntry(dict(batch.labels), entry.ts_ns, entry.line, dict(entry.metadata))
            state.records.append((stored, batch.shown))
        if not refused:
            return None
        # pkg/ingester/stream.go errorForFailedEntries, limited to max_returned_stream_errors.
        shown = refused[: self._limits.max_returned_stream_errors or len(refused)]
        lines = [
            f"entry with timestamp {go_time_string(ts)} ignored, reason: '{why}',\n"
            for ts, why in shown
        ]
        total = f"total ignored: {len(refused)} out of {len(batch.entries)}"
        return "".join(lines) + f"user '{tenant}', {total} for stream: {batch.shown}"

    def entries(self, tenant: str) -> list[StoredEntry]:
        """Return the tenant's stored entries in arrival order."""
        with self._lock:
            state = self._tenants.get(tenant)
            return [entry for entry, _ in state.records] if state else []

    def count(self, tenant: str) -> int:
        """Return how many entries the tenant has stored."""
        with self._lock:
            state = self._tenants.get(tenant)
            return len(state.records) if state else 0

    def wait_for(self, n: int, timeout_s: float, tenant: str) -> bool:
        """Block until the tenant holds at least ``n`` entries or the timeout passes.

        Returns:
            True when the count was reached.
        """
        with self._changed:
            return self._changed.wait_for(
                lambda: len(self._tenants.get(tenant, _Tenant()).records) >= n, timeout_s
            )

    def drop(self, predicate: Callable[[StoredEntry], bool]) -> int:
        """Forget every stored entry (any tenant) the predicate selects.

        The stream's newest timestamp is kept, as an ingester's would be.

        Returns:
            How many entries were dropped.
        """
        dropped = 0
        with self._lock:
            for state in self._tenants.values():
                kept = []
                for entry, shown in state.records:
                    if predicate(entry):
                        key = (entry.ts_ns, entry.line, tuple(sorted(entry.metadata.items())))
                        state.streams[shown].keys.discard(key)
                        if state.streams[shown].last_line == key:
                            state.streams[shown].last_line = None
                        dropped += 1
                    else:
                        kept.append((entry, shown))
                state.records = kept
        return dropped

    def select(self, tenant: str, query: LogQuery, start_ns: int, end_ns: int) -> list[Hit]:
        """Return the entries in ``[start_ns, end_ns)`` that the query keeps, unordered.

        Args:
            tenant: the tenant ID.
            query: the parsed LogQL query.
            start_ns: inclusive start.
            end_ns: exclusive end.

        Returns:
            The matches with their parsed labels.
        """
        with self._lock:
            state = self._tenants.get(tenant)
            records = list(state.records) if state else []
        hits = []
        for seq, (entry, _) in enumerate(records):
            if not start_ns <= entry.ts_ns < end_ns or not query.selects(entry.labels):
                continue
            parsed = query.process(entry.labels, entry.metadata, entry.line)
            if parsed is not None:
                # Loki's merge breaks timestamp ties on the labels the pipeline produced.
                merged = format_labels({**entry.labels, **entry.metadata, **parsed})
                hits.append(Hit(entry, merged, parsed, seq))
        return hits

    def label_names(self, tenant: str, start_ns: int, end_ns: int) -> list[str]:
        """Return the sorted stream label names with entries in ``[start_ns, end_ns)``."""
        names = {
            name for entry in self._in_range(tenant, start_ns, end_ns) for name in entry.labels
        }
        return sorted(names)

    def label_values(self, tenant: str, name: str, start_ns: int, end_ns: int) -> list[str]:
        """Return the sorted values of one stream label with entries in ``[start_ns, end_ns)``."""
        entries = self._in_range(tenant, start_ns, end_ns)
        return sorted({entry.labels[name] for entry in entries if name in entry.labels})

    def _in_range(self, tenant: str, start_ns: int, end_ns: int) -> list[StoredEntry]:
        return [entry for entry in self.entries(tenant) if start_ns <= entry.ts_ns < end_ns]
