"""The durable spool: writing, replay, acknowledgement, size cap, fsync policies, forks."""

from __future__ import annotations

import errno
import mmap
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_logging.errors import ConfigurationError, SpoolError
from agent_logging.spool import _spool
from agent_logging.spool._framing import HEADER_BYTES, encode_frame
from agent_logging.spool._quarantine import read_quarantine
from agent_logging.spool._spool import Batch, Spool, SpooledRecord, SpoolPosition, read_all

FRAME = 35  # a 26-byte header and a 9-byte payload
SMALL = {"segment_bytes": 76, "max_bytes": 1000}  # two frames per segment


def rec(n: int) -> bytes:
    return b'{"n":%03d}' % n


def fill(spool: Spool, numbers: range) -> None:
    for n in numbers:
        assert spool.append(1000 + n, rec(n))


def drain(spool: Spool) -> list[bytes]:
    """Ship everything: peek and ack until the spool is empty."""
    shipped: list[bytes] = []
    while (batch := spool.peek_batch()) is not None:
        shipped.extend(r.payload for r in batch.records)
        spool.ack(batch)
    return shipped


def segment_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("seg-*"))


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "spool"


@pytest.fixture
def spool(directory: Path) -> Iterator[Spool]:
    with Spool.open(directory, **SMALL) as opened:  # type: ignore[arg-type]
        yield opened


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fd passed to os.fsync, in order (the real fsync still runs)."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_append_peek_ack_round_trip(spool: Spool) -> None:
    fill(spool, range(2))
    stats = spool.stats()
    assert (stats.records, stats.bytes, stats.oldest_ts_ns) == (2, 2 * FRAME, 1000)
    assert (stats.appended, stats.dropped, stats.segments, stats.disk_bytes) == (2, 0, 1, 70)

    batch = spool.peek_batch()
    assert batch is not None
    assert batch.records == (SpooledRecord(1000, rec(0)), SpooledRecord(1001, rec(1)))
    assert spool.peek_batch() == batch  # a peek does not consume
    spool.ack(batch)

    assert spool.peek_batch() is None
    stats = spool.stats()
    assert (stats.records, stats.bytes, stats.oldest_ts_ns) == (0, 0, None)


def test_peek_limits(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(5))
        batch = spool.peek_batch(max_records=2)
        assert batch is not None
        assert [r.payload for r in batch.records] == [rec(0), rec(1)]
        spool.ack(batch)
        batch = spool.peek_batch(max_bytes=17)  # 9 + 9 > 17
        assert batch is not None
        assert [r.payload for r in batch.records] == [rec(2)]
        spool.ack(batch)
        batch = spool.peek_batch(max_bytes=1)  # one record even when it alone is larger
        assert batch is not None
        assert [r.payload for r in batch.records] == [rec(3)]
        with pytest.raises(ValueError, match="limits must be >= 1"):
            spool.peek_batch(max_records=0)


def test_acks_come_in_order_and_once(spool: Spool) -> None:
    fill(spool, range(3))
    first = spool.peek_batch(max_records=1)
    assert first is not None
    spool.ack(first)
    with pytest.raises(SpoolError, match=r"ack out of order: the batch starts at \(1, 0\), "):
        spool.ack(first)
    stranger = Batch((SpooledRecord(1, b"x"),), SpoolPosition(1, 105), SpoolPosition(1, 70))
    with pytest.raises(SpoolError, match=r"the oldest unacknowledged record is at \(1, 35\)"):
        spool.ack(stranger)
    assert drain(spool) == [rec(1), rec(2)]


def test_rotation_batches_per_segment_and_deletion_after_ack(spool: Spool, directory: Path) -> None:
    fill(spool, range(5))
    assert segment_names(directory) == [
        "seg-0000000000000001.spool",
        "seg-0000000000000002.spool",
        "seg-0000000000000003.spool",
    ]
    assert spool.stats().segments == 3

    batch = spool.peek_batch()
    assert batch is not None
    assert [r.payload for r in batch.records] == [rec(0), rec(1)]  # one segment per batch
    spool.ack(batch)
    assert segment_names(directory)[0] == "seg-0000000000000002.spool"
    assert (directory / "acked").read_text() == "2 2 0 0\n"

    assert drain(spool) == [rec(2), rec(3), rec(4)]
    # The active segment stays; the acked position is persisted inside it.
    assert segment_names(directory) == ["seg-0000000000000003.spool"]
    assert (directory / "acked").read_text() == "2 3 35 1\n"


def test_restart_replays_exactly_the_unacked_records_in_order(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(5))
        batch = spool.peek_batch(max_records=1)
        assert batch is not None
        spool.ack(batch)

    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        stats = spool.stats()
        assert (stats.records, stats.bytes, stats.oldest_ts_ns) == (4, 4 * FRAME, 1001)
        assert (stats.appended, stats.torn, stats.corrupt) == (0, 0, 0)
        # A new segment after the replayed ones: never appended to a previous run's file.
        assert segment_names(directory)[-1] == "seg-0000000000000004.spool"
        fill(spool, range(5, 7))
        batch = spool.peek_batch()
        assert batch is not None
        assert batch.records[0] == SpooledRecord(1001, rec(1))  # timestamps survive
        assert drain(spool) == [rec(n) for n in range(1, 7)]


def test_segment_kept_by_a_crash_after_its_ack_is_not_resent(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(3))
        first = directory / "seg-0000000000000001.spool"
        saved = first.read_bytes()
        batch = spool.peek_batch()
        assert batch is not None
        spool.ack(batch)
        assert not first.exists()
    first.write_bytes(saved)  # as if the process died between the ack file and the unlink

    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        assert not first.exists()
        assert drain(spool) == [rec(2)]


def test_garbled_ack_file_resends_everything(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(3))
        batch = spool.peek_batch(max_records=2)
        assert batch is not None
        spool.ack(batch)
    (directory / "acked").write_text("not a position\n")
    with Spool.open(directory) as spool:
        assert drain(spool) == [rec(0), rec(1), rec(2)]


def test_torn_tail_is_skipped_and_counted_and_newer_segments_still_come(
    directory: Path,
) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(2))
    first = directory / "seg-0000000000000001.spool"
    with first.open("ab") as f:  # the first 20 bytes of a frame: a kill mid-write
        f.write(encode_frame(1002, rec(2))[:20])

    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        stats = spool.stats()
        assert (stats.records, stats.torn, stats.corrupt) == (2, 1, 0)
        fill(spool, range(3, 5))
        assert drain(spool) == [rec(0), rec(1), rec(3), rec(4)]
        assert spool.stats().torn == 1  # counted once, not again when read
        assert not first.exists()  # finished once its records were acked


def test_truncated_last_frame_is_torn(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(3))
    first = directory / "seg-0000000000000001.spool"
    os.truncate(first, 3 * FRAME - 5)
    with Spool.open(directory) as spool:
        assert (spool.stats().records, spool.stats().torn) == (2, 1)
        assert drain(spool) == [rec(0), rec(1)]


def test_corrupt_middle_frame_is_skipped_and_the_rest_kept(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(3))
    first = directory / "seg-0000000000000001.spool"
    data = bytearray(first.read_bytes())
    data[FRAME + 28] ^= 0x01  # a payload byte of the second record
    first.write_bytes(bytes(data))

    with Spool.open(directory) as spool:
        stats = spool.stats()
        assert (stats.records, stats.bytes, stats.corrupt, stats.torn) == (2, 70, 1, 0)
        assert drain(spool) == [rec(0), rec(2)]
        assert spool.stats().corrupt == 1


def test_damage_in_the_active_segment_is_counted_once(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(3))
        fd = os.open(directory / "seg-0000000000000001.spool", os.O_WRONLY)
        try:
            os.pwrite(fd, b"#", FRAME + 28)  # a payload byte of the second record
        finally:
            os.close(fd)
        for _ in range(2):  # peeking again without an ack must not count it again
            batch = spool.peek_batch()
            assert batch is not None
            assert [r.payload for r in batch.records] == [rec(0), rec(2)]
            assert spool.stats().corrupt == 1


def test_a_deleted_active_segment_still_ships_from_its_mapping(
    spool: Spool, directory: Path
) -> None:
    fill(spool, range(1))
    (directory / "seg-0000000000000001.spool").unlink()  # by someone else
    fill(spool, range(1, 2))  # the mapping keeps the file's data until it is sealed
    assert drain(spool) == [rec(0), rec(1)]
    stats = spool.stats()
    assert (stats.bad_segments, stats.dropped, stats.records, stats.write_errors) == (0, 0, 0, 0)


def test_a_lost_sealed_segment_is_counted_and_reported(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(3))  # two in the first segment, sealed; one in the active one
        (directory / "seg-0000000000000001.spool").unlink()  # by someone else
        assert drain(spool) == [rec(2)]
        stats = spool.stats()
        assert (stats.bad_segments, stats.lost, stats.dropped, stats.records) == (1, 2, 0, 0)
    (report,) = read_quarantine(directory).reports
    assert (report["segment"], report["records_lost"]) == ("seg-0000000000000001.spool", 2)
    assert report["why"].startswith("the segment cannot be read: ")


def test_unreadable_segment_is_set_aside(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(1))
    (directory / "seg-0000000000000005.spool").mkdir()  # opens, but every read fails

    with Spool.open(directory) as spool:
        assert spool.stats().bad_segments == 1
        assert (directory / "quarantine" / "seg-0000000000000005.spool").is_dir()
        assert segment_names(directory)[-1] == "seg-0000000000000006.spool"
        assert drain(spool) == [rec(0)]


def test_drop_newest_refuses_and_counts(directory: Path) -> None:
    with Spool.open(directory, segment_bytes=76, max_bytes=152, full_policy="drop_newest") as spool:
        fill(spool, range(4))
        assert spool.append(1004, rec(4)) is False
        assert spool.append(1005, rec(5)) is False
        stats = spool.stats()
        assert (stats.records, stats.dropped, stats.appended, stats.disk_bytes) == (4, 2, 4, 140)
        assert drain(spool) == [rec(n) for n in range(4)]


def test_drop_oldest_deletes_the_oldest_segment_and_counts_its_records(
    directory: Path,
) -> None:
    with Spool.open(directory, segment_bytes=76, max_bytes=152) as spool:
        fill(spool, range(5))
        stats = spool.stats()
        assert (stats.records, stats.dropped, stats.appended, stats.oldest_ts_ns) == (
            3,
            2,
            5,
            1002,
        )
        assert "seg-0000000000000001.spool" not in segment_names(directory)
        assert drain(spool) == [rec(2), rec(3), rec(4)]


def test_drop_oldest_takes_the_segment_of_a_batch_in_flight(directory: Path) -> None:
    with Spool.open(directory, segment_bytes=76, max_bytes=152) as spool:
        fill(spool, range(4))
        in_flight = spool.peek_batch()
        assert in_flight is not None
        assert spool.append(1004, rec(4))  # the cap drops segment 1 under the shipper
        spool.ack(in_flight)  # accepted and ignored: its records already left the spool
        assert spool.stats().dropped == 2
        assert drain(spool) == [rec(2), rec(3), rec(4)]


class _SignallingCondition(threading.Condition):
    """A Condition that tells the test when a thread starts waiting on it."""

    def __init__(self, lock: Any, waiting: threading.Event) -> None:
        super().__init__(lock)
        self._waiting = waiting

    def wait(self, timeout: float | None = None) -> bool:
        self._waiting.set()
        return super().wait(timeout)


def test_block_waits_for_an_ack_from_another_thread(directory: Path) -> None:
    with Spool.open(
        directory, segment_bytes=76, max_bytes=152, full_policy="block", block_timeout_s=30.0
    ) as spool:
        fill(spool, range(4))
        waiting = threading.Event()
        spool._room = _SignallingCondition(spool._lock, waiting)
        result: list[bool] = []
        writer = threading.Thread(target=lambda: result.append(spool.append(1004, rec(4))))
        writer.start()
        assert waiting.wait(10.0)  # the writer is blocked on the full spool
        batch = spool.peek_batch()
        assert batch is not None
        spool.ack(batch)  # frees segment 1
        writer.join(10.0)
        assert result == [True]
        assert spool.stats().dropped == 0
        assert drain(spool) == [rec(2), rec(3), rec(4)]


def test_block_gives_up_after_its_timeout_and_counts(directory: Path) -> None:
    with Spool.open(
        directory, segment_bytes=76, max_bytes=152, full_policy="block", block_timeout_s=0.01
    ) as spool:
        fill(spool, range(4))
        assert spool.append(1004, rec(4)) is False
        assert spool.stats().dropped == 1
        assert drain(spool) == [rec(n) for n in range(4)]


def test_lock_held_raises_with_the_owner_pid(directory: Path) -> None:
    with Spool.open(directory):
        message = rf"spool {re.escape(str(directory))} is in use by pid {os.getpid()}$"
        with pytest.raises(SpoolError, match=message):
            Spool.open(directory)
        assert Spool.try_open(directory) is None
    reopened = Spool.try_open(directory)
    assert reopened is not None
    reopened.close()


def test_a_segment_the_disk_has_no_room_for_is_counted_and_retried(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.posix_fallocate

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(2))  # the first segment is full: the next append rotates
        monkeypatch.setattr(os, "posix_fallocate", no_space)
        assert spool.append(1002, rec(2)) is False
        assert spool.stats().write_errors == 1
        assert segment_names(directory) == ["seg-0000000000000001.spool"]  # none half-made
        monkeypatch.setattr(os, "posix_fallocate", real)
        # Not tried again at once: a flat-out logger would create and delete a file a call.
        assert spool.append(1003, rec(3)) is False
        assert spool.stats().write_errors == 2
        monkeypatch.setattr(_spool, "_RETRY_S", 0.0)
        spool._retry_at = 0.0  # the pause is over
        assert spool.append(1003, rec(3)) is True  # on a fresh segment
        assert drain(spool) == [rec(0), rec(1), rec(3)]
        assert spool.stats().appended == 3


@pytest.fixture
def unmappable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem that cannot map a file shared and writable (``mmap`` says ENODEV)."""

    def no_mapping(fd: int, length: int) -> mmap.mmap:
        raise OSError(errno.ENODEV, "No such device")

    monkeypatch.setattr(mmap, "mmap", no_mapping)


@pytest.mark.usefixtures("unmappable")
def test_a_spool_on_a_filesystem_that_cannot_map_it_writes_with_pwrite(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real_pwrite = os.pwrite

    def counting(fd: int, data: Any, offset: int) -> int:
        if Path(f"/proc/self/fd/{fd}").resolve().name.startswith("seg-"):
            writes.append(offset)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counting)
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        assert spool.unmapped_reason is not None
        assert re.fullmatch(
            r"cannot map .*seg-[0-9]+\.spool shared and writable: No such device",
            spool.unmapped_reason,
        )
        fill(spool, range(5))  # three segments: two sealed, one active
        assert writes == [0, FRAME] * 2 + [0]  # one pwrite per record, at its offset
        batch = spool.peek_batch()
        assert batch is not None
        spool.ack(batch)
        assert [r.payload for r in batch.records] == [rec(0), rec(1)]
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        assert drain(spool) == [rec(n) for n in range(2, 5)]
        assert (spool.stats().torn, spool.stats().corrupt, spool.stats().write_errors) == (0, 0, 0)


@pytest.mark.usefixtures("unmappable")
def test_a_failed_pwrite_is_counted_and_the_next_append_recovers(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pwrite = os.pwrite
    failures = [OSError(errno.EIO, "Input/output error")]

    def failing_once(fd: int, data: Any, offset: int) -> int:
        if failures:
            real_pwrite(fd, bytes(data)[:10], offset)  # part of the frame reached the disk
            raise failures.pop()
        return real_pwrite(fd, data, offset)

    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(1))
        monkeypatch.setattr(os, "pwrite", failing_once)
        assert spool.append(1001, rec(1)) is False
        assert (spool.stats().write_errors, spool.stats().dropped) == (1, 0)
        assert spool.append(1002, rec(2)) is True  # on a fresh segment
        assert drain(spool) == [rec(0), rec(2)]
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        assert drain(spool) == []  # the partial frame was never counted, nor replayed


@pytest.mark.usefixtures("unmappable")
def test_a_sealed_unmapped_writer_refuses_to_write(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        writer = spool._writer
    with pytest.raises(ValueError, match="sealed"):
        writer.write_unmapped(0, b"x")


def test_a_failed_allocation_names_what_was_asked(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")  # not a full disk: no smaller try

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(SpoolError, match=r"cannot allocate [0-9,]+ bytes on disk for .*: Input"):
        Spool.open(directory)


def test_a_failed_copy_is_counted_and_the_next_append_recovers(spool: Spool) -> None:
    fill(spool, range(1))
    assert spool._writer.mapping is not None
    spool._writer.mapping.close()  # a bug's worth of damage: the mapping gone under the writer
    batch = spool.peek_batch()  # read from the file instead
    assert batch is not None
    assert [r.payload for r in batch.records] == [rec(0)]
    assert spool.append(1001, rec(1)) is False
    assert (spool.stats().write_errors, spool.stats().dropped) == (1, 0)
    assert spool.append(1002, rec(2)) is True  # on a fresh segment
    assert drain(spool) == [rec(0), rec(2)]
    assert spool.stats().appended == 2


def test_segments_are_preallocated_and_cut_back_to_their_content(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(3))  # two in the first segment, one in the second
        first, second = (directory / name for name in segment_names(directory))
        assert first.stat().st_size == 2 * FRAME  # sealed: cut back
        assert second.stat().st_size == SMALL["segment_bytes"]  # active: preallocated
        assert second.read_bytes()[FRAME:] == bytes(SMALL["segment_bytes"] - FRAME)
        assert [r.payload for r in read_all(directory)] == [rec(0), rec(1), rec(2)]
    assert second.stat().st_size == FRAME  # closed: cut back


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc (Linux)")
def test_the_mapping_s_written_pages_are_given_back_and_their_data_kept(directory: Path) -> None:
    def resident_kib(name: str) -> int:
        total, inside = 0, False
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as smaps:
            for line in smaps:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                    inside = fields[-1].endswith(name)
                elif inside and fields[0] == "Rss:":
                    total += int(fields[1])
        return total

    record = b"x" * 1000
    with Spool.open(directory, segment_bytes=16 * 2**20, max_bytes=64 * 2**20) as spool:
        for n in range(6000):  # 6 MiB into one segment
            assert spool.append(n, record)
        assert len(segment_names(directory)) == 1
        assert resident_kib(segment_names(directory)[0]) <= 1024 + 4  # not 6 MiB
        shipped = 0
        while (batch := spool.peek_batch()) is not None:
            assert all(r.payload == record for r in batch.records)
            shipped += len(batch.records)
            spool.ack(batch)
        assert shipped == 6000


def test_a_record_larger_than_a_segment_gets_a_segment_of_its_own(directory: Path) -> None:
    big = b"x" * (3 * SMALL["segment_bytes"])  # type: ignore[operator]
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(1))
        assert spool.append(1001, big) is True
        fill(spool, range(2, 3))
        names = segment_names(directory)
        assert len(names) == 3
        assert (directory / names[1]).stat().st_size == HEADER_BYTES + len(big)
        assert drain(spool) == [rec(0), big, rec(2)]


def test_a_previous_run_s_preallocated_tail_is_cut_and_not_counted_as_damage(
    directory: Path,
) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(1))
        first = directory / segment_names(directory)[0]
        saved = first.read_bytes()  # the active segment: one frame, then zeros
    first.write_bytes(saved)  # as a SIGKILL leaves it: never cut back
    assert first.stat().st_size == SMALL["segment_bytes"]
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        assert first.stat().st_size == FRAME
        stats = spool.stats()
        assert (stats.records, stats.torn, stats.corrupt, stats.disk_bytes) == (1, 0, 0, FRAME)
        assert drain(spool) == [rec(0)]


def test_oversized_record_is_refused(spool: Spool) -> None:
    with pytest.raises(ValueError, match="at most 16777216 bytes"):
        spool.append(1, b"x" * (16 * 2**20 + 1))
    assert spool.stats().records == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"full_policy": "drop_random"}, "full_policy must be one of drop_oldest, drop_newest"),
        ({"fsync": "sometimes"}, "fsync must be one of batch, interval, always, never"),
        ({"segment_bytes": 100, "max_bytes": 150}, r"segment_bytes \(100\) must exceed 26"),
        ({"block_timeout_s": -1.0}, "block_timeout_s must be >= 0"),
    ],
)
def test_invalid_options(directory: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Spool.open(directory, **options)


def test_fsync_never(directory: Path, fsyncs: list[int]) -> None:
    with Spool.open(directory, fsync="never") as spool:
        fill(spool, range(3))
        drain(spool)
    assert fsyncs == []


def test_fsync_always_syncs_each_append(directory: Path, fsyncs: list[int]) -> None:
    with Spool.open(directory, fsync="always") as spool:
        assert len(fsyncs) == 1  # the directory, for the new segment's name
        fill(spool, range(3))
        assert len(fsyncs) == 4
    assert len(fsyncs) == 4  # nothing left to sync at close


def test_fsync_batch_syncs_once_per_peek_with_new_data(directory: Path, fsyncs: list[int]) -> None:
    with Spool.open(directory, fsync="batch", **SMALL) as spool:  # type: ignore[arg-type]
        fsyncs.clear()
        fill(spool, range(2))
        assert fsyncs == []
        spool.peek_batch()
        assert len(fsyncs) == 1
        spool.peek_batch()
        assert len(fsyncs) == 1  # nothing new
        fill(spool, range(2, 3))  # rotates: a new segment and a new name in the directory
        spool.peek_batch()
        assert len(fsyncs) == 3  # the new segment and the directory
        fill(spool, range(3, 4))
    assert len(fsyncs) == 4  # close


def test_fsync_interval_is_driven_by_sync_if_due(
    directory: Path, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(_spool, "_now", lambda: now[0])
    with Spool.open(directory, fsync="interval", fsync_interval_s=1.0) as spool:
        fsyncs.clear()
        fill(spool, range(2))
        spool.peek_batch()
        now[0] = 100.5
        assert spool.sync_if_due() is False
        assert fsyncs == []
        now[0] = 101.0
        assert spool.sync_if_due() is True
        assert len(fsyncs) == 1
        assert spool.sync_if_due() is False


def test_wake_is_set_when_crossing_wake_bytes(spool: Spool) -> None:
    spool.wake_bytes = 80
    fill(spool, range(2))  # 70 bytes
    assert not spool.wake.is_set()
    fill(spool, range(2, 3))  # 105
    assert spool.wake.is_set()
    spool.wake.clear()
    fill(spool, range(3, 4))  # still above: no new crossing
    assert not spool.wake.is_set()


def test_close_is_idempotent_and_later_appends_are_dropped(directory: Path) -> None:
    spool = Spool.open(directory)
    fill(spool, range(1))
    spool.close()
    spool.close()
    assert spool.append(1001, rec(1)) is False
    assert spool.stats().dropped == 1
    with pytest.raises(SpoolError, match="is closed"):
        spool.peek_batch()
    with Spool.open(directory) as reopened:
        assert drain(reopened) == [rec(0)]


def test_after_fork_in_child_closes_fds_and_touches_no_file(directory: Path) -> None:
    spool = Spool.open(directory)
    fill(spool, range(1))
    fds = (spool._writer.fd, spool._lock_fd)
    before = sorted(p.name for p in directory.iterdir())
    spool.after_fork_in_child()
    spool.after_fork_in_child()
    for fd in fds:
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)
    assert spool._writer.mapping is None  # the child's copy of the mapping is gone
    assert spool.append(1001, rec(1)) is False
    with pytest.raises(SpoolError, match="it belongs to the parent of a fork"):
        spool.peek_batch()
    spool.close()
    assert sorted(p.name for p in directory.iterdir()) == before
    # In a real fork the parent keeps the lock; here its only holder closed it.
    with Spool.open(directory) as reopened:
        assert drain(reopened) == [rec(0)]


def test_read_all_reads_unacked_records_without_the_lock(directory: Path) -> None:
    with Spool.open(directory, **SMALL) as spool:  # type: ignore[arg-type]
        fill(spool, range(5))
        batch = spool.peek_batch(max_records=1)
        assert batch is not None
        spool.ack(batch)
        assert list(read_all(directory)) == [SpooledRecord(1000 + n, rec(n)) for n in range(1, 5)]
    with (directory / "seg-0000000000000003.spool").open("ab") as f:
        f.write(b"\xf7\x01torn")
    assert [r.payload for r in read_all(directory)] == [rec(n) for n in range(1, 5)]
    with pytest.raises(SpoolError, match=r"cannot read spool .*missing: .*No such file"):
        list(read_all(directory / "missing"))


@pytest.mark.integration
@pytest.mark.parametrize("mapped", [True, False], ids=["mapped", "pwrite"])
def test_records_survive_sigkill_of_the_writer(directory: Path, mapped: bool) -> None:
    script = textwrap.dedent(
        f"""
        import errno, mmap, os, signal
        from agent_logging.spool._spool import Spool
        def no_mapping(fd, length):
            raise OSError(errno.ENODEV, "No such device")
        if not {mapped}:
            mmap.mmap = no_mapping
        spool = Spool.open({str(directory)!r}, fsync="never")
        assert (spool.unmapped_reason is None) is {mapped}
        for n in range(2000):
            spool.append(1000 + n, b'{{"n":%04d}}' % n)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    root = Path(__file__).absolute().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    with Spool.open(directory) as spool:
        assert spool.stats().records == 2000
        assert drain(spool) == [b'{"n":%04d}' % n for n in range(2000)]


@pytest.mark.integration
def test_forked_child_cannot_use_the_parents_spool(directory: Path) -> None:
    with Spool.open(directory) as spool:
        fill(spool, range(1))
        pid = os.fork()
        if pid == 0:  # the child: report through the exit status only
            code = 1
            try:
                if spool.append(1, b"child") is False and Spool.try_open(directory) is None:
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        fill(spool, range(1, 2))
        assert drain(spool) == [rec(0), rec(1)]
