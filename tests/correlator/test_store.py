"""The DuckDB store's lookups, bulk transactions and persisted link cardinalities."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from correlator import _writes
from correlator._parents import ParentQuery
from correlator._rows import one_of, row_runs
from correlator.errors import QueryError
from correlator.model import Event
from correlator.store import Store
from tests.correlator.events import T0, S, ev

# One incident and a neighbour: an API record carries both a correlation and an allocation id
# (it must come back once, not once per identifier that matches it).
EVENTS = [
    ev(0, "ingress", "POST /v1/allocations", correlation_id="c-1"),
    ev(1, "api", "request", correlation_id="c-1", allocation_id="a-9"),
    ev(2, "workflow", "requested → provisioning", allocation_id="a-9", workflow_id="wf-1"),
    ev(3, "node", "task claimed", workflow_id="wf-1", node_id="n-17", node_instance_id="ni-4"),
    ev(4, "node", "heartbeat", node_id="n-17", node_instance_id="ni-4"),
    ev(5, "api", "request", correlation_id="c-2", allocation_id="a-10"),
    ev(6, "workflow", "requested → provisioning", allocation_id="a-10", workflow_id="wf-2"),
]


def _messages(events: list[Event]) -> list[tuple[int, str]]:
    return [((e.ts_ns - T0) // 1_000_000_000, e.message) for e in events]


@pytest.fixture
def filled(store: Store) -> Store:
    store.insert_events(EVENTS)
    return store


@pytest.fixture(params=["index", "scan"])
def lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How lists of identifiers are looked for: IN lists through the indexes (a large store),
    or one list parameter and a scan (a small one, like every store of these tests)."""
    rows_per_value = 0 if request.param == "index" else 10**9
    monkeypatch.setattr("correlator._rows.SCAN_ROWS_PER_VALUE", rows_per_value)
    return str(request.param)


@pytest.mark.parametrize(
    ("ids", "window", "expected"),
    [
        (
            {"correlation_id": ["c-1"], "allocation_id": ["a-9"], "workflow_id": ["wf-1"]},
            (None, None),
            [
                (0, "POST /v1/allocations"),
                (1, "request"),
                (2, "requested → provisioning"),
                (3, "task claimed"),
            ],
        ),
        (
            {"allocation_id": ["a-9", "a-10"], "correlation_id": ["c-1", "c-2"]},
            (None, None),
            [
                (0, "POST /v1/allocations"),
                (1, "request"),
                (2, "requested → provisioning"),
                (5, "request"),
                (6, "requested → provisioning"),
            ],
        ),
        ({"node_id": ["n-17"], "node_instance_id": ["ni-4"]}, (4, None), [(4, "heartbeat")]),
        (
            {"allocation_id": ["a-9", "a-10"]},
            (2, 6),
            [(2, "requested → provisioning"), (5, "request")],
        ),
        ({"allocation_id": [], "workflow_id": ["wf-none"]}, (None, None), []),
        ({}, (None, None), []),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("lookup")
def test_events_matching_returns_each_event_once_in_order(
    filled: Store,
    ids: dict[str, list[str]],
    window: tuple[int | None, int | None],
    expected: list[tuple[int, str]],
) -> None:
    from_s, to_s = window
    events, truncated = filled.events_matching(
        ids,
        from_ns=None if from_s is None else T0 + from_s * 1_000_000_000,
        to_ns=None if to_s is None else T0 + to_s * 1_000_000_000,
    )
    assert _messages(events) == expected
    assert truncated is False


def test_events_matching_truncates_at_the_limit(filled: Store) -> None:
    events, truncated = filled.events_matching(
        {"correlation_id": ["c-1", "c-2"], "allocation_id": ["a-9", "a-10"]}, limit=3
    )
    assert (_messages(events), truncated) == (
        [(0, "POST /v1/allocations"), (1, "request"), (2, "requested → provisioning")],
        True,
    )


def test_events_matching_refuses_an_unknown_key(filled: Store) -> None:
    with pytest.raises(QueryError, match="unknown identifier key 'tenant'"):
        filled.events_matching({"tenant": ["t-1"]})


def test_events_come_back_as_they_went_in(filled: Store) -> None:
    events, _ = filled.events_matching({"node_id": ["n-17"]})
    assert events == [EVENTS[3], EVENTS[4]]


def test_link_counts_and_bounds(filled: Store) -> None:
    assert filled.link_counts("allocation_id", "a-9") == {
        "correlation_id": {"c-1": 1},
        "workflow_id": {"wf-1": 1},
    }
    assert filled.link_counts("node_id", "n-17", from_ns=T0 + 4_000_000_000) == {
        "node_instance_id": {"ni-4": 1}
    }
    assert filled.seed("allocation_id", "a-10").bounds == (
        T0 + 5_000_000_000,
        T0 + 6_000_000_000,
    )


def test_bulk_commits_at_the_end_and_rolls_back_on_error(store: Store) -> None:
    with store.bulk():
        assert store.insert_events(EVENTS[:2]).accepted == 2
        with store.bulk():  # nested: joins the outer transaction
            assert store.insert_events(EVENTS[1:3]).as_dict()["duplicate"] == 1
    assert store.count() == 3
    with pytest.raises(RuntimeError, match="input went away"):
        _insert_then_fail(store)
    assert store.count() == 3


def _insert_then_fail(store: Store) -> None:
    with store.bulk():
        store.insert_events(EVENTS[3:])
        raise RuntimeError("input went away")


def test_cardinalities_are_kept_in_the_file_for_the_next_reader(tmp_path: Path) -> None:
    path = tmp_path / "evidence.duckdb"
    with Store(path) as writer:
        writer.insert_events(EVENTS)
        computed = writer.cardinalities()
    assert computed[("allocation_id", "correlation_id")] == (1, 1)
    assert computed[("node_id", "workflow_id")] == (1, 1)
    assert computed[("node_id", "node_instance_id")] == (1, 1)
    with Store(path, read_only=True) as reader:
        stored = reader._stored_cardinalities(len(EVENTS))
        assert stored == computed
        assert reader.cardinalities() == computed
    with Store(path) as writer:
        writer.insert_events([ev(7, "node", "task claimed", workflow_id="wf-9", node_id="n-17")])
        assert writer._stored_cardinalities(len(EVENTS) + 1) is None  # stale: recomputed
        assert writer.cardinalities()[("node_id", "workflow_id")] == (2, 1)
        assert writer._stored_cardinalities(len(EVENTS) + 1) is not None


def test_linking_in_place_makes_the_cardinalities_stale(filled: Store) -> None:
    before = filled.cardinalities()
    assert before[("correlation_id", "node_id")] == (0, 0)
    linked = dataclasses.replace(EVENTS[4], correlation_id="c-1")
    assert filled.set_links([linked]) == 1
    assert filled._stored_cardinalities(len(EVENTS)) is None
    assert filled.cardinalities()[("correlation_id", "node_id")] == (1, 1)


def test_clustering_keeps_every_event_and_the_indexes(filled: Store) -> None:
    before = filled.events_matching({"node_id": ["n-17"], "allocation_id": ["a-9", "a-10"]})
    filled.cluster()
    assert filled.count() == len(EVENTS)
    assert filled.events_matching({"node_id": ["n-17"], "allocation_id": ["a-9", "a-10"]}) == (
        before
    )
    assert _writes.index_names(filled.cursor()) == [
        "events_allocation_id",
        "events_correlation_id",
        "events_node_id",
        "events_node_instance_id",
        "events_workflow_id",
    ]
    first = filled.cursor().execute("SELECT node_id FROM events LIMIT 2").fetchall()
    assert first == [("n-17",), ("n-17",)]


@pytest.mark.usefixtures("lookup")
def test_link_counts_of_many_identifiers_match_one_by_one(filled: Store) -> None:
    pairs = [("allocation_id", "a-9"), ("node_id", "n-17"), ("workflow_id", "wf-none")]
    assert filled.link_counts_many(pairs, from_ns=T0 + 2_000_000_000) == {
        ("allocation_id", "a-9"): {"workflow_id": {"wf-1": 1}},
        ("node_id", "n-17"): {
            "node_instance_id": {"ni-4": 2},
            "workflow_id": {"wf-1": 1},
        },
        ("workflow_id", "wf-none"): {},
    }
    for key, value in pairs:
        assert filled.link_counts_many([(key, value)])[(key, value)] == filled.link_counts(
            key, value
        )
    assert filled.link_counts_many([]) == {}


def test_link_counts_of_many_refuses_an_unknown_key(filled: Store) -> None:
    with pytest.raises(QueryError, match="unknown identifier key 'trace_id'"):
        filled.link_counts_many([("node_id", "n-17"), ("trace_id", "t-1")])


@pytest.mark.parametrize(
    ("max_runs", "span_share"),
    [(256, 0), (0, 0), (0, 10**9)],
    ids=["row-id-ranges", "scan", "row-ids"],
)
def test_a_busy_identifier_is_read_in_order_and_truncated(
    store: Store, monkeypatch: pytest.MonkeyPatch, max_runs: int, span_share: int
) -> None:
    # More rows than are read through the indexes (256): the rows are chosen first, then read
    # by ranges of row ids (the busy node's rows lie in three runs, one per batch), by
    # scanning for their identifiers, or by row id (rows filling their span).
    monkeypatch.setattr("correlator._rows._MAX_RUNS", max_runs)
    monkeypatch.setattr("correlator._rows._SPAN_SHARE", span_share)
    busy = [
        ev(i / 10, "node", f"step {i}", node_id="n-busy", node_instance_id="ni-1")
        for i in range(2_500)
    ]
    other = [ev(i / 10 + 0.05, "node", f"other {i}", node_id="n-other") for i in range(300)]
    store.insert_events(busy[1_000:2_000] + other[:100])
    store.insert_events(other[100:200] + busy[:1_000])
    store.insert_events(busy[2_000:] + other[200:])
    events, truncated = store.events_matching(
        {"node_id": ["n-busy"], "node_instance_id": ["ni-1"]}, limit=2_100
    )
    assert (len(events), truncated) == (2_100, True)
    assert events == busy[:2_100]
    events, truncated = store.events_matching(
        {"node_id": ["n-busy"]}, from_ns=T0 + 10 * 1_000_000_000, limit=3_000
    )
    assert (events, truncated) == (busy[100:], False)
    assert store.link_counts("node_id", "n-busy", to_ns=T0 + 200 * 1_000_000_000) == {
        "node_instance_id": {"ni-1": 2_000}
    }
    # A window cutting into all three runs: events 500 .. 2,199.
    window = {"from_ns": T0 + 50 * 1_000_000_000, "to_ns": T0 + 220 * 1_000_000_000}
    assert store.link_counts("node_id", "n-busy", **window) == {"node_instance_id": {"ni-1": 1_700}}


def test_a_list_of_identifiers_is_looked_for_by_scan_only_in_a_small_table() -> None:
    assert one_of("allocation_id", ["a-1", "a-2"], table_rows=6_000) == (
        "allocation_id = ANY(?::VARCHAR[])",
        [["a-1", "a-2"]],
    )
    assert one_of("allocation_id", ["a-1", "a-2"], table_rows=6_001) == (
        "allocation_id IN (?, ?)",
        ["a-1", "a-2"],
    )


# Node n-17 ran wf-1 (event 3) and, later, wf-3 (event 7); allocation a-9 has events with and
# without a workflow. A parent's events: its own, in the window, whose child is the
# incident's or unset.
PARENT_EVENTS = [
    *EVENTS,
    ev(7, "node", "task claimed", workflow_id="wf-3", node_id="n-17"),
    ev(8, "node", "reboot", node_id="n-17"),
]
PARENTS = [
    ParentQuery("node_id", "n-17", "workflow_id", ("wf-1",)),
    ParentQuery("allocation_id", "a-9", "workflow_id", ()),
    ParentQuery("allocation_id", "a-10", "workflow_id", ("wf-2",)),
    ParentQuery("node_id", "n-none", "workflow_id", ()),
]


@pytest.mark.usefixtures("lookup")
@pytest.mark.parametrize("index_rows", [2048, 2], ids=["few-events", "busy-and-batched"])
def test_parents_events_are_their_own_in_the_window(
    store: Store, monkeypatch: pytest.MonkeyPatch, index_rows: int
) -> None:
    # With at most 2 rows through the index, n-17 (4 events) is read by its window, and
    # a-9 and a-10 (2 each) in two batches.
    monkeypatch.setattr("correlator._parents.INDEX_ROWS", index_rows)
    store.insert_events(PARENT_EVENTS)
    answers = store.parent_events_many(
        PARENTS, from_ns=T0 + 1 * 1_000_000_000, to_ns=T0 + 8 * 1_000_000_000, limit=10
    )
    assert [(_messages(events), truncated) for events, truncated in answers] == [
        ([(3, "task claimed"), (4, "heartbeat")], False),
        ([(1, "request")], False),
        ([(5, "request"), (6, "requested → provisioning")], False),
        ([], False),
    ]
    cut = store.parent_events_many(PARENTS[:1], from_ns=T0, to_ns=T0 + 9 * 10**9, limit=1)
    assert [(_messages(events), truncated) for events, truncated in cut] == [
        ([(3, "task claimed")], True)
    ]
    assert store.parent_events_many([], from_ns=T0, to_ns=T0 + 1, limit=1) == []


@pytest.mark.parametrize(
    "parent",
    [
        ParentQuery("tenant", "t-1", "workflow_id", ()),
        ParentQuery("node_id", "n-1", "tenant", ()),
        ParentQuery("node_id", "n-1", "workflow_id", (), (("tenant; DROP TABLE events", ()),)),
    ],
)
def test_parents_of_an_unknown_kind_are_refused(filled: Store, parent: ParentQuery) -> None:
    with pytest.raises(QueryError, match="unknown identifier key 'tenant"):
        filled.parent_events_many([parent], from_ns=T0, to_ns=T0 + 1, limit=1)


def test_row_ids_are_read_as_runs_of_consecutive_ids() -> None:
    assert row_runs([12, 3, 4, 10, 5, 11, 20]) == [(3, 5), (10, 12), (20, 20)]
    assert row_runs([7]) == [(7, 7)]


def test_a_batch_is_stored_by_node_in_small_row_groups(tmp_path: Path) -> None:
    # Arrival order interleaves the nodes; each node's events must end up side by side, in
    # row groups of 16,384 rows (DuckDB's default would hold all 20,000 in one).
    events = [
        ev(i % 1000, "node", f"step {i}", node_id=f"n-{i % 4}", node_instance_id="ni-1")
        for i in range(20_000)
    ]
    with Store(tmp_path / "sorted.duckdb") as store:
        store.insert_events(events)
        cursor = store.cursor()
        nodes = [row[0] for row in cursor.execute("SELECT node_id FROM events").fetchall()]
        groups = cursor.execute(
            "SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('events')"
        ).fetchone()
    runs = [node for at, node in enumerate(nodes) if at == 0 or nodes[at - 1] != node]
    assert runs == ["n-0", "n-1", "n-2", "n-3"]
    assert groups == (2,)


def test_a_path_with_a_quote_opens(tmp_path: Path) -> None:
    path = tmp_path / "o'brien.duckdb"
    with Store(path) as store:
        store.insert_events(EVENTS)
    with Store(path, read_only=True) as store:
        assert store.count() == len(EVENTS)


def _nginx(offset_s: float, log: str, message: str, **fields: Any) -> Event:
    return ev(offset_s, "ingress", message, source="nginx", attrs={"log": log}, **fields)


def test_nginx_events_near_a_window(store: Store) -> None:
    store.insert_events(
        [
            _nginx(0, "access", "access ends before"),
            _nginx(60, "access", "access ends at the start"),
            _nginx(100, "access", "access 70-100", duration_s=30.0),
            _nginx(80.5, "access", "access starts at the end", duration_s=0.5),
            ev(65, "ingress", "access of another source", attrs={"log": "access"}),
            _nginx(39, "error", "error before"),
            _nginx(40, "error", "error at the start"),
            _nginx(50, "error", "error linked", correlation_id="c-1"),
            _nginx(69, "error", "error inside"),
            _nginx(70, "error", "error at the end"),
        ]
    )
    # An access event's request ([end - duration, end]) meets the window; an error's time is in it.
    access = store.nginx_events(unlinked_errors=False, from_ns=T0 + 60 * S, to_ns=T0 + 80 * S)
    errors = store.nginx_events(unlinked_errors=True, from_ns=T0 + 40 * S, to_ns=T0 + 70 * S)
    assert _messages(access) == [(60, "access ends at the start"), (100, "access 70-100")]
    assert _messages(errors) == [(40, "error at the start"), (69, "error inside")]


# -- values that would break SQL if formatted into it ----------------------------------------

# Ingest refuses such identifiers, but the store's own API is public: whatever reaches it
# must travel as bound parameters. Each value is an allocation (and workflow) of one event.
HOSTILE = ["o'brien", 'say "hi"', "a;b", "a--b", "back\\slash", "' OR '1'='1"]
HOSTILE_EVENTS = [
    *(
        ev(
            i,
            "api",
            f"request {i}",
            allocation_id=value,
            workflow_id=value,
            correlation_id=f"c-{i}",
        )
        for i, value in enumerate(HOSTILE)
    ),
    ev(10, "api", "bystander", allocation_id="a-1", correlation_id="c-10"),
]


@pytest.mark.usefixtures("lookup")
@pytest.mark.parametrize(
    ("value", "offset"),
    [
        ("o'brien", 0),
        ('say "hi"', 1),
        ("a;b", 2),
        ("a--b", 3),
        ("back\\slash", 4),
        ("' OR '1'='1", 5),
        # Match nothing: formatted into SQL, each would match every row (or fail).
        ("x' OR '1'='1", None),
        ("x' OR 1=1 --", None),
        ("'; DELETE FROM events; --", None),
        ('x" OR "1"="1', None),
    ],
)
def test_identifier_values_are_bound_not_formatted_into_sql(
    store: Store, monkeypatch: pytest.MonkeyPatch, value: str, offset: int | None
) -> None:
    store.insert_events(HOSTILE_EVENTS)
    if offset is None:
        bounds, messages, links = None, [], {}
    else:
        bounds = (T0 + offset * S, T0 + offset * S)
        messages = [(offset, f"request {offset}")]
        links = {"correlation_id": {f"c-{offset}": 1}, "workflow_id": {value: 1}}

    seed = store.seed("allocation_id", value)
    assert (seed.bounds, seed.link_counts) == (bounds, links)
    events, truncated = store.events_matching({"allocation_id": [value]})
    assert (_messages(events), truncated) == (messages, False)
    assert store.link_counts("allocation_id", value) == links
    assert store.link_counts_many([("allocation_id", value)]) == {("allocation_id", value): links}
    # A parent read whole through the index and filtered here, then one read by its window.
    for index_rows in (2048, 0):
        monkeypatch.setattr("correlator._parents.INDEX_ROWS", index_rows)
        parents = store.parent_events_many(
            [ParentQuery("workflow_id", value, "allocation_id", (value,))],
            from_ns=T0,
            to_ns=T0 + 60 * S,
            limit=10,
        )
        assert [(_messages(e), cut) for e, cut in parents] == [(messages, False)], index_rows
    assert store.count() == len(HOSTILE_EVENTS)


def test_re_ingesting_a_file_keeps_its_rejects_once(store: Store, tmp_path: Path) -> None:
    from correlator.ingest import ingest_paths

    path = tmp_path / "agent.ndjson"
    path.write_bytes(
        b'{"ts": "2026-11-22T13:11:19Z", "layer": "api", "event": "ok"}\n'
        b"not json\n"
        b'{"layer": "api", "event": "no time"}\n'
    )
    first = ingest_paths(store, "agent", [path])
    second = ingest_paths(store, "agent", [path])

    assert (first.accepted, second.accepted, second.duplicate) == (1, 0, 1)
    assert sum(first.rejected.values()) == sum(second.rejected.values()) == 2  # still said
    assert [(r["line_no"], r["origin"]) for r in store.rejects()] == [
        (2, str(path)),
        (3, str(path)),
    ]


@pytest.mark.parametrize("rows", [3, 9000], ids=["small batch", "large batch"])
def test_a_line_twice_in_one_batch_is_stored_once(store: Store, rows: int) -> None:
    # A small batch is checked for repeats in Python, a large one by Arrow: both must see them.
    events = [ev(i % 600, "node", f"tick {i}", node_id="n-1") for i in range(rows)]
    events.append(events[0])

    result = store.insert_events(events)

    assert (result.accepted, result.duplicate) == (rows, 1)
    assert store.count() == rows
