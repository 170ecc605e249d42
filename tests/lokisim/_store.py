"""The test server's storage: Loki's distributor + ingester rules over in-memory lists.

A push goes through the distributor's checks (:mod:`tests.lokisim._distributor`):
labels that do not parse refuse the whole push, bad labels refuse one stream, bad
entries refuse one entry each. The valid entries then meet the ingester
(``pkg/ingester/stream.go``):

- an entry identical (timestamp, line, metadata) to one the stream holds is
  silently ignored: Loki de-duplicates resent entries;
- an entry older than the stream's newest timestamp minus ``max_chunk_age / 2``
  (1 h) is refused as "too far behind", even when it was stored before.

Loki's ingester keeps only the *last* stream's error of a push
(``instance.Push`` overwrites ``appendErr``), and an ingester error replaces the
distributor's validation errors in the response; both quirks are reproduced.

Before the ingester, the distributor shards a stream whose rate passes
``shard_streams.desired_rate`` (the entries go round robin to copies of the stream labelled
``__stream_shard__``, each de-duplicated on its own) and applies the tenant's ingestion rate
limit to the whole push (429); a push too large for gRPC's 4 MiB never reaches the ingester
(500). Both follow :mod:`tests.lokisim._rates`. A query does not see entries older than
``query_ingesters_within`` (3 h) until their chunk is flushed, modelled as their stream taking
no entry for ``chunk_idle_period`` (30 min).

Each stored entry is one ``(ts_ns, line, metadata id)`` tuple (see
:data:`tests.lokisim._distributor.Key`); a stream whose new entries can neither be
refused nor be duplicates is stored at once with set and list operations.
:class:`StoredEntry` objects are built on read.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter

from tests.lokisim._distributor import Distributor, Key, LabelSet, PushResult
from tests.lokisim._labels import format_labels, stream_hash
from tests.lokisim._limits import (
    GRPC_TOO_LARGE,
    MIB,
    RATE_LIMITED,
    Limits,
    go_rfc3339,
    go_time_string,
    group_errors,
    metadata_size,
)
from tests.lokisim._logql import LogQuery
from tests.lokisim._proto import DecodedPush, PushStream
from tests.lokisim._rates import SHARD_LABEL, IngestionLimiter, StreamRates

__all__ = ["Hit", "PushResult", "Store", "StoredEntry"]

_NS_PER_S = 1_000_000_000
# What an entry adds to a push's protobuf besides its line and metadata (its timestamp, the
# field headers), and a metadata pair besides its name and value: about, as measured against
# Loki 3.7's "received message larger than max" (only the 4 MiB gRPC limit is decided on it).
_ENTRY_OVERHEAD_BYTES = 20
_PAIR_OVERHEAD_BYTES = 6
_LINE = itemgetter(1)
_METADATA_ID = itemgetter(2)


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
class Hit:
    """A query match: the entry, its printed labels (stream, metadata and parsed), the
    parsed labels, its arrival index and its stream's hash (``_labels.stream_hash``)."""

    entry: StoredEntry
    stream: str
    parsed: dict[str, str]
    seq: int
    stream_hash: int = 0


@dataclass
class _Stream:
    labels: dict[str, str]
    shown: str
    highest_ts: int | None = None
    last_line: Key | None = None
    keys: set[Key] = field(default_factory=set)
    last_push_ns: int = 0  # Limits.now() of its latest entry: its chunk is idle since then
    hash: int | None = None  # stream_hash(labels), once a query needed it


@dataclass
class _Tenant:
    # Parallel lists in arrival order: an entry and the stream that holds it.
    records: list[Key] = field(default_factory=list)
    owners: list[_Stream] = field(default_factory=list)
    streams: dict[str, _Stream] = field(default_factory=dict)


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
        self._distributor = Distributor(limits)
        self.rates = StreamRates(limits.clock)
        self._limiter = IngestionLimiter(
            limits.ingestion_rate_mb * MIB, int(limits.ingestion_burst_size_mb * MIB), limits.clock
        )
        self._metadata_bytes: dict[int, tuple[int, int]] = {}  # id -> (counted, on the wire)
        self._shard_sets: dict[tuple[str, int], LabelSet] = {}

    def push(self, tenant: str, streams: Sequence[PushStream] | DecodedPush) -> PushResult:
        """Validate and store a decoded push.

        Args:
            tenant: the tenant ID.
            streams: the decoded streams, in wire order (or their compact form).

        Returns:
            The status and message Loki would answer.
        """
        push = streams if isinstance(streams, DecodedPush) else DecodedPush.from_streams(streams)
        checked = self._distributor.check(push)
        if isinstance(checked, PushResult):
            return checked
        ingester_error: str | None = None
        limits = self._limits
        with self._lock:
            # The distributor shards each stream while validating, then rate-limits the push.
            sized = [(label_set, keys, *self._sizes(keys)) for label_set, keys in checked.batches]
            routed = [
                (label_set, self._route(tenant, label_set, keys, size))
                for label_set, keys, size, _ in sized
            ]
            total = sum(size for _, _, size, _ in sized)
            lines = sum(len(keys) for _, keys in checked.batches)
            if routed and not self._limiter.allow(tenant, total):
                limit = int(self._limiter.rate_bytes)
                return PushResult(429, RATE_LIMITED.format(tenant, limit, lines, total))
            message_bytes = sum(message + len(ls.shown) for ls, _, _, message in sized)
            if message_bytes > limits.grpc_max_message_bytes:
                return PushResult(
                    500, GRPC_TOO_LARGE.format(message_bytes, limits.grpc_max_message_bytes)
                )
            state = self._tenants.setdefault(tenant, _Tenant())
            now_ns = limits.now()
            for label_set, parts in routed:
                for shard_set, keys, size in parts:
                    # Loki's ingester keeps the last stream's outcome, an error or none.
                    ingester_error = self._append(tenant, state, shard_set, keys, now_ns)
                    shard = shard_set.labels.get(SHARD_LABEL, "")
                    self.rates.record((tenant, label_set.shown), shard, size)
            self._changed.notify_all()
        if ingester_error is not None:
            return PushResult(400, ingester_error)
        if checked.errors:
            return PushResult(400, group_errors(checked.errors))
        return PushResult(204)

    def _route(
        self, tenant: str, label_set: LabelSet, keys: list[Key], size: int
    ) -> list[tuple[LabelSet, list[Key], int]]:
        """The derived streams of one stream's valid entries (of ``size`` bytes): (labels,
        keys, bytes) each."""
        limits = self._limits
        if not limits.shard_streams_enabled:
            return [(label_set, keys, size)]
        shards = self.rates.shards(
            (tenant, label_set.shown), size, len(keys), limits.shard_streams_desired_rate
        )
        if not shards:
            return [(label_set, keys, size)]
        count = len(shards)
        parts = []
        for index, shard in enumerate(shards):
            dealt = keys[index::count]
            parts.append((self._shard_set(label_set, shard), dealt, self._sizes(dealt)[0]))
        return parts

    def _shard_set(self, label_set: LabelSet, shard: int) -> LabelSet:
        found = self._shard_sets.get((label_set.shown, shard))
        if found is None:
            pairs = sorted([*label_set.pairs, (SHARD_LABEL, str(shard))])
            found = LabelSet(pairs, None, dict(pairs), format_labels(pairs))
            self._shard_sets[(label_set.shown, shard)] = found
        return found

    def _sizes(self, keys: list[Key]) -> tuple[int, int]:
        """Bytes of entries as Loki counts them for rates (line plus structured metadata,
        ``util.EntryTotalSize``: ``detected_level`` is not counted), and about their protobuf
        size as the distributor sends them on (gRPC)."""
        lines = list(map(_LINE, keys))
        line_bytes = sum(map(len, lines))
        if not all(map(str.isascii, lines)):
            line_bytes = sum(len(line.encode()) for line in lines)
        counted, message = line_bytes, line_bytes + _ENTRY_OVERHEAD_BYTES * len(keys)
        for metadata_id, count in Counter(map(_METADATA_ID, keys)).items():
            sizes = self._metadata_bytes.get(metadata_id)
            if sizes is None:
                pairs = self._distributor.metadata(metadata_id)
                framed = sum(
                    len(n.encode()) + len(v.encode()) + _PAIR_OVERHEAD_BYTES for n, v in pairs
                )
                sizes = self._metadata_bytes[metadata_id] = (metadata_size(pairs), framed)
            counted += sizes[0] * count
            message += sizes[1] * count
        return counted, message

    def _entry(self, key: Key, owner: _Stream) -> StoredEntry:
        return StoredEntry(
            dict(owner.labels), key[0], key[1], dict(self._distributor.metadata(key[2]))
        )

    def _append_new(self, state: _Tenant, stream: _Stream, keys: list[Key], window_ns: int) -> bool:
        """Store keys that are all new and all within the window at once; False if not.

        Equivalent to the per-entry loop of :meth:`_append` when it would neither refuse
        nor skip an entry: positive timestamps spanning at most the window, none behind
        the stream's newest minus the window, no key held or repeated.
        """
        oldest, newest = min(keys)[0], max(keys)[0]
        top = stream.highest_ts
        if oldest <= 0 or newest - oldest > window_ns:
            return False
        if top is not None and (top <= 0 or oldest < top - window_ns):
            return False
        fresh = set(keys)
        if len(fresh) != len(keys) or not stream.keys.isdisjoint(fresh):
            return False
        stream.keys |= fresh
        stream.last_line = keys[-1]
        stream.highest_ts = newest if top is None else max(top, newest)
        state.records += keys
        state.owners.extend(repeat(stream, len(keys)))
        return True

    def _append(
        self, tenant: str, state: _Tenant, label_set: LabelSet, keys: list[Key], now_ns: int
    ) -> str | None:
        """Apply the ingester's rules to one stream's valid entries; return its error."""
        stream = state.streams.get(label_set.shown)
        if stream is None:
            stream = state.streams[label_set.shown] = _Stream(label_set.labels, label_set.shown)
        stream.last_push_ns = now_ns
        window_ns = int(self._limits.max_chunk_age_s * _NS_PER_S) // 2
        if self._append_new(state, stream, keys, window_ns):
            return None
        refused: list[tuple[int, str]] = []
        last, top, held = stream.last_line, stream.highest_ts, stream.keys
        add_record, add_owner = state.records.append, state.owners.append
        for key in keys:
            if key == last:
                continue
            ts_ns = key[0]
            if top is not None and ts_ns < top - window_ns:
                cutoff = top - window_ns
                reason = (
                    f"entry too far behind, entry timestamp is: {go_rfc3339(ts_ns)}, "
                    f"oldest acceptable timestamp is: {go_rfc3339(cutoff)}"
                )
                refused.append((ts_ns, reason))
                continue
            last = key
            # max(highest or ts, ts), as before: a highest of 0 counts as unset.
            if not top or ts_ns > top:
                top = ts_ns
            # One hash per entry: add, then see whether the set grew (a duplicate did not).
            size = len(held)
            held.add(key)
            if len(held) != size:
                add_record(key)
                add_owner(stream)
        stream.last_line, stream.highest_ts = last, top
        if not refused:
            return None
        # pkg/ingester/stream.go errorForFailedEntries, limited to max_returned_stream_errors.
        shown = refused[: self._limits.max_returned_stream_errors or len(refused)]
        lines = [
            f"entry with timestamp {go_time_string(ts)} ignored, reason: '{why}',\n"
            for ts, why in shown
        ]
        total = f"total ignored: {len(refused)} out of {len(keys)}"
        return "".join(lines) + f"user '{tenant}', {total} for stream: {label_set.shown}"

    def entries(self, tenant: str) -> list[StoredEntry]:
        """Return the tenant's stored entries in arrival order."""
        with self._lock:
            state = self._tenants.get(tenant)
            if state is None:
                return []
            return [
                self._entry(key, owner)
                for key, owner in zip(state.records, state.owners, strict=True)
            ]

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
                records: list[Key] = []
                owners: list[_Stream] = []
                for key, owner in zip(state.records, state.owners, strict=True):
                    if predicate(self._entry(key, owner)):
                        owner.keys.discard(key)
                        if owner.last_line == key:
                            owner.last_line = None
                        dropped += 1
                    else:
                        records.append(key)
                        owners.append(owner)
                state.records, state.owners = records, owners
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
            records = list(zip(state.records, state.owners, strict=True)) if state else []
        limits = self._limits
        now_ns = limits.now()
        # Older than this, only flushed chunks answer: an idle stream's (see the module doc).
        ingesters_from = now_ns - int(limits.query_ingesters_within_s * _NS_PER_S)
        idle_since = now_ns - int(limits.chunk_idle_period_s * _NS_PER_S)
        hits = []
        for seq, (key, owner) in enumerate(records):
            if not start_ns <= key[0] < end_ns or not query.selects(owner.labels):
                continue
            if (
                limits.query_ingesters_within_s
                and key[0] < ingesters_from
                and owner.last_push_ns > idle_since
            ):
                continue
            entry = self._entry(key, owner)
            parsed = query.process(entry.labels, entry.metadata, entry.line)
            if parsed is not None:
                # Loki's merge breaks timestamp ties on the labels the pipeline produced.
                merged = format_labels({**entry.labels, **entry.metadata, **parsed})
                if owner.hash is None:
                    owner.hash = stream_hash(owner.labels)
                hits.append(Hit(entry, merged, parsed, seq, owner.hash))
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
