"""The ``events`` table's schema: its columns' types, the store's DDL, and batches in that form.

Each column of :data:`~correlator.model.EVENT_COLUMNS` has a DuckDB type and an Arrow type.
A batch (:data:`EVENTS_SCHEMA`) has every one of them; the ``events`` table keeps, in place of
``raw``, where the raw text lies in the ``raw_blocks`` table (``_raw_blocks``'s
:data:`~correlator._raw_blocks.SPAN_COLUMNS`): :data:`STORED_COLUMNS`.
:data:`DDL` creates the ``events`` table with an ART index per identifier column
(:data:`INDEX_DDL`; :mod:`correlator.store` says why), the ``raw_blocks`` table, the
``rejects`` table, the ``unchecked_loads`` table (a bulk load in progress: ``_writes``) and
the ``link_cardinality`` table; :data:`EVENTS_COLUMNS_DDL` is the column
list of ``events`` and :data:`COLUMN_LIST` its names in order, as the store's SQL spells them.
:func:`events_table` makes one batch of columns (an adapter's ``parse_columns``) the Arrow
table the store inserts; :func:`columns_from_events` makes events such columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, Final

import orjson
import pyarrow as pa

from correlator._raw_blocks import BLOCKS_DDL, SPAN_COLUMNS
from correlator.model import EVENT_COLUMNS, IDENTIFIER_KEYS, Event

__all__ = [
    "COLUMN_LIST",
    "DDL",
    "EVENTS_COLUMNS_DDL",
    "EVENTS_SCHEMA",
    "INDEX_DDL",
    "STORED_COLUMNS",
    "columns_from_events",
    "events_table",
]

_TYPES: Final[Mapping[str, tuple[str, pa.DataType]]] = {
    "ts_ns": ("BIGINT NOT NULL", pa.int64()),
    "layer": ("VARCHAR NOT NULL", pa.string()),
    "source": ("VARCHAR NOT NULL", pa.string()),
    "origin": ("VARCHAR", pa.string()),
    "message": ("VARCHAR", pa.string()),
    "raw": ("VARCHAR", pa.string()),  # a batch's only: the store keeps it in raw_blocks
    "raw_block": ("BIGINT", pa.int64()),
    "raw_at": ("INTEGER", pa.int32()),
    "raw_len": ("INTEGER", pa.int32()),
    "hash": ("BIGINT NOT NULL", pa.int64()),
    "service": ("VARCHAR", pa.string()),
    "level": ("VARCHAR", pa.string()),
    **{key: ("VARCHAR", pa.string()) for key in (*IDENTIFIER_KEYS, "trace_id", "span_id")},
    "http_method": ("VARCHAR", pa.string()),
    "http_path": ("VARCHAR", pa.string()),
    "http_status": ("INTEGER", pa.int32()),
    "duration_s": ("DOUBLE", pa.float64()),
    "owner_hint": ("VARCHAR", pa.string()),
    "error_type": ("VARCHAR", pa.string()),
    "entity_kind": ("VARCHAR", pa.string()),
    "entity_id": ("VARCHAR", pa.string()),
    "state_from": ("VARCHAR", pa.string()),
    "state_to": ("VARCHAR", pa.string()),
    "attrs": ("VARCHAR", pa.string()),  # JSON text; DuckDB's json functions read it
}
EVENTS_SCHEMA: Final = pa.schema([(name, _TYPES[name][1]) for name in EVENT_COLUMNS])
_RAW_AT: Final = EVENT_COLUMNS.index("raw")
#: The columns of ``events``, in order: EVENT_COLUMNS with the span columns in place of raw.
STORED_COLUMNS: Final = (*EVENT_COLUMNS[:_RAW_AT], *SPAN_COLUMNS, *EVENT_COLUMNS[_RAW_AT + 1 :])
COLUMN_LIST: Final = ", ".join(STORED_COLUMNS)

EVENTS_COLUMNS_DDL: Final = ", ".join(f"{n} {_TYPES[n][0]}" for n in STORED_COLUMNS)
INDEX_DDL: Final = "".join(
    f"CREATE INDEX IF NOT EXISTS events_{key} ON events ({key});" for key in IDENTIFIER_KEYS
)
DDL: Final = f"""
CREATE TABLE IF NOT EXISTS events ({EVENTS_COLUMNS_DDL});
{BLOCKS_DDL}
CREATE TABLE IF NOT EXISTS rejects (
    source VARCHAR, origin VARCHAR, line_no BIGINT, reason VARCHAR, excerpt VARCHAR,
    ingested_at TIMESTAMPTZ DEFAULT now()
);
CREATE TABLE IF NOT EXISTS unchecked_loads (
    started_at TIMESTAMPTZ NOT NULL, first_block BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS link_cardinality (
    near VARCHAR NOT NULL, far VARCHAR NOT NULL, far_per_near BIGINT NOT NULL,
    near_per_far BIGINT NOT NULL, events BIGINT NOT NULL
);
{INDEX_DDL}
"""


def events_table(columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """One batch of columns (one list per name of EVENT_COLUMNS) as an Arrow table of the
    ``events`` table's schema, what :meth:`~correlator.store.Store.insert_table` takes."""
    return pa.Table.from_pydict({n: columns[n] for n in EVENT_COLUMNS}, schema=EVENTS_SCHEMA)


_FIELDS: Final = attrgetter(*EVENT_COLUMNS)


def columns_from_events(events: Sequence[Event]) -> dict[str, list[Any]]:
    """Events as one list per column (attrs rendered as JSON text).

    Each event's fields are read as one tuple (``attrgetter``) and the tuples transposed:
    a third of the time of a ``getattr`` per field (the text formats' batches spend it).
    """
    if not events:
        return {name: [] for name in EVENT_COLUMNS}
    rows = map(_FIELDS, events)
    columns = dict(zip(EVENT_COLUMNS, map(list, zip(*rows, strict=True)), strict=True))
    columns["attrs"] = [
        orjson.dumps(value, default=str).decode() if value else None for value in columns["attrs"]
    ]
    return columns
