"""The durable local spool of DESIGN §5: record → spool → shipper thread → Loki.

A spool is one directory owned by one process at a time: a lock file, append-only segment
files and an ack file (the layout, replay and the reading of segment files are in
``_segments``, the directory's lock in ``_spool_lock``, the options and their checking in
``_spool_options``; this module holds the live spool's state).

Writing. :meth:`Spool.append` frames the record (header, CRC32, the record's own ``ts_ns`` and
its stream key, see ``_framing``) and copies it, under one lock, into a shared mapping of the
active segment file (``_writer``: preallocated, in the page cache, no system call, so the call
never releases the GIL), so a returned call survives a SIGKILL of the process; only power loss
needs the fsync policy. It never touches the network and never raises on a full spool or a
failed write: it returns False and counts. A new segment starts at every open (the previous
run's last segment may end in a torn frame, and nothing is ever appended after one) and
whenever the next frame would take the active segment past ``segment_bytes``; a frame larger
than that gets a segment of its own, sized for it. A segment that cannot be allocated (a full
disk) fails the rotation, counted, and the next append tries again. Sealed segments are cut
back to their content; up to one segment's preallocation is on disk beyond what the size cap
counts. Files are created 0600 and the directory 0700: records are redacted, but they are
still operational detail.

Reading and acknowledgement (at-least-once). One shipper thread calls :meth:`Spool.peek_batch`,
delivers the batch and calls :meth:`Spool.ack`. A peek never consumes: until its ack the same
records come back. The reader takes the active segment from its mapping (no system call: each
one can cost the shipper a switch interval while a logging thread keeps the GIL) and the sealed
ones with ``os.pread``, only up to the size the writer has committed (tracked in memory under
the lock), so it never sees half a frame of this process. A batch never spans two segments (it
keeps acks, counts and deletion per segment simple; with 8 MiB segments and 1 MiB batches the
cost is one short batch per segment). An ack rewrites ``acked`` (write to ``acked.tmp`` +
``os.replace``, no fsync: a lost ack file only means a resend, which Loki de-duplicates because
the entry keeps its timestamp and line) and deletes a segment once all of it is acknowledged,
never before. Memory holds at most one batch: segments are tracked as counts, and reads go
through a window of about ``max_bytes``.

Replay. On open, the spool takes stock of the segments a previous run left
(``_segments.take_stock``: counted, damage skipped and counted, finished segments deleted).

Size cap. ``max_bytes`` bounds the sum of segment file sizes (what fills a disk), so room is
freed a whole segment at a time; ``segment_bytes`` must be at most half of it. When a record
does not fit, ``full_policy`` decides:

- ``drop_oldest`` (default): delete the oldest segments until it fits; their unacknowledged
  records count as ``dropped``. This includes the segment of a batch in flight (during a long
  Loki outage the shipper always has one, and pinning it would keep hours-old records while
  dropping newer ones); acking that batch afterwards is accepted and does nothing. The active
  segment is never deleted: when it alone leaves no room the new record is dropped.
- ``drop_newest``: refuse the new record (``dropped``).
- ``block``: wait on a ``threading.Condition`` (no polling) up to ``block_timeout_s`` for an
  ack to free a segment, then drop the new record.

Costs, measured with ``timeit`` in a tmp dir on the development machine (ext4 on a virtual
disk, 2 shared and noisy cores, CPython 3.11, 300-byte records): ``append`` about 2.5 µs,
of which ``encode_frame`` is about 1 µs (a bare ``os.write`` would be another 1.2 µs).
``peek_batch`` + ``ack`` of 1 MiB batches, fsync included, cost about 4 µs per record on a
loaded machine (``python -m benchmarks.ship``'s breakdown; 6.6-11.5 µs before
the single-loop batch read of ``_segments.read_segment``). :meth:`Spool.pending_bytes` tells
the shipper, without a lock, whether a full batch is waiting.

fsync policy (``fsync``):

- ``batch`` (default): :meth:`Spool.peek_batch` fsyncs every segment with unsynced bytes before
  reading (one fsync per shipped batch, group commit), so power loss loses at most what was
  appended since the last peek. 1.4-2 ms per MiB appended (0.1-0.3 ms for a few KiB), paid by
  the shipper thread, outside the append lock.
- ``interval``: :meth:`Spool.sync_if_due` (the shipper calls it) fsyncs at most every
  ``fsync_interval_s``; same cost per call, fewer calls.
- ``always``: fsync inside ``append``, under the lock: 100-130 µs per record (30x), and every
  logging thread queues behind it.
- ``never``: the kernel writes back when it likes (about 30 s later); costs nothing.

A directory fsync follows segment creation (at open, and with the next sync after a rotation)
so a new segment's name survives power loss too; ``close()`` fsyncs unless ``never``.

Fork safety. Every open spool is registered (weakly) with ``os.register_at_fork``: in a forked
child :meth:`Spool.after_fork_in_child` closes the child's copies of the fds without touching
the files (no unlink, no unlock: the flock belongs to the open file description the parent
still holds) and makes the spool unusable there; the child opens its own spool.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from agent_logging._framing import HEADER_BYTES, encode_frame
from agent_logging._segments import (
    Segment,
    SpooledRecord,
    SpoolPosition,
    first_ts_ns,
    fsync_path,
    read_all,
    read_segment,
    segment_path,
    set_aside,
    take_stock,
    unlink,
    write_acked,
)
from agent_logging._spool_lock import lock_directory, owner_pid
from agent_logging._spool_options import FsyncPolicy, FullPolicy, SpoolOptions
from agent_logging._writer import SegmentWriter
from agent_logging.errors import SpoolError

__all__ = [
    "Batch",
    "Spool",
    "SpoolPosition",
    "SpoolStats",
    "SpooledRecord",
    "read_all",
]

#: The clock of the ``interval`` fsync policy; tests replace it.
_now = time.monotonic


@dataclass(frozen=True, slots=True)
class Batch:
    """Records returned by :meth:`Spool.peek_batch`, to pass back to :meth:`Spool.ack`.

    ``start`` and ``end`` delimit the batch in its segment; treat them as opaque.
    """

    records: tuple[SpooledRecord, ...]
    end: SpoolPosition
    start: SpoolPosition
    #: The records' payload bytes (-1: not counted yet, :meth:`Spool.ack` counts them).
    payload_bytes: int = -1


@dataclass(frozen=True, slots=True)
class SpoolStats:
    """A snapshot of the spool's counters.

    ``records``, ``bytes`` (framed) and ``oldest_ts_ns`` describe what is not acknowledged yet;
    ``disk_bytes`` is what the size cap measures; ``segments`` counts segment files.
    ``appended``, ``dropped`` and ``write_errors`` count since this open; ``torn``, ``corrupt``
    and ``bad_segments`` count damage found in replayed and current segments.
    """

    records: int
    bytes: int
    oldest_ts_ns: int | None
    appended: int
    dropped: int
    torn: int
    corrupt: int
    write_errors: int
    segments: int
    bad_segments: int
    disk_bytes: int


_LIVE: weakref.WeakSet[Spool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for spool in list(_LIVE):
        spool.after_fork_in_child()


# One hook for every spool (a per-spool hook could never be unregistered).
os.register_at_fork(after_in_child=_after_fork_in_child)


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
        self._last_sync = _now()
        self._sealed_bytes = 0  # file sizes of all segments but the active one
        self._bytes = 0  # unacknowledged framed bytes, for the wake threshold
        # The hot path's one test: an append whose frame ends at or below this offset of the
        # active segment needs no rotation and fits under the cap (-1: take the slow path).
        self._fast_limit = -1
        self._appended = self._dropped = self._write_errors = 0
        self._torn = self._corrupt = self._bad_segments = 0
        try:
            next_seq = self._replay()
            self._active, self._writer = self._create_segment(next_seq, options.segment_bytes)
        except OSError as exc:
            os.close(lock_fd)
            raise SpoolError(f"cannot open spool {directory}: {exc}") from exc
        if options.fsync != "never":
            self._fsync_directory()
        if self._bytes >= self.wake_bytes:
            self.wake.set()
        self._usable = True
        self._refresh_fast_limit()
        _LIVE.add(self)

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
            full_policy: ``drop_oldest``, ``drop_newest`` or ``block`` (see the module doc).
            block_timeout_s: how long ``block`` waits for room before dropping.
            fsync: ``batch``, ``interval``, ``always`` or ``never`` (see the module doc).
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
            key: the record's stream key (``_record_encoder.stream_key``), 0 when it has none.

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
                if not self._prepare(size):
                    return False
                active = self._active
            writer = self._writer
            start = active.size
            try:
                writer.mapping[start : start + size] = frame  # type: ignore[index]
            except (TypeError, ValueError, IndexError):  # closed under us: a bug, counted
                self._write_failed()
                return False
            active.size = end = start + size
            active.records += 1
            active.bytes += size
            self._appended += 1
            if end > writer.release_at:
                writer.release_behind(end)
            before = self._bytes
            self._bytes = after = before + size
            if self._fsync_always:
                self._fsync_active()
            if before < self.wake_bytes <= after:
                self.wake.set()  # on the crossing only: Event.set takes a lock of its own
            return True

    def _prepare(self, size: int) -> bool:
        """The slow path (lock held): apply the full policy, rotate; False when not stored."""
        if not self._usable or not self._make_room(size):
            self._dropped += 1
            return False
        active = self._active
        if (
            self._rotate_due
            or (active.size and active.size + size > self._opt.segment_bytes)
            or active.size + size > self._writer.capacity
        ):
            return self._rotate(size)
        return True

    def _make_room(self, size: int) -> bool:
        """Apply the full policy (lock held); True when ``size`` more bytes fit."""
        cap = self._opt.max_bytes - size
        policy = self._opt.full_policy
        if policy == "drop_oldest":
            while self._disk_bytes() > cap and len(self._segments) > 1:
                self._drop_head_segment()
        elif policy == "block":
            deadline = time.monotonic() + self._opt.block_timeout_s
            while self._disk_bytes() > cap and self._usable:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._room.wait(remaining)  # an ack or close notifies
        return self._usable and self._disk_bytes() <= cap

    def _disk_bytes(self) -> int:
        return self._sealed_bytes + self._active.size

    def _refresh_fast_limit(self) -> None:
        """Recompute the fast path's bound (lock held) after anything it depends on changed."""
        if not self._usable or self._rotate_due:
            self._fast_limit = -1
        else:
            room = self._opt.max_bytes - self._sealed_bytes
            # A segment's mapping is never smaller than segment_bytes: what passes fits it.
            self._fast_limit = min(self._opt.segment_bytes, room)

    def _drop_head_segment(self) -> None:
        segment = self._segments[0]
        if self._superseded is None:  # where the batch in flight, if any, starts
            self._superseded = SpoolPosition(segment.seq, self._head_offset)
        self._dropped += segment.records
        self._remove_head()
        if not unlink(segment.path):
            self._write_errors += 1

    def _remove_head(self) -> None:
        """Forget the oldest segment (lock held); the caller deletes its file."""
        segment = self._segments.popleft()  # never the active one: that is the newest
        self._sealed_bytes -= segment.size
        self._bytes -= segment.bytes
        self._head_offset = 0
        self._refresh_fast_limit()
        self._room.notify_all()

    def _rotate(self, size: int) -> bool:
        """Seal the active segment and start the next, with room for a ``size``-byte frame."""
        old = self._active
        try:
            self._active, writer = self._create_segment(
                old.seq + 1, max(self._opt.segment_bytes, size)
            )
        except OSError:
            self._write_errors += 1
            self._rotate_due = True
            self._refresh_fast_limit()
            return False
        self._writer.seal(old.size)
        self._writer = writer
        self._rotate_due = False
        if old.size == 0 and self._segments[0] is not old:
            self._segments.remove(old)  # nothing in it, and not the reader's: delete it now
            unlink(old.path)
        else:
            self._sealed_bytes += old.size
        self._refresh_fast_limit()
        if self._fsync_always:
            self._fsync_directory()
        else:
            self._dir_dirty = True
        return True

    def _create_segment(self, seq: int, capacity: int) -> tuple[Segment, SegmentWriter]:
        """A new segment of ``capacity`` bytes, allocated on disk and mapped (lock held)."""
        segment = Segment(seq, segment_path(self.directory, seq))
        writer = SegmentWriter(segment.path, capacity)
        self._segments.append(segment)
        return segment, writer

    def _write_failed(self) -> None:
        self._write_errors += 1
        self._rotate_due = True
        self._refresh_fast_limit()

    def _fsync_active(self) -> None:
        try:
            os.fsync(self._writer.fd)
        except OSError:
            self._write_errors += 1
        else:
            self._active.synced = self._active.size

    def _fsync_directory(self) -> None:
        """fsync the directory, so new and deleted names survive power loss (lock held)."""
        if not fsync_path(self.directory):
            self._write_errors += 1

    # -- durability ----------------------------------------------------------------------

    def sync(self) -> None:
        """fsync every segment with unsynced bytes, and the directory after a rotation."""
        with self._lock:
            pending = [(s, s.size) for s in self._segments if s.synced < s.size]
            fd = self._writer.fd
            active_fd = os.dup(fd) if fd >= 0 and self._active.synced < self._active.size else -1
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            self._last_sync = _now()
        try:
            for segment, size in pending:
                self._fsync_segment(segment, size, active_fd)
        finally:
            if active_fd >= 0:
                os.close(active_fd)
        if dir_dirty and not fsync_path(self.directory):
            with self._lock:
                self._write_errors += 1

    def _fsync_segment(self, segment: Segment, size: int, active_fd: int) -> None:
        # Outside the append lock: an fsync takes milliseconds, an append a microsecond.
        if segment is self._active and active_fd >= 0:
            try:
                os.fsync(active_fd)  # a dup of the writer's fd: a rotation cannot close it
                synced = True
            except OSError:
                synced = False
        else:
            synced = fsync_path(segment.path)  # a deleted segment needs no sync: True
        with self._lock:
            if synced:
                segment.synced = max(segment.synced, size)
            else:
                self._write_errors += 1

    def sync_if_due(self) -> bool:
        """Under the ``interval`` policy, :meth:`sync` when ``fsync_interval_s`` has passed.

        Returns:
            True when a sync ran; always False under other policies.
        """
        if self._opt.fsync != "interval" or _now() - self._last_sync < self._opt.fsync_interval_s:
            return False
        self.sync()
        return True

    # -- reading (one shipper thread) ----------------------------------------------------

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
        if max_records < 1 or max_bytes < 1:
            raise ValueError(f"limits must be >= 1, not {max_records=} {max_bytes=}")
        window_bytes = max(1 << 16, min(max_bytes, 1 << 22))
        with self._read_lock:
            if self._opt.fsync == "batch":
                with self._lock:
                    self._check_open()
                self.sync()
            while True:
                with self._lock:
                    self._check_open()
                    self._superseded = None
                    segment = self._segments[0]
                    start = SpoolPosition(segment.seq, self._head_offset)
                    limit, checked, sealed = (
                        segment.size,
                        segment.checked,
                        segment is not self._active,
                    )
                    mapping = None if sealed else self._writer.mapping
                try:
                    records, end, payload_bytes, torn, corrupt = read_segment(
                        segment.path,
                        start.offset,
                        limit,
                        checked,
                        max_records,
                        max_bytes,
                        window_bytes,
                        mapping,
                    )
                except OSError as exc:
                    self._read_failed(segment, start, sealed, exc)
                    continue
                with self._lock:
                    if self._segments[0] is not segment or self._head_offset != start.offset:
                        continue  # drop_oldest moved the head while we read: read the new one
                    self._torn += torn
                    self._corrupt += corrupt
                    segment.checked = max(checked, end)
                    if records:
                        return Batch(
                            tuple(records), SpoolPosition(segment.seq, end), start, payload_bytes
                        )
                    self._head_offset = end  # [start, end) held only damage: skip it for good
                    if segment.size != limit or sealed != (segment is not self._active):
                        continue  # it grew or was sealed while we read
                    if not sealed:
                        return None
                    self._remove_head()  # sealed with nothing left to ship: finish it
                    head = SpoolPosition(self._segments[0].seq, 0)
                self._write_acked(head)
                self._unlink_counted(segment.path)

    def _read_failed(
        self, segment: Segment, start: SpoolPosition, sealed: bool, exc: OSError
    ) -> None:
        with self._lock:
            if self._segments[0] is not segment or self._head_offset != start.offset:
                return  # dropped while we read it: the next round reads the new head
            if not sealed:  # rotate, so that next time it is a sealed one to set aside
                self._rotate_due = True
                self._refresh_fast_limit()
                raise SpoolError(f"cannot read spool segment {segment.path}: {exc}") from exc
            # A sealed segment that cannot be read: set it aside, count its records as lost.
            self._dropped += segment.records
            self._bad_segments += 1
            self._remove_head()
        set_aside(segment.path)

    def ack(self, batch: Batch) -> None:
        """Acknowledge the batch from the last :meth:`peek_batch`: it reached Loki.

        Args:
            batch: the head batch. A batch whose segment ``drop_oldest`` deleted meanwhile is
                accepted and ignored.

        Raises:
            SpoolError: the batch is not the head (acks come in order, once each), or the
                spool is closed.
        """
        with self._read_lock:
            with self._lock:
                self._check_open()
                segment = self._segments[0]
                head = SpoolPosition(segment.seq, self._head_offset)
                if batch.start != head:
                    if batch.start == self._superseded:
                        return
                    raise SpoolError(
                        f"ack out of order: the batch starts at {tuple(batch.start)}, "
                        f"the oldest unacknowledged record is at {tuple(head)}"
                    )
                count = len(batch.records)
                payload_bytes = batch.payload_bytes
                if payload_bytes < 0:
                    payload_bytes = sum(len(r.payload) for r in batch.records)
                framed = count * HEADER_BYTES + payload_bytes
                segment.records -= count
                segment.bytes -= framed
                self._bytes -= framed
                finished = segment is not self._active and batch.end.offset >= segment.size
                if finished:
                    self._remove_head()
                else:
                    self._head_offset = batch.end.offset
                position = SpoolPosition(self._segments[0].seq, self._head_offset)
            # The ack file first: a crash before the unlink leaves a segment that replay
            # recognises as acknowledged (its sequence is below the ack's).
            self._write_acked(position)
            if finished:
                self._unlink_counted(segment.path)

    def _write_acked(self, position: SpoolPosition) -> None:
        try:
            write_acked(self.directory, position)
        except OSError:
            with self._lock:
                self._write_errors += 1

    def _unlink_counted(self, path: Path) -> None:
        """Delete a file, counting a failure as a write error (lock not held)."""
        if not unlink(path):
            with self._lock:
                self._write_errors += 1

    # -- state ---------------------------------------------------------------------------

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
        with self._lock:
            candidates = [
                (s.path, self._head_offset if i == 0 else 0, s.size)
                for i, s in enumerate(self._segments)
                if s.records > 0
            ]
            stats = SpoolStats(
                records=sum(s.records for s in self._segments),
                bytes=self._bytes,
                oldest_ts_ns=None,
                appended=self._appended,
                dropped=self._dropped,
                torn=self._torn,
                corrupt=self._corrupt,
                write_errors=self._write_errors,
                segments=len(self._segments),
                bad_segments=self._bad_segments,
                disk_bytes=self._disk_bytes(),
            )
        for path, start, size in candidates:
            ts_ns = first_ts_ns(path, start, size)
            if ts_ns is not None:
                return dataclasses.replace(stats, oldest_ts_ns=ts_ns)
        return stats

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
            _LIVE.discard(self)
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
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._read_lock = threading.Lock()
        self.wake = threading.Event()
        self._writer.forget()  # this process's mapping and fd; the file and the parent's stay
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
        self._lock_fd = -1
        self._usable = False
        self._fast_limit = -1
        self._closed = True  # close() in the child must neither unlock nor unlink
        self._closed_why = "closed in this process: it belongs to the parent of a fork"
        _LIVE.discard(self)

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
        self._torn, self._corrupt = stock.torn, stock.corrupt
        self._bad_segments = stock.bad_segments
        self._write_errors = stock.unlink_failures
        return stock.next_seq
