"""Which events belong together, and which provider job a projection shows.

Separate from ``_rules`` because it answers a question every rule asks and none decides:
:class:`Index` groups events by the role their entity plays (allocation, provider job, outbox
row, projection, VM) and, through indexes that keep matching linear in the number of
entities, finds a projection's job by ``attrs["job_id"]`` (``aap:4711``, ``eda:12`` or bare
``4711``; prefix and bare id compared separately), else by a shared ``workflow_id``, else
``allocation_id``, taking the newest such job. :func:`expected_state` maps a job's state to
what its projection should show (:data:`~correlator.findings._types.PROJECTION_STATES`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from correlator.findings._types import PROJECTION_STATES
from correlator.model import IDENTIFIER_KEYS, Event, state_name

__all__ = [
    "Index",
    "Job",
    "expected_state",
    "identifiers",
    "is_deletion",
    "links_of",
    "order_key",
    "state_at",
    "state_of",
    "trailing",
    "transitions",
]


def order_key(event: Event) -> tuple[int, int]:
    """The store's order of events, ``(ts_ns, hash)``: a sort key independent of input order."""
    return event.ts_ns, event.hash


def state_of(event: Event) -> str:
    """The state an event moved to, lower-cased and stripped; ``""`` for no transition."""
    return state_name(event.state_to)


def transitions(events: Iterable[Event]) -> list[Event]:
    """The events that are transitions (they have a ``state_to``), in their order."""
    return [e for e in events if e.state_to]


def trailing(events: Sequence[Event], bad: Callable[[Event], bool]) -> list[Event]:
    """The longest run at the end of ``events`` that are all bad.

    Args:
        events: in the store's order.
        bad: what makes an event part of the run.

    Returns:
        The run, in order; empty when the last event is not bad.
    """
    run: list[Event] = []
    for event in reversed(events):
        if not bad(event):
            break
        run.append(event)
    run.reverse()
    return run


def identifiers(*groups: Iterable[Event], **known: str | None) -> dict[str, str]:
    """Identifiers known for these events, the latest value of each key winning.

    Args:
        groups: events of one or more entities.
        known: identifiers known already (``allocation_id=...``); an event's value wins.

    Returns:
        Identifier to value, in the order of :data:`~correlator.model.IDENTIFIER_KEYS`.
    """
    latest: dict[str, tuple[tuple[int, int], str]] = {}
    for group in groups:
        for event in group:
            for key in IDENTIFIER_KEYS:
                value = getattr(event, key)
                if value and (key not in latest or latest[key][0] <= order_key(event)):
                    latest[key] = (order_key(event), value)
    ids = {k: v for k, v in known.items() if v}
    ids.update((key, value) for key, (_, value) in latest.items())
    return {key: ids[key] for key in IDENTIFIER_KEYS if key in ids}


def expected_state(provider: str | None, job_state: str) -> str | None:
    """What a projection should show while its job is in ``job_state``.

    Args:
        provider: ``aap``, ``eda`` or None (unknown: AAP's table, then EDA's).
        job_state: the job's state, lower-cased.

    Returns:
        The projection state from :data:`~correlator.findings._types.PROJECTION_STATES`, or
        None when the table does not know the job's state (not judged).
    """
    table = PROJECTION_STATES.get(provider or "")
    tables = [table] if table is not None else list(PROJECTION_STATES.values())
    return next((t[job_state] for t in tables if job_state in t), None)


def is_deletion(event: Event) -> bool:
    """Whether the event deletes its entity (``attrs["deleted"]`` or state ``Deleting``)."""
    return event.attrs.get("deleted") in (True, "true") or state_of(event) == "deleting"


def state_at(events: Sequence[Event], moment: Event) -> str | None:
    """The state ``events`` were in when ``moment`` happened (``moment`` itself excluded)."""
    before = [e for e in events if order_key(e) < order_key(moment)]
    return state_of(before[-1]) if before else None


_LINK_KEYS: Final = ("workflow_id", "allocation_id")


def links_of(events: Iterable[Event]) -> set[tuple[str, str]]:
    """The (key, value) pairs of the workflow and allocation ids these events name."""
    return {(key, value) for e in events for key in _LINK_KEYS if (value := getattr(e, key))}


@dataclass
class Job:
    """A provider job: its events, its provider (when known) and the ids that link it."""

    entity_id: str
    provider: str | None
    bare_id: str
    events: list[Event]
    links: set[tuple[str, str]]

    @property
    def label(self) -> str:
        """``AAP job 4711`` for summaries; ``provider job ID`` when the provider is unknown."""
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


class Index:
    """The events grouped by the role their entity plays."""

    def __init__(self, events: Iterable[Event]) -> None:
        groups: dict[str, dict[tuple[str, str], list[Event]]] = defaultdict(dict)
        self.occupancy: dict[str, list[Event]] = defaultdict(list)
        for event in sorted(events, key=order_key):
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
        self._job_of: dict[tuple[str, str], Job | None] = {}
        # Indexes, so that matching stays linear in the number of entities.
        self.jobs_by_id: dict[str, list[Job]] = defaultdict(list)
        self.jobs_by_link: dict[tuple[str, str], list[Job]] = defaultdict(list)
        for (_, entity_id), job_events in groups["provider_job"].items():
            job = self._job(entity_id, job_events)
            self.jobs_by_id[job.bare_id].append(job)
            for link in job.links:
                self.jobs_by_link[link].append(job)
        self.vms_by_link: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for key, vm_events in self.vms.items():
            for link in links_of(vm_events):
                self.vms_by_link[link].append(key)

    @property
    def jobs(self) -> list[Job]:
        """Every provider job, each once."""
        return [job for jobs in self.jobs_by_id.values() for job in jobs]

    @staticmethod
    def _job(entity_id: str, events: list[Event]) -> Job:
        prefix, bare = _split_job_id(entity_id)
        provider = _latest_attr(events, "provider")
        return Job(
            entity_id=entity_id,
            provider=prefix or (str(provider).lower() if provider else None),
            bare_id=bare,
            events=events,
            links=links_of(events),
        )

    def job_for(self, key: tuple[str, str]) -> Job | None:
        """The provider job a projection shows, or None when unknown or ambiguous."""
        if key not in self._job_of:
            self._job_of[key] = self._match(self.projections[key])
        return self._job_of[key]

    def _match(self, projection: Sequence[Event]) -> Job | None:
        ids = identifiers(projection)
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
                return max(found, key=lambda j: order_key(j.events[0]))
        return None
