"""A timeline's seed read once (``Store.seed``): the same bounds and link counts as the
separate reads it replaces; rows fetched in an order known beforehand (``_rows``)."""

from __future__ import annotations

import pytest

from correlator._rows import fetch_events
from correlator._schema import COLUMN_LIST
from correlator.errors import QueryError
from correlator.model import Event
from correlator.store import Store
from tests.correlator.events import S, ev

WINDOW_NS = 600 * S


def _busy_store(store: Store) -> list[Event]:
    """A busy node's 2,500 events in three batches (three runs of row ids), a quieter node
    interleaved with them, allocations and correlations on some of the busy node's events;
    returns every event stored, the busy node's first, in order."""
    busy = [
        ev(
            i / 10,
            "node",
            f"step {i}",
            node_id="n-busy",
            node_instance_id="ni-1" if i < 1_800 else "ni-2",
            allocation_id=f"a-{i // 500}" if i % 3 == 0 else None,
            correlation_id=f"c-{i}" if i % 250 == 0 else None,
        )
        for i in range(2_500)
    ]
    other = [
        ev(i / 10 + 0.05, "node", f"other {i}", node_id="n-other", allocation_id="a-0")
        for i in range(300)
    ]
    store.insert_events(busy[1_000:2_000] + other[:100])
    store.insert_events(other[100:200] + busy[:1_000])
    store.insert_events(busy[2_000:] + other[200:])
    return busy + other


SEEDS = [
    ("node_id", "n-busy"),
    ("node_id", "n-other"),
    ("allocation_id", "a-0"),
    ("node_instance_id", "ni-2"),
    ("correlation_id", "c-250"),
    ("workflow_id", "wf-absent"),
]


@pytest.mark.parametrize(("key", "value"), SEEDS)
def test_a_seed_reads_what_the_separate_reads_do(store: Store, key: str, value: str) -> None:
    events = _busy_store(store)
    seed = store.seed(key, value)
    times = [e.ts_ns for e in events if getattr(e, key) == value]
    bounds = (min(times), max(times)) if times else None
    assert (seed.key, seed.value, seed.bounds) == (key, value, bounds)
    if bounds is None:
        assert seed.link_counts == {}
        return
    # The expansion's window holds every one of the seed's rows.
    window = {"from_ns": bounds[0] - WINDOW_NS, "to_ns": bounds[1] + WINDOW_NS + 1}
    assert seed.link_counts == store.link_counts(key, value, **window)
    assert seed.link_counts == store.link_counts(key, value)


def test_a_busy_seeds_bounds_and_counts(store: Store) -> None:
    busy = _busy_store(store)[:2_500]
    seed = store.seed("node_id", "n-busy")
    assert seed.bounds == (busy[0].ts_ns, busy[-1].ts_ns)
    assert seed.link_counts["node_instance_id"] == {"ni-1": 1_800, "ni-2": 700}
    every_third = {n: sum(i % 3 == 0 for i in range(n * 500, n * 500 + 500)) for n in range(5)}
    assert every_third == {0: 167, 1: 167, 2: 166, 3: 167, 4: 167}
    assert seed.link_counts["allocation_id"] == {f"a-{n}": every_third[n] for n in range(5)}
    assert seed.link_counts["correlation_id"] == {f"c-{i}": 1 for i in range(0, 2_500, 250)}
    assert "workflow_id" not in seed.link_counts


def test_a_seed_of_an_unknown_kind_is_refused(store: Store) -> None:
    with pytest.raises(QueryError, match="unknown identifier key 'trace_id'"):
        store.seed("trace_id", "x")


def test_rows_fetched_in_a_known_order_must_all_come_back(store: Store) -> None:
    busy = _busy_store(store)[:2_500]
    cursor = store.cursor()
    row_ids = [
        row[0]
        for row in cursor.execute(
            "SELECT rowid FROM events WHERE node_id = 'n-busy' ORDER BY ts_ns DESC LIMIT 3"
        ).fetchall()
    ]
    sql = f"SELECT rowid, {COLUMN_LIST} FROM events WHERE rowid = ANY(?::BIGINT[])"  # noqa: S608 - fixed names
    assert fetch_events(cursor, sql, [row_ids], order=row_ids) == busy[:-4:-1]
    with pytest.raises(LookupError, match=f"row {row_ids[0] + 10_000} was chosen"):
        fetch_events(cursor, sql, [row_ids], order=[row_ids[0] + 10_000, *row_ids])
