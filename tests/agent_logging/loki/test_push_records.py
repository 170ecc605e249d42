"""The shipper's fast path: stream keys, records encoded straight to protobuf, the client."""

from __future__ import annotations

from typing import Any

import cramjam
import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_logging.loki import _record_encoder
from agent_logging.loki._client import LokiClient
from agent_logging.loki._entries import PushEntry, entries_from_records, entry_from_record
from agent_logging.loki._push import encode_body, encode_protobuf
from agent_logging.loki._record_encoder import encode_records, stream_key
from agent_logging.pipeline._render import render
from agent_logging.spool._segments import SpooledRecord
from tests.agent_logging.loki.test_push import decode, runtime_encode

DEFAULTS = {"service_name": "svc", "layer": "api", "env": "dev"}
RECORD = {
    "ts": "2026-11-22T13:11:19.123456789Z",
    "level": "info",
    "event": "task claimed",
    "service": "bench",
    "layer": "node",
    "env": "prod",
    "node_id": "n-17",
    "allocation_id": "a-9",
    "task": "reimage",
}


# -- stream keys -------------------------------------------------------------------------------


def test_stream_key_literal() -> None:
    # Pinned: the key is part of the spool's format (a frame written by one version is
    # shipped by another after a restart), so its definition must not drift.
    assert stream_key(RECORD) == 785995815572890139


def test_stream_key_depends_only_on_label_and_metadata_fields() -> None:
    key = stream_key(RECORD)
    assert stream_key({**RECORD, "event": "other", "task": "x", "ts": "later"}) == key
    assert stream_key({**RECORD, "level": "error"}) != key
    assert stream_key({**RECORD, "allocation_id": "a-10"}) != key
    assert stream_key({k: v for k, v in RECORD.items() if k != "node_id"}) != key
    assert stream_key({**RECORD, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}) != key


@pytest.mark.parametrize(
    "changes",
    [
        {"allocation_id": 17},  # renders like "17" would: not text, never keyed
        {"level": True},
        {"trace_id": {"nested": 1}},  # unhashable
        {"workflow_id": ["a"]},  # unhashable
        {"service": "s" * 1025},  # render() may cut it in an oversized record
    ],
)
def test_records_whose_fields_are_not_short_text_have_no_key(changes: dict[str, Any]) -> None:
    assert stream_key({**RECORD, **changes}) == 0


def test_stream_key_cache_empties_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_record_encoder, "_MAX_CACHED_KEYS", 2)
    monkeypatch.setattr(_record_encoder, "_stream_keys", {})
    keys = [stream_key({**RECORD, "allocation_id": f"k-{n}"}) for n in range(5)]
    assert len(set(keys)) == 5
    assert len(_record_encoder._stream_keys) <= 2
    assert stream_key({**RECORD, "allocation_id": "k-0"}) == keys[0]


# -- encode_records equals the entry path ------------------------------------------------------

_ID_VALUES = st.sampled_from(["n-1", "n-2", "a-9", "wf-2", "x" * 300, 'bad "id"', "é\\n", ""])
_RECORDS = st.lists(
    st.fixed_dictionaries(
        {"event": st.text(max_size=40)},
        optional={
            "service": st.sampled_from(["api", "node-agent", ""]),
            "layer": st.sampled_from(["api", "node"]),
            "env": st.sampled_from(["prod", "dev"]),
            "level": st.sampled_from(["info", "error", 3]),
            "node_id": _ID_VALUES,
            "correlation_id": _ID_VALUES,
            "allocation_id": _ID_VALUES,
            "trace_id": st.sampled_from(["4bf92f3577b34da6a3ce929d0e0e4736", "zz", 7]),
            "span_id": st.sampled_from(["00f067aa0ba902b7", None]),
            "tags": st.lists(st.text(max_size=5), max_size=3),
        },
    ),
    max_size=25,
)
# Timestamps around the nanos varint's length changes, zero, and far dates.
_TIMESTAMPS = st.one_of(
    st.integers(0, 2**63 - 1),
    st.sampled_from([0, 1, 127, 128, 2**28 - 1, 2**28, 1_795_266_679_000_000_000]),
)


class _Plain:
    """A record of another spool (a test fake): no key attribute."""

    def __init__(self, ts_ns: int, payload: bytes) -> None:
        self.ts_ns = ts_ns
        self.payload = payload


def _spooled(records: list[dict[str, Any]], timestamps: list[int], kinds: list[int]) -> list[Any]:
    """Records as the spool returns them: keyed, unkeyed, foreign, or not JSON at all.

    A keyed record's line is always the rendering of the record its key was computed from:
    the one writer of keys (``Durable.write``) keys what it renders, and the frame's CRC
    covers both. A key is trusted on that basis (see the next tests).
    """
    out: list[Any] = []
    for n, record in enumerate(records):
        ts_ns = timestamps[n % len(timestamps)]
        kind = kinds[n % len(kinds)]
        payload = render(record)
        if kind == 0:
            out.append(SpooledRecord(ts_ns, payload, stream_key(record)))
        elif kind == 1:
            out.append(SpooledRecord(ts_ns, payload))
        elif kind == 2:
            out.append(_Plain(ts_ns, payload + b"\n"))
        else:
            out.append(SpooledRecord(ts_ns, b"\xff not json"))
    return out


@given(
    _RECORDS,
    st.lists(_TIMESTAMPS, min_size=1, max_size=5),
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.booleans(),
)
def test_encode_records_equals_the_entry_path_and_the_runtime(
    records: list[dict[str, Any]], timestamps: list[int], kinds: list[int], node_id_label: bool
) -> None:
    spooled = _spooled(records, timestamps, kinds)
    entries = entries_from_records(spooled, node_id_label=node_id_label, default_labels=DEFAULTS)
    reference = encode_protobuf(entries)
    # Twice: the first pass fills the key table, the second is served from it.
    for _ in range(2):
        encoded = encode_records(spooled, node_id_label=node_id_label, default_labels=DEFAULTS)
        assert encoded == reference
    assert decode(encoded) == decode(runtime_encode(entries))


def test_encode_records_literal_request() -> None:
    record = {"level": "info", "event": "x", "service": "a", "allocation_id": "a-9"}
    line = render(record)
    spooled = [
        SpooledRecord(1_000_000_001, line, stream_key(record)),
        SpooledRecord(2_000_000_000, line, stream_key(record)),
    ]
    labels = (("env", "dev"), ("layer", "api"), ("service_name", "a"))
    metadata = (("allocation_id", "a-9"), ("level", "info"))
    assert decode(encode_records(spooled, node_id_label=False, default_labels=DEFAULTS)) == [
        (
            '{env="dev", layer="api", service_name="a"}',
            [
                (1_000_000_001, line.decode(), list(metadata)),
                (2_000_000_000, line.decode(), list(metadata)),
            ],
        )
    ]
    assert entries_from_records(spooled, node_id_label=False, default_labels=DEFAULTS) == [
        PushEntry(labels, 1_000_000_001, line.decode(), metadata),
        PushEntry(labels, 2_000_000_000, line.decode(), metadata),
    ]


def test_a_key_is_trusted_only_once_the_line_produces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_record_encoder, "_keyed", {})
    record = {**RECORD}
    other = {**RECORD, "allocation_id": "a-10"}
    # A frame claiming the key of another combination (say, written by a broken writer):
    # its own line decides, and the key is not remembered for that mapping.
    claimed = SpooledRecord(5, render(record), stream_key(other))
    expected = entry_from_record(5, render(record), node_id_label=False, default_labels=DEFAULTS)
    assert encode_records([claimed], node_id_label=False, default_labels=DEFAULTS) == (
        encode_protobuf([expected])
    )
    assert all(stream_key(other) not in table for table in _record_encoder._keyed.values())
    honest = SpooledRecord(6, render(other), stream_key(other))
    encode_records([honest], node_id_label=False, default_labels=DEFAULTS)
    assert any(stream_key(other) in table for table in _record_encoder._keyed.values())


def test_key_table_empties_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_record_encoder, "_MAX_CACHED_MAPPINGS", 2)
    monkeypatch.setattr(_record_encoder, "_keyed", {})
    spooled = []
    for n in range(5):
        record = {**RECORD, "allocation_id": f"k-{n}"}
        spooled.append(SpooledRecord(n, render(record), stream_key(record)))
    encoded = encode_records(spooled, node_id_label=True, default_labels=DEFAULTS)
    entries = entries_from_records(spooled, node_id_label=True, default_labels=DEFAULTS)
    assert encoded == encode_protobuf(entries)
    assert all(len(table) <= 2 for table in _record_encoder._keyed.values())


def test_empty_batch_is_an_empty_request() -> None:
    assert encode_records([], node_id_label=False, default_labels=DEFAULTS) == b""


# -- the client ---------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_push_records_sends_what_push_of_the_entries_sends(encoding: str) -> None:
    bodies: list[tuple[bytes, dict[str, str]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append((request.content, dict(request.headers)))
        return httpx.Response(204)

    record = {**RECORD, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
    spooled = [
        SpooledRecord(1_795_266_679_123_456_789, render(record), stream_key(record)),
        SpooledRecord(1_795_266_679_223_456_789, b'{"event":"no key"}'),
    ]
    with LokiClient(
        "http://loki.test", encoding=encoding, transport=httpx.MockTransport(handler)
    ) as client:
        result = client.push_records(spooled, node_id_label=False, default_labels=DEFAULTS)
        assert result.outcome == "ok"
        entries = entries_from_records(spooled, node_id_label=False, default_labels=DEFAULTS)
        assert client.push(entries).outcome == "ok"
        assert client.push_records([], node_id_label=False, default_labels=DEFAULTS).reason == (
            "nothing to push"
        )
    (fast, fast_headers), (slow, slow_headers) = bodies
    assert fast_headers["content-type"] == slow_headers["content-type"]
    if encoding == "protobuf":
        assert bytes(cramjam.snappy.decompress_raw(fast)) == encode_protobuf(entries)
        assert fast == encode_body(entries).content
    else:
        assert orjson.loads(fast) == orjson.loads(slow)
