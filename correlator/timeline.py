"""The timeline: every event of an incident, ordered by corrected time, with what is missing
made explicit.

Clock offsets. Each source's clock is checked against the ingress, which sees every request
first and last: an API service's record of a request must fall inside the ingress request that
carried it (same ``correlation_id``). For each matched pair the shifts that would put the API
interval ``[end - duration, end]`` inside the ingress interval ``[end - request_time, end]``
form a range; the offset of a source is the shift closest to zero inside the intersection of
its ranges, or the median of the pairs' nearest shifts when they disagree. Offsets are applied
to the source's events (``corrected_ts_ns``) and reported per source.

Also made explicit: gaps (no evidence for longer than ``gap_s``), reimage boundaries (a
node's ``node_instance_id`` changes), and truncation (more evidence matched than was read).
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from correlator.model import Event, request_start_ns

__all__ = ["ClockOffset", "Timeline", "build", "estimate_offsets", "source_key"]

DEFAULT_GAP_S: Final = 600.0
_NS: Final = 1_000_000_000
#: How events at one corrected instant are ordered: an access line is written when its request
#: ends, after what the upstream logged while answering it (an API record and its access line
#: are aligned to the same instant by the offset they were matched to estimate).
_FLOW_RANK: Final = {
    layer: rank
    for rank, layer in enumerate(("api", "workflow", "db", "node", "provider", "projection"))
} | {"ingress": 6}


def source_key(event: Event) -> str:
    """The clock an event was stamped by: its layer and service."""
    return f"{event.layer}:{event.service or event.source}"


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """A source's estimated offset against the ingress (add ``offset_s`` to correct it)."""

    offset_s: float
    pairs: int
    consistent: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "offset_s": round(self.offset_s, 6),
            "pairs": self.pairs,
            "consistent": self.consistent,
        }


def _outer_request(candidates: list[Event], inner: Event) -> Event:
    """The ingress request that carried ``inner``: same method and path when known, then the
    nearest in time (one correlation id can cover several requests through the ingress)."""
    same_route = [
        c
        for c in candidates
        if (c.http_method, c.http_path) == (inner.http_method, inner.http_path)
    ]
    pool = same_route or candidates
    return min(pool, key=lambda c: abs(c.ts_ns - inner.ts_ns))


def estimate_offsets(events: Sequence[Event]) -> dict[str, ClockOffset]:
    """Per-source clock offsets from ingress/API request pairs sharing a correlation id."""
    ingress: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.layer == "ingress" and e.correlation_id and e.http_status is not None:
            ingress[e.correlation_id].append(e)
    ranges: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.layer == "ingress" or e.http_status is None or e.correlation_id not in ingress:
            continue
        outer = _outer_request(ingress[e.correlation_id], e)
        outer_end = outer.ts_ns
        outer_start = request_start_ns(outer_end, outer.duration_s)  # 1e300 s: bounded
        inner_end = e.ts_ns
        inner_start = request_start_ns(inner_end, e.duration_s)
        low = (outer_start - inner_start) / _NS  # smallest shift keeping the start inside
        high = (outer_end - inner_end) / _NS  # largest shift keeping the end inside
        if low > high:  # the inner request lasted longer than the outer: centre it
            low = high = ((outer_start - inner_start) + (outer_end - inner_end)) / 2 / _NS
        ranges[source_key(e)].append((low, high))
    offsets: dict[str, ClockOffset] = {}
    for key, pairs in ranges.items():
        low, high = max(r[0] for r in pairs), min(r[1] for r in pairs)
        if low <= high:
            offset = min(max(0.0, low), high)
            offsets[key] = ClockOffset(offset, len(pairs), True)
        else:
            nearest = [min(max(0.0, lo), hi) for lo, hi in pairs]
            offsets[key] = ClockOffset(statistics.median(nearest), len(pairs), False)
    return offsets


@dataclass
class Timeline:
    """Events in corrected order and the markers around them."""

    events: list[Event]
    corrected_ns: list[int]
    offsets: dict[str, ClockOffset]
    gaps: list[dict[str, Any]] = field(default_factory=list)
    reimages: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def build(
    events: Sequence[Event], *, truncated: bool = False, gap_s: float = DEFAULT_GAP_S
) -> Timeline:
    """Order events by corrected time and find gaps and reimage boundaries.

    Args:
        events: the incident's events, in any order.
        truncated: whether more evidence matched than ``events`` holds (carried through).
        gap_s: a stretch without evidence longer than this is reported as a gap.

    Returns:
        The events ordered by (corrected time, layer rank, content hash), their corrected
        times, the
        offsets applied, gaps and reimage boundaries.
    """
    offsets = estimate_offsets(events)
    # One shift per source, looked up once per event (a busy node's answer is 10,000 events).
    shift_ns = {key: int(offset.offset_s * _NS) for key, offset in offsets.items()}
    if shift_ns:
        times = [e.ts_ns + shift_ns.get(source_key(e), 0) for e in events]
    else:
        times = [e.ts_ns for e in events]
    # At the same corrected instant, the layers in :data:`_FLOW_RANK`'s order, then the content
    # hash: an order that does not depend on the digits of the times themselves (the demo's
    # story is the same whatever the fraction of "now").
    ranks = [_FLOW_RANK.get(e.layer, len(_FLOW_RANK)) for e in events]
    hashes = [e.hash for e in events]
    order = sorted(range(len(events)), key=lambda i: (times[i], ranks[i], hashes[i]))
    ordered = [events[i] for i in order]
    times = [times[i] for i in order]
    gap_ns = int(gap_s * _NS)  # an int: comparing 10,000 differences with a float is slower
    gaps = [
        {"from_ns": a, "to_ns": b, "seconds": round((b - a) / _NS, 3)}
        for a, b in itertools.pairwise(times)
        if b - a > gap_ns
    ]
    reimages: list[dict[str, Any]] = []
    instance_of: dict[str, str] = {}  # node → its instance in the latest event
    last_seen: dict[str, int] = {}  # node → the latest event's time
    for t, e in zip(times, ordered, strict=True):
        node, instance = e.node_id, e.node_instance_id
        if not (node and instance):
            continue
        previous = instance_of.get(node)
        if previous != instance:
            if previous is not None:
                reimages.append(
                    {
                        "node_id": node,
                        "from_instance": previous,
                        "to_instance": instance,
                        "last_seen_old_ns": last_seen[node],
                        "first_seen_new_ns": t,
                    }
                )
            instance_of[node] = instance
        last_seen[node] = t
    return Timeline(ordered, times, offsets, gaps, reimages, truncated)
