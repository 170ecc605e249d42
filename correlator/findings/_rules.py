"""The findings' rules: what each one looks for, from when it counts, and what it must read.

Separate from ``_matching`` (which events belong together, which job a projection shows):
this module decides what is wrong with them.

Rules (the latest state of an entity decides; a later transition out of the bad state clears
the finding; events without ``state_to`` are not transitions):

- ``release_failed_stuck`` (stuck): an ``allocation`` whose latest transition is
  ``release_failed`` and whose latest known ``attrs["occupancy"]`` (on any event for that
  allocation, whichever layer said it last) is ``cleanup``. Since: the first transition of the
  trailing run of ``release_failed`` transitions.
- ``provision_job_overdue`` (stuck): a ``provider_job`` whose latest state is one of
  :data:`ACTIVE_JOB_STATES`. Since: its first ``running`` transition of that run (it
  started), else the first transition of the run (it was created).
- ``outbox_unpublished`` (stuck): an ``outbox`` row whose latest state is one of
  :data:`UNPUBLISHED_STATES`. Since: the first transition of that run. Other states
  (``published``, ``delivered``, anything else) are not judged.
- ``projection_drift`` (drift): a projection (``layer="projection"``, not deleted) whose
  state differs from :data:`PROJECTION_STATES` of its provider job's state. The job is found
  by ``attrs["job_id"]`` (``aap:4711``, ``eda:12`` or bare ``4711``) against the job's
  ``entity_id`` (prefix and bare id compared separately); without ``job_id``, by a shared
  ``workflow_id``, else ``allocation_id``, taking the newest such job. An ambiguous job id
  (``12`` naming both ``aap:12`` and ``eda:12`` with no shared id to settle it) or a job
  state absent from the table is not judged. Since: the first moment both sides were known
  and disagreed, in the current unbroken run of disagreement (usually the job's change).
  Age: to the projection's latest event if that came later (its latest snapshot still
  disagrees), else to ``now_ns`` (it never updated since); the summary says which.
- ``vm_orphaned`` (orphan): a projection whose latest event is a deletion (``attrs["deleted"]``
  true or state ``Deleting``) made while provisioning was under way (judged, in this order,
  by its provider job's state being in :data:`ACTIVE_JOB_STATES`, else the allocation's state
  being in :data:`PROVISIONING_STATES`, else the projection's previous state not being in
  :data:`FINISHED_PROJECTION_STATES`), and an entity of kind ``vm`` (any layer) sharing a
  ``workflow_id`` or ``allocation_id`` with the projection or its job, whose latest state is
  not in :data:`VM_GONE_STATES`. The finding is about the VM. Since: the deletion; age: to
  ``now_ns``.

Each rule is one :class:`~correlator.findings._rule.Rule` in :data:`RULES`, with its threshold,
its judgement (a function below) and its reach (what the store must read for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from correlator.findings._judge import Judge, evidence, human, label
from correlator.findings._matching import (
    Index,
    expected_state,
    identifiers,
    is_deletion,
    links_of,
    order_key,
    state_at,
    state_of,
    trailing,
    transitions,
)
from correlator.findings._rule import Reads, Rule
from correlator.findings._types import (
    ACTIVE_JOB_STATES,
    FINISHED_PROJECTION_STATES,
    PROVISIONING_STATES,
    UNPUBLISHED_STATES,
    VM_GONE_STATES,
    Finding,
)
from correlator.model import Event

__all__ = ["RULES"]


def _release_failed(index: Index, judge: Judge) -> Iterable[Finding]:
    for (kind, allocation), events in index.allocations.items():
        run = trailing(transitions(events), lambda e: state_of(e) == "release_failed")
        occupancy = index.occupancy.get(allocation, [])
        if not run or not occupancy:
            continue
        if str(occupancy[-1].attrs["occupancy"]).lower() != "cleanup":
            continue
        age_ns = judge.over(run[0].ts_ns)
        if age_ns is None:
            continue
        ids = identifiers(events, occupancy, allocation_id=allocation)
        fenced = f"; node {ids['node_id']} stays fenced" if "node_id" in ids else ""
        yield judge.make(
            entity=(kind, allocation),
            since_ns=run[0].ts_ns,
            age_ns=age_ns,
            ids=ids,
            summary=(
                f"allocation {allocation} has been release_failed with occupancy=cleanup for "
                f"{human(age_ns / 1e9)} (deadline {human(judge.threshold_s)}){fenced}"
            ),
            # Entry into the state, the occupancy that makes it stuck, the latest repeat.
            evidence=evidence(*sorted((run[0], occupancy[-1], run[-1]), key=order_key)),
        )


def _overdue_jobs(index: Index, judge: Judge) -> Iterable[Finding]:
    for job in index.jobs:
        run = trailing(transitions(job.events), lambda e: state_of(e) in ACTIVE_JOB_STATES)
        if not run:
            continue
        started = next((e for e in run if state_of(e) == "running"), None)
        since = started or run[0]
        age_ns = judge.over(since.ts_ns)
        if age_ns is None:
            continue
        yield judge.make(
            entity=("provider_job", job.entity_id),
            since_ns=since.ts_ns,
            age_ns=age_ns,
            ids=identifiers(job.events),
            summary=(
                f"{job.label} has been {run[-1].state_to} for {human(age_ns / 1e9)} since it "
                f"{'started' if started else 'was created'} (deadline {human(judge.threshold_s)})"
            ),
            evidence=evidence(since, run[-1]),
        )


def _unpublished(index: Index, judge: Judge) -> Iterable[Finding]:
    for (kind, row), events in index.outboxes.items():
        run = trailing(transitions(events), lambda e: state_of(e) in UNPUBLISHED_STATES)
        if not run:
            continue
        age_ns = judge.over(run[0].ts_ns)
        if age_ns is None:
            continue
        yield judge.make(
            entity=(kind, row),
            since_ns=run[0].ts_ns,
            age_ns=age_ns,
            ids=identifiers(events),
            summary=(
                f"outbox row {row} has been {run[-1].state_to} for {human(age_ns / 1e9)} "
                f"without being published (deadline {human(judge.threshold_s)})"
            ),
            evidence=evidence(run[0], run[-1]),
        )


def _drift(index: Index, judge: Judge) -> Iterable[Finding]:
    for (kind, name), events in index.projections.items():
        job = index.job_for((kind, name))
        # A deleted projection shows nothing any more: vm_orphaned judges it instead.
        marked = [e for e in events if e.state_to or is_deletion(e)]
        if not marked or is_deletion(marked[-1]) or job is None:
            continue
        shown_events = [e for e in marked if not is_deletion(e)]
        job_events = transitions(job.events)
        merged = sorted(
            [(e, True) for e in job_events] + [(e, False) for e in shown_events],
            key=lambda pair: order_key(pair[0]),
        )
        truth: Event | None = None
        shown: Event | None = None
        start: tuple[Event, bool, Event] | None = None
        for event, is_job in merged:
            if is_job:
                truth = event
            else:
                shown = event
            if truth is None or shown is None:
                continue
            expected = expected_state(job.provider, state_of(truth))
            if expected is None or expected.lower() == state_of(shown):
                start = None
            elif start is None:
                start = (event, is_job, truth)
        if start is None or truth is None or shown is None:
            continue
        began, by_job, truth_then = start
        measured_to_now = order_key(shown) <= order_key(began)
        age_ns = judge.over(began.ts_ns, None if measured_to_now else shown.ts_ns)
        if age_ns is None:
            continue
        age = human(age_ns / 1e9)
        subject = f"{label(kind)} {name}"
        if by_job:
            head = f"{subject} still says {shown.state_to} {age} after {job.label} was "
            head += f"{truth_then.state_to}"
            if state_of(truth_then) != state_of(truth):
                head += f" (now {truth.state_to})"
        else:
            head = f"{subject} has said {shown.state_to} for {age} while {job.label} is "
            head += f"{truth.state_to}"
        measure = (
            f"no {label(kind)} update since, measured to now"
            if measured_to_now
            else "measured to its latest snapshot"
        )
        yield judge.make(
            entity=(kind, name),
            since_ns=began.ts_ns,
            age_ns=age_ns,
            ids=identifiers(events, job.events),
            summary=f"{head} ({measure}; threshold {human(judge.threshold_s)})",
            evidence=evidence(began, *sorted((truth, shown), key=order_key)),
        )


def _provisioning_at(index: Index, key: tuple[str, str], deletion: Event) -> bool:
    events = index.projections[key]
    job = index.job_for(key)
    if job is not None and (state := state_at(transitions(job.events), deletion)):
        return state in ACTIVE_JOB_STATES
    allocation = identifiers(events).get("allocation_id")
    allocation_events = index.allocations.get(("allocation", allocation or ""), [])
    if state := state_at(transitions(allocation_events), deletion):
        return state in PROVISIONING_STATES
    shown = [e for e in transitions(events) if not is_deletion(e)]
    state = state_at(shown, deletion)
    return state is not None and state not in FINISHED_PROJECTION_STATES


def _orphans(index: Index, judge: Judge) -> Iterable[Finding]:
    reported: set[tuple[str, str]] = set()
    for (kind, name), events in index.projections.items():
        # A deletion may be a snapshot without a status (only a deletionTimestamp).
        run = trailing([e for e in events if e.state_to or is_deletion(e)], is_deletion)
        if not run or not _provisioning_at(index, (kind, name), run[0]):
            continue
        deletion = run[0]
        job = index.job_for((kind, name))
        linked = links_of(events) | (job.links if job else set())
        candidates = sorted({vm for link in linked for vm in index.vms_by_link.get(link, [])})
        for vm_kind, vm in candidates:
            vm_events = index.vms[(vm_kind, vm)]
            vm_states = transitions(vm_events)
            if not vm_states or state_of(vm_states[-1]) in VM_GONE_STATES:
                continue
            age_ns = judge.over(deletion.ts_ns)
            if age_ns is None or (vm_kind, vm) in reported:
                continue
            reported.add((vm_kind, vm))
            yield judge.make(
                entity=(vm_kind, vm),
                since_ns=deletion.ts_ns,
                age_ns=age_ns,
                ids=identifiers(vm_events, events),
                summary=(
                    f"VM {vm} still exists ({vm_states[-1].state_to}) {human(age_ns / 1e9)} "
                    f"after {label(kind)} {name} was deleted during provisioning "
                    f"(grace {human(judge.threshold_s)})"
                ),
                evidence=evidence(deletion, vm_states[-1]),
            )


#: Every rule, in the order :func:`~correlator.findings.find` runs them (the findings are
#: sorted afterwards, so the order decides nothing else).
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        name="release_failed_stuck",
        kind="stuck",
        threshold="release_failed_deadline_s",
        default_s=3600.0,
        describes="Seconds an allocation may stay ``release_failed`` with "
        "``occupancy=cleanup`` before it is a finding",
        judge=_release_failed,
        reach=(Reads.latest_in("allocation", {"release_failed"}, occupancy=True),),
    ),
    Rule(
        name="provision_job_overdue",
        kind="stuck",
        threshold="provision_job_deadline_s",
        default_s=7200.0,
        describes="Seconds a provider job may stay pending, waiting or running",
        judge=_overdue_jobs,
        reach=(Reads.latest_in("provider_job", ACTIVE_JOB_STATES),),
    ),
    Rule(
        name="outbox_unpublished",
        kind="stuck",
        threshold="outbox_publish_deadline_s",
        default_s=300.0,
        describes="Seconds an outbox row may stay unpublished",
        judge=_unpublished,
        reach=(Reads.latest_in("outbox", UNPUBLISHED_STATES),),
    ),
    Rule(
        name="projection_drift",
        kind="drift",
        threshold="drift_threshold_s",
        default_s=300.0,
        describes="Seconds a projection may disagree with its provider job",
        judge=_drift,
        # Which job a projection shows depends on every job.
        reach=(Reads.every("projection"), Reads.every("provider_job", when_projected=True)),
    ),
    Rule(
        name="vm_orphaned",
        kind="orphan",
        threshold="orphan_grace_s",
        default_s=600.0,
        describes="Seconds a VM may outlive the custom resource deleted while it was provisioned",
        judge=_orphans,
        # Any VM may share an identifier with a deleted projection; whether the deletion came
        # during provisioning may depend on the job or on the allocation it names.
        reach=(
            Reads.every("projection"),
            Reads.every("provider_job", when_projected=True),
            Reads.every("vm", when_projected=True),
            Reads.named_by_deleted_projection(),
        ),
    ),
)
