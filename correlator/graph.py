"""The identifier graph: which identifiers belong to one incident.

Evidence links identifiers: an API record carries a ``correlation_id`` and an
``allocation_id``; a workflow record an ``allocation_id`` and a ``workflow_id``; a node-agent
record a ``node_id``, a ``node_instance_id`` and, while it works on a task, the allocation.
Each *kind* of link (an ordered pair of identifier kinds) is classified from the data:

- ``1:1``  each value on either side meets one value on the other;
- ``1:n``  each value of the far side meets one value of the near side (children: the
  workflows of an allocation, the requests of an allocation);
- ``n:1``  the far side is shared (a parent: the node an allocation ran on);
- ``m:n``  both sides are shared.

Expansion from a seed follows ``1:1`` and ``1:n`` links: what it reaches belongs to the seed
alone. A parent reached through an ``n:1`` link is *not* expanded (a busy node would pull in
the whole fleet): it becomes a windowed parent, whose own events are included only inside
the incident's time window and only when they do not belong to a sibling. A place (a node,
a node instance) reached from a unit of work (a request, an allocation, a workflow run) is
such a parent whatever its link's class: that a node ran only this allocation in the store at
hand says nothing of the next one. ``m:n`` links are refused. Everything refused is reported
with the reason, and fan-out is capped.

Lookups are batched: before it reads the links of an identifier it has not seen yet, the
expansion hands every identifier waiting in its queue to ``prefetch`` (when given), so a store
can answer them with one query per identifier kind instead of one per identifier (a busy
node's expansion reaches hundreds of identifiers; a lookup costs ~2 ms at 10^7 events). The
order of expansion, and so its answer, is the same with or without it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from correlator.model import IDENTIFIER_KEYS

__all__ = ["PLACE_KEYS", "WORK_KEYS", "Expansion", "LinkUse", "Parent", "cardinality", "expand"]

Cardinality = Literal["1:1", "1:n", "n:1", "m:n"]

#: The identifiers of a unit of work (a request, an allocation, a workflow run), and of a
#: place the work runs on (a node, one installation of it): a place's events that name
#: another unit of work than the incident's belong to a sibling (:meth:`Parent.sibling_filters`).
WORK_KEYS: Final = ("correlation_id", "allocation_id", "workflow_id")
PLACE_KEYS: Final = ("node_id", "node_instance_id")
#: Values of one kind reachable from one identifier before the link counts as fan-out.
DEFAULT_MAX_FANOUT: Final = 50
#: Identifiers in one expansion at most.
DEFAULT_MAX_IDS: Final = 500

LinkCounts = Callable[[str, str], Mapping[str, Mapping[str, int]]]
#: Told which identifiers ``link_counts`` is about to be asked for, so that it can read them
#: in one go.
Prefetch = Callable[[Sequence[tuple[str, str]]], None]


def cardinality(near_to_far_max: int, far_to_near_max: int) -> Cardinality:
    """Classify the link kind near→far from the most far values one near value meets and the
    most near values one far value meets."""
    if far_to_near_max <= 1:
        return "1:1" if near_to_far_max <= 1 else "1:n"
    return "n:1" if near_to_far_max <= 1 else "m:n"


@dataclass(frozen=True, slots=True)
class LinkUse:
    """One link considered during expansion."""

    from_key: str
    from_value: str
    to_key: str
    to_values: tuple[str, ...]
    cardinality: Cardinality
    events: int
    followed: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": {self.from_key: self.from_value},
            "to_key": self.to_key,
            "to_values": list(self.to_values),
            "cardinality": self.cardinality,
            "events": self.events,
            "followed": self.followed,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Parent:
    """A shared identifier included only inside the time window, excluding siblings."""

    key: str
    value: str
    child_key: str
    child_values: tuple[str, ...]

    def sibling_filters(
        self, ids: Mapping[str, Sequence[str]], parents: Sequence[Parent] = ()
    ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """For a place (:data:`PLACE_KEYS`: a node, one installation of it), the identifiers
        of a unit of work (:data:`WORK_KEYS`) besides ``child_key`` whose every value on its
        events must be the incident's (in ``ids``, or a parent's value): an event of a shared
        node that names another allocation, workflow run or request belongs to a sibling,
        whichever kind of link reached the node. Nothing for a unit of work: the workflow
        runs of an allocation reached from one of its requests are its own doing, not a
        sibling's.

        Reached through a request, a node's records of its other allocations carry no
        request: filtered on ``correlation_id`` alone, they came in (an allocation retried
        on a second node anywhere in the store makes allocation→node ``m:n``, and the node is
        then reached through a request instead).
        """
        if self.key not in PLACE_KEYS:
            return ()
        return tuple(
            (key, (*ids.get(key, ()), *(p.value for p in parents if p.key == key)))
            for key in WORK_KEYS
            if key != self.child_key
        )


@dataclass
class Expansion:
    """The identifiers of one incident and how they were found."""

    seed: tuple[str, str]
    ids: dict[str, list[str]] = field(default_factory=dict)
    parents: list[Parent] = field(default_factory=list)
    links: list[LinkUse] = field(default_factory=list)
    truncated: bool = False

    def add(self, key: str, value: str) -> bool:
        values = self.ids.setdefault(key, [])
        if value in values:
            return False
        values.append(value)
        return True

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.ids.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": {self.seed[0]: self.seed[1]},
            "ids": {k: sorted(v) for k, v in self.ids.items()},
            "parents": [
                {"key": p.key, "value": p.value, "excluding_other": p.child_key}
                for p in self.parents
            ],
            "followed": [link.as_dict() for link in self.links if link.followed],
            "refused": [link.as_dict() for link in self.links if not link.followed],
            "truncated": self.truncated,
        }


def expand(
    seed_key: str,
    seed_value: str,
    *,
    link_counts: LinkCounts,
    cardinalities: Mapping[tuple[str, str], tuple[int, int]],
    max_fanout: int = DEFAULT_MAX_FANOUT,
    max_ids: int = DEFAULT_MAX_IDS,
    prefetch: Prefetch | None = None,
) -> Expansion:
    """Expand a seed identifier through the links observed in evidence.

    Args:
        seed_key: one of the five identifier kinds.
        seed_value: its value.
        link_counts: ``(key, value) -> {other_key: {other_value: events}}`` for the evidence
            of that identifier (the store restricts it to the time window).
        cardinalities: ``(near, far) -> (most far per near, most near per far)`` over the data.
        max_fanout: a link kind reaching more values than this from one identifier is refused.
        max_ids: stop (``truncated``) after this many identifiers.
        prefetch: called with the identifiers queued for expansion (the next one first)
            before the first of them is looked up, so that ``link_counts`` can read them in
            one batch; each identifier is handed over once.

    Returns:
        The expansion, with every link it followed or refused.
    """
    expansion = Expansion(seed=(seed_key, seed_value))
    expansion.add(seed_key, seed_value)
    queue: deque[tuple[str, str]] = deque([(seed_key, seed_value)])
    parents: dict[tuple[str, str], Parent] = {}
    prefetched: set[tuple[str, str]] = set()
    while queue:
        if prefetch is not None and queue[0] not in prefetched:
            batch = [item for item in queue if item not in prefetched]
            prefetched.update(batch)
            prefetch(batch)
        key, value = queue.popleft()
        for other in IDENTIFIER_KEYS:
            if other == key:
                continue
            counts = link_counts(key, value).get(other) or {}
            if not counts:
                continue
            near_far, far_near = cardinalities.get((key, other), (1, 1))
            kind = cardinality(near_far, far_near)
            values = tuple(sorted(counts))
            events = sum(counts.values())
            if kind == "m:n":
                expansion.links.append(
                    LinkUse(key, value, other, values, kind, events, False, "m:n: shared both ways")
                )
                continue
            if len(values) > max_fanout:
                reason = f"fan-out: {len(values)} {other} values (limit {max_fanout})"
                expansion.links.append(
                    LinkUse(key, value, other, values, kind, events, False, reason)
                )
                continue
            # A place reached from a unit of work is a parent whatever the data says: a node
            # that ran one allocation in this store runs the next one tomorrow, and one that
            # looks 1:1 here would let its other allocations in through its own 1:n links.
            place = other in PLACE_KEYS and key in WORK_KEYS
            if kind == "n:1" or place:
                for parent_value in values:
                    parent_key = (other, parent_value)
                    if parent_key in parents or parent_value in expansion.ids.get(other, []):
                        continue
                    parents[parent_key] = Parent(other, parent_value, key, ())
                expansion.links.append(
                    LinkUse(
                        key,
                        value,
                        other,
                        values,
                        kind,
                        events,
                        True,
                        (
                            f"parent: {other} is shared by other {key} values; its own events "
                            "are included inside the time window, its other children are not"
                            if kind == "n:1"
                            else f"parent: {other} is a place work runs on; its own events are "
                            "included inside the time window, its other work's are not"
                        ),
                    )
                )
                continue
            expansion.links.append(LinkUse(key, value, other, values, kind, events, True, kind))
            for far in values:
                if expansion.size >= max_ids:
                    expansion.truncated = True
                    break
                if expansion.add(other, far):
                    queue.append((other, far))
    # A parent excludes only the children of the kind it was reached from that are not ours.
    for (key, value), parent in parents.items():
        if value in expansion.ids.get(key, []):
            continue
        expansion.parents.append(
            Parent(key, value, parent.child_key, tuple(expansion.ids.get(parent.child_key, ())))
        )
    return expansion
