"""Loki's push protobuf, by hand: the wire pieces ``_push`` and ``_record_encoder`` share.

From Loki's ``pkg/push/push.proto`` (see ``_push`` for the messages): field tags, base-128
varints, ``structuredMetadata`` fields and whole metadata blocks, the ``timestamp`` field up to
its nanos, and the heads (tag and length) of ``line`` and ``entries`` fields. Pure, no I/O, no
protobuf runtime. The caches here are module-level and emptied when full rather than managed
as an LRU, which would cost more per hit than it saves; they hold encoded bytes only.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "NS_PER_S",
    "SMALL_VARINTS",
    "TAG_ENTRIES",
    "TAG_LABELS",
    "TAG_LINE",
    "TAG_METADATA",
    "TAG_NAME",
    "TAG_NANOS",
    "TAG_SECONDS",
    "TAG_STREAMS",
    "TAG_TIMESTAMP",
    "TAG_VALUE",
    "cached_metadata_block",
    "entry_heads",
    "int64_varint",
    "length_delimited",
    "line_heads",
    "metadata_block",
    "metadata_blocks",
    "metadata_field",
    "metadata_fields",
    "name_field",
    "new_entry_head",
    "new_line_head",
    "timestamp_prefixes",
    "uvarint",
]

# One-byte varints, prebuilt: most lengths and every tag we write are below 128.
SMALL_VARINTS: Final = tuple(bytes((n,)) for n in range(128))

# Field keys, (field_number << 3) | wire_type; wire type 0 = varint, 2 = length-delimited.
TAG_STREAMS: Final = b"\x0a"  # PushRequest.streams = 1, length-delimited
TAG_LABELS: Final = b"\x0a"  # StreamAdapter.labels = 1, length-delimited
TAG_ENTRIES: Final = b"\x12"  # StreamAdapter.entries = 2, length-delimited
TAG_TIMESTAMP: Final = b"\x0a"  # EntryAdapter.timestamp = 1, length-delimited
TAG_LINE: Final = b"\x12"  # EntryAdapter.line = 2, length-delimited
TAG_METADATA: Final = b"\x1a"  # EntryAdapter.structuredMetadata = 3, length-delimited
TAG_SECONDS: Final = b"\x08"  # Timestamp.seconds = 1, varint
TAG_NANOS: Final = b"\x10"  # Timestamp.nanos = 2, varint
TAG_NAME: Final = b"\x0a"  # LabelPairAdapter.name = 1, length-delimited
TAG_VALUE: Final = b"\x12"  # LabelPairAdapter.value = 2, length-delimited

NS_PER_S: Final = 1_000_000_000
_UINT64: Final = 1 << 64


def uvarint(value: int) -> bytes:
    """Base-128 varint, least significant group first (protobuf's encoding)."""
    # Unrolled up to five bytes (values below 2**35: every length, every nanos field and the
    # seconds of any date before 3058); a loop costs several times as much per call.
    if value < 0x80:
        return SMALL_VARINTS[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0x10000000:
        return bytes(
            (
                (value & 0x7F) | 0x80,
                ((value >> 7) & 0x7F) | 0x80,
                ((value >> 14) & 0x7F) | 0x80,
                value >> 21,
            )
        )
    if value < 0x800000000:
        return bytes(
            (
                (value & 0x7F) | 0x80,
                ((value >> 7) & 0x7F) | 0x80,
                ((value >> 14) & 0x7F) | 0x80,
                ((value >> 21) & 0x7F) | 0x80,
                value >> 28,
            )
        )
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def int64_varint(value: int) -> bytes:
    # Negative int64 values go on the wire as their 64-bit two's complement (10 bytes).
    return uvarint(value + _UINT64 if value < 0 else value)


def length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + uvarint(len(payload)) + payload


def name_field(name: str) -> bytes:
    encoded = name.encode()
    return TAG_NAME + uvarint(len(encoded)) + encoded


# Encoded ``structuredMetadata`` fields (tag, length, LabelPairAdapter) by (name, value). The
# same identifiers recur on every record of a request, allocation or node, so most pairs are
# encoded once; the cache is emptied when it reaches _MAX_CACHED_FIELDS rather than managed
# as an LRU, which would cost more per hit than it saves.
metadata_fields: dict[tuple[str, str], bytes] = {}
_MAX_CACHED_FIELDS: Final = 16_384


def metadata_field(pair: tuple[str, str]) -> bytes:
    name, value = pair
    encoded = value.encode()
    body = name_field(name) + (length_delimited(TAG_VALUE, encoded) if encoded else b"")
    field = length_delimited(TAG_METADATA, body)
    if len(metadata_fields) >= _MAX_CACHED_FIELDS:
        metadata_fields.clear()
    metadata_fields[pair] = field
    return field


# Every metadata field of an entry, encoded and joined, by the entry's metadata tuple: the
# records of one request, allocation or node share the whole tuple, so an entry costs one
# lookup instead of one per pair. Emptied when full, like the pair cache.
metadata_blocks: dict[tuple[tuple[str, str], ...], bytes] = {}
_MAX_CACHED_BLOCKS: Final = 1024


def metadata_block(metadata: tuple[tuple[str, str], ...]) -> bytes:
    cached = metadata_fields.get
    return b"".join([cached(pair) or metadata_field(pair) for pair in metadata])


def cached_metadata_block(metadata: tuple[tuple[str, str], ...]) -> bytes:
    block = metadata_block(metadata)
    if len(metadata_blocks) >= _MAX_CACHED_BLOCKS:
        metadata_blocks.clear()
    metadata_blocks[metadata] = block
    return block


def timestamp_prefixes(seconds: int) -> tuple[bytes, ...]:
    """An entry's ``timestamp`` field up to its nanos varint, by that varint's length.

    Index 0 is the whole field for nanos 0 (omitted, as proto3 omits defaults); index n ends
    with the nanos tag, for an n-byte varint (nanos < 10**9 < 2**35 takes at most 5).
    """
    encoded = TAG_SECONDS + int64_varint(seconds) if seconds else b""
    size = len(encoded)  # at most 11, so every length below fits one byte
    with_nanos = (
        TAG_TIMESTAMP + SMALL_VARINTS[size + 1 + n] + encoded + TAG_NANOS for n in range(1, 6)
    )
    return (TAG_TIMESTAMP + SMALL_VARINTS[size] + encoded, *with_nanos)


# b"\x12" + varint(n) (the ``line`` field's tag and length, none for an empty line) and
# b"\x12" + varint(n) (an ``entries`` field's tag and length), by n: a lookup costs less than
# encoding the varint, and lines of one service have a few hundred lengths at most.
line_heads: dict[int, bytes] = {0: b""}
entry_heads: dict[int, bytes] = {}
_MAX_CACHED_HEADS: Final = 4096


def new_line_head(length: int) -> bytes:
    head = TAG_LINE + uvarint(length)
    if len(line_heads) >= _MAX_CACHED_HEADS:
        line_heads.clear()
        line_heads[0] = b""
    line_heads[length] = head
    return head


def new_entry_head(length: int) -> bytes:
    head = TAG_ENTRIES + uvarint(length)
    if len(entry_heads) >= _MAX_CACHED_HEADS:
        entry_heads.clear()
    entry_heads[length] = head
    return head
