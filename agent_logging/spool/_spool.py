"""The durable local spool of DESIGN §5: record → spool → shipper thread → Loki.

A spool is one directory owned by one process at a time: a lock file, append-only segment
files and an ack file. This module holds the live spool: its state, its interface and its
write path. Beside it: the layout, replay and the reading of segment files in ``_segments``;
the directory's lock in ``_lock``; the options and their checking in ``_options``;
the size cap, the full policies and segment rotation in ``_cap``; batches for the
shipper and their acknowledgement (at-least-once) in ``_reading``; the fsync policy in
``_sync``; the counters in ``_stats``; fork safety in ``_fork``. Their
functions take the open :class:`Spool` and work on its state under its locks; the methods here
are its only interface.

Writing. :meth:`Spool.append` frames the record (header, CRC32, the record's own ``ts_ns`` and
its stream key, see ``_framing``) and copies it, under one lock, into a shared mapping of the
active segment file (``_writer``: preallocated, in the page cache, no system call, so the call
never releases the GIL), so a returned call survives a SIGKILL of the process; only power loss
needs the fsync policy. On a filesystem that cannot map the file, each frame is written with
one ``pwrite`` instead (:attr:`Spool.unmapped_reason` says why): as durable, and slower. An
append never touches the network and never raises on a full spool or a failed write: it
returns False and counts. An append that needs a new segment or more room takes the slow path
of ``_cap``. Files are created 0600 and the directory 0700: records are redacted, but
they are still operational detail.

Replay. On open, the spool takes stock of the segments a previous run left
(``_segments.take_stock``: counted, damage skipped and counted, finished segments deleted),
and checks them against the ledger of how many records each was given (``_ledger``):
records lost to damage are counted (``lost``) and reported, and the damaged segments kept, in
the quarantine (``_quarantine``), which ``agent-logging drain`` does not pass over. A
spool directory deleted while the spool is open is re-created (``_recreate``).

Costs, measured with ``timeit`` in a tmp dir on the development machine (ext4 on a virtual
disk, 2 shared and noisy cores, CPython 3.11, 300-byte records): ``append`` about 2.5 µs,
of which ``encode_frame`` is about 1 µs (a bare ``os.write`` would be another 1.2 µs); the read
side's costs are in ``_reading``, the fsync policies' in ``_sync``.
:meth:`Spool.pending_bytes` tells the shipper, without a lock, whether a full batch is waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from agent_logging.errors import SpoolError
from agent_logging.spool import _fork, _reading, _recreate, _stats, _sync
from agent_logging.spool._cap import create_segment, prepare, refresh_fast_limit, write_failed
from agent_logging.spool._fork import LIVE
from agent_logging.spool._framing import encode_frame
from agent_logging.spool._ledger import LEDGER_NAME
from agent_logging.spool._lock import lock_directory, owner_pid
from agent_logging.spool._options import FsyncPolicy, FullPolicy, SpoolOptions
from agent_logging.spool._reading import Batch
from agent_logging.spool._segments import (
    Segment,
    SpooledRecord,
    SpoolPosition,
    read_all,
    take_stock,
    unlink,
)
from agent_logging.spool._stats import SpoolStats
from agent_logging.spool._sync import fsync_active, fsync_directory, note_ledger

__all__ = [
    "Batch",
    "Spool",
    "SpoolPosition",
    "SpoolStats",
    "SpooledRecord",
    "read_all",
]


class Spool:
    """A durable, size-capped, append-only spool directory. Create it with :meth:`open`.

    ``append`` may be called from any thread; ``peek_batch``, ``ack`` and ``sync_if_due``
    from one shipper thread at a time.
    """

    def __init__(self, directory: Path, lock_fd: int, options: SpoolOptions) -> None:
        self.directory: Final = directory
        #: Set by :meth:`append` when the unacknowledged bytes reach :attr:`wake_bytes`.
        self.wake = threading.Event()
        #: Threshold for :attr:`wake`; settable at any time.
        self.wake_bytes = 1 << 20
        self._opt: Final = options
        self._fsync_always = options.fsync == "always"
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._read_lock = threading.Lock()
        self._lock_fd = lock_fd
        self._usable = False
        self._closed = False
        self._closed_why = "closed"
        self._segments: deque[Segment] = deque()
        self._head_offset = 0
        self._superseded: SpoolPosition | None = None
        self._rotate_due = False
        self._dir_dirty = False
        self._last_sync = _sync._now()  # through the module: tests replace the clock
        self._sealed_bytes = 0  # file sizes of all segments but the active one
        self._bytes = 0  # unacknowledged framed bytes, for the wake threshold
        # The hot path's one test: an append whose frame ends at or below this offset of the
        # active segment needs no rotation and fits under the cap (-1: take the slow path).
        self._fast_limit = -1
        self._appended = self._dropped = self._write_errors = 0
        self._torn = self._corrupt = self._bad_segments = 0
        self._lost = 0  # records lost to damage or to the deletion of spool files
        self._recreated = 0  # times the directory was found deleted and made again
        self._degraded = 0  # segments made smaller than segment_bytes: a full disk
        self._head_acked = 0  # records of the head segment acknowledged before _head_offset
        self._retry_at = 0.0  # no segment creation before this (monotonic): it failed
        self._ledger_at = 0.0  # when the ledger was written (``_sync`` clock)
        self._ledger_appended = -1  # ``_appended`` when it was
        try:
            next_seq = self._replay()
            # On a full disk a smaller segment, down to none that takes a record: the
            # service starts, and appends find room again once the disk has it.
            self._active, self._writer = create_segment(self, next_seq, options.segment_bytes, 0)
        except OSError as exc:
            os.close(lock_fd)
            raise SpoolError(f"cannot open spool {directory}: {exc}") from exc
        note_ledger(self)
        if options.fsync != "never":
            fsync_directory(self)
        if self._bytes >= self.wake_bytes:
            self.wake.set()
        self._usable = True
        refresh_fast_limit(self)
        LIVE.add(self)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int = 256 * 2**20,
        segment_bytes: int = 8 * 2**20,
        full_policy: FullPolicy = "drop_oldest",
        block_timeout_s: float = 0.05,
        fsync: FsyncPolicy = "batch",
        fsync_interval_s: float = 1.0,
    ) -> Spool:
        """Open (creating if needed) a spool directory and take stock of what it holds.

        Args:
            directory: the spool's directory; created 0700 if missing.
            max_bytes: cap on the sum of segment file sizes.
            segment_bytes: rotate to a new segment beyond this size; at most ``max_bytes / 2``.
            full_policy: ``drop_oldest``, ``drop_newest`` or ``block`` (see ``_cap``).
            block_timeout_s: how long ``block`` waits for room before dropping.
            fsync: ``batch``, ``interval``, ``always`` or ``never`` (see ``_sync``).
            fsync_interval_s: the period of the ``interval`` policy.

        Returns:
            The open spool, owning the directory until :meth:`close`.

        Raises:
            ConfigurationError: an option is invalid.
            SpoolError: another process (or another open in this one) holds the directory, or
                the directory cannot be created or read.
        """
        options = SpoolOptions.checked(
            max_bytes, segment_bytes, full_policy, block_timeout_s, fsync, fsync_interval_s
        )
        path = Path(directory)
        lock_fd = lock_directory(path)
        if lock_fd is None:
            raise SpoolError(f"spool {path} is in use by pid {owner_pid(path)}")
        return cls(path, lock_fd, options)

    @classmethod
    def try_open(
        cls,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int = 256 * 2**20,
        segment_bytes: int = 8 * 2**20,
        full_policy: FullPolicy = "drop_oldest",
        block_timeout_s: float = 0.05,
        fsync: FsyncPolicy = "batch",
        fsync_interval_s: float = 1.0,
    ) -> Spool | None:
        """Like :meth:`open` (same arguments), but return None when the directory is in use.

        Returns:
            The open spool, or None when another owner holds the directory's lock.

        Raises:
            ConfigurationError: an option is invalid.
            SpoolError: the directory cannot be created or read.
        """
        options = SpoolOptions.checked(
            max_bytes, segment_bytes, full_policy, block_timeout_s, fsync, fsync_interval_s
        )
        path = Path(directory)
        lock_fd = lock_directory(path)
        return None if lock_fd is None else cls(path, lock_fd, options)

    # -- writing (any thread) ------------------------------------------------------------

    def append(self, ts_ns: int, payload: bytes, key: int = 0) -> bool:
        """Store one record, durable against a kill of the process once this returns True.

        Never blocks on the network; blocks at most ``block_timeout_s`` under ``block``.

        Args:
            ts_ns: the record's timestamp (nanoseconds since the epoch), kept through resends.
            payload: the rendered line, UTF-8, without a newline.
            key: the record's stream key (``loki._record_encoder.stream_key``), 0 when it has none.

        Returns:
            True when stored; False when dropped (spool full or closed) or when the write
            failed, each counted in :meth:`stats` (``dropped``, ``write_errors``).

        Raises:
            ValueError: the payload exceeds 16 MiB or ``ts_ns`` or ``key`` is out of range: a
                caller bug (Loki's default line limit is 256 KB).
        """
        frame = encode_frame(ts_ns, payload, key)
        size = len(frame)
        with self._lock:
            active = self._active
            if active.size + size > self._fast_limit:
                if not prepare(self, size):
                    return False
                active = self._active
            writer = self._writer
            start = active.size
            mapping = writer.mapping
            try:
                if mapping is not None:
                    mapping[start : start + size] = frame
                else:  # a filesystem that cannot map the segment (``_writer``)
                    writer.write_unmapped(start, frame)
            except (ValueError, IndexError, OSError):  # a failed write, or a bug: counted
                write_failed(self)
                return False
            active.size = end = start + size
            active.records += 1
            active.written += 1
            active.bytes += size
            self._appended += 1
            if end > writer.release_at:
                writer.release_behind(end)
            before = self._bytes
            self._bytes = after = before + size
            if self._fsync_always:
                fsync_active(self)
            if before < self.wake_bytes <= after:
                self.wake.set()  # on the crossing only: Event.set takes a lock of its own
            return True

    # -- durability (``_sync``) ----------------------------------------------------

    def sync(self) -> None:
        """fsync every segment with unsynced bytes, and the directory after a rotation."""
        _sync.sync(self)

    def sync_if_due(self) -> bool:
        """Under the ``interval`` policy, :meth:`sync` when ``fsync_interval_s`` has passed.

        The shipper calls it between batches and while it backs off, under every policy:
        it also brings the ledger up to date (about once a second) and re-creates the spool
        directory if it was deleted (``_recreate``).

        Returns:
            True when a sync ran; always False under other policies.
        """
        with self._lock:
            if _recreate.recreate_if_deleted(self):
                refresh_fast_limit(self)
        return _sync.sync_if_due(self)

    # -- reading (one shipper thread; ``_reading``) --------------------------------

    def peek_batch(self, *, max_records: int = 10_000, max_bytes: int = 1 << 20) -> Batch | None:
        """The oldest unacknowledged records, without consuming them.

        Under the ``batch`` fsync policy, everything appended so far is fsynced first.

        Args:
            max_records: at most this many records.
            max_bytes: at most this many payload bytes; a single larger record comes alone.

        Returns:
            Records of one segment in order, or None when nothing is waiting.

        Raises:
            ValueError: a limit is below 1.
            SpoolError: the spool is closed, or the segment being written cannot be read.
        """
        return _reading.peek_batch(self, max_records, max_bytes)

    def ack(self, batch: Batch) -> None:
        """Acknowledge the batch from the last :meth:`peek_batch`: it reached Loki.

        Args:
            batch: the head batch. A batch whose segment ``drop_oldest`` deleted meanwhile is
                accepted and ignored.

        Raises:
            SpoolError: the batch is not the head (acks come in order, once each), or the
                spool is closed.
        """
        _reading.ack(self, batch)

    # -- state ---------------------------------------------------------------------------

    @property
    def fsync_policy(self) -> FsyncPolicy:
        """When the spool is fsynced: ``batch``, ``interval``, ``always`` or ``never``."""
        return self._opt.fsync

    @property
    def degraded_reason(self) -> str | None:
        """Why the active segment is smaller than ``segment_bytes`` (a disk too full for a
        whole one, ``_cap``); None when it is not."""
        capacity = self._writer.capacity
        if capacity >= self._opt.segment_bytes:
            return None
        if capacity == 0:
            return "the disk has no room for a segment: records are refused until it has"
        return (
            f"the disk has no room for a {self._opt.segment_bytes:,}-byte segment: "
            f"writing one of {capacity:,} bytes"
        )

    @property
    def unmapped_reason(self) -> str | None:
        """Why the active segment is written with ``pwrite`` instead of through a shared
        mapping (a filesystem that cannot map it, see ``_writer``); None when it is mapped."""
        return self._writer.unmapped_reason

    def pending_bytes(self) -> int:
        """Unacknowledged framed bytes: what :attr:`wake` compares with :attr:`wake_bytes`.

        Cheap (no lock, no I/O), for the shipper to decide whether a full batch waits.
        """
        return self._bytes

    def stats(self) -> SpoolStats:
        """A snapshot of the counters (see :class:`SpoolStats`).

        Returns:
            The counters; ``oldest_ts_ns`` is read from the oldest unacknowledged frame.
        """
        return _stats.snapshot(self)

    def _check_open(self) -> None:
        if not self._usable:
            raise SpoolError(f"spool {self.directory} is {self._closed_why}")

    def close(self) -> None:
        """Stop accepting records, fsync (unless ``never``) and release the directory.

        Idempotent; records appended after it starts are dropped and counted.
        """
        with self._read_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                self._usable = False
                self._fast_limit = -1
                self._room.notify_all()  # blocked appends give up now
            if self._opt.fsync != "never":
                self.sync()
            with self._lock:
                self._writer.seal(self._active.size)
                if self._active.size == 0:
                    self._segments.pop()
                    unlink(self._active.path)
                if self._segments:
                    note_ledger(self)
                else:  # nothing left: a spool that has no segment needs no ledger
                    unlink(self.directory / LEDGER_NAME)
            LIVE.discard(self)
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def after_fork_in_child(self) -> None:
        """In a forked child: close this process's copies of the fds, touch no file.

        The parent keeps the directory, its files and the flock (which belongs to the open
        file description the parent still holds); the child opens a spool of its own. Takes
        no lock (another thread may have held one at fork time); idempotent.
        """
        _fork.disown(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- replay --------------------------------------------------------------------------

    def _replay(self) -> int:
        """Take stock of a previous run's segments; return the next sequence number."""
        stock = take_stock(self.directory)
        self._segments.extend(stock.segments)
        self._head_offset = stock.head_offset
        self._sealed_bytes = sum(segment.size for segment in stock.segments)
        self._bytes = sum(segment.bytes for segment in stock.segments)
        self._head_acked = stock.head_acked
        self._torn, self._corrupt = stock.torn, stock.corrupt
        self._bad_segments = stock.bad_segments
        self._lost = stock.lost
        self._write_errors = stock.unlink_failures
        return stock.next_seq
