"""A spool directory deleted while its spool is open: made again, and what went with it counted.

Why. Appends go into a mapping of the active segment (``_writer``); when the directory is
deleted (an operator's ``rm -rf``, a clean-up script, a reimage tool run too early) they go on
succeeding into a file that no longer has a name, the next rotation fails (no directory to
create a segment in), and from then on every record is refused until the process restarts.

What happens instead. :func:`recreate_if_deleted` runs at every rotation (before the new
segment is created) and from :meth:`Spool.sync_if_due
<agent_logging.spool._spool.Spool.sync_if_due>`, which the shipper calls between batches and
while it backs off: one ``fstat`` of the active segment, whose link count is 0 once its name is
gone.
Then, under the spool's lock (as ``drop_oldest`` deletes a segment: a read in progress finds
its segment gone), it makes the directory and its lock again, writes what the active segment
holds (still readable through the descriptor) into a new file of the same name, so positions,
the batch in flight and its ack stay valid, and forgets the sealed segments: their files are
gone, and their unacknowledged records are counted (``lost``, ``recreated``) and reported in
the new directory's quarantine (``_quarantine``), so ``agent-logging drain`` does not
pass over them. Records appended between the deletion and this check are kept: they were in the
active segment. The ack file and the ledger are written again; the dead-letter files are gone.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from typing import TYPE_CHECKING

from agent_logging.errors import SpoolError
from agent_logging.spool._lock import lock_directory
from agent_logging.spool._quarantine import report_loss
from agent_logging.spool._segments import SpoolPosition, write_acked
from agent_logging.spool._sync import note_ledger
from agent_logging.spool._writer import SegmentWriter

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["recreate_if_deleted"]


def _deleted(spool: Spool) -> bool:
    """Whether the active segment's name is gone (lock held)."""
    if not spool._usable or spool._writer.fd < 0:
        return False
    try:
        return os.fstat(spool._writer.fd).st_nlink == 0
    except OSError:
        return False


def recreate_if_deleted(spool: Spool) -> bool:
    """Make the spool's directory again if it was deleted (the spool's lock held).

    Returns:
        True when it was deleted and has been made again: the caller refreshes the append
        path's bound (``_cap.refresh_fast_limit``).
    """
    if not _deleted(spool):
        return False
    try:
        lock_fd = lock_directory(spool.directory)
    except SpoolError:
        spool._write_errors += 1
        return False  # cannot be made now (a full disk?): the next check tries again
    if lock_fd is None:
        spool._write_errors += 1
        return False  # another process took the new directory: not ours to write
    with contextlib.suppress(OSError):
        os.close(spool._lock_fd)  # its lock was on the deleted file
    spool._lock_fd = lock_fd
    spool._recreated += 1
    _forget_sealed(spool)
    _rewrite_active(spool)
    note_ledger(spool)
    try:
        write_acked(
            spool.directory,
            SpoolPosition(spool._active.seq, spool._head_offset),
            spool._head_acked,
        )
    except OSError:
        spool._write_errors += 1
    spool._dir_dirty = True
    return True


def _forget_sealed(spool: Spool) -> None:
    """The sealed segments went with the directory: count and report their records (locked)."""
    active = spool._active
    sealed = [segment for segment in spool._segments if segment is not active]
    if not sealed:
        return
    if spool._superseded is None:  # an ack of the batch in flight, if any, is then ignored
        spool._superseded = SpoolPosition(sealed[0].seq, spool._head_offset)
    for segment in sealed:
        spool._lost += segment.records
        if segment.records:
            report_loss(
                spool.directory,
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
    spool._segments = deque([active])
    spool._sealed_bytes = 0
    spool._bytes = active.bytes
    spool._head_offset = spool._head_acked = 0
    spool._room.notify_all()


def _rewrite_active(spool: Spool) -> None:
    """Give the active segment's content a file again, under its old name (locked)."""
    active, old = spool._active, spool._writer
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
        spool._write_errors += 1
        spool._rotate_due = True
        return
    old.seal(active.size)  # the nameless file: truncated and closed, nothing else
    spool._writer = writer
    active.synced = 0
