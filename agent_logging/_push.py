"""Loki push bodies: records mapped to entries, entries encoded as protobuf or JSON.

Pure and fast: no I/O, no protobuf runtime. The protobuf encoding is written by hand from
Loki's ``pkg/push/push.proto``::

    PushRequest      { repeated StreamAdapter streams = 1; }
    StreamAdapter    { string labels = 1; repeated EntryAdapter entries = 2; uint64 hash = 3; }
    EntryAdapter     { google.protobuf.Timestamp timestamp = 1; string line = 2;
                       repeated LabelPairAdapter structuredMetadata = 3; }
    LabelPairAdapter { string name = 1; string value = 2; }
    Timestamp        { int64 seconds = 1; int32 nanos = 2; }

``hash`` is never sent (Loki computes it). Fields holding their proto3 default (0, "") are
omitted, as the reference encoders do, so our bytes equal the protobuf runtime's.

The wire body is that message compressed with snappy's *block* format (not the framed
format): Loki's distributor decodes ``application/x-protobuf`` bodies with ``snappy.Decode``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, Protocol

import cramjam
import orjson

from agent_logging._types import IDENTIFIER_KEYS, TRACE_KEYS

__all__ = [
    "JSON_CONTENT_TYPE",
    "LABEL_NAMES",
    "METADATA_KEYS",
    "PROTOBUF_CONTENT_TYPE",
    "PushBody",
    "PushEntry",
    "RecordLike",
    "encode_body",
    "encode_json",
    "encode_protobuf",
    "entries_from_records",
    "entry_from_record",
    "render_labels",
]

PROTOBUF_CONTENT_TYPE: Final = "application/x-protobuf"
JSON_CONTENT_TYPE: Final = "application/json"

#: Stream labels (DESIGN §5): few, static, low cardinality. ``node_id`` only when asked for.
LABEL_NAMES: Final = ("service_name", "layer", "env", "node_id")

#: Record keys shipped as structured metadata, in this order: queryable without a parser
#: (``| allocation_id="a-9"``) yet never a label, so they cost no streams.
METADATA_KEYS: Final = (*IDENTIFIER_KEYS, *TRACE_KEYS, "level")

#: Loki's own name for a stream whose service is unknown (its ``discover_service_name``
#: fallback). Used only when neither the record nor the defaults name any label, because Loki
#: refuses a stream without labels ("at least one label pair is required per stream").
_UNKNOWN_SERVICE: Final = (("service_name", "unknown_service"),)

# Which record key feeds which label.
_LABEL_SOURCES: Final = (("service_name", "service"), ("layer", "layer"), ("env", "env"))

# One-byte varints, prebuilt: most lengths and every tag we write are below 128.
_SMALL_VARINTS: Final = tuple(bytes((n,)) for n in range(128))

# Field keys, (field_number << 3) | wire_type; wire type 0 = varint, 2 = length-delimited.
_TAG_STREAMS: Final = b"\x0a"  # PushRequest.streams = 1, length-delimited
_TAG_LABELS: Final = b"\x0a"  # StreamAdapter.labels = 1, length-delimited
_TAG_ENTRIES: Final = b"\x12"  # StreamAdapter.entries = 2, length-delimited
_TAG_TIMESTAMP: Final = b"\x0a"  # EntryAdapter.timestamp = 1, length-delimited
_TAG_LINE: Final = b"\x12"  # EntryAdapter.line = 2, length-delimited
_TAG_METADATA: Final = b"\x1a"  # EntryAdapter.structuredMetadata = 3, length-delimited
_TAG_SECONDS: Final = 0x08  # Timestamp.seconds = 1, varint
_TAG_NANOS: Final = 0x10  # Timestamp.nanos = 2, varint
_TAG_NAME: Final = b"\x0a"  # LabelPairAdapter.name = 1, length-delimited
_TAG_VALUE: Final = b"\x12"  # LabelPairAdapter.value = 2, length-delimited

_NS_PER_S: Final = 1_000_000_000
_UINT64: Final = 1 << 64


class PushEntry(NamedTuple):
    """One Loki entry: its stream labels, timestamp, line and structured metadata.

    A named tuple rather than a frozen dataclass: it is built once per record on the hot
    path, and a tuple is created in a third of the time.

    Attributes:
        labels: the stream's label pairs, sorted by name.
        ts_ns: the entry's timestamp, nanoseconds since the UNIX epoch (the record's own).
        line: the log line, the record's JSON text unchanged.
        metadata: structured metadata pairs, in :data:`METADATA_KEYS` order.
    """

    labels: tuple[tuple[str, str], ...]
    ts_ns: int
    line: str
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def label_string(self) -> str:
        """The labels in Prometheus form, e.g. ``{env="prod", service_name="api"}``."""
        return render_labels(self.labels)


@dataclass(frozen=True, slots=True)
class PushBody:
    """An encoded push request, ready to POST to ``/loki/api/v1/push``.

    Attributes:
        content: the request body.
        headers: ``Content-Type`` and, when compressed JSON, ``Content-Encoding``.
    """

    content: bytes
    headers: Mapping[str, str]


def _escape(value: str) -> str:
    # Go string-literal escaping, the subset PromQL/LogQL's lexer needs: it treats a backslash
    # as an escape and a raw newline as an unterminated string; a quote ends the value.
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


@functools.lru_cache(maxsize=4096)
def render_labels(labels: tuple[tuple[str, str], ...]) -> str:
    """Render label pairs the way Loki parses a stream selector.

    Args:
        labels: ``(name, value)`` pairs; sorted here by name.

    Returns:
        ``{env="prod", layer="node", service_name="node-agent"}``: names sorted, values
        quoted with ``\\``, ``"`` and newline escaped Go-style.
    """
    inner = ", ".join(f'{name}="{_escape(value)}"' for name, value in sorted(labels))
    return "{" + inner + "}"


@functools.lru_cache(maxsize=4096)
def _label_pairs(
    service: str | None, layer: str | None, env: str | None, node_id: str | None
) -> tuple[tuple[str, str], ...]:
    # Cached: a process logs under a handful of label sets, and building the tuple is a
    # measurable share of the per-entry cost.
    pairs = [
        (name, value)
        for name, value in (
            ("service_name", service),
            ("layer", layer),
            ("env", env),
            ("node_id", node_id),
        )
        if value
    ]
    pairs.sort()
    return tuple(pairs) or _UNKNOWN_SERVICE


def _text(value: object) -> str | None:
    """A record value as label/metadata text; None for absent or empty values."""
    if type(value) is str:
        return value or None
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()


def _strip_newline(line: str) -> str:
    # The record is one line; a terminator, if the spool kept one, is framing, not content.
    if line.endswith("\n"):
        line = line[:-2] if line.endswith("\r\n") else line[:-1]
    return line


class RecordLike(Protocol):
    """A spooled record as :func:`entries_from_records` reads it (``_spool.SpooledRecord``)."""

    @property
    def ts_ns(self) -> int: ...

    @property
    def payload(self) -> bytes: ...


# The record keys an entry's labels and metadata come from: the label sources, then
# METADATA_KEYS (which holds ``node_id``, the fourth label's source too).
_FIELD_KEYS: Final = ("service", "layer", "env", *METADATA_KEYS)
_NODE_ID_AT: Final = _FIELD_KEYS.index("node_id")
_METADATA_FROM: Final = len(_FIELD_KEYS) - len(METADATA_KEYS)

# (labels, metadata) already worked out, by the tuple of the record's values for _FIELD_KEYS,
# one table per (node_id_label, default labels). Records of one request, allocation or node
# share all of those values, so the mapping is done once per combination; a table is emptied
# when it reaches _MAX_CACHED_MAPPINGS (an LRU would cost more per hit than it saves).
# Only keys made of str and None are stored: 1, 1.0 and True are equal as keys but render
# differently, and a str is equal only to the same str.
_Mapped = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
_mappings: dict[tuple[object, ...], dict[tuple[object, ...], _Mapped]] = {}
_MAX_CACHED_MAPPINGS: Final = 4096
#: Tables kept, one per shipper configuration (a process has one or a few).
_MAX_CACHED_CONTEXTS: Final = 16

_new_entry: Final = tuple.__new__  # PushEntry without its Python-level __new__: 2x faster


def _map_fields(
    values: Sequence[object], node_id_label: bool, default_labels: Mapping[str, str]
) -> _Mapped:
    """Labels and metadata from a record's values for _FIELD_KEYS (see entry_from_record)."""
    service, layer, env = values[:_METADATA_FROM]
    labels = _label_pairs(
        _text(service) or default_labels.get("service_name"),
        _text(layer) or default_labels.get("layer"),
        _text(env) or default_labels.get("env"),
        (_text(values[_NODE_ID_AT]) or default_labels.get("node_id")) if node_id_label else None,
    )
    metadata = tuple(
        (key, text)
        for key, value in zip(METADATA_KEYS, values[_METADATA_FROM:], strict=True)
        if (text := _text(value)) and not (node_id_label and key == "node_id")
    )
    return labels, metadata


def _unparsed_entry(
    ts_ns: int, payload: bytes, node_id_label: bool, default_labels: Mapping[str, str]
) -> PushEntry:
    # Should not happen (the library renders every record); ship it rather than lose it.
    line = _strip_newline(bytes(payload).decode("utf-8", "replace"))
    labels = _label_pairs(
        default_labels.get("service_name"),
        default_labels.get("layer"),
        default_labels.get("env"),
        default_labels.get("node_id") if node_id_label else None,
    )
    return PushEntry(labels, ts_ns, line)


def entry_from_record(
    ts_ns: int,
    payload: bytes,
    *,
    node_id_label: bool,
    default_labels: Mapping[str, str],
) -> PushEntry:
    """Map one spooled record (a DESIGN §4 JSON line) to a Loki entry. Never raises.

    Labels are ``service_name`` (from ``service``), ``layer``, ``env`` and, when
    ``node_id_label``, ``node_id``; a label the record lacks takes its value from
    ``default_labels``. The identifiers, ``trace_id``, ``span_id`` and ``level`` become
    structured metadata (``node_id`` only when it is not a label, so no name is both). The
    line is the payload itself, so a resent entry is byte-identical and Loki de-duplicates it.
    A payload that is not a JSON object ships as is under the default labels.

    Args:
        ts_ns: the record's timestamp in nanoseconds (the spool's copy of ``ts``).
        payload: the record's JSON text, UTF-8.
        node_id_label: make ``node_id`` a stream label (one stream per host).
        default_labels: label values for records that lack them, by label name
            (``service_name``, ``layer``, ``env``, ``node_id``); other names are ignored.

    Returns:
        The entry.
    """
    try:
        record = orjson.loads(payload)
    except orjson.JSONDecodeError:
        record = None
    if type(record) is not dict:
        return _unparsed_entry(ts_ns, payload, node_id_label, default_labels)
    labels, metadata = _map_fields(
        tuple(map(record.get, _FIELD_KEYS)), node_id_label, default_labels
    )
    # orjson accepted the payload, so it is valid UTF-8 and strict decoding cannot fail.
    return PushEntry(labels, ts_ns, _strip_newline(bytes(payload).decode()), metadata)


def entries_from_records(
    records: Iterable[RecordLike],
    *,
    node_id_label: bool,
    default_labels: Mapping[str, str],
) -> list[PushEntry]:
    """Map spooled records to Loki entries, as :func:`entry_from_record` maps each one.

    The shipper's path: one call per batch, with the labels and metadata of recurring value
    combinations taken from a table instead of being worked out for every record. Never
    raises.

    Args:
        records: the records (``ts_ns`` and ``payload`` attributes), in order.
        node_id_label: make ``node_id`` a stream label.
        default_labels: as for :func:`entry_from_record`.

    Returns:
        One entry per record, in order; equal to what :func:`entry_from_record` returns.
    """
    context = (node_id_label, *(default_labels.get(name) for name in LABEL_NAMES))
    table = _mappings.get(context)
    if table is None:
        if len(_mappings) >= _MAX_CACHED_CONTEXTS:
            _mappings.clear()
        table = _mappings[context] = {}
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    keys = _FIELD_KEYS
    entries: list[PushEntry] = []
    append = entries.append
    for record in records:
        ts_ns = record.ts_ns
        payload = record.payload
        try:
            fields = loads(payload)
        except decode_error:
            fields = None
        if type(fields) is not dict:
            append(_unparsed_entry(ts_ns, payload, node_id_label, default_labels))
            continue
        values = tuple(map(fields.get, keys))
        try:
            mapped = table.get(values)
        except TypeError:  # an unhashable value (an object or array): never stored
            mapped = None
        if mapped is None:
            mapped = _map_fields(values, node_id_label, default_labels)
            if all(type(value) is str or value is None for value in values):
                if len(table) >= _MAX_CACHED_MAPPINGS:
                    table.clear()
                table[values] = mapped
        line = bytes(payload).decode()  # valid UTF-8: orjson accepted it
        if line.endswith("\n"):
            line = _strip_newline(line)
        append(_new_entry(PushEntry, (mapped[0], ts_ns, line, mapped[1])))
    return entries


def _uvarint(value: int) -> bytes:
    """Base-128 varint, least significant group first (protobuf's encoding)."""
    # Unrolled up to five bytes (values below 2**35: every length, every nanos field and the
    # seconds of any date before 3058); a loop costs several times as much per call.
    if value < 0x80:
        return _SMALL_VARINTS[value]
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


def _int64_varint(value: int) -> bytes:
    # Negative int64 values go on the wire as their 64-bit two's complement (10 bytes).
    return _uvarint(value + _UINT64 if value < 0 else value)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + _uvarint(len(payload)) + payload


def _name_field(name: str) -> bytes:
    encoded = name.encode()
    return _TAG_NAME + _uvarint(len(encoded)) + encoded


# Encoded ``structuredMetadata`` fields (tag, length, LabelPairAdapter) by (name, value). The
# same identifiers recur on every record of a request, allocation or node, so most pairs are
# encoded once; the cache is emptied when it reaches _MAX_CACHED_FIELDS rather than managed
# as an LRU, which would cost more per hit than it saves.
_metadata_fields: dict[tuple[str, str], bytes] = {}
_MAX_CACHED_FIELDS: Final = 16_384


def _metadata_field(pair: tuple[str, str]) -> bytes:
    name, value = pair
    encoded = value.encode()
    body = _name_field(name) + (_field(_TAG_VALUE, encoded) if encoded else b"")
    field = _field(_TAG_METADATA, body)
    if len(_metadata_fields) >= _MAX_CACHED_FIELDS:
        _metadata_fields.clear()
    _metadata_fields[pair] = field
    return field


# Every metadata field of an entry, encoded and joined, by the entry's metadata tuple: the
# records of one request, allocation or node share the whole tuple, so an entry costs one
# lookup instead of one per pair. Bounded like the pair cache.
_metadata_blocks: dict[tuple[tuple[str, str], ...], bytes] = {}


def _metadata_block(metadata: tuple[tuple[str, str], ...]) -> bytes:
    cached = _metadata_fields.get
    block = b"".join([cached(pair) or _metadata_field(pair) for pair in metadata])
    if len(_metadata_blocks) >= _MAX_CACHED_FIELDS:
        _metadata_blocks.clear()
    with contextlib.suppress(TypeError):  # a list instead of a tuple: not cached
        _metadata_blocks[metadata] = block
    return block


def _timestamp_prefixes(seconds: int) -> tuple[bytes, ...]:
    """An entry's ``timestamp`` field up to its nanos varint, by that varint's length.

    Index 0 is the whole field for nanos 0 (omitted, as proto3 omits defaults); index n ends
    with the nanos tag, for an n-byte varint (nanos < 10**9 < 2**35 takes at most 5).
    """
    encoded = b"\x08" + _int64_varint(seconds) if seconds else b""  # Timestamp.seconds = 1
    size = len(encoded)  # at most 11, so every length below fits one byte
    with_nanos = (
        _TAG_TIMESTAMP + _SMALL_VARINTS[size + 1 + n] + encoded + b"\x10" for n in range(1, 6)
    )
    return (_TAG_TIMESTAMP + _SMALL_VARINTS[size] + encoded, *with_nanos)


def _encode_stream(
    labels: tuple[tuple[str, str], ...], entries: Iterable[PushEntry], out: list[bytes]
) -> None:
    """Append one ``StreamAdapter`` field to ``out``, in pieces for one final join."""
    label_text = render_labels(labels).encode()
    label_length = _uvarint(len(label_text))
    parts = [_TAG_LABELS, label_length, label_text]
    size = 1 + len(label_length) + len(label_text)
    small = _SMALL_VARINTS
    blocks = _metadata_blocks
    seconds_seen = None
    prefixes: tuple[bytes, ...] = ()
    # Hot path, once per entry: every piece is appended to one list (no intermediate joins)
    # and the common varints (lengths below 128, 5-byte nanos) are written inline.
    for _, ts_ns, line, metadata in entries:
        seconds, nanos = divmod(ts_ns, _NS_PER_S)
        if seconds != seconds_seen:  # consecutive entries mostly share their second
            prefixes = _timestamp_prefixes(seconds)
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
            nanos_bytes = _uvarint(nanos) if nanos else b""
        timestamp = prefixes[len(nanos_bytes)]
        try:
            block = blocks.get(metadata)
        except TypeError:  # not hashable: encoded afresh
            block = None
        if block is None:
            block = _metadata_block(metadata)
        encoded = line.encode()
        length = len(encoded)
        if length:
            line_length = small[length] if length < 0x80 else _uvarint(length)
            body = len(timestamp) + len(nanos_bytes) + 1 + len(line_length) + length + len(block)
            body_length = small[body] if body < 0x80 else _uvarint(body)
            parts += (
                _TAG_ENTRIES,
                body_length,
                timestamp,
                nanos_bytes,
                _TAG_LINE,
                line_length,
                encoded,
                block,
            )
        else:  # proto3 omits an empty string
            body = len(timestamp) + len(nanos_bytes) + len(block)
            body_length = small[body] if body < 0x80 else _uvarint(body)
            parts += (_TAG_ENTRIES, body_length, timestamp, nanos_bytes, block)
        size += 1 + len(body_length) + body
    out += (_TAG_STREAMS, _uvarint(size))
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
