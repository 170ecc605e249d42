"""The benchmark fleet: seeded agent JSON lines of a provisioning control plane.

A fleet of N events is written as agent JSON lines, one file per layer, each in time order as
the services would have written them:

- ``nodes`` = N / 5,000 (2,000 at 10^7, at least 50) over four weeks; the busiest 2 % of the
  fleet run 10 % of the allocations (hundreds each at 10^7), the rest share the remainder
  with a long tail; a node runs one allocation at a time and is reimaged (a new
  ``node_instance_id``) before about one tenant in five;
- per allocation: 3-10 tenant requests (each an ingress access record, the API's access
  record and its application log lines, a database statement), 2-4 workflows (provision,
  release and sometimes a reconfiguration: lifecycle transitions, calls to the node agent
  through the ingress, the agent's task steps, statements), about 3 % failing with an owner
  layer (cert, ingress, db, deploy, node) wrapped by the API's "provisioning failed";
- node heartbeats (``node_id`` + ``node_instance_id`` only) fill about 10 % of the events.

:func:`generate` writes one; :func:`save_fleet` and :func:`load_fleet` keep what it wrote
for a later run (``benchmarks.correlator --keep``).
"""

from __future__ import annotations

import heapq
import multiprocessing
import random
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from benchmarks._allocation_events import MIN, AllocationEvents, S, random_hex

__all__ = [
    "END_NS",
    "LAYER_FILES",
    "SEED_KINDS",
    "SPAN_NS",
    "Fleet",
    "Writer",
    "generate",
    "load_fleet",
    "save_fleet",
]

_DAY: Final = 24 * 3600 * S
#: The fleet's four weeks end here (2026-03-01T00:00:00Z): fixed, so runs are comparable.
END_NS: Final = 1_772_323_200 * S
SPAN_NS: Final = 28 * _DAY
LAYER_FILES: Final = ("ingress", "api", "workflow", "node", "db")
SEED_KINDS: Final = ("allocation_id", "correlation_id", "workflow_id", "node_id")


@dataclass
class Fleet:
    """What the generator wrote, and the identifiers the queries pick from."""

    files: list[Path]
    events: int
    layers: Counter[str]
    allocations: int
    nodes: int
    busy_nodes: list[str]
    allocations_per_busy_node: float
    instances: int
    samples: dict[str, list[str]] = field(default_factory=dict)


class Writer:
    """Lines per layer file, released in time order.

    Allocations are generated in start order and none of their records is older than their
    start, so everything older than the next start can be written: the heap holds only the
    records of allocations still running.
    """

    def __init__(self, directory: Path, suffix: str = "") -> None:
        self._handles = {
            name: (directory / f"{name}{suffix}.ndjson").open("wb") for name in LAYER_FILES
        }
        self._heap: list[tuple[int, int, str, bytes]] = []
        self._seq = 0
        self.layers: Counter[str] = Counter()

    def add(self, ts_ns: int, layer: str, record: dict[str, Any]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (ts_ns, self._seq, layer, orjson.dumps(record)))

    def release(self, before_ns: int) -> None:
        heap, handles, layers = self._heap, self._handles, self.layers
        while heap and heap[0][0] < before_ns:
            _, _, layer, line = heapq.heappop(heap)
            handles[layer].write(line + b"\n")
            layers[layer] += 1

    def close(self) -> list[Path]:
        self.release(2**63)
        paths = []
        for handle in self._handles.values():
            handle.close()
            paths.append(Path(handle.name))
        return paths


class _Generator(AllocationEvents):
    """One fleet's evidence (see the module docstring for the shape)."""

    def __init__(
        self, directory: Path, target_events: int, seed: int, part: int = 0, parts: int = 1
    ) -> None:
        self.rng = random.Random(seed * 1000 + part)
        self.out = Writer(directory, f"-{part}" if parts > 1 else "")
        self.target = target_events // parts
        fleet = max(50, min(2000, target_events // 5000))
        # Each part generates its share of the fleet (a rack-aligned split: its own files).
        self.node_ids = [f"node-r{i // 40:02d}-u{i % 40:02d}" for i in range(part, fleet, parts)]
        self.nodes = len(self.node_ids)
        # node -> [(from_ns, instance)]: heartbeats look up the instance of their moment.
        self.instances: dict[str, list[tuple[int, str]]] = {
            n: [(0, f"ni-{random_hex(self.rng, 10)}")] for n in self.node_ids
        }
        self.api_skew_ns = int(0.35 * S)  # the API's clock runs a little ahead

    # One allocation writes about this many events; the heartbeats fill ~10 % on top.
    EVENTS_PER_ALLOCATION: Final = 52

    def plan(self) -> list[tuple[int, int, str]]:
        """(start_ns, lease_ns, node) of every allocation, in start order."""
        rng = self.rng
        allocations = max(10, int(self.target * 0.9 / self.EVENTS_PER_ALLOCATION))
        busy = max(1, self.nodes // 50)
        # 10 % on the busiest 2 %; the rest by a long-tailed weight (some nodes sit idle).
        rest = self.node_ids[busy:]
        weights = [rng.paretovariate(1.5) for _ in rest]
        counts = Counter(rng.choices(self.node_ids[:busy], k=allocations // 10))
        counts.update(rng.choices(rest, weights=weights, k=allocations - allocations // 10))
        self.busy = self.node_ids[:busy]
        self.busy_allocations = sum(counts[n] for n in self.busy) / busy
        start = END_NS - SPAN_NS
        plan = []
        for node, k in counts.items():
            slot = SPAN_NS // k
            for i in range(k):
                # A lease takes 30-85 % of its slot; provisioning and release fit in 25 min.
                lease = max(int(slot * rng.uniform(0.3, 0.85)), 25 * MIN)
                begin = start + i * slot + int(rng.uniform(0, 0.1) * slot)
                plan.append((begin, min(lease, END_NS - begin - 30 * MIN), node))
        plan.sort()
        return plan

    def run(self, sample_every: int) -> Fleet:
        plan = self.plan()
        heartbeat_every = max(
            10 * S, int(self.nodes * SPAN_NS / max(1, self.target // 10))
        )  # ~10 % of the events
        beats = [(END_NS - SPAN_NS + self.rng.randrange(heartbeat_every), n) for n in self.node_ids]
        heapq.heapify(beats)
        samples: dict[str, list[str]] = {k: [] for k in SEED_KINDS}
        for index, (begin, lease, node) in enumerate(plan):
            while beats[0][0] < begin:
                when, beat_node = heapq.heappop(beats)
                self._heartbeat(when, beat_node)
                heapq.heappush(beats, (when + heartbeat_every, beat_node))
            self.out.release(begin)
            ids = self._allocation(begin, lease, node)
            if index % sample_every == 0:
                for key in ("allocation_id", "correlation_id", "workflow_id"):
                    samples[key].append(self.rng.choice(ids[key]))
        while beats[0][0] < END_NS:
            when, beat_node = heapq.heappop(beats)
            self._heartbeat(when, beat_node)
            heapq.heappush(beats, (when + heartbeat_every, beat_node))
        files = self.out.close()
        samples["node_id"] = list(self.busy)
        return Fleet(
            files=files,
            events=sum(self.out.layers.values()),
            layers=self.out.layers,
            allocations=len(plan),
            nodes=self.nodes,
            busy_nodes=list(self.busy),
            allocations_per_busy_node=self.busy_allocations,
            instances=sum(len(v) for v in self.instances.values()),
            samples=samples,
        )


def _generate_part(directory: Path, events: int, seed: int, part: int, parts: int) -> Fleet:
    generator = _Generator(directory, events, seed, part, parts)
    allocations = max(10, int(generator.target * 0.9 / generator.EVENTS_PER_ALLOCATION))
    return generator.run(max(1, allocations // (400 // parts)))


def generate(directory: Path, events: int, seed: int, *, processes: int = 2) -> Fleet:
    """Write a fleet of about ``events`` events into ``directory``.

    Args:
        directory: an empty directory.
        events: the target size (the fleet lands within a few % of it).
        seed: the random seed (same seed, size and processes: same files).
        processes: from 10^5 events on, the fleet is split by node between this many
            processes, each writing its own file per layer.

    Returns:
        The files and what they hold (with ~400 allocations' ids to seed queries with).
    """
    parts = processes if events >= 100_000 and processes > 1 else 1
    if parts == 1:
        return _generate_part(directory, events, seed, 0, 1)
    with ProcessPoolExecutor(parts, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [
            pool.submit(_generate_part, directory, events, seed, part, parts)
            for part in range(parts)
        ]
        fleets = [future.result() for future in futures]
    layers: Counter[str] = Counter()
    for fleet in fleets:
        layers.update(fleet.layers)
    busy = [node for fleet in fleets for node in fleet.busy_nodes]
    return Fleet(
        files=[path for fleet in fleets for path in fleet.files],
        events=sum(f.events for f in fleets),
        layers=layers,
        allocations=sum(f.allocations for f in fleets),
        nodes=sum(f.nodes for f in fleets),
        busy_nodes=busy,
        allocations_per_busy_node=sum(
            f.allocations_per_busy_node * len(f.busy_nodes) for f in fleets
        )
        / len(busy),
        instances=sum(f.instances for f in fleets),
        samples={k: [v for f in fleets for v in f.samples[k]] for k in SEED_KINDS},
    )


def save_fleet(fleet: Fleet, path: Path) -> None:
    """Write what ``fleet`` holds to ``path`` (JSON), for :func:`load_fleet`."""
    data = {
        "files": [str(f) for f in fleet.files],
        "events": fleet.events,
        "layers": dict(fleet.layers),
        "allocations": fleet.allocations,
        "nodes": fleet.nodes,
        "busy_nodes": fleet.busy_nodes,
        "allocations_per_busy_node": fleet.allocations_per_busy_node,
        "instances": fleet.instances,
        "samples": fleet.samples,
    }
    path.write_bytes(orjson.dumps(data))


def load_fleet(path: Path) -> Fleet:
    """The fleet :func:`save_fleet` wrote to ``path``."""
    data = orjson.loads(path.read_bytes())
    return Fleet(
        files=[Path(f) for f in data["files"]],
        events=data["events"],
        layers=Counter(data["layers"]),
        allocations=data["allocations"],
        nodes=data["nodes"],
        busy_nodes=data["busy_nodes"],
        allocations_per_busy_node=data["allocations_per_busy_node"],
        instances=data["instances"],
        samples=data["samples"],
    )
