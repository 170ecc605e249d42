"""The shipper's protobuf path: spooled records straight to a ``PushRequest``, by stream key.

Every record the logging thread spools carries a *stream key* in its frame (see
``spool._framing``): a 64-bit digest of the values of ``STREAM_KEY_FIELDS``, the only fields labels
and structured metadata depend on (:func:`stream_key`, which the logging thread calls). The
shipper maps a key it has seen to the encoded labels and metadata once, and from then on
encodes that key's records without parsing their JSON (:func:`encode_records`): parsing,
mapping and building a PushEntry were most of the shipper's cost per record. A record whose
key is 0 or unknown is mapped by ``_entries``' own record mapping.

The output is byte for byte that of the reference path,
``_push.encode_protobuf(_entries.entries_from_records(...))`` (a property test pins it); it
costs about a quarter of the reference's time per record. Pure, no I/O; the wire pieces are
in ``_wire``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Final

import orjson

from agent_logging.loki._entries import (
    _FIELD_KEYS,
    _MAX_CACHED_MAPPINGS,
    RecordLike,
    _map_record,
    _Pairs,
    _strip_newline,
    _unparsed_entry,
    context_table,
    render_labels,
)
from agent_logging.loki._wire import (
    NS_PER_S,
    TAG_LABELS,
    TAG_STREAMS,
    entry_heads,
    line_heads,
    metadata_block,
    new_entry_head,
    new_line_head,
    timestamp_prefixes,
    uvarint,
)
from agent_logging.spool._segments import SpooledRecord

__all__ = ["STREAM_KEY_FIELDS", "TRUNCATE_TO_CHARS", "encode_records", "stream_key"]

#: Strings longer than this are the first to be cut when a record is too large
#: (``pipeline._render``): a stream key is taken only of fields the line holds verbatim.
TRUNCATE_TO_CHARS: Final = 1024

#: The record fields a stream key (:func:`stream_key`) depends on.
STREAM_KEY_FIELDS: Final = _FIELD_KEYS

# Digests by the field values: the logging thread looks a record's values up here (one tuple
# and one dict lookup) and hashes only a combination it has not seen. Emptied when full.
_stream_keys: dict[tuple[object, ...], int] = {}
_MAX_CACHED_KEYS: Final = 4096
# Domain separation for the digest: a new meaning of the key gets a new person string.
_KEY_PERSON: Final = b"agentlog-key1"


def _key_of(values: tuple[object, ...]) -> int:
    """The stream key of ``_FIELD_KEYS`` values; 0 (none) unless all are short str or None."""
    # Only text the line holds verbatim: render() cuts strings over TRUNCATE_TO_CHARS in an
    # oversized record, and a non-str value (1 or 1.0 or True) may render like another.
    for value in values:
        if value is not None and (type(value) is not str or len(value) > TRUNCATE_TO_CHARS):
            return 0
    digest = hashlib.blake2b(orjson.dumps(values), digest_size=8, person=_KEY_PERSON).digest()
    return int.from_bytes(digest, "little") or 1


def stream_key(record: Mapping[str, object]) -> int:
    """The stream key of a record: what its labels and structured metadata depend on.

    Records with equal ``service``, ``layer``, ``env``, identifiers, ``trace_id``,
    ``span_id`` and ``level`` (all text) share a key; a 64-bit digest, so two different
    combinations collide with probability 2**-64. Written into the record's spool frame by
    the logging thread, it lets :func:`encode_records` skip parsing the record's JSON.

    Args:
        record: the record as rendered (the pipeline's event dict after its processors).

    Returns:
        The key, or 0 when the record cannot have one (a field that is not short text).
    """
    values = tuple(map(record.get, _FIELD_KEYS))
    try:
        key = _stream_keys.get(values)
    except TypeError:  # an unhashable value: never keyed
        return 0
    if key is None:
        key = _key_of(values)
        if len(_stream_keys) >= _MAX_CACHED_KEYS:
            _stream_keys.clear()
        _stream_keys[values] = key
    return key


_Mapped = tuple[_Pairs, bytes]  # a stream's labels, and an entry's encoded metadata fields
# Per (node_id_label, default labels): stream key -> labels and encoded metadata. Emptied
# when full, like the other caches.
_keyed: dict[tuple[object, ...], dict[int, _Mapped]] = {}


def _map_slowly(
    ts_ns: int,
    payload: bytes,
    key: int,
    node_id_label: bool,
    default_labels: Mapping[str, str],
    table: dict[int, _Mapped],
) -> tuple[_Mapped, bytes]:
    """A record whose key is 0 or not in ``table``: map it as :func:`entry_from_record` does.

    Returns:
        Its labels and encoded metadata, and its line as the entry carries it. When the key
        is the digest of what the line holds, the mapping is kept in ``table`` for the key.
    """
    try:
        fields = orjson.loads(payload)
    except orjson.JSONDecodeError:
        fields = None
    if type(fields) is not dict:
        entry = _unparsed_entry(ts_ns, payload, node_id_label, default_labels)
        return (entry.labels, b""), entry.line.encode()
    labels, metadata = _map_record(fields, node_id_label, default_labels)
    mapped = (labels, metadata_block(metadata))
    # The key is trusted only once the line's own fields are seen to produce it.
    if key and _key_of(tuple(map(fields.get, _FIELD_KEYS))) == key:
        if len(table) >= _MAX_CACHED_MAPPINGS:
            table.clear()
        table[key] = mapped
    return mapped, _strip_newline(bytes(payload).decode()).encode()


def encode_records(
    records: Sequence[RecordLike],
    *,
    node_id_label: bool,
    default_labels: Mapping[str, str],
) -> bytes:
    """Encode spooled records as a serialized ``PushRequest``, without building entries.

    The bytes equal ``encode_protobuf(entries_from_records(records, ...))``; records that
    carry a stream key already seen (``SpooledRecord.key``) are encoded without parsing
    their JSON. Never raises.

    Args:
        records: the records (``ts_ns`` and ``payload``, and ``key`` on a SpooledRecord).
        node_id_label: make ``node_id`` a stream label.
        default_labels: as for :func:`entry_from_record`.

    Returns:
        The protobuf message bytes; compress them with snappy's block format for the wire.
    """
    table = context_table(_keyed, node_id_label, default_labels)
    # Per stream, in order of first appearance: its entries' pieces and their total size.
    streams: dict[_Pairs, tuple[list[bytes], list[int]]] = {}
    current: _Pairs | None = None
    parts: list[bytes] = []
    sizes: list[int] = [0]
    size = 0
    seconds_seen = None
    prefixes: tuple[bytes, ...] = ()
    prefix5 = b""
    size5 = 0
    get_mapped = table.get
    known_line_heads = line_heads.get
    known_entry_heads = entry_heads.get
    spooled = SpooledRecord
    # Hot path, once per record: a few lookups in small tables and one tuple appended to the
    # pieces of its stream; the varint of the nanoseconds is the only arithmetic.
    for record in records:
        if type(record) is spooled:
            ts_ns, line, key = record
        else:
            ts_ns, line, key = record.ts_ns, record.payload, 0
        mapped = get_mapped(key) if key else None
        if mapped is None:
            mapped, line = _map_slowly(ts_ns, line, key, node_id_label, default_labels, table)
        labels, block = mapped
        if labels is not current:
            sizes[0] = size
            stream = streams.get(labels)
            if stream is None:
                stream = streams[labels] = ([], [0])
            current = labels
            parts, sizes = stream
            size = sizes[0]
        seconds, nanos = divmod(ts_ns, NS_PER_S)
        if seconds != seconds_seen:  # consecutive entries mostly share their second
            prefixes = timestamp_prefixes(seconds)
            seconds_seen = seconds
            prefix5 = prefixes[5]
            size5 = len(prefix5) + 5
        if nanos >= 0x10000000:  # 5 varint bytes: nanos spread over 7-bit groups, in one int
            nanos_bytes = (
                (nanos & 0x7F)
                | ((nanos << 1) & 0x7F00)
                | ((nanos << 2) & 0x7F0000)
                | ((nanos << 3) & 0x7F000000)
                | ((nanos << 4) & 0x7F00000000)
                | 0x80808080
            ).to_bytes(5, "little")
            timestamp = prefix5
            body = size5
        else:
            nanos_bytes = uvarint(nanos) if nanos else b""
            timestamp = prefixes[len(nanos_bytes)]
            body = len(timestamp) + len(nanos_bytes)
        length = len(line)
        line_head = known_line_heads(length) or new_line_head(length)
        body += len(line_head) + length + len(block)
        entry_head = known_entry_heads(body) or new_entry_head(body)
        parts += (entry_head, timestamp, nanos_bytes, line_head, line, block)
        size += len(entry_head) + body
    sizes[0] = size
    out: list[bytes] = []
    for labels, (stream_parts, stream_size) in streams.items():
        label_text = render_labels(labels).encode()
        label_length = uvarint(len(label_text))
        total = stream_size[0] + 1 + len(label_length) + len(label_text)
        out += (TAG_STREAMS, uvarint(total), TAG_LABELS, label_length, label_text)
        out += stream_parts
    return b"".join(out)
