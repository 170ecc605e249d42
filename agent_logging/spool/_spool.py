"""The durable local spool of DESIGN §5: record → spool → shipper thread → Loki.

A spool is one directory owned by one process at a time: a lock file, append-only segment
files, an ack file and a ledger. :class:`Spool` is the open spool, whole: its state and every
part of its behaviour that reads or changes that state (the write path, rotation and the size
cap, the fsync policy, the read side for a shipper thread and for a shipper process, the
counters, a directory deleted under it, fork safety), under its locks. Beside it, each a
concept that needs no open spool: the frame format (``_framing``); the active segment's file
and the mapping appends copy into (``_writer``); the segment files, their layout and replay
(``_segments``); a batch and reading one from a segment (``_batches``); the directory's lock
(``_lock``); the ledger (``_ledger``); the quarantine (``_quarantine``); the options and their
checking (``_options``); the counters' snapshot (``_stats``); and the messages of a shipper in
another process (``_remote``), which only call the methods here.

Writing. :meth:`Spool.append` frames the record (header, CRC32, the record's own ``ts_ns`` and
its stream key, see ``_framing``) and copies it, under one lock, into a shared mapping of the
active segment file (``_writer``: preallocated, in the page cache, no system call, so the call
never releases the GIL), so a returned call survives a SIGKILL of the process; only power loss
needs the fsync policy. On a filesystem that cannot map the file, each frame is written with
one ``pwrite`` instead (:attr:`Spool.unmapped_reason` says why): as durable, and slower. An
append never touches the network and never raises on a full spool or a failed write: it
returns False and counts. Files are created 0600 and the directory 0700: records are redacted,
but they are still operational detail.

The slow path: rotation and the size cap. An append tests one bound (``_fast_limit``, kept by
``_refresh_fast_limit``): a frame ending at or below it needs no rotation and fits under the
cap. Any other append takes the slow path (``_prepare``), with the lock held, as does whatever
changes what that bound depends on.

- Rotation. A new segment starts at every open (the previous run's last segment may end in a
  torn frame, and nothing is ever appended after one) and whenever the next frame would take
  the active segment past ``segment_bytes``; a frame larger than that gets a segment of its
  own, sized for it. A segment that cannot be allocated (a full disk) fails the rotation,
  counted, and the next append tries again (no sooner than ``_RETRY_S`` after: every append of
  a flat-out logger would otherwise create, allocate and delete a file; the appends refused
  meanwhile count as ``write_errors``). A disk with room for less than a whole segment gets a
  smaller one (``_create_segment``, counted as ``degraded``), so that a nearly full disk, at
  start-up too, still takes records; the next rotation asks for a whole segment again. Sealed
  segments are cut back to their content; up to one segment's preallocation is on disk beyond
  what the size cap counts.
- Size cap. ``max_bytes`` bounds the sum of segment file sizes (what fills a disk), so room is
  freed a whole segment at a time; ``segment_bytes`` must be at most half of it. When a record
  does not fit, ``full_policy`` decides: ``drop_oldest`` (default) deletes the oldest segments
  until it fits, their unacknowledged records counted as ``dropped``. This includes the segment
  of a batch in flight (during a long Loki outage the shipper always has one, and pinning it
  would keep hours-old records while dropping newer ones); acking that batch afterwards is
  accepted and does nothing. The active segment is never deleted: when it alone leaves no room
  the new record is dropped. ``drop_newest`` refuses the new record (``dropped``). ``block``
  waits on a ``threading.Condition`` (no polling) up to ``block_timeout_s`` for an ack to free
  a segment, then drops the new record.

Durability: the fsync policy (``fsync``). An append survives a SIGKILL of the process as soon
as it returns; only power loss needs an fsync. The append path fsyncs with the lock held,
:meth:`Spool.sync` and :meth:`Spool.sync_if_due` without it (an fsync takes milliseconds, an
append a microsecond).

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
so a new segment's name survives power loss too; ``close()`` fsyncs unless ``never``. The
ledger (``_ledger``: how many records each segment was given) is written at every segment's
creation, before a dropped segment's file is deleted (so that it never names a segment the
spool deleted itself), after the fsyncs of every :meth:`Spool.sync`, and by
:meth:`Spool.sync_if_due` under every policy at most every ``REFRESH_S``: the shipper calls it
however long Loki is down, so the ledger of a spool that cannot ship lags its appends by about
a second.

Reading. One shipper thread calls :meth:`Spool.peek_batch`, delivers the batch and calls
:meth:`Spool.ack`, under the read lock and, for the bookkeeping, the append lock. A peek never
consumes: until its ack the same records come back. The reader takes the active segment from
its mapping (no system call: each one can cost the shipper a switch interval while a logging
thread keeps the GIL) and the sealed ones with ``os.pread``, only up to the size the writer has
committed (tracked in memory under the lock), so it never sees half a frame of this process
(``_batches.read_segment``). A batch never spans two segments (it keeps acks, counts and
deletion per segment simple; with 8 MiB segments and 1 MiB batches the cost is one short batch
per segment). An ack rewrites ``acked`` (write to ``acked.tmp`` + ``os.replace``, no fsync:
after a power loss an older ack file means a resend, which Loki does not always de-duplicate;
after a kill of the process it is intact, and only the batch in flight is in doubt, reconciled
with Loki before anything of it is pushed again, ``shipping._reconcile``; it also says how many
records of the head segment were acknowledged, for replay's check against the ledger) and
deletes a segment once all of it is acknowledged, never before. A segment finished with records
that were never read (damage found while reading skipped them) lost those records: it is
reported and kept in the quarantine instead (``_finish``, ``_quarantine``), as is one that
cannot be read. Memory holds at most one batch: segments are tracked as counts, and reads go
through a window of about ``max_bytes``.

A shipper in another process (``shipping._process``) reads the segment files itself
(``_batches.read_segment``, with ``pread``: the owner's mapping is its own), but the spool's
state stays here. Per batch, it asks for a ``ReadPlan`` (:meth:`Spool.plan_read`: where the
oldest unacknowledged record is, and how far the writer has committed), reads and delivers,
then reports the outcome (:meth:`Spool.report_read`): the records acknowledged, with the damage
its read found, or a range that held damage only, to skip. Between a plan and its report the
head may move (``drop_oldest``); a report that no longer starts at the head is then ignored, as
an ack of a superseded batch is. Damage is counted at the report, once, however often a failed
delivery made the shipper read the same range again. One shipper process reads a spool at a
time, and nothing else reads it meanwhile; each call takes the read lock, as a peek or an ack
does.

Counters. :meth:`Spool.stats` reads them under the append lock, then the oldest unacknowledged
timestamp from its frame outside it (``_segments.first_ts_ns``: one small read, and a segment
acknowledged and deleted meanwhile is skipped), so a snapshot never holds up a logging thread
for a read from disk.

Replay. On open, the spool takes stock of the segments a previous run left
(``_segments.take_stock``: counted, damage skipped and counted, finished segments deleted),
and checks them against the ledger of how many records each was given (``_ledger``):
records lost to damage are counted (``lost``) and reported, and the damaged segments kept, in
the quarantine (``_quarantine``), which ``agent-logging drain`` does not pass over.

A directory deleted while the spool is open (an operator's ``rm -rf``, a clean-up script, a
reimage tool run too early). Appends would go on succeeding into a mapping of a file that no
longer has a name, the next rotation would fail (no directory to create a segment in), and
from then on every record would be refused until the process restarts. Instead
``_recreate_if_deleted`` runs at every rotation (before the new segment is created) and from
:meth:`Spool.sync_if_due`, which the shipper calls between batches and while it backs off: one
``fstat`` of the active segment, whose link count is 0 once its name is gone. Then, under the
lock (as ``drop_oldest`` deletes a segment: a read in progress finds its segment gone), it
makes the directory and its lock again, writes what the active segment holds (still readable
through the descriptor) into a new file of the same name, so positions, the batch in flight and
its ack stay valid, and forgets the sealed segments: their files are gone, and their
unacknowledged records are counted (``lost``, ``recreated``) and reported in the new
directory's quarantine, so ``agent-logging drain`` does not pass over them. Records appended
between the deletion and this check are kept: they were in the active segment. The ack file and
the ledger are written again; the dead-letter files are gone.

Fork safety: a forked child never writes, unlocks or deletes its parent's files. Every open
spool is registered (weakly) in ``_LIVE``, and one ``os.register_at_fork`` hook for all of
them (a per-spool hook could never be unregistered) calls :meth:`Spool.after_fork_in_child` in
a forked child: it closes the child's copies of the fds without touching the files (no unlink,
no unlock: the flock belongs to the open file description the parent still holds) and makes
the spool unusable there; the child opens its own spool.

Costs, measured with ``timeit`` in a tmp dir on the development machine (ext4 on a virtual
disk, 2 shared and noisy cores, CPython 3.11, 300-byte records): ``append`` about 2.5 µs,
of which ``encode_frame`` is about 1 µs (a bare ``os.write`` would be another 1.2 µs);
``peek_batch`` + ``ack`` of 1 MiB batches, fsync included, about 4 µs per record on a loaded
machine (``python -m benchmarks.ship``'s breakdown; 6.6-11.5 µs before the single-loop batch
read of ``_batches.read_segment``); the fsync policies' costs are above.
:meth:`Spool.pending_bytes` tells the shipper, without a lock, whether a full batch is waiting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from agent_logging.errors import SpoolError
from agent_logging.spool._batches import Batch, ReadPlan, read_segment
from agent_logging.spool._framing import HEADER_BYTES, encode_frame
from agent_logging.spool._ledger import LEDGER_NAME, REFRESH_S, write_ledger
from agent_logging.spool._lock import lock_directory, owner_pid
from agent_logging.spool._options import FsyncPolicy, FullPolicy, SpoolOptions
from agent_logging.spool._quarantine import damage_regions, report_loss
from agent_logging.spool._segments import (
    OPEN_READ,
    Segment,
    SpooledRecord,
    SpoolPosition,
    first_ts_ns,
    fsync_path,
    pread_reader,
    read_all,
    retire,
    segment_path,
    take_stock,
    unlink,
    write_acked,
)
from agent_logging.spool._stats import SpoolStats
from agent_logging.spool._writer import SegmentWriter

__all__ = [
    "Batch",
    "Spool",
    "SpoolPosition",
    "SpoolStats",
    "SpooledRecord",
    "read_all",
]

#: After a segment could not be created, appends that need one wait this long to try again.
_RETRY_S: Final = 0.5
#: The smallest segment a full disk is asked for, unless the frame needs more.
_SMALLEST_BYTES: Final = 64 * 1024
_NO_SPACE: Final = frozenset({errno.ENOSPC, errno.EDQUOT})

#: The clock of the ``interval`` fsync policy and of the ledger's refresh; tests replace it
#: (every reading goes through this module's global, the spool's first one too).
_now = time.monotonic


class Spool:
    """A durable, size-capped, append-only spool directory. Create it with :meth:`open`.

    ``append`` may be called from any thread; ``peek_batch``, ``ack`` and ``sync_if_due``
    from one shipper thread at a time (or ``plan_read``, ``plan_read_after``, ``report_read``
    and ``read_failed`` for a shipper in another process).
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
        self._lost = 0  # records lost to damage or to the deletion of spool files
        self._recreated = 0  # times the directory was found deleted and made again
        self._degraded = 0  # segments made smaller than segment_bytes: a full disk
        self._head_acked = 0  # records of the head segment acknowledged before _head_offset
        self._retry_at = 0.0  # no segment creation before this (monotonic): it failed
        self._ledger_at = 0.0  # when the ledger was written (``_now`` clock)
        self._ledger_appended = -1  # ``_appended`` when it was
        try:
            next_seq = self._replay()
            # On a full disk a smaller segment, down to none that takes a record: the
            # service starts, and appends find room again once the disk has it.
            self._active, self._writer = self._create_segment(next_seq, options.segment_bytes, 0)
        except OSError as exc:
            os.close(lock_fd)
            raise SpoolError(f"cannot open spool {directory}: {exc}") from exc
        self._note_ledger()
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
                if not self._prepare(size):
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
                self._write_failed()
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
                self._fsync_active()
            if before < self.wake_bytes <= after:
                self.wake.set()  # on the crossing only: Event.set takes a lock of its own
            return True

    # -- the slow path: the full policy, rotation (lock held) ---------------------------

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
            if time.monotonic() < self._retry_at:
                self._write_errors += 1  # the last try failed a moment ago: lost, counted
                return False
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
        """The sum of segment file sizes: what the cap measures (lock held)."""
        return self._sealed_bytes + self._active.size

    def _refresh_fast_limit(self) -> None:
        """Recompute the fast path's bound (lock held) after anything it depends on changed."""
        if not self._usable or self._rotate_due:
            self._fast_limit = -1
        else:
            room = self._opt.max_bytes - self._sealed_bytes
            # What passes must fit the active segment: segment_bytes, or less on a full disk.
            self._fast_limit = min(self._opt.segment_bytes, self._writer.capacity, room)

    def _drop_head_segment(self) -> None:
        segment = self._segments[0]
        if self._superseded is None:  # where the batch in flight, if any, starts
            self._superseded = SpoolPosition(segment.seq, self._head_offset)
        self._dropped += segment.records
        self._remove_head()
        self._note_ledger()  # first: a ledger naming a segment that is gone reports a loss
        if not retire(self.directory, segment):
            self._write_errors += 1

    def _remove_head(self) -> None:
        """Forget the oldest segment (lock held); the caller deletes its file."""
        segment = self._segments.popleft()  # never the active one: that is the newest
        self._sealed_bytes -= segment.size
        self._bytes -= segment.bytes
        self._head_offset = 0
        self._head_acked = 0
        self._refresh_fast_limit()
        self._room.notify_all()

    def _rotate(self, size: int) -> bool:
        """Seal the active segment and start the next, with room for a ``size``-byte frame."""
        self._recreate_if_deleted()  # a directory deleted under the spool: made again first
        old = self._active
        try:
            self._active, writer = self._create_segment(
                old.seq + 1, max(self._opt.segment_bytes, size), size
            )
        except OSError:
            self._write_errors += 1
            self._rotate_due = True
            self._retry_at = time.monotonic() + _RETRY_S
            self._refresh_fast_limit()
            return False
        self._writer.seal(old.size)
        self._writer = writer
        self._rotate_due = False
        if old.size == 0 and self._segments[0] is not old:
            self._segments.remove(old)  # nothing in it, and not the reader's: delete it now
            retire(self.directory, old)
        else:
            self._sealed_bytes += old.size
        self._note_ledger()
        self._refresh_fast_limit()
        if self._fsync_always:
            self._fsync_directory()
        else:
            self._dir_dirty = True
        return True

    def _create_segment(
        self, seq: int, capacity: int, needed: int
    ) -> tuple[Segment, SegmentWriter]:
        """A new segment of ``capacity`` bytes, allocated on disk and mapped (lock held).

        On a disk without room for it, a quarter of the size is tried, and so on down to
        ``needed`` (the frame it is for) or ``_SMALLEST_BYTES``, whichever is larger; each
        smaller segment counts as ``degraded``. With ``needed`` 0 (at open) a disk without room
        even for that gets a segment of no capacity (``_writer``): the spool opens, refuses
        records until a rotation finds room, and counts them as ``write_errors``.

        Raises:
            OSError: the segment cannot be created (or allocated for ``needed`` bytes).
        """
        segment = Segment(seq, segment_path(self.directory, seq))
        size = capacity
        while True:
            try:
                writer = SegmentWriter(segment.path, size)
                break
            except OSError as exc:
                floor = max(needed, _SMALLEST_BYTES)
                if exc.errno not in _NO_SPACE or (size <= floor and needed):
                    raise
                size = 0 if size <= floor else max(size // 4, floor)
        if size < capacity:
            self._degraded += 1
        self._segments.append(segment)
        return segment, writer

    def _write_failed(self) -> None:
        """Count a failed copy into the active segment; rotate at the next append (lock held)."""
        self._write_errors += 1
        self._rotate_due = True
        self._refresh_fast_limit()

    # -- durability: the fsync policy and the ledger -------------------------------------

    def sync(self) -> None:
        """fsync every segment with unsynced bytes, and the directory after a rotation, then
        bring the ledger up to date with what was synced (lock not held)."""
        with self._lock:
            pending = [(s, s.size) for s in self._segments if s.synced < s.size]
            fd = self._writer.fd
            active = self._active
            active_fd = os.dup(fd) if fd >= 0 and active.synced < active.size else -1
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
        with self._lock:
            if self._usable:
                self._note_ledger()

    def sync_if_due(self) -> bool:
        """Under the ``interval`` policy, :meth:`sync` when ``fsync_interval_s`` has passed.

        The shipper calls it between batches and while it backs off, under every policy:
        it also brings the ledger up to date (about once a second) and re-creates the spool
        directory if it was deleted.

        Returns:
            True when a sync ran; always False under other policies.
        """
        with self._lock:
            if self._recreate_if_deleted():
                self._refresh_fast_limit()
        if self._opt.fsync != "interval" or _now() - self._last_sync < self._opt.fsync_interval_s:
            if _now() - self._ledger_at >= REFRESH_S:
                with self._lock:
                    if self._usable and self._appended != self._ledger_appended:
                        self._note_ledger()
            return False
        self.sync()
        return True

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

    def _fsync_active(self) -> None:
        """fsync the active segment after an append under ``always`` (lock held)."""
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

    def _note_ledger(self) -> None:
        """Write the ledger from the spool's segments (lock held): a few microseconds."""
        self._ledger_at = _now()
        self._ledger_appended = self._appended
        if not write_ledger(self.directory, [(s.seq, s.written) for s in self._segments]):
            self._write_errors += 1

    # -- reading: one shipper thread -----------------------------------------------------

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
                self._write_acked(head, 0)
                self._finish(segment)

    def ack(self, batch: Batch) -> None:
        """Acknowledge the batch from the last :meth:`peek_batch`: it reached Loki.

        Args:
            batch: the head batch. A batch whose segment ``drop_oldest`` deleted meanwhile is
                accepted and ignored.

        Raises:
            SpoolError: the batch is not the head (acks come in order, once each), or the
                spool is closed.
        """
        payload_bytes = batch.payload_bytes
        if payload_bytes < 0:
            payload_bytes = sum(len(r.payload) for r in batch.records)
        with self._read_lock:
            self._ack_range(batch.start, batch.end, len(batch.records), payload_bytes)

    # -- reading: a shipper in another process ---------------------------------------------

    def plan_read(self) -> ReadPlan | None:
        """Where the oldest unacknowledged records are; None when there are none.

        A sealed segment with nothing left in it is finished on the way (deleted). Unlike a
        peek, a plan does not fsync under the ``batch`` policy: the owner does that beside the
        read, so that the shipper does not wait for the disk (``shipping._process``).

        Raises:
            SpoolError: the spool is closed.
        """
        with self._read_lock:
            while True:
                with self._lock:
                    self._check_open()
                    self._superseded = None
                    segment = self._segments[0]
                    sealed = segment is not self._active
                    if self._head_offset < segment.size:
                        return ReadPlan(
                            segment.seq,
                            str(segment.path),
                            self._head_offset,
                            segment.size,
                            segment.checked,
                            sealed,
                        )
                    if not sealed:
                        return None
                    self._remove_head()
                    head = SpoolPosition(self._segments[0].seq, 0)
                self._write_acked(head, 0)
                self._finish(segment)

    def plan_read_after(self, after: SpoolPosition) -> ReadPlan | None:
        """Where the records after ``after`` are (a read-ahead while the batch that ends there
        is in flight); None when there are none yet, or ``after`` is no longer in the spool.

        Nothing changes: a sealed segment ``after`` ends is finished by the report of its last
        batch.

        Raises:
            SpoolError: the spool is closed.
        """
        with self._lock:
            self._check_open()
            segments = self._segments
            index = next((i for i, s in enumerate(segments) if s.seq == after.segment), None)
            if index is None:
                return None  # dropped: the shipper reads from the head instead
            segment, offset = segments[index], after.offset
            if offset >= segment.size:
                if segment is self._active or index + 1 >= len(segments):
                    return None
                segment, offset = segments[index + 1], 0
                if offset >= segment.size:
                    return None
            sealed = segment is not self._active
            return ReadPlan(
                segment.seq, str(segment.path), offset, segment.size, segment.checked, sealed
            )

    def report_read(
        self,
        start: SpoolPosition,
        end: int,
        count: int,
        payload_bytes: int,
        torn: int,
        corrupt: int,
    ) -> bool:
        """The outcome of a read from ``start`` to ``end`` (an offset in the same segment).

        ``count`` records (``payload_bytes`` of payload) were delivered: they are acknowledged.
        With ``count`` 0 the range held damage only: the head moves past it. ``torn`` and
        ``corrupt`` are the damage the read found at or after the plan's ``checked``.

        Returns:
            False when ``start`` is no longer the head (dropped meanwhile): nothing was done.

        Raises:
            SpoolError: the spool is closed.
        """
        with self._read_lock:
            with self._lock:
                self._check_open()
                segment = self._segments[0]
                if SpoolPosition(segment.seq, self._head_offset) != start:
                    return False
                self._torn += torn
                self._corrupt += corrupt
                segment.checked = max(segment.checked, end)
                if not count:
                    self._head_offset = end
                    return True
            return self._ack_range(start, SpoolPosition(start.segment, end), count, payload_bytes)

    def read_failed(self, start: SpoolPosition, sealed: bool, reason: str) -> None:
        """The shipper process could not read the plan's segment: as ``peek_batch`` handles it.

        A sealed segment is set aside and its records counted as lost; the active one is
        rotated, so that next time it is a sealed one.

        Raises:
            SpoolError: the active segment cannot be read (after scheduling its rotation).
        """
        with self._read_lock:
            with self._lock:
                segment = self._segments[0]
            if segment.seq == start.segment:
                self._read_failed(segment, start, sealed, OSError(reason))

    # -- reading: the bookkeeping both shippers share (read lock held) ---------------------

    def _read_failed(
        self, segment: Segment, start: SpoolPosition, sealed: bool, exc: OSError
    ) -> None:
        with self._lock:
            if self._recreate_if_deleted():  # the whole directory went: counted there
                self._refresh_fast_limit()
                return
            if self._segments[0] is not segment or self._head_offset != start.offset:
                return  # dropped while we read it: the next round reads the new head
            if not sealed:  # rotate, so that next time it is a sealed one to set aside
                self._rotate_due = True
                self._refresh_fast_limit()
                raise SpoolError(f"cannot read spool segment {segment.path}: {exc}") from exc
            # A sealed segment that cannot be read: its records are lost; keep it for autopsy.
            self._bad_segments += 1
            self._remove_head()
        self._finish(segment, f"the segment cannot be read: {exc}")

    def _ack_range(
        self, start: SpoolPosition, end: SpoolPosition, count: int, payload_bytes: int
    ) -> bool:
        """Acknowledge the ``count`` records (``payload_bytes`` of payload) in ``[start, end)``.

        The read lock is held by the caller. Returns False when the range was superseded (the
        head it started at was dropped meanwhile): nothing to do.

        Raises:
            SpoolError: the spool is closed, or ``start`` is not the oldest unacknowledged
                record.
        """
        with self._lock:
            self._check_open()
            segment = self._segments[0]
            head = SpoolPosition(segment.seq, self._head_offset)
            if start != head:
                if start == self._superseded:
                    return False
                raise SpoolError(
                    f"ack out of order: the batch starts at {tuple(start)}, "
                    f"the oldest unacknowledged record is at {tuple(head)}"
                )
            framed = count * HEADER_BYTES + payload_bytes
            segment.records -= count
            segment.bytes -= framed
            self._bytes -= framed
            finished = segment is not self._active and end.offset >= segment.size
            if finished:
                self._remove_head()
            else:
                self._head_offset = end.offset
                self._head_acked += count
            position = SpoolPosition(self._segments[0].seq, self._head_offset)
            head_acked = self._head_acked
        # The ack file first: a crash before the unlink leaves a segment that replay
        # recognises as acknowledged (its sequence is below the ack's).
        self._write_acked(position, head_acked)
        if finished:
            self._finish(segment)
        return True

    def _write_acked(self, position: SpoolPosition, head_acked: int) -> None:
        try:
            write_acked(self.directory, position, head_acked)
        except OSError:
            with self._lock:
                self._write_errors += 1

    def _finish(self, segment: Segment, why: str = "") -> None:
        """A segment left the spool (lock not held): delete it, or keep it in the quarantine.

        Records of it still counted as unacknowledged were never read: damage found while
        reading skipped them (or ``why`` says the file could not be read). They are lost,
        counted (``lost``) and reported with the damage the file shows now, and the file is
        kept.
        """
        if segment.records:
            lost = segment.records
            segment.records = 0
            segment.lost += lost
            with self._lock:
                self._lost += lost
            if not self._report_finished(segment, why or "damage found while shipping"):
                with self._lock:
                    self._write_errors += 1
        if not retire(self.directory, segment):
            with self._lock:
                self._write_errors += 1

    def _report_finished(self, segment: Segment, why: str) -> bool:
        try:
            fd = os.open(segment.path, OPEN_READ)
            try:
                regions = damage_regions(pread_reader(fd), 0, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        except OSError:
            regions = []
        return report_loss(
            self.directory,
            segment.path.name,
            {
                "records_lost": segment.lost,
                "at_least": False,
                "written": segment.written,
                "damage": regions,
                "why": why,
            },
        )

    # -- a directory deleted under the spool (lock held) ---------------------------------

    def _recreate_if_deleted(self) -> bool:
        """Make the spool's directory again if it was deleted (the spool's lock held).

        Returns:
            True when it was deleted and has been made again: the caller refreshes the append
            path's bound (:meth:`_refresh_fast_limit`).
        """
        if not self._deleted():
            return False
        try:
            lock_fd = lock_directory(self.directory)
        except SpoolError:
            self._write_errors += 1
            return False  # cannot be made now (a full disk?): the next check tries again
        if lock_fd is None:
            self._write_errors += 1
            return False  # another process took the new directory: not ours to write
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)  # its lock was on the deleted file
        self._lock_fd = lock_fd
        self._recreated += 1
        self._forget_sealed()
        self._rewrite_active()
        self._note_ledger()
        try:
            write_acked(
                self.directory,
                SpoolPosition(self._active.seq, self._head_offset),
                self._head_acked,
            )
        except OSError:
            self._write_errors += 1
        self._dir_dirty = True
        return True

    def _deleted(self) -> bool:
        """Whether the active segment's name is gone (lock held)."""
        if not self._usable or self._writer.fd < 0:
            return False
        try:
            return os.fstat(self._writer.fd).st_nlink == 0
        except OSError:
            return False

    def _forget_sealed(self) -> None:
        """The sealed segments went with the directory: count and report their records."""
        active = self._active
        sealed = [segment for segment in self._segments if segment is not active]
        if not sealed:
            return
        if self._superseded is None:  # an ack of the batch in flight, if any, is then ignored
            self._superseded = SpoolPosition(sealed[0].seq, self._head_offset)
        for segment in sealed:
            self._lost += segment.records
            if segment.records:
                report_loss(
                    self.directory,
                    segment.path.name,
                    {
                        "records_lost": segment.records,
                        "at_least": False,
                        "written": segment.written,
                        "intact": 0,
                        "damage": [],
                        "why": "the spool directory was deleted while the spool was open",
                    },
                )
        self._segments = deque([active])
        self._sealed_bytes = 0
        self._bytes = active.bytes
        self._head_offset = self._head_acked = 0
        self._room.notify_all()

    def _rewrite_active(self) -> None:
        """Give the active segment's content a file again, under its old name."""
        active, old = self._active, self._writer
        try:
            data = os.pread(old.fd, active.size, 0)
            writer = SegmentWriter(active.path, old.capacity)
            if writer.mapping is not None:
                writer.mapping[: len(data)] = data
            elif data:
                writer.write_unmapped(0, data)
        except (OSError, ValueError):
            # No room for it: its records stay readable through the old descriptor until the
            # next append rotates; the sealed file will then be missing and its records lost.
            self._write_errors += 1
            self._rotate_due = True
            return
        old.seal(active.size)  # the nameless file: truncated and closed, nothing else
        self._writer = writer
        active.synced = 0

    # -- state ---------------------------------------------------------------------------

    @property
    def fsync_policy(self) -> FsyncPolicy:
        """When the spool is fsynced: ``batch``, ``interval``, ``always`` or ``never``."""
        return self._opt.fsync

    @property
    def degraded_reason(self) -> str | None:
        """Why the active segment is smaller than ``segment_bytes`` (a disk too full for a
        whole one); None when it is not."""
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
                lost=self._lost,
                recreated=self._recreated,
                degraded=self._degraded,
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
                if self._segments:
                    self._note_ledger()
                else:  # nothing left: a spool that has no segment needs no ledger
                    unlink(self.directory / LEDGER_NAME)
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
        self._head_acked = stock.head_acked
        self._torn, self._corrupt = stock.torn, stock.corrupt
        self._bad_segments = stock.bad_segments
        self._lost = stock.lost
        self._write_errors = stock.unlink_failures
        return stock.next_seq


#: Every open spool of this process, weakly: added once open, gone at ``close()`` or
#: :meth:`Spool.after_fork_in_child`.
_LIVE: weakref.WeakSet[Spool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for spool in list(_LIVE):
        spool.after_fork_in_child()


# One hook for every spool (a per-spool hook could never be unregistered).
os.register_at_fork(after_in_child=_after_fork_in_child)
