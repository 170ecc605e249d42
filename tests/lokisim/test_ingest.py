"""The fast ingest path: it decodes and stores exactly as the reference path does.

The server decodes protobuf with metadata pairs kept serialized (and looked up in a
cache) and stores whole streams at once when no per-entry rule can apply. These tests
hold both against the straightforward reference: the full protobuf schema read field by
field, and the store's per-entry checks.
"""

from __future__ import annotations

import cramjam
import httpx
import pytest
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lokisim import _distributor, _http, _proto, _push
from tests.lokisim._distributor import Distributor, LabelSet
from tests.lokisim._levels import level_from_fields
from tests.lokisim._limits import Limits
from tests.lokisim._proto import (
    DecodedPush,
    DecodedStream,
    PushEntry,
    PushStream,
    decode_protobuf,
    decode_protobuf_push,
    encode_protobuf_push,
    push_request_class,
)
from tests.lokisim._server import LokiServer
from tests.lokisim._store import PushResult, Store
from tests.lokisim.wire import len_field, varint

NOW = 1_700_000_000_000_000_000
HOUR = 3_600_000_000_000
S = 1_000_000_000


def reference_decode(body: bytes) -> list[PushStream]:
    """The reference: snappy, the full schema, every field read through the runtime."""
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise ValueError(f"snappy: {exc}".replace("snappy: snappy: ", "snappy: ")) from exc
    request = push_request_class()()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        raise ValueError(f"proto: {exc}") from exc
    return [
        PushStream(
            stream.labels,
            tuple(
                PushEntry(
                    entry.timestamp.seconds * S + entry.timestamp.nanos,
                    entry.line,
                    tuple((pair.name, pair.value) for pair in entry.structuredMetadata),
                )
                for entry in stream.entries
            ),
        )
        for stream in request.streams
    ]


def outcome(decode: object, body: bytes) -> object:
    """What a decoder gives: its streams, or the message of its ValueError."""
    try:
        return decode(body)  # type: ignore[operator]
    except ValueError as exc:
        return f"error: {exc}"


def snappy(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw))


texts = st.text(st.characters(codec="utf-8"), max_size=12)
pairs = st.tuples(texts, texts)
entries = st.builds(
    PushEntry,
    st.integers(min_value=0, max_value=2**62),
    texts,
    st.lists(st.sampled_from([("level", "info"), ("a", "1"), ("", "")]) | pairs, max_size=4).map(
        tuple
    ),
)
streams = st.builds(PushStream, texts, st.lists(entries, max_size=6).map(tuple))


@settings(max_examples=50)
@given(st.lists(streams, max_size=4))
def test_fast_decode_equals_the_reference_on_valid_pushes(pushed: list[PushStream]) -> None:
    body = encode_protobuf_push(pushed)
    assert decode_protobuf_push(body) == reference_decode(body) == pushed


@settings(max_examples=80)
@given(
    st.lists(streams, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255), st.booleans()), max_size=3),
)
def test_fast_decode_equals_the_reference_on_damaged_pushes(
    pushed: list[PushStream], edits: list[tuple[int, int, bool]]
) -> None:
    raw = bytearray(bytes(cramjam.snappy.decompress_raw(encode_protobuf_push(pushed))))
    for position, value, insert in edits:
        at = position % (len(raw) + 1)
        if insert:
            raw.insert(at, value)
        elif at < len(raw):
            raw[at] = value
    body = snappy(bytes(raw))
    assert outcome(decode_protobuf_push, body) == outcome(reference_decode, body)


PAIR = len_field(1, b"k") + len_field(2, b"v")
STAMP = bytes([0x08]) + varint(1_700_000_000) + bytes([0x10]) + varint(5)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        # Canonical.
        (
            len_field(1, STAMP) + len_field(2, b"x") + len_field(3, PAIR),
            (NOW + 5, "x", (("k", "v"),)),
        ),
        # Fields of a pair reversed, repeated (the last wins) or unknown (skipped).
        (len_field(3, len_field(2, b"v") + len_field(1, b"k")), (0, "", (("k", "v"),))),
        (len_field(3, len_field(1, b"a") + PAIR), (0, "", (("k", "v"),))),
        (len_field(3, PAIR + bytes([0x28, 0x07])), (0, "", (("k", "v"),))),
        # An empty pair is a pair of empty strings.
        (len_field(3, b""), (0, "", (("", ""),))),
        # The timestamp in two pieces merges; metadata before the line; line twice.
        (
            len_field(1, STAMP[:6])
            + len_field(3, PAIR)
            + len_field(2, b"a")
            + len_field(1, bytes([0x10, 9])),
            (NOW + 9, "a", (("k", "v"),)),
        ),
        (len_field(2, b"first") + len_field(2, b"second"), (0, "second", ())),
        # Field 3 with the varint wire type is an unknown field, not metadata.
        (bytes([0x18, 0x01]) + len_field(2, b"x"), (0, "x", ())),
    ],
)
def test_non_canonical_entries_decode_as_the_reference_does(
    entry: bytes, expected: tuple[int, str, tuple[tuple[str, str], ...]]
) -> None:
    body = snappy(len_field(1, len_field(1, b'{a="b"}') + len_field(2, entry)))
    assert decode_protobuf_push(body) == reference_decode(body)
    assert decode_protobuf_push(body) == [PushStream('{a="b"}', (PushEntry(*expected),))]


@pytest.mark.parametrize(
    "pair",
    [
        len_field(1, b"\xff"),  # a name that is not UTF-8
        len_field(2, b"\xc3"),  # a truncated UTF-8 value
        bytes([0x0A, 0x05, 0x61]),  # a length past the end
        bytes([0x0B]),  # a group start that never ends
    ],
)
def test_a_malformed_metadata_pair_fails_with_the_references_message(pair: bytes) -> None:
    entry = len_field(2, b"x") + len_field(3, PAIR) + len_field(3, pair)
    body = snappy(len_field(1, len_field(1, b'{a="b"}') + len_field(2, entry)))
    expected = outcome(reference_decode, body)
    assert isinstance(expected, str)
    assert expected.startswith("error: proto: ")
    assert outcome(decode_protobuf_push, body) == expected


def test_metadata_pairs_are_cached_and_the_cache_restarts_when_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_proto, "_PAIRS", {})
    monkeypatch.setattr(_proto, "_MAX_CACHED_PAIRS", 2)
    pushed = [
        PushStream(
            '{a="b"}',
            tuple(PushEntry(NOW + i, "x", (("id", f"v{i}"), ("level", "info"))) for i in range(3)),
        )
    ]
    assert decode_protobuf_push(encode_protobuf_push(pushed)) == pushed
    assert len(_proto._PAIRS) <= 2


def test_the_compact_form_shares_metadata_between_entries() -> None:
    same = (("level", "info"),)
    pushed = [
        PushStream(
            '{a="b"}', (PushEntry(1, "x", same), PushEntry(2, "y"), PushEntry(3, "z", same))
        ),
        PushStream('{a="c"}', (PushEntry(4, "w", same),)),
    ]
    decoded = decode_protobuf(encode_protobuf_push(pushed))
    assert decoded == DecodedPush(
        [
            DecodedStream('{a="b"}', [1, 2, 3], ["x", "y", "z"], [0, 1, 0]),
            DecodedStream('{a="c"}', [4], ["w"], [0]),
        ],
        [same, ()],
    )
    assert decoded.entry_count() == 4
    assert decoded.to_streams() == pushed
    assert DecodedPush.from_streams(pushed) == decoded


@pytest.mark.parametrize(
    ("labels", "metadata", "level"),
    [
        ({"level": "WARNING"}, {"level": "debug"}, "warn"),
        ({}, {"severity": "Err"}, "error"),
        ({}, {"msg": "error"}, None),
        ({"app": "x"}, {}, None),
    ],
)
def test_level_from_fields(
    labels: dict[str, str], metadata: dict[str, str], level: str | None
) -> None:
    assert level_from_fields(labels, metadata) == level


# -- the store: whole-stream fast paths against the per-entry rules -------------------------


class PerEntryDistributor(Distributor):
    """The distributor with its whole-stream check turned off: per-entry checks only."""

    def _fast_keys(self, *args: object) -> None:
        return None


class PerEntryStore(Store):
    """The store with its whole-stream shortcuts turned off: the reference rules."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self._distributor = PerEntryDistributor(limits)

    def _append_new(self, *args: object) -> bool:
        return False


STRICT = Limits(now=lambda: NOW, max_line_size=8, max_structured_metadata_entries_count=2)
LAX = Limits(now=lambda: NOW, reject_old_samples=False, discover_log_levels=False, max_line_size=0)
offsets = st.sampled_from([0, 1, 2, -1, HOUR, -HOUR, -HOUR - 1, -2 * HOUR, 11 * 60 * S, -NOW])
lines = st.sampled_from(["a", "b", "level=error", "ü" * 3, "x" * 9, "{}"])
metadata = st.sampled_from(
    [(), (("level", "warn"),), (("k", "v"),), (("k", "v"), ("j", "w"), ("i", "u")), (("", "v"),)]
)
labels = st.sampled_from(['{service_name="a"}', '{service_name="b", level="x"}', "{}"])
store_entries = st.builds(lambda o, line, m: PushEntry(NOW + o, line, m), offsets, lines, metadata)
pushes = st.lists(
    st.lists(
        st.builds(PushStream, labels, st.lists(store_entries, max_size=5).map(tuple)), max_size=3
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.parametrize("limits", [STRICT, LAX], ids=["strict", "lax"])
@settings(max_examples=60)
@given(sequence=pushes)
def test_the_fast_store_paths_equal_the_per_entry_rules(
    limits: Limits, sequence: list[list[PushStream]]
) -> None:
    fast, reference = Store(limits), PerEntryStore(limits)
    for pushed in sequence:
        assert fast.push("fake", pushed) == reference.push("fake", pushed)
    assert fast.entries("fake") == reference.entries("fake")


@pytest.mark.parametrize("timestamps", [[NOW, NOW + 1], [NOW - 1, NOW, NOW - 1]])
def test_a_whole_new_stream_is_stored_at_once_and_resends_are_ignored(
    timestamps: list[int],
) -> None:
    store = Store(Limits(now=lambda: NOW))
    pushed = [
        PushStream(
            '{service_name="a"}',
            tuple(
                PushEntry(ts, f"line {i}", (("level", "info"),)) for i, ts in enumerate(timestamps)
            ),
        )
    ]
    assert store.push("fake", pushed) == PushResult(204)
    assert store.push("fake", pushed) == PushResult(204)
    assert [(e.ts_ns, e.line, e.metadata) for e in store.entries("fake")] == [
        (ts, f"line {i}", {"detected_level": "info", "level": "info"})
        for i, ts in enumerate(timestamps)
    ]


# -- HTTP: one decode per push ---------------------------------------------------------------


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = _push.decode_push

    def counting(headers: dict[str, str], body: bytes) -> DecodedPush:
        calls.append(len(body))
        return real(headers, body)

    monkeypatch.setattr(_http, "decode_push", counting)
    return calls


@pytest.mark.integration
def test_a_push_is_decoded_once_for_storing_and_recording(
    decodes: list[int], http: httpx.Client
) -> None:
    with LokiServer(limits=Limits(now=lambda: NOW)) as loki:
        body = encode_protobuf_push([PushStream('{a="b"}', (PushEntry(NOW, "x"),))])
        response = http.post(
            f"{loki.url}/loki/api/v1/push",
            content=body,
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert response.status_code == 204
        assert (loki.count(), loki.requests[0].entries_in_body) == (1, 1)
    assert decodes == [len(body)]


def test_the_distributors_caches_restart_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_distributor, "_MAX_CACHED", 1)
    store = Store(Limits(now=lambda: NOW))
    for n, service in enumerate(["s1", "s0", "s0"]):
        pushed = [
            PushStream(
                f'{{service_name="{service}"}}',
                (PushEntry(NOW + n, "x", (("id", f"{n}"), ("level", "info"))),),
            )
        ]
        assert store.push("fake", pushed) == PushResult(204)
    assert [(e.labels["service_name"], e.metadata["id"]) for e in store.entries("fake")] == [
        ("s1", "0"),
        ("s0", "1"),
        ("s0", "2"),
    ]
    # Each cache holds one item (_MAX_CACHED) and restarted for the newest: the label sets for
    # s0 (after s1), s0's metadata outcomes for id 2 (after id 1), the metadata checks for id
    # 2 (after ids 0 and 1).
    distributor = store._distributor
    assert list(distributor._label_sets) == ['{service_name="s0"}']
    label_set = distributor._label_sets['{service_name="s0"}']
    assert isinstance(label_set, LabelSet)
    assert list(label_set.outcomes) == [(("id", "2"), ("level", "info"))]
    assert list(distributor._metadata_ok) == [(("id", "2"), ("level", "info"))]
