"""A spool directory's files, and reading them: what is on disk, apart from the live spool.

Separate from ``_spool`` because none of this needs the open
:class:`~agent_logging.spool._spool.Spool` or its lock: ``agent-logging status``/``drain`` read a
directory another process owns (:func:`read_all`), and the spool itself takes stock of a previous
run (:func:`take_stock`) and reads batches (``_batches``) outside its append lock. The layout::

    DIR/lock                          flock(LOCK_EX) held while open; holds the owner's pid
    DIR/seg-0000000000000007.spool    append-only segments of frames (see ``_framing``)
    DIR/acked                         "2 SEQ OFFSET ACKED": where the oldest unacknowledged
                                      record is, and how many records of segment SEQ were
                                      acknowledged before OFFSET ("1 SEQ OFFSET" before)
    DIR/ledger                        how many records each segment was given (``_ledger``)
    DIR/quarantine/                   segments that lost records, and what they lost
                                      (``_quarantine``)

Batches for the shipper are read by ``_batches``.

Replay. On open, every segment at or after the acked position is scanned once to count its
records; torn tails and corrupt frames are skipped and counted (``torn``, ``corrupt``), and the
records found are checked against the ledger: a segment given ``written`` records, of which
``acknowledged`` were shipped, must hold the rest intact; what it does not hold was lost to
damage (``lost``), and so was every record of a segment the ledger names whose file is gone.
Each such loss is reported in the quarantine at once, and the segment file moves there once its
intact records are shipped (at once when it holds none); a segment that cannot be read at all
counts as ``bad_segments`` and goes there too. Segments with nothing left to ship and no loss
are deleted. A spool without a ledger (written before it existed) is read as before: damaged
regions between intact records are reported, each at least one record lost. The scan keeps no
payload and costs about 2 µs per frame here (110-150 MB/s of 200-byte records; CRC alone runs
at ~0.9 GB/s), so a full 256 MiB spool of small records delays an open by about two seconds.
Replayed data counts as synced: it already survived the previous process.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from agent_logging.errors import SpoolError
from agent_logging.spool._framing import (
    HEADER_BYTES,
    Corrupt,
    Frame,
    FrameCounts,
    TornTail,
    count_frames,
    read_frames,
)
from agent_logging.spool._ledger import read_ledger
from agent_logging.spool._quarantine import damage_regions, move_in, report_loss

__all__ = [
    "OPEN_READ",
    "Inventory",
    "Segment",
    "SpoolPosition",
    "SpooledRecord",
    "first_ts_ns",
    "fsync_path",
    "losses_not_reported",
    "pread_reader",
    "read_all",
    "retire",
    "segment_path",
    "take_stock",
    "unlink",
    "write_acked",
]

_SEGMENT_NAME: Final = re.compile(r"seg-(\d{16})\.spool")
#: How segment files are opened for reading (also by ``_batches``).
OPEN_READ: Final = os.O_RDONLY | os.O_CLOEXEC
_SCAN_WINDOW_BYTES: Final = 1 << 20


class SpooledRecord(NamedTuple):
    """One record as spooled: its own timestamp, its rendered line (no newline) and its
    stream key (``loki._record_encoder.stream_key``; 0 when it has none)."""

    ts_ns: int
    payload: bytes
    key: int = 0


class SpoolPosition(NamedTuple):
    """A place in the spool: a segment's sequence number and a byte offset in it."""

    segment: int
    offset: int


class Segment:
    """What the spool knows about one segment file, without holding its records."""

    __slots__ = (
        "bytes",
        "checked",
        "lost",
        "path",
        "records",
        "seq",
        "size",
        "synced",
        "written",
    )

    def __init__(self, seq: int, path: Path) -> None:
        self.seq = seq
        self.path = path
        self.size = 0  # committed bytes: what the reader may read
        self.records = 0  # unacknowledged intact frames
        self.bytes = 0  # their framed size
        self.synced = 0  # bytes known to be fsynced
        self.checked = 0  # damage before this offset has been counted already
        self.written = 0  # records ever appended to it: what the ledger says
        self.lost = 0  # records known lost to damage (reported in the quarantine)


@dataclass(slots=True)
class Inventory:
    """What :func:`take_stock` found: the segments left to ship and the damage on the way.

    ``segments`` are oldest first, each with its size, records and bytes counted;
    ``head_offset`` is where the oldest unacknowledged record is in the first of them;
    ``head_acked`` how many records of that segment were acknowledged before it;
    ``lost`` the records lost to damage (each segment's loss reported in the quarantine);
    ``unlink_failures`` counts files that should have been deleted but could not be.
    """

    next_seq: int
    segments: list[Segment] = field(default_factory=list)
    head_offset: int = 0
    head_acked: int = 0
    torn: int = 0
    corrupt: int = 0
    bad_segments: int = 0
    lost: int = 0
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
    acked, acked_count = _read_acked(directory)
    ledger = read_ledger(directory)
    files = _segment_files(directory)
    floor = acked.segment if acked else 0
    known = [seq for seq, _ in files] + list(ledger or ()) + [floor]
    found = Inventory(max(known) + 1)
    on_disk = {seq for seq, _ in files}
    for seq, listed in sorted((ledger or {}).items()):
        if seq >= floor and seq not in on_disk:
            acked_here = acked_count if acked and seq == acked.segment else 0
            _missing(directory, found, seq, listed, acked_here or 0)
    for seq, path in files:
        start = 0
        if acked is not None and seq <= acked.segment:
            if seq < acked.segment:  # acknowledged; a crash came before its deletion
                found.unlink_failures += not unlink(path)
                continue
            start = acked.offset
        segment = Segment(seq, path)
        given = (ledger or {}).get(seq)
        try:
            counts, acked_here = _scan_segment(segment, start, acked_count if start else 0)
        except OSError as exc:
            found.bad_segments += 1
            head_acked = (acked_count or 0) if start else 0
            lost = 0 if given is None else max(0, given - head_acked)
            found.lost += lost
            report_loss(
                directory,
                path.name,
                {
                    "records_lost": lost,
                    "at_least": given is None,
                    "written": given,
                    "why": f"the segment cannot be read: {exc}",
                },
            )
            move_in(directory, path)
            continue
        found.torn += counts.torn
        found.corrupt += counts.corrupt
        _check_against_ledger(directory, found, segment, counts, given, acked_here, start)
        if not segment.records:
            if segment.lost:
                move_in(directory, path)  # kept for the operator, nothing left to ship
            else:
                found.unlink_failures += not unlink(path)  # acknowledged, or never written
            continue
        if not segment.lost and counts.end < segment.size:
            # A segment left by a process that died while writing it is still as long as it
            # was preallocated, zeros after its last frame: cut back to where its content
            # ends (the caller holds the lock), so that sizes on disk are what the cap counts.
            # A damaged one is kept as found.
            with contextlib.suppress(OSError):  # left uncut, the zeros are only read past again
                os.truncate(path, counts.end)
            segment.size = counts.end
        # Replayed bytes count as synced: they survived the previous process already.
        segment.synced = segment.checked = segment.size
        if not found.segments:
            found.head_offset = start
            found.head_acked = acked_here
        found.segments.append(segment)
    return found


def _missing(directory: Path, found: Inventory, seq: int, written: int, acked: int) -> None:
    """A segment the ledger names is gone: every record of it not acknowledged is lost."""
    lost = max(0, written - acked)
    if not lost:
        return  # emptied and deleted, or finished: a crash came before the ledger's update
    found.lost += lost
    report_loss(
        directory,
        segment_path(directory, seq).name,
        {
            "records_lost": lost,
            "at_least": False,
            "written": written,
            "acknowledged": acked,
            "intact": 0,
            "damage": [],
            "why": "the segment file is missing: deleted by something other than the spool",
        },
    )


def _check_against_ledger(
    directory: Path,
    found: Inventory,
    segment: Segment,
    counts: FrameCounts,
    written: int | None,
    acked: int,
    start: int,
) -> None:
    """Compare a replayed segment with what the ledger says it was given; report a loss."""
    if written is None:
        # No ledger (a spool written before it existed, or one that cannot be read): each
        # damaged region between intact records held at least one; a torn tail may be the
        # append a crash interrupted, which no caller saw return.
        lost, at_least = counts.corrupt, True
        segment.written = acked + counts.records
    else:
        lost, at_least = max(0, written - acked - counts.records), False
        segment.written = max(written, acked + counts.records)
    if not lost:
        return
    segment.lost = lost
    found.lost += lost
    try:
        fd = os.open(segment.path, OPEN_READ)
        try:
            regions = damage_regions(pread_reader(fd), start, os.fstat(fd).st_size)
        finally:
            os.close(fd)
    except OSError:
        regions = []
    report_loss(
        directory,
        segment.path.name,
        {
            "records_lost": lost,
            "at_least": at_least,
            "written": written,
            "acknowledged": acked,
            "intact": counts.records,
            "size": segment.size,
            "damage": regions,
            "why": (
                "damaged regions between intact records (no ledger: each held at least one)"
                if at_least
                else f"the ledger says {written} records were written to it, {acked} were "
                f"acknowledged and {counts.records} are intact"
            ),
        },
    )


def losses_not_reported(directory: Path, reported: set[str], *, live: bool) -> dict[str, int]:
    """What replay would find lost to damage now, without the lock or changing anything.

    For ``agent-logging status`` and ``drain``, beside the quarantine's reports: the same
    check against the ledger as :func:`take_stock`, for segments no report names yet.

    Args:
        directory: the spool directory.
        reported: names of segments the quarantine has a report for (skipped).
        live: whether a process owns the spool: then a segment the ledger names may have been
            created after the listing, and is missing only if an older one is on disk.

    Returns:
        Records lost (at least) by segment file name; segments without loss are left out.
    """
    try:
        files = _segment_files(directory)  # first: an ack writes ``acked`` before it deletes
    except FileNotFoundError:
        return {}  # emptied and removed by an adopting process: nothing is lost
    acked, acked_count = _read_acked(directory)
    ledger = read_ledger(directory) or {}
    floor = acked.segment if acked else 0
    newest = max((seq for seq, _ in files), default=-1)
    on_disk = {seq for seq, _ in files}
    lost: dict[str, int] = {}
    for seq, listed in ledger.items():
        if seq < floor or seq in on_disk or (live and seq > newest):
            continue
        head = (acked_count or 0) if acked and seq == acked.segment else 0
        if listed > head:
            lost[segment_path(directory, seq).name] = listed - head
    for seq, path in files:
        if seq < floor or path.name in reported:
            continue
        start = acked.offset if acked and seq == acked.segment else 0
        segment = Segment(seq, path)
        try:
            counts, head = _scan_segment(segment, start, acked_count if start else 0)
        except OSError:
            continue  # deleted meanwhile by its owner, or unreadable: replay will say
        given = ledger.get(seq)
        found = counts.corrupt if given is None else given - head - counts.records
        if found > 0:
            lost[path.name] = found
    return lost


def read_all(
    directory: str | os.PathLike[str],
    on_damage: Callable[[Path, Corrupt | TornTail], None] | None = None,
) -> Iterator[SpooledRecord]:
    """Every unacknowledged record of a spool directory, oldest first, without its lock.

    For ``agent-logging status``/``drain`` to inspect a spool whose owner is gone or alive.
    Torn tails and corrupt frames are skipped (and passed to ``on_damage``). With a live owner
    this is a snapshot that may still include records acknowledged while it runs, and may end
    in the half-written frame of an append in progress.

    Args:
        directory: the spool directory.
        on_damage: called with the segment's path and each damaged region found.

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
    acked, _ = _read_acked(path)
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
                elif on_damage is not None:
                    on_damage(file, item)
        except OSError:
            continue
        finally:
            os.close(fd)


def pread_reader(fd: int) -> Callable[[int, int], bytes]:
    """``read(offset, size)`` of an open file, by ``os.pread``."""

    def read(offset: int, size: int) -> bytes:
        return os.pread(fd, size, offset)

    return read


def _scan_segment(segment: Segment, start: int, acked_count: int | None) -> tuple[FrameCounts, int]:
    """Count a segment's intact records from ``start`` into ``segment``.

    Returns:
        What the scan found, and how many records were acknowledged before ``start``:
        ``acked_count`` when the ack file said, else the intact frames before it (an ack
        file of the first format).
    """
    fd = os.open(segment.path, OPEN_READ)
    try:
        size = os.fstat(fd).st_size
        read = pread_reader(fd)
        found = count_frames(read, start, size, window_bytes=_SCAN_WINDOW_BYTES)
        if start and acked_count is None:
            acked_count = count_frames(read, 0, start, window_bytes=_SCAN_WINDOW_BYTES).records
    finally:
        os.close(fd)
    segment.size = size
    segment.records = found.records
    segment.bytes = found.records * HEADER_BYTES + found.payload_bytes
    return found, acked_count or 0


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


def _read_acked(path: Path) -> tuple[SpoolPosition | None, int | None]:
    """The acknowledged position, and the records of its segment acknowledged before it
    (None: an ack file of the first format, which did not say); (None, None) to resend
    everything, when the file is missing or garbled."""
    try:
        fields = (path / "acked").read_text("ascii").split()
    except (OSError, UnicodeDecodeError):
        return None, None
    if not all(f.isdigit() for f in fields):
        return None, None
    if len(fields) == 3 and fields[0] == "1":
        return SpoolPosition(int(fields[1]), int(fields[2])), None
    if len(fields) == 4 and fields[0] == "2":
        return SpoolPosition(int(fields[1]), int(fields[2])), int(fields[3])
    return None, None


def write_acked(directory: Path, position: SpoolPosition, acked: int) -> None:
    """Record the acknowledged position: ``acked.tmp`` then ``os.replace``, no fsync.

    Args:
        directory: the spool directory.
        position: where the oldest unacknowledged record is.
        acked: how many records of ``position.segment`` were acknowledged before it.

    Raises:
        OSError: the file cannot be written or renamed.
    """
    # No fsync: after power loss an old or missing ack file only causes a resend.
    tmp = directory / "acked.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"2 {position.segment} {position.offset} {acked}\n".encode())
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


def retire(directory: Path, segment: Segment) -> bool:
    """A finished segment leaves the spool: deleted, or kept in the quarantine when it lost
    records (``segment.lost``, reported when the loss was found). False when that fails."""
    if segment.lost:
        return move_in(directory, segment.path)
    return unlink(segment.path)
