from __future__ import annotations

import random
from typing import Any

import pytest

from correlator.errors import QueryError
from correlator.latency import DEFAULT_PHASES, PhaseStats, latency, nearest_rank
from correlator.model import Event, content_hash

T0 = 1_700_000_000 * 10**9
S = 10**9


def step(
    at_s: int,
    allocation: str,
    state: str | None,
    provider: str | None = None,
    *,
    kind: str | None = "allocation",
    layer: str = "workflow",
) -> Event:
    """An allocation transition at ``T0 + at_s`` seconds."""
    attrs: dict[str, Any] = {"provider": provider} if provider else {}
    raw = f"{at_s} {kind} {allocation} {state} {attrs}"
    return Event(
        ts_ns=T0 + at_s * S,
        layer=layer,
        source="workflow",
        origin="test",
        message=f"{allocation} -> {state}",
        raw=raw,
        hash=content_hash("workflow", raw),
        allocation_id=allocation,
        entity_kind=kind,
        entity_id=allocation if kind else None,
        state_to=state,
        attrs=attrs,
    )


def provision(allocation: str, seconds: int, provider: str | None, at_s: int = 0) -> list[Event]:
    return [
        step(at_s, allocation, "provisioning", provider),
        step(at_s + seconds, allocation, "active", provider),
    ]


def rows(stats: list[PhaseStats]) -> list[tuple[Any, ...]]:
    return [(s.phase, s.provider, s.count, s.incomplete, s.p50_s, s.p95_s, s.max_s) for s in stats]


PROVISION_ONLY = {"provision": DEFAULT_PHASES["provision"]}


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([], 50, None),
        ([7.0], 50, 7.0),
        ([7.0], 95, 7.0),
        ([1.0, 2.0], 50, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 95, 4.0),
        ([float(v) for v in range(1, 11)], 50, 5.0),
        ([float(v) for v in range(1, 11)], 95, 10.0),
        ([float(v) for v in range(1, 21)], 95, 19.0),
        ([float(v) for v in range(1, 21)], 96, 20.0),
        ([float(v) for v in range(1, 101)], 95, 95.0),
        ([float(v) for v in range(1, 101)], 100, 100.0),
        ([float(v) for v in range(1, 101)], 1, 1.0),
    ],
)
def test_nearest_rank(values: list[float], percent: int, expected: float | None) -> None:
    assert nearest_rank(values, percent) == expected


@pytest.mark.parametrize("percent", [0, 101, -5])
def test_nearest_rank_refuses_percent_out_of_range(percent: int) -> None:
    with pytest.raises(QueryError, match=r"percentile must be within 1\.\.100"):
        nearest_rank([1.0], percent)


def test_aap_vs_eda_side_by_side() -> None:
    events = [
        *provision("a-1", 40, "aap"),
        *provision("a-2", 10, "aap"),
        *provision("a-3", 30, "aap"),
        *provision("a-4", 20, "aap"),
        *provision("e-1", 50, "eda"),  # one sample: p50 = p95 = max
    ]
    assert rows(latency(events, phases=PROVISION_ONLY)) == [
        ("provision", "aap", 4, 0, 20.0, 40.0, 40.0),
        ("provision", "eda", 1, 0, 50.0, 50.0, 50.0),
    ]


def test_default_phases_of_full_lifecycles() -> None:
    events = [
        step(0, "a-1", "requested", "aap"),
        step(5, "a-1", "provisioning"),
        step(65, "a-1", "active"),
        step(1000, "a-1", "releasing"),
        step(1030, "a-1", "released"),
        step(0, "a-2", "requested", "eda"),
        step(2, "a-2", "provisioning"),
        step(92, "a-2", "active"),
        step(500, "a-2", "releasing"),
        step(545, "a-2", "released"),
    ]
    assert rows(latency(events)) == [
        ("provision", "aap", 1, 0, 60.0, 60.0, 60.0),
        ("provision", "eda", 1, 0, 90.0, 90.0, 90.0),
        ("deprovision", "aap", 1, 0, 30.0, 30.0, 30.0),
        ("deprovision", "eda", 1, 0, 45.0, 45.0, 45.0),
        ("total", "aap", 1, 0, 65.0, 65.0, 65.0),
        ("total", "eda", 1, 0, 92.0, 92.0, 92.0),
    ]


def test_incomplete_phases_are_counted_apart() -> None:
    events = [
        *provision("a-1", 30, "aap"),
        step(0, "a-2", "provisioning", "aap"),
        step(12, "a-2", "provision_failed", "aap"),  # never reaches active
        step(0, "a-3", "provisioning", "aap"),  # still under way
        step(0, "e-1", "provisioning", "eda"),
        step(9, "e-1", "provision_failed", "eda"),
    ]
    assert rows(latency(events, phases=PROVISION_ONLY)) == [
        ("provision", "aap", 1, 2, 30.0, 30.0, 30.0),
        ("provision", "eda", 0, 1, None, None, None),
    ]


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        # A retry re-enters provisioning: measured from the first entry.
        (
            [(0, "provisioning"), (5, "provision_failed"), (10, "provisioning"), (30, "active")],
            [("provision", "aap", 1, 0, 30.0, 30.0, 30.0)],
        ),
        # A second cycle is not counted again: the first end after the first start.
        (
            [(0, "provisioning"), (20, "active"), (100, "provisioning"), (190, "active")],
            [("provision", "aap", 1, 0, 20.0, 20.0, 20.0)],
        ),
        # An end state before the start does not count.
        (
            [(0, "active"), (10, "provisioning"), (25, "active")],
            [("provision", "aap", 1, 0, 15.0, 15.0, 15.0)],
        ),
        # Repeated snapshots of the start state change nothing.
        (
            [(0, "provisioning"), (3, "provisioning"), (8, "ACTIVE"), (9, "active")],
            [("provision", "aap", 1, 0, 8.0, 8.0, 8.0)],
        ),
        # Never entered the start state: not a sample, not incomplete.
        ([(0, "requested"), (4, "active")], []),
        ([(0, "active"), (4, "provisioning")], [("provision", "aap", 0, 1, None, None, None)]),
    ],
)
def test_re_entry_into_states(
    states: list[tuple[int, str]], expected: list[tuple[Any, ...]]
) -> None:
    events = [step(at, "a-1", state, "aap") for at, state in states]
    assert rows(latency(events, phases=PROVISION_ONLY)) == expected


@pytest.mark.parametrize(
    ("events", "provider"),
    [
        ([step(0, "a-1", "provisioning", "EDA"), step(9, "a-1", "active", "aap")], "eda"),
        ([step(0, "a-1", "provisioning"), step(9, "a-1", "active", "aap")], "aap"),
        (
            # Neither transition says: the allocation's latest known provider decides,
            # whichever event (here a provider job's) named the allocation.
            [
                step(-5, "a-1", "requested", "eda"),
                step(0, "a-1", "provisioning"),
                step(2, "a-1", "running", "aap", kind="provider_job", layer="provider"),
                step(9, "a-1", "active"),
            ],
            "aap",
        ),
        ([step(0, "a-1", "provisioning"), step(9, "a-1", "active")], "unknown"),
    ],
)
def test_provider_resolution(events: list[Event], provider: str) -> None:
    assert rows(latency(events, phases=PROVISION_ONLY)) == [
        ("provision", provider, 1, 0, 9.0, 9.0, 9.0)
    ]


def test_only_allocation_transitions_count() -> None:
    events = [
        *provision("a-1", 30, "aap"),
        # A CR that projects the allocation, and a record without a state: ignored.
        step(0, "a-2", "provisioning", "aap", layer="projection"),
        step(5, "a-2", "active", "aap", layer="projection"),
        step(0, "a-3", None, "aap"),
        step(0, "a-4", "provisioning", "aap", kind=None),
        Event(ts_ns=T0, layer="api", source="agent", origin="test", message="m", raw="m", hash=1),
    ]
    assert rows(latency(events, phases=PROVISION_ONLY)) == [
        ("provision", "aap", 1, 0, 30.0, 30.0, 30.0)
    ]


def test_input_order_does_not_matter() -> None:
    events = [
        *provision("a-1", 40, "aap"),
        *provision("a-2", 10, "aap", at_s=7),
        *provision("a-3", 25, "eda", at_s=3),
        step(50, "a-1", "releasing"),
        step(80, "a-1", "released"),
        step(60, "a-3", "releasing"),
    ]
    expected = [
        ("provision", "aap", 2, 0, 10.0, 40.0, 40.0),
        ("provision", "eda", 1, 0, 25.0, 25.0, 25.0),
        ("deprovision", "aap", 1, 0, 30.0, 30.0, 30.0),
        ("deprovision", "eda", 0, 1, None, None, None),
    ]
    assert rows(latency(events)) == expected
    assert rows(latency(reversed(events))) == expected
    shuffled = list(events)
    random.Random(4).shuffle(shuffled)
    assert rows(latency(shuffled)) == expected


def test_custom_phases_in_caller_order() -> None:
    events = [
        step(0, "a-1", "Requested", "aap"),
        step(4, "a-1", "provisioning"),
        step(10, "a-1", "active"),
    ]
    phases = {"queue": ("requested", "provisioning"), "boot": ("provisioning", "active")}
    assert rows(latency(events, phases=phases)) == [
        ("queue", "aap", 1, 0, 4.0, 4.0, 4.0),
        ("boot", "aap", 1, 0, 6.0, 6.0, 6.0),
    ]


def test_no_events_no_rows() -> None:
    assert latency([]) == []


@pytest.mark.parametrize(
    ("phases", "message"),
    [
        ({"x": ("a",)}, "phase 'x' must be a .start state, end state. pair"),
        ({"x": "ab"}, "phase 'x' must be a .start state, end state. pair"),
        ({"x": ("a", "A")}, "phase 'x' needs two different non-empty states, not 'a' -> 'a'"),
        ({"x": ("", "b")}, "phase 'x' needs two different non-empty states"),
    ],
)
def test_malformed_phases_are_refused(phases: Any, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        latency([], phases=phases)


def test_as_dict() -> None:
    (stats,) = latency(provision("a-1", 12, "aap"), phases=PROVISION_ONLY)
    assert stats.as_dict() == {
        "provider": "aap",
        "phase": "provision",
        "count": 1,
        "incomplete": 0,
        "p50_s": 12.0,
        "p95_s": 12.0,
        "max_s": 12.0,
    }
