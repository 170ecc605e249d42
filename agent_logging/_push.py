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
omitted, as the reference encoders do, so our bytes equal the protobuf runtime's. The wire
pieces (tags, varints, metadata fields, timestamp prefixes) are in ``_wire``.

The wire body is that message compressed with snappy's *block* format (not the framed
format): Loki's distributor decodes ``application/x-protobuf`` bodies with ``snappy.Decode``.

Here :func:`entries_from_records` maps each record to a :class:`PushEntry` (parsing its
JSON) and :func:`encode_protobuf` encodes entries: the reference path, also used for JSON
bodies, dead letters and ``agent-logging drain``. The shipper's protobuf path, straight from
spooled records to bytes by stream key, is ``_record_encoder``: it maps records with this
module's mapping, and its output is byte for byte that of the reference.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, Protocol

import cramjam
import orjson

from agent_logging._types import IDENTIFIER_KEYS, TRACE_KEYS
from agent_logging._wire import (
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


_Pairs = tuple[tuple[str, str], ...]


def _map_record(
    record: dict[str, object], node_id_label: bool, default_labels: Mapping[str, str]
) -> tuple[_Pairs, _Pairs]:
    """Labels and metadata of a parsed record (see :func:`entry_from_record`).

    Reads only the keys in ``_FIELD_KEYS``: :func:`entries_from_records` caches the result
    under their values.
    """
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
    return labels, tuple(metadata)


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
    labels, metadata = _map_record(record, node_id_label, default_labels)
    # orjson accepted the payload, so it is valid UTF-8 and strict decoding cannot fail.
    return PushEntry(labels, ts_ns, _strip_newline(bytes(payload).decode()), metadata)


# The keys _map_record reads. Its result depends on nothing else (given the two options), so
# it is cached under the tuple of their values: the records of one request, allocation or
# node share all of them, and a hit costs a fraction of a mapping.
_FIELD_KEYS: Final = ("service", "layer", "env", *METADATA_KEYS)
# Only keys made of str and None are cached: 1, 1.0 and True are equal as keys but render
# differently, while a str equals only the same str.
_TEXT_TYPES: Final = frozenset({str, type(None)})
# One table per (node_id_label, default labels), emptied when it reaches
# _MAX_CACHED_MAPPINGS (an LRU would cost more per hit than it saves).
_mappings: dict[tuple[object, ...], dict[tuple[object, ...], tuple[_Pairs, _Pairs]]] = {}
_MAX_CACHED_MAPPINGS: Final = 1024  # about 1 KiB each: a few hundred requests in flight
_MAX_CACHED_CONTEXTS: Final = 16  # a process has one shipper configuration, or a few
# Records mapped with the cache before deciding whether it pays for the rest of the batch:
# when every record carries new identifiers a miss costs about 1 µs more than no cache.
_PROBE_RECORDS: Final = 256

_new_entry: Final = tuple.__new__  # a PushEntry without NamedTuple's Python-level __new__


def entries_from_records(
    records: Sequence[RecordLike],
    *,
    node_id_label: bool,
    default_labels: Mapping[str, str],
) -> list[PushEntry]:
    """Map spooled records to Loki entries: one :func:`entry_from_record` per record.

    The shipper's path, one call per batch: the labels and metadata of a combination of
    identifiers seen before come from a table rather than being worked out again. Never raises.

    Args:
        records: the records (``ts_ns`` and ``payload`` attributes), in order.
        node_id_label: make ``node_id`` a stream label.
        default_labels: as for :func:`entry_from_record`.

    Returns:
        One entry per record, in order, equal to what :func:`entry_from_record` returns.
    """
    context = (node_id_label, *(default_labels.get(name) for name in LABEL_NAMES))
    table = _mappings.get(context)
    if table is None:
        if len(_mappings) >= _MAX_CACHED_CONTEXTS:
            _mappings.clear()
        table = _mappings[context] = {}
    entries: list[PushEntry] = []
    misses = _map_batch(records[:_PROBE_RECORDS], node_id_label, default_labels, table, entries)
    rest = records[_PROBE_RECORDS:]
    if rest:
        cache = table if 2 * misses <= _PROBE_RECORDS else None
        _map_batch(rest, node_id_label, default_labels, cache, entries)
    return entries


def _map_batch(
    records: Sequence[RecordLike],
    node_id_label: bool,
    default_labels: Mapping[str, str],
    table: dict[tuple[object, ...], tuple[_Pairs, _Pairs]] | None,
    entries: list[PushEntry],
) -> int:
    """Append the records' entries to ``entries``; return the cache misses (all, no table)."""
    # Hot path, once per record: names are bound locally and the entry is built without
    # NamedTuple's __new__. Mirrors entry_from_record, which the tests pin down.
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    keys = _FIELD_KEYS
    text_types = _TEXT_TYPES
    append = entries.append
    misses = 0
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
        if table is None:
            misses += 1
            labels, metadata = _map_record(fields, node_id_label, default_labels)
        else:
            values = tuple(map(fields.get, keys))
            try:
                cached = table.get(values)
            except TypeError:  # an unhashable value (an object or array): not cacheable
                cached, values = None, ()
            if cached is None:
                misses += 1
                cached = _map_record(fields, node_id_label, default_labels)
                if values and text_types.issuperset(map(type, values)):
                    if len(table) >= _MAX_CACHED_MAPPINGS:
                        table.clear()
                    table[values] = cached
            labels, metadata = cached
        line = bytes(payload).decode()  # valid UTF-8: orjson accepted it
        if line.endswith("\n"):
            line = _strip_newline(line)
        append(_new_entry(PushEntry, (labels, ts_ns, line, metadata)))
    return misses


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
