"""The spool's framing: literal layouts, then properties over arbitrary streams."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_logging.spool._framing import (
    HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    Corrupt,
    Frame,
    FrameCounts,
    TornTail,
    count_frames,
    encode_frame,
    iter_frames,
    read_frames,
    take_frames,
)

records_st = st.lists(
    st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=300), st.integers(0, 2**64 - 1)),
    min_size=1,
    max_size=12,
)


def _stream(records: list[tuple[int, bytes, int]]) -> tuple[bytes, list[Frame]]:
    """The encoded stream and the frames a reader must find in it."""
    out, frames, offset = b"", [], 0
    for ts_ns, payload, key in records:
        frames.append(Frame(offset, ts_ns, payload, key))
        encoded = encode_frame(ts_ns, payload, key)
        out += encoded
        offset += len(encoded)
    return out, frames


def test_encode_literal_layout() -> None:
    payload = b'{"event":"x"}'
    checked = (
        (13).to_bytes(4, "little")
        + (1700000000123456789).to_bytes(8, "little")
        + (0x0102030405060708).to_bytes(8, "little")
    )
    crc = zlib.crc32(checked + payload).to_bytes(4, "little")
    framed = encode_frame(1700000000123456789, payload, 0x0102030405060708)
    assert framed == b"\xf7\x02" + crc + checked + payload
    assert HEADER_BYTES == 26
    assert encode_frame(5, b"x")[18:26] == b"\0" * 8  # no key: 0


def test_decode_literal_stream() -> None:
    stream = encode_frame(1, b"a") + encode_frame(2, b"") + encode_frame(3, b"ccc")
    assert list(iter_frames(stream)) == [(0, 1, b"a", 0), (27, 2, b"", 0), (53, 3, b"ccc", 0)]
    assert list(iter_frames(stream, start=27)) == [(27, 2, b"", 0), (53, 3, b"ccc", 0)]
    assert list(iter_frames(b"")) == []


def test_refuses_oversized_payload_and_bad_timestamp() -> None:
    with pytest.raises(ValueError, match=r"at most 16777216 bytes; this one has 16777217"):
        encode_frame(0, b"\0" * (MAX_PAYLOAD_BYTES + 1))
    with pytest.raises(ValueError, match=r"must be in 0 \.\. 2\*\*64 - 1, not -1 and 0"):
        encode_frame(-1, b"x")
    with pytest.raises(ValueError, match=r"not 18446744073709551616"):
        encode_frame(2**64, b"x")
    with pytest.raises(ValueError, match=r"not 1 and -2"):
        encode_frame(1, b"x", -2)


def test_largest_payload_round_trips() -> None:
    payload = b"z" * MAX_PAYLOAD_BYTES
    assert list(iter_frames(encode_frame(7, payload, 9))) == [(0, 7, payload, 9)]


def test_torn_header_and_torn_payload() -> None:
    stream = encode_frame(1, b"first") + encode_frame(2, b"second")
    assert list(iter_frames(stream[:40])) == [(0, 1, b"first", 0), TornTail(31, 40)]
    assert list(iter_frames(stream[:62])) == [(0, 1, b"first", 0), TornTail(31, 62)]


def test_corrupt_middle_frame_is_skipped() -> None:
    stream = bytearray(encode_frame(1, b"one") + encode_frame(2, b"two") + encode_frame(3, b"3"))
    stream[29 + 27] ^= 0x40  # a payload byte of the second frame
    assert list(iter_frames(bytes(stream))) == [
        (0, 1, b"one", 0),
        Corrupt(29, 58),
        (58, 3, b"3", 0),
    ]


def test_zero_tail_is_space_not_written_and_a_torn_frame_before_it_is_torn() -> None:
    # A preallocated segment: the frames written so far, then zeros to the end of the file
    # (power loss can leave the same: the file's size grew, its last blocks never written).
    stream = encode_frame(1, b"kept") + b"\0" * 40
    assert list(iter_frames(stream)) == [(0, 1, b"kept", 0)]
    assert count_frames(lambda at, n: stream[at : at + n], 0, len(stream)).end == 30
    # A kill in the middle of copying a frame: its first bytes, then the zeros.
    torn = encode_frame(1, b"kept") + encode_frame(2, b"lost")[:20] + b"\0" * 40
    assert list(iter_frames(torn)) == [(0, 1, b"kept", 0), TornTail(30, 90)]
    assert count_frames(lambda at, n: torn[at : at + n], 0, len(torn)) == (1, 4, 1, 0, 90)


def test_damaged_length_claiming_beyond_the_end_does_not_hide_later_frames() -> None:
    stream = bytearray(encode_frame(1, b"one") + encode_frame(2, b"two"))
    stream[6:10] = (1000).to_bytes(4, "little")  # length of the first frame, now past the end
    assert list(iter_frames(bytes(stream))) == [Corrupt(0, 29), (29, 2, b"two", 0)]


def test_short_read_ends_the_stream() -> None:
    stream = encode_frame(1, b"one") + encode_frame(2, b"two")

    def read(offset: int, size: int) -> bytes:  # a file truncated to 40 bytes under us
        return stream[offset : min(offset + size, 40)]

    assert list(read_frames(read, 0, len(stream), window_bytes=8)) == [
        (0, 1, b"one", 0),
        TornTail(29, 40),
    ]


def test_resync_finds_a_mark_straddling_two_windows() -> None:
    stream = b"\0" * 26 + encode_frame(5, b"ok")
    # The second window holds bytes 1..26: the frame's 0xF7 is its last byte, 0x02 is not.
    assert list(read_frames(_slicer(stream), 0, len(stream), window_bytes=26)) == [
        Corrupt(0, 26),
        (26, 5, b"ok", 0),
    ]


def _slicer(buf: bytes) -> Callable[[int, int], bytes]:
    return lambda offset, size: buf[offset : offset + size]


@given(records_st)
def test_round_trip(records: list[tuple[int, bytes, int]]) -> None:
    stream, frames = _stream(records)
    decoded = list(iter_frames(stream))
    assert decoded == frames
    assert [f.end for f in decoded] == [f.offset for f in frames[1:]] + [len(stream)]


@given(records_st, st.data())
def test_truncation_keeps_every_complete_frame_then_reports_a_torn_tail(
    records: list[tuple[int, bytes, int]], data: st.DataObject
) -> None:
    stream, frames = _stream(records)
    cut = data.draw(st.integers(0, len(stream)))
    complete = [f for f in frames if f.end <= cut]
    tail_start = complete[-1].end if complete else 0
    expected: list[Frame | Corrupt | TornTail] = list(complete)
    if tail_start < cut:
        expected.append(TornTail(tail_start, cut))
    assert list(iter_frames(stream[:cut])) == expected


@given(records_st, st.data())
def test_a_flipped_byte_loses_only_its_own_frame(
    records: list[tuple[int, bytes, int]], data: st.DataObject
) -> None:
    stream, frames = _stream(records)
    victim = data.draw(st.integers(0, len(frames) - 1))
    target = frames[victim]
    where = data.draw(st.integers(target.offset, target.end - 1))
    damaged = bytearray(stream)
    damaged[where] ^= data.draw(st.integers(1, 255))
    marker: Corrupt | TornTail = (
        Corrupt(target.offset, target.end)
        if victim < len(frames) - 1
        else TornTail(target.offset, len(stream))
    )
    expected = [*frames[:victim], marker, *frames[victim + 1 :]]
    assert list(iter_frames(bytes(damaged))) == expected


@given(records_st, st.data())
def test_many_flipped_bytes_lose_only_their_frames(
    records: list[tuple[int, bytes, int]], data: st.DataObject
) -> None:
    stream, frames = _stream(records)
    damaged = bytearray(stream)
    spots = data.draw(
        st.lists(st.integers(0, len(stream) - 1), min_size=1, max_size=5, unique=True)
    )
    for spot in spots:
        damaged[spot] ^= 0xA5
    hit = [f for f in frames if any(f.offset <= s < f.end for s in spots)]
    decoded = list(iter_frames(bytes(damaged)))
    assert [d for d in decoded if isinstance(d, Frame)] == [f for f in frames if f not in hit]
    markers = [d for d in decoded if not isinstance(d, Frame)]
    assert 1 <= len(markers) <= len(hit)
    for frame in hit:  # every damaged frame lies inside a reported region
        assert any(m.offset <= frame.offset and frame.end <= m.end for m in markers)


_MARK = b"\xf7\x02"  # a frame's first two bytes (see test_encode_literal_layout)
_frames_st = st.builds(
    encode_frame, st.integers(0, 2**64 - 1), st.binary(max_size=40), st.integers(0, 2**64 - 1)
)
# What lies in a damaged or partly written segment: an intact frame (True), or bytes that
# are not one (False): garbage, a bare mark, a mark and a broken header, a frame cut short,
# zeros (space not written).
_pieces_st = st.one_of(
    st.tuples(_frames_st, st.just(True)),
    st.tuples(
        st.one_of(
            st.binary(min_size=1, max_size=60),
            st.just(_MARK),
            st.binary(min_size=1, max_size=30).map(_MARK.__add__),
            st.builds(lambda frame, cut: frame[: max(cut, 1)], _frames_st, st.integers(1, 60)),
            st.integers(1, 40).map(bytes),
        ),
        st.just(False),
    ),
)


@st.composite
def _spliced(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Garbage with intact frames and frame marks spliced in; the offsets of those frames."""
    buf, offsets = b"", []
    for piece, intact in draw(st.lists(_pieces_st, max_size=10)):
        if intact:
            offsets.append(len(buf))
        buf += piece
    return buf, offsets


@given(_spliced(), st.data())
def test_garbage_with_frames_spliced_in_decodes_to_items_that_tile_it(
    spliced: tuple[bytes, list[int]], data: st.DataObject
) -> None:
    buf, offsets = spliced
    start = data.draw(st.integers(0, len(buf) + 2))
    decoded = list(iter_frames(buf, start))
    position = start
    for index, item in enumerate(decoded):
        assert item.offset == position
        if isinstance(item, Frame):
            assert buf[item.offset : item.end] == encode_frame(item.ts_ns, item.payload, item.key)
        if isinstance(item, TornTail):
            assert index == len(decoded) - 1
        position = item.end
    # Only zeros (space not written) may follow the last item.
    assert position == max(start, len(buf)) or not any(buf[position:])
    # Every intact frame from the start on is found, whatever came before it.
    found = [item.offset for item in decoded if isinstance(item, Frame)]
    assert set(found) >= {offset for offset in offsets if offset >= start}


@given(records_st, st.data())
def test_windowed_reading_and_counting_match_whole_buffer_decoding(
    records: list[tuple[int, bytes, int]], data: st.DataObject
) -> None:
    stream, _ = _stream(records)
    damaged = bytearray(stream)
    for spot in data.draw(st.lists(st.integers(0, len(stream) - 1), max_size=3)):
        damaged[spot] ^= 0xFF
    cut = data.draw(st.integers(0, len(damaged)))
    buf = bytes(damaged[:cut])
    window = data.draw(st.integers(1, 64))

    def read(offset: int, size: int) -> bytes:
        return buf[offset : offset + size]

    whole = list(iter_frames(buf))
    assert list(read_frames(read, 0, len(buf), window_bytes=window)) == whole
    frames = [item for item in whole if isinstance(item, Frame)]
    assert count_frames(read, 0, len(buf), window_bytes=window) == FrameCounts(
        records=len(frames),
        payload_bytes=sum(len(f.payload) for f in frames),
        torn=sum(isinstance(item, TornTail) for item in whole),
        corrupt=sum(isinstance(item, Corrupt) for item in whole),
        end=whole[-1].end if whole else 0,  # zeros (space not written) may follow
    )


def test_take_frames_literal() -> None:
    stream = encode_frame(1, b"one", 7) + encode_frame(2, b"two") + encode_frame(3, b"three")
    out: list[tuple[int, bytes, int]] = []
    assert take_frames(stream, 0, 10, 100, tuple, out) == (len(stream), 11, True)
    assert out == [(1, b"one", 7), (2, b"two", 0), (3, b"three", 0)]
    out = []
    assert take_frames(stream, 0, 2, 100, tuple, out) == (58, 6, False)  # max_records
    out = []
    assert take_frames(stream, 0, 10, 5, tuple, out) == (29, 3, False)  # byte budget
    out = []
    assert take_frames(stream, 0, 10, 1, tuple, out) == (29, 3, False)  # one comes alone
    out = []
    assert take_frames(stream[:70], 29, 10, 100, tuple, out) == (58, 3, True)  # cut short
    damaged = bytearray(stream)
    damaged[29 + 27] ^= 1
    out = []
    assert take_frames(bytes(damaged), 0, 10, 100, tuple, out) == (29, 3, False)
    assert out == [(1, b"one", 7)]


@given(records_st, st.data())
def test_take_frames_takes_the_intact_prefix(
    records: list[tuple[int, bytes, int]], data: st.DataObject
) -> None:
    stream, _ = _stream(records)
    damaged = bytearray(stream)
    for spot in data.draw(st.lists(st.integers(0, len(stream) - 1), max_size=2)):
        damaged[spot] ^= 0xFF
    cut = data.draw(st.integers(0, len(damaged)))
    buf = bytes(damaged[:cut])
    max_records = data.draw(st.integers(1, 13))
    max_bytes = data.draw(st.integers(1, 4000))
    out: list[tuple[int, bytes, int]] = []
    end, size, window_ended = take_frames(buf, 0, max_records, max_bytes, tuple, out)
    # What take_frames takes is the run of intact frames iter_frames finds first, cut to the
    # limits; it stops at the first damage without reporting it.
    expected: list[tuple[int, bytes, int]] = []
    total = 0
    for item in iter_frames(buf):
        if not isinstance(item, Frame) or len(expected) >= max_records:
            break
        if expected and total + len(item.payload) > max_bytes:
            break
        expected.append((item.ts_ns, item.payload, item.key))
        total += len(item.payload)
    assert out == expected
    assert size == total
    assert end == sum(HEADER_BYTES + len(payload) for _, payload, _ in out)
    if window_ended:
        assert end == len(buf) or end + HEADER_BYTES > len(buf) or buf[end : end + 2] == b"\xf7\x02"
