"""Loki push bodies: entries encoded as protobuf or JSON.

Pure and fast: no I/O, no protobuf runtime. The protobuf encoding is written by hand from
Loki's ``pkg/push/push.proto``::

    PushRequest      { repeated StreamAdapter streams = 1; }
    StreamAdapter    { string labels = 1; repeated EntryAdapter entries = 2; uint64 hash = 3; }
    EntryAdapter     { google.protobuf.Timestamp timestamp = 1; string line = 2;
                       repeated LabelPairAdapter structuredMetadata = 3; }
    LabelPairAdapter { string name = 1; string value = 2; }
    Timestamp        { int64 seconds = 1; int32 nanos = 2; }

``hash`` is never sent (Loki computes it). Fields holding their proto3 default (0, "") are
omitted, as the reference encoders do, so our bytes equal the protobuf runtime's. The wire
pieces (tags, varints, metadata fields, timestamp prefixes) are in ``_wire``.

The wire body is that message compressed with snappy's *block* format (not the framed
format): Loki's distributor decodes ``application/x-protobuf`` bodies with ``snappy.Decode``.

Here :func:`encode_protobuf` encodes entries (records are mapped to :class:`PushEntry` by
``_entries``): the reference path, also used for JSON bodies, dead letters and
``agent-logging drain``. The shipper's protobuf path, straight from spooled records to bytes
by stream key, is ``_record_encoder``: it maps records with ``_entries``' mapping, and its
output is byte for byte that of the reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import cramjam
import orjson

from agent_logging.loki._entries import PushEntry, render_labels
from agent_logging.loki._wire import (
    NS_PER_S,
    SMALL_VARINTS,
    TAG_ENTRIES,
    TAG_LABELS,
    TAG_LINE,
    TAG_STREAMS,
    cached_metadata_block,
    metadata_block,
    metadata_blocks,
    timestamp_prefixes,
    uvarint,
)

__all__ = [
    "JSON_CONTENT_TYPE",
    "PROTOBUF_CONTENT_TYPE",
    "PushBody",
    "encode_body",
    "encode_json",
    "encode_protobuf",
]

PROTOBUF_CONTENT_TYPE: Final = "application/x-protobuf"
JSON_CONTENT_TYPE: Final = "application/json"


@dataclass(frozen=True, slots=True)
class PushBody:
    """An encoded push request, ready to POST to ``/loki/api/v1/push``.

    Attributes:
        content: the request body.
        headers: ``Content-Type`` and, when compressed JSON, ``Content-Encoding``.
    """

    content: bytes
    headers: Mapping[str, str]


def _encode_stream(
    labels: tuple[tuple[str, str], ...], entries: Iterable[PushEntry], out: list[bytes]
) -> None:
    """Append one ``StreamAdapter`` field to ``out``, in pieces for one final join."""
    label_text = render_labels(labels).encode()
    label_length = uvarint(len(label_text))
    parts = [TAG_LABELS, label_length, label_text]
    size = 1 + len(label_length) + len(label_text)
    small = SMALL_VARINTS
    blocks = metadata_blocks
    seconds_seen = None
    prefixes: tuple[bytes, ...] = ()
    # Hot path, once per entry: every piece is appended to one list (no intermediate joins)
    # and the common varints (lengths below 16384, 5-byte nanos) are written inline.
    for _, ts_ns, line, metadata in entries:
        seconds, nanos = divmod(ts_ns, NS_PER_S)
        if seconds != seconds_seen:  # consecutive entries mostly share their second
            prefixes = timestamp_prefixes(seconds)
            seconds_seen = seconds
        if nanos >= 0x10000000:
            nanos_bytes = bytes(
                (
                    (nanos & 0x7F) | 0x80,
                    ((nanos >> 7) & 0x7F) | 0x80,
                    ((nanos >> 14) & 0x7F) | 0x80,
                    ((nanos >> 21) & 0x7F) | 0x80,
                    nanos >> 28,
                )
            )
        else:
            nanos_bytes = uvarint(nanos) if nanos else b""
        timestamp = prefixes[len(nanos_bytes)]
        try:
            block = blocks.get(metadata)
        except TypeError:  # not hashable (a list): encoded afresh, never cached
            block = metadata_block(metadata)
        if block is None:
            block = cached_metadata_block(metadata)
        encoded = line.encode()
        length = len(encoded)
        if length:
            line_length = (
                small[length]
                if length < 0x80
                else bytes(((length & 0x7F) | 0x80, length >> 7))
                if length < 0x4000
                else uvarint(length)
            )
            body = len(timestamp) + len(nanos_bytes) + 1 + len(line_length) + length + len(block)
            body_length = (
                small[body]
                if body < 0x80
                else bytes(((body & 0x7F) | 0x80, body >> 7))
                if body < 0x4000
                else uvarint(body)
            )
            parts += (
                TAG_ENTRIES,
                body_length,
                timestamp,
                nanos_bytes,
                TAG_LINE,
                line_length,
                encoded,
                block,
            )
        else:  # proto3 omits an empty string
            body = len(timestamp) + len(nanos_bytes) + len(block)
            body_length = small[body] if body < 0x80 else uvarint(body)
            parts += (TAG_ENTRIES, body_length, timestamp, nanos_bytes, block)
        size += 1 + len(body_length) + body
    out += (TAG_STREAMS, uvarint(size))
    out += parts


def _group(entries: Iterable[PushEntry]) -> dict[tuple[tuple[str, str], ...], list[PushEntry]]:
    # Streams in order of first appearance, entries in their original order within a stream:
    # Loki requires nothing more, and keeping order makes the output deterministic.
    streams: dict[tuple[tuple[str, str], ...], list[PushEntry]] = {}
    for entry in entries:
        stream = streams.get(entry.labels)
        if stream is None:
            streams[entry.labels] = [entry]
        else:
            stream.append(entry)
    return streams


def encode_protobuf(entries: Iterable[PushEntry]) -> bytes:
    """Encode entries as a serialized (uncompressed) ``logproto.PushRequest``.

    Args:
        entries: the entries, grouped here into one stream per label set.

    Returns:
        The protobuf message bytes; :func:`encode_body` compresses them for the wire.
    """
    out: list[bytes] = []
    for labels, stream_entries in _group(entries).items():
        _encode_stream(labels, stream_entries, out)
    return b"".join(out)


def encode_json(entries: Iterable[PushEntry], *, gzip: bool = False) -> bytes:
    """Encode entries as Loki's JSON push body.

    The shape is ``{"streams":[{"stream":{...},"values":[["<ns>","<line>",{metadata}]]}]}``;
    the metadata object is left out of an entry that has none.

    Args:
        entries: the entries, grouped here into one stream per label set.
        gzip: gzip the body (send it with ``Content-Encoding: gzip``).

    Returns:
        The body bytes.
    """
    streams = [
        {
            "stream": dict(labels),
            "values": [
                [str(e.ts_ns), e.line, dict(e.metadata)] if e.metadata else [str(e.ts_ns), e.line]
                for e in stream_entries
            ],
        }
        for labels, stream_entries in _group(entries).items()
    ]
    body = orjson.dumps({"streams": streams})
    return bytes(cramjam.gzip.compress(body)) if gzip else body


def encode_body(
    entries: Sequence[PushEntry],
    encoding: Literal["protobuf", "json"] = "protobuf",
    *,
    gzip_json: bool = False,
) -> PushBody:
    """Encode entries as the body and headers of one push request.

    Args:
        entries: the entries to push.
        encoding: ``protobuf`` (snappy block-compressed) or ``json``.
        gzip_json: with ``json``, gzip the body.

    Returns:
        The body and its content headers.
    """
    if encoding == "protobuf":
        content = bytes(cramjam.snappy.compress_raw(encode_protobuf(entries)))
        return PushBody(content, {"Content-Type": PROTOBUF_CONTENT_TYPE})
    headers = {"Content-Type": JSON_CONTENT_TYPE}
    if gzip_json:
        headers["Content-Encoding"] = "gzip"
    return PushBody(encode_json(entries, gzip=gzip_json), headers)
