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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    "PushEntry",
    "PushStream",
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


def _build_pool() -> descriptor_pool.DescriptorPool:
    """Build push.proto in a private pool, so it cannot clash with another definition."""
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
    _field(entry, "structuredMetadata", 3, fdp.TYPE_MESSAGE, repeated=True, type_name=pairs)
    _field(entry, "parsed", 4, fdp.TYPE_MESSAGE, repeated=True, type_name=pairs)
    pool.Add(proto)
    return pool


_POOL = _build_pool()
_PUSH_REQUEST: Any = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("logproto.PushRequest")
)


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
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise ValueError(f"snappy: {exc}".replace("snappy: snappy: ", "snappy: ")) from exc
    request = _PUSH_REQUEST()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        raise ValueError(f"proto: {exc}") from exc
    streams = []
    for stream in request.streams:
        entries = tuple(
            PushEntry(
                ts_ns=entry.timestamp.seconds * _NS_PER_S + entry.timestamp.nanos,
                line=entry.line,
                metadata=tuple((pair.name, pair.value) for pair in entry.structuredMetadata),
            )
            for entry in stream.entries
        )
        streams.append(PushStream(stream.labels, entries))
    return streams


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
