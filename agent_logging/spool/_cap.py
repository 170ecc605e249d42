"""The spool's slow write path: the size cap, the full policies, and segment rotation.

:meth:`Spool.append <agent_logging.spool._spool.Spool.append>` tests one bound (the spool's
``_fast_limit``, kept by :func:`refresh_fast_limit`): a frame ending at or below it needs no
rotation and fits under the cap. Any other append comes here, with the spool's lock held, as
does whatever changes what that bound depends on. These functions work on the open spool's
state under that lock.

Rotation. A new segment starts at every open (the previous run's last segment may end in a
torn frame, and nothing is ever appended after one) and whenever the next frame would take the
active segment past ``segment_bytes``; a frame larger than that gets a segment of its own,
sized for it. A segment that cannot be allocated (a full disk) fails the rotation, counted, and
the next append tries again (no sooner than ``_RETRY_S`` after: every append of a flat-out
logger would otherwise create, allocate and delete a file; the appends refused meanwhile count
as ``write_errors``). A disk with room for less than a whole segment gets a smaller one
(:func:`create_segment`, counted as ``degraded``), so that a nearly full disk, at start-up
too, still takes records; the next rotation asks for a whole segment again. Sealed segments are
cut back to their content; up to one segment's preallocation is on disk beyond what the size
cap counts.

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

The ledger (``_ledger``) is written at every segment's creation and before a dropped
segment's file is deleted, so that it never names a segment the spool deleted itself.
"""

from __future__ import annotations

import errno
import time
from typing import TYPE_CHECKING, Final

from agent_logging.spool._recreate import recreate_if_deleted
from agent_logging.spool._segments import Segment, SpoolPosition, retire, segment_path
from agent_logging.spool._sync import fsync_directory, note_ledger
from agent_logging.spool._writer import SegmentWriter

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = [
    "create_segment",
    "disk_bytes",
    "prepare",
    "refresh_fast_limit",
    "remove_head",
    "write_failed",
]

#: After a segment could not be created, appends that need one wait this long to try again.
_RETRY_S: Final = 0.5
#: The smallest segment a full disk is asked for, unless the frame needs more.
_SMALLEST_BYTES: Final = 64 * 1024
_NO_SPACE: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def prepare(spool: Spool, size: int) -> bool:
    """The slow path (lock held): apply the full policy, rotate; False when not stored."""
    if not spool._usable or not _make_room(spool, size):
        spool._dropped += 1
        return False
    active = spool._active
    if (
        spool._rotate_due
        or (active.size and active.size + size > spool._opt.segment_bytes)
        or active.size + size > spool._writer.capacity
    ):
        if time.monotonic() < spool._retry_at:
            spool._write_errors += 1  # the last try failed a moment ago: lost, counted
            return False
        return _rotate(spool, size)
    return True


def _make_room(spool: Spool, size: int) -> bool:
    """Apply the full policy (lock held); True when ``size`` more bytes fit."""
    cap = spool._opt.max_bytes - size
    policy = spool._opt.full_policy
    if policy == "drop_oldest":
        while disk_bytes(spool) > cap and len(spool._segments) > 1:
            _drop_head_segment(spool)
    elif policy == "block":
        deadline = time.monotonic() + spool._opt.block_timeout_s
        while disk_bytes(spool) > cap and spool._usable:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            spool._room.wait(remaining)  # an ack or close notifies
    return spool._usable and disk_bytes(spool) <= cap


def disk_bytes(spool: Spool) -> int:
    """The sum of segment file sizes: what the cap measures (lock held)."""
    return spool._sealed_bytes + spool._active.size


def refresh_fast_limit(spool: Spool) -> None:
    """Recompute the fast path's bound (lock held) after anything it depends on changed."""
    if not spool._usable or spool._rotate_due:
        spool._fast_limit = -1
    else:
        room = spool._opt.max_bytes - spool._sealed_bytes
        # What passes must fit the active segment: segment_bytes, or less on a full disk.
        spool._fast_limit = min(spool._opt.segment_bytes, spool._writer.capacity, room)


def _drop_head_segment(spool: Spool) -> None:
    segment = spool._segments[0]
    if spool._superseded is None:  # where the batch in flight, if any, starts
        spool._superseded = SpoolPosition(segment.seq, spool._head_offset)
    spool._dropped += segment.records
    remove_head(spool)
    note_ledger(spool)  # first: a ledger naming a segment that is gone reports a loss
    if not retire(spool.directory, segment):
        spool._write_errors += 1


def remove_head(spool: Spool) -> None:
    """Forget the oldest segment (lock held); the caller deletes its file."""
    segment = spool._segments.popleft()  # never the active one: that is the newest
    spool._sealed_bytes -= segment.size
    spool._bytes -= segment.bytes
    spool._head_offset = 0
    spool._head_acked = 0
    refresh_fast_limit(spool)
    spool._room.notify_all()


def _rotate(spool: Spool, size: int) -> bool:
    """Seal the active segment and start the next, with room for a ``size``-byte frame."""
    recreate_if_deleted(spool)  # a directory deleted under the spool: made again first
    old = spool._active
    try:
        spool._active, writer = create_segment(
            spool, old.seq + 1, max(spool._opt.segment_bytes, size), size
        )
    except OSError:
        spool._write_errors += 1
        spool._rotate_due = True
        spool._retry_at = time.monotonic() + _RETRY_S
        refresh_fast_limit(spool)
        return False
    spool._writer.seal(old.size)
    spool._writer = writer
    spool._rotate_due = False
    if old.size == 0 and spool._segments[0] is not old:
        spool._segments.remove(old)  # nothing in it, and not the reader's: delete it now
        retire(spool.directory, old)
    else:
        spool._sealed_bytes += old.size
    note_ledger(spool)
    refresh_fast_limit(spool)
    if spool._fsync_always:
        fsync_directory(spool)
    else:
        spool._dir_dirty = True
    return True


def create_segment(
    spool: Spool, seq: int, capacity: int, needed: int
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
    segment = Segment(seq, segment_path(spool.directory, seq))
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
        spool._degraded += 1
    spool._segments.append(segment)
    return segment, writer


def write_failed(spool: Spool) -> None:
    """Count a failed copy into the active segment and rotate at the next append (lock held)."""
    spool._write_errors += 1
    spool._rotate_due = True
    refresh_fast_limit(spool)
