"""Loki's ``push.proto`` messages, built at runtime, and the push payload model.

The descriptor mirrors ``pkg/push/push.proto`` (package ``logproto``) field for field,
without the gogoproto options (they only change Go code generation)::

    message PushRequest   { repeated StreamAdapter streams = 1; string format = 2; }
    message StreamAdapter { string labels = 1; repeated EntryAdapter entries = 2; uint64 hash = 3; }
    message EntryAdapter  { google.protobuf.Timestamp timestamp = 1; string line = 2;
                            repeated LabelPairAdapter structuredMetadata = 3;
                            repeated LabelPairAdapter parsed = 4; }
    message LabelPairAdapter { string name = 1; string value = 2; }

The HTTP body is the serialized ``PushRequest`` compressed with snappy's *block*
format (Loki's ``util.RawSnappy``), not the framed/stream format.

The server decodes with a twin schema whose ``structuredMetadata`` is ``repeated
bytes`` (see :func:`decode_protobuf`): pairs stay serialized and each distinct one is
parsed once with the real ``LabelPairAdapter``. Whenever that path meets something it
cannot vouch for, it re-parses with the full schema, so what is accepted, what is
refused and the refusal's message are the full schema's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, NamedTuple

import cramjam

# No types-protobuf in the dev extra; the runtime-built classes are Any regardless.
from google.protobuf import (  # type: ignore[import-untyped, unused-ignore]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    timestamp_pb2,
)
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]

__all__ = [
    "DecodedPush",
    "DecodedStream",
    "PushEntry",
    "PushStream",
    "decode_protobuf",
    "decode_protobuf_push",
    "encode_protobuf_push",
    "push_request_class",
]

_NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class PushEntry:
    """One entry of a push: timestamp, line and structured metadata pairs in wire order."""

    ts_ns: int
    line: str
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PushStream:
    """One stream of a push: the label-set text exactly as sent, and its entries."""

    labels: str
    entries: tuple[PushEntry, ...]


class DecodedStream(NamedTuple):
    """One stream of a decoded push, column by column (entry ``i`` is index ``i`` of each).

    Attributes:
        labels: the label-set text exactly as sent.
        timestamps: ns since the epoch.
        lines: the log lines.
        slots: where the entry's structured metadata is in :attr:`DecodedPush.metadata`.
    """

    labels: str
    timestamps: list[int]
    lines: list[str]
    slots: list[int]


@dataclass(frozen=True)
class DecodedPush:
    """A decoded push in the form the store consumes.

    Columns instead of an object per entry let the store check a whole stream with
    C-level ``min``/``max``/``map`` and build its keys with ``zip``. Entries with equal
    metadata share a slot, so the store checks and normalises each distinct metadata
    once, not once per entry.

    Attributes:
        streams: the streams in wire order.
        metadata: the distinct structured metadata of this push, pairs in wire order.
    """

    streams: list[DecodedStream]
    metadata: list[tuple[tuple[str, str], ...]]

    @classmethod
    def from_streams(cls, streams: Sequence[PushStream]) -> DecodedPush:
        """Build the compact form of streams.

        Args:
            streams: the streams, in wire order.

        Returns:
            The equivalent decoded push.
        """
        slots: dict[tuple[tuple[str, str], ...], int] = {}
        compact = [
            DecodedStream(
                stream.labels,
                [entry.ts_ns for entry in stream.entries],
                [entry.line for entry in stream.entries],
                [slots.setdefault(entry.metadata, len(slots)) for entry in stream.entries],
            )
            for stream in streams
        ]
        return cls(compact, list(slots))

    def entry_count(self) -> int:
        """Return how many entries the push carries, over all streams."""
        return sum(len(stream.lines) for stream in self.streams)

    def to_streams(self) -> list[PushStream]:
        """Return the push as :class:`PushStream` values (the public model).

        Returns:
            The streams in wire order.
        """
        metadata = self.metadata
        return [
            PushStream(
                stream.labels,
                tuple(
                    PushEntry(ts_ns, line, metadata[slot])
                    for ts_ns, line, slot in zip(
                        stream.timestamps, stream.lines, stream.slots, strict=True
                    )
                ),
            )
            for stream in self.streams
        ]


def _field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int,
    *,
    repeated: bool = False,
    type_name: str = "",
) -> None:
    spec = message.field.add(name=name, number=number, type=kind)
    spec.label = spec.LABEL_REPEATED if repeated else spec.LABEL_OPTIONAL
    if type_name:
        spec.type_name = type_name


def _build_pool(*, raw_metadata: bool = False) -> descriptor_pool.DescriptorPool:
    """Build push.proto in a private pool, so it cannot clash with another definition.

    With ``raw_metadata``, ``EntryAdapter.structuredMetadata`` is declared ``repeated
    bytes`` instead of ``repeated LabelPairAdapter``: the same wire type (length
    delimited), so a body parses to the same structure, but each pair stays serialized.
    Reading five pairs through the protobuf runtime costs several µs per entry; bytes
    can be looked up in a cache of pairs already decoded.
    """
    fdp = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    proto = descriptor_pb2.FileDescriptorProto(
        name="pkg/push/push.proto",
        package="logproto",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    request = proto.message_type.add(name="PushRequest")
    _field(
        request, "streams", 1, fdp.TYPE_MESSAGE, repeated=True, type_name=".logproto.StreamAdapter"
    )
    _field(request, "format", 2, fdp.TYPE_STRING)
    stream = proto.message_type.add(name="StreamAdapter")
    _field(stream, "labels", 1, fdp.TYPE_STRING)
    _field(
        stream, "entries", 2, fdp.TYPE_MESSAGE, repeated=True, type_name=".logproto.EntryAdapter"
    )
    _field(stream, "hash", 3, fdp.TYPE_UINT64)
    pair = proto.message_type.add(name="LabelPairAdapter")
    _field(pair, "name", 1, fdp.TYPE_STRING)
    _field(pair, "value", 2, fdp.TYPE_STRING)
    entry = proto.message_type.add(name="EntryAdapter")
    _field(entry, "timestamp", 1, fdp.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    _field(entry, "line", 2, fdp.TYPE_STRING)
    pairs = ".logproto.LabelPairAdapter"
    if raw_metadata:
        _field(entry, "structuredMetadata", 3, fdp.TYPE_BYTES, repeated=True)
    else:
        _field(entry, "structuredMetadata", 3, fdp.TYPE_MESSAGE, repeated=True, type_name=pairs)
    _field(entry, "parsed", 4, fdp.TYPE_MESSAGE, repeated=True, type_name=pairs)
    pool.Add(proto)
    return pool


_POOL = _build_pool()
_PUSH_REQUEST: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("logproto.PushRequest")
)
_LABEL_PAIR: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("logproto.LabelPairAdapter")
)
_RAW_PUSH_REQUEST: Any = message_factory.GetMessageClass(
    _build_pool(raw_metadata=True).FindMessageTypeByName("logproto.PushRequest")
)
# Serialized LabelPairAdapter -> (name, value). Clients repeat a handful of pairs (the
# identifiers of a few operations), so this stays small; cleared if it ever grows large.
_PAIRS: dict[bytes, tuple[str, str]] = {}
_MAX_CACHED_PAIRS = 100_000


def push_request_class() -> Any:
    """Return the runtime-built ``logproto.PushRequest`` message class.

    Returns:
        A protobuf message class (fields: ``streams``, ``format``).
    """
    return _PUSH_REQUEST


def decode_protobuf_push(body: bytes) -> list[PushStream]:
    """Decode a snappy-block-compressed ``PushRequest``.

    Args:
        body: the HTTP body (after any ``Content-Encoding`` was undone).

    Returns:
        The streams in wire order.

    Raises:
        ValueError: the body is not snappy block data or not a ``PushRequest``; the
            message is what the server answers with its 400.
    """
    return decode_protobuf(body).to_streams()


def decode_protobuf(body: bytes) -> DecodedPush:
    """Decode a snappy-block-compressed ``PushRequest`` into the server's compact form.

    Same acceptance and messages as :func:`decode_protobuf_push` (that is this, then
    :meth:`DecodedPush.to_streams`).

    Args:
        body: the HTTP body (after any ``Content-Encoding`` was undone).

    Returns:
        The decoded push.

    Raises:
        ValueError: the body is not snappy block data or not a ``PushRequest``.
    """
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise ValueError(f"snappy: {exc}".replace("snappy: snappy: ", "snappy: ")) from exc
    request = _RAW_PUSH_REQUEST()
    try:
        request.ParseFromString(raw)
    except DecodeError:
        # The raw schema accepts a superset of the strict one: let the strict parser
        # say why, in its own words.
        return _decode_strict(raw)
    slots: dict[tuple[bytes, ...], int] = {}
    metadata: list[tuple[tuple[str, str], ...]] = []
    streams: list[DecodedStream] = []
    for stream in request.streams:
        timestamps: list[int] = []
        lines: list[str] = []
        add_ts, add_line = timestamps.append, lines.append
        # Runs of entries sharing metadata: (first index, slot); usually just one.
        runs: list[tuple[int, int]] = []
        previous: list[bytes] | None = None
        for entry in stream.entries:
            # A list copy is the cheapest read of a repeated field; consecutive entries
            # mostly share their metadata, and comparing lists skips hashing it.
            serialized = entry.structuredMetadata[:]
            if serialized != previous:
                key = tuple(serialized)
                slot = slots.get(key)
                if slot is None:
                    pairs = _decode_pairs(key)
                    if pairs is None:
                        return _decode_strict(raw)
                    slot = slots[key] = len(metadata)
                    metadata.append(pairs)
                runs.append((len(lines), slot))
                previous = serialized
            stamp = entry.timestamp
            add_ts(stamp.seconds * _NS_PER_S + stamp.nanos)
            add_line(entry.line)
        streams.append(DecodedStream(stream.labels, timestamps, lines, _expand(runs, len(lines))))
    return DecodedPush(streams, metadata)


def _expand(runs: list[tuple[int, int]], count: int) -> list[int]:
    """Per-entry slots from runs of ``(first index, slot)`` covering ``count`` entries."""
    if len(runs) <= 1:
        return [slot for _, slot in runs] * count
    ends = [start for start, _ in runs[1:]] + [count]
    return list(
        chain.from_iterable(
            repeat(slot, end - start) for (start, slot), end in zip(runs, ends, strict=True)
        )
    )


def _decode_pairs(key: tuple[bytes, ...]) -> tuple[tuple[str, str], ...] | None:
    """Decode serialized ``LabelPairAdapter`` messages; None when one is malformed."""
    pairs = []
    for serialized in key:
        pair = _PAIRS.get(serialized)
        if pair is None:
            try:
                message = _LABEL_PAIR.FromString(serialized)
            except DecodeError:
                return None
            if len(_PAIRS) >= _MAX_CACHED_PAIRS:
                _PAIRS.clear()
            pair = _PAIRS[serialized] = (message.name, message.value)
        pairs.append(pair)
    return tuple(pairs)


def _decode_strict(raw: bytes) -> DecodedPush:
    """Decode with the full schema, one message object per pair (the reference path)."""
    request = _PUSH_REQUEST()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        raise ValueError(f"proto: {exc}") from exc
    return DecodedPush.from_streams(
        [
            PushStream(
                stream.labels,
                tuple(
                    PushEntry(
                        ts_ns=entry.timestamp.seconds * _NS_PER_S + entry.timestamp.nanos,
                        line=entry.line,
                        metadata=tuple(
                            (pair.name, pair.value) for pair in entry.structuredMetadata
                        ),
                    )
                    for entry in stream.entries
                ),
            )
            for stream in request.streams
        ]
    )


def encode_protobuf_push(streams: list[PushStream]) -> bytes:
    """Encode streams as Loki's protobuf push body (serialized, snappy block format).

    Tests use this to build payloads with the real protobuf runtime.

    Args:
        streams: the streams to send.

    Returns:
        The body to POST with ``Content-Type: application/x-protobuf``.
    """
    request = _PUSH_REQUEST()
    for stream in streams:
        out = request.streams.add(labels=stream.labels)
        for entry in stream.entries:
            item = out.entries.add(line=entry.line)
            seconds, nanos = divmod(entry.ts_ns, _NS_PER_S)
            item.timestamp.seconds = seconds
            item.timestamp.nanos = nanos
            for name, value in entry.metadata:
                item.structuredMetadata.add(name=name, value=value)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))
