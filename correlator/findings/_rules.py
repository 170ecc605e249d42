"""The findings' rules: what each one looks for, from when it counts, and how it is judged.

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

Thresholds: a finding is raised when its age is *strictly greater* than its threshold; an age
equal to the threshold is not a finding. Ages and thresholds are compared in integer
nanoseconds (the threshold rounded to the nearest nanosecond). Severity is ``critical`` when
the age is strictly greater than ``critical_factor`` times the threshold, else ``warning``.
Findings are sorted critical first, then oldest first, then by rule and entity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

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
from correlator.findings._types import (
    ACTIVE_JOB_STATES,
    FINISHED_PROJECTION_STATES,
    PROVISIONING_STATES,
    UNPUBLISHED_STATES,
    VM_GONE_STATES,
    Finding,
    FindingsConfig,
)
from correlator.model import Event

__all__ = ["find"]

_SEVERITY_ORDER: Final = {"critical": 0, "warning": 1}
_CR_KINDS: Final = frozenset({"cr", "custom_resource", "customresource"})
#: ``find``'s default: a frozen dataclass, so one shared instance is safe.
_DEFAULT_CONFIG: Final = FindingsConfig()


def find(
    events: Iterable[Event], *, now_ns: int, config: FindingsConfig = _DEFAULT_CONFIG
) -> list[Finding]:
    """Every finding the events prove at ``now_ns``.

    Args:
        events: lifecycle evidence in any order (entity transitions, provider and projection
            events, records carrying ``occupancy``).
        now_ns: the reference time, nanoseconds since the UNIX epoch, UTC.
        config: deadlines and thresholds.

    Returns:
        Findings, critical first, then oldest first.
    """
    index = Index(events)
    judge = _Judge(now_ns, config)
    found = [
        *_release_failed(index, judge),
        *_overdue_jobs(index, judge),
        *_unpublished(index, judge),
        *_drift(index, judge),
        *_orphans(index, judge),
    ]
    found.sort(
        key=lambda f: (_SEVERITY_ORDER[f.severity], -f.age_s, f.rule, f.entity_kind, f.entity_id)
    )
    return found


def _human(seconds: float) -> str:
    """``3h 12m``: whole units, zero units left out."""
    if 0 < seconds < 1:
        return f"{seconds:g}s"
    rest = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"


def _evidence(*events: Event | None) -> tuple[int, ...]:
    return tuple(dict.fromkeys(e.hash for e in events if e is not None))


def _label(kind: str) -> str:
    return "CR" if kind.lower() in _CR_KINDS else kind


class _Judge:
    """Applies the threshold rule and builds findings."""

    def __init__(self, now_ns: int, config: FindingsConfig) -> None:
        self.now_ns = now_ns
        self.config = config

    def over(self, since_ns: int, threshold_s: float, end_ns: int | None = None) -> int | None:
        """The age in ns when strictly greater than the threshold, else None."""
        age_ns = (self.now_ns if end_ns is None else end_ns) - since_ns
        return age_ns if age_ns > round(threshold_s * 1e9) else None

    def make(
        self,
        *,
        kind: str,
        rule: str,
        entity: tuple[str, str],
        since_ns: int,
        age_ns: int,
        threshold_s: float,
        ids: dict[str, str],
        summary: str,
        evidence: tuple[int, ...],
    ) -> Finding:
        critical = age_ns > round(threshold_s * self.config.critical_factor * 1e9)
        return Finding(
            kind=kind,
            rule=rule,
            severity="critical" if critical else "warning",
            entity_kind=entity[0],
            entity_id=entity[1],
            since_ns=since_ns,
            age_s=age_ns / 1e9,
            threshold_s=threshold_s,
            summary=summary,
            ids=ids,
            evidence=evidence,
        )


def _release_failed(index: Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.release_failed_deadline_s
    for (kind, allocation), events in index.allocations.items():
        run = trailing(transitions(events), lambda e: state_of(e) == "release_failed")
        occupancy = index.occupancy.get(allocation, [])
        if not run or not occupancy:
            continue
        if str(occupancy[-1].attrs["occupancy"]).lower() != "cleanup":
            continue
        age_ns = judge.over(run[0].ts_ns, deadline_s)
        if age_ns is None:
            continue
        ids = identifiers(events, occupancy, allocation_id=allocation)
        fenced = f"; node {ids['node_id']} stays fenced" if "node_id" in ids else ""
        yield judge.make(
            kind="stuck",
            rule="release_failed_stuck",
            entity=(kind, allocation),
            since_ns=run[0].ts_ns,
            age_ns=age_ns,
            threshold_s=deadline_s,
            ids=ids,
            summary=(
                f"allocation {allocation} has been release_failed with occupancy=cleanup for "
                f"{_human(age_ns / 1e9)} (deadline {_human(deadline_s)}){fenced}"
            ),
            # Entry into the state, the occupancy that makes it stuck, the latest repeat.
            evidence=_evidence(*sorted((run[0], occupancy[-1], run[-1]), key=order_key)),
        )


def _overdue_jobs(index: Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.provision_job_deadline_s
    for job in index.jobs:
        run = trailing(transitions(job.events), lambda e: state_of(e) in ACTIVE_JOB_STATES)
        if not run:
            continue
        started = next((e for e in run if state_of(e) == "running"), None)
        since = started or run[0]
        age_ns = judge.over(since.ts_ns, deadline_s)
        if age_ns is None:
            continue
        yield judge.make(
            kind="stuck",
            rule="provision_job_overdue",
            entity=("provider_job", job.entity_id),
            since_ns=since.ts_ns,
            age_ns=age_ns,
            threshold_s=deadline_s,
            ids=identifiers(job.events),
            summary=(
                f"{job.label} has been {run[-1].state_to} for {_human(age_ns / 1e9)} since it "
                f"{'started' if started else 'was created'} (deadline {_human(deadline_s)})"
            ),
            evidence=_evidence(since, run[-1]),
        )


def _unpublished(index: Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.outbox_publish_deadline_s
    for (kind, row), events in index.outboxes.items():
        run = trailing(transitions(events), lambda e: state_of(e) in UNPUBLISHED_STATES)
        if not run:
            continue
        age_ns = judge.over(run[0].ts_ns, deadline_s)
        if age_ns is None:
            continue
        yield judge.make(
            kind="stuck",
            rule="outbox_unpublished",
            entity=(kind, row),
            since_ns=run[0].ts_ns,
            age_ns=age_ns,
            threshold_s=deadline_s,
            ids=identifiers(events),
            summary=(
                f"outbox row {row} has been {run[-1].state_to} for {_human(age_ns / 1e9)} "
                f"without being published (deadline {_human(deadline_s)})"
            ),
            evidence=_evidence(run[0], run[-1]),
        )


def _drift(index: Index, judge: _Judge) -> Iterable[Finding]:
    threshold_s = judge.config.drift_threshold_s
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
        age_ns = judge.over(began.ts_ns, threshold_s, None if measured_to_now else shown.ts_ns)
        if age_ns is None:
            continue
        age = _human(age_ns / 1e9)
        subject = f"{_label(kind)} {name}"
        if by_job:
            head = f"{subject} still says {shown.state_to} {age} after {job.label} was "
            head += f"{truth_then.state_to}"
            if state_of(truth_then) != state_of(truth):
                head += f" (now {truth.state_to})"
        else:
            head = f"{subject} has said {shown.state_to} for {age} while {job.label} is "
            head += f"{truth.state_to}"
        measure = (
            f"no {_label(kind)} update since, measured to now"
            if measured_to_now
            else "measured to its latest snapshot"
        )
        yield judge.make(
            kind="drift",
            rule="projection_drift",
            entity=(kind, name),
            since_ns=began.ts_ns,
            age_ns=age_ns,
            threshold_s=threshold_s,
            ids=identifiers(events, job.events),
            summary=f"{head} ({measure}; threshold {_human(threshold_s)})",
            evidence=_evidence(began, *sorted((truth, shown), key=order_key)),
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


def _orphans(index: Index, judge: _Judge) -> Iterable[Finding]:
    grace_s = judge.config.orphan_grace_s
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
            age_ns = judge.over(deletion.ts_ns, grace_s)
            if age_ns is None or (vm_kind, vm) in reported:
                continue
            reported.add((vm_kind, vm))
            yield judge.make(
                kind="orphan",
                rule="vm_orphaned",
                entity=(vm_kind, vm),
                since_ns=deletion.ts_ns,
                age_ns=age_ns,
                threshold_s=grace_s,
                ids=identifiers(vm_events, events),
                summary=(
                    f"VM {vm} still exists ({vm_states[-1].state_to}) {_human(age_ns / 1e9)} "
                    f"after {_label(kind)} {name} was deleted during provisioning "
                    f"(grace {_human(grace_s)})"
                ),
                evidence=_evidence(deletion, vm_states[-1]),
            )
