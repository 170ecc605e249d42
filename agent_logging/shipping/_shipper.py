"""The shipper: the runner of the delivery design, one daemon thread moving batches to Loki.

Loop: wait for the spool's ``wake`` (set when ``wake_bytes`` are pending) or
``batch_interval_s``, whichever comes first; then peek the oldest batch, push it, and ack it
once Loki stored it; go on while a full batch (``wake_bytes``) is pending, and leave the rest
for the next wake. Shipping "until the spool is empty" instead, under a steady load, pushed
the few hundred records appended during the previous push, each time with its own fsync,
request and ack: per-batch costs that then dominated the shipper's CPU time per record and
its share of the GIL. After a size wake the next wait is a short linger (``_LINGER_S``)
rather than the interval, for as long as the load keeps at least an eighth of a batch
coming per linger: batches stay large, and the last records of a burst wait no longer than
that. :meth:`Shipper.flush`, :meth:`Shipper.stop` and spools that cannot say how much is
pending (no ``pending_bytes``) ship until the spool is empty. Nothing leaves the spool before a 2xx
(or a dead-letter write), so delivery is at-least-once on the wire; and exactly once as a query
sees it, since only the batch in flight at a crash (or at a failure of unknown outcome) can be
pushed again, and only what a reconcile with Loki does not find of it is (``_reconcile``: Loki
de-duplicates within one stream only, and shards fast streams).

Retryable failures are retried forever with jittered exponential backoff; entries Loki
refuses are bisected out and dead-lettered, each once; a body too large (413) is halved. How
one batch is delivered, and counted, is the design, in ``_delivery``: the shipper builds one
:class:`~agent_logging.shipping._delivery.Delivery` with its options and hands it each batch
it peeks; this module is when and from which thread. The same shipper runs in the helper
process of ``shipper="process"`` (``_child``), over a stand-in for the service's spool.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from agent_logging.shipping._dead_letter import DEAD_LETTER_MAX_BYTES
from agent_logging.shipping._delivery import (
    Delivery,
    Outcome,
    PushClient,
    ShipperStats,
    SpoolLike,
    require_positive,
)

__all__ = ["FLUSH_POLL_S", "STOP_GRACE_S", "Shipper", "flush_share"]

# flush() re-checks the spool at least this often even without a notification, since
# records may also leave the spool by its own drop policy.
FLUSH_POLL_S: Final = 0.05

# stop() keeps this much of its time for the thread to notice it should end (and gives it
# this much past a shorter deadline): ending takes microseconds plus a scheduling delay,
# unless a push is in flight (then up to the client's timeout: stop() says False instead).
STOP_GRACE_S: Final = 0.25

# Under a load that fills batches, what is left after the full ones ships once this long
# passed without another size wake: records keep coming, so the next push is a large batch
# (at 50,000 lines/s, 50 ms is about 2,500 records of 300 bytes, most of a 1 MiB batch),
# while the last records of a burst wait no longer than this.
_LINGER_S: Final = 0.05


def flush_share(timeout_s: float) -> float:
    """How much of a stop's ``timeout_s`` goes to flushing: all but the :data:`STOP_GRACE_S`
    kept for ending, when it is long enough to keep that much twice over."""
    return timeout_s - STOP_GRACE_S if timeout_s > 2 * STOP_GRACE_S else timeout_s


def _wait_event(event: threading.Event, timeout_s: float) -> bool:
    return event.wait(timeout_s)


class Shipper:
    """Ship a spool's records to Loki from one daemon thread.

    Backoff after a retryable failure is "full jitter": the n-th consecutive failure waits a
    uniformly random time in ``[0, min(backoff_max_s, backoff_initial_s * 2**(n-1))]``, so a
    fleet that lost Loki together does not return in lockstep. A ``Retry-After`` longer than
    that draw is honoured, up to ``backoff_max_s`` (a proxy asking for a day must not stall
    shipping while the spool fills).

    Args:
        spool: the spool to drain.
        client: the Loki client.
        max_batch_bytes: most record bytes per push (lowered for good after a 413).
        max_batch_records: most records per push.
        batch_interval_s: longest wait before shipping what is pending, however little.
        backoff_initial_s: backoff ceiling after the first failure.
        backoff_max_s: largest backoff, ``Retry-After`` included.
        dead_letter_path: JSON-lines file for entries Loki refuses.
        dead_letter_max_bytes: size past which the dead-letter file is rotated to ``.1``.
        node_id_label: make ``node_id`` a stream label.
        default_labels: label values for records that lack them (``service_name``,
            ``layer``, ``env``, ``node_id``).
        on_error: called with a message when shipping fails, once per distinct reason until
            a push succeeds again; exceptions it raises are swallowed.
        rng: source of jitter (seed it in tests).
        clock: monotonic clock for deadlines.
        wall_clock: UNIX time, for ``last_success_unix_s`` and dead-letter stamps.
        wait: ``wait(event, timeout_s) -> bool``, how backoff waits (tests replace it to
            record delays instead of sleeping); it must return early, True, when ``event`` is
            set, which is how :meth:`flush` and :meth:`stop` cut a backoff short.

    Raises:
        ConfigurationError: a size, count or duration is not positive.
    """

    def __init__(
        self,
        spool: SpoolLike[Any],
        client: PushClient,
        *,
        max_batch_bytes: int = 1 << 20,
        max_batch_records: int = 10_000,
        batch_interval_s: float = 1.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 60.0,
        dead_letter_path: Path,
        dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES,
        node_id_label: bool = False,
        default_labels: Mapping[str, str],
        on_error: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        wait: Callable[[threading.Event, float], bool] = _wait_event,
    ) -> None:
        require_positive(
            {"max_batch_records": max_batch_records, "batch_interval_s": batch_interval_s}
        )
        self._delivery = Delivery(
            spool,
            client,
            max_batch_bytes=max_batch_bytes,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
            dead_letter_path=dead_letter_path,
            dead_letter_max_bytes=dead_letter_max_bytes,
            node_id_label=node_id_label,
            default_labels=default_labels,
            on_error=on_error,
            # Jitter needs no cryptographic strength; an injectable Random keeps tests exact.
            rng=rng if rng is not None else random.Random(),  # noqa: S311
            clock=clock,
            wall_clock=wall_clock,
            wait=wait,
            waiting=self._not_busy,
        )
        self._spool = spool
        self._client = client  # its connections are renewed after a fork; the delivery pushes
        self._max_batch_records = max_batch_records
        self._batch_interval_s = batch_interval_s
        self._clock = clock
        self._thread: threading.Thread | None = None
        self._acked_records = 0
        self._progress_count = 0
        #: True while the thread reads, pushes or acknowledges a batch, and not while it
        #: waits for records or backs off (read without a lock by logging threads: the
        #: durable sink gives the shipper a turn at the GIL then, see ``_durable``).
        self.busy = False
        self._new_sync_objects()

    def _new_sync_objects(self) -> None:
        self._ship_lock = threading.Lock()  # one batch in flight per process: peek is shared
        self._progress = threading.Condition()
        self._stop = threading.Event()  # ends the thread
        self._flush_all = threading.Event()  # the next wake ships everything (flush)
        self._cancel = threading.Event()  # ends a ship_pending() call

    @property
    def dead_letter_path(self) -> Path:
        """The JSON-lines file for entries Loki refuses."""
        return self._delivery.dead_letter_path

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the shipping thread (no-op when it is running)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="agent-logging-shipper", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the shipping thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def flush(self, timeout_s: float) -> bool:
        """Ship what the spool holds now, waiting at most ``timeout_s``.

        Wakes the thread (cutting a backoff short) and waits until the records present at
        the call are acked, or the spool is empty. Without a running thread, ships in the
        calling thread (:meth:`ship_pending`).

        Args:
            timeout_s: how long to wait.

        Returns:
            True when everything present at the call left the spool in time.
        """
        thread = self._thread
        if thread is None or not thread.is_alive():
            return self.ship_pending(timeout_s)
        deadline = self._clock() + timeout_s
        target = self._acked_records + self._pending_records()
        self.request_flush()
        while True:
            with self._progress:
                seen = self._progress_count
            if self._acked_records >= target or self._pending_records() == 0:
                return True
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            with self._progress:
                if self._progress_count == seen:
                    self._progress.wait(min(remaining, FLUSH_POLL_S))

    def request_flush(self) -> None:
        """Make the thread ship everything now, cutting a backoff short; do not wait."""
        self._flush_all.set()
        self._delivery.interrupt()
        self._spool.wake.set()

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Flush within ``timeout_s``, then end the thread. Unshipped records stay spooled.

        The client stays open: whoever created it closes it.

        Args:
            timeout_s: the deadline for flushing and ending the thread together; the last
                0.25 s of it are kept for the thread to end (given beyond it when shorter).

        Returns:
            True when the spool was flushed and the thread ended in time.
        """
        deadline = self._clock() + timeout_s
        flushed = self.flush(flush_share(timeout_s))
        return self.halt(max(STOP_GRACE_S, deadline - self._clock())) and flushed

    def halt(self, timeout_s: float) -> bool:
        """End the thread without flushing, waiting at most ``timeout_s`` for it.

        Returns:
            True when the thread ended (or was not running).
        """
        self._stop.set()
        self._cancel.set()
        self._delivery.interrupt()
        self._spool.wake.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def ship_pending(self, deadline_s: float) -> bool:
        """Ship everything in the spool from the calling thread, for at most ``deadline_s``.

        For ``agent-logging drain`` on a spool whose owner is gone; safe beside a running
        thread (one batch is in flight at a time). :meth:`stop`, from another thread, ends it
        early.

        Args:
            deadline_s: seconds from now after which to give up (a duration).

        Returns:
            True when the spool is empty, False when the time ran out first.
        """
        deadline = self._clock() + deadline_s
        self._delivery.sync_spool()
        self._cancel.clear()
        return self._ship_available(deadline, halt=self._cancel)

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's thread and connections, without touching them.

        The thread does not exist in the child; its locks may have been held at the fork, so
        they are replaced; the client starts a fresh connection pool (the inherited sockets
        belong to the parent). Call :meth:`start` if the child should ship.
        """
        self._thread = None
        self.busy = False  # the parent's push, if one was in flight at the fork
        self._new_sync_objects()
        self._delivery.after_fork_in_child()
        self._client.after_fork_in_child()

    def stats(self) -> ShipperStats:
        """Counters of this shipper since it was created.

        Returns:
            ``batches_sent``, ``records_sent``, ``bytes_sent`` (record bytes of successful
            pushes), ``retried`` (retryable failures), ``dead_lettered``, ``last_status``,
            ``last_error``, ``last_error_unix_s``, ``last_success_unix_s``,
            ``consecutive_failures``, ``reconciled`` (records that may have reached Loki
            before, found there by a reconcile, and not pushed again) and
            ``resent_unreconciled`` (records pushed again without knowing whether Loki held
            them: each may be visible twice; see ``_reconcile``).
        """
        return self._delivery.stats()

    # -- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        wake = self._spool.wake
        pending_bytes = getattr(self._spool, "pending_bytes", None)
        lingering = False  # a size wake came, and the load has not dropped since
        while not self._stop.is_set():
            # Batching by size and age: the spool sets ``wake`` at ``wake_bytes`` pending;
            # otherwise what is pending ships after ``batch_interval_s`` (_LINGER_S under a
            # load that fills batches: see the module docstring).
            by_size = wake.wait(_LINGER_S if lingering else self._batch_interval_s)
            wake.clear()
            if self._stop.is_set():
                break
            self._delivery.sync_spool()
            if pending_bytes is None or self._flush_all.is_set():
                self._flush_all.clear()
                self._ship_available(None, halt=self._stop)
                continue
            if by_size:
                lingering = True
            elif pending_bytes() < self._full_batch_bytes() // 8:
                lingering = False  # little came in one linger: back to the interval
            self._ship_available(None, halt=self._stop, full_batches=pending_bytes)

    def _ship_available(
        self,
        deadline: float | None,
        *,
        halt: threading.Event,
        full_batches: Callable[[], int] | None = None,
    ) -> bool:
        """Ship batches until the spool is empty (True) or stop/deadline comes (False).

        With ``full_batches`` (the spool's ``pending_bytes``), stop early (True) once less
        than a full batch is pending after a push: the records appended meanwhile wait for
        the next wake.
        """
        while not halt.is_set():
            if deadline is not None and self._clock() >= deadline:
                return False
            try:
                shipped = self._ship_next(deadline, halt=halt)
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any failure
                if not self._delivery.back_off_after(exc, deadline, halt=halt):
                    return False
                continue
            if shipped is None:
                return True
            if not shipped:
                return False
            if full_batches is not None and full_batches() < self._full_batch_bytes():
                return True
        return False

    def _full_batch_bytes(self) -> int:
        # The spool's wake threshold when it has one: it may ask for smaller batches.
        wake_bytes = getattr(self._spool, "wake_bytes", None)
        max_batch_bytes = self._delivery.max_batch_bytes
        if isinstance(wake_bytes, int) and 0 < wake_bytes < max_batch_bytes:
            return wake_bytes
        return max_batch_bytes

    def _ship_next(self, deadline: float | None, *, halt: threading.Event) -> bool | None:
        """Deliver and ack the oldest batch: None if none, False if stop/deadline came first."""
        while True:
            timeout = -1.0 if deadline is None else max(0.0, deadline - self._clock())
            if not self._ship_lock.acquire(timeout=timeout):
                return False
            self.busy = True
            try:
                batch = self._spool.peek_batch(
                    max_records=self._max_batch_records,
                    max_bytes=self._delivery.max_batch_bytes,
                )
                if batch is None:
                    return None
                outcome, acked = self._delivery.deliver(batch, deadline, halt=halt)
            finally:
                self.busy = False
                self._ship_lock.release()
            if acked:
                self._note_acked(acked)
            if outcome is Outcome.STOPPED:
                return False
            if outcome is Outcome.DONE:
                return True
            # AGAIN: the whole batch failed and the backoff is over. Peek afresh rather than
            # resend the copy in memory: the peek fsyncs what was appended meanwhile (the
            # spool's ``batch`` policy) and fills the batch up to its limits.

    # -- bookkeeping -----------------------------------------------------------------------

    def _pending_records(self) -> int:
        return self._spool.stats().records

    @contextlib.contextmanager
    def _not_busy(self) -> Iterator[None]:
        """While the delivery backs off: logging threads need not let this thread in."""
        busy, self.busy = self.busy, False
        try:
            yield
        finally:
            self.busy = busy

    def _note_acked(self, records: int) -> None:
        with self._progress:
            self._acked_records += records
            self._progress_count += 1
            self._progress.notify_all()
