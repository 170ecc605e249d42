"""Loki entries: spooled records mapped to a :class:`PushEntry` each, and label rendering.

Pure and fast: no I/O. :func:`entry_from_record` maps one record (parsing its JSON) to its
stream labels, line and structured metadata; :func:`entries_from_records`, the shipper's path,
maps a batch, taking the labels and metadata of identifiers seen before from a table.
:func:`render_labels` writes a label set the way Loki parses a stream selector. ``_push``
encodes entries as a push request; ``_record_encoder``, the shipper's protobuf path, maps
records with this module's mapping.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple, Protocol, TypeVar

import orjson

from agent_logging.schema import LABEL_NAMES, METADATA_KEYS

__all__ = [
    "LABEL_NAMES",
    "METADATA_KEYS",
    "PushEntry",
    "RecordLike",
    "context_table",
    "entries_from_records",
    "entry_from_record",
    "render_labels",
]

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
    """A spooled record as :func:`entries_from_records` reads it (``spool.SpooledRecord``)."""

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
    line is the payload itself, so a resent entry is byte-identical: Loki de-duplicates it
    within one stream, and a reconcile (``shipping._reconcile``) finds it by its timestamp and line.
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

_K = TypeVar("_K")
_V = TypeVar("_V")

_new_entry: Final = tuple.__new__  # a PushEntry without NamedTuple's Python-level __new__


def context_table(
    tables: dict[tuple[object, ...], dict[_K, _V]],
    node_id_label: bool,
    default_labels: Mapping[str, str],
) -> dict[_K, _V]:
    """The cache of one shipper configuration (``node_id`` a label or not, the default labels)
    in ``tables``, created when new; ``tables`` is emptied when it holds
    ``_MAX_CACHED_CONTEXTS`` of them. Called once per batch."""
    context = (node_id_label, *(default_labels.get(name) for name in LABEL_NAMES))
    table = tables.get(context)
    if table is None:
        if len(tables) >= _MAX_CACHED_CONTEXTS:
            tables.clear()
        table = tables[context] = {}
    return table


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
    table = context_table(_mappings, node_id_label, default_labels)
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
