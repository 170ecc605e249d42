"""Batches for the shipper: what a batch is, and a segment's records read a window at a time.

A shipper thread gets a :class:`Batch` from :meth:`Spool.peek_batch
<agent_logging.spool._spool.Spool.peek_batch>` and passes it back to :meth:`Spool.ack
<agent_logging.spool._spool.Spool.ack>`; a shipper in another process gets a :class:`ReadPlan`
(where to read, ``_remote``) and reads the segment file itself. Both read with
:func:`read_segment`, which reads a window of the segment at a time (``os.pread``, or from
the active segment's mapping) and takes its intact frames in one loop
(``_framing.take_frames``: a header unpack, a CRC and a slice per frame, no generator and no
intermediate object), falling back to the frame-by-frame reader, which reports damage, only
from the first frame that is not intact. Records come back as :class:`SpooledRecord` with
their stream key, the batch with its payload size counted, so neither the shipper nor the ack
has to go over the records again. Zeros after a segment's last frame are space preallocated
and not written yet, not damage (``_framing``).

The segment files themselves, their layout and replay are ``_segments``'.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple, cast

from agent_logging.spool._framing import Frame, TornTail, read_frames, take_frames
from agent_logging.spool._segments import OPEN_READ, SpooledRecord, SpoolPosition, pread_reader

__all__ = ["Batch", "ReadPlan", "read_segment"]


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


class ReadPlan(NamedTuple):
    """Where a shipper in another process reads next: ``[start, limit)`` of the segment at
    ``path`` (:meth:`Spool.plan_read <agent_logging.spool._spool.Spool.plan_read>`).

    ``checked``: damage before this offset was counted already (``read_segment``'s argument).
    ``sealed``: the segment is no longer written to.
    """

    seq: int
    path: str
    start: int
    limit: int
    checked: int
    sealed: bool


def read_segment(
    path: Path,
    offset: int,
    limit: int,
    checked: int,
    max_records: int,
    max_bytes: int,
    window_bytes: int,
    mapping: mmap.mmap | None = None,
) -> tuple[list[SpooledRecord], int, int, int, int]:
    """Read one batch from ``[offset, limit)`` of a segment.

    Intact frames are taken a window at a time by :func:`~agent_logging.spool._framing.take_frames`;
    from the first damaged frame on, the rest of the batch is read with ``read_frames``, which
    skips and reports the damage.

    Args:
        path: the segment file.
        offset: where the batch starts.
        limit: the size the writer has committed: nothing at or after it is read.
        checked: damage before this offset has been counted already.
        max_records: at most this many records.
        max_bytes: at most this many payload bytes; a single larger record comes alone.
        window_bytes: how much to read at a time.
        mapping: the active segment's mapping, read instead of the file: no system call, so
            the GIL stays with the reader. When it is closed under the reader (the segment
            was sealed meanwhile) the rest is read from the file.

    Returns:
        The records, the offset after the last item consumed, the records' payload bytes, and
        the torn tails and corrupt regions found at or after ``checked``.

    Raises:
        OSError: the segment cannot be opened or read.
    """
    records: list[SpooledRecord] = []
    payload_bytes = 0
    end = offset
    with contextlib.ExitStack() as opened:
        read = _segment_reader(path, mapping, opened)
        # Fast path: whole windows of intact frames; a window that ends mid-frame is followed
        # by one starting at that frame. Anything else (damage, a frame larger than the
        # window, the byte budget) goes to the slow path, which decides.
        while end < limit and len(records) < max_records:
            buf = read(end, min(limit - end, window_bytes))
            taken, size, window_ended = take_frames(
                buf, 0, max_records, max_bytes - payload_bytes, _new_record, records
            )
            payload_bytes += size
            end += taken
            if not (window_ended and taken):
                break
        if end >= limit or len(records) >= max_records:
            return records, end, payload_bytes, 0, 0
        return _read_slowly(
            read, records, end, limit, checked, max_records, max_bytes, payload_bytes
        )


def _segment_reader(
    path: Path, mapping: mmap.mmap | None, opened: contextlib.ExitStack
) -> Callable[[int, int], bytes]:
    """``read(offset, size)`` from ``mapping``, else (or once it is closed) from the file."""
    from_file: Callable[[int, int], bytes] | None = None

    def open_file() -> Callable[[int, int], bytes]:
        fd = os.open(path, OPEN_READ)
        opened.callback(os.close, fd)
        return pread_reader(fd)

    if mapping is None:
        return open_file()

    def read(offset: int, size: int) -> bytes:
        nonlocal from_file
        if from_file is None:
            try:
                return mapping[offset : offset + size]
            except ValueError:  # "mmap closed or invalid": sealed meanwhile
                from_file = open_file()
        return from_file(offset, size)

    return read


# A SpooledRecord from a (ts_ns, payload, key) tuple without NamedTuple's Python-level
# __new__: one C call per record on the shipper's hot path.
_new_record: Final = cast(
    "Callable[[tuple[int, bytes, int]], SpooledRecord]",
    functools.partial(tuple.__new__, SpooledRecord),
)


def _read_slowly(
    read: Callable[[int, int], bytes],
    records: list[SpooledRecord],
    offset: int,
    limit: int,
    checked: int,
    max_records: int,
    max_bytes: int,
    payload_bytes: int,
) -> tuple[list[SpooledRecord], int, int, int, int]:
    end = offset
    torn = corrupt = 0
    for item in read_frames(read, offset, limit, window_bytes=1 << 16):
        if isinstance(item, Frame):
            if records and payload_bytes + len(item.payload) > max_bytes:
                break
            records.append(SpooledRecord(item.ts_ns, item.payload, item.key))
            payload_bytes += len(item.payload)
            end = item.end
            if len(records) >= max_records:
                break
        else:
            if item.offset >= checked:
                torn += isinstance(item, TornTail)
                corrupt += not isinstance(item, TornTail)
            end = item.end
    return records, end, payload_bytes, torn, corrupt
