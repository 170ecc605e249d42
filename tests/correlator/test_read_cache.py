"""What the store keeps of its reads until the next write (issue 21): the answers of timelines
unchanged by it, nothing kept past a write, concurrent reads of one thing read once, and the
reads a timeline costs when what it needs is kept."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from correlator import _rows, incident
from correlator._demo_story import FAILING_ALLOCATION, STUCK_ALLOCATION
from correlator._read_cache import ReadCache, first, same
from correlator._schema import COLUMN_LIST
from correlator.model import Reject
from correlator.store import Store
from tests.correlator.events import ev

WAIT_S = 10.0

# -- the cache -----------------------------------------------------------------------------


def test_an_answer_is_kept_for_its_generation_only() -> None:
    cache = ReadCache(max_bytes=100)
    cache.put(0, "k", "zero", 1)
    assert cache.get(0, "k") == "zero"
    assert cache.get(1, "k") is None  # a write came since
    cache.put(1, "other", "one", 1)  # the first answer of the next generation forgets the rest
    assert (cache.get(0, "k"), cache.get(1, "k")) == (None, None)
    cache.put(0, "k", "stale", 1)  # read before the write, landed after it: dropped
    assert (cache.get(0, "k"), cache.get(1, "other")) == (None, "one")


def test_the_least_recently_used_answers_go_first_and_a_heavy_one_is_not_kept() -> None:
    cache = ReadCache(max_bytes=10)
    for key in "abc":
        cache.put(0, key, key, 4)  # c pushes out a, the least recently used
    assert [cache.get(0, key) for key in "abc"] == [None, "b", "c"]
    cache.get(0, "b")  # b used last: d pushes out c
    cache.put(0, "d", "d", 4)
    assert [cache.get(0, key) for key in "bcd"] == ["b", None, "d"]
    cache.put(0, "e", "e", 11)
    assert cache.get(0, "e") is None
    nothing = ReadCache(max_bytes=0)
    nothing.put(0, "k", "v", 0)
    assert nothing.get(0, "k") is None


@pytest.mark.parametrize(
    ("items", "truncated", "read_limit", "limit", "expected"),
    [
        ([1, 2, 3], False, 10, 5, ([1, 2, 3], False)),  # all of them, at any limit
        ([1, 2, 3], False, 10, 50, ([1, 2, 3], False)),
        ([1, 2, 3], False, 3, 2, ([1, 2], True)),
        ([1, 2, 3], True, 3, 3, ([1, 2, 3], True)),  # more matched than were read
        ([1, 2, 3], True, 3, 2, ([1, 2], True)),
        ([1, 2, 3], True, 3, 4, None),  # cut before the fourth: it cannot say
    ],
)
def test_a_kept_ordered_read_answers_every_limit_it_can(
    items: list[int],
    truncated: bool,
    read_limit: int,
    limit: int,
    expected: tuple[list[int], bool] | None,
) -> None:
    assert first((items, truncated, read_limit), limit) == expected


def _concurrently(cache: ReadCache, readers: int) -> tuple[list[str], int]:
    """``readers`` threads ask ``cache`` for one key at once; a read takes 0.2 s, long enough
    for the others to come by while it reads (one that came later would find it kept)."""
    reads = 0
    lock = threading.Lock()
    asked = threading.Barrier(readers, timeout=WAIT_S)
    answers: list[str] = []

    def read() -> str:
        nonlocal reads
        with lock:
            reads += 1
        threading.Event().wait(0.2)
        return "answer"

    def ask() -> None:
        asked.wait()
        answers.append(cache.kept_or_read(0, "k", read, len, same))

    threads = [threading.Thread(target=ask) for _ in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    return answers, reads


def test_threads_asking_for_one_read_at_once_read_it_once() -> None:
    assert _concurrently(ReadCache(), 4) == (["answer"] * 4, 1)


def test_with_nothing_kept_nothing_is_shared_either() -> None:
    assert _concurrently(ReadCache(max_bytes=0), 4) == (["answer"] * 4, 4)


def test_a_failed_read_is_not_kept_and_the_next_reads_afresh() -> None:
    cache = ReadCache()

    def fail() -> str:
        raise TimeoutError("the store did not answer")

    with pytest.raises(TimeoutError):
        cache.kept_or_read(0, "k", fail, len, same)
    assert cache.kept_or_read(0, "k", lambda: "found", len, same) == "found"


# -- the store -----------------------------------------------------------------------------


@pytest.fixture
def uncached(demo_db: Path) -> Iterator[Store]:
    with Store(demo_db, read_only=True) as opened:
        opened.cache.max_bytes = 0
        yield opened


def _timeline(store: Store, key: str, value: str, **options: Any) -> dict[str, Any]:
    answer = incident.timeline_for(store, key, value, **options)
    answer.pop("generated_at")
    return answer


def test_timelines_from_kept_reads_are_those_read_afresh(
    demo_store: Store, uncached: Store
) -> None:
    # Every limit in an order where kept lists answer smaller limits (cut or whole) and must
    # not answer larger ones they were cut before; windows and seeds sharing identifiers.
    t0 = incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)["events"][0]
    questions: list[tuple[str, str, dict[str, Any]]] = [
        ("allocation_id", FAILING_ALLOCATION, {"limit": limit})
        for limit in (3, 1000, 14, 13, 1, 4, 15, 2, 10_000)
    ]
    questions += [
        ("allocation_id", FAILING_ALLOCATION, {"from_ns": t0["ts_ns"] + 1}),
        ("allocation_id", FAILING_ALLOCATION, {"from_ns": t0["ts_ns"] + 1, "limit": 5}),
        ("node_id", "n-17", {}),
        ("node_id", "n-17", {"limit": 7}),
        ("allocation_id", STUCK_ALLOCATION, {}),
        ("node_id", "n-17", {}),
    ]
    for key, value, options in questions:
        kept = _timeline(demo_store, key, value, **options)
        assert kept == _timeline(uncached, key, value, **options), (key, value, options)
    assert demo_store.cache.get(demo_store.generation, ("seed", "node_id", "n-17")) is not None


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Store]:
    """Every cursor a store opens (each read opens one), by its store."""
    opened: list[Store] = []
    cursor = Store.cursor

    def counted(self: Store) -> Any:
        opened.append(self)
        return cursor(self)

    monkeypatch.setattr(Store, "cursor", counted)
    return opened


def test_a_timeline_asked_again_reads_nothing_until_the_next_write(
    store: Store, reads: list[Store]
) -> None:
    store.insert_events(
        [
            ev(0, "api", "request", correlation_id="c-1", allocation_id="a-9"),
            ev(1, "workflow", "provisioning", allocation_id="a-9", workflow_id="wf-1"),
        ]
    )
    first_answer = _timeline(store, "allocation_id", "a-9")
    assert reads  # the seed, its events, its links, the links' events, the cardinalities...
    reads.clear()
    assert _timeline(store, "allocation_id", "a-9", limit=50) == first_answer
    assert reads == []  # not even a count: no write came since the cardinalities were read
    store.insert_events([ev(2, "api", "request", correlation_id="c-2", allocation_id="a-9")])
    after = _timeline(store, "allocation_id", "a-9")
    assert [e["message"] for e in after["events"]] == ["request", "provisioning", "request"]
    assert reads


def test_a_write_moves_the_generation_when_it_commits_only(store: Store) -> None:
    assert store.generation == 0
    store.insert_events([ev(0, "api", "request", allocation_id="a-9")])
    assert store.generation == 1

    def half_an_input() -> None:
        with store.bulk():
            store.insert_events([ev(1, "api", "request", allocation_id="a-9")])
            raise RuntimeError("the input ended half-way")

    with pytest.raises(RuntimeError):
        half_an_input()
    assert store.generation == 1  # rolled back: nothing a read could see changed
    with store.bulk():  # one transaction, however many inserts: one generation
        store.insert_events([ev(3, "api", "request", allocation_id="a-9")])
        store.insert_events([ev(4, "api", "request", allocation_id="a-9")])
    assert store.generation == 2


def test_a_write_of_nothing_new_leaves_the_generation(store: Store) -> None:
    events = [
        ev(0, "api", "request", allocation_id="a-9"),
        ev(1, "api", "done", allocation_id="a-9"),
    ]
    store.insert_events(events)
    assert store.generation == 1

    store.insert_events(events)  # every row stored already
    with store.bulk():  # a whole input of duplicates: what a pull asked twice stores
        store.insert_events(events[:1])
        store.insert_events(events[1:])
    assert store.generation == 1

    with store.bulk():  # one new row among the duplicates is a change
        store.insert_events([*events, ev(2, "api", "late", allocation_id="a-9")])
    assert store.generation == 2
    store.insert_rejects([Reject("ndjson", "x.ndjson", 3, "not JSON", "{")])
    assert store.generation == 3  # other writes count as changes, as before


# -- a few rows as row tuples --------------------------------------------------------------


@pytest.mark.parametrize("order", [False, True])
def test_a_few_rows_read_as_tuples_are_the_rows_read_through_arrow(
    demo_store: Store, order: bool
) -> None:
    cursor = demo_store.cursor()
    sql = f"SELECT rowid, {COLUMN_LIST} FROM events WHERE allocation_id = ?"  # noqa: S608 - fixed names
    row_ids = [row[0] for row in cursor.execute(sql, [FAILING_ALLOCATION]).fetchall()][::-1]
    if not order:
        sql = f"SELECT {COLUMN_LIST} FROM events WHERE allocation_id = ? ORDER BY ts_ns, hash"  # noqa: S608 - fixed names
    wanted = row_ids if order else None
    arrow = _rows.fetch_events(cursor, sql, [FAILING_ALLOCATION], order=wanted)
    tuples = _rows.fetch_events(cursor, sql, [FAILING_ALLOCATION], order=wanted, few=True)
    assert len(tuples) == 8
    assert tuples == arrow
    assert any(e.attrs for e in tuples)  # attrs decoded from JSON the same way
