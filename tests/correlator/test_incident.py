"""The demo incident end to end: native evidence files → adapters → DuckDB → answers."""

from __future__ import annotations

import gc
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent_logging.schema import rfc3339_ns
from correlator import demo, incident, queries, render
from correlator._collector import collector_paused
from correlator._demo_story import FAILING_ALLOCATION, STUCK_ALLOCATION
from correlator.errors import NotFoundError, QueryError
from correlator.model import Event
from correlator.store import Store
from tests.correlator.conftest import DEMO_NOW_NS
from tests.correlator.events import T0, ev


def test_the_failing_allocation_names_cert_not_the_wrapper(demo_store: Store) -> None:
    data = incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    assert set(data) >= {"ids", "verdict", "events", "truncated", "clock_offsets"}
    verdict = data["verdict"]
    assert verdict["owner_layer"] == "cert"
    assert verdict["first_failure"]["layer"] == "ingress"
    assert "certificate has expired" in verdict["first_failure"]["message"]
    explained = {(e["layer"], e["message"]) for e in verdict["explains"]}
    assert ("api", "provisioning failed") in explained
    assert ("workflow", "allocation a-7f3c: provisioning → provision_failed") in explained
    assert verdict["confidence"] >= 0.8
    layers = {e["layer"] for e in data["events"]}
    assert layers == {"node", "ingress", "api", "workflow", "db"}
    assert data["ids"]["node_instance_id"] == ["ni-3", "ni-4"]
    assert data["reimages"][0]["from_instance"] == "ni-3"
    assert data["clock_offsets"]["api:provisioning-api"]["offset_s"] == pytest.approx(
        -1.196, abs=0.002
    )
    assert data["truncated"] is False
    times = [e.get("corrected_ts_ns", e["ts_ns"]) for e in data["events"]]
    assert times == sorted(times)
    # A busy node does not pull in its other allocations.
    assert data["ids"]["allocation_id"] == [FAILING_ALLOCATION]


def test_any_identifier_of_the_incident_leads_to_the_same_verdict(demo_store: Store) -> None:
    data = incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    correlation = data["verdict"]["first_failure"]["correlation_id"]
    from_request = incident.timeline_for(demo_store, "correlation_id", correlation)
    assert from_request["verdict"]["owner_layer"] == "cert"
    workflow = data["ids"]["workflow_id"][0]
    assert (
        incident.timeline_for(demo_store, "workflow_id", workflow)["verdict"]["owner_layer"]
        == "cert"
    )


def test_a_healthy_allocation_has_no_failure(demo_store: Store) -> None:
    data = incident.timeline_for(demo_store, "allocation_id", "a-101")
    assert data["verdict"] == {
        "owner_layer": "none",
        "confidence": 1.0,
        "first_failure": None,
        "explains": [],
        "reason": "no failure in the evidence",
    }


def test_findings_and_latency_of_the_demo(demo_store: Store) -> None:
    answer = queries.findings(demo_store, DEMO_NOW_NS)
    found = answer["findings"]
    assert [(f["rule"], f["entity_id"]) for f in found] == [
        ("projection_drift", "prov-a-9e01"),
        ("release_failed_stuck", STUCK_ALLOCATION),
    ]
    assert answer["truncated"] is False
    assert all(len(h) == 16 for f in found for h in f["evidence"])
    timing = queries.latency(demo_store)
    assert timing["truncated"] is False
    phases = {(p["phase"], p["provider"]): p for p in timing["phases"]}
    assert phases[("provision", "aap")]["p50_s"] > phases[("provision", "eda")]["p50_s"]


def test_findings_say_when_they_read_only_the_oldest_lifecycle_events(
    demo_store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    events, truncated = demo_store.lifecycle_events()
    assert not truncated
    kept, cut = demo_store.lifecycle_events(limit=len(events) - 1)
    assert cut and kept == events[:-1]  # the oldest, in the store's order
    assert demo_store.lifecycle_events(limit=len(events)) == (events, False)
    monkeypatch.setattr("correlator.store.LIFECYCLE_LIMIT", 5)
    answer = queries.findings(demo_store, DEMO_NOW_NS)
    assert answer["truncated"] is True
    render.print_findings(answer["findings"], truncated=True)
    assert "truncated: the store holds more lifecycle events than are read" in (
        capsys.readouterr().out
    )
    # Latency's samples are computed in SQL: every allocation counts, whatever the limit.
    timing = queries.latency(demo_store)
    assert timing["truncated"] is False
    assert timing["phases"] == _latency_of(demo_store)


def _latency_of(store: Store) -> list[dict[str, Any]]:
    """Latency as the pure core gives it from every lifecycle event."""
    from correlator.latency import latency

    return [p.as_dict() for p in latency(store.lifecycle_events(limit=10**9)[0])]


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ("allocation_id", "expected KEY=VALUE"),
        ("tenant=t-1", "unknown identifier 'tenant'"),
        ("allocation_id=a-9' OR 1=1 --", 'allocation_id holds "\'" (U+0027) at position 3'),
        ('allocation_id=a"} |~ ".*', "allocation_id holds '\"' (U+0022) at position 1"),
        ("allocation_id=" + "a" * 300, "allocation_id is 300 characters long"),
    ],
)
def test_hostile_or_malformed_seeds_are_refused_by_name(seed: str, message: str) -> None:
    with pytest.raises(QueryError, match=re.escape(message)):
        incident.parse_seed(seed)


def test_unknown_identifier_is_not_found(demo_store: Store) -> None:
    with pytest.raises(NotFoundError, match="no evidence mentions allocation_id=a-nope"):
        incident.timeline_for(demo_store, "allocation_id", "a-nope")


def test_reingesting_the_same_evidence_adds_nothing(tmp_path: Path) -> None:
    first = demo.build(tmp_path / "d.duckdb", now_ns=DEMO_NOW_NS, seed=7)
    again = demo.build(tmp_path / "d.duckdb", now_ns=DEMO_NOW_NS, seed=7)
    assert first["accepted"] > 100 and first["duplicate"] == 0
    assert (again["accepted"], again["duplicate"]) == (0, first["accepted"])
    with Store(tmp_path / "d.duckdb") as store:
        assert store.count() == first["accepted"]


def test_the_first_failure_and_its_symptoms_are_marked_among_the_events(
    demo_store: Store,
) -> None:
    data = incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    verdict = data["verdict"]
    first = [e["hash"] for e in data["events"] if e.get("first_failure")]
    symptoms = {e["hash"] for e in data["events"] if e.get("symptom")}
    assert first == [verdict["first_failure"]["hash"]]
    assert symptoms == {e["hash"] for e in verdict["explains"]} - set(first)
    assert len(symptoms) >= 2
    assert not [e for e in data["events"] if e.get("first_failure") and e.get("symptom")]


def test_graph_reports_followed_and_refused_links(demo_store: Store) -> None:
    data = incident.graph_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    assert data["seed"] == {"allocation_id": FAILING_ALLOCATION}
    assert {p["key"] for p in data["parents"]} == {"node_id"}
    assert any(link["to_key"] == "workflow_id" for link in data["followed"])


@given(st.integers(min_value=-(2**62), max_value=2**62))
@example(0)
@example(-1)
@example(1_772_323_199_999_999_999)  # the last nanosecond of 2026-02-28
def test_event_times_are_written_as_rfc3339_with_nanoseconds(ts_ns: int) -> None:
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    assert rfc3339_ns(ts_ns) == f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def test_an_event_shows_its_set_fields_in_order() -> None:
    event = ev(1.5, "api", "request", correlation_id="c-1", http_status=500, attrs={"k": 1})
    assert incident.event_json(event, event.ts_ns + 7) == {
        "ts": "2026-11-18T11:06:41.500000000Z",
        "ts_ns": T0 + 1_500_000_000,
        "corrected_ts_ns": T0 + 1_500_000_007,
        "layer": "api",
        "source": "ndjson",
        "level": "info",
        "message": "request",
        "correlation_id": "c-1",
        "http_status": 500,
        "attrs": {"k": 1},
        "origin": "test",
        "hash": f"{event.hash & 0xFFFFFFFFFFFFFFFF:016x}",
        "raw": event.raw,
    }
    assert list(incident.event_json(event)) == [
        "ts", "ts_ns", "layer", "source", "level", "message", "correlation_id", "http_status",
        "attrs", "origin", "hash", "raw",
    ]  # fmt: skip


def _event_json_by_loop(event: Event, corrected_ns: int | None) -> dict[str, Any]:
    """event_json as a loop over SHOWN_FIELDS: the reference its spelled-out form must match."""
    shown: dict[str, Any] = {"ts": rfc3339_ns(event.ts_ns), "ts_ns": event.ts_ns}
    if corrected_ns is not None and corrected_ns != event.ts_ns:
        shown["corrected_ts_ns"] = corrected_ns
    for name in incident.SHOWN_FIELDS:
        if getattr(event, name) is not None:
            shown[name] = getattr(event, name)
    if event.attrs:
        shown["attrs"] = event.attrs
    shown["origin"] = event.origin
    shown["hash"] = f"{event.hash & 0xFFFFFFFFFFFFFFFF:016x}"
    shown["raw"] = event.raw
    return shown


_OPTIONAL_SHOWN = [n for n in incident.SHOWN_FIELDS if n not in ("layer", "source", "message")]


@given(
    st.fixed_dictionaries(
        {},
        optional={
            name: st.integers(100, 599)
            if name == "http_status"
            else st.floats(allow_nan=False)
            if name == "duration_s"
            else st.text(max_size=3)
            for name in _OPTIONAL_SHOWN
        },
    ),
    st.one_of(st.none(), st.integers(-(2**40), 2**40)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
def test_an_event_shows_what_the_loop_over_its_fields_shows(
    fields: dict[str, Any], shift: int | None, attrs: dict[str, int]
) -> None:
    event = ev(2.0, "node", "m", attrs=attrs, **fields)
    corrected = None if shift is None else event.ts_ns + shift
    shown = incident.event_json(event, corrected)
    expected = _event_json_by_loop(event, corrected)
    assert list(shown.items()) == list(expected.items())  # the same keys, in the same order


def _first(events: list[Event], limit: int) -> tuple[list[Event], bool]:
    """What the store answers for these events: the first ``limit`` by (time, hash)."""
    ordered = sorted({e.hash: e for e in events}.values(), key=lambda e: (e.ts_ns, e.hash))
    return ordered[:limit], len(ordered) > limit


@given(
    st.lists(st.integers(0, 30), max_size=25),
    st.lists(st.integers(0, 30), max_size=25),
    st.integers(1, 20),
)
@example([1, 2, 3], [2, 3, 4], 3)  # shared events, and more than the limit in all
@example([5], [], 1)
def test_the_seed_and_the_expansion_merge_as_one_query_would_answer(
    seed_offsets: list[int], other_offsets: list[int], limit: int
) -> None:
    # Events are identified by their offset: the same offset in both lists is the same event
    # (an event mentioning the seed and an identifier the expansion added).
    def events(offsets: list[int]) -> list[Event]:
        return [ev(offset / 4, "node", f"e{offset}") for offset in offsets]

    seed, seed_truncated = _first(events(seed_offsets), limit)
    other, other_truncated = _first(events(other_offsets), limit)
    merged = incident._top(seed, other, limit, seed_truncated or other_truncated)
    assert merged == _first(events(seed_offsets + other_offsets), limit)


def test_a_timeline_leaves_no_thread_behind_also_on_error(demo_store: Store) -> None:
    incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    with pytest.raises(NotFoundError):
        incident.timeline_for(demo_store, "allocation_id", "a-nope")
    assert not [t for t in threading.enumerate() if t.name.startswith("correlator-seed")]


def test_a_parent_overflowing_the_limit_is_cut_in_the_stores_order(tmp_path: Path) -> None:
    # Allocation a-1 on node n-1, which also ran a-2: the node is a-1's parent, and its own
    # event at t=5 s ties with a-1's. With a limit of 2 the answer is cut inside the tie, and
    # keeps what one query would: the first two by (time, hash), whichever list each came from.
    def tie(suffix: int) -> tuple[Event, Event]:
        return (
            ev(5, "workflow", f"a-1 step {suffix}", allocation_id="a-1", node_id="n-1"),
            ev(5, "node", f"n-1 heartbeat {suffix}", node_id="n-1"),
        )

    # Contents whose parent event sorts first: the seed's events come first in the list.
    own, parents = next(pair for pair in map(tie, range(100)) if pair[1].hash < pair[0].hash)
    events = [
        ev(1, "workflow", "a-1 requested", allocation_id="a-1", node_id="n-1"),
        ev(2, "workflow", "a-2 requested", allocation_id="a-2", node_id="n-1"),
        own,
        parents,
    ]
    with Store(tmp_path / "tie.duckdb") as store:
        store.insert_events(events)
        data = incident.timeline_for(store, "allocation_id", "a-1", limit=2)
    assert data["truncated"] is True
    assert [e["message"] for e in data["events"]] == ["a-1 requested", parents.message]


def test_a_failure_past_the_limit_is_not_reported_as_none(tmp_path: Path) -> None:
    # A busy node: heartbeats, then its failure. Cut before the failure, the answer must not
    # say there is none.
    events = [ev(i, "node", f"heartbeat {i}", node_id="n-1") for i in range(10)]
    events.append(ev(10, "node", "disk gone", node_id="n-1", level="error", owner_hint="node"))
    with Store(tmp_path / "busy.duckdb") as store:
        store.insert_events(events)
        cut = incident.timeline_for(store, "node_id", "n-1", limit=5)
        whole = incident.timeline_for(store, "node_id", "n-1")
    assert cut["truncated"] is True
    assert (cut["verdict"]["owner_layer"], cut["verdict"]["confidence"]) == ("unknown", 0.0)
    assert cut["verdict"]["reason"].startswith(
        "no failure in the events read; the timeline was cut"
    )
    assert (whole["verdict"]["owner_layer"], whole["truncated"]) == ("node", False)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was_also_on_error(demo_store: Store, enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
        assert gc.isenabled() is enabled
        with pytest.raises(NotFoundError):
            incident.timeline_for(demo_store, "allocation_id", "a-nope")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_findings_and_latency_read_with_the_collector_paused(
    demo_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    collecting: list[bool] = []
    for name in ("finding_events", "latency_samples"):
        read = getattr(demo_store, name)

        def watched(*args: Any, _read: Any = read, **kwargs: Any) -> Any:
            collecting.append(gc.isenabled())
            return _read(*args, **kwargs)

        monkeypatch.setattr(demo_store, name, watched)
    assert gc.isenabled()
    queries.findings(demo_store, DEMO_NOW_NS)
    queries.latency(demo_store)
    assert collecting == [False, False]  # what they read is not walked again and again
    assert gc.isenabled()


class _Young:
    """A container the collector tracks, to find in a generation."""


def test_an_answers_objects_leave_the_young_generation_unwalked() -> None:
    assert gc.get_freeze_count() == 0
    gc.collect()
    with collector_paused():
        made = [_Young() for _ in range(5_000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    oldest = {id(obj) for obj in gc.get_objects(generation=2)}
    assert all(id(obj) in oldest for obj in made)
    assert gc.get_count()[0] < 100  # not the 5,000 allocations of the answer


def test_objects_frozen_by_the_process_stay_frozen() -> None:
    kept = _Young()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = [_Young() for _ in range(1_000)]
        assert gc.get_freeze_count() == frozen
        assert id(kept) not in {id(obj) for obj in gc.get_objects()}  # still frozen
        assert len(made) == 1_000
    finally:
        gc.unfreeze()


def test_an_allocation_retried_on_another_node_does_not_open_a_node_to_its_siblings(
    demo_db: Path, tmp_path: Path
) -> None:
    # One allocation seen on a second node anywhere in the store (a retry elsewhere) makes
    # allocation -> node m:n: an allocation's node is then reached through its request, as
    # a parent filtered on correlation_id, and the node's other allocations' records, which
    # carry no request, came into every timeline on that node (14 events became 28).
    copy = tmp_path / "retried.duckdb"
    copy.write_bytes(demo_db.read_bytes())
    with Store(copy) as store:
        before = incident.timeline_for(store, "allocation_id", STUCK_ALLOCATION)
        store.insert_events(
            [
                ev(
                    0,
                    "node",
                    "task claimed (retry on another node)",
                    node_id="n-99",
                    allocation_id="a-101",
                )
            ]
        )
        assert store.cardinalities()[("allocation_id", "node_id")][0] == 2  # now m:n
        after = incident.timeline_for(store, "allocation_id", STUCK_ALLOCATION)

    assert {e.get("allocation_id") for e in after["events"]} <= {STUCK_ALLOCATION, None}
    assert [e["hash"] for e in after["events"]] == [e["hash"] for e in before["events"]]
