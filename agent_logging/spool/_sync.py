"""The spool's fsync policy: when what a spool holds is forced to disk, and at what cost.

An append survives a SIGKILL of the process as soon as it returns (``_writer``); only power
loss needs an fsync. These functions work on the open spool's state: the ones the append path
calls with the spool's lock held, :func:`sync` and :func:`sync_if_due` without it (an fsync
takes milliseconds, an append a microsecond). The policy (``fsync``):

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

The ledger (``_ledger``: how many records each segment was given) is written after the
fsyncs of every :func:`sync`, and by :func:`sync_if_due` under every policy at most every
``REFRESH_S``: the shipper calls it however long Loki is down, so the ledger of a spool that
cannot ship lags its appends by about a second.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from agent_logging.spool._ledger import REFRESH_S, write_ledger
from agent_logging.spool._segments import Segment, fsync_path

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["fsync_active", "fsync_directory", "note_ledger", "sync", "sync_if_due"]

#: The clock of the ``interval`` fsync policy; tests replace it (``_spool`` reads it through
#: this module, so that the replacement reaches the spool's first reading too).
_now = time.monotonic


def fsync_active(spool: Spool) -> None:
    """fsync the active segment after an append under ``always`` (lock held)."""
    try:
        os.fsync(spool._writer.fd)
    except OSError:
        spool._write_errors += 1
    else:
        spool._active.synced = spool._active.size


def fsync_directory(spool: Spool) -> None:
    """fsync the directory, so new and deleted names survive power loss (lock held)."""
    if not fsync_path(spool.directory):
        spool._write_errors += 1


def note_ledger(spool: Spool) -> None:
    """Write the ledger from the spool's segments (lock held): a few microseconds."""
    spool._ledger_at = _now()
    spool._ledger_appended = spool._appended
    if not write_ledger(spool.directory, [(s.seq, s.written) for s in spool._segments]):
        spool._write_errors += 1


def sync(spool: Spool) -> None:
    """fsync every segment with unsynced bytes, and the directory after a rotation, then
    bring the ledger up to date with what was synced.

    The body of :meth:`Spool.sync <agent_logging.spool._spool.Spool.sync>` (lock not held).
    """
    with spool._lock:
        pending = [(s, s.size) for s in spool._segments if s.synced < s.size]
        fd = spool._writer.fd
        active_fd = os.dup(fd) if fd >= 0 and spool._active.synced < spool._active.size else -1
        dir_dirty, spool._dir_dirty = spool._dir_dirty, False
        spool._last_sync = _now()
    try:
        for segment, size in pending:
            _fsync_segment(spool, segment, size, active_fd)
    finally:
        if active_fd >= 0:
            os.close(active_fd)
    if dir_dirty and not fsync_path(spool.directory):
        with spool._lock:
            spool._write_errors += 1
    with spool._lock:
        if spool._usable:
            note_ledger(spool)


def _fsync_segment(spool: Spool, segment: Segment, size: int, active_fd: int) -> None:
    # Outside the append lock: an fsync takes milliseconds, an append a microsecond.
    if segment is spool._active and active_fd >= 0:
        try:
            os.fsync(active_fd)  # a dup of the writer's fd: a rotation cannot close it
            synced = True
        except OSError:
            synced = False
    else:
        synced = fsync_path(segment.path)  # a deleted segment needs no sync: True
    with spool._lock:
        if synced:
            segment.synced = max(segment.synced, size)
        else:
            spool._write_errors += 1


def sync_if_due(spool: Spool) -> bool:
    """The body of :meth:`Spool.sync_if_due <agent_logging.spool._spool.Spool.sync_if_due>`."""
    if spool._opt.fsync != "interval" or _now() - spool._last_sync < spool._opt.fsync_interval_s:
        if _now() - spool._ledger_at >= REFRESH_S:
            with spool._lock:
                if spool._usable and spool._appended != spool._ledger_appended:
                    note_ledger(spool)
        return False
    spool.sync()
    return True
