"""The gate does not pass over a loss (issue 20, item 5): damage, deletion and a full disk.

Each case starts as the issue's adversary did: a 1,000-record spool whose owner logged while
Loki was down and then stopped, damaged on disk, then ``agent-logging drain`` against a Loki
that is up. Before the ledger (``spool._ledger``), every one of them passed the gate ("all 500
spooled records ... visible", exit 0) and the damaged segment was deleted.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

import agent_logging
from agent_logging import _cli
from agent_logging.pipeline._render import rfc3339_ns
from agent_logging.spool._framing import HEADER_BYTES, encode_frame
from agent_logging.spool._ledger import LEDGER_NAME, read_ledger, write_ledger
from agent_logging.spool._quarantine import read_quarantine
from agent_logging.spool._spool import Spool, read_all
from tests.agent_logging.shipping.test_durable import configure, durable
from tests.lokisim import LokiServer

RECORDS = 1000


def line(seq: int, ts_ns: int) -> bytes:
    """A record of the spool's service; every line has the same length (fixed-width seq)."""
    return orjson.dumps(
        {
            "ts": rfc3339_ns(ts_ns),
            "level": "info",
            "event": "spooled",
            "service": "svc",
            "layer": "node",
            "env": "test",
            "seq": f"{seq:06d}",
        }
    )


BASE_NS = time.time_ns() - 60_000_000_000
FRAME = HEADER_BYTES + len(line(0, BASE_NS))


def spool_of(directory: Path, count: int = RECORDS, **options: int) -> None:
    """A spool whose owner logged ``count`` records while Loki was down, then stopped."""
    with Spool.open(directory, **options) as spool:  # type: ignore[arg-type]
        for seq in range(count):
            assert spool.append(BASE_NS + seq * 1000, line(seq, BASE_NS + seq * 1000))


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("seg-*.spool"))


def truncate_mid_record(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: 500 * FRAME + 10])


def flip_40_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for n in range(40):  # one byte in each of 40 records, 25 records apart
        data[(n * 25 + 3) * FRAME + 40] ^= 0xFF
    path.write_bytes(bytes(data))


def randomise(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def empty(path: Path) -> None:
    path.write_bytes(b"")


def zero(path: Path) -> None:
    """Zeroed as a preallocated segment nobody wrote to looks."""
    path.write_bytes(bytes(8 * 2**20))


def delete(path: Path) -> None:
    path.unlink()


DAMAGE: dict[str, tuple[Callable[[Path], None], int]] = {
    "a segment truncated mid-record": (truncate_mid_record, 500),
    "40 bytes flipped": (flip_40_bytes, 40),
    "a segment replaced by random bytes": (randomise, RECORDS),
    "a segment emptied": (empty, RECORDS),
    "a segment zeroed": (zero, RECORDS),
    "a segment deleted": (delete, RECORDS),
}


def drain_args(root: Path, url: str, *extra: str) -> list[str]:
    return ["drain", "--spool-dir", str(root), "--loki-url", url, "--timeout-s", "10", *extra]


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_drain_fails_on_every_kind_of_damage_with_the_count_and_where(
    kind: str, loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, lost = DAMAGE[kind]
    root = tmp_path / "spool"
    spool_of(root / "svc")
    (segment,) = segments(root / "svc")
    damage(segment)

    assert _cli.main(drain_args(root, loki.url)) == 1
    err = capsys.readouterr().err
    assert f"drain: {lost} records were lost to damage in the spool before they" in err
    assert f"seg-0000000000000001.spool: {lost} records lost (" in err
    assert "Do not reimage yet." in err
    assert "pass --accept-loss, or remove the quarantine/ folder" in err
    assert len(loki.entries()) == RECORDS - lost  # what survived was shipped
    (report,) = read_quarantine(root / "svc").reports
    assert (report["records_lost"], report["written"], report["intact"]) == (
        lost,
        RECORDS,
        RECORDS - lost,
    )
    # The damaged file is kept (nothing to keep when it was deleted).
    kept = root / "svc" / "quarantine" / "seg-0000000000000001.spool"
    assert kept.exists() == (kind != "a segment deleted")

    # The loss stays in the gate, run after run, until accepted.
    assert _cli.main(drain_args(root, loki.url)) == 1
    assert f"{lost} records were lost to damage" in capsys.readouterr().err
    assert _cli.main(drain_args(root, loki.url, "--accept-loss")) == 0
    out = capsys.readouterr().out
    assert f"{lost} records were lost to damage" in out
    assert out.rstrip().endswith("accepted as lost (--accept-loss)")
    shutil.rmtree(root / "svc" / "quarantine")  # the operator clears it
    assert _cli.main(drain_args(root, loki.url)) == 0


@pytest.mark.integration
def test_torn_truncation_at_the_exact_place_says_where(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    spool_of(root / "svc")
    truncate_mid_record(segments(root / "svc")[0])
    assert _cli.main(drain_args(root, loki.url)) == 1
    err = capsys.readouterr().err
    assert f"torn at bytes {500 * FRAME}..{500 * FRAME + 10}" in err
    assert "damaged regions found: 1 torn, 0 corrupt" in err


@pytest.mark.integration
def test_a_randomised_segment_between_two_intact_ones_costs_exactly_its_records(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    # 300 records per segment: segments 1-3 full, 100 records in segment 4.
    spool_of(root / "svc", segment_bytes=300 * FRAME, max_bytes=2**30)
    assert len(segments(root / "svc")) == 4
    randomise(segments(root / "svc")[1])
    assert _cli.main(drain_args(root, loki.url)) == 1
    err = capsys.readouterr().err
    assert "drain: 300 records were lost to damage" in err
    assert "seg-0000000000000002.spool: 300 records lost" in err
    assert len(loki.entries()) == 700


@pytest.mark.integration
def test_a_spool_acknowledged_in_part_counts_only_what_was_not_shipped(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "spool" / "svc"
    spool_of(directory)
    with Spool.open(directory) as spool:  # a previous run shipped 400 of them
        batch = spool.peek_batch(max_records=400)
        assert batch is not None
        spool.ack(batch)
    truncate_mid_record(segments(directory)[0])  # 100 of the 600 unshipped lost
    assert _cli.main(drain_args(tmp_path / "spool", loki.url)) == 1
    assert "drain: 500 records were lost to damage" in capsys.readouterr().err
    (report,) = read_quarantine(directory).reports
    assert (report["written"], report["acknowledged"], report["intact"]) == (1000, 400, 100)
    assert report["records_lost"] == 500


def test_a_crash_torn_tail_is_not_a_loss(tmp_path: Path) -> None:
    # A kill in the middle of an append leaves half a frame after the last one; that append
    # never returned, so nothing the caller was promised is missing.
    directory = tmp_path / "svc"
    spool_of(directory, 10)
    with (segments(directory)[0]).open("ab") as segment:
        segment.write(encode_frame(BASE_NS, b"x" * 50)[:30])
    with Spool.open(directory) as spool:
        stats = spool.stats()
        assert (stats.records, stats.torn, stats.lost) == (10, 1, 0)
    assert read_quarantine(directory).reports == []


def test_status_shows_the_damage_counters_and_the_loss_before_anything_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    spool_of(root / "svc")
    flip_40_bytes(segments(root / "svc")[0])
    assert _cli.main(["status", "--spool-dir", str(root), "--json"]) == 0
    (row,) = orjson.loads(capsys.readouterr().out)
    assert (row["records"], row["torn"], row["corrupt"], row["lost"]) == (960, 0, 40, 40)
    assert row["losses"] == [
        f"{root / 'svc' / 'seg-0000000000000001.spool'}: 40 records lost "
        "(found now, not yet reported)"
    ]
    assert not (root / "svc" / "quarantine").exists()  # status changes nothing

    assert _cli.main(["status", "--spool-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[-3:] == ["0", "40", "40"]
    assert "records lost to damage:" in out
    assert "pass --accept-loss, or remove the quarantine/ folder" in out.replace("\n", " ")


def test_a_spool_written_before_the_ledger_is_read_and_its_damage_counted(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "svc"
    spool_of(directory, 10)
    (directory / LEDGER_NAME).unlink()  # as a spool of the previous release
    data = bytearray(segments(directory)[0].read_bytes())
    data[3 * FRAME + 40] ^= 0xFF
    segments(directory)[0].write_bytes(bytes(data))
    with Spool.open(directory) as spool:
        assert (spool.stats().records, spool.stats().lost) == (9, 1)
    (report,) = read_quarantine(directory).reports
    assert (report["records_lost"], report["at_least"], report["written"]) == (1, True, None)


def test_an_old_ack_file_is_still_understood(tmp_path: Path) -> None:
    directory = tmp_path / "svc"
    spool_of(directory, 10)
    (directory / "acked").write_text(f"1 1 {4 * FRAME}\n")  # the first format: no count
    with Spool.open(directory) as spool:
        assert (spool.stats().records, spool.stats().lost) == (6, 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ledger 1\n1 1000\n",  # no end line: cut short
        "ledger 1\n1 1000\nend 00000000\n",  # wrong CRC
        "ledger 2\nend 00000000\n",
    ],
)
def test_a_ledger_that_cannot_be_trusted_is_unknown(tmp_path: Path, text: str) -> None:
    (tmp_path / LEDGER_NAME).write_text(text)
    assert read_ledger(tmp_path) is None


def test_the_ledger_reads_back_and_ignores_a_longer_old_tail(tmp_path: Path) -> None:
    assert write_ledger(tmp_path, [(7, 1000), (8, 12), (9, 0), (10, 5), (11, 6)])
    assert write_ledger(tmp_path, [(7, 1000), (8, 12)])
    assert read_ledger(tmp_path) == {7: 1000, 8: 12}
    # A kill between the write and the truncation leaves the old tail after "end".
    text = (tmp_path / LEDGER_NAME).read_text()
    (tmp_path / LEDGER_NAME).write_text(text + "10 5\n11 6\nend 01234567\n")
    assert read_ledger(tmp_path) == {7: 1000, 8: 12}


# -- the spool directory deleted while the spool is open ---------------------------------------


def test_a_deleted_directory_is_made_again_and_what_went_with_it_counted(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "svc"
    with Spool.open(directory, segment_bytes=10 * FRAME, max_bytes=2**30) as spool:
        for seq in range(25):  # two sealed segments of 10, 5 in the active one
            assert spool.append(BASE_NS + seq, line(seq, BASE_NS + seq))
        shutil.rmtree(directory)
        for seq in range(25, 30):  # into the active segment's mapping: kept
            assert spool.append(BASE_NS + seq, line(seq, BASE_NS + seq))
        assert spool.sync_if_due() is False
        stats = spool.stats()
        assert (stats.recreated, stats.lost, stats.records) == (1, 20, 10)
        for seq in range(30, 50):  # and the rotations that follow work
            assert spool.append(BASE_NS + seq, line(seq, BASE_NS + seq))
        assert spool.stats().write_errors == 0
        shipped = []
        while (batch := spool.peek_batch()) is not None:
            shipped += [orjson.loads(r.payload)["seq"] for r in batch.records]
            spool.ack(batch)
    assert shipped == [f"{seq:06d}" for seq in range(20, 50)]
    reports = read_quarantine(directory).reports
    assert [(r["segment"], r["records_lost"]) for r in reports] == [
        ("seg-0000000000000001.spool", 10),
        ("seg-0000000000000002.spool", 10),
    ]
    assert list(read_all(directory)) == []


def _remove_while_written(directory: Path) -> None:
    """``rm -rf`` of a directory the service writes to meanwhile, until it is gone: the
    shipper's thread can add a file between the listing and the removal of the directory
    (ENOTEMPTY), as it can under an operator's ``rm -rf``, who runs it again."""
    for _ in range(100):
        try:
            shutil.rmtree(directory)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            continue
        return
    raise AssertionError(f"{directory} kept being written to")


@pytest.mark.integration
@pytest.mark.slow
def test_a_service_whose_spool_directory_is_deleted_goes_on_spooling(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run: 30,000 records, Loki down, the directory deleted on the way; before,
    # every record after the next rotation was refused until a restart (12,765 lost). Now the
    # records of the active segment (logged before and after the deletion) are kept and the
    # sealed segment's (the first ~20,000 records, unshipped) are counted as lost.
    loki.go_down()
    root = tmp_path / "spool"
    configure(loki.url, root, spool_max_bytes=2**30)
    log = agent_logging.get_logger("t")
    pad = "x" * 300
    for seq in range(30_000):
        if seq == 25_000:
            _remove_while_written(root / "svc")
        log.info("tick", seq=seq, pad=pad)
    deadline = time.monotonic() + 10.0
    while durable().health()["spool_recreated"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    health = durable().health()
    assert health["spool_recreated"] == 1
    # Every record is either spooled or counted lost: none was refused. (A ledger or ack
    # write that found no directory counts as a write error: records are not all it costs.)
    assert health["spool_records"] + health["lost"] == 30_000
    assert health["dropped"] == 0
    assert 0 < health["lost"] < 25_000  # only the sealed segment went with the directory
    agent_logging.shutdown(timeout_s=1.0)
    loki.come_up()
    assert _cli.main(drain_args(root, loki.url)) == 1
    err = capsys.readouterr().err
    assert f"drain: {health['lost']} records were lost to damage" in err
    assert "the spool directory was deleted while the spool was open" in err
    assert len(loki.entries()) == 30_000 - health["lost"]


# -- a disk too full for a segment --------------------------------------------------------------


def test_a_disk_too_full_at_open_gives_a_smaller_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.posix_fallocate

    def room_for(limit: int) -> Callable[[int, int, int], None]:
        def fallocate(fd: int, offset: int, length: int) -> None:
            if length > limit:  # ENOSPC injected at the allocation call
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd, offset, length)

        return fallocate

    monkeypatch.setattr(os, "posix_fallocate", room_for(1 << 20))
    with Spool.open(tmp_path / "svc") as spool:  # 8 MiB asked: 2 MiB, then 512 KiB
        assert spool._writer.capacity == 512 * 1024
        assert spool.degraded_reason == (
            "the disk has no room for a 8,388,608-byte segment: writing one of 524,288 bytes"
        )
        assert spool.stats().degraded == 1
        assert spool.append(BASE_NS, line(0, BASE_NS))


def test_a_full_disk_at_open_starts_and_recovers_when_space_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.posix_fallocate

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with Spool.open(tmp_path / "svc") as spool:
        assert spool.degraded_reason is not None
        assert spool.append(BASE_NS, line(0, BASE_NS)) is False
        assert spool.stats().write_errors == 1
        monkeypatch.setattr(os, "posix_fallocate", real)
        spool._retry_at = 0.0  # the pause between tries is over
        assert spool.append(BASE_NS + 1, line(1, BASE_NS + 1)) is True
        assert spool.degraded_reason is None
        batch = spool.peek_batch()
        assert batch is not None
        assert [orjson.loads(r.payload)["seq"] for r in batch.records] == ["000001"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB filesystem (tmpfs), mounted for the test: needs root and a kernel that
    lets this container mount one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 4 MiB tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.integration
def test_configure_on_a_real_full_disk_starts_degraded_and_recovers(
    small_disk: Path, loki: LokiServer
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\1" * (4 * 2**20 - 200 * 1024))  # about 200 KiB left
    configure(loki.url, small_disk / "spool", spool_max_bytes=64 * 2**20)  # no SpoolError
    sink = durable()
    assert sink.spool.stats().degraded == 1
    assert sink.spool._writer.capacity == 128 * 1024  # 8 MiB, 2 MiB, 512 KiB, 128 KiB
    log = agent_logging.get_logger("t")
    for seq in range(3000):  # ~600 KiB: more than the disk holds
        log.info("tick", seq=seq)
    health = sink.health()
    assert health["write_errors"] > 0
    assert health["spool_degraded"] >= 1
    assert health["spool_error"] is not None and "the disk is full" in health["spool_error"]
    filler.unlink()  # space returns
    sink.spool._retry_at = 0.0
    time.sleep(0.6)  # past the pause between tries (_spool._RETRY_S)
    errors = sink.health()["write_errors"]
    for seq in range(3000, 3100):
        log.info("tick", seq=seq)
    assert sink.health()["write_errors"] == errors
    agent_logging.shutdown(timeout_s=5.0)
    seqs = {orjson.loads(e.line)["seq"] for e in loki.entries()}
    assert set(range(3000, 3100)) <= seqs
