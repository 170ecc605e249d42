"""The durable path as one pipeline sink: record → spool → shipper thread → Loki.

The shipper, the runner of the delivery design (``_delivery``), is a thread of this process
(``_shipper``), or with ``shipper="process"`` a helper process that this process serves
(``_process``); orphaned spools are always shipped from threads.

Layout of ``spool_dir`` (the root)::

    ROOT/<service>/            this service's spool (see ``spool._spool``), owned by one process
    ROOT/<service>.<pid>/      a second process of the same service (a forked worker, say)
    ROOT/<dir>/dead-letter.ndjson   entries Loki refused, with its reason

At start, and every minute after, the process also adopts every other spool under the root
that nobody holds (its owner died, was replaced by this process after a restart or an
upgrade, or was a forked worker that crashed while this process runs on), ships it in the
background and removes it once empty (``_adoption``). ``agent-logging drain`` walks the same
layout.

The hot path is :meth:`Durable.write_keyed`: one ``Spool.append`` (a framed copy into the
spool's mapping), the frame carrying the record's stream key (``loki._record_encoder.stream_key``;
the pipeline hands it over, usually reusing the previous record's) so the shipper need not parse
the line again.
Shipping, fsync, adoption and health records all happen on background threads. Only an append
the spool refused does more: a write error or a full disk (not a drop by the full policy, which
is counted as ``dropped``) is reported once on the internal logger, naming the spool and the
reason, and the reason stays in ``health()["spool_error"]``.

Records that the HTTP stack logs *while a push is in flight* (httpx's "HTTP Request: POST ..."
at INFO, reaching the pipeline through the stdlib bridge) are not spooled: each push would
otherwise spool a record that needs another push, for ever. They still reach the local sinks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from agent_logging import _state
from agent_logging._types import EventDict
from agent_logging.loki._client import LokiClient, PushResult, QueriedEntry
from agent_logging.loki._entries import PushEntry, RecordLike
from agent_logging.loki._record_encoder import stream_key
from agent_logging.shipping._adoption import Adoption
from agent_logging.shipping._child import default_labels
from agent_logging.shipping._process import ProcessShipper
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._dirs import (
    DEAD_LETTER_NAME,
    open_own_spool,
    spool_kwargs,
    storage_problem,
)
from agent_logging.spool._spool import Spool

if TYPE_CHECKING:
    from agent_logging._settings import Settings

__all__ = ["Durable", "client_for"]

#: While the shipper is behind and busy, one log call in this many yields the GIL.
_YIELD_EVERY: Final = 64
#: A refused append looks at why (the spool's counters: a system call) no sooner than this
#: after the last look: on a full disk, or a full spool under ``drop_newest``, every call of a
#: flat-out logger is refused, and the logging call must stay cheap.
_LOSS_CHECK_S: Final = 1.0


class _Pushing(threading.local):
    # The class attribute answers for threads that never pushed: a thread-local attribute
    # that is missing costs an AttributeError raised and caught inside getattr(), about a
    # microsecond on every log call.
    active = False


# Set on a shipping thread while its push is in flight (see the module docstring).
_pushing = _Pushing()


class _QuietClient:
    """The Loki client as the shipper sees it: marks the pushing thread while a push runs."""

    def __init__(self, client: LokiClient) -> None:
        self._client = client

    def push(self, entries: Sequence[PushEntry], /) -> PushResult:
        _pushing.active = True
        try:
            return self._client.push(entries)
        finally:
            _pushing.active = False

    def push_records(
        self,
        records: Sequence[RecordLike],
        /,
        *,
        node_id_label: bool,
        default_labels: Mapping[str, str],
    ) -> PushResult:
        _pushing.active = True
        try:
            return self._client.push_records(
                records, node_id_label=node_id_label, default_labels=default_labels
            )
        finally:
            _pushing.active = False

    def iter_query_range(self, query: str, *, start_ns: int, end_ns: int) -> Iterator[QueriedEntry]:
        """The client's query (a reconcile's), with the HTTP stack's chatter kept out too."""
        _pushing.active = True
        try:
            yield from self._client.iter_query_range(query, start_ns=start_ns, end_ns=end_ns)
        finally:
            _pushing.active = False

    def after_fork_in_child(self) -> None:
        self._client.after_fork_in_child()


def client_for(settings: Settings) -> LokiClient:
    """A Loki client from the ``loki_*`` settings."""
    basic = None
    if settings.loki_username is not None:
        basic = (settings.loki_username, settings.loki_password or "")
    return LokiClient(
        settings.loki_url or "",
        tenant=settings.loki_tenant,
        basic_auth=basic,
        bearer_token=settings.loki_bearer_token,
        ca_bundle=settings.loki_ca_bundle,
        encoding=settings.loki_encoding,
    )


class Durable:
    """A pipeline sink that spools every record and ships it from a background thread."""

    needs_record: Final = False  # it spools the line, under the stream key

    def __init__(self, settings: Settings, spool: Spool, client: LokiClient) -> None:
        self.settings = settings
        self.spool = spool
        self.client = client
        self.shipper = self._own_shipper(spool)
        self._behind_bytes = 2 * settings.batch_max_bytes
        self._calls_behind = 0
        self._forked = False
        self._reopen_lock = threading.Lock()
        self._watch_losses(spool)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._adoption = self._adoption_for(spool)

    def _adoption_for(self, spool: Spool) -> Adoption:
        return Adoption(self.settings, spool.directory, self._shipper_for, self._stop)

    def _watch_losses(self, spool: Spool) -> None:
        """Start watching ``spool`` for appends it refuses (see :meth:`_refused`)."""
        # Write errors counted before now (a replay's failed unlinks) lost no record.
        self._write_errors_seen = spool.stats().write_errors
        self._next_loss_check = 0.0
        self._spool_error: str | None = None

    def _shipper_for(self, spool: Spool) -> Shipper:
        settings = self.settings
        spool.wake_bytes = settings.batch_max_bytes
        return Shipper(
            spool,
            _QuietClient(self.client),
            max_batch_bytes=settings.batch_max_bytes,
            batch_interval_s=settings.batch_interval_s,
            dead_letter_path=spool.directory / DEAD_LETTER_NAME,
            node_id_label=settings.node_id_label,
            default_labels=default_labels(settings),
            on_error=_report_shipping,
        )

    def _own_shipper(self, spool: Spool) -> Shipper | ProcessShipper:
        """The shipper of this process's own spool: a thread, or a process (``shipper``)."""
        shipper = self._shipper_for(spool)
        if self.settings.shipper != "process":
            return shipper
        return ProcessShipper.for_settings(self.settings, spool, shipper, _report_shipping)

    @classmethod
    def start(cls, settings: Settings) -> Durable:
        """Open this process's spool under ``settings.spool_dir`` and start shipping.

        Raises:
            SpoolError: the spool directory cannot be created or opened.
            ConfigurationError: a spool or Loki setting is invalid.
        """
        spool = open_own_spool(settings)
        if spool.unmapped_reason is not None:
            _state.report_once(
                f"spool-unmapped:{spool.directory}",
                f"{spool.unmapped_reason}; records are written with one system call each "
                "instead (as durable, about 2 µs more per log call)",
            )
        if spool.degraded_reason is not None:
            # configure() goes on: the local outputs work, and the spool takes records again
            # once a rotation finds room (``spool._spool``); health() counts what it refuses.
            _state.report_once(
                f"spool-degraded:{spool.directory}",
                f"spool {spool.directory}: {spool.degraded_reason}; refused records are "
                "counted in health()['write_errors']",
            )
        durable = cls(settings, spool, client_for(settings))
        durable._start_threads()
        return durable

    def _start_threads(self) -> None:
        self.shipper.start()
        self._spawn("agent-logging-adopt", self._adoption.run)
        if self.settings.health_interval_s > 0:
            self._spawn("agent-logging-health", self._health_loop)

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- the hot path --------------------------------------------------------------------

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        self.write_keyed(ts_ns, line, record, stream_key(record))

    def write_keyed(self, ts_ns: int, line: bytes, record: EventDict, key: int) -> None:
        """:meth:`write` with the record's stream key already worked out (by the pipeline)."""
        if _pushing.active:
            return  # the HTTP stack's own chatter about a push: spooling it would loop
        if self._forked:
            self._reopen_in_child()
        spool = self.spool
        if not spool.append(ts_ns, line, key):
            self._refused(spool)
            return
        if self.shipper.busy and spool.pending_bytes() > self._behind_bytes:
            # The spool's append makes no system call, so a thread logging flat out never
            # lets go of the GIL, and the shipper, which needs it back after each system call
            # of its push, gets it only every switch interval (5 ms): it falls behind, and
            # the test server's work on each push stops overlapping ours. While the shipper
            # works on a batch (not while it waits for records or backs off in an outage)
            # and more than two batches wait, one call in _YIELD_EVERY lets go.
            self._calls_behind += 1
            if not self._calls_behind % _YIELD_EVERY:
                time.sleep(0)

    def _refused(self, spool: Spool) -> None:
        """An append returned False: report a write error or a full disk once.

        A drop by the full policy is the documented behaviour, counted as ``dropped``; a write
        error (a segment that cannot be allocated on a full disk, a failed copy) loses the
        record too, and must not be visible only as a counter.
        """
        now = time.monotonic()
        if now < self._next_loss_check:
            return
        self._next_loss_check = now + _LOSS_CHECK_S
        errors = spool.stats().write_errors
        if errors <= self._write_errors_seen:
            return  # a drop by the full policy: counted as such
        self._write_errors_seen = errors
        needed = max(spool_kwargs(self.settings)["segment_bytes"], 1)
        problem = storage_problem(spool.directory, needed)
        self._spool_error = f"spool {spool.directory} cannot store records: {problem}"
        _state.report_once(
            f"spool-write:{spool.directory}",
            f"records are being lost: {self._spool_error}; further losses are counted in "
            "health()['write_errors'] without being reported again",
        )

    # -- background work -----------------------------------------------------------------

    def wait_for_adoption(self, rounds: int, timeout_s: float) -> bool:
        """Block until ``rounds`` looks for orphans are complete (for tests and diagnostics).

        Returns:
            True when they are, False when ``timeout_s`` passed first.
        """
        return self._adoption.wait(rounds, timeout_s)

    def _health_loop(self) -> None:
        while not self._stop.wait(self.settings.health_interval_s):
            pipeline = _state.pipeline
            if pipeline is None:
                continue
            fields: dict[str, Any] = {"event": "shipping health", "logger": "agent_logging.health"}
            fields.update(self.health())
            pipeline.handle("info", fields)

    def health(self) -> dict[str, Any]:
        """Spool depth, oldest unsent age, sent, retried, dropped, dead-lettered and more.

        ``torn`` and ``corrupt`` count damaged regions of the spool, ``lost`` the records
        they cost and those of spool files deleted under it (reported in the spool's
        quarantine, which ``agent-logging drain`` fails on); ``spool_recreated`` counts the
        times the spool directory was deleted and made again, ``spool_degraded`` the segments
        made smaller than configured on a disk too full for a whole one.
        ``spool_error`` is why the spool last refused to store a record (None: never). In a
        forked child that has not logged yet, the counters are the child's own: all zero (the
        spool and shipper in hand are the parent's).
        """
        if self._forked:
            return _UNUSED_HEALTH.copy()
        stats = self.spool.stats()
        shipped = self.shipper.stats()
        oldest = stats.oldest_ts_ns
        return {
            "spool_records": stats.records,
            "spool_bytes": stats.bytes,
            "oldest_unsent_age_s": (
                round(max(0.0, (time.time_ns() - oldest) / 1e9), 3) if oldest else 0.0
            ),
            "sent": shipped.get("records_sent", 0),
            "retried": shipped.get("retried", 0),
            "dropped": stats.dropped,
            "dead_lettered": shipped.get("dead_lettered", 0),
            "reconciled": shipped.get("reconciled", 0),
            "resent_unreconciled": shipped.get("resent_unreconciled", 0),
            "torn": stats.torn,
            "corrupt": stats.corrupt,
            "lost": stats.lost,
            "write_errors": stats.write_errors,
            "spool_degraded": stats.degraded,
            "spool_recreated": stats.recreated,
            "adopted": self._adoption.adopted,
            "last_error": shipped.get("last_error"),
            # How long ago: the last error stays after shipping recovers.
            "last_error_age_s": _age_s(shipped.get("last_error_unix_s")),
            "spool_error": self._spool_error,
        }

    # -- lifecycle -----------------------------------------------------------------------

    def flush(self, timeout_s: float) -> bool:
        """Ship everything spooled so far; True when the spool emptied in time.

        In a forked child that has not logged yet there is nothing of its own to ship: True at
        once (the spool and shipper in hand are the parent's, closed in the child).
        """
        if self._forked:
            return True
        return self.shipper.flush(timeout_s)

    def close(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        self._adoption.cancel()  # ends an adopted spool's ship_pending() in its thread
        if self._forked:
            # A forked child that never logged: the spool and shipper are the parent's, so
            # there is nothing of ours to flush (flushing would spin on a spool that is
            # closed here until the deadline).
            self.client.close()
            return
        try:
            self.shipper.stop(timeout_s=max(0.0, deadline - time.monotonic()))
        finally:
            for thread in self._threads:
                thread.join(max(0.0, min(0.5, deadline - time.monotonic())))
            self.spool.close()
            self.client.close()

    def after_fork_in_child(self) -> None:
        # Runs in the child right after fork: only mark; the child's first write reopens.
        self.spool.after_fork_in_child()
        self.shipper.after_fork_in_child()
        self.client.after_fork_in_child()
        self._forked = True
        self._reopen_lock = threading.Lock()  # another thread may have held it at the fork
        self._threads = []
        self._adoption = self._adoption_for(self.spool)  # none yet, and no lock held
        self._spool_error = None

    def _reopen_in_child(self) -> None:
        with self._reopen_lock:
            if not self._forked:
                return  # another thread of the child reopened first
            self._stop = threading.Event()
            spool = open_own_spool(self.settings)
            self.shipper = self._own_shipper(spool)
            self._watch_losses(spool)
            self.spool = spool
            self._adoption = self._adoption_for(spool)
            self._forked = False
            self._start_threads()


#: :meth:`Durable.health` in a forked child before its first record: nothing of its own yet.
_UNUSED_HEALTH: Final[dict[str, Any]] = {
    "spool_records": 0,
    "spool_bytes": 0,
    "oldest_unsent_age_s": 0.0,
    "sent": 0,
    "retried": 0,
    "dropped": 0,
    "dead_lettered": 0,
    "reconciled": 0,
    "resent_unreconciled": 0,
    "torn": 0,
    "corrupt": 0,
    "lost": 0,
    "write_errors": 0,
    "spool_degraded": 0,
    "spool_recreated": 0,
    "adopted": 0,
    "last_error": None,
    "last_error_age_s": None,
    "spool_error": None,
}


def _report_shipping(message: str) -> None:
    _state.internal_logger.warning("shipping: %s", message)


def _age_s(unix_s: float | None) -> float | None:
    return None if unix_s is None else round(max(0.0, time.time() - unix_s), 3)
