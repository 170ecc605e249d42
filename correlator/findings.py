"""Findings: lifecycles stuck in a bad state, projections drifting from their source of
truth, and VMs orphaned by a custom resource deleted mid-provisioning.

Pure core: :class:`~correlator.model.Event` values in (any order), :class:`Finding` values
out; no store, no I/O. Events are ordered by ``(ts_ns, hash)``, the store's order, so the
answer does not depend on the input order. State names are compared case-insensitively.

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

JSON shape of :meth:`Finding.as_dict`::

    {"kind": "stuck", "rule": "release_failed_stuck", "severity": "warning",
     "entity_kind": "allocation", "entity_id": "a-9",
     "since_ns": 1700000000000000000, "age_s": 11520.0, "threshold_s": 3600.0,
     "ids": {"allocation_id": "a-9", "node_id": "n-17"},
     "summary": "allocation a-9 has been release_failed with occupancy=cleanup for 3h 12m
                 (deadline 1h); node n-17 stays fenced",
     "evidence": [8061926422360573214, -2305843009213693952]}

``ids`` holds the identifiers of :data:`~correlator.model.IDENTIFIER_KEYS` known for the
entity (latest value wins); ``evidence`` the content hashes of the events that prove the
finding: first the one that entered the bad state, then, oldest first, the latest that show
it unchanged (for ``release_failed_stuck`` also the latest that said ``occupancy=cleanup``;
for drift, the job's latest and the projection's latest).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from correlator.errors import QueryError
from correlator.model import IDENTIFIER_KEYS, Event

__all__ = [
    "ACTIVE_JOB_STATES",
    "FINISHED_PROJECTION_STATES",
    "PROJECTION_STATES",
    "PROVISIONING_STATES",
    "UNPUBLISHED_STATES",
    "VM_GONE_STATES",
    "Finding",
    "FindingsConfig",
    "find",
]

#: Provider-job states that are not finished: AAP new/pending/waiting/running, EDA
#: pending/starting/running.
ACTIVE_JOB_STATES: Final = frozenset({"new", "pending", "waiting", "starting", "running"})

#: Outbox-row states that mean "not yet published".
UNPUBLISHED_STATES: Final = frozenset({"created", "pending", "unpublished"})

#: Allocation states during which a CR deletion counts as "during provisioning".
PROVISIONING_STATES: Final = frozenset({"requested", "pending", "provisioning"})

#: Projection states that show the projected job had finished.
FINISHED_PROJECTION_STATES: Final = frozenset({"succeeded", "failed", "canceled"})

#: VM states that mean the VM is gone.
VM_GONE_STATES: Final = frozenset({"deleted", "absent", "destroyed"})

#: What a projection (a CR's status) should show for each provider-job state. AAP job statuses
#: (``/api/v2/jobs/``) and EDA activation statuses; ``new`` (AAP) and ``starting`` (EDA) are
#: queued states, EDA's ``error`` a failure. A job of unknown provider is looked up in AAP's
#: table, then EDA's: the two never map the same name differently.
PROJECTION_STATES: Final[Mapping[str, Mapping[str, str]]] = {
    "aap": {
        "new": "Pending",
        "pending": "Pending",
        "waiting": "Pending",
        "running": "Running",
        "successful": "Succeeded",
        "failed": "Failed",
        "error": "Failed",
        "canceled": "Canceled",
    },
    "eda": {
        "pending": "Pending",
        "starting": "Pending",
        "running": "Running",
        "completed": "Succeeded",
        "failed": "Failed",
        "error": "Failed",
        "stopped": "Canceled",
    },
}

_SEVERITY_ORDER: Final = {"critical": 0, "warning": 1}
_CR_KINDS: Final = frozenset({"cr", "custom_resource", "customresource"})


@dataclass(frozen=True, slots=True)
class FindingsConfig:
    """Deadlines and thresholds, in seconds (a finding needs an age strictly greater).

    Attributes:
        release_failed_deadline_s: ``release_failed`` with ``occupancy=cleanup`` longer than this.
        provision_job_deadline_s: a provider job pending/waiting/running longer than this.
        outbox_publish_deadline_s: an outbox row unpublished longer than this.
        drift_threshold_s: a projection disagreeing with its source of truth longer than this.
        orphan_grace_s: a VM still existing this long after its CR was deleted.
        critical_factor: severity is critical past this multiple of the threshold.

    Raises:
        QueryError: a value is negative, not finite, or not a number; ``critical_factor`` < 1.
    """

    release_failed_deadline_s: float = 3600.0
    provision_job_deadline_s: float = 7200.0
    outbox_publish_deadline_s: float = 300.0
    drift_threshold_s: float = 300.0
    orphan_grace_s: float = 600.0
    critical_factor: float = 4.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise QueryError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise QueryError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.critical_factor < 1:
            raise QueryError(f"critical_factor must be >= 1, not {self.critical_factor!r}")


@dataclass(frozen=True, slots=True)
class Finding:
    """One stuck lifecycle, drifting projection or orphaned VM (see the module docstring)."""

    kind: str
    rule: str
    severity: str
    entity_kind: str
    entity_id: str
    since_ns: int
    age_s: float
    threshold_s: float
    summary: str
    ids: Mapping[str, str] = field(default_factory=dict)
    evidence: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The JSON-able form (the module docstring shows it)."""
        return {
            "kind": self.kind,
            "rule": self.rule,
            "severity": self.severity,
            "entity_kind": self.entity_kind,
            "entity_id": self.entity_id,
            "since_ns": self.since_ns,
            "age_s": self.age_s,
            "threshold_s": self.threshold_s,
            "ids": dict(self.ids),
            "summary": self.summary,
            "evidence": list(self.evidence),
        }


def find(
    events: Iterable[Event], *, now_ns: int, config: FindingsConfig = FindingsConfig()
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
    index = _Index(events)
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


def _order(event: Event) -> tuple[int, int]:
    return event.ts_ns, event.hash


def _state(event: Event) -> str:
    return (event.state_to or "").strip().lower()


def _transitions(events: Iterable[Event]) -> list[Event]:
    return [e for e in events if e.state_to]


def _trailing(events: Sequence[Event], bad: Callable[[Event], bool]) -> list[Event]:
    """The longest run at the end of ``events`` that are all bad."""
    run: list[Event] = []
    for event in reversed(events):
        if not bad(event):
            break
        run.append(event)
    run.reverse()
    return run


def _ids(*groups: Iterable[Event], **known: str | None) -> dict[str, str]:
    """Identifiers known for these events, the latest value of each key winning."""
    latest: dict[str, tuple[tuple[int, int], str]] = {}
    for group in groups:
        for event in group:
            for key in IDENTIFIER_KEYS:
                value = getattr(event, key)
                if value and (key not in latest or latest[key][0] <= _order(event)):
                    latest[key] = (_order(event), value)
    ids = {k: v for k, v in known.items() if v}
    ids.update((key, value) for key, (_, value) in latest.items())
    return {key: ids[key] for key in IDENTIFIER_KEYS if key in ids}


def _evidence(*events: Event | None) -> tuple[int, ...]:
    return tuple(dict.fromkeys(e.hash for e in events if e is not None))


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


_LINK_KEYS: Final = ("workflow_id", "allocation_id")


def _links(events: Iterable[Event]) -> set[tuple[str, str]]:
    """The (key, value) pairs of the workflow and allocation ids these events name."""
    return {(key, value) for e in events for key in _LINK_KEYS if (value := getattr(e, key))}


@dataclass
class _Job:
    entity_id: str
    provider: str | None
    bare_id: str
    events: list[Event]
    links: set[tuple[str, str]]

    @property
    def label(self) -> str:
        if self.provider:
            return f"{self.provider.upper()} job {self.bare_id}"
        return f"provider job {self.entity_id}"


def _split_job_id(raw: str) -> tuple[str | None, str]:
    """``aap:4711`` -> (``aap``, ``4711``); a bare id has no provider."""
    head, sep, tail = raw.partition(":")
    if sep and head.lower() in PROJECTION_STATES:
        return head.lower(), tail
    return None, raw


def _latest_attr(events: Sequence[Event], key: str) -> Any:
    for event in reversed(events):
        if event.attrs.get(key) is not None:
            return event.attrs[key]
    return None


class _Index:
    """The events grouped by the role their entity plays."""

    def __init__(self, events: Iterable[Event]) -> None:
        groups: dict[str, dict[tuple[str, str], list[Event]]] = defaultdict(dict)
        self.occupancy: dict[str, list[Event]] = defaultdict(list)
        for event in sorted(events, key=_order):
            kind, entity_id = event.entity_kind, event.entity_id
            role = None
            if kind and entity_id:
                # A VM may be a projection itself (a KubeVirt VirtualMachine): kind decides.
                if kind == "vm":
                    role = "vm"
                elif event.layer == "projection":
                    role = "projection"
                elif kind in ("allocation", "provider_job", "outbox"):
                    role = kind
            if role is not None:
                groups[role].setdefault((str(kind), str(entity_id)), []).append(event)
            allocation = entity_id if role == "allocation" else event.allocation_id
            if allocation and event.attrs.get("occupancy") is not None:
                self.occupancy[allocation].append(event)
        self.allocations = groups["allocation"]
        self.outboxes = groups["outbox"]
        self.projections = groups["projection"]
        self.vms = groups["vm"]
        self._job_of: dict[tuple[str, str], _Job | None] = {}
        # Indexes, so that matching stays linear in the number of entities.
        self.jobs_by_id: dict[str, list[_Job]] = defaultdict(list)
        self.jobs_by_link: dict[tuple[str, str], list[_Job]] = defaultdict(list)
        for (_, entity_id), job_events in groups["provider_job"].items():
            job = self._job(entity_id, job_events)
            self.jobs_by_id[job.bare_id].append(job)
            for link in job.links:
                self.jobs_by_link[link].append(job)
        self.vms_by_link: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for key, vm_events in self.vms.items():
            for link in _links(vm_events):
                self.vms_by_link[link].append(key)

    @property
    def jobs(self) -> list[_Job]:
        """Every provider job, each once."""
        return [job for jobs in self.jobs_by_id.values() for job in jobs]

    @staticmethod
    def _job(entity_id: str, events: list[Event]) -> _Job:
        prefix, bare = _split_job_id(entity_id)
        provider = _latest_attr(events, "provider")
        return _Job(
            entity_id=entity_id,
            provider=prefix or (str(provider).lower() if provider else None),
            bare_id=bare,
            events=events,
            links=_links(events),
        )

    def job_for(self, key: tuple[str, str]) -> _Job | None:
        """The provider job a projection shows, or None when unknown or ambiguous."""
        if key not in self._job_of:
            self._job_of[key] = self._match(self.projections[key])
        return self._job_of[key]

    def _match(self, projection: Sequence[Event]) -> _Job | None:
        ids = _ids(projection)
        links = {(key, ids[key]) for key in _LINK_KEYS if key in ids}
        job_id = _latest_attr(projection, "job_id")
        if job_id is not None:
            prefix, bare = _split_job_id(str(job_id))
            found = [
                j
                for j in self.jobs_by_id.get(bare, [])
                if prefix is None or j.provider in (prefix, None)
            ]
            if len(found) > 1:
                found = [j for j in found if j.links & links]
            return found[0] if len(found) == 1 else None
        for key in _LINK_KEYS:
            found = self.jobs_by_link.get((key, ids.get(key, "")), [])
            if found:
                # A retried workflow has several jobs; its projection follows the newest.
                return max(found, key=lambda j: _order(j.events[0]))
        return None


def _release_failed(index: _Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.release_failed_deadline_s
    for (kind, allocation), events in index.allocations.items():
        run = _trailing(_transitions(events), lambda e: _state(e) == "release_failed")
        occupancy = index.occupancy.get(allocation, [])
        if not run or not occupancy:
            continue
        if str(occupancy[-1].attrs["occupancy"]).lower() != "cleanup":
            continue
        age_ns = judge.over(run[0].ts_ns, deadline_s)
        if age_ns is None:
            continue
        ids = _ids(events, occupancy, allocation_id=allocation)
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
            evidence=_evidence(*sorted((run[0], occupancy[-1], run[-1]), key=_order)),
        )


def _overdue_jobs(index: _Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.provision_job_deadline_s
    for job in index.jobs:
        run = _trailing(_transitions(job.events), lambda e: _state(e) in ACTIVE_JOB_STATES)
        if not run:
            continue
        started = next((e for e in run if _state(e) == "running"), None)
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
            ids=_ids(job.events),
            summary=(
                f"{job.label} has been {run[-1].state_to} for {_human(age_ns / 1e9)} since it "
                f"{'started' if started else 'was created'} (deadline {_human(deadline_s)})"
            ),
            evidence=_evidence(since, run[-1]),
        )


def _unpublished(index: _Index, judge: _Judge) -> Iterable[Finding]:
    deadline_s = judge.config.outbox_publish_deadline_s
    for (kind, row), events in index.outboxes.items():
        run = _trailing(_transitions(events), lambda e: _state(e) in UNPUBLISHED_STATES)
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
            ids=_ids(events),
            summary=(
                f"outbox row {row} has been {run[-1].state_to} for {_human(age_ns / 1e9)} "
                f"without being published (deadline {_human(deadline_s)})"
            ),
            evidence=_evidence(run[0], run[-1]),
        )


def _expected(provider: str | None, job_state: str) -> str | None:
    table = PROJECTION_STATES.get(provider or "")
    tables = [table] if table is not None else list(PROJECTION_STATES.values())
    return next((t[job_state] for t in tables if job_state in t), None)


def _deleted(event: Event) -> bool:
    return event.attrs.get("deleted") in (True, "true") or _state(event) == "deleting"


def _label(kind: str) -> str:
    return "CR" if kind.lower() in _CR_KINDS else kind


def _drift(index: _Index, judge: _Judge) -> Iterable[Finding]:
    threshold_s = judge.config.drift_threshold_s
    for (kind, name), events in index.projections.items():
        job = index.job_for((kind, name))
        # A deleted projection shows nothing any more: vm_orphaned judges it instead.
        marked = [e for e in events if e.state_to or _deleted(e)]
        if not marked or _deleted(marked[-1]) or job is None:
            continue
        shown_events = [e for e in marked if not _deleted(e)]
        job_events = _transitions(job.events)
        merged = sorted(
            [(e, True) for e in job_events] + [(e, False) for e in shown_events],
            key=lambda pair: _order(pair[0]),
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
            expected = _expected(job.provider, _state(truth))
            if expected is None or expected.lower() == _state(shown):
                start = None
            elif start is None:
                start = (event, is_job, truth)
        if start is None or truth is None or shown is None:
            continue
        began, by_job, truth_then = start
        measured_to_now = _order(shown) <= _order(began)
        age_ns = judge.over(began.ts_ns, threshold_s, None if measured_to_now else shown.ts_ns)
        if age_ns is None:
            continue
        age = _human(age_ns / 1e9)
        subject = f"{_label(kind)} {name}"
        if by_job:
            head = f"{subject} still says {shown.state_to} {age} after {job.label} was "
            head += f"{truth_then.state_to}"
            if _state(truth_then) != _state(truth):
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
            ids=_ids(events, job.events),
            summary=f"{head} ({measure}; threshold {_human(threshold_s)})",
            evidence=_evidence(began, *sorted((truth, shown), key=_order)),
        )


def _state_at(events: Sequence[Event], moment: Event) -> str | None:
    """The state ``events`` were in when ``moment`` happened (``moment`` itself excluded)."""
    before = [e for e in events if _order(e) < _order(moment)]
    return _state(before[-1]) if before else None


def _provisioning_at(index: _Index, key: tuple[str, str], deletion: Event) -> bool:
    events = index.projections[key]
    job = index.job_for(key)
    if job is not None and (state := _state_at(_transitions(job.events), deletion)):
        return state in ACTIVE_JOB_STATES
    allocation = _ids(events).get("allocation_id")
    allocation_events = index.allocations.get(("allocation", allocation or ""), [])
    if state := _state_at(_transitions(allocation_events), deletion):
        return state in PROVISIONING_STATES
    shown = [e for e in _transitions(events) if not _deleted(e)]
    state = _state_at(shown, deletion)
    return state is not None and state not in FINISHED_PROJECTION_STATES


def _orphans(index: _Index, judge: _Judge) -> Iterable[Finding]:
    grace_s = judge.config.orphan_grace_s
    reported: set[tuple[str, str]] = set()
    for (kind, name), events in index.projections.items():
        # A deletion may be a snapshot without a status (only a deletionTimestamp).
        run = _trailing([e for e in events if e.state_to or _deleted(e)], _deleted)
        if not run or not _provisioning_at(index, (kind, name), run[0]):
            continue
        deletion = run[0]
        job = index.job_for((kind, name))
        linked = _links(events) | (job.links if job else set())
        candidates = sorted({vm for link in linked for vm in index.vms_by_link.get(link, [])})
        for vm_kind, vm in candidates:
            vm_events = index.vms[(vm_kind, vm)]
            vm_states = _transitions(vm_events)
            if not vm_states or _state(vm_states[-1]) in VM_GONE_STATES:
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
                ids=_ids(vm_events, events),
                summary=(
                    f"VM {vm} still exists ({vm_states[-1].state_to}) {_human(age_ns / 1e9)} "
                    f"after {_label(kind)} {name} was deleted during provisioning "
                    f"(grace {_human(grace_s)})"
                ),
                evidence=_evidence(deletion, vm_states[-1]),
            )
