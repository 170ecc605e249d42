from __future__ import annotations

import random
from typing import Any

import pytest

from correlator.errors import QueryError
from correlator.findings import Finding, FindingsConfig, find
from correlator.model import Event, content_hash

T0 = 1_700_000_000 * 10**9
S = 10**9
M = 60 * S
H = 3600 * S

SOURCE_OF_LAYER = {
    "workflow": "workflow",
    "provider": "aap",
    "projection": "k8s",
    "api": "agent",
    "node": "agent",
}


def ev(
    at_ns: int,
    kind: str | None,
    entity: str | None,
    state: str | None = None,
    *,
    layer: str = "workflow",
    attrs: dict[str, Any] | None = None,
    **ids: Any,
) -> Event:
    """One piece of lifecycle evidence at ``T0 + at_ns``."""
    source = SOURCE_OF_LAYER[layer]
    raw = f"{at_ns} {layer} {kind} {entity} {state} {attrs} {sorted(ids.items())}"
    return Event(
        ts_ns=T0 + at_ns,
        layer=layer,
        source=source,
        origin="test",
        message=f"{kind} {entity} -> {state}",
        raw=raw,
        hash=content_hash(source, raw),
        entity_kind=kind,
        entity_id=entity,
        state_to=state,
        attrs=attrs or {},
        **ids,
    )


def alloc(at_ns: int, state: str, **kw: Any) -> Event:
    kw.setdefault("allocation_id", "a-9")
    return ev(at_ns, "allocation", kw["allocation_id"], state, **kw)


def job(at_ns: int, state: str, job_id: str = "aap:4711", **kw: Any) -> Event:
    kw.setdefault("workflow_id", "w-9")
    return ev(at_ns, "provider_job", job_id, state, layer="provider", **kw)


def cr(at_ns: int, state: str | None, name: str = "prov-a-9", **kw: Any) -> Event:
    attrs = {"job_id": kw.pop("job_id", "aap:4711"), **kw.pop("attrs", {})}
    kw.setdefault("workflow_id", "w-9")
    kw.setdefault("allocation_id", "a-9")
    return ev(at_ns, "cr", name, state, layer="projection", attrs=attrs, **kw)


def vm(at_ns: int, state: str, name: str = "vm-1", **kw: Any) -> Event:
    kw.setdefault("allocation_id", "a-9")
    return ev(at_ns, "vm", name, state, layer="provider", **kw)


def outbox(at_ns: int, state: str, row: str = "ob-1", **kw: Any) -> Event:
    return ev(at_ns, "outbox", row, state, layer="workflow", **kw)


def brief(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.entity_id, f.severity) for f in findings]


# --- no finding ----------------------------------------------------------------------------


def test_no_evidence_at_all() -> None:
    assert find([], now_ns=T0) == []


def test_a_healthy_lifecycle_yields_nothing() -> None:
    events = [
        alloc(0, "requested"),
        alloc(1 * S, "provisioning", attrs={"provider": "aap", "occupancy": "provisioning"}),
        job(2 * S, "pending"),
        cr(3 * S, "Pending"),
        job(4 * S, "running"),
        cr(5 * S, "Running"),
        vm(30 * S, "running"),
        job(90 * S, "successful"),
        cr(95 * S, "Succeeded"),
        alloc(96 * S, "active", attrs={"occupancy": "allocated"}),
        outbox(96 * S, "created"),
        outbox(97 * S, "published"),
        alloc(H, "releasing"),
        alloc(H + 40 * S, "release_failed", attrs={"occupancy": "cleanup"}),
        alloc(H + 100 * S, "releasing"),
        alloc(H + 130 * S, "released", attrs={"occupancy": "free"}),
        vm(H + 131 * S, "deleted"),
        cr(H + 132 * S, "Deleting"),
    ]
    assert find(events, now_ns=T0 + 30 * 24 * H) == []


# --- thresholds: just under, at, just over, and critical past 4x ---------------------------

DEADLINES = FindingsConfig()


def _release_failed(age_ns: int) -> tuple[list[Event], int]:
    return [alloc(0, "release_failed", attrs={"occupancy": "cleanup"})], T0 + age_ns


def _job_overdue(age_ns: int) -> tuple[list[Event], int]:
    return [job(-5 * M, "pending"), job(0, "running")], T0 + age_ns


def _outbox(age_ns: int) -> tuple[list[Event], int]:
    return [outbox(0, "created"), outbox(10 * S, "pending")], T0 + age_ns


def _drift_to_now(age_ns: int) -> tuple[list[Event], int]:
    return [job(-M, "running"), cr(-M + S, "Running"), job(0, "canceled")], T0 + age_ns


def _drift_to_snapshot(age_ns: int) -> tuple[list[Event], int]:
    # Snapshots keep showing Running after the cancel; the latest one bounds the age.
    events = [job(-M, "running"), cr(-M, "Running"), job(0, "canceled"), cr(age_ns, "Running")]
    return events, T0 + 1000 * H


def _orphan(age_ns: int) -> tuple[list[Event], int]:
    return [job(-M, "running"), vm(-S, "running"), cr(0, "Deleting")], T0 + age_ns


@pytest.mark.parametrize(
    ("scenario", "rule", "threshold_s"),
    [
        pytest.param(
            _release_failed,
            "release_failed_stuck",
            DEADLINES.release_failed_deadline_s,
            id="release_failed",
        ),
        pytest.param(
            _job_overdue, "provision_job_overdue", DEADLINES.provision_job_deadline_s, id="job"
        ),
        pytest.param(
            _outbox, "outbox_unpublished", DEADLINES.outbox_publish_deadline_s, id="outbox"
        ),
        pytest.param(
            _drift_to_now, "projection_drift", DEADLINES.drift_threshold_s, id="drift-to-now"
        ),
        pytest.param(
            _drift_to_snapshot,
            "projection_drift",
            DEADLINES.drift_threshold_s,
            id="drift-to-snapshot",
        ),
        pytest.param(_orphan, "vm_orphaned", DEADLINES.orphan_grace_s, id="orphan"),
    ],
)
@pytest.mark.parametrize(
    ("factor", "extra_ns", "severity"),
    [
        (1, -1, None),
        (1, 0, None),  # exactly the threshold: not (yet) a finding
        (1, 1, "warning"),
        (4, 0, "warning"),
        (4, 1, "critical"),
    ],
)
def test_thresholds(
    scenario: Any,
    rule: str,
    threshold_s: float,
    factor: int,
    extra_ns: int,
    severity: str | None,
) -> None:
    age_ns = factor * int(threshold_s) * S + extra_ns
    events, now_ns = scenario(age_ns)
    found = find(events, now_ns=now_ns)
    if severity is None:
        assert found == []
    else:
        assert [(f.rule, f.severity, f.since_ns, f.age_s) for f in found] == [
            (rule, severity, T0, age_ns / 1e9)
        ]
        assert found[0].threshold_s == threshold_s


def test_thresholds_come_from_the_config() -> None:
    events = [alloc(0, "release_failed", attrs={"occupancy": "cleanup"})]
    config = FindingsConfig(release_failed_deadline_s=60.0, critical_factor=2.0)
    assert brief(find(events, now_ns=T0 + 60 * S, config=config)) == []
    assert brief(find(events, now_ns=T0 + 61 * S, config=config)) == [
        ("release_failed_stuck", "a-9", "warning")
    ]
    assert brief(find(events, now_ns=T0 + 121 * S, config=config)) == [
        ("release_failed_stuck", "a-9", "critical")
    ]


# --- release_failed_stuck ------------------------------------------------------------------


def test_release_failed_stuck_in_full() -> None:
    entered = alloc(
        0,
        "release_failed",
        attrs={"occupancy": "cleanup"},
        node_id="n-17",
        workflow_id="w-9",
        correlation_id="c-1",
    )
    retried = alloc(20 * M, "release_failed", node_id="n-17")
    (finding,) = find(
        [alloc(-M, "releasing"), entered, retried], now_ns=T0 + 3 * H + 12 * M + 5 * S
    )
    assert finding.as_dict() == {
        "kind": "stuck",
        "rule": "release_failed_stuck",
        "severity": "warning",
        "entity_kind": "allocation",
        "entity_id": "a-9",
        "since_ns": T0,
        "age_s": 11525.0,
        "threshold_s": 3600.0,
        "ids": {
            "node_id": "n-17",
            "correlation_id": "c-1",
            "allocation_id": "a-9",
            "workflow_id": "w-9",
        },
        "summary": "allocation a-9 has been release_failed with occupancy=cleanup for "
        "3h 12m 5s (deadline 1h); node n-17 stays fenced",
        "evidence": [entered.hash, retried.hash],
    }


@pytest.mark.parametrize(
    ("occupancy_events", "found"),
    [
        ([], False),  # occupancy never known: not judged
        (
            [ev(M, None, None, layer="api", allocation_id="a-9", attrs={"occupancy": "cleanup"})],
            True,
        ),
        (
            [ev(M, None, None, layer="node", allocation_id="a-8", attrs={"occupancy": "cleanup"})],
            False,
        ),
        (
            [
                ev(M, None, None, layer="api", allocation_id="a-9", attrs={"occupancy": "cleanup"}),
                ev(
                    2 * M,
                    None,
                    None,
                    layer="node",
                    allocation_id="a-9",
                    attrs={"occupancy": "free"},
                ),
            ],
            False,
        ),
        (
            [
                ev(-M, None, None, layer="api", allocation_id="a-9", attrs={"occupancy": "free"}),
                ev(
                    M, None, None, layer="node", allocation_id="a-9", attrs={"occupancy": "Cleanup"}
                ),
            ],
            True,
        ),
    ],
)
def test_occupancy_is_the_latest_known_from_any_event(
    occupancy_events: list[Event], found: bool
) -> None:
    events = [alloc(0, "release_failed"), *occupancy_events]
    assert bool(find(events, now_ns=T0 + 2 * H)) is found


def test_occupancy_on_a_later_record_is_evidence_and_names_the_node() -> None:
    entered = alloc(0, "release_failed")
    record = ev(
        M,
        None,
        None,
        layer="api",
        allocation_id="a-9",
        node_id="n-3",
        attrs={"occupancy": "cleanup"},
    )
    (finding,) = find([record, entered], now_ns=T0 + 2 * H)
    assert finding.evidence == (entered.hash, record.hash)
    assert finding.summary.endswith("(deadline 1h); node n-3 stays fenced")


@pytest.mark.parametrize(
    "later",
    [
        [alloc(10 * M, "releasing")],
        [alloc(10 * M, "releasing"), alloc(11 * M, "released")],
        [alloc(10 * M, "RELEASED")],
    ],
)
def test_release_failed_is_cleared_by_a_later_transition(later: list[Event]) -> None:
    events = [alloc(0, "release_failed", attrs={"occupancy": "cleanup"}), *later]
    assert find(events, now_ns=T0 + 5 * H) == []


def test_release_failed_without_node_says_nothing_of_fencing() -> None:
    (finding,) = find(
        [alloc(0, "release_failed", attrs={"occupancy": "cleanup"})], now_ns=T0 + 2 * H
    )
    assert finding.summary == (
        "allocation a-9 has been release_failed with occupancy=cleanup for 2h (deadline 1h)"
    )


# --- provision_job_overdue -----------------------------------------------------------------


def test_overdue_job_measured_from_its_start() -> None:
    created = job(0, "pending")
    started = job(H, "running")
    (finding,) = find([started, created], now_ns=T0 + 3 * H + 30 * M)
    assert (finding.since_ns, finding.age_s) == (T0 + H, 9000.0)
    assert finding.summary == (
        "AAP job 4711 has been running for 2h 30m since it started (deadline 2h)"
    )
    assert finding.evidence == (started.hash,)
    assert finding.ids == {"workflow_id": "w-9"}


def test_overdue_job_never_started_is_measured_from_creation() -> None:
    created = job(0, "new", job_id="eda:12")
    waiting = job(M, "pending", job_id="eda:12")
    (finding,) = find([created, waiting], now_ns=T0 + 2 * H + S)
    assert (finding.entity_id, finding.since_ns) == ("eda:12", T0)
    assert finding.summary == (
        "EDA job 12 has been pending for 2h 1s since it was created (deadline 2h)"
    )
    assert finding.evidence == (created.hash, waiting.hash)


def test_pending_then_running_counts_from_the_start_only() -> None:
    # Queued 3h, running 1h: the deadline is on the run (2h), so not overdue yet.
    events = [job(0, "pending"), job(3 * H, "running")]
    assert find(events, now_ns=T0 + 4 * H) == []


@pytest.mark.parametrize("final", ["successful", "failed", "error", "canceled", "completed"])
def test_finished_job_is_not_overdue(final: str) -> None:
    events = [job(0, "pending"), job(M, "running"), job(5 * H, final)]
    assert find(events, now_ns=T0 + 50 * H) == []


def test_job_without_provider_prefix() -> None:
    (finding,) = find([job(0, "running", job_id="4711")], now_ns=T0 + 3 * H)
    assert finding.summary.startswith("provider job 4711 has been running for 3h")


# --- outbox_unpublished --------------------------------------------------------------------


def test_outbox_row_never_published() -> None:
    created = outbox(0, "created", allocation_id="a-9")
    pending = outbox(2 * M, "pending")
    (finding,) = find([pending, created], now_ns=T0 + 7 * M)
    assert finding.as_dict() == {
        "kind": "stuck",
        "rule": "outbox_unpublished",
        "severity": "warning",
        "entity_kind": "outbox",
        "entity_id": "ob-1",
        "since_ns": T0,
        "age_s": 420.0,
        "threshold_s": 300.0,
        "ids": {"allocation_id": "a-9"},
        "summary": "outbox row ob-1 has been pending for 7m without being published (deadline 5m)",
        "evidence": [created.hash, pending.hash],
    }


@pytest.mark.parametrize(
    ("final", "found"), [("published", False), ("delivered", False), ("unpublished", True)]
)
def test_outbox_later_state_decides(final: str, found: bool) -> None:
    events = [outbox(0, "created"), outbox(M, final)]
    assert bool(find(events, now_ns=T0 + H)) is found


def test_outbox_republish_restarts_the_clock() -> None:
    events = [outbox(0, "created"), outbox(M, "published"), outbox(10 * M, "pending")]
    (finding,) = find(events, now_ns=T0 + 20 * M)
    assert (finding.since_ns, finding.age_s) == (T0 + 10 * M, 600.0)


# --- projection_drift ----------------------------------------------------------------------


def test_drift_cr_still_running_after_cancel_measured_to_now() -> None:
    canceled = job(0, "canceled")
    snapshot = cr(-10 * M, "Running")
    events = [job(-20 * M, "running"), snapshot, canceled]
    (finding,) = find(events, now_ns=T0 + 40 * M)
    assert finding.as_dict() == {
        "kind": "drift",
        "rule": "projection_drift",
        "severity": "critical",
        "entity_kind": "cr",
        "entity_id": "prov-a-9",
        "since_ns": T0,
        "age_s": 2400.0,
        "threshold_s": 300.0,
        "ids": {"allocation_id": "a-9", "workflow_id": "w-9"},
        "summary": "CR prov-a-9 still says Running 40m after AAP job 4711 was canceled "
        "(no CR update since, measured to now; threshold 5m)",
        "evidence": [canceled.hash, snapshot.hash],
    }


def test_drift_measured_to_the_latest_snapshot_that_disagrees() -> None:
    canceled = job(0, "canceled")
    last = cr(25 * M, "Running")
    events = [job(-20 * M, "running"), cr(-10 * M, "Running"), canceled, cr(5 * M, "Running"), last]
    (finding,) = find(events, now_ns=T0 + 10 * H)
    assert (finding.since_ns, finding.age_s) == (T0, 1500.0)
    assert finding.summary == (
        "CR prov-a-9 still says Running 25m after AAP job 4711 was canceled "
        "(measured to its latest snapshot; threshold 5m)"
    )
    assert finding.evidence == (canceled.hash, last.hash)


def test_drift_cleared_when_the_cr_catches_up() -> None:
    events = [
        job(-20 * M, "running"),
        cr(-10 * M, "Running"),
        job(0, "canceled"),
        cr(H, "Canceled"),
    ]
    assert find(events, now_ns=T0 + 10 * H) == []


def test_drift_started_by_the_projection() -> None:
    # The CR regressed to Running while the job had long succeeded.
    regressed = cr(H, "Running")
    events = [job(0, "successful"), cr(M, "Succeeded"), regressed]
    (finding,) = find(events, now_ns=T0 + H + 10 * M)
    assert (finding.since_ns, finding.age_s) == (T0 + H, 600.0)
    assert finding.summary == (
        "CR prov-a-9 has said Running for 10m while AAP job 4711 is successful "
        "(no CR update since, measured to now; threshold 5m)"
    )


def test_drift_through_several_truth_states_keeps_its_start() -> None:
    pending = cr(S, "Pending")
    running = job(M, "running")
    successful = job(20 * M, "successful")
    (finding,) = find([job(0, "pending"), pending, running, successful], now_ns=T0 + 31 * M)
    assert (finding.since_ns, finding.age_s) == (T0 + M, 1800.0)
    assert finding.evidence == (running.hash, pending.hash, successful.hash)
    assert finding.summary.startswith(
        "CR prov-a-9 still says Pending 30m after AAP job 4711 was running (now successful)"
    )


@pytest.mark.parametrize(
    ("job_id", "job_state", "cr_state", "drifts"),
    [
        ("aap:1", "new", "Pending", False),
        ("aap:1", "pending", "Pending", False),
        ("aap:1", "waiting", "Pending", False),
        ("aap:1", "waiting", "Running", True),
        ("aap:1", "running", "Running", False),
        ("aap:1", "running", "running", False),  # case does not matter
        ("aap:1", "successful", "Succeeded", False),
        ("aap:1", "successful", "Running", True),
        ("aap:1", "failed", "Failed", False),
        ("aap:1", "error", "Failed", False),
        ("aap:1", "canceled", "Canceled", False),
        ("aap:1", "canceled", "Running", True),
        ("aap:1", "stopped", "Running", False),  # not an AAP state: not judged
        ("eda:1", "running", "Running", False),
        ("eda:1", "completed", "Succeeded", False),
        ("eda:1", "completed", "Running", True),
        ("eda:1", "failed", "Failed", False),
        ("eda:1", "stopped", "Canceled", False),
        ("eda:1", "stopped", "Running", True),
        ("eda:1", "successful", "Running", False),  # not an EDA state: not judged
        ("1", "stopped", "Running", True),  # provider unknown: either vocabulary
        ("1", "successful", "Succeeded", False),
        ("1", "exploded", "Running", False),  # unknown everywhere: not judged
    ],
)
def test_state_mapping(job_id: str, job_state: str, cr_state: str, drifts: bool) -> None:
    events = [job(0, job_state, job_id=job_id), cr(S, cr_state, job_id=job_id)]
    assert bool(find(events, now_ns=T0 + H)) is drifts


@pytest.mark.parametrize(
    ("job_id", "cr_job_id", "cr_ids", "matched"),
    [
        ("aap:4711", "aap:4711", {}, True),
        ("aap:4711", 4711, {}, True),  # bare id (as a JSON number) on the CR
        ("4711", "aap:4711", {}, True),  # bare id on the job
        ("AAP:4711", "aap:4711", {}, True),
        ("eda:4711", "aap:4711", {}, False),  # same number, other provider
        ("aap:4712", "aap:4711", {}, False),
        # No job_id: a shared workflow, else allocation.
        ("aap:4711", None, {"workflow_id": "w-9"}, True),
        ("aap:4711", None, {"workflow_id": "w-1", "allocation_id": "a-9"}, True),
        ("aap:4711", None, {"allocation_id": "a-9"}, True),
        ("aap:4711", None, {"workflow_id": "w-1", "allocation_id": "a-1"}, False),
    ],
)
def test_projection_finds_its_job(
    job_id: str, cr_job_id: Any, cr_ids: dict[str, str], matched: bool
) -> None:
    attrs = {} if cr_job_id is None else {"job_id": cr_job_id}
    projection = ev(S, "cr", "prov-a-9", "Running", layer="projection", attrs=attrs, **cr_ids)
    events = [job(0, "canceled", job_id=job_id, allocation_id="a-9"), projection]
    assert bool(find(events, now_ns=T0 + H)) is matched


def test_ambiguous_bare_job_id_is_not_judged() -> None:
    events = [
        job(0, "canceled", job_id="aap:12", workflow_id="w-1"),
        job(0, "stopped", job_id="eda:12", workflow_id="w-2"),
        cr(S, "Running", job_id="12", workflow_id="w-3", allocation_id="a-3"),
    ]
    assert find(events, now_ns=T0 + H) == []


def test_ambiguous_bare_job_id_settled_by_the_workflow() -> None:
    events = [
        job(0, "canceled", job_id="aap:12", workflow_id="w-1"),
        job(0, "running", job_id="eda:12", workflow_id="w-2"),
        cr(S, "Running", job_id="12", workflow_id="w-1"),
    ]
    assert [f.summary.split(" (")[0] for f in find(events, now_ns=T0 + H)] == [
        "CR prov-a-9 has said Running for 59m 59s while AAP job 12 is canceled"
    ]


def test_retried_workflow_projection_follows_the_newest_job() -> None:
    events = [
        job(0, "failed", job_id="aap:1"),
        job(M, "running", job_id="aap:2"),
        ev(2 * M, "cr", "prov-a-9", "Running", layer="projection", workflow_id="w-9"),
    ]
    assert find(events, now_ns=T0 + H) == []


def test_other_entity_kinds_are_not_judged() -> None:
    events = [
        ev(0, "request", "r-1", "pending", layer="api"),
        ev(0, "node", "n-17", "fenced", layer="node", attrs={"occupancy": "cleanup"}),
    ]
    assert find(events, now_ns=T0 + 100 * H) == []


def test_projection_without_a_job_is_not_judged() -> None:
    assert find([cr(0, "Running")], now_ns=T0 + 10 * H) == []


# --- vm_orphaned ---------------------------------------------------------------------------


def test_vm_orphaned_in_full() -> None:
    deletion = cr(0, None, attrs={"deleted": True}, correlation_id="c-7")
    alive = vm(-S, "running", node_id="n-4")
    events = [job(-M, "running"), cr(-M, "Running"), alive, deletion]
    (finding,) = find(events, now_ns=T0 + 15 * M)
    assert finding.as_dict() == {
        "kind": "orphan",
        "rule": "vm_orphaned",
        "severity": "warning",
        "entity_kind": "vm",
        "entity_id": "vm-1",
        "since_ns": T0,
        "age_s": 900.0,
        "threshold_s": 600.0,
        "ids": {
            "node_id": "n-4",
            "correlation_id": "c-7",
            "allocation_id": "a-9",
            "workflow_id": "w-9",
        },
        "summary": "VM vm-1 still exists (running) 15m after CR prov-a-9 was deleted "
        "during provisioning (grace 10m)",
        "evidence": [deletion.hash, alive.hash],
    }


@pytest.mark.parametrize(
    ("before", "found"),
    [
        # The job decides when known ...
        ([job(-M, "running")], True),
        ([job(-M, "pending")], True),
        ([job(-M, "successful")], False),
        ([job(-M, "canceled"), alloc(-M, "provisioning")], False),
        # ... else the allocation ...
        ([alloc(-M, "provisioning")], True),
        ([alloc(-M, "requested")], True),
        ([alloc(-M, "active")], False),
        # ... else the CR's own last state.
        ([cr(-M, "Running")], True),
        ([cr(-M, "Succeeded")], False),
        ([], False),  # nothing shows provisioning was under way
        # State after the deletion does not count.
        ([job(S, "running")], False),
    ],
)
def test_deleted_during_provisioning(before: list[Event], found: bool) -> None:
    events = [*before, vm(-S, "running"), cr(0, "Deleting")]
    assert bool(find(events, now_ns=T0 + H)) is found


@pytest.mark.parametrize(
    ("vm_events", "found"),
    [
        ([], False),
        ([vm(-S, "running")], True),
        ([vm(5 * M, "running")], True),  # created after the CR went
        ([vm(-S, "running"), vm(M, "deleted")], False),
        ([vm(-S, "running"), vm(M, "Destroyed")], False),
        ([vm(-S, "absent")], False),
        ([vm(-S, "running", allocation_id="a-1")], False),  # someone else's VM
        ([vm(-S, "running", allocation_id="a-1", workflow_id="w-9")], True),
    ],
)
def test_orphan_needs_a_vm_that_still_exists(vm_events: list[Event], found: bool) -> None:
    events = [job(-M, "running"), *vm_events, cr(0, "Deleting")]
    assert bool(find(events, now_ns=T0 + H)) is found


def test_a_vm_left_by_two_deleted_crs_is_one_finding() -> None:
    events = [
        job(-M, "running"),
        vm(-S, "running", workflow_id="w-9"),
        cr(0, "Deleting", name="prov-a-9"),
        cr(S, "Deleting", name="prov-a-9-retry", allocation_id="a-0"),
    ]
    assert [(f.entity_id, f.since_ns) for f in find(events, now_ns=T0 + H)] == [("vm-1", T0)]


def test_cr_recreated_after_deletion_clears_the_orphan() -> None:
    events = [job(-M, "running"), vm(-S, "running"), cr(0, "Deleting"), cr(M, "Running")]
    assert [f.rule for f in find(events, now_ns=T0 + H)] == []


# --- several entities at once, any input order ---------------------------------------------


def _incident() -> list[Event]:
    return [
        # a-1: stuck in release_failed for 5h (critical past 4h), on node n-17.
        alloc(
            0, "release_failed", allocation_id="a-1", node_id="n-17", attrs={"occupancy": "cleanup"}
        ),
        # a-2: release_failed but then released: healthy.
        alloc(0, "release_failed", allocation_id="a-2", attrs={"occupancy": "cleanup"}),
        alloc(H, "released", allocation_id="a-2"),
        # a-3: release_failed for 30m only: under the deadline.
        alloc(
            4 * H + 30 * M, "release_failed", allocation_id="a-3", attrs={"occupancy": "cleanup"}
        ),
        # Job aap:7 running 3h; aap:8 done.
        job(2 * H, "running", job_id="aap:7", workflow_id="w-7"),
        job(2 * H, "running", job_id="aap:8", workflow_id="w-8"),
        job(3 * H, "successful", job_id="aap:8", workflow_id="w-8"),
        # CR of aap:8 still at Running 2h after the job succeeded: drift.
        cr(
            2 * H + M,
            "Running",
            name="prov-8",
            job_id="aap:8",
            workflow_id="w-8",
            allocation_id="a-8",
        ),
        # Outbox row unpublished for 25m (critical past 20m).
        outbox(4 * H + 35 * M, "created", row="ob-3"),
    ]


def test_several_entities_at_once_sorted_by_severity_then_age() -> None:
    assert brief(find(_incident(), now_ns=T0 + 5 * H)) == [
        ("release_failed_stuck", "a-1", "critical"),  # 5h, deadline 1h
        ("projection_drift", "prov-8", "critical"),  # 2h, threshold 5m
        ("outbox_unpublished", "ob-3", "critical"),  # 25m, deadline 5m
        ("provision_job_overdue", "aap:7", "warning"),  # 3h, deadline 2h
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_input_order_does_not_matter(seed: int) -> None:
    events = _incident()
    expected = find(events, now_ns=T0 + 5 * H)
    shuffled = list(events)
    random.Random(seed).shuffle(shuffled)
    assert find(shuffled, now_ns=T0 + 5 * H) == expected
    assert find(reversed(events), now_ns=T0 + 5 * H) == expected


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"drift_threshold_s": -1.0}, "drift_threshold_s must be a finite number >= 0, not -1.0"),
        ({"orphan_grace_s": float("nan")}, "orphan_grace_s must be a finite number >= 0, not nan"),
        ({"orphan_grace_s": float("inf")}, "orphan_grace_s must be a finite number >= 0"),
        (
            {"provision_job_deadline_s": "2h"},
            "provision_job_deadline_s must be a number of seconds",
        ),
        ({"outbox_publish_deadline_s": True}, "outbox_publish_deadline_s must be a number"),
        ({"critical_factor": 0.5}, "critical_factor must be >= 1, not 0.5"),
    ],
)
def test_malformed_config_is_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        FindingsConfig(**settings)


def test_zero_threshold_reports_any_age() -> None:
    config = FindingsConfig(outbox_publish_deadline_s=0)
    events = [outbox(0, "created")]
    assert find(events, now_ns=T0, config=config) == []
    assert brief(find(events, now_ns=T0 + 1, config=config)) == [
        ("outbox_unpublished", "ob-1", "critical")
    ]
