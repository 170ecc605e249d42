"""The spool's read side for a shipper in another process: plans, reports, failed reads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_logging.errors import SpoolError
from agent_logging.spool._batches import ReadPlan, read_segment
from agent_logging.spool._segments import SpooledRecord, SpoolPosition
from agent_logging.spool._spool import Spool
from tests.agent_logging.spool.test_spool import FRAME, SMALL, fill, rec


def read(
    planned: ReadPlan, max_records: int = 10_000
) -> tuple[list[SpooledRecord], int, int, int, int]:
    """What the shipper process does with a plan: read the file, without the owner's mapping."""
    return read_segment(
        Path(planned.path),
        planned.start,
        planned.limit,
        planned.checked,
        max_records,
        1 << 20,
        1 << 16,
    )


def ship_remotely(spool: Spool) -> list[bytes]:
    """Plan, read and report until the spool is empty, as the shipper process does."""
    shipped: list[bytes] = []
    while (planned := spool.plan_read()) is not None:
        records, end, payload, torn, corrupt = read(planned)
        start = SpoolPosition(planned.seq, planned.start)
        assert spool.report_read(start, end, len(records), payload, torn, corrupt)
        shipped.extend(r.payload for r in records)
    return shipped


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    with Spool.open(tmp_path / "spool", **SMALL) as opened:  # type: ignore[arg-type]
        yield opened


def test_plans_and_reports_ship_every_record_once_across_segments(spool: Spool) -> None:
    assert spool.plan_read() is None
    fill(spool, range(5))  # three segments: two sealed, one active
    first = spool.plan_read()
    assert first is not None
    assert (first.seq, first.start, first.limit, first.sealed) == (1, 0, 2 * FRAME, True)
    assert spool.plan_read() == first  # a plan does not consume
    assert ship_remotely(spool) == [rec(n) for n in range(5)]
    stats = spool.stats()
    assert (stats.records, stats.bytes, stats.segments) == (0, 0, 1)
    assert sorted(p.name for p in spool.directory.glob("seg-*")) == ["seg-0000000000000003.spool"]


def test_a_plan_stops_at_what_the_writer_committed(spool: Spool) -> None:
    fill(spool, range(4, 5))  # one frame in the active segment, preallocated beyond it
    planned = spool.plan_read()
    assert planned is not None
    assert (planned.start, planned.limit, planned.sealed) == (0, FRAME, False)
    records, end, _, torn, corrupt = read(planned)
    assert ([r.payload for r in records], end, torn, corrupt) == ([rec(4)], FRAME, 0, 0)


def test_a_partial_report_moves_the_head_to_its_end(spool: Spool) -> None:
    fill(spool, range(2))
    planned = spool.plan_read()
    assert planned is not None
    _, end, payload, torn, corrupt = read(planned, max_records=1)
    assert spool.report_read(SpoolPosition(1, 0), end, 1, payload, torn, corrupt)
    assert spool.stats().records == 1
    following = spool.plan_read()
    assert following is not None
    assert (following.seq, following.start) == (1, FRAME)
    assert ship_remotely(spool) == [rec(1)]


def test_a_report_that_no_longer_starts_at_the_head_is_ignored(tmp_path: Path) -> None:
    with Spool.open(tmp_path / "spool", segment_bytes=76, max_bytes=152) as spool:
        fill(spool, range(2))
        planned = spool.plan_read()
        assert planned is not None
        records, end, payload, torn, corrupt = read(planned)
        fill(spool, range(2, 6))  # full: drop_oldest deletes the segment being shipped
        assert spool.stats().dropped == 2
        assert not spool.report_read(SpoolPosition(1, 0), end, len(records), payload, torn, corrupt)
        head = spool.plan_read()
        # A stale skip (its range held damage only) neither moves the head nor counts.
        assert not spool.report_read(SpoolPosition(1, 0), end, 0, 0, 1, 1)
        assert spool.plan_read() == head
        assert (spool.stats().torn, spool.stats().corrupt) == (0, 0)
        assert ship_remotely(spool) == [rec(n) for n in range(2, 6)]
        assert spool.stats().dropped == 2


def test_damage_is_counted_at_the_report_once_however_often_it_is_read(spool: Spool) -> None:
    fill(spool, range(2))
    segment = spool.directory / "seg-0000000000000001.spool"
    fd = os.open(segment, os.O_WRONLY)
    try:
        os.pwrite(fd, b"#", 28)  # a payload byte of the first record
    finally:
        os.close(fd)
    for _ in range(2):  # a delivery that failed, then read again: not counted yet
        planned = spool.plan_read()
        assert planned is not None
        records, end, payload, torn, corrupt = read(planned)
        assert ([r.payload for r in records], corrupt) == ([rec(1)], 1)
    assert spool.stats().corrupt == 0
    assert spool.report_read(SpoolPosition(1, 0), end, len(records), payload, torn, corrupt)
    assert spool.stats().corrupt == 1
    assert ship_remotely(spool) == []
    assert spool.stats().corrupt == 1


def test_a_range_of_damage_only_is_skipped_and_its_sealed_segment_finished(spool: Spool) -> None:
    fill(spool, range(3))
    segment = spool.directory / "seg-0000000000000001.spool"
    segment.write_bytes(b"\xff" * (2 * FRAME))  # both frames of the sealed segment destroyed
    planned = spool.plan_read()
    assert planned is not None
    records, end, _, torn, corrupt = read(planned)
    assert (records, end, torn + corrupt) == ([], 2 * FRAME, 1)
    assert spool.report_read(SpoolPosition(1, 0), end, 0, 0, torn, corrupt)
    following = spool.plan_read()  # the emptied sealed segment is finished on the way
    assert following is not None
    assert following.seq == 2
    assert not segment.exists()
    assert ship_remotely(spool) == [rec(2)]


def test_a_sealed_segment_that_cannot_be_read_is_set_aside_and_its_records_lost(
    spool: Spool,
) -> None:
    fill(spool, range(3))
    planned = spool.plan_read()
    assert planned is not None
    spool.read_failed(SpoolPosition(1, 0), True, "Input/output error")
    stats = spool.stats()
    assert (stats.lost, stats.dropped, stats.bad_segments) == (2, 0, 1)
    assert ship_remotely(spool) == [rec(2)]


def test_an_active_segment_that_cannot_be_read_is_rotated_and_reported(spool: Spool) -> None:
    fill(spool, range(1))
    with pytest.raises(SpoolError, match=r"cannot read spool segment .*: Input/output error"):
        spool.read_failed(SpoolPosition(1, 0), False, "Input/output error")
    fill(spool, range(1, 2))  # on a new segment: the old one is sealed now
    planned = spool.plan_read()
    assert planned is not None
    assert (planned.seq, planned.sealed) == (1, True)
    assert ship_remotely(spool) == [rec(0), rec(1)]


def test_a_closed_spool_refuses_plans_and_reports(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path / "spool")
    fill(spool, range(1))
    spool.close()
    with pytest.raises(SpoolError, match="closed"):
        spool.plan_read()
    with pytest.raises(SpoolError, match="closed"):
        spool.report_read(SpoolPosition(1, 0), FRAME, 1, 9, 0, 0)


def test_a_plan_after_a_batch_in_flight_reads_on_from_its_end(spool: Spool) -> None:
    fill(spool, range(5))  # segments 1 and 2 sealed (two frames each), 3 active (one)
    assert spool.plan_read_after(SpoolPosition(1, FRAME)) == ReadPlan(
        1, str(spool.directory / "seg-0000000000000001.spool"), FRAME, 2 * FRAME, 0, True
    )
    following = spool.plan_read_after(SpoolPosition(1, 2 * FRAME))  # the end of a sealed one
    assert following is not None
    assert (following.seq, following.start, following.limit) == (2, 0, 2 * FRAME)
    assert spool.plan_read_after(SpoolPosition(3, FRAME)) is None  # nothing after, yet
    fill(spool, range(5, 6))
    latest = spool.plan_read_after(SpoolPosition(3, FRAME))
    assert latest is not None
    assert (latest.seq, latest.start, latest.limit, latest.sealed) == (3, FRAME, 2 * FRAME, False)
    first = spool.plan_read()  # a read-ahead changes nothing: the head is where it was
    assert first is not None
    assert (first.seq, first.start) == (1, 0)


def test_a_plan_after_a_dropped_segment_has_nothing(tmp_path: Path) -> None:
    with Spool.open(tmp_path / "spool", segment_bytes=76, max_bytes=152) as spool:
        fill(spool, range(6))  # full: drop_oldest deleted segment 1
        assert spool.stats().dropped == 2
        assert spool.plan_read_after(SpoolPosition(1, FRAME)) is None
        current = spool.plan_read()
        assert current is not None
        assert (current.seq, current.start) == (2, 0)
