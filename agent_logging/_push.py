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

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

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
    "encode_body",
    "encode_json",
    "encode_protobuf",
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
        # Should not happen (the library renders every record); ship it rather than lose it.
        line = _strip_newline(bytes(payload).decode("utf-8", "replace"))
        labels = _label_pairs(
            default_labels.get("service_name"),
            default_labels.get("layer"),
            default_labels.get("env"),
            default_labels.get("node_id") if node_id_label else None,
        )
        return PushEntry(labels, ts_ns, line)

    get = record.get
    service = get("service")
    layer = get("layer")
    env = get("env")
    node_id = get("node_id") if node_id_label else None
    labels = _label_pairs(
        (service if type(service) is str else _text(service)) or default_labels.get("service_name"),
        (layer if type(layer) is str else _text(layer)) or default_labels.get("layer"),
        (env if type(env) is str else _text(env)) or default_labels.get("env"),
        ((node_id if type(node_id) is str else _text(node_id)) or default_labels.get("node_id"))
        if node_id_label
        else None,
    )
    metadata = []
    for key in METADATA_KEYS:
        value = get(key)
        if value is None:
            continue
        if type(value) is not str:
            value = _text(value)
            if value is None:
                continue
        if value and not (node_id_label and key == "node_id"):
            metadata.append((key, value))
    # orjson accepted the payload, so it is valid UTF-8 and strict decoding cannot fail.
    return PushEntry(labels, ts_ns, _strip_newline(bytes(payload).decode()), tuple(metadata))


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


# A one-entry cache of the encoded seconds: consecutive entries mostly share their second.
_seconds_cache: tuple[int, bytes] = (0, b"")


def _encode_timestamp(ts_ns: int) -> bytes:
    global _seconds_cache  # a one-entry cache, swapped atomically as a tuple
    seconds, nanos = divmod(ts_ns, _NS_PER_S)
    cached = _seconds_cache
    if cached[0] != seconds:
        cached = (seconds, b"\x08" + _int64_varint(seconds) if seconds else b"")
        _seconds_cache = cached
    body = cached[1] + b"\x10" + _uvarint(nanos) if nanos else cached[1]
    return _TAG_TIMESTAMP + _SMALL_VARINTS[len(body)] + body  # at most 1+10+1+5 bytes


def _encode_entry(entry: PushEntry) -> bytes:
    # Hot path: pieces are collected in one list and joined once.
    timestamp = _encode_timestamp(entry.ts_ns)
    parts = [timestamp]
    size = len(timestamp)
    line = entry.line.encode()
    if line:
        length = _uvarint(len(line))
        parts += (_TAG_LINE, length, line)
        size += 1 + len(length) + len(line)
    cached = _metadata_fields.get
    for pair in entry.metadata:
        field = cached(pair) or _metadata_field(pair)
        parts.append(field)
        size += len(field)
    return b"".join([_TAG_ENTRIES, _uvarint(size), *parts])


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
    out = []
    for labels, stream_entries in _group(entries).items():
        label_text = render_labels(labels).encode()
        stream = b"".join(
            [_field(_TAG_LABELS, label_text), *(_encode_entry(e) for e in stream_entries)]
        )
        out.append(_field(_TAG_STREAMS, stream))
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
