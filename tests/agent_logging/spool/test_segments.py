"""Reading a segment in batches: the windowed fast path agrees with frame-by-frame decoding."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_logging.spool._batches import read_segment
from agent_logging.spool._framing import Frame, TornTail, encode_frame, iter_frames
from agent_logging.spool._segments import SpooledRecord

_Result = tuple[list[SpooledRecord], int, int, int, int]


def _reference(buf: bytes, offset: int, checked: int, max_records: int, max_bytes: int) -> _Result:
    """One batch as the frame-by-frame reader decides it (the specification)."""
    records: list[SpooledRecord] = []
    payload_bytes = torn = corrupt = 0
    end = offset
    for item in iter_frames(buf, offset):
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


def test_literal_batches(tmp_path: Path) -> None:
    path = tmp_path / "seg"
    frames = [encode_frame(n, b"x" * n, n + 100) for n in range(1, 6)]
    path.write_bytes(b"".join(frames) + b"\xf7\x02torn")
    size = path.stat().st_size
    records, end, payload_bytes, torn, corrupt = read_segment(path, 0, size, 0, 3, 100, 40)
    assert records == [SpooledRecord(1, b"x", 101), SpooledRecord(2, b"xx", 102), (3, b"xxx", 103)]
    assert (end, payload_bytes, torn, corrupt) == (sum(len(f) for f in frames[:3]), 6, 0, 0)
    records, end, payload_bytes, torn, corrupt = read_segment(path, end, size, 0, 10, 100, 40)
    assert [r.ts_ns for r in records] == [4, 5]
    assert (end, payload_bytes, torn, corrupt) == (size, 9, 1, 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=120), st.integers(0, 2**64 - 1)),
        min_size=1,
        max_size=15,
    ),
    st.data(),
)
def test_batches_match_the_frame_by_frame_reader(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[int, bytes, int]],
    data: st.DataObject,
) -> None:
    buf = bytearray(b"".join(encode_frame(*record) for record in records))
    for spot in data.draw(st.lists(st.integers(0, len(buf) - 1), max_size=3)):
        buf[spot] ^= 0xFF
    cut = data.draw(st.integers(0, len(buf)))
    stream = bytes(buf[:cut])
    window = data.draw(st.integers(1, 200))
    max_records = data.draw(st.integers(1, 6))
    max_bytes = data.draw(st.integers(1, 300))
    checked = data.draw(st.integers(0, len(stream)))
    path = tmp_path_factory.mktemp("seg") / "seg"
    path.write_bytes(stream)
    offset = 0
    while True:  # the whole segment, batch by batch, as the spool reads it
        got = read_segment(path, offset, len(stream), checked, max_records, max_bytes, window)
        assert got == _reference(stream, offset, checked, max_records, max_bytes)
        if got[1] == offset:
            break
        offset = got[1]
