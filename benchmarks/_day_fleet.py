"""A day of fleet evidence ending now, with incidents whose own entries are known.

What ``benchmarks.loki_timeline`` pushes into a real Loki: the fleet of ``benchmarks.fleet``
(allocations through the five layers, :class:`~benchmarks._allocation_events.AllocationEvents`)
squeezed into the 24 h before now, since a Loki refuses entries older than its
``reject_old_samples_max_age`` (a week by default) and ``benchmarks.fleet``'s four weeks end on
a fixed date. As there:

- ``nodes`` = lines / 2,000 (500 at 10^6, at least 20); the busiest 2 % of the nodes run 10 %
  of the allocations (about 175 each at 10^6, several at once: the node whose other
  allocations a pull must leave out), the rest share the remainder by a long-tailed weight;
- per allocation: tenant requests, workflows, the node agent's steps; about 3 % fail with an
  owner layer (cert, ingress, db, deploy, node); node heartbeats fill about 10 % of the lines.

Every record carries the run's ``env`` (the Loki label that keeps runs apart in one Loki).
Records after the day's end (the release of an allocation still running then) are left out.

An *incident* is a failing allocation whose failure lies at least half a window inside the
day, so that the window around it (6 h by default) is whole. Its *own entries* are what the
correlator's timeline of the allocation holds, known here from the generator, not from the
correlator: inside the window, every record naming the allocation, one of its requests
(``correlation_id``) or one of its workflow runs, and every record of its node that names no
unit of work (heartbeats, reimage notices). The node's records of its other allocations are
not the incident's (a node is a windowed parent, DESIGN §6).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from benchmarks._allocation_events import MIN, AllocationEvents, S, random_hex
from benchmarks.fleet import Writer

__all__ = ["DAY_NS", "DayFleet", "Incident", "generate", "load", "records", "save"]

DAY_NS: Final = 24 * 3600 * S
#: Lines one allocation writes, heartbeats aside (measured on this generator: 998,499 lines
#: at seed 1 held 17,307 allocations and about 100,000 heartbeats; a little under 52).
_LINES_PER_ALLOCATION: Final = 51
_WORK_KEYS: Final = ("allocation_id", "correlation_id", "workflow_id")


@dataclass
class Incident:
    """One failing allocation and what its timeline should hold.

    Attributes:
        allocation_id: the seed.
        node_id: the node it ran on.
        busy: whether that node is one of the busiest.
        owner: the owner layer its failure names.
        failed_ns: when the failure was logged.
        from_ns: the window's start (half a window before the failure).
        to_ns: its end (excluded).
        own: its own entries inside the window (module docstring).
        window_lines: every line of the fleet inside the window (what ingesting it stores).
        ids: its requests and workflow runs (``correlation_id``, ``workflow_id``).
    """

    allocation_id: str
    node_id: str
    busy: bool
    owner: str
    failed_ns: int
    from_ns: int
    to_ns: int
    own: int = 0
    window_lines: int = 0
    ids: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class DayFleet:
    """What :func:`generate` wrote."""

    env: str
    start_ns: int
    end_ns: int
    files: list[Path]
    lines: int
    layers: dict[str, int]
    nodes: int
    busy_nodes: list[str]
    allocations: int
    allocations_per_busy_node: float
    incidents: list[Incident]


class _EnvWriter(Writer):
    """``benchmarks.fleet``'s writer (each layer's file in time order), with the run's
    ``env`` on every record and nothing after the day's end."""

    def __init__(self, directory: Path, env: str, end_ns: int) -> None:
        super().__init__(directory)
        self.env, self.end_ns = env, end_ns

    def add(self, ts_ns: int, layer: str, record: dict[str, Any]) -> None:
        if ts_ns < self.end_ns:
            record["env"] = self.env
            super().add(ts_ns, layer, record)


class _DayGenerator(AllocationEvents):
    """One day of a fleet's evidence, noting which allocations fail and how."""

    def __init__(self, out: _EnvWriter, lines: int, seed: int, start_ns: int) -> None:
        self.rng = random.Random(seed)
        self.out = out
        self.target = lines
        self.start_ns, self.end_ns = start_ns, out.end_ns
        nodes = max(20, lines // 2000)
        self.node_ids = [f"node-r{i // 40:02d}-u{i % 40:02d}" for i in range(nodes)]
        self.instances = {n: [(0, f"ni-{random_hex(self.rng, 10)}")] for n in self.node_ids}
        self.api_skew_ns = int(0.35 * S)
        self.busy = self.node_ids[: max(1, len(self.node_ids) // 50)]
        #: allocation -> (owner layer, when, node) of the failures logged so far.
        self.failures: dict[str, tuple[str, int, str]] = {}

    def _record(self, ts_ns: int, layer: str, service: str, event: str, **fields: Any) -> None:
        error = fields.get("error")
        # The failure itself names its owner; the API's wrapper around it says "unknown".
        if isinstance(error, dict) and error.get("owner_layer") not in (None, "unknown"):
            failure = (error["owner_layer"], ts_ns, fields["node_id"])
            self.failures[fields["allocation_id"]] = failure
        super()._record(ts_ns, layer, service, event, **fields)

    def plan(self) -> list[tuple[int, int, str]]:
        """(start_ns, lease_ns, node) of every allocation, in start order."""
        rng = self.rng
        allocations = max(10, int(self.target * 0.9 / _LINES_PER_ALLOCATION))
        rest = self.node_ids[len(self.busy) :]
        weights = [rng.paretovariate(1.5) for _ in rest]
        counts = Counter(rng.choices(self.busy, k=allocations // 10))
        counts.update(rng.choices(rest, weights=weights, k=allocations - allocations // 10))
        plan = []
        for node, k in counts.items():
            slot = DAY_NS // k
            for i in range(k):
                # As benchmarks.fleet: a lease takes 30-85 % of its slot, at least the 25 min
                # that provisioning and release take (so a busy node's leases overlap).
                lease = max(int(slot * rng.uniform(0.3, 0.85)), 25 * MIN)
                begin = self.start_ns + i * slot + int(rng.uniform(0, 0.1) * slot)
                plan.append((begin, lease, node))
        plan.sort()
        return plan

    def run(self, window_ns: int) -> tuple[int, float, dict[str, dict[str, list[str]]]]:
        """Write the day; the allocations, the busy nodes' mean, and the identifiers of the
        failing allocations whose window fits in the day."""
        plan = self.plan()
        every = max(10 * S, int(len(self.node_ids) * DAY_NS / max(1, self.target // 10)))
        beats = [(self.start_ns + self.rng.randrange(every), n) for n in self.node_ids]
        heapq.heapify(beats)
        failing: dict[str, dict[str, list[str]]] = {}
        busy = set(self.busy)
        on_busy = 0
        for begin, lease, node in [*plan, (self.end_ns, 0, "")]:
            while beats[0][0] < begin:
                when, beat_node = heapq.heappop(beats)
                self._heartbeat(when, beat_node)
                heapq.heappush(beats, (when + every, beat_node))
            self.out.release(begin)
            if not node:
                break
            on_busy += node in busy
            ids = self._allocation(begin, lease, node)
            failure = self.failures.get(ids["allocation_id"][0])
            if failure and self._fits(failure[1], window_ns):
                failing[ids["allocation_id"][0]] = ids
        return len(plan), on_busy / len(self.busy), failing

    def _fits(self, when_ns: int, window_ns: int) -> bool:
        return self.start_ns + window_ns // 2 <= when_ns < self.end_ns - window_ns // 2


def generate(
    directory: Path,
    lines: int,
    seed: int,
    *,
    env: str,
    end_ns: int,
    incidents: int,
    window_ns: int,
) -> DayFleet:
    """Write a day of fleet evidence into ``directory`` (one NDJSON file per layer, each in
    time order) and pick its incidents.

    Args:
        directory: an empty directory.
        lines: about how many lines (within a few %).
        seed: the random seed (same seed and size: the same fleet, but for its times and env).
        env: the ``env`` of every record.
        end_ns: the day's end.
        incidents: how many incidents to pick (fewer when the day has fewer), a quarter on
            the busiest nodes when they have that many.
        window_ns: the window around each incident.

    Returns:
        The fleet, its incidents' own entries counted.
    """
    out = _EnvWriter(directory, env, end_ns)
    generator = _DayGenerator(out, lines, seed, end_ns - DAY_NS)
    allocations, per_busy_node, failing = generator.run(window_ns)
    files = out.close()
    rng = random.Random(seed)
    busy = set(generator.busy)
    candidates = sorted(failing)
    on_busy = [a for a in candidates if generator.failures[a][2] in busy]
    chosen = rng.sample(on_busy, min(len(on_busy), incidents // 4))
    others = [a for a in candidates if a not in chosen]
    chosen += rng.sample(others, min(len(others), incidents - len(chosen)))
    picked = []
    for allocation in sorted(chosen, key=lambda a: generator.failures[a][1]):
        owner, when, node = generator.failures[allocation]
        ids = failing[allocation]
        picked.append(
            Incident(
                allocation,
                node,
                node in busy,
                owner,
                when,
                when - window_ns // 2,
                when + window_ns // 2,
                ids={"correlation_id": ids["correlation_id"], "workflow_id": ids["workflow_id"]},
            )
        )
    _count_own(files, picked)
    return DayFleet(
        env=env,
        start_ns=end_ns - DAY_NS,
        end_ns=end_ns,
        files=files,
        lines=sum(out.layers.values()),
        layers=dict(out.layers),
        nodes=len(generator.node_ids),
        busy_nodes=list(generator.busy),
        allocations=allocations,
        allocations_per_busy_node=per_busy_node,
        incidents=picked,
    )


def records(files: list[Path]) -> Iterator[tuple[int, bytes]]:
    """Every line of the files with its time, oldest first (each file is in time order)."""
    return heapq.merge(*(_timed(path) for path in files))


def _timed(path: Path) -> Iterator[tuple[int, bytes]]:
    from correlator.sources._time import parse_rfc3339_ns

    with path.open("rb") as lines:
        for line in lines:
            yield parse_rfc3339_ns(orjson.loads(line)["ts"]), line.rstrip(b"\n")


def _count_own(files: list[Path], incidents: list[Incident]) -> None:
    """Count each incident's own entries (module docstring), and the lines of its window, in
    one pass over the files."""
    work: dict[tuple[str, str], int] = {}
    places: dict[str, list[int]] = {}
    for number, incident in enumerate(incidents):
        work["allocation_id", incident.allocation_id] = number
        for key, values in incident.ids.items():
            work.update({(key, value): number for value in values})
        places.setdefault(incident.node_id, []).append(number)
    for ts_ns, line in records(files):
        for incident in incidents:
            incident.window_lines += incident.from_ns <= ts_ns < incident.to_ns
        record = orjson.loads(line)
        named = [(key, record[key]) for key in _WORK_KEYS if key in record]
        if named:
            mine = {work[pair] for pair in named if pair in work}
        else:
            mine = set(places.get(record.get("node_id", ""), ()))
        for number in mine:
            incident = incidents[number]
            if incident.from_ns <= ts_ns < incident.to_ns:
                incident.own += 1


def save(fleet: DayFleet, path: Path) -> None:
    """Write what ``fleet`` holds to ``path`` (JSON), for :func:`load`."""
    data = asdict(fleet)
    data["files"] = [str(f) for f in fleet.files]
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


def load(path: Path) -> DayFleet:
    """The fleet :func:`save` wrote to ``path``."""
    data = orjson.loads(path.read_bytes())
    data["files"] = [Path(f) for f in data["files"]]
    data["incidents"] = [Incident(**i) for i in data["incidents"]]
    return DayFleet(**data)
