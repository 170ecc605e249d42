"""What findings and latency read from the store: findings only the lifecycle events they can
depend on, latency samples computed in SQL; either way the answers are those of every
lifecycle event read as events."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator import _lifecycle
from correlator.errors import QueryError
from correlator.findings import DEFAULTS, RULES, Finding, FindingsConfig, Reads, Rule, find
from correlator.findings._judge import Judge
from correlator.findings._matching import Index
from correlator.latency import DEFAULT_PHASES, latency, statistics
from correlator.model import Event
from correlator.store import Store
from tests.correlator.test_findings import T0, H, M, alloc, cr, ev, job, outbox, vm

#: Every threshold zero: any entity left in a bad state is a finding, so a missing event shows.
EAGER = FindingsConfig(
    release_failed_deadline_s=0,
    provision_job_deadline_s=0,
    outbox_publish_deadline_s=0,
    drift_threshold_s=0,
    orphan_grace_s=0,
)
NOW = T0 + 48 * H


@pytest.fixture
def memory_store() -> Iterator[Store]:
    with Store(":memory:") as opened:
        yield opened


@pytest.fixture(scope="module")
def scratch() -> Iterator[Store]:
    """One store for every example of a property test (a new one costs ~60 ms): emptied by
    :func:`refilled` before each."""
    with Store(":memory:") as opened:
        yield opened


def refilled(store: Store, events: Sequence[Event]) -> Store:
    cursor = store.cursor()
    try:
        cursor.execute("DELETE FROM events")
    finally:
        cursor.close()
    return stored(store, events)


def stored(store: Store, events: Sequence[Event]) -> Store:
    store.insert_events(events)
    return store


def hashes(events: Sequence[Event]) -> set[int]:
    return {e.hash for e in events}


def same_findings(store: Store) -> list[Any]:
    """The findings of every lifecycle event and of what finding_events reads, which must be
    equal; returned for further checks."""
    everything, cut = store.lifecycle_events()
    chosen, chosen_cut = store.finding_events()
    assert not cut and not chosen_cut
    assert hashes(chosen) <= hashes(everything)
    for config in (EAGER, FindingsConfig()):
        assert find(chosen, now_ns=NOW, config=config) == find(
            everything, now_ns=NOW, config=config
        )
    return find(chosen, now_ns=NOW, config=EAGER)


def test_only_the_stuck_allocation_and_what_reports_its_occupancy_are_read(
    memory_store: Store,
) -> None:
    healthy = [
        e
        for n in range(40)
        for e in (
            alloc(n * M, "provisioning", allocation_id=f"a-{n}"),
            alloc(n * M + 1, "active", allocation_id=f"a-{n}"),
        )
    ]
    stuck = [
        alloc(H, "releasing", allocation_id="a-stuck", node_id="n-7"),
        alloc(2 * H, " Release_Failed ", allocation_id="a-stuck"),
    ]
    # A record without an entity of its own that reports the node's occupancy for a-stuck,
    # and one that reports it for a healthy allocation.
    occupancy = ev(
        2 * H + 1, None, None, layer="api", attrs={"occupancy": "cleanup"}, allocation_id="a-stuck"
    )
    elsewhere = ev(
        2 * H + 2, None, None, layer="api", attrs={"occupancy": "in_use"}, allocation_id="a-3"
    )
    store = stored(memory_store, [*healthy, *stuck, occupancy, elsewhere])

    chosen, truncated = store.finding_events()

    assert not truncated
    assert [e.hash for e in chosen] == [e.hash for e in (*stuck, occupancy)]  # oldest first
    (finding,) = same_findings(store)
    assert (finding.rule, finding.entity_id) == ("release_failed_stuck", "a-stuck")


def test_active_jobs_and_unpublished_rows_are_read_and_finished_ones_are_not(
    memory_store: Store,
) -> None:
    running = [job(0, "pending", "aap:1"), job(M, "RUNNING", "aap:1")]
    finished = [job(0, "running", "aap:2"), job(M, "successful", "aap:2")]
    waiting = [outbox(0, "created", "ob-1")]
    published = [outbox(0, "created", "ob-2"), outbox(M, "published", "ob-2")]
    store = stored(memory_store, [*running, *finished, *waiting, *published])

    chosen, _ = store.finding_events()

    assert hashes(chosen) == hashes([*running, *waiting])
    assert {f.rule for f in same_findings(store)} == {"provision_job_overdue", "outbox_unpublished"}


def test_a_projection_brings_every_job_and_vm_and_the_allocations_it_deleted_during(
    memory_store: Store,
) -> None:
    # Which job a projection shows depends on every job; whether its VM was orphaned on
    # every VM and on the allocation the deleted projection names.
    jobs = [job(0, "running", "aap:4711"), job(10 * M, "canceled", "aap:4711")]
    other_job = [job(0, "successful", "eda:12", workflow_id="w-2")]
    projection = [cr(M, "Running"), cr(2 * M, None, attrs={"deleted": True})]
    allocation = [alloc(0, "provisioning"), alloc(M, "provisioning")]
    unrelated = [alloc(0, "active", allocation_id="a-1")]
    vms = [vm(M, "running")]
    store = stored(memory_store, [*jobs, *other_job, *projection, *allocation, *unrelated, *vms])

    chosen, _ = store.finding_events()

    assert hashes(chosen) == hashes([*jobs, *other_job, *projection, *allocation, *vms])
    assert "vm_orphaned" in {f.rule for f in same_findings(store)}


def test_an_entity_that_reports_occupancy_is_read_whole(memory_store: Store) -> None:
    # A job's event reports the node's occupancy for the stuck allocation; the job finished
    # later. Read in part (that one event), the job would look overdue.
    stuck = [alloc(0, "release_failed", allocation_id="a-stuck")]
    reporting = job(M, "running", "aap:1", allocation_id="a-stuck", attrs={"occupancy": "cleanup"})
    finished = job(2 * M, "successful", "aap:1", allocation_id="a-stuck")
    store = stored(memory_store, [*stuck, reporting, finished])

    chosen, _ = store.finding_events()

    assert hashes(chosen) == hashes([*stuck, reporting, finished])
    assert [f.rule for f in same_findings(store)] == ["release_failed_stuck"]


def test_the_limit_keeps_the_oldest_and_says_so(memory_store: Store) -> None:
    events = [outbox(n * M, "pending", f"ob-{n}") for n in range(5)]
    store = stored(memory_store, events)
    assert store.finding_events(limit=5) == (store.finding_events()[0], False)
    kept, truncated = store.finding_events(limit=3)
    assert truncated
    assert [e.hash for e in kept] == [e.hash for e in events[:3]]


def test_an_empty_store_has_nothing_to_read(memory_store: Store) -> None:
    assert memory_store.finding_events() == ([], False)


# -- a rule is one object: its reach is read, and nothing reads for a rule without one ------


def _parked_outboxes(index: Index, judge: Judge) -> Iterable[Finding]:
    """A made-up rule: an outbox row whose latest state is ``parked``."""
    for (kind, row), events in index.outboxes.items():
        if events[-1].state_to == "parked" and (age := judge.over(events[-1].ts_ns)):
            yield judge.make(
                entity=(kind, row),
                since_ns=events[-1].ts_ns,
                age_ns=age,
                ids={},
                summary=f"{row} parked",
                evidence=(events[-1].hash,),
            )


PARKED = Rule(
    name="outbox_parked",
    kind="stuck",
    threshold="outbox_parked_deadline_s",
    default_s=60.0,
    describes="Seconds an outbox row may stay parked",
    judge=_parked_outboxes,
    reach=(Reads.latest_in("outbox", {"parked"}),),
)


def test_a_new_rule_brings_its_variable_and_its_reach(memory_store: Store) -> None:
    parked = [outbox(0, "created", "ob-9"), outbox(M, "parked", "ob-9")]
    published = [outbox(0, "created", "ob-1"), outbox(M, "published", "ob-1")]
    store = stored(memory_store, [*parked, *published])
    cursor = store.cursor()
    try:
        without, _ = _lifecycle.finding_events(cursor, 100)
        with_it, _ = _lifecycle.finding_events(cursor, 100, (*RULES, PARKED))
    finally:
        cursor.close()

    assert PARKED.variable == "CORRELATOR_FINDINGS_OUTBOX_PARKED_DEADLINE_S"
    assert hashes(without) == set()
    assert hashes(with_it) == hashes(parked)  # the whole row, not just its latest event
    judge = Judge(PARKED.name, PARKED.kind, now_ns=NOW, threshold_s=60.0, critical_factor=4.0)
    assert [f.entity_id for f in PARKED.judge(Index(with_it), judge)] == ["ob-9"]


def test_a_rule_without_a_reach_is_refused() -> None:
    with pytest.raises(ValueError, match="rule 'outbox_parked' reads nothing: give its reach"):
        dataclasses.replace(PARKED, reach=())
    with pytest.raises(ValueError, match="unknown role 'node'"):
        Reads.every("node")


def test_every_rule_has_its_own_name_variable_and_field() -> None:
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert list(DEFAULTS) == [*dict.fromkeys(rule.threshold for rule in RULES), "critical_factor"]
    assert all(rule.variable.startswith("CORRELATOR_FINDINGS_") for rule in RULES)


# -- the same findings either way, on made-up stores --------------------------------------

_STATES = (
    "requested", "provisioning", "active", "releasing", "release_failed", " Release_Failed ",
    "released", "pending", "running", "RUNNING", "successful", "failed", "canceled",
    "completed", "stopped", "created", "published", "Pending", "Running", "Succeeded",
    "Canceled", "Deleting", "deleting ", "deleted", "absent", "",
)  # fmt: skip
_KINDS = ("allocation", "provider_job", "outbox", "cr", "vm", "")
_LAYERS = ("workflow", "provider", "projection", "api")
_ENTITIES = ("a-1", "a-2", "aap:1", "eda:1", "1", "ob-1", "cr-1", "vm-1", "")
_ATTRS = st.fixed_dictionaries(
    {},
    optional={
        "occupancy": st.sampled_from(["cleanup", "CLEANUP", "in_use"]),
        "deleted": st.sampled_from([True, False, "true", "yes"]),
        "job_id": st.sampled_from(["aap:1", "eda:1", "1", "2"]),
        "provider": st.sampled_from(["aap", "EDA"]),
    },
)


@st.composite
def lifecycle(draw: st.DrawFn) -> list[Event]:
    events = []
    for n in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(_KINDS))
        events.append(
            ev(
                draw(st.integers(0, 20)) * M + n,  # ties in time are settled by the hash
                kind or None,
                draw(st.sampled_from(_ENTITIES)) or None,
                draw(st.sampled_from(_STATES)) or None,
                layer=draw(st.sampled_from(_LAYERS)),
                attrs=draw(_ATTRS),
                allocation_id=draw(st.sampled_from(["a-1", "a-2", None])),
                workflow_id=draw(st.sampled_from(["w-1", "w-2", None])),
            )
        )
    return events


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events=lifecycle())
def test_the_findings_of_what_is_read_are_the_findings_of_everything(
    scratch: Store, events: list[Event]
) -> None:
    same_findings(refilled(scratch, events))


def test_the_demo_has_the_same_findings_either_way(demo_db: Path) -> None:
    with Store(demo_db, read_only=True) as store:
        assert same_findings(store)


# -- latency: the same rows from SQL as from the events ----------------------------------

_ALLOCATION_STATES = (
    "requested", "provisioning", " Provisioning", "PROVISIONING ", "active", "Active",
    "releasing", "released", "failed", "",
)  # fmt: skip
_PROVIDERS = st.sampled_from(["aap", "AAP", "eda", "", 0, 7, True, False, 1.5, None, ["x"]])


@st.composite
def allocation_steps(draw: st.DrawFn) -> list[Event]:
    events = []
    for n in range(draw(st.integers(0, 30))):
        provider = draw(_PROVIDERS)
        events.append(
            ev(
                draw(st.integers(0, 30)) * M + n,
                draw(st.sampled_from(["allocation", "allocation", "vm", ""])) or None,
                draw(st.sampled_from(["a-1", "a-2", "a-3", ""])) or None,
                draw(st.sampled_from(_ALLOCATION_STATES)) or None,
                layer=draw(st.sampled_from(["workflow", "workflow", "projection", "api"])),
                attrs={} if provider is None else {"provider": provider},
                allocation_id=draw(st.sampled_from(["a-1", "a-2", None])),
            )
        )
    return events


def same_latency(store: Store, phases: dict[str, tuple[str, str]] = DEFAULT_PHASES) -> None:
    everything, _ = store.lifecycle_events()
    samples, incomplete = store.latency_samples(phases)
    assert statistics(samples, incomplete, phases) == latency(everything, phases=phases)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events=allocation_steps())
def test_latency_from_sql_is_latency_from_the_events(scratch: Store, events: list[Event]) -> None:
    store = refilled(scratch, events)
    same_latency(store)
    same_latency(store, {"up": ("Provisioning", "ACTIVE"), "down": ("active", "released")})


def test_latency_of_the_demo_from_sql_is_latency_from_the_events(demo_db: Path) -> None:
    with Store(demo_db, read_only=True) as store:
        same_latency(store)
        assert store.latency_samples()[0]  # the demo has samples to compare


def test_latency_samples_refuse_malformed_phases(memory_store: Store) -> None:
    with pytest.raises(QueryError, match="two different non-empty states"):
        memory_store.latency_samples({"odd": ("active", "ACTIVE")})
