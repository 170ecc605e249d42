"""Where the store keeps each event's raw evidence: compressed blocks beside ``events``.

An event's ``raw`` (its line, or its document entry's JSON) is shown when the event is, and
read for a stack trace, but never searched in SQL. Kept as a column of ``events``, it was half
the cost of storing a line (10^6 mapped events: 4.7 s stored with it, 2.2 s without; DuckDB
analyses, compresses and sorts every string) and most of the file. So a batch's raw texts,
laid end to end as Arrow holds them, are cut into blocks of :data:`BLOCK_BYTES` and compressed
with zstd (~800 MB/s, ~7x on JSON lines, the GIL released: in the parse workers), and each
row keeps where its text lies: ``raw_block`` (the block its first byte is in), ``raw_at``
(that byte's offset in the block) and ``raw_len`` (its length in bytes; NULL for no raw). A
text may run on into the next blocks.

:func:`pack` turns a batch (an Arrow table of ``_schema.EVENTS_SCHEMA``) into a
:class:`Packed` one, its block numbers counted from 0; the store numbers them on when it
inserts it (``_writes``) and keeps only the blocks some inserted row points into.
:func:`raw_texts` reads the texts of rows back, each block once. Blocks are never rewritten,
and deleted only with the last rows pointing into them (a bulk load's repeats:
``_writes.drop_repeats``); rows are rewritten (``cluster``, linking) and keep where their text
lies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

import duckdb
import pyarrow as pa

from correlator.errors import SourceError

__all__ = [
    "BLOCKS_DDL",
    "BLOCK_BYTES",
    "SMALL_BATCH",
    "SPAN_COLUMNS",
    "Packed",
    "concat",
    "pack",
    "raw_texts",
]

#: Uncompressed bytes per block: a timeline reads one block per event it shows, ~65 µs to
#: decompress at this size; zstd compresses JSON lines 7.0x in blocks of 64 KiB, 6.1x of 16.
BLOCK_BYTES: Final = 1 << 16
_BLOCK_BITS: Final = BLOCK_BYTES.bit_length() - 1
_CODEC: Final = "zstd"
#: The columns of ``events`` that say where a row's raw text lies, in place of ``raw``.
SPAN_COLUMNS: Final = ("raw_block", "raw_at", "raw_len")
#: The blocks: ``size`` is the uncompressed length (the last block of a batch is shorter).
#: ``data`` is compressed already: DuckDB's own analysis of it at each checkpoint finds
#: nothing to gain and costs 10 ms per MB (0.54 against 0.06 s for 53 MB of blocks).
BLOCKS_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS raw_blocks (block BIGINT NOT NULL, size INTEGER NOT NULL, "
    "data BLOB NOT NULL USING COMPRESSION uncompressed);"
)
#: Up to this many rows a batch is handled in Python, spans here and the hashes' check in
#: ``_writes``: importing ``pyarrow.compute`` costs 60 ms, a tenth of a pull from Loki.
SMALL_BATCH: Final = 8192


@dataclass(frozen=True)
class Packed:
    """A batch as the store writes it.

    Attributes:
        table: the batch's columns with the :data:`SPAN_COLUMNS` in place of ``raw``; its
            ``raw_block`` counts from 0, the batch's first block.
        blocks: the batch's blocks, compressed, in order.
        sizes: each block's uncompressed length.
        ordered: the rows come in runs grouped by node, by time within a node (each batch
            a worker packed; the store need not sort them again).
    """

    table: pa.Table
    blocks: list[bytes]
    sizes: list[int]
    ordered: bool = False

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)


def pack(table: pa.Table, *, ordered: bool = False) -> Packed:
    """``table`` (``_schema.EVENTS_SCHEMA``) with its raw texts moved into blocks.

    ``ordered``: put the rows first in the order the store keeps them (by node, then time),
    so that the texts a timeline shows (a node's or an allocation's events, read together)
    lie in a few blocks rather than one each: 62 against 85 ms for an allocation's timeline
    at 10^6 events. Worth it for a worker's large batch, not for a few rows.
    """
    if ordered:
        table = _in_store_order(table)
    at = table.schema.get_field_index("raw")
    raw = _array(table.column(at))
    rows = len(raw)
    if not rows:
        spans = [pa.array([], kind) for kind in (pa.int64(), pa.int32(), pa.int32())]
        return Packed(_with_spans(table, at, spans), [], [], ordered)
    _, offsets, values = raw.buffers()
    # Int32 offsets (pa.string), from the array's own offset: a slice shares its parent's.
    first, last = _offset(offsets, raw.offset), _offset(offsets, raw.offset + rows)
    if rows <= SMALL_BATCH:
        spans = _spans_small(offsets, raw.offset, rows, raw)
    else:
        spans = _spans(offsets, raw, rows, first)
    data = values.slice(first, last - first) if values is not None else pa.py_buffer(b"")
    blocks, sizes = [], []
    for start in range(0, last - first, BLOCK_BYTES):
        block = data.slice(start, min(BLOCK_BYTES, last - first - start))
        blocks.append(pa.compress(block, codec=_CODEC, asbytes=True))
        sizes.append(block.size)
    return Packed(_with_spans(table, at, spans), blocks, sizes, ordered)


def _in_store_order(table: pa.Table) -> pa.Table:
    """The rows of ``table`` grouped by node (in order of first appearance: what matters is
    that a node's rows sit together), by time within a node. A sort on the node's index in
    the batch's dictionary costs a third of one on its text (13 against 43 ms for 50,000
    rows, hash included as DuckDB's ORDER BY has it)."""
    import pyarrow.compute as pc  # a worker's large batch only

    nodes = pc.dictionary_encode(_array(table.column("node_id"))).indices
    keys = pa.table({"node": nodes, "ts_ns": table.column("ts_ns")})
    return table.take(pc.sort_indices(keys, [("node", "ascending"), ("ts_ns", "ascending")]))


def _array(column: pa.ChunkedArray) -> pa.Array:
    """A column as one array: its only chunk as it is (``combine_chunks`` copies even that
    one: a batch's raw texts, ~17 MB, into fresh pages every batch)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _with_spans(table: pa.Table, at: int, spans: list[pa.Array]) -> pa.Table:
    """``table`` with the span columns in place of its column ``at`` (``raw``)."""
    packed = table.remove_column(at)
    for offset, (name, column) in enumerate(zip(SPAN_COLUMNS, spans, strict=True)):
        packed = packed.add_column(at + offset, name, column)
    return packed


def _offset(offsets: pa.Buffer, index: int) -> int:
    return int.from_bytes(memoryview(offsets)[4 * index : 4 * index + 4], "little", signed=True)


def _spans_small(offsets: pa.Buffer, start: int, rows: int, raw: pa.Array) -> list[pa.Array]:
    """The span columns of a few rows, in Python."""
    bounds = memoryview(offsets).cast("i")[start : start + rows + 1].tolist()
    first = bounds[0]
    begins = [bound - first for bound in bounds[:-1]]
    lengths: list[int | None] = [b - a for a, b in pairwise(bounds)]
    if raw.null_count:
        lengths = [None if v is None else n for v, n in zip(raw.to_pylist(), lengths, strict=True)]
    return [
        pa.array([b >> _BLOCK_BITS for b in begins], pa.int64()),
        pa.array([b & (BLOCK_BYTES - 1) for b in begins], pa.int32()),
        pa.array(lengths, pa.int32()),
    ]


def _spans(offsets: pa.Buffer, raw: pa.Array, rows: int, first: int) -> list[pa.Array]:
    """The span columns of many rows, vectorised."""
    # Imported here: 60 ms of every process that writes a few rows, and only a large batch
    # needs it.
    import pyarrow.compute as pc

    bounds = pa.Array.from_buffers(pa.int32(), rows + 1, [None, offsets], offset=raw.offset)
    begins = pc.subtract(bounds.slice(0, rows), pa.scalar(first, pa.int32()))
    lengths = pc.subtract(bounds.slice(1, rows), bounds.slice(0, rows))
    if raw.null_count:
        lengths = pc.if_else(pc.is_null(raw), pa.scalar(None, pa.int32()), lengths)
    return [
        pc.cast(pc.shift_right(begins, _BLOCK_BITS), pa.int64()),
        pc.bit_wise_and(begins, pa.scalar(BLOCK_BYTES - 1, pa.int32())),
        lengths,
    ]


def concat(batches: Sequence[Packed]) -> Packed:
    """Packed batches as one, their blocks numbered on in order."""
    if len(batches) == 1:
        return batches[0]
    import pyarrow.compute as pc  # only for several batches: large inserts

    ordered = all(batch.ordered for batch in batches)
    tables: list[pa.Table] = []
    blocks: list[bytes] = []
    sizes: list[int] = []
    for batch in batches:
        table = batch.table
        if blocks:
            at = table.schema.get_field_index("raw_block")
            moved = pc.add(table.column(at), pa.scalar(len(blocks), pa.int64()))
            table = table.set_column(at, "raw_block", moved)
        tables.append(table)
        blocks.extend(batch.blocks)
        sizes.extend(batch.sizes)
    return Packed(pa.concat_tables(tables), blocks, sizes, ordered)


def raw_texts(
    cursor: duckdb.DuckDBPyConnection,
    blocks: Sequence[int | None],
    ats: Sequence[int | None],
    lengths: Sequence[int | None],
) -> list[str | None]:
    """The raw texts of rows, given their span columns (None where a row has no text).

    Each block is read and decompressed once; the cursor's transaction must be the one the
    rows were read in (or a later one: a block goes only with the rows pointing into it).

    Raises:
        SourceError: a block the rows point into is not in the store (a damaged file).
    """
    wanted: set[int] = set()
    for block, at, length in zip(blocks, ats, lengths, strict=True):
        if length and block is not None and at is not None:
            wanted.update(range(block, _last_block(block, at, length) + 1))
    data: dict[int, bytes] = {}
    if wanted:
        rows = cursor.execute(
            "SELECT block, size, data FROM raw_blocks WHERE block = ANY(?::BIGINT[])",
            [sorted(wanted)],
        ).fetchall()
        data = {
            block: pa.decompress(blob, decompressed_size=size, codec=_CODEC, asbytes=True)
            for block, size, blob in rows
        }
    missing = wanted.difference(data)
    if missing:
        raise SourceError(
            f"raw block {min(missing)} is missing from the store: the database file is "
            "damaged (ingest its evidence into a new one)"
        )
    texts: list[str | None] = []
    for block, at, length in zip(blocks, ats, lengths, strict=True):
        if length is None or block is None or at is None:
            texts.append(None)
        elif not length:
            texts.append("")
        elif at + length <= BLOCK_BYTES:
            texts.append(data[block][at : at + length].decode("utf-8", "replace"))
        else:
            last = _last_block(block, at, length)
            joined = b"".join(data[number] for number in range(block, last + 1))
            texts.append(joined[at : at + length].decode("utf-8", "replace"))
    return texts


def _last_block(block: int, at: int, length: int) -> int:
    """The block the last byte of a text (``length`` > 0) lies in."""
    return block + (at + length - 1) // BLOCK_BYTES
