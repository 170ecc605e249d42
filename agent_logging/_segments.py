"""A spool directory's files, and reading them: what is on disk, apart from the live spool.

Separate from ``_spool`` because none of this needs the open :class:`~agent_logging._spool.Spool`
or its lock: ``agent-logging status``/``drain`` read a directory another process owns
(:func:`read_all`), and the spool itself takes stock of a previous run (:func:`take_stock`) and
reads batches (``_segment_batches``) outside its append lock. The layout::

    DIR/lock                          flock(LOCK_EX) held while open; holds the owner's pid
    DIR/seg-0000000000000007.spool    append-only segments of frames (see ``_framing``)
    DIR/acked                         "1 SEQ OFFSET": where the oldest unacknowledged record is
    DIR/seg-....spool.bad             a segment that could not be read at all, kept for autopsy

Batches for the shipper are read by ``_segment_batches``.

Replay. On open, every segment at or after the acked position is scanned once to count its
records; torn tails and corrupt frames are skipped and counted (``torn``, ``corrupt``), a
segment that cannot be read at all is renamed ``*.bad`` (``bad_segments``), segments with
nothing left to ship are deleted. The scan keeps no payload and costs about 2 µs per frame
here (110-150 MB/s of 200-byte records; CRC alone runs at ~0.9 GB/s), so a full 256 MiB spool
of small records delays an open by about two seconds. Replayed data counts as synced: it
already survived the previous process.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from agent_logging._framing import (
    HEADER_BYTES,
    Frame,
    count_frames,
    read_frames,
)
from agent_logging.errors import SpoolError

__all__ = [
    "OPEN_READ",
    "Inventory",
    "Segment",
    "SpoolPosition",
    "SpooledRecord",
    "first_ts_ns",
    "fsync_path",
    "pread_reader",
    "read_all",
    "segment_path",
    "set_aside",
    "take_stock",
    "unlink",
    "write_acked",
]

_SEGMENT_NAME: Final = re.compile(r"seg-(\d{16})\.spool")
#: How segment files are opened for reading (also by ``_segment_batches``).
OPEN_READ: Final = os.O_RDONLY | os.O_CLOEXEC
_SCAN_WINDOW_BYTES: Final = 1 << 20


class SpooledRecord(NamedTuple):
    """One record as spooled: its own timestamp, its rendered line (no newline) and its
    stream key (``_record_encoder.stream_key``; 0 when it has none)."""

    ts_ns: int
    payload: bytes
    key: int = 0


class SpoolPosition(NamedTuple):
    """A place in the spool: a segment's sequence number and a byte offset in it."""

    segment: int
    offset: int


class Segment:
    """What the spool knows about one segment file, without holding its records."""

    __slots__ = ("bytes", "checked", "path", "records", "seq", "size", "synced")

    def __init__(self, seq: int, path: Path) -> None:
        self.seq = seq
        self.path = path
        self.size = 0  # committed bytes: what the reader may read
        self.records = 0  # unacknowledged intact frames
        self.bytes = 0  # their framed size
        self.synced = 0  # bytes known to be fsynced
        self.checked = 0  # damage before this offset has been counted already


@dataclass(slots=True)
class Inventory:
    """What :func:`take_stock` found: the segments left to ship and the damage on the way.

    ``segments`` are oldest first, each with its size, records and bytes counted;
    ``head_offset`` is where the oldest unacknowledged record is in the first of them;
    ``unlink_failures`` counts files that should have been deleted but could not be.
    """

    next_seq: int
    segments: list[Segment] = field(default_factory=list)
    head_offset: int = 0
    torn: int = 0
    corrupt: int = 0
    bad_segments: int = 0
    unlink_failures: int = 0


def segment_path(directory: Path, seq: int) -> Path:
    """The file of segment ``seq`` in ``directory``."""
    return directory / f"seg-{seq:016d}.spool"


def take_stock(directory: Path) -> Inventory:
    """Take stock of a previous run's segments (see the module doc), deleting what is done.

    Args:
        directory: the spool directory, locked by the caller.

    Returns:
        The segments left to ship and the sequence number the next segment must have: above
        every segment file and above the ack's (a new segment numbered below the ack's would
        count as acknowledged).

    Raises:
        OSError: the directory cannot be listed, or a stale ``acked.tmp`` cannot be removed.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / "acked.tmp")
    acked = _read_acked(directory)
    files = _segment_files(directory)
    found = Inventory(max([seq for seq, _ in files] + [acked.segment if acked else 0]) + 1)
    for seq, path in files:
        start = 0
        if acked is not None and seq <= acked.segment:
            if seq < acked.segment:  # acknowledged; a crash came before its deletion
                found.unlink_failures += not unlink(path)
                continue
            start = acked.offset
        segment = Segment(seq, path)
        try:
            size, torn, corrupt = _scan_segment(segment, start)
        except OSError:
            found.bad_segments += 1
            set_aside(path)
            continue
        found.torn += torn
        found.corrupt += corrupt
        if not segment.records:
            found.unlink_failures += not unlink(path)  # nothing left: acknowledged or damaged
            continue
        # Replayed bytes count as synced: they survived the previous process already.
        segment.size = segment.synced = segment.checked = size
        if not found.segments:
            found.head_offset = start
        found.segments.append(segment)
    return found


def read_all(directory: str | os.PathLike[str]) -> Iterator[SpooledRecord]:
    """Every unacknowledged record of a spool directory, oldest first, without its lock.

    For ``agent-logging status``/``drain`` to inspect a spool whose owner is gone or alive.
    Torn tails and corrupt frames are skipped. With a live owner this is a snapshot that may
    still include records acknowledged while it runs.

    Args:
        directory: the spool directory.

    Returns:
        An iterator holding one read window in memory at a time.

    Raises:
        SpoolError: the directory cannot be listed (raised on first iteration).
    """
    path = Path(directory)
    try:
        files = _segment_files(path)
    except OSError as exc:
        raise SpoolError(f"cannot read spool {path}: {exc}") from exc
    acked = _read_acked(path)
    for seq, file in files:
        start = 0
        if acked is not None and seq <= acked.segment:
            if seq < acked.segment:
                continue
            start = acked.offset
        try:
            fd = os.open(file, OPEN_READ)
        except OSError:
            continue  # deleted by its owner meanwhile, or unreadable
        try:
            frames = read_frames(pread_reader(fd), start, os.fstat(fd).st_size)
            for item in frames:
                if isinstance(item, Frame):
                    yield SpooledRecord(item.ts_ns, item.payload, item.key)
        except OSError:
            continue
        finally:
            os.close(fd)


def pread_reader(fd: int) -> Callable[[int, int], bytes]:
    """``read(offset, size)`` of an open file, by ``os.pread``."""

    def read(offset: int, size: int) -> bytes:
        return os.pread(fd, size, offset)

    return read


def _scan_segment(segment: Segment, start: int) -> tuple[int, int, int]:
    """Count a segment's intact records from ``start`` into ``segment``.

    A segment left by a process that died while writing it is still as long as it was
    preallocated, zeros after its last frame: the file is cut back to where its content ends
    (the caller holds the directory's lock), so that sizes on disk are what the cap counts.

    Returns:
        The size of the segment's content, and the torn tails and corrupt regions found.
    """
    fd = os.open(segment.path, OPEN_READ)
    try:
        size = os.fstat(fd).st_size
        found = count_frames(pread_reader(fd), start, size, window_bytes=_SCAN_WINDOW_BYTES)
    finally:
        os.close(fd)
    if found.end < size:
        with contextlib.suppress(OSError):  # left uncut, the zeros are only read past again
            os.truncate(segment.path, found.end)
    segment.records = found.records
    segment.bytes = found.records * HEADER_BYTES + found.payload_bytes
    return found.end, found.torn, found.corrupt


def first_ts_ns(path: Path, start: int, size: int) -> int | None:
    """The timestamp of the first intact frame in ``[start, size)`` of a segment.

    Returns:
        The ``ts_ns`` of that frame, or None when there is none or the file is gone.
    """
    try:
        fd = os.open(path, OPEN_READ)
    except OSError:
        return None  # acknowledged and deleted meanwhile
    try:
        for item in read_frames(pread_reader(fd), start, size, window_bytes=4096):
            if isinstance(item, Frame):
                return item.ts_ns
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _read_acked(path: Path) -> SpoolPosition | None:
    """The acknowledged position, or None (resend everything) when missing or garbled."""
    try:
        fields = (path / "acked").read_text("ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(fields) != 3 or fields[0] != "1" or not (fields[1].isdigit() and fields[2].isdigit()):
        return None
    return SpoolPosition(int(fields[1]), int(fields[2]))


def write_acked(directory: Path, position: SpoolPosition) -> None:
    """Record the acknowledged position: ``acked.tmp`` then ``os.replace``, no fsync.

    Raises:
        OSError: the file cannot be written or renamed.
    """
    # No fsync: after power loss an old or missing ack file only causes a resend.
    tmp = directory / "acked.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"1 {position.segment} {position.offset}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, directory / "acked")


def _segment_files(path: Path) -> list[tuple[int, Path]]:
    with os.scandir(path) as entries:
        found = [
            (int(match[1]), Path(entry.path))
            for entry in entries
            if (match := _SEGMENT_NAME.fullmatch(entry.name))
        ]
    return sorted(found)


def fsync_path(path: Path) -> bool:
    """fsync a file or directory by name; False when that fails (a missing file is fine)."""
    try:
        fd = os.open(path, OPEN_READ)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        os.fsync(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def unlink(path: Path) -> bool:
    """Delete a file if it exists; False when that fails."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def set_aside(path: Path) -> None:
    """Rename an unreadable segment to ``*.bad``, kept for autopsy."""
    with contextlib.suppress(OSError):  # nothing more to do if even a rename fails
        os.replace(path, path.with_name(path.name + ".bad"))
