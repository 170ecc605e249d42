"""Ingest through worker processes stores exactly what ingest in one process stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from correlator.ingest import ingest_lines, ingest_paths, parse_pool
from correlator.store import Store

LINES = [
    b'{"ts": "2026-11-22T13:11:19.000000001Z", "level": "info", "event": "task claimed", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1"}',
    b'{"ts": "2026-11-22T13:11:20Z", "level": "error", "event": "ansible-playbook not found", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1", '
    b'"error": {"type": "FileNotFoundError", "message": "No such file or directory", '
    b'"owner_layer": "deploy", "chain": []}}',
    b'{"ts": "yesterday", "layer": "node"}',
    b'{"ts": "2026-11-22T13:11:21Z", "level": "info", "event": "request", "service": "api", '
    b'"layer": "api", "correlation_id": "c-1", "allocation_id": "a-1", "method": "POST", '
    b'"path": "/v1/allocations", "status": 201, "duration_s": 0.12}',
    b"\xff",
    b'{"ts": "2026-11-22T13:11:19.000000001Z", "level": "info", "event": "task claimed", '
    b'"service": "node-agent", "layer": "node", "node_id": "n-1", "allocation_id": "a-1"}',
    b'{"ts": "2026-11-22T13:11:22Z", "event": "heartbeat", "layer": "node", "node_id": "n-1"}',
]


def _contents(store: Store) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    cursor = store.cursor()
    events = cursor.execute("SELECT * FROM events ORDER BY hash").fetchall()
    rejects = cursor.execute(
        "SELECT source, origin, line_no, reason, excerpt FROM rejects ORDER BY line_no"
    ).fetchall()
    return events, rejects


@pytest.mark.integration
def test_worker_processes_store_the_same_as_one_process(tmp_path: Path) -> None:
    with Store(tmp_path / "one.duckdb") as one, Store(tmp_path / "pool.duckdb") as pooled:
        alone = ingest_lines(one, "agent", LINES, "agent.jsonl", batch_events=2)
        with parse_pool(2) as pool:
            shared = ingest_lines(pooled, "agent", LINES, "agent.jsonl", batch_events=2, pool=pool)
        assert alone.as_dict() == shared.as_dict()
        assert alone.as_dict() == {
            "accepted": 4,
            "duplicate": 1,
            "rejected": 2,
            "rejected_by_reason": {
                "line has a field 'ts' that is not an RFC timestamp": 1,
                "line is not valid UTF-8 (byte 0xff at offset 0)": 1,
            },
        }
        assert _contents(one) == _contents(pooled)
        assert [row[2] for row in _contents(pooled)[1]] == [3, 5]


def test_ingest_paths_parses_small_files_in_process(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    with Store(tmp_path / "evidence.duckdb") as store:
        result = ingest_paths(store, "agent", [path], workers=2)  # under PARALLEL_MIN_BYTES
        again = ingest_paths(store, "agent", [path])
        # A first load leaves the link cardinalities computed for the next (read-only) reader.
        assert store._stored_cardinalities(4) is not None
    assert (result.accepted, result.duplicate) == (4, 1)
    assert (again.accepted, again.duplicate) == (0, 5)
