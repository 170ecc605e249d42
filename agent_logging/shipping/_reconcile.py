"""Exactly once as a query sees it: the records that may be in Loki already, and finding out.

Why. Loki de-duplicates an entry pushed twice only within one stream (same labels, timestamp,
line and structured metadata), and it shards a stream whose rate passes its
``shard_streams.desired_rate`` (1.5 MB/s by default, on by default since Loki 3) into copies
labelled ``__stream_shard__``, choosing the shard of each entry by its place in the push and
the stream's rate at that moment. A batch pushed again after a crash (the rate has fallen
meanwhile) or after a failure whose outcome is unknown lands in other shards than its first
copy did, and every entry of it is then visible twice. So a record must not be pushed again
unless it is known that Loki does not hold it.

What is persisted. The spool's ``acked`` file says where the oldest unacknowledged record is
(written after each 2xx, ``spool._spool``): nothing before it is ever pushed again. Before
each push the shipper writes ``in-flight`` beside it (:func:`write_in_flight`: one write in
place, no fsync, a few microseconds per push): the spool position up to which records may have
reached Loki, and when that push began. After a crash the records between the two are *in
doubt*; they are at most the batches pushed since the last ack: one, or two with a shipper
process (whose owner writes the ack a moment after the child pushed). A failed push whose
outcome is unknown (a timeout, a reset connection, a 5xx, a 429 or 400 that refused only some
entries: anything but a refused connection or a refusal of the whole request,
``PushResult.nothing_stored``) puts its records in doubt in memory as well.

The reconcile. Before a record in doubt is pushed again, the shipper waits, when the push that
may have carried it got no answer (a crash, a timeout, a reset, a gateway's 502 or 504), until
:data:`SETTLE_S` has passed since it began (a push still on its way must land first). Then it
asks ``query_range`` for each stream of those records (its own labels as the selector, which
also matches its shards) over their time range, page by page, and pushes only the records
whose timestamp and line it did not find; the others count as delivered (``reconciled``). What
it finds is the answer for those records: they leave doubt.

The guarantee. A record whose logging call returned is in Loki once as a query sees it, after
any number of crashes of the service or of its shipper process, and whatever Loki does with its
streams, as long as the reconcile can ask. A record may still be stored twice:

- when the reconcile cannot ask Loki: the query is refused for good (401, 403, 404 or 405: a
  tenant or token without read permission, a gateway that routes only the push path), or fails
  :data:`RECONCILE_ATTEMPTS` times in a row with a timeout, a 5xx, a 429 or an unreadable
  answer. Then the records in doubt are pushed as they are, and counted in ``health()`` as
  ``resent_unreconciled`` (each a *possible* duplicate). A Loki that cannot be reached at all
  only delays shipping: no push could land either;
- when a record in doubt is older than Loki's ``query_ingesters_within`` (3 h by default,
  :data:`QUERYABLE_S`) and was not found: Loki does not show entries that old until their chunk
  is flushed, so their absence proves nothing. They are pushed and counted as
  ``resent_unreconciled`` too;
- when a push lands in Loki more than :data:`SETTLE_S` after it began (a Loki taking that long
  to store what it has received);
- after the machine loses power: ``acked`` and ``in-flight`` are not fsynced, and records
  acknowledged in the last seconds before it may be pushed again unreconciled (not counted:
  nothing remembers them);
- when the old shipper process of a killed service is still starting a push while its
  successor reconciles (it stops within :data:`agent_logging.shipping._child` ``_HALT_S``, 0.25 s,
  of its owner's death, and starts no new batch once it knows).

Cost. Nothing on the way of a batch that ships at the first try but the ``in-flight`` write
per push (about 5 µs; a temporary file and a rename, as ``acked`` is written, cost 1.4 ms of
journal on a virtual disk); one query per stream of a batch in doubt (per cluster of its
timestamps), and the :data:`SETTLE_S` wait, only after a crash or an uncertain failure.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from agent_logging.loki._client import LokiQueryError, QueriedEntry
from agent_logging.loki._entries import RecordLike, entry_from_record, render_labels
from agent_logging.spool._framing import HEADER_BYTES
from agent_logging.spool._segments import SpoolPosition

__all__ = [
    "IN_FLIGHT_NAME",
    "QUERYABLE_S",
    "RECONCILE_ATTEMPTS",
    "SETTLE_S",
    "Found",
    "InDoubt",
    "InFlight",
    "ReconcileError",
    "find_in_loki",
    "read_in_flight",
    "write_in_flight",
]

#: The file, in the spool directory, that says up to where records may have reached Loki.
IN_FLIGHT_NAME: Final = "in-flight"

#: How long after a push began its records are taken to have landed, or never to land: a
#: healthy Loki stores a push within milliseconds of receiving it (its distributor's writes to
#: the ingesters time out after 5 s, ``ingester_client.remote_timeout``).
SETTLE_S: Final = 1.0

#: Failed reconcile queries in a row (timeouts, 5xx, 429, bad answers) before the records in
#: doubt are pushed unreconciled (about 8 s of jittered backoff at the default settings).
RECONCILE_ATTEMPTS: Final = 5

#: Loki does not ask its ingesters about time older than ``query_ingesters_within`` (3 h by
#: default): entries that old are invisible until their chunk is flushed to the store. A
#: record in doubt older than this, not found, may still be in Loki. A margin for clocks.
QUERYABLE_S: Final = 3 * 3600.0 - 300.0

# Query failures that mean the read path is not ours to use: give up reconciling at once.
_FORBIDDEN: Final = frozenset({401, 403, 404, 405})
_NS_PER_S: Final = 1_000_000_000
# Records in doubt further apart than this are looked for in windows of their own.
_WINDOW_GAP_NS: Final = 10 * _NS_PER_S


class ReconcileError(Exception):
    """Loki could not say which records it holds.

    Attributes:
        status: Loki's HTTP status, when it answered.
        unreachable: no connection could be made: no push could land either, so this is
            never a reason to give up reconciling.
        forbidden: the query is refused for good (401/403/404/405): give up at once.
    """

    def __init__(self, message: str, *, status: int | None, unreachable: bool) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable
        self.forbidden = status in _FORBIDDEN


@dataclass(frozen=True, slots=True)
class InFlight:
    """What ``in-flight`` says: records before ``end`` may be in Loki; the last push of such
    records began at ``pushed_unix_ns``."""

    end: SpoolPosition
    pushed_unix_ns: int


def read_in_flight(directory: Path) -> InFlight | None:
    """The ``in-flight`` record of a spool directory, or None when missing or garbled."""
    try:
        fields = (directory / IN_FLIGHT_NAME).read_text("ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(fields) != 4 or fields[0] != "1" or not all(f.isdigit() for f in fields[1:]):
        return None
    return InFlight(SpoolPosition(int(fields[1]), int(fields[2])), int(fields[3]))


def write_in_flight(directory: Path, in_flight: InFlight) -> None:
    """Write ``in-flight`` in place: one ``pwrite`` of a fixed-width line, no fsync.

    In place rather than a temporary file and a rename (as ``acked`` is written): a rename
    costs a journal transaction, over a millisecond per push on a virtual disk, where this costs
    microseconds. A kill cannot tear it (65 bytes within one page are copied whole, or not at
    all); a power loss may leave it garbled, which reads as no record (see the module doc).

    Raises:
        OSError: the file cannot be opened or written.
    """
    end = in_flight.end
    line = b"1 %020d %020d %020d\n" % (end.segment, end.offset, in_flight.pushed_unix_ns)
    fd = os.open(directory / IN_FLIGHT_NAME, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.pwrite(fd, line, 0)
    finally:
        os.close(fd)


class _Positioned(Protocol):
    """A batch that says where it is in the spool (``Batch``, ``RemoteBatch``)."""

    @property
    def records(self) -> Sequence[RecordLike]: ...

    @property
    def start(self) -> SpoolPosition: ...

    @property
    def end(self) -> SpoolPosition: ...


@dataclass
class InDoubt:
    """Which records may be in Loki already: in memory, and as ``in-flight`` on disk.

    One per delivery (so per shipper), used by its one batch in flight at a time (under the
    shipper's ship lock).

    Args:
        directory: the spool directory (None: a spool without one; nothing is persisted).
        wall_clock: UNIX time in seconds (written to ``in-flight``, for another process).
        clock: a monotonic clock in seconds (the waits of this process).
    """

    directory: Path | None
    wall_clock: Callable[[], float] = time.time
    clock: Callable[[], float] = time.monotonic
    #: The records in doubt, by value (a batch peeked again holds equal tuples).
    records: set[Any] = field(default_factory=set)
    #: Records of the batch in work that a reconcile found in Loki: never pushed again.
    stored: set[Any] = field(default_factory=set)
    #: When the last push began, on ``clock``.
    pushed_s: float = 0.0
    #: Until when (on ``clock``) a push that may have carried records in doubt may land.
    landing_until_s: float = 0.0
    #: Reconcile queries failed in a row.
    failures: int = 0
    _end: SpoolPosition | None = None  # as written to in-flight (or read from it)
    _previous_end: SpoolPosition | None = None  # as a previous process left it: in doubt
    _loaded: bool = False
    write_errors: int = 0

    def load(self) -> None:
        """Read what a previous process left in ``in-flight`` (once)."""
        if self._loaded:
            return
        self._loaded = True
        if self.directory is None:
            return
        found = read_in_flight(self.directory)
        if found is not None:
            self._end = self._previous_end = found.end
            # The push in flight at the crash has had its time since then, or waits for it.
            left_s = found.pushed_unix_ns / _NS_PER_S + SETTLE_S - self.wall_clock()
            self.landing_until_s = self.clock() + min(SETTLE_S, max(0.0, left_s))

    def note_batch(self, batch: object) -> None:
        """Put in doubt the records of a batch that lie before the end a previous process
        left in ``in-flight`` (this process's own pushes put their records in doubt
        themselves, when they fail)."""
        self.load()
        end = self._previous_end
        if end is None or not _positioned(batch):
            return
        positioned: _Positioned = batch  # type: ignore[assignment]
        start = positioned.start
        if start >= end:
            return
        records = positioned.records
        if start.segment < end.segment:
            self.records.update(records)
            return
        # In the same segment: the records up to the end's offset. Offsets follow from the
        # frames' sizes unless the batch skipped damage; then all of it is in doubt.
        framed = sum(HEADER_BYTES + len(r.payload) for r in records)
        if start.offset + framed != positioned.end.offset:
            self.records.update(records)
            return
        offset = start.offset
        for record in records:
            offset += HEADER_BYTES + len(record.payload)
            if offset > end.offset:
                break
            self.records.add(record)

    def before_push(self, batch_end: SpoolPosition | None) -> None:
        """Persist that records up to ``batch_end`` may reach Loki from now on."""
        self.pushed_s = self.clock()
        if batch_end is None or self.directory is None:
            return
        end = batch_end if self._end is None else max(self._end, batch_end)
        self._end = end
        try:
            write_in_flight(self.directory, InFlight(end, int(self.wall_clock() * _NS_PER_S)))
        except OSError:
            # Not recorded: a crash before the ack would resend unreconciled. The push goes
            # on: holding records back for a full disk would lose more.
            self.write_errors += 1

    def failed(self, records: Iterable[Any], *, answered: bool) -> None:
        """A push of ``records`` failed, and some of them may be in Loki: in doubt they are.

        Args:
            records: what the push carried.
            answered: Loki answered (a 5xx, a 429, a 400): it is done with the push. Without
                an answer (a timeout, a reset) or with a gateway's 502/504, Loki may still be
                storing it: the records are looked for no sooner than :data:`SETTLE_S` after
                the push began.
        """
        self.records.update(records)
        if not answered:
            self.landing_until_s = max(self.landing_until_s, self.pushed_s + SETTLE_S)

    def acked(self, batch: object) -> None:
        """The head batch was acknowledged: its records leave doubt (and the file, once
        passed)."""
        # Records in doubt are the head's: once the head batch is acknowledged, any left were
        # dropped by the spool's full policy meanwhile. (Cleared, not subtracted: nothing to
        # hash on the shipper's hot path.)
        if self.records:
            self.records.clear()
        if self.stored:
            self.stored.clear()
        end = getattr(batch, "end", None)
        if not isinstance(end, tuple):
            return
        if self._previous_end is not None and self._previous_end <= end:
            self._previous_end = None
        if self._end is not None and self._end <= end:
            self._end = None  # the file is stale now: its end is before the ack's position

    def settle_s(self) -> float:
        """How long until the records in doubt may be looked for (0: now)."""
        return max(0.0, self.landing_until_s - self.clock())


def _positioned(batch: object) -> bool:
    return isinstance(getattr(batch, "start", None), tuple) and isinstance(
        getattr(batch, "end", None), tuple
    )


@dataclass(frozen=True, slots=True)
class Found:
    """What a reconcile found: the records Loki holds, and how many of the others are too old
    for their absence to prove anything (:data:`QUERYABLE_S`)."""

    present: set[Any]
    unverifiable: int


Query = Callable[..., Iterator[QueriedEntry]]


def find_in_loki(
    query: Query,
    records: Iterable[RecordLike],
    *,
    node_id_label: bool,
    default_labels: Mapping[str, str],
    now_unix_s: float,
) -> Found:
    """Ask Loki which of ``records`` it holds, one window per stream.

    A record is held when an entry of its stream (its labels, in any shard: the selector
    matches streams with more labels) has its timestamp and line.

    Args:
        query: ``LokiClient.iter_query_range``.
        records: the records in doubt.
        node_id_label: whether ``node_id`` is a label of their streams.
        default_labels: label values for records that lack them.
        now_unix_s: the time, to tell records too old to be seen (:data:`QUERYABLE_S`).

    Returns:
        The records found, and how many of the others are too old to tell.

    Raises:
        ReconcileError: a query failed.
    """
    by_stream: dict[str, list[tuple[RecordLike, int, str]]] = defaultdict(list)
    for record in records:
        entry = entry_from_record(
            record.ts_ns, record.payload, node_id_label=node_id_label, default_labels=default_labels
        )
        by_stream[render_labels(entry.labels)].append((record, entry.ts_ns, entry.line))
    present: set[Any] = set()
    unverifiable = 0
    horizon_ns = int((now_unix_s - QUERYABLE_S) * _NS_PER_S)
    for selector, wanted in by_stream.items():
        keys = {(ts, line) for _, ts, line in wanted}
        found: set[tuple[int, str]] = set()
        try:
            for start_ns, end_ns in _windows(sorted({ts for ts, _ in keys})):
                for queried in query(selector, start_ns=start_ns, end_ns=end_ns):
                    key = (queried.ts_ns, queried.line)
                    if key in keys:
                        found.add(key)
        except LokiQueryError as exc:
            raise ReconcileError(
                str(exc), status=exc.status, unreachable=getattr(exc, "unreachable", False)
            ) from exc
        for record, ts, line in wanted:
            if (ts, line) in found:
                present.add(record)
            elif ts < horizon_ns:
                unverifiable += 1
    return Found(present, unverifiable)


def _windows(stamps: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` windows around sorted timestamps, a new one after a gap over
    :data:`_WINDOW_GAP_NS`: a sparse batch (a backlog logged slowly) asks Loki only about
    where its records are, not about hours of a stream shared with other processes."""
    windows: list[list[int]] = []
    for ts in stamps:
        if windows and ts - windows[-1][1] <= _WINDOW_GAP_NS:
            windows[-1][1] = ts
        else:
            windows.append([ts, ts])
    return [(low, high + 1) for low, high in windows]


class _Waiter(Protocol):
    def __call__(self, event: threading.Event, timeout_s: float, /) -> bool: ...


def settle(
    doubt: InDoubt,
    wait: _Waiter,
    kick: threading.Event,
    halt: threading.Event | None,
    deadline: float | None,
    clock: Callable[[], float],
) -> bool:
    """Wait until the records in doubt may be looked for; False when halt or the deadline
    came first (``kick``, set by flush and stop, cuts a wait short; it is looked at again)."""
    while True:
        remaining = doubt.settle_s()
        if remaining <= 0:
            return True
        if halt is not None and halt.is_set():
            return False
        if deadline is not None:
            left = deadline - clock()
            if left <= 0:
                return False
            remaining = min(remaining, left)
        if wait(kick, remaining):
            with contextlib.suppress(Exception):
                kick.clear()
