"""The spool's read side: batches for the shipper and their acknowledgement (at-least-once).

One shipper thread calls :meth:`Spool.peek_batch <agent_logging.spool._spool.Spool.peek_batch>`,
delivers the batch and calls :meth:`Spool.ack <agent_logging.spool._spool.Spool.ack>`; their bodies
are here, working on the open spool's state under its read lock and, for the bookkeeping, its
append lock. A peek never consumes: until its ack the same records come back. The reader takes
the active segment from its mapping (no system call: each one can cost the shipper a switch
interval while a logging thread keeps the GIL) and the sealed ones with ``os.pread``, only up
to the size the writer has committed (tracked in memory under the lock), so it never sees half
a frame of this process. A batch never spans two segments (it keeps acks, counts and deletion
per segment simple; with 8 MiB segments and 1 MiB batches the cost is one short batch per
segment). An ack rewrites ``acked`` (write to ``acked.tmp`` + ``os.replace``, no fsync: after a
power loss an older ack file means a resend, which Loki does not always de-duplicate; after a
kill of the process it is intact, and only the batch in flight is in doubt, reconciled with
Loki before anything of it is pushed again, ``shipping._reconcile``; it also says how many
records of the head segment were acknowledged, for replay's check against the ledger) and deletes a
segment once all of it is acknowledged, never before. A segment finished with records that were
never read (damage found while reading skipped them) lost those records: it is reported and
kept in the quarantine instead (:func:`finish`, ``_quarantine``), as is one that cannot
be read. Memory holds at most one batch: segments are tracked as counts, and reads go through a
window of about ``max_bytes``.

Costs, measured as in ``_spool``'s module doc: ``peek_batch`` + ``ack`` of 1 MiB batches, fsync
included, cost about 4 µs per record on a loaded machine (``python -m benchmarks.ship``'s
breakdown; 6.6-11.5 µs before the single-loop batch read of ``_batches.read_segment``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_logging.errors import SpoolError
from agent_logging.spool._batches import read_segment
from agent_logging.spool._cap import refresh_fast_limit, remove_head
from agent_logging.spool._framing import HEADER_BYTES
from agent_logging.spool._quarantine import damage_regions, report_loss
from agent_logging.spool._recreate import recreate_if_deleted
from agent_logging.spool._segments import (
    OPEN_READ,
    Segment,
    SpooledRecord,
    SpoolPosition,
    pread_reader,
    retire,
    write_acked,
)

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["Batch", "ack", "finish", "peek_batch"]


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


def peek_batch(spool: Spool, max_records: int, max_bytes: int) -> Batch | None:
    """The body of :meth:`Spool.peek_batch <agent_logging.spool._spool.Spool.peek_batch>`."""
    if max_records < 1 or max_bytes < 1:
        raise ValueError(f"limits must be >= 1, not {max_records=} {max_bytes=}")
    window_bytes = max(1 << 16, min(max_bytes, 1 << 22))
    with spool._read_lock:
        if spool._opt.fsync == "batch":
            with spool._lock:
                spool._check_open()
            spool.sync()
        while True:
            with spool._lock:
                spool._check_open()
                spool._superseded = None
                segment = spool._segments[0]
                start = SpoolPosition(segment.seq, spool._head_offset)
                limit, checked, sealed = (
                    segment.size,
                    segment.checked,
                    segment is not spool._active,
                )
                mapping = None if sealed else spool._writer.mapping
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
                _read_failed(spool, segment, start, sealed, exc)
                continue
            with spool._lock:
                if spool._segments[0] is not segment or spool._head_offset != start.offset:
                    continue  # drop_oldest moved the head while we read: read the new one
                spool._torn += torn
                spool._corrupt += corrupt
                segment.checked = max(checked, end)
                if records:
                    return Batch(
                        tuple(records), SpoolPosition(segment.seq, end), start, payload_bytes
                    )
                spool._head_offset = end  # [start, end) held only damage: skip it for good
                if segment.size != limit or sealed != (segment is not spool._active):
                    continue  # it grew or was sealed while we read
                if not sealed:
                    return None
                remove_head(spool)  # sealed with nothing left to ship: finish it
                head = SpoolPosition(spool._segments[0].seq, 0)
            _write_acked(spool, head, 0)
            finish(spool, segment)


def _read_failed(
    spool: Spool, segment: Segment, start: SpoolPosition, sealed: bool, exc: OSError
) -> None:
    with spool._lock:
        if recreate_if_deleted(spool):  # the whole directory went: counted there
            refresh_fast_limit(spool)
            return
        if spool._segments[0] is not segment or spool._head_offset != start.offset:
            return  # dropped while we read it: the next round reads the new head
        if not sealed:  # rotate, so that next time it is a sealed one to set aside
            spool._rotate_due = True
            refresh_fast_limit(spool)
            raise SpoolError(f"cannot read spool segment {segment.path}: {exc}") from exc
        # A sealed segment that cannot be read: its records are lost; keep it for autopsy.
        spool._bad_segments += 1
        remove_head(spool)
    finish(spool, segment, f"the segment cannot be read: {exc}")


def ack(spool: Spool, batch: Batch) -> None:
    """The body of :meth:`Spool.ack <agent_logging.spool._spool.Spool.ack>`."""
    payload_bytes = batch.payload_bytes
    if payload_bytes < 0:
        payload_bytes = sum(len(r.payload) for r in batch.records)
    with spool._read_lock:
        ack_range(spool, batch.start, batch.end, len(batch.records), payload_bytes)


def ack_range(
    spool: Spool, start: SpoolPosition, end: SpoolPosition, count: int, payload_bytes: int
) -> bool:
    """Acknowledge the ``count`` records (``payload_bytes`` of payload) in ``[start, end)``.

    The read lock is held by the caller. Returns False when the range was superseded (the
    head it started at was dropped meanwhile): nothing to do.

    Raises:
        SpoolError: the spool is closed, or ``start`` is not the oldest unacknowledged record.
    """
    with spool._lock:
        spool._check_open()
        segment = spool._segments[0]
        head = SpoolPosition(segment.seq, spool._head_offset)
        if start != head:
            if start == spool._superseded:
                return False
            raise SpoolError(
                f"ack out of order: the batch starts at {tuple(start)}, "
                f"the oldest unacknowledged record is at {tuple(head)}"
            )
        framed = count * HEADER_BYTES + payload_bytes
        segment.records -= count
        segment.bytes -= framed
        spool._bytes -= framed
        finished = segment is not spool._active and end.offset >= segment.size
        if finished:
            remove_head(spool)
        else:
            spool._head_offset = end.offset
            spool._head_acked += count
        position = SpoolPosition(spool._segments[0].seq, spool._head_offset)
        head_acked = spool._head_acked
    # The ack file first: a crash before the unlink leaves a segment that replay
    # recognises as acknowledged (its sequence is below the ack's).
    _write_acked(spool, position, head_acked)
    if finished:
        finish(spool, segment)
    return True


def _write_acked(spool: Spool, position: SpoolPosition, head_acked: int) -> None:
    try:
        write_acked(spool.directory, position, head_acked)
    except OSError:
        with spool._lock:
            spool._write_errors += 1


def finish(spool: Spool, segment: Segment, why: str = "") -> None:
    """A segment left the spool (lock not held): delete it, or keep it in the quarantine.

    Records of it still counted as unacknowledged were never read: damage found while
    reading skipped them (or ``why`` says the file could not be read). They are lost,
    counted (``lost``) and reported with the damage the file shows now, and the file is kept.
    """
    if segment.records:
        lost = segment.records
        segment.records = 0
        segment.lost += lost
        with spool._lock:
            spool._lost += lost
        if not _report_finished(spool, segment, why or "damage found while shipping"):
            with spool._lock:
                spool._write_errors += 1
    if not retire(spool.directory, segment):
        with spool._lock:
            spool._write_errors += 1


def _report_finished(spool: Spool, segment: Segment, why: str) -> bool:
    try:
        fd = os.open(segment.path, OPEN_READ)
        try:
            regions = damage_regions(pread_reader(fd), 0, os.fstat(fd).st_size)
        finally:
            os.close(fd)
    except OSError:
        regions = []
    return report_loss(
        spool.directory,
        segment.path.name,
        {
            "records_lost": segment.lost,
            "at_least": False,
            "written": segment.written,
            "damage": regions,
            "why": why,
        },
    )
