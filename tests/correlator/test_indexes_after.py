"""A large load into an empty or small store builds the identifier indexes after it
(``Store.indexes_after``); a smaller load, or one into a store that holds much already, keeps
them up as it inserts. Either way the store ends with every index and the same events."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from correlator import _writes, ingest
from correlator.ingest import ingest_paths
from correlator.model import IDENTIFIER_KEYS
from correlator.store import Store


def indexes(store: Store) -> list[str]:
    return _writes.index_names(store.cursor())


ALL: list[str] = sorted(f"events_{key}" for key in IDENTIFIER_KEYS)


def write_records(path: Path, count: int, first: int = 0) -> Path:
    path.write_bytes(
        b"".join(
            orjson.dumps(
                {
                    "ts": f"2026-11-22T13:{i // 60 % 60:02d}:{i % 60:02d}Z",
                    "layer": "api",
                    "event": "request",
                    "allocation_id": f"a-{i % 97}",
                    "node_id": f"n-{i % 13}",
                    "seq": i,
                }
            )
            + b"\n"
            for i in range(first, first + count)
        )
    )
    return path


def test_indexes_after_drops_them_for_the_block_and_builds_them_at_its_end(store: Store) -> None:
    assert indexes(store) == ALL

    with store.indexes_after():
        assert indexes(store) == []

    assert indexes(store) == ALL


def test_indexes_are_built_again_when_the_load_fails(store: Store) -> None:
    with pytest.raises(RuntimeError), store.indexes_after():
        raise RuntimeError("the load broke")

    assert indexes(store) == ALL


def test_a_writer_opening_the_store_builds_missing_indexes(tmp_path: Path) -> None:
    # A process killed during a load leaves the store without them.
    with Store(tmp_path / "e.duckdb") as store, store._writer() as cursor:
        _writes.drop_indexes(cursor)
    with Store(tmp_path / "e.duckdb") as reopened:
        assert indexes(reopened) == ALL


@pytest.mark.parametrize(("stored", "deferred"), [(0, True), (300, False)])
def test_a_large_load_into_a_small_store_builds_the_indexes_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: int, deferred: bool
) -> None:
    files = [write_records(tmp_path / f"{n}.ndjson", 500, first=n * 500) for n in range(2)]
    # These files stand for a large load: the threshold scaled down to them.
    monkeypatch.setattr(ingest, "INDEXES_AFTER_MIN_BYTES", 1)
    dropped: list[bool] = []
    drop = _writes.drop_indexes
    monkeypatch.setattr(
        _writes, "drop_indexes", lambda cursor: dropped.append(True) or drop(cursor)
    )
    with Store(tmp_path / "e.duckdb") as store:
        if stored:
            ingest_paths(store, "agent", [write_records(tmp_path / "old.ndjson", stored, 10**6)])
            dropped.clear()

        result = ingest_paths(store, "agent", files)

        assert result.accepted == 1000
        assert dropped == ([True] if deferred else [])
        assert indexes(store) == ALL
        assert store.count() == 1000 + stored
        found, _ = store.events_matching({"allocation_id": ["a-5"]})
        assert len(found) == len([i for i in range(1000) if i % 97 == 5]) + len(
            [i for i in range(10**6, 10**6 + stored) if i % 97 == 5]
        )


def test_a_small_load_keeps_the_indexes_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[bool] = []
    monkeypatch.setattr(_writes, "drop_indexes", lambda cursor: dropped.append(True))
    with Store(tmp_path / "e.duckdb") as store:
        ingest_paths(store, "agent", [write_records(tmp_path / "a.ndjson", 50)])

        assert dropped == []
        assert indexes(store) == ALL
