"""Latency: per-phase durations of allocation lifecycles, by provider (AAP vs EDA).

Pure core: :class:`~correlator.model.Event` values in (any order), :class:`PhaseStats` out; no
store, no I/O. Only allocation transitions count (``entity_kind="allocation"``, ``state_to``
set, not a projection), ordered by ``(ts_ns, hash)``, the store's order; states are compared
case-insensitively.

A phase is a pair of states ``(start, end)``. For each allocation (``entity_id``) that ever
entered ``start``, its duration runs from its *first* entry into ``start`` to its first entry
into ``end`` after that (so a retry that re-enters ``start`` before reaching ``end`` is part of
the phase, and a later second cycle is not counted again). An allocation that entered
``start`` but never reached ``end`` after it (it failed, or is still under way) counts as
``incomplete`` and adds no duration. :data:`DEFAULT_PHASES`:

- ``provision``: ``provisioning`` -> ``active``
- ``deprovision``: ``releasing`` -> ``released``
- ``total``: ``requested`` -> ``active``

The provider of a sample is ``attrs["provider"]`` of the start transition, else of the end
transition, else the latest ``provider`` known for the allocation (any of its events, or any
event naming it in ``allocation_id``), else ``unknown``; lower-cased, so ``AAP`` and ``aap``
are one provider.

Percentiles use the nearest-rank method: the p-th percentile of n sorted samples is the
sample at 1-based rank ``ceil(p * n / 100)`` (computed in integers), so it is always an
observed duration: p50 of ``[1, 2, 3, 4]`` is 2, p95 of twenty samples is the 19th.

Rows are sorted by phase, in the order of the ``phases`` mapping, then by provider name;
only (phase, provider) pairs with at least one sample or incomplete allocation appear. JSON
shape of :meth:`PhaseStats.as_dict`::

    {"provider": "aap", "phase": "provision", "count": 12, "incomplete": 1,
     "p50_s": 74.2, "p95_s": 180.0, "max_s": 181.5}

``p50_s``, ``p95_s`` and ``max_s`` are None when ``count`` is 0.

:func:`latency` is the reference: events in, rows out. A store of 10^7 events holds ~800,000
allocation transitions, too many to read as events; it computes the same samples in SQL
(``correlator._lifecycle.latency_samples``, with :func:`checked_phases`, :func:`provider_name`
and ``model.state_name`` deciding what they decide here) and hands them to
:func:`statistics`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from correlator.errors import QueryError
from correlator.model import Event, state_name

__all__ = [
    "DEFAULT_PHASES",
    "Incomplete",
    "PhaseStats",
    "Samples",
    "checked_phases",
    "latency",
    "nearest_rank",
    "provider_name",
    "statistics",
]

#: The phases measured when the caller names none: name -> (start state, end state).
DEFAULT_PHASES: Final[Mapping[str, tuple[str, str]]] = {
    "provision": ("provisioning", "active"),
    "deprovision": ("releasing", "released"),
    "total": ("requested", "active"),
}

_UNKNOWN: Final = "unknown"

#: Durations in seconds, and counts of allocations that never finished a phase, by
#: (phase, provider): what :func:`statistics` summarises.
Samples = dict[tuple[str, str], list[float]]
Incomplete = dict[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class PhaseStats:
    """Durations of one phase for one provider (see the module docstring).

    Attributes:
        provider: lower-cased provider name, or ``unknown``.
        phase: the phase's name.
        count: allocations that completed the phase.
        incomplete: allocations that entered the start state but never reached the end state.
        p50_s: nearest-rank median duration in seconds, None when ``count`` is 0.
        p95_s: nearest-rank 95th percentile in seconds, None when ``count`` is 0.
        max_s: the longest duration in seconds, None when ``count`` is 0.
    """

    provider: str
    phase: str
    count: int
    incomplete: int
    p50_s: float | None
    p95_s: float | None
    max_s: float | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-able form (the module docstring shows it)."""
        return {
            "provider": self.provider,
            "phase": self.phase,
            "count": self.count,
            "incomplete": self.incomplete,
            "p50_s": self.p50_s,
            "p95_s": self.p95_s,
            "max_s": self.max_s,
        }


def nearest_rank(ordered: Sequence[float], percent: int) -> float | None:
    """The nearest-rank percentile of already sorted values.

    Args:
        ordered: values in ascending order.
        percent: the percentile, 1..100.

    Returns:
        The value at 1-based rank ``ceil(percent * n / 100)``, or None for no values.

    Raises:
        QueryError: ``percent`` is outside 1..100.
    """
    if not 1 <= percent <= 100:
        raise QueryError(f"percentile must be within 1..100, not {percent!r}")
    if not ordered:
        return None
    # Integer ceiling: float arithmetic could put 0.95 * 20 a hair above 19.
    rank = (percent * len(ordered) + 99) // 100
    return ordered[rank - 1]


def latency(
    events: Iterable[Event], *, phases: Mapping[str, tuple[str, str]] = DEFAULT_PHASES
) -> list[PhaseStats]:
    """Per-phase, per-provider duration statistics of allocation lifecycles.

    Args:
        events: lifecycle evidence in any order; only allocation transitions and ``provider``
            attributes of events naming an allocation are used.
        phases: phase name -> (start state, end state).

    Returns:
        One row per (phase, provider) seen, by phase (mapping order) then provider.

    Raises:
        QueryError: a phase is not a pair of two different non-empty state names.
    """
    wanted = checked_phases(phases)
    transitions: dict[str, list[Event]] = defaultdict(list)
    providers: dict[str, list[Event]] = defaultdict(list)
    for event in sorted(events, key=lambda e: (e.ts_ns, e.hash)):
        is_allocation = event.entity_kind == "allocation" and event.layer != "projection"
        allocation = event.entity_id if is_allocation else event.allocation_id
        if not allocation:
            continue
        if is_allocation and event.state_to:
            transitions[allocation].append(event)
        if event.attrs.get("provider"):
            providers[allocation].append(event)

    samples: Samples = defaultdict(list)
    incomplete: Incomplete = defaultdict(int)
    for allocation, steps in transitions.items():
        latest = providers[allocation][-1].attrs["provider"] if providers[allocation] else None
        states = [state_name(e.state_to) for e in steps]
        for phase, (start_state, end_state) in wanted.items():
            if start_state not in states:
                continue
            first = states.index(start_state)
            start = steps[first]
            end = next(
                (steps[i] for i in range(first + 1, len(steps)) if states[i] == end_state), None
            )
            found = (
                start.attrs.get("provider"),
                end.attrs.get("provider") if end else None,
                latest,
            )
            provider = provider_name(next((p for p in found if p), None))
            if end is None:
                incomplete[(phase, provider)] += 1
            else:
                samples[(phase, provider)].append((end.ts_ns - start.ts_ns) / 1e9)
    return statistics(samples, incomplete, wanted)


def provider_name(value: Any) -> str:
    """How a sample names its provider: ``attrs["provider"]`` as text, lower-cased, so that
    ``AAP`` and ``aap`` are one; ``unknown`` for none (None, or a falsy value)."""
    return str(value).lower() if value else _UNKNOWN


def statistics(
    samples: Mapping[tuple[str, str], Sequence[float]],
    incomplete: Mapping[tuple[str, str], int],
    phases: Mapping[str, tuple[str, str]],
) -> list[PhaseStats]:
    """The rows of :func:`latency` from its samples.

    Args:
        samples: durations in seconds by (phase, provider), in any order.
        incomplete: allocations that entered a phase and never left it, by (phase, provider).
        phases: the phases measured (their order is the rows' order).

    Returns:
        One row per (phase, provider) with a sample or an incomplete allocation, by phase
        then provider.
    """
    order = {phase: i for i, phase in enumerate(phases)}
    rows = []
    for phase, provider in sorted({*samples, *incomplete}, key=lambda k: (order[k[0]], k[1])):
        durations = sorted(samples.get((phase, provider), []))
        rows.append(
            PhaseStats(
                provider=provider,
                phase=phase,
                count=len(durations),
                incomplete=incomplete.get((phase, provider), 0),
                p50_s=nearest_rank(durations, 50),
                p95_s=nearest_rank(durations, 95),
                max_s=durations[-1] if durations else None,
            )
        )
    return rows


def checked_phases(phases: Mapping[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Phases with their state names as compared (stripped, lower-cased).

    Raises:
        QueryError: a phase is not a pair of two different non-empty state names.
    """
    wanted = {}
    for name, pair in phases.items():
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise QueryError(f"phase {name!r} must be a (start state, end state) pair")
        start, end = (state_name(str(state)) for state in pair)
        if not start or not end or start == end:
            raise QueryError(
                f"phase {name!r} needs two different non-empty states, not {start!r} -> {end!r}"
            )
        wanted[name] = (start, end)
    return wanted
