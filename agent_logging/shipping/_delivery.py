"""How one batch is delivered: pushed, bisected, dead-lettered, halved; and its accounting.

Retryable failures (429, 5xx, timeouts, refused connections, and refusals of the request
rather than of its entries: 401/403/404, a tenant ID Loki cannot take, the wrong scheme, 405,
415, which are our configuration's fault, not the data's; see ``loki._client``) are retried
forever with jittered exponential backoff, one request per attempt: the spool's size cap, not
the shipper, decides what is ever dropped. Refused entries (a 400 with one of Loki's entry
refusals: a line over ``max_line_size``, 256 KB by default; an entry older than
``reject_old_samples_max_age``, a week, or outside the stream's out-of-order window; ...) are
bisected to isolate the entries Loki will not take; those go to a dead-letter file
(``_dead_letter``), each once. When Loki's answer shows that it refused every entry of a
push for one reason (it counts them: ``PushResult.refuses_every_entry``), they are
dead-lettered together at once, with one fsync: a Loki that refuses everything (a week-old
backlog, a label limit lowered) empties the spool at the speed of its answers, not one entry
per request. Otherwise the work is logarithmic in the batch for each entry refused. Loki 3
stores the valid entries of a partly refused push anyway, and resending them is not
harmless: Loki de-duplicates identical entries only within one stream, and it may shard the
stream (``_reconcile``). So every push goes through
:meth:`Delivery._push`, which first asks Loki which of the records it carries it holds
already, when they may be there (after a refusal of some entries, an unanswered push, a 5xx,
a crash), and pushes only the others. Should a single entry reached by a split be refused
with the very message the whole batch was, and that message not be an entry refusal (a
client classifying otherwise), the request is at fault: it is retried, not dead-lettered. A
body over a size limit (413, Loki's or a proxy's) is halved until it passes, and later batches
are kept below the size refused; nothing of it is dead-lettered, and a single entry still too
large waits, retried, like any refused request. A stock Loki says "too large" three ways
(``PushResult.too_large``): 413 from a proxy, a 500 when the push is over gRPC's 4 MiB
between its distributor and ingester, and a 429 of a push larger than the tenant's rate
allows in a second; each is halved the same way, else each would be retried for ever.
Entries older than 40 minutes are pushed into the stream of their hour (``loki._time_shards``),
so that a backlog is never "too far behind" a stream that live records keep at the present.
When stop or a deadline cuts a split short, the part already stored or dead-lettered is
acked on its own: the next run does not dead-letter it again.

The design and its runners. :class:`Delivery` is the design: one object per spool, built by
the runner with the delivery's options, holding its counters and the records in doubt, and
handed each batch the runner peeks (:meth:`Delivery.deliver`), which it pushes, retries,
splits, dead-letters and acknowledges. The runner (``_shipper.Shipper``) decides when a batch
is peeked: its thread's loop, a flush, a stop, a drain. It runs in a thread of the service, or
in the helper process (``_process`` starting ``_child``) over a stand-in for the service's
spool; the delivery is the same in both. Between the two, the runner reads the batch size in
force (:attr:`Delivery.max_batch_bytes`, lowered after a 413), cuts a backoff short
(:meth:`Delivery.interrupt`), hands over an exception its loop caught
(:meth:`Delivery.back_off_after`) and reads the counters (:meth:`Delivery.stats`); the
delivery tells the runner when it waits out a backoff (``waiting``), nothing more. What the
design needs of the spool and the client (``SpoolLike``, ``PushClient``) is defined here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final, Protocol, TypedDict, TypeVar

from agent_logging.errors import ConfigurationError
from agent_logging.loki._answers import PushResult, is_entry_refusal
from agent_logging.loki._entries import (
    PushEntry,
    RecordLike,
    entries_from_records,
    entry_from_record,
)
from agent_logging.loki._time_shards import IGNORE_RECENT_S, time_sharded
from agent_logging.shipping._dead_letter import append_dead_letters
from agent_logging.shipping._reconcile import (
    RECONCILE_ATTEMPTS,
    InDoubt,
    ReconcileError,
    find_in_loki,
    settle,
)
from agent_logging.spool._segments import SpoolPosition

__all__ = [
    "Delivery",
    "Outcome",
    "PushClient",
    "ShipperStats",
    "SpoolLike",
    "require_positive",
]

# 2**62 * any initial backoff is far past any cap; bounding the exponent keeps floats finite.
_MAX_EXPONENT: Final = 62

_NS_PER_S: Final = 1_000_000_000
# The report key of the tenant's rate limit, kept across successes (reported once).
_RATE_LIMITED: Final = "tenant-rate-limit"
# A gateway's answers that leave Loki behind it possibly still at work on the push.
_GATEWAY_GAVE_UP: Final = frozenset({502, 504})


class ShipperStats(TypedDict):
    """What :meth:`Delivery.stats` (and so ``Shipper.stats``) returns (a plain dict at run time)."""

    batches_sent: int
    records_sent: int
    bytes_sent: int
    retried: int
    dead_lettered: int
    last_status: int | None
    last_error: str | None
    last_error_unix_s: float | None
    last_success_unix_s: float | None
    consecutive_failures: int
    reconciled: int
    resent_unreconciled: int


def require_positive(options: Mapping[str, float]) -> None:
    """Raise :class:`ConfigurationError` naming the first of ``options`` that is not positive."""
    for name, value in options.items():
        if not value > 0:
            raise ConfigurationError(f"{name} must be positive, not {value!r}")


class _BatchLike(Protocol):
    @property
    def records(self) -> Sequence[RecordLike]: ...


class _StatsLike(Protocol):
    @property
    def records(self) -> int: ...


_B = TypeVar("_B", bound=_BatchLike)


class SpoolLike(Protocol[_B]):
    """What the shipper needs of the spool (``agent_logging.spool._spool.Spool``)."""

    @property
    def wake(self) -> threading.Event: ...

    def peek_batch(self, *, max_records: int = ..., max_bytes: int = ...) -> _B | None: ...

    def ack(self, batch: _B, /) -> None: ...

    def sync_if_due(self) -> object: ...

    def stats(self) -> _StatsLike: ...


# Optional on a SpoolLike: ``pending_bytes()`` (unacknowledged bytes, cheap) and
# ``wake_bytes``. Without them the shipper ships until the spool is empty on every wake.


class PushClient(Protocol):
    """What the shipper needs of the Loki client (``LokiClient``).

    A client that also has ``push_records(records, *, node_id_label, default_labels)``
    (``LokiClient`` has) is handed the spooled records themselves: it encodes them without
    building an entry per record, the shipper's fast path.
    """

    def push(self, entries: Sequence[PushEntry], /) -> PushResult: ...

    def after_fork_in_child(self) -> None: ...


class Outcome(enum.Enum):
    """How :meth:`Delivery.deliver` left a batch."""

    DONE = "every record stored or dead-lettered: ack the batch"
    AGAIN = "the whole batch must be retried (backoff done): peek it again"
    STOPPED = "stop or the deadline came first: ack the part done, leave the rest spooled"


def _reason_key(result: PushResult) -> str:
    # "Distinct reason" for reporting: the outcome and status, or for network failures the
    # exception's name; Loki's texts embed timestamps and would make every report distinct.
    if result.status is not None:
        return f"{result.outcome}:{result.status}"
    return f"{result.outcome}:{result.reason.partition(':')[0]}"


def _same_records(peeked: Sequence[RecordLike], expected: Sequence[RecordLike]) -> bool:
    return len(peeked) == len(expected) and all(
        a.ts_ns == b.ts_ns and a.payload == b.payload for a, b in zip(peeked, expected, strict=True)
    )


def _any_old(records: Sequence[RecordLike], now_ns: int) -> bool:
    """Whether a record is old enough for its time shard (``loki._time_shards``)."""
    cutoff_ns = now_ns - IGNORE_RECENT_S * _NS_PER_S
    return any(record.ts_ns < cutoff_ns for record in records)


def _refuses_the_request(single: PushResult, whole: PushResult | None) -> bool:
    """Whether one entry's refusal is in fact the request's (the safety net of bisection).

    ``LokiClient`` answers ``reject`` only for Loki's entry refusals; a client that does
    not (or a message that passes for one) would have every entry dead-lettered one by one.
    One entry refused with the very message the whole batch was, when that message is not
    one of Loki's entry refusals, says the request is at fault: retried, not dead-lettered.
    """
    return (
        whole is not None
        and (single.status, single.reason) == (whole.status, whole.reason)
        and not is_entry_refusal(single.reason)
    )


def _as_request_refusal(result: PushResult) -> PushResult:
    reason = (
        f"HTTP {result.status}: one entry is refused as the whole batch was, so the request "
        f"is at fault, not its entries; entries kept for retry: {result.reason}"
    )
    return PushResult("retry", result.status, result.retry_after_s, reason)


class Delivery:
    """Deliver a spool's batches to Loki, one at a time, counting and reporting what happens.

    Built by the runner (:class:`~agent_logging.shipping._shipper.Shipper`), which peeks each
    batch and hands it to :meth:`deliver`; the options are the shipper's, documented there.

    Args:
        spool: the spool the batches come from (a part of one is acknowledged here).
        client: the Loki client.
        max_batch_bytes: most record bytes per push (lowered for good after a 413).
        backoff_initial_s: backoff ceiling after the first failure.
        backoff_max_s: largest backoff, ``Retry-After`` included.
        dead_letter_path: JSON-lines file for entries Loki refuses.
        dead_letter_max_bytes: size past which the dead-letter file is rotated to ``.1``.
        node_id_label: make ``node_id`` a stream label.
        default_labels: label values for records that lack them.
        on_error: called with a message once per distinct failure until a push succeeds.
        rng: source of jitter.
        clock: monotonic clock for deadlines.
        wall_clock: UNIX time, for the counters' stamps and dead letters.
        wait: ``wait(event, timeout_s) -> bool``, how backoff and a reconcile's settling wait.
        waiting: entered around each backoff wait (the runner is not busy then).

    Raises:
        ConfigurationError: a size or duration is not positive.
    """

    def __init__(
        self,
        spool: SpoolLike[Any],
        client: PushClient,
        *,
        max_batch_bytes: int,
        backoff_initial_s: float,
        backoff_max_s: float,
        dead_letter_path: Path,
        dead_letter_max_bytes: int,
        node_id_label: bool,
        default_labels: Mapping[str, str],
        on_error: Callable[[str], None] | None,
        rng: random.Random,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        wait: Callable[[threading.Event, float], bool],
        waiting: Callable[[], AbstractContextManager[object]],
    ) -> None:
        require_positive(
            {
                "max_batch_bytes": max_batch_bytes,
                "backoff_initial_s": backoff_initial_s,
                "backoff_max_s": backoff_max_s,
                "dead_letter_max_bytes": dead_letter_max_bytes,
            }
        )
        self._spool = spool
        self._client = client
        #: Most record bytes per push: the runner peeks batches this large. Lowered after a
        #: 413 while the runner reads it: an int, so a racing read sees one or the other.
        self.max_batch_bytes = max_batch_bytes
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self.dead_letter_path = Path(dead_letter_path)
        self._dead_letter_max_bytes = dead_letter_max_bytes
        self._node_id_label = node_id_label
        self._default_labels = dict(default_labels)
        self._on_error = on_error
        self._rng = rng
        self._clock = clock
        self._wall_clock = wall_clock
        self._wait = wait
        self._waiting = waiting
        self._reported: set[str] = set()
        self._batches_sent = 0
        self._records_sent = 0
        self._bytes_sent = 0
        self._retried = 0
        self._dead_lettered = 0
        self._last_status: int | None = None
        self._last_error: str | None = None
        self._last_error_unix_s: float | None = None
        self._last_success_unix_s: float | None = None
        self._consecutive_failures = 0
        self._reconciled = 0
        self._resent_unreconciled = 0
        directory = getattr(spool, "directory", None)
        self._doubt = InDoubt(Path(directory) if directory is not None else None, wall_clock, clock)
        # The batch being delivered: its end in the spool, and what ends its delivery early.
        self._batch_end: SpoolPosition | None = None
        self._halt: threading.Event | None = None
        self._deadline: float | None = None
        # How many records the last push carried (a reconcile may have taken some out).
        self._pushed = 0
        self._new_sync_objects()

    def _new_sync_objects(self) -> None:
        self._stats_lock = threading.Lock()
        self._kick = threading.Event()  # cuts a backoff or settling wait short

    # -- what the runner calls -------------------------------------------------------------

    def deliver(
        self, batch: Any, deadline: float | None, *, halt: threading.Event
    ) -> tuple[Outcome, int]:
        """Deliver a batch peeked from the spool, and acknowledge in the spool what is done.

        Args:
            batch: the spool's oldest batch, as its ``peek_batch`` returned it.
            deadline: when to give up, on the scale of ``clock`` (None: never).
            halt: set to give up (stop).

        Returns:
            The outcome, and how many of the batch's records were acknowledged: all of them
            for DONE, none for AGAIN, for STOPPED the part stored or dead-lettered (when the
            spool's head is still that batch, else none).
        """
        # Records that a previous process's push may have carried are in doubt, and every
        # push records how far this one may reach (``_reconcile``).
        self._doubt.note_batch(batch)
        end = getattr(batch, "end", None)
        self._batch_end = SpoolPosition(*end) if isinstance(end, tuple) else None
        self._halt, self._deadline = halt, deadline
        outcome, done = self._deliver(
            batch.records, deadline, halt=halt, payload_bytes=getattr(batch, "payload_bytes", -1)
        )
        if outcome is Outcome.DONE:
            self._spool.ack(batch)
            self._doubt.acked(batch)
            return outcome, len(batch.records)
        if done:
            return outcome, self._ack_done_part(batch.records, done)
        return outcome, 0

    def back_off_after(
        self, exc: Exception, deadline: float | None, *, halt: threading.Event
    ) -> bool:
        """Count an exception of the runner's loop like a failed push, and back off.

        Returns:
            False when stop or the deadline came first.
        """
        reason = f"shipping failed: {type(exc).__name__}: {exc}"
        self._note_failure(None, reason, f"exception:{type(exc).__name__}")
        return self._backoff(None, deadline, halt=halt)

    def interrupt(self) -> None:
        """Cut a backoff or settling wait short (flush, stop); the delivery looks again."""
        self._kick.set()

    def sync_spool(self) -> None:
        """Run the spool's due fsync (its ``interval`` policy); a failure is reported once."""
        try:
            self._spool.sync_if_due()
        except Exception as exc:  # noqa: BLE001 - shipping goes on; the failure is reported
            self._report(f"spool sync failed: {type(exc).__name__}: {exc}", "sync")

    def stats(self) -> ShipperStats:
        """The counters since this delivery was built (see ``Shipper.stats``)."""
        with self._stats_lock:
            return {
                "batches_sent": self._batches_sent,
                "records_sent": self._records_sent,
                "bytes_sent": self._bytes_sent,
                "retried": self._retried,
                "dead_lettered": self._dead_lettered,
                "last_status": self._last_status,
                "last_error": self._last_error,
                "last_error_unix_s": self._last_error_unix_s,
                "last_success_unix_s": self._last_success_unix_s,
                "consecutive_failures": self._consecutive_failures,
                "reconciled": self._reconciled,
                "resent_unreconciled": self._resent_unreconciled,
            }

    def after_fork_in_child(self) -> None:
        """In a forked child: new lock and event (the parent's may have been held or set)."""
        self._new_sync_objects()

    # -- one batch -------------------------------------------------------------------------

    def _deliver(
        self,
        records: Sequence[RecordLike],
        deadline: float | None,
        *,
        halt: threading.Event,
        payload_bytes: int = -1,
    ) -> tuple[Outcome, int]:
        """Push records until each is stored or dead-lettered, or stop/deadline comes.

        ``payload_bytes`` is the records' payload size when the spool counted it (-1: not).

        Returns:
            The outcome, and how many leading records are done (stored or dead-lettered):
            all of them for DONE, none for AGAIN, those before the range in work for STOPPED.
        """
        # Half-open ranges still to push, the next one last. A refused range is replaced by
        # its two halves, the lower one next: every record below the next range is done. A
        # retry in the middle of a split repeats only the range that failed, so parts already
        # delivered are not resent while the batch is worked through.
        whole = (0, len(records))
        pending = [whole]
        refused_whole: PushResult | None = None  # why the whole batch was refused, if it was
        while pending:
            low, high = pending[-1]
            result = self._push(records, low, high)
            if result.outcome == "ok":
                pending.pop()
                shipped = records[low:high]
                if (low, high) != whole or payload_bytes < 0:
                    payload_bytes = sum(len(r.payload) for r in shipped)
                self._note_success(result, len(shipped), payload_bytes)
                continue
            if result.outcome == "reject":
                if (low, high) == whole:
                    refused_whole = result
                elif high - low == 1 and _refuses_the_request(result, refused_whole):
                    result = _as_request_refusal(result)
            if result.outcome == "reject":
                with self._stats_lock:
                    self._last_status = result.status
                    self._set_last_error(result.reason)
                # Every entry pushed refused, for one reason: all dead letters, no split.
                if high - low > 1 and not (
                    self._pushed == high - low
                    and self._refuses_every_entry(result, records[low:high])
                ):
                    middle = (low + high) // 2
                    pending[-1] = (middle, high)
                    pending.append((low, middle))
                    continue
                try:
                    self._dead_letter([self._entry(r) for r in records[low:high]], result)
                except OSError as exc:
                    # Not recorded, so not acked: kept in the spool and retried after backoff.
                    reason = f"cannot write dead-letter file {self.dead_letter_path}: {exc}"
                    self._note_failure(None, reason, "dead-letter-write")
                    if not self._backoff(None, deadline, halt=halt):
                        return Outcome.STOPPED, low
                    continue
                pending.pop()
                continue
            if result.too_large and high - low > 1:
                # A body over a size limit (a proxy's such as nginx's client_max_body_size,
                # 1 MiB by default; gRPC's 4 MiB inside Loki; a burst of the tenant's rate):
                # about the request, so nothing is dead-lettered, but smaller requests pass.
                # Halve it rather than wait for a limit that is not going to change.
                self._note_too_large(records[low:high], result)
                middle = (low + high) // 2
                pending[-1] = (middle, high)
                pending.append((low, middle))
                continue
            if result.status == 429 and result.nothing_stored:
                # The tenant's rate limit: a backlog drains through it for minutes, a push
                # or so a second refused between successes. Said once, not each time.
                message = f"shipping at the rate Loki's tenant limit allows: {result.reason}"
                self._note_failure(result, message, _RATE_LIMITED)
            else:
                self._note_failure(result, f"push to Loki failed, will retry: {result.reason}")
            refill_s = result.refill_s if result.status == 429 else None
            if not self._backoff(result.retry_after_s, deadline, halt=halt, refill_s=refill_s):
                return Outcome.STOPPED, low
            if pending == [whole]:
                return Outcome.AGAIN, 0
        return Outcome.DONE, len(records)

    def _ack_done_part(self, records: Sequence[RecordLike], done: int) -> int:
        """Ack the first ``done`` records of the head batch, each stored or dead-lettered.

        Why now, when stop or a deadline cut a split short: the records dead-lettered so far
        would otherwise stay spooled, and the next run would dead-letter them again (this
        process's next flush, drain or adoption slice, or after a shutdown the next
        process's). Remembering them in memory would not survive the process; the spool's
        ack does, and it keeps the promise of a whole batch's ack: what is acked is in Loki
        or in the fsynced dead-letter file, what follows is still spooled (at-least-once for
        the good records), and the part delivered is not sent again either. The spool acks
        batches only, so the part is peeked again as a batch of exactly those records; if
        the head moved meanwhile (``drop_oldest``), nothing is acked. Only a crash between a
        dead-letter write and this ack can still write one entry twice.

        Returns:
            How many records were acked: ``done``, or 0.
        """
        part = records[:done]
        try:
            batch = self._spool.peek_batch(
                max_records=done, max_bytes=max(1, sum(len(r.payload) for r in part))
            )
            if batch is None or not _same_records(batch.records, part):
                return 0
            self._spool.ack(batch)
        except Exception as exc:  # noqa: BLE001 - the part stays spooled, to be shipped again
            self._report(f"cannot acknowledge shipped records: {type(exc).__name__}: {exc}", "ack")
            return 0
        return done

    def _push(self, records: Sequence[RecordLike], low: int, high: int) -> PushResult:
        """Push ``records[low:high]``, less those Loki is found to hold; never raises.

        Records in doubt (``_reconcile``: a push that may have carried them failed, or was in
        flight at a crash) are looked for in Loki first, and only the missing ones are
        pushed; the range counts as delivered when none is. Before a push, ``in-flight``
        records that the batch may reach Loki; after a failure that may have stored some of
        it, its records are in doubt.
        """
        part: Sequence[RecordLike] = records[low:high]
        doubt = self._doubt
        if doubt.stored:
            part = [r for r in part if r not in doubt.stored]
        if doubt.records and not doubt.records.isdisjoint(part):
            checked = self._missing_from_loki(part)
            if isinstance(checked, PushResult):
                return checked
            part = checked
        self._pushed = len(part)
        if not part:
            return PushResult("ok", None, None, "already in Loki (reconciled)")
        doubt.before_push(self._batch_end)
        result = self._send(part)
        if self._refuses_every_entry(result, part):
            result = dataclasses.replace(result, nothing_stored=True)
        if result.outcome != "ok" and not result.nothing_stored:
            answered = result.status is not None and result.status not in _GATEWAY_GAVE_UP
            doubt.failed(part, answered=answered)
        return result

    def _send(self, part: Sequence[RecordLike]) -> PushResult:
        """Push ``part``; records older than 40 minutes go to their time shard."""
        try:
            now_ns = int(self._wall_clock() * _NS_PER_S)
            push_records = getattr(self._client, "push_records", None)
            if push_records is not None and not _any_old(part, now_ns):
                result: PushResult = push_records(
                    part,
                    node_id_label=self._node_id_label,
                    default_labels=self._default_labels,
                )
                return result
            entries = entries_from_records(
                part,
                node_id_label=self._node_id_label,
                default_labels=self._default_labels,
            )
            return self._client.push(time_sharded(entries, now_ns=now_ns))
        except Exception as exc:  # noqa: BLE001 - a client bug must not lose data or the thread
            return PushResult("retry", None, None, f"{type(exc).__name__}: {exc}")

    def _missing_from_loki(self, part: Sequence[RecordLike]) -> list[RecordLike] | PushResult:
        """The records of ``part`` Loki does not hold (a reconcile), or why not known yet.

        Returns a ``retry`` result (nothing stored, so nothing more in doubt) while Loki
        cannot be asked: the caller backs off and comes back. After
        :data:`~agent_logging.shipping._reconcile.RECONCILE_ATTEMPTS` failed queries in a row, or at
        once when queries are refused for good or the client cannot query, gives up: the
        records in doubt are pushed as they are and counted as ``resent_unreconciled``.
        """
        doubt = self._doubt
        doubtful = [r for r in part if r in doubt.records]
        query = getattr(self._client, "iter_query_range", None)
        if query is None:
            return self._unreconciled(part, doubtful, "the Loki client cannot query")
        if not settle(doubt, self._wait, self._kick, self._halt, self._deadline, self._clock):
            reason = "stopped while records that may have reached Loki were settling"
            return PushResult("retry", None, None, reason, nothing_stored=True)
        try:
            found = find_in_loki(
                query,
                doubtful,
                node_id_label=self._node_id_label,
                default_labels=self._default_labels,
                now_unix_s=self._wall_clock(),
            )
        except ReconcileError as exc:
            doubt.failures += 1
            if exc.unreachable or not (exc.forbidden or doubt.failures >= RECONCILE_ATTEMPTS):
                reason = (
                    "cannot ask Loki which records of a push that may have reached it it holds "
                    f"(asking again before pushing them): {exc}"
                )
                return PushResult("retry", exc.status, None, reason, nothing_stored=True)
            return self._unreconciled(part, doubtful, str(exc))
        doubt.failures = 0
        doubt.records.difference_update(doubtful)
        doubt.stored.update(found.present)
        with self._stats_lock:
            self._reconciled += len(found.present)
            self._resent_unreconciled += found.unverifiable
        return [r for r in part if r not in found.present]

    def _unreconciled(
        self, part: Sequence[RecordLike], doubtful: list[RecordLike], why: str
    ) -> list[RecordLike]:
        """Give up reconciling: push ``part`` whole, counting ``doubtful`` and saying so once."""
        doubt = self._doubt
        doubt.failures = 0
        doubt.records.difference_update(doubtful)
        with self._stats_lock:
            self._resent_unreconciled += len(doubtful)
        self._report(
            f"pushing {len(doubtful)} records again without knowing whether Loki holds them "
            f"already (each may be visible twice; counted as resent_unreconciled): {why}",
            "unreconciled",
        )
        return list(part)

    def _refuses_every_entry(self, result: PushResult, part: Sequence[RecordLike]) -> bool:
        """Whether Loki's answer to a push of ``part`` refused each of its entries."""
        if result.outcome != "reject":
            return False
        now_ns = int(self._wall_clock() * _NS_PER_S)
        pushed = time_sharded([self._entry(r) for r in part], now_ns=now_ns)
        streams = len({entry.labels for entry in pushed})
        return result.refuses_every_entry(len(part), streams=streams)

    def _entry(self, record: RecordLike) -> PushEntry:
        return entry_from_record(
            record.ts_ns,
            record.payload,
            node_id_label=self._node_id_label,
            default_labels=self._default_labels,
        )

    def _backoff(
        self,
        retry_after_s: float | None,
        deadline: float | None,
        *,
        halt: threading.Event,
        refill_s: float | None = None,
    ) -> bool:
        """Wait before the next attempt; False when stop or the deadline came first.

        ``refill_s``: the tenant's rate limit refused the push, and its bucket holds the push
        again after about this long: wait that, jittered up by half (not the exponential
        backoff, which would leave the rate unused while a backlog drains).
        """
        exponent = min(max(self._consecutive_failures - 1, 0), _MAX_EXPONENT)
        ceiling = min(self._backoff_max_s, self._backoff_initial_s * 2.0**exponent)
        if refill_s is not None:
            ceiling = min(self._backoff_max_s, refill_s * 1.5)
        delay = self._rng.uniform(min(refill_s or 0.0, ceiling), ceiling)
        if retry_after_s is not None and retry_after_s > delay:
            delay = min(retry_after_s, self._backoff_max_s)
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - self._clock()))
        self.sync_spool()  # an outage can last hours: the ``interval`` fsync policy goes on
        with self._waiting():  # the runner is not busy: logging threads need not let it in
            if self._wait(self._kick, delay):
                self._kick.clear()
        if halt.is_set():
            return False
        return deadline is None or self._clock() < deadline

    # -- bookkeeping -----------------------------------------------------------------------

    def _set_last_error(self, reason: str | None) -> None:
        """The last error and when it happened, together (the stats lock is held)."""
        self._last_error = reason
        self._last_error_unix_s = self._wall_clock()

    def _note_success(self, result: PushResult, records: int, payload_bytes: int) -> None:
        with self._stats_lock:
            self._batches_sent += 1
            self._records_sent += records
            self._bytes_sent += payload_bytes
            self._last_status = result.status
            self._last_success_unix_s = self._wall_clock()
            self._consecutive_failures = 0
        self._reported.intersection_update((_RATE_LIMITED,))

    def _note_too_large(self, records: Sequence[RecordLike], result: PushResult) -> None:
        """Count a 413 and keep later batches below the size refused (halving it)."""
        refused_bytes = sum(len(r.payload) for r in records)
        limit = max(1, min(self.max_batch_bytes, refused_bytes // 2))
        with self._stats_lock:
            self._retried += 1
            self._last_status = result.status
            self._set_last_error(result.reason)
        if limit < self.max_batch_bytes:
            self.max_batch_bytes = limit
            self._report(
                f"a push of {len(records)} records ({refused_bytes} bytes) was refused as too "
                f"large; sending it in halves, and at most {limit} bytes per push from now on: "
                f"{result.reason}",
                f"too-large:{limit}",
            )

    def _note_failure(self, result: PushResult | None, message: str, key: str = "") -> None:
        with self._stats_lock:
            self._retried += 1
            self._consecutive_failures += 1
            self._set_last_error(result.reason if result is not None else message)
            if result is not None:
                self._last_status = result.status
        self._report(message, (key or _reason_key(result)) if result is not None else key)

    def _report(self, message: str, key: str) -> None:
        if self._on_error is None or key in self._reported:
            return
        self._reported.add(key)
        # A broken reporter must not stop shipping.
        with contextlib.suppress(Exception):
            self._on_error(message)

    def _dead_letter(self, entries: Sequence[PushEntry], result: PushResult) -> None:
        """Append refused entries to the dead-letter file and make them durable."""
        path = self.dead_letter_path
        append_dead_letters(
            path,
            entries,
            result.status,
            result.reason,
            now_unix_s=self._wall_clock(),
            max_bytes=self._dead_letter_max_bytes,
        )
        with self._stats_lock:
            self._dead_lettered += len(entries)
        what = "an entry" if len(entries) == 1 else f"{len(entries)} entries"
        self._report(
            f"Loki refused {what} (HTTP {result.status}): {result.reason}; written to {path}",
            _reason_key(result),
        )
