"""Loki push encoding: records to entries, hand-written protobuf checked against the runtime."""

from __future__ import annotations

import gzip
from typing import Any

import cramjam
import orjson
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from agent_logging.loki import _entries as entries_module
from agent_logging.loki import _push, _wire
from agent_logging.loki._entries import (
    PushEntry,
    entries_from_records,
    entry_from_record,
    render_labels,
)
from agent_logging.loki._push import encode_body, encode_json, encode_protobuf
from agent_logging.loki._wire import uvarint

# -- the real protobuf runtime, built from Loki's push.proto field numbers -------------------

_STRING, _MESSAGE, _UINT64 = 9, 11, 4
_OPTIONAL, _REPEATED = 1, 3


def _push_request_class() -> Any:
    pool = descriptor_pool.DescriptorPool()
    timestamp_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp_file)
    pool.Add(timestamp_file)
    push = descriptor_pb2.FileDescriptorProto(
        name="pkg/push/push.proto",
        package="logproto",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    pair = push.message_type.add(name="LabelPairAdapter")
    pair.field.add(name="name", number=1, type=_STRING, label=_OPTIONAL)
    pair.field.add(name="value", number=2, type=_STRING, label=_OPTIONAL)
    entry = push.message_type.add(name="EntryAdapter")
    entry.field.add(
        name="timestamp",
        number=1,
        type=_MESSAGE,
        label=_OPTIONAL,
        type_name=".google.protobuf.Timestamp",
    )
    entry.field.add(name="line", number=2, type=_STRING, label=_OPTIONAL)
    entry.field.add(
        name="structuredMetadata",
        number=3,
        type=_MESSAGE,
        label=_REPEATED,
        type_name=".logproto.LabelPairAdapter",
    )
    stream = push.message_type.add(name="StreamAdapter")
    stream.field.add(name="labels", number=1, type=_STRING, label=_OPTIONAL)
    stream.field.add(
        name="entries",
        number=2,
        type=_MESSAGE,
        label=_REPEATED,
        type_name=".logproto.EntryAdapter",
    )
    stream.field.add(name="hash", number=3, type=_UINT64, label=_OPTIONAL)
    request = push.message_type.add(name="PushRequest")
    request.field.add(
        name="streams",
        number=1,
        type=_MESSAGE,
        label=_REPEATED,
        type_name=".logproto.StreamAdapter",
    )
    pool.Add(push)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("logproto.PushRequest"))


PushRequest = _push_request_class()


def decode(data: bytes) -> list[tuple[str, list[tuple[int, str, list[tuple[str, str]]]]]]:
    """A decoded push request as plain data: [(labels, [(ts_ns, line, metadata)])]."""
    request = PushRequest.FromString(data)
    return [
        (
            stream.labels,
            [
                (
                    entry.timestamp.seconds * 1_000_000_000 + entry.timestamp.nanos,
                    entry.line,
                    [(pair.name, pair.value) for pair in entry.structuredMetadata],
                )
                for entry in stream.entries
            ],
        )
        for stream in request.streams
    ]


def runtime_encode(entries: list[PushEntry]) -> bytes:
    """The protobuf runtime's serialization of the same request, streams in first-seen order."""
    request = PushRequest()
    streams: dict[str, Any] = {}
    for entry in entries:
        text = render_labels(entry.labels)
        if text not in streams:
            streams[text] = request.streams.add(labels=text)
        message = streams[text].entries.add(line=entry.line)
        seconds, nanos = divmod(entry.ts_ns, 1_000_000_000)
        message.timestamp.seconds = seconds
        message.timestamp.nanos = nanos
        for name, value in entry.metadata:
            message.structuredMetadata.add(name=name, value=value)
    return bytes(request.SerializeToString(deterministic=True))


# -- records to entries ------------------------------------------------------------------------

RECORD = {
    "ts": "2026-11-22T13:11:19.123456789Z",
    "level": "error",
    "event": "claim failed",
    "service": "node-agent",
    "layer": "node",
    "env": "prod",
    "node_id": "n-1",
    "node_instance_id": "i-2",
    "correlation_id": "c-3",
    "allocation_id": "a-4",
    "workflow_id": "w-5",
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "span_id": "00f067aa0ba902b7",
    "task": "reimage",
}
PAYLOAD = orjson.dumps(RECORD)
TS = 1_795_266_679_123_456_789


def test_entry_from_record_maps_labels_and_metadata() -> None:
    entry = entry_from_record(TS, PAYLOAD, node_id_label=False, default_labels={})

    assert entry == PushEntry(
        labels=(("env", "prod"), ("layer", "node"), ("service_name", "node-agent")),
        ts_ns=TS,
        line=PAYLOAD.decode(),
        metadata=(
            ("node_id", "n-1"),
            ("node_instance_id", "i-2"),
            ("correlation_id", "c-3"),
            ("allocation_id", "a-4"),
            ("workflow_id", "w-5"),
            ("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
            ("span_id", "00f067aa0ba902b7"),
            ("level", "error"),
        ),
    )
    assert entry.label_string == '{env="prod", layer="node", service_name="node-agent"}'


def test_node_id_label_moves_node_id_out_of_metadata() -> None:
    entry = entry_from_record(TS, PAYLOAD, node_id_label=True, default_labels={})

    assert entry.labels == (
        ("env", "prod"),
        ("layer", "node"),
        ("node_id", "n-1"),
        ("service_name", "node-agent"),
    )
    assert [name for name, _ in entry.metadata] == [
        "node_instance_id",
        "correlation_id",
        "allocation_id",
        "workflow_id",
        "trace_id",
        "span_id",
        "level",
    ]


@pytest.mark.parametrize(
    ("record", "node_id_label", "labels", "metadata"),
    [
        pytest.param(
            {"event": "x", "level": "info"},
            False,
            (("env", "dev"), ("layer", "api"), ("service_name", "api")),
            (("level", "info"),),
            id="labels-from-defaults",
        ),
        pytest.param(
            {"event": "x", "service": "svc", "env": ""},
            True,
            (("env", "dev"), ("layer", "api"), ("node_id", "n-default"), ("service_name", "svc")),
            (),
            id="empty-string-is-missing",
        ),
        pytest.param(
            {"event": "x", "allocation_id": 7, "workflow_id": True, "trace_id": None},
            False,
            (("env", "dev"), ("layer", "api"), ("service_name", "api")),
            (("allocation_id", "7"), ("workflow_id", "true")),
            id="non-string-values-as-text",
        ),
        pytest.param(
            {"event": "x", "correlation_id": {"a": 1}, "span_id": 1.5},
            False,
            (("env", "dev"), ("layer", "api"), ("service_name", "api")),
            (("correlation_id", '{"a":1}'), ("span_id", "1.5")),
            id="structured-values-as-json",
        ),
    ],
)
def test_entry_from_record_fallbacks(
    record: dict[str, object],
    node_id_label: bool,
    labels: tuple[tuple[str, str], ...],
    metadata: tuple[tuple[str, str], ...],
) -> None:
    defaults = {"service_name": "api", "layer": "api", "env": "dev", "node_id": "n-default"}
    entry = entry_from_record(
        5, orjson.dumps(record), node_id_label=node_id_label, default_labels=defaults
    )

    assert entry.labels == labels
    assert entry.metadata == metadata


@pytest.mark.parametrize(
    ("payload", "line"),
    [
        pytest.param(b"not json at all", "not json at all", id="not-json"),
        pytest.param(b'["a", 1]', '["a", 1]', id="json-array"),
        pytest.param(b"\xff\xfe broken", "\ufffd\ufffd broken", id="invalid-utf8"),
        pytest.param(b"", "", id="empty"),
    ],
)
def test_payload_that_is_not_an_object_ships_under_default_labels(
    payload: bytes, line: str
) -> None:
    entry = entry_from_record(
        9, payload, node_id_label=False, default_labels={"service_name": "api", "env": "dev"}
    )

    assert entry == PushEntry((("env", "dev"), ("service_name", "api")), 9, line, ())


def test_no_label_at_all_gets_lokis_unknown_service() -> None:
    entry = entry_from_record(1, b'{"event":"x"}', node_id_label=False, default_labels={})

    assert entry.labels == (("service_name", "unknown_service"),)


def test_trailing_newline_is_not_part_of_the_line() -> None:
    entry = entry_from_record(1, b'{"service":"s"}\n', node_id_label=False, default_labels={})

    assert entry.line == '{"service":"s"}'


def test_line_is_the_payload_byte_for_byte() -> None:
    payload = '{"service":"s","event":"caf\u00e9 \\u00e9 \\n","z":1.50}'.encode()
    entry = entry_from_record(1, payload, node_id_label=False, default_labels={})

    assert entry.line.encode() == payload


# -- label strings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "text"),
    [
        ((("service_name", "api"),), '{service_name="api"}'),
        (
            (("service_name", "b"), ("env", "prod"), ("layer", "node")),
            '{env="prod", layer="node", service_name="b"}',
        ),
        ((("env", 'say "hi"'),), '{env="say \\"hi\\""}'),
        ((("env", "C:\\tmp"),), '{env="C:\\\\tmp"}'),
        ((("env", "two\nlines"),), '{env="two\\nlines"}'),
        ((("env", '\\"\n'),), '{env="\\\\\\"\\n"}'),
        ((("env", "tab\there caf\u00e9"),), '{env="tab\there caf\u00e9"}'),
        ((), "{}"),
    ],
)
def test_render_labels_escapes_like_go(labels: tuple[tuple[str, str], ...], text: str) -> None:
    assert render_labels(labels) == text


# -- protobuf ----------------------------------------------------------------------------------

GOLDEN_ENTRY = PushEntry((("service_name", "a"),), 1_000_000_001, "x", (("level", "info"),))
# Worked out by hand from push.proto: streams{labels, entries{timestamp{1, 1}, "x", {level=info}}}
GOLDEN_BYTES = bytes.fromhex(
    "0a2e"  # PushRequest.streams, 46 bytes
    "0a12"
    + b'{service_name="a"}'.hex()  # StreamAdapter.labels, 18 bytes
    + "1218"  # StreamAdapter.entries, 24 bytes
    "0a04" + "0801" + "1001"  # EntryAdapter.timestamp {seconds: 1, nanos: 1}
    "1201"
    + b"x".hex()  # EntryAdapter.line
    + "1a0d"  # EntryAdapter.structuredMetadata, 13 bytes
    "0a05" + b"level".hex() + "1204" + b"info".hex()
)


def test_protobuf_golden_bytes() -> None:
    assert encode_protobuf([GOLDEN_ENTRY]) == GOLDEN_BYTES


def test_protobuf_decodes_field_by_field() -> None:
    first = entry_from_record(TS, PAYLOAD, node_id_label=False, default_labels={})
    other = PushEntry((("service_name", "other"),), 1_000_000_000, "plain", ())
    second = PushEntry(first.labels, TS + 1, "second", (("level", "info"),))

    decoded = decode(encode_protobuf([first, other, second]))

    assert decoded == [
        (
            '{env="prod", layer="node", service_name="node-agent"}',
            [
                (TS, PAYLOAD.decode(), list(first.metadata)),
                (TS + 1, "second", [("level", "info")]),
            ],
        ),
        ('{service_name="other"}', [(1_000_000_000, "plain", [])]),
    ]


def test_protobuf_empty_request_is_empty() -> None:
    assert encode_protobuf([]) == b""


def test_protobuf_timestamp_zero_and_empty_line() -> None:
    entry = PushEntry((("a", "b"),), 0, "", (("level", ""),))

    assert decode(encode_protobuf([entry])) == [('{a="b"}', [(0, "", [("level", "")])])]
    assert encode_protobuf([entry]) == runtime_encode([entry])


def test_metadata_field_cache_empties_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wire, "_MAX_CACHED_FIELDS", 2)
    monkeypatch.setattr(_wire, "metadata_fields", {})  # whatever other tests cached
    blocks: dict[object, bytes] = {}
    monkeypatch.setattr(_wire, "metadata_blocks", blocks)
    monkeypatch.setattr(_push, "metadata_blocks", blocks)
    entries = [
        PushEntry((("a", "b"),), 1, "x", (("allocation_id", f"a-{i}"), ("level", "info")))
        for i in range(5)
    ]

    assert encode_protobuf(entries) == runtime_encode(entries)
    assert len(_wire.metadata_fields) <= 2


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
_entries = st.builds(
    PushEntry,
    labels=st.sampled_from([(("service_name", "a"),), (("env", 'q"\\\n'), ("service_name", "b"))]),
    ts_ns=st.integers(min_value=-(2**62), max_value=2**62),
    line=_text,
    metadata=st.lists(st.tuples(st.sampled_from(["level", "trace_id", "x" * 200]), _text)).map(
        tuple
    ),
)


@given(st.lists(_entries, max_size=8))
def test_protobuf_matches_the_runtime(entries: list[PushEntry]) -> None:
    encoded = encode_protobuf(entries)

    assert encoded == runtime_encode(entries)
    assert decode(encoded) == decode(runtime_encode(entries))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16_383, "ff7f"),
        (16_384, "808001"),
        (2**28 - 1, "ffffff7f"),
        (2**28, "8080808001"),
        (2**35 - 1, "ffffffff7f"),
        (2**35, "808080808001"),
        (2**63, "80808080808080808001"),
        (2**64 - 1, "ffffffffffffffffff01"),
    ],
)
def test_varint_known_values(value: int, encoded: str) -> None:
    assert uvarint(value).hex() == encoded


def _decode_varint(data: bytes) -> tuple[int, int]:
    value = shift = 0
    for index, byte in enumerate(data):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, index + 1
    raise AssertionError("unterminated varint")


@given(st.one_of(st.sampled_from([0, 127, 128, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1)))
def test_varint_round_trips_in_minimal_length(value: int) -> None:
    encoded = uvarint(value)

    assert _decode_varint(encoded) == (value, len(encoded))
    assert len(encoded) == max(1, -(-value.bit_length() // 7))


# -- JSON and bodies ---------------------------------------------------------------------------


def test_json_shape() -> None:
    entries = [
        PushEntry((("env", "dev"), ("service_name", "a")), 10, "one", (("level", "info"),)),
        PushEntry((("service_name", "b"),), 11, "two", ()),
        PushEntry((("env", "dev"), ("service_name", "a")), 12, "three", ()),
    ]

    assert orjson.loads(encode_json(entries)) == {
        "streams": [
            {
                "stream": {"env": "dev", "service_name": "a"},
                "values": [["10", "one", {"level": "info"}], ["12", "three"]],
            },
            {"stream": {"service_name": "b"}, "values": [["11", "two"]]},
        ]
    }


def test_json_gzip_round_trips() -> None:
    entries = [GOLDEN_ENTRY]

    assert gzip.decompress(encode_json(entries, gzip=True)) == encode_json(entries)


def test_body_protobuf_is_snappy_block_compressed() -> None:
    body = encode_body([GOLDEN_ENTRY])

    assert body.headers == {"Content-Type": "application/x-protobuf"}
    assert bytes(cramjam.snappy.decompress_raw(body.content)) == GOLDEN_BYTES


@pytest.mark.parametrize(
    ("gzip_json", "headers"),
    [
        (False, {"Content-Type": "application/json"}),
        (True, {"Content-Type": "application/json", "Content-Encoding": "gzip"}),
    ],
)
def test_body_json_headers(gzip_json: bool, headers: dict[str, str]) -> None:
    body = encode_body([GOLDEN_ENTRY], "json", gzip_json=gzip_json)
    content = gzip.decompress(body.content) if gzip_json else body.content

    assert body.headers == headers
    assert orjson.loads(content) == {
        "streams": [
            {"stream": {"service_name": "a"}, "values": [["1000000001", "x", {"level": "info"}]]}
        ]
    }


_ID_VALUES = st.sampled_from(["n-1", "n-2", "a-9", "wf-2", "c-1", "x" * 300, 'bad "id"', ""])
_RECORDS = st.lists(
    st.fixed_dictionaries(
        {"event": st.text(max_size=40)},
        optional={
            "service": st.sampled_from(["api", "node-agent", ""]),
            "layer": st.sampled_from(["api", "node"]),
            "env": st.sampled_from(["prod", "dev"]),
            "level": st.sampled_from(["info", "error"]),
            "node_id": _ID_VALUES,
            "allocation_id": _ID_VALUES,
            "workflow_id": _ID_VALUES,
            "trace_id": st.sampled_from(["4bf92f3577b34da6a3ce929d0e0e4736", "zz"]),
            "tags": st.lists(st.text(max_size=5), max_size=3),
        },
    ),
    max_size=20,
)


class _Spooled:
    def __init__(self, ts_ns: int, payload: bytes) -> None:
        self.ts_ns = ts_ns
        self.payload = payload


def _mapped_both_ways(
    records: list[dict[str, Any]], node_id_label: bool
) -> tuple[list[PushEntry], list[PushEntry]]:
    """The records, and a last one that is not JSON, mapped as a batch and one by one."""
    spooled = [_Spooled(1_000 + n, orjson.dumps(r)) for n, r in enumerate(records)]
    spooled.append(_Spooled(5, b"not json at all"))
    defaults = {"service_name": "svc", "layer": "api", "env": "dev"}
    batch = entries_from_records(spooled, node_id_label=node_id_label, default_labels=defaults)
    one_by_one = [
        entry_from_record(r.ts_ns, r.payload, node_id_label=node_id_label, default_labels=defaults)
        for r in spooled
    ]
    return batch, one_by_one


@given(_RECORDS, st.booleans())
def test_the_batch_mapping_equals_one_mapping_per_record(
    records: list[dict[str, Any]], node_id_label: bool
) -> None:
    batch, one_by_one = _mapped_both_ways(records, node_id_label)
    assert batch == one_by_one


# A batch of more than _PROBE_RECORDS (256) records: the first 256 are mapped with the table
# of known identifier combinations, the rest with it only when at most half of the 256 missed
# it. Here the first 256 records cycle through `probe_combinations` allocation ids, the next
# 44 carry a new one each, and the last is not JSON: the table ends up holding the probe's
# combinations, plus the rest's 44 when the rest was mapped with it.
@pytest.mark.parametrize(
    ("probe_combinations", "cached_mappings"),
    [
        (3, 3 + 44),  # a few requests in flight: the table pays for the rest
        (128, 128 + 44),  # half the probe missed: still worth it
        (129, 129),  # more than half missed: the rest is mapped without the table
        (256, 256),  # every record new
    ],
)
def test_a_batch_longer_than_the_probe_maps_every_record_and_caches_only_when_it_pays(
    monkeypatch: pytest.MonkeyPatch, probe_combinations: int, cached_mappings: int
) -> None:
    monkeypatch.setattr(entries_module, "_mappings", {})
    records = [
        {"event": "e", "n": n, "allocation_id": f"a-{n % probe_combinations}"} for n in range(256)
    ]
    records += [{"event": "e", "n": n, "allocation_id": f"r-{n}"} for n in range(256, 300)]
    batch, one_by_one = _mapped_both_ways(records, node_id_label=False)
    assert len(batch) == 301
    assert batch == one_by_one
    (table,) = entries_module._mappings.values()
    assert len(table) == cached_mappings
