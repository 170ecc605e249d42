"""The raw texts of events kept in compressed blocks beside ``events`` (``_raw_blocks``):
packed, inserted, numbered on and read back; the repeats a bulk load leaves dropped; a store
of the earlier layout refused."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator import _raw_blocks, _writes
from correlator._raw_blocks import BLOCK_BYTES, Packed, concat, pack, raw_texts
from correlator._schema import events_table
from correlator.errors import SourceError
from correlator.model import EVENT_COLUMNS, IDENTIFIER_KEYS
from correlator.store import Store
from tests.correlator.events import T0
from tests.stored import stored_events

ALL_INDEXES: list[str] = sorted(f"events_{key}" for key in IDENTIFIER_KEYS)


def batch(raws: Sequence[str | None], *, first_hash: int = 0) -> pa.Table:
    """One row per raw text, hashes counting from ``first_hash``; later rows earlier in time
    and on three nodes, so that packing in store order moves them."""
    columns: dict[str, list[Any]] = {name: [None] * len(raws) for name in EVENT_COLUMNS}
    columns.update(
        ts_ns=[T0 - i for i in range(len(raws))],
        layer=["api"] * len(raws),
        source=["ndjson"] * len(raws),
        origin=["test"] * len(raws),
        message=[f"m{first_hash + i}" for i in range(len(raws))],
        raw=list(raws),
        hash=[first_hash + i for i in range(len(raws))],
        level=["info"] * len(raws),
        node_id=[f"n-{i % 3}" for i in range(len(raws))],
    )
    return events_table(columns)


def raws_by_hash(store: Store) -> dict[int, str | None]:
    return {event.hash: event.raw for event in stored_events(store)}


def count(store: Store, table: str) -> int:
    ((rows,),) = store.cursor().execute(f"SELECT count(*) FROM {table}").fetchall()  # noqa: S608 - a fixed name
    return int(rows)


def block_numbers(store: Store) -> list[int]:
    rows = store.cursor().execute("SELECT block FROM raw_blocks ORDER BY block").fetchall()
    return [int(block) for (block,) in rows]


def hashes(store: Store) -> list[int]:
    rows = store.cursor().execute("SELECT hash FROM events ORDER BY hash").fetchall()
    return [int(value) for (value,) in rows]


def long_text(char: str, min_bytes: int) -> str:
    """``char`` repeated to at least ``min_bytes`` bytes of UTF-8."""
    return char * (min_bytes // len(char.encode()) + 1)


# -- packed, stored and read back ----------------------------------------------------------

TEXTS = st.one_of(
    st.none(),
    st.just(""),
    st.text(max_size=40),  # non-ASCII included
    # Longer than a block: runs on into a second or third one.
    st.builds(
        long_text,
        st.sampled_from(["x", "é", "€", "𝄞"]),
        st.integers(BLOCK_BYTES + 1, 2 * BLOCK_BYTES - 4),
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    raws=st.lists(TEXTS, max_size=10),
    ordered=st.booleans(),
    stored_first=st.integers(0, 10),
)
def test_every_raw_text_reads_back_as_given(
    tmp_path: Path, raws: list[str | None], ordered: bool, stored_first: int
) -> None:
    table = batch(raws)
    with (
        tempfile.TemporaryDirectory(dir=tmp_path) as directory,
        Store(Path(directory) / "e.duckdb") as store,
    ):
        # A tail of the batch stored first (a slice: its raw column starts at an offset), so
        # that the whole batch then stores only the blocks of the rows not stored yet.
        tail = table.slice(min(stored_first, len(raws)))
        store.insert_table(pack(tail, ordered=ordered))
        result = store.insert_table(pack(table, ordered=ordered))

        assert result.accepted == len(raws) - tail.num_rows
        assert raws_by_hash(store) == dict(enumerate(raws))


# Begins at bytes 0, 2, 2, 2 and 80,002 of the texts laid end to end (é is 2 bytes).
SPAN_RAWS: list[str | None] = ["ab", None, "", "é" * 40_000, "z"]


@pytest.mark.parametrize("small_batch", [_raw_blocks.SMALL_BATCH, 0], ids=["python", "arrow"])
def test_spans_say_where_each_text_lies(monkeypatch: pytest.MonkeyPatch, small_batch: int) -> None:
    monkeypatch.setattr(_raw_blocks, "SMALL_BATCH", small_batch)

    packed = pack(batch(SPAN_RAWS))

    assert packed.table.column("raw_block").to_pylist() == [0, 0, 0, 0, 1]
    assert packed.table.column("raw_at").to_pylist() == [0, 2, 2, 2, 80_002 - BLOCK_BYTES]
    assert packed.table.column("raw_len").to_pylist() == [2, None, 0, 80_000, 1]
    assert packed.sizes == [BLOCK_BYTES, 80_003 - BLOCK_BYTES]
    assert len(packed.blocks) == 2
    assert "raw" not in packed.table.column_names


def test_large_and_small_batches_pack_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past 8,192 rows spans are computed with pyarrow.compute; it once made raw_at int64.
    raws: list[str | None] = [
        None if i % 7 == 0 else "" if i % 5 == 0 else f"línea {i} " * (i % 11) for i in range(9000)
    ]
    for i in range(0, 9000, 1500):
        raws[i] = long_text("ü", 70_000)
    # A slice: its offsets start past the array's first.
    table = batch(raws).slice(3, 8_990)
    large = pack(table)
    monkeypatch.setattr(_raw_blocks, "SMALL_BATCH", 10**9)
    small = pack(table)

    assert large.table.schema == small.table.schema
    assert large.table.equals(small.table)
    assert (large.blocks, large.sizes) == (small.blocks, small.sizes)
    assert [large.table.schema.field(name).type for name in _raw_blocks.SPAN_COLUMNS] == [
        pa.int64(),
        pa.int32(),
        pa.int32(),
    ]
    assert large.table.column("raw_block").to_pylist()[-1] == len(large.blocks) - 1


def test_large_ordered_batch_reads_back(store: Store) -> None:
    raws: list[str | None] = [None if i % 9 == 0 else f"ligne {i} ☃" for i in range(8_500)]
    raws[100] = long_text("é", 2 * BLOCK_BYTES)

    store.insert_table(pack(batch(raws), ordered=True))

    assert raws_by_hash(store) == dict(enumerate(raws))


def test_concat_numbers_the_second_batch_blocks_on(store: Store) -> None:
    first = pack(batch(["a" * 70_000, "b"]))  # 2 blocks
    second = pack(batch(["c", "d" * 70_000], first_hash=10))

    joined = concat([first, second])

    assert len(first.blocks) == 2
    assert second.table.column("raw_block").to_pylist() == [0, 0]
    assert joined.table.column("raw_block").to_pylist() == [0, 1, 2, 2]
    assert joined.blocks == first.blocks + second.blocks
    assert joined.sizes == [BLOCK_BYTES, 70_001 - BLOCK_BYTES, BLOCK_BYTES, 70_001 - BLOCK_BYTES]
    store.insert_table(joined)
    assert raws_by_hash(store) == {0: "a" * 70_000, 1: "b", 10: "c", 11: "d" * 70_000}


def test_concat_of_ordered_and_unordered_is_unordered() -> None:
    ordered = pack(batch(["a"]), ordered=True)
    unordered = pack(batch(["b"], first_hash=1))

    assert concat([ordered, ordered]).ordered
    assert not concat([ordered, unordered]).ordered


# -- what the store keeps ------------------------------------------------------------------


def test_inserting_a_batch_again_stores_no_row_and_no_block(store: Store) -> None:
    packed = pack(batch(["a" * 70_000, "b", None]))
    store.insert_table(packed)
    assert (count(store, "events"), count(store, "raw_blocks")) == (3, 2)

    again = store.insert_table(packed)

    assert (again.accepted, again.duplicate) == (0, 3)
    assert (count(store, "events"), count(store, "raw_blocks")) == (3, 2)


def test_a_batch_half_stored_keeps_only_the_blocks_its_new_rows_lie_in(store: Store) -> None:
    old = ["a" * 70_000, "b" * 70_000]
    store.insert_table(pack(batch([*old, "x"])))  # blocks 0-2
    assert block_numbers(store) == [0, 1, 2]
    # Rows 0 and 1 are stored; the new ones lie in the batch's third block (bytes 140,000 on).
    half = pack(pa.concat_tables([batch(old), batch(["c" * 10, "d" * 10], first_hash=3)]))
    assert len(half.blocks) == 3

    result = store.insert_table(half)

    assert (result.accepted, result.duplicate) == (2, 2)
    # Its blocks are numbered 3-5: only 5 is kept.
    assert block_numbers(store) == [0, 1, 2, 5]
    store.insert_table(pack(batch(["e"], first_hash=9)))
    assert block_numbers(store) == [0, 1, 2, 5, 6]
    assert raws_by_hash(store) == {
        0: "a" * 70_000,
        1: "b" * 70_000,
        2: "x",
        3: "c" * 10,
        4: "d" * 10,
        9: "e",
    }


def test_a_batch_of_empty_texts_stores_no_block(store: Store) -> None:
    store.insert_table(pack(batch(["", None])))
    store.insert_table(pack(batch(["later"], first_hash=5)))

    assert block_numbers(store) == [0]
    assert raws_by_hash(store) == {0: "", 1: None, 5: "later"}


# -- bulk loads: repeats dropped at the end, or by the next writer -------------------------

LOAD = ["first", "é" * 40_000, None, ""]


@pytest.mark.parametrize("ordered", [False, True], ids=["sorted-on-insert", "packed-in-order"])
def test_a_bulk_load_of_the_same_lines_twice_keeps_each_once(store: Store, ordered: bool) -> None:
    packed = pack(batch(LOAD), ordered=ordered)

    with store.indexes_after() as correction:
        loads = [store.insert_table(packed), store.insert_table(packed)]
        # Unchecked inside the block: both copies go in, until the end.
        assert count(store, "events") == 8

    assert [(r.accepted, r.duplicate) for r in loads] == [(4, 0), (4, 0)]
    assert (correction.accepted, correction.duplicate) == (-4, 4)
    assert hashes(store) == [0, 1, 2, 3]
    assert raws_by_hash(store) == dict(enumerate(LOAD))
    assert _writes.index_names(store.cursor()) == ALL_INDEXES
    assert count(store, "unchecked_loads") == 0
    # The second copy's blocks went with its rows.
    assert block_numbers(store) == [0, 1]


def test_a_bulk_load_of_lines_stored_already_keeps_the_stored_rows(store: Store) -> None:
    store.insert_table(batch(LOAD))

    with store.indexes_after() as correction:
        store.insert_table(batch([*LOAD, "new"]))

    assert (correction.accepted, correction.duplicate) == (-4, 4)
    assert raws_by_hash(store) == {**dict(enumerate(LOAD)), 4: "new"}
    # The load's first block held only repeats' texts; its second holds "new" too.
    assert block_numbers(store) == [0, 1, 3]


def test_a_writer_opening_the_store_after_a_crashed_load_drops_its_repeats(
    tmp_path: Path,
) -> None:
    path = tmp_path / "e.duckdb"
    packed = pack(batch(LOAD))
    with Store(path) as store, store._writer() as cursor:
        _writes.mark_unchecked(cursor)
        for _ in range(2):
            _writes.insert_staged(cursor, packed, _writes.insert_sql(packed, checked=False))
    # The load never reached its end: a reader sees the repeats and changes nothing.
    with Store(path, read_only=True) as reader:
        assert hashes(reader) == [0, 0, 1, 1, 2, 2, 3, 3]
        assert count(reader, "unchecked_loads") == 1

    with Store(path) as writer:
        assert hashes(writer) == [0, 1, 2, 3]
        assert count(writer, "unchecked_loads") == 0
        assert raws_by_hash(writer) == dict(enumerate(LOAD))
        assert block_numbers(writer) == [0, 1]


# -- an earlier version's store --------------------------------------------------------------

OLD_EVENTS = {
    "minimal": "CREATE TABLE events (raw VARCHAR, hash BIGINT)",
    # What the earlier version created: every column, raw among them.
    "full": "CREATE TABLE events (ts_ns BIGINT NOT NULL, layer VARCHAR NOT NULL, "
    "source VARCHAR NOT NULL, origin VARCHAR, message VARCHAR, raw VARCHAR, "
    "hash BIGINT NOT NULL, service VARCHAR, level VARCHAR, node_id VARCHAR, "
    "node_instance_id VARCHAR, correlation_id VARCHAR, allocation_id VARCHAR, "
    "workflow_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, http_method VARCHAR, "
    "http_path VARCHAR, http_status INTEGER, duration_s DOUBLE, owner_hint VARCHAR, "
    "error_type VARCHAR, entity_kind VARCHAR, entity_id VARCHAR, state_from VARCHAR, "
    "state_to VARCHAR, attrs VARCHAR)",
}


@pytest.mark.parametrize(
    ("ddl", "read_only"),
    [
        pytest.param(OLD_EVENTS["minimal"], False, id="minimal-writable"),
        pytest.param(OLD_EVENTS["minimal"], True, id="minimal-read-only"),
        pytest.param(OLD_EVENTS["full"], False, id="full-writable"),
        pytest.param(OLD_EVENTS["full"], True, id="full-read-only"),
    ],
)
def test_a_store_with_raw_in_events_is_refused(tmp_path: Path, ddl: str, read_only: bool) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as old:
        old.execute(ddl)

    with pytest.raises(SourceError, match="earlier version"):
        Store(path, read_only=read_only)
    # Refused before anything is written: the file holds its one table still.
    with duckdb.connect(str(path), read_only=True) as old:
        assert old.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("events",)]


# -- reading texts back ------------------------------------------------------------------------


def test_a_missing_block_is_named(store: Store) -> None:
    store.insert_table(pack(batch(["a" * 70_000, "b"])))  # blocks 0 and 1
    cursor = store.cursor()
    cursor.execute("DELETE FROM raw_blocks WHERE block = 1")

    # The first text runs on into block 1; the second lies in it.
    with pytest.raises(SourceError, match="raw block 1 is missing"):
        raw_texts(cursor, [0], [0], [70_000])
    with pytest.raises(SourceError, match="raw block 1 is missing"):
        stored_events(store)
    assert raw_texts(cursor, [0, 1, None], [0, 4464, None], [10, 0, None]) == ["a" * 10, "", None]


def test_packing_an_empty_batch_gives_no_blocks() -> None:
    packed = pack(batch([]))

    assert (packed.num_rows, packed.blocks, packed.sizes) == (0, [], [])
    assert isinstance(packed, Packed)
    assert packed.table.column_names[5:8] == list(_raw_blocks.SPAN_COLUMNS)


def test_the_store_gives_the_raw_texts_of_one_source(store: Store) -> None:
    events = batch(['{"event": "a"}', "b" * 70_000, None])
    loki = events.set_column(
        events.schema.get_field_index("source"), "source", pa.array(["loki"] * 3)
    )
    store.insert_table(pack(batch(["x", "y"], first_hash=10)))
    store.insert_table(pack(loki))

    assert sorted(store.raw_texts("loki")) == ["b" * 70_000, '{"event": "a"}']
    assert sorted(store.raw_texts("ndjson")) == ["x", "y"]
    assert store.raw_texts("nginx") == []
