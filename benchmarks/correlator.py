"""The correlator at scale: NDJSON ingest events/s and timeline latency at 10^5..10^7 events.

For each size a fleet is generated (seeded) and written as agent JSON lines, one file per
layer, each in time order as the services would have written them (generation time is not
measured):

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

Measured, on a fresh on-disk DuckDB per size:

1. parse only: ``correlator.sources.ndjson.parse_columns`` over 50,000-line batches, as the
   ingest calls it, no store (on the first 10^6 lines at most: the rate does not depend on
   the size);
2. ingest in one process: ``correlator.ingest.ingest_lines(store, "agent", ...)`` of the same
   lines into a fresh store, closed at the end (parse + insert, as ``correlator ingest``
   runs today);
3. ingest with workers: ``ingest_paths(store, "agent", files, workers=2)`` of every file, end
   to end (parse in two worker processes, insert, the link cardinalities computed once at the
   end, the store closed): the store the queries read;
4. the floor DuckDB itself sets: its own NDJSON reader (``read_json``, columns and types
   detected, both threads) copying every file into a table of a fresh on-disk database,
   with no mapping, no validation, no indexes and no de-duplication: what an ingest that
   does all of those is measured against (the ratio ``ingest / DuckDB`` in the table);
5. timeline: ``correlator.incident.timeline_for`` for ``--queries`` random seeds, a quarter
   each of ``allocation_id``, ``correlation_id``, ``workflow_id`` and ``node_id`` of a busy
   node, on the store opened read-only (as the CLI does). The first query is reported apart
   (it reads the stored link cardinalities; "cardinalities s" is what computing them costs,
   i.e. what the first query paid before they were stored); p50 / p95 / max over the
   others, warm.

Run: ``python -m benchmarks.correlator [--sizes 1e5,1e6,1e7] [--queries 50] [--seed 1]
[--workers 2] [--cluster] [--keep DIR] [--json] [--record]``. ``--cluster`` runs
``Store.cluster()`` after the ingest (timed apart) and queries the clustered store.
``--keep DIR`` writes the fleet files and the store of each size into ``DIR/n<size>`` and
leaves them there; a later run with the same ``--keep`` reuses them (generation and ingest
skipped, the ingest figures shown are those of the run that built the store): for measuring
query changes without paying ~10 minutes per try at 10^7. ``--record`` rewrites the
section titled :data:`SECTION` of ``benchmarks/RESULTS.md`` (or appends it; other sections are
left as they are).
The default run takes about 13 minutes on 2 cores (``--cluster``: 3 more) and needs about
6 GB in ``$TMPDIR`` at 10^7 events (the NDJSON files and the store; twice the store with
``--cluster``).
"""

from __future__ import annotations

import argparse
import bisect
import gc
import heapq
import itertools
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from benchmarks._common import REPO_ROOT, machine_note, rss_kib
from correlator.sources._time import format_rfc3339_ns

_S: Final = 1_000_000_000
_MIN: Final = 60 * _S
_HOUR: Final = 3600 * _S
_DAY: Final = 24 * _HOUR
#: The fleet's four weeks end here (2026-03-01T00:00:00Z): fixed, so runs are comparable.
END_NS: Final = 1_772_323_200 * _S
SPAN_NS: Final = 28 * _DAY
LAYER_FILES: Final = ("ingress", "api", "workflow", "node", "db")
SEED_KINDS: Final = ("allocation_id", "correlation_id", "workflow_id", "node_id")
CHUNK_LINES: Final = 50_000  # correlator.ingest.BATCH_EVENTS
#: Parse-only and one-process ingest are measured on at most this many lines (their rate
#: does not depend on the store's size; the full ingest is measured with workers).
SAMPLE_LINES: Final = 1_000_000
RESULTS: Final = REPO_ROOT / "benchmarks" / "RESULTS.md"
SECTION: Final = "## correlator: ingest and timeline at 10^5-10^7 events"

# Owner layers of the failures, with the layer that reports them and what it says.
_FAILURES: Final = (
    ("cert", "ingress", "SSL_do_handshake() failed: certificate has expired", "SSLError"),
    ("ingress", "ingress", "connect() failed (111: Connection refused) to upstream", "Upstream"),
    ("db", "db", "deadlock detected", "DeadlockDetected"),
    ("deploy", "node", "image checksum mismatch after download", "DeployError"),
    ("node", "node", "BMC did not answer power-on within 300 s", "PowerError"),
)


# -- generation ------------------------------------------------------------------------------


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


class _Writer:
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


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _uuid4(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


class _Generator:
    """One fleet's evidence (see the module docstring for the shape)."""

    def __init__(
        self, directory: Path, target_events: int, seed: int, part: int = 0, parts: int = 1
    ) -> None:
        self.rng = random.Random(seed * 1000 + part)
        self.out = _Writer(directory, f"-{part}" if parts > 1 else "")
        self.target = target_events // parts
        fleet = max(50, min(2000, target_events // 5000))
        # Each part generates its share of the fleet (a rack-aligned split: its own files).
        self.node_ids = [f"node-r{i // 40:02d}-u{i % 40:02d}" for i in range(part, fleet, parts)]
        self.nodes = len(self.node_ids)
        # node -> [(from_ns, instance)]: heartbeats look up the instance of their moment.
        self.instances: dict[str, list[tuple[int, str]]] = {
            n: [(0, f"ni-{_hex(self.rng, 10)}")] for n in self.node_ids
        }
        self.api_skew_ns = int(0.35 * _S)  # the API's clock runs a little ahead

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
                lease = max(int(slot * rng.uniform(0.3, 0.85)), 25 * _MIN)
                begin = start + i * slot + int(rng.uniform(0, 0.1) * slot)
                plan.append((begin, min(lease, END_NS - begin - 30 * _MIN), node))
        plan.sort()
        return plan

    def run(self, sample_every: int) -> Fleet:
        plan = self.plan()
        heartbeat_every = max(
            10 * _S, int(self.nodes * SPAN_NS / max(1, self.target // 10))
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

    def _instance(self, node: str, ts_ns: int) -> str:
        history = self.instances[node]
        return history[bisect.bisect_right(history, (ts_ns, "~")) - 1][1]

    def _heartbeat(self, ts_ns: int, node: str) -> None:
        self.out.add(
            ts_ns,
            "node",
            {
                "ts": format_rfc3339_ns(ts_ns),
                "level": "info",
                "event": "heartbeat",
                "service": "node-agent",
                "layer": "node",
                "env": "prod",
                "node_id": node,
                "node_instance_id": self._instance(node, ts_ns),
                "load1": round(self.rng.uniform(0.0, 4.0), 2),
                "agent_version": "2.14.3",
            },
        )

    def _record(self, ts_ns: int, layer: str, service: str, event: str, **fields: Any) -> None:
        record = {
            "ts": format_rfc3339_ns(ts_ns),
            "level": "info",
            "event": event,
            "service": service,
        }
        record["layer"] = layer
        record["env"] = "prod"
        record.update(fields)
        self.out.add(ts_ns, layer, record)

    def _request(
        self,
        end_ns: int,
        method: str,
        path: str,
        status: int,
        *,
        allocation: str,
        failure: tuple[str, str, str, str] | None = None,
    ) -> str:
        """A tenant request: ingress access, API access + log line(s), one statement."""
        rng = self.rng
        correlation = _uuid4(rng)
        trace = _hex(rng, 32)
        ingress_span, api_span = _hex(rng, 16), _hex(rng, 16)
        duration = rng.uniform(0.01, 0.4)
        self._record(
            end_ns,
            "ingress",
            "edge-nginx",
            "request",
            method=method,
            path=path,
            status=status,
            duration_s=round(duration, 4),
            correlation_id=correlation,
            trace_id=trace,
            span_id=ingress_span,
            client="10.40.2.17",
            upstream="provisioning-api:8000",
        )
        api_end = end_ns - int(0.002 * _S) + self.api_skew_ns
        common = {
            "correlation_id": correlation,
            "allocation_id": allocation,
            "trace_id": trace,
        }
        self._record(
            api_end - int(duration * 0.6 * _S),
            "db",
            "postgres",
            "statement",
            duration_ms=round(rng.uniform(0.2, 8.0), 3),
            statement="SELECT|UPDATE allocations",
            **common,
        )
        if failure is not None:
            self._record(
                api_end - int(duration * 0.2 * _S),
                "api",
                "provisioning-api",
                "provisioning failed",
                level="error",
                span_id=api_span,
                error={
                    "type": "ProvisioningFailed",
                    "message": "provisioning failed",
                    "owner_layer": "unknown",
                    "chain": [{"type": failure[3], "message": failure[2]}],
                },
                **common,
            )
        elif rng.random() < 0.7:
            self._record(
                api_end - int(duration * 0.3 * _S),
                "api",
                "provisioning-api",
                rng.choice(("allocation read", "allocation updated", "quota checked")),
                span_id=api_span,
                **common,
            )
        self._record(
            api_end,
            "api",
            "provisioning-api",
            "request",
            level="error" if status >= 500 else "info",
            logger="agent_logging.access",
            method=method,
            path=path,
            status=status,
            duration_s=round(duration - 0.003, 4),
            span_id=api_span,
            parent_span_id=ingress_span,
            **common,
        )
        return correlation

    def _workflow(
        self,
        t: int,
        kind: str,
        allocation: str,
        node: str,
        instance: str,
        states: tuple[str, ...],
        failure: tuple[str, str, str, str] | None,
    ) -> tuple[int, str, list[str]]:
        """One workflow: transitions, agent calls through the ingress, the agent's steps."""
        rng = self.rng
        workflow = f"wf-{_hex(rng, 12)}"
        provider = "aap" if rng.random() < 0.6 else "eda"
        ids = {"allocation_id": allocation, "workflow_id": workflow, "node_id": node}
        correlations = []
        for before, after in itertools.pairwise(states):
            failing = failure is not None and after == states[-1]
            to_state = f"{kind}_failed" if failing else after
            self._record(
                t,
                "workflow",
                "workflow-worker",
                f"allocation {allocation}: {before} → {to_state}",
                level="error" if failing else "info",
                entity_kind="allocation",
                entity_id=allocation,
                state_from=before,
                state_to=to_state,
                provider=provider,
                **ids,
            )
            if after == states[-1]:
                break
            # The worker calls the node agent through the ingress, 1-2 times per phase.
            for _ in range(rng.randint(1, 2)):
                t += int(rng.uniform(1, 20) * _S)
                correlation = _uuid4(rng)
                correlations.append(correlation)
                self._record(
                    t,
                    "workflow",
                    "workflow-worker",
                    "calling node agent",
                    correlation_id=correlation,
                    **ids,
                )
                duration = rng.uniform(0.05, 1.5)
                call_end = t + int(duration * _S)
                self._record(
                    call_end,
                    "ingress",
                    "edge-nginx",
                    "request",
                    method="POST",
                    path="/v1/tasks",
                    status=202,
                    duration_s=round(duration, 4),
                    correlation_id=correlation,
                    client="10.40.3.9",
                    upstream=f"{node}:9443",
                )
                self._record(
                    call_end - int(0.001 * _S),
                    "node",
                    "node-agent",
                    "request",
                    logger="agent_logging.access",
                    method="POST",
                    path="/v1/tasks",
                    status=202,
                    duration_s=round(duration - 0.002, 4),
                    correlation_id=correlation,
                    node_instance_id=instance,
                    **ids,
                )
                for step in rng.sample(_STEPS[kind], rng.randint(2, 4)):
                    t += int(rng.uniform(5, 90) * _S)
                    self._record(
                        t,
                        "node",
                        "node-agent",
                        step,
                        task=kind,
                        node_instance_id=instance,
                        **ids,
                    )
            t += int(rng.uniform(0.5, 3) * _S)
            self._record(
                t,
                "db",
                "postgres",
                "statement",
                duration_ms=round(rng.uniform(0.3, 5.0), 3),
                statement="UPDATE allocations SET state",
                allocation_id=allocation,
                workflow_id=workflow,
            )
            t += int(rng.uniform(1, 30) * _S)
        if failure is not None:
            owner, layer, message, error_type = failure
            fields: dict[str, Any] = {
                "level": "error",
                "error": {"type": error_type, "message": message, "owner_layer": owner},
            }
            if layer == "node":
                fields["node_instance_id"] = instance
            elif layer == "ingress":
                fields["correlation_id"] = correlations[-1] if correlations else _uuid4(rng)
            service = {"ingress": "edge-nginx", "db": "postgres", "node": "node-agent"}[layer]
            self._record(t - int(2 * _S), layer, service, message, **fields, **ids)
        return t, workflow, correlations

    def _allocation(self, begin: int, lease: int, node: str) -> dict[str, list[str]]:
        rng = self.rng
        allocation = f"alloc-{_hex(rng, 10)}"
        history = self.instances[node]
        instance = history[-1][1]
        t = begin
        if rng.random() < 0.2:  # reimaged before the new tenant
            new = f"ni-{_hex(rng, 10)}"
            self._record(
                t + 5 * _S,
                "node",
                "node-agent",
                "reimage requested by inventory",
                node_id=node,
                node_instance_id=instance,
            )
            history.append((t + 120 * _S, new))
            instance = new
            self._record(
                t + 120 * _S,
                "node",
                "node-agent",
                "agent started on a fresh image",
                node_id=node,
                node_instance_id=instance,
            )
            t += 130 * _S
        failure = rng.choice(_FAILURES) if rng.random() < 0.03 else None
        correlations = [
            self._request(
                t + int(rng.uniform(0.05, 1) * _S),
                "POST",
                "/v1/allocations",
                201,
                allocation=allocation,
            )
        ]
        t += 2 * _S
        workflows = []
        t, workflow, calls = self._workflow(
            t,
            "provision",
            allocation,
            node,
            instance,
            ("requested", "provisioning", "active"),
            failure,
        )
        workflows.append(workflow)
        correlations += calls
        requests = rng.randint(3, 10) - 2
        polls = requests // 2
        path = f"/v1/allocations/{allocation}"
        end = begin + lease
        for i in range(polls):
            when = begin + int((i + 1) * (t - begin) / (polls + 1)) + int(rng.uniform(0, 1) * _S)
            status = 500 if failure is not None and i == polls - 1 else 200
            correlations.append(
                self._request(
                    when,
                    "GET",
                    path,
                    status,
                    allocation=allocation,
                    failure=failure if status == 500 else None,
                )
            )
        for _ in range(requests - polls):
            when = t + int(rng.uniform(0.1, 0.9) * max(end - t, _MIN))
            correlations.append(self._request(when, "GET", path, 200, allocation=allocation))
        if failure is None and rng.random() < 0.3:
            mid = t + int(rng.uniform(0.2, 0.6) * max(end - t, _MIN))
            _, workflow, calls = self._workflow(
                mid,
                "reconfigure",
                allocation,
                node,
                instance,
                ("active", "reconfiguring", "active"),
                None,
            )
            workflows.append(workflow)
            correlations += calls
        release_at = max(end - 20 * _MIN, t + _MIN)
        correlations.append(self._request(release_at, "DELETE", path, 202, allocation=allocation))
        _, workflow, calls = self._workflow(
            release_at + 2 * _S,
            "release",
            allocation,
            node,
            instance,
            ("active", "releasing", "released"),
            None,
        )
        workflows.append(workflow)
        correlations += calls
        return {
            "allocation_id": [allocation],
            "correlation_id": correlations,
            "workflow_id": workflows,
        }


_STEPS: Final = {
    "provision": (
        "task claimed",
        "firmware checked",
        "disks wiped",
        "image written",
        "network configured",
        "cloud-init done",
        "task finished",
    ),
    "release": (
        "task claimed",
        "tenant keys removed",
        "disks wiped",
        "bmc reset",
        "task finished",
    ),
    "reconfigure": ("task claimed", "bios settings applied", "reboot done", "task finished"),
}


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


# -- measurement -----------------------------------------------------------------------------


def _sample(paths: Sequence[Path], limit: int) -> Iterator[bytes]:
    """The first ``limit`` lines of the files, file after file."""
    from correlator.ingest import read_lines

    def lines() -> Iterator[bytes]:
        for path in paths:
            with path.open("rb") as handle:
                yield from read_lines(handle)

    return itertools.islice(lines(), limit)


def _chunked(lines: Iterator[bytes]) -> Iterator[list[bytes]]:
    while chunk := list(itertools.islice(lines, CHUNK_LINES)):
        yield chunk


def measure_parse(paths: Sequence[Path], limit: int) -> dict[str, float]:
    """Parse only: the adapter's columnar path over the ingest's 50,000-line batches."""
    from correlator.sources.ndjson import parse_columns

    rows = rejects = 0
    started = time.perf_counter()
    for chunk in _chunked(_sample(paths, limit)):
        columns, rejected = parse_columns(chunk, "sample", source="agent", start_line=1)
        rows += len(columns["ts_ns"])
        rejects += len(rejected)
    elapsed = time.perf_counter() - started
    return {"events": rows, "rejects": rejects, "seconds": elapsed, "events_per_s": rows / elapsed}


def measure_ingest_one(paths: Sequence[Path], db: Path, limit: int) -> dict[str, float]:
    """``ingest_lines`` of the same lines in one process into a fresh store, closed at the end
    (parse + insert, what ``correlator ingest`` does today)."""
    from correlator.ingest import ingest_lines
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        result = ingest_lines(store, "agent", _sample(paths, limit), "sample")
    elapsed = time.perf_counter() - started
    return {
        "events": result.accepted,
        "seconds": elapsed,
        "events_per_s": result.accepted / elapsed,
    }


def measure_ingest(paths: Sequence[Path], db: Path, workers: int) -> dict[str, float]:
    """``ingest_paths(store, "agent", files, workers=...)`` into a fresh store, closed
    (checkpointed) at the end: the store the queries then read."""
    from correlator.ingest import ingest_paths
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        result = ingest_paths(store, "agent", list(paths), workers=workers)
    elapsed = time.perf_counter() - started
    return {
        "events": result.accepted,
        "duplicate": result.duplicate,
        "rejected": sum(result.rejected.values()),
        "seconds": elapsed,
        "events_per_s": result.accepted / elapsed,
        "db_mib": db.stat().st_size / 2**20,
    }


def measure_duckdb_floor(paths: Sequence[Path], db: Path) -> dict[str, float]:
    """DuckDB's own NDJSON reader copying the files into one table, nothing else: no mapping,
    no checks, no indexes, no content hash (``union_by_name``: the layers' files have
    different fields)."""
    import duckdb

    db.unlink(missing_ok=True)
    started = time.perf_counter()
    with duckdb.connect(str(db)) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(
            "CREATE TABLE lines AS SELECT * FROM read_json(?, format = 'newline_delimited', "
            "union_by_name = true)",
            [[str(path) for path in paths]],
        )
        row = con.execute("SELECT count(*) FROM lines").fetchone()
    elapsed = time.perf_counter() - started
    db.unlink()
    events = int(row[0]) if row else 0
    return {"events": events, "seconds": elapsed, "events_per_s": events / elapsed}


def _seeds(fleet: Fleet, queries: int, rng: random.Random) -> list[tuple[str, str]]:
    """``queries + 1`` seeds, the kinds taking turns, values drawn at random."""
    return [
        (kind, rng.choice(fleet.samples[kind]))
        for kind in (SEED_KINDS[i % len(SEED_KINDS)] for i in range(queries + 1))
    ]


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def measure_timelines(
    db: Path, seeds: Sequence[tuple[str, str]], *, profile: bool = False
) -> dict[str, Any]:
    """``timeline_for`` per seed on the built store, opened read-only as the CLI does; the
    first query in the process (it also reads or computes the link cardinalities) apart."""
    from correlator import incident
    from correlator.store import Store

    per_kind: dict[str, list[float]] = {k: [] for k in SEED_KINDS}
    sizes: dict[str, list[int]] = {k: [] for k in SEED_KINDS}
    truncated = 0
    with Store(db, read_only=True) as store:
        started = time.perf_counter()
        first = incident.timeline_for(store, *seeds[0])
        first_s = time.perf_counter() - started
        profiler: Any = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        for key, value in seeds[1:]:
            gc.collect()
            started = time.perf_counter()
            data = incident.timeline_for(store, key, value)
            per_kind[key].append(time.perf_counter() - started)
            sizes[key].append(len(data["events"]))
            truncated += bool(data["truncated"])
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
        # What the first query would pay without the stored table (a scan per identifier pair).
        started = time.perf_counter()
        store._compute_cardinalities()
        cardinalities_s = time.perf_counter() - started
    warm = [s for values in per_kind.values() for s in values]
    return {
        "first_s": first_s,
        "first_seed": f"{seeds[0][0]}={seeds[0][1]}",
        "first_events": len(first["events"]),
        "cardinalities_s": cardinalities_s,
        "queries": len(warm),
        "p50_s": _percentile(warm, 0.5),
        "p95_s": _percentile(warm, 0.95),
        "max_s": max(warm),
        "truncated": truncated,
        "by_kind": {
            k: {
                "queries": len(v),
                "p50_s": _percentile(v, 0.5),
                "p95_s": _percentile(v, 0.95),
                "max_s": max(v),
                "events_p50": int(statistics.median(sizes[k])),
                "events_max": max(sizes[k]),
            }
            for k, v in per_kind.items()
            if v
        },
    }


def measure_cluster(db: Path) -> dict[str, float]:
    """``Store.cluster()`` on the built store, closed (checkpointed) at the end."""
    from correlator.store import Store

    started = time.perf_counter()
    with Store(db) as store:
        store.cluster()
    return {"seconds": time.perf_counter() - started, "db_mib": db.stat().st_size / 2**20}


def _save_fleet(fleet: Fleet, path: Path) -> None:
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


def _load_fleet(path: Path) -> Fleet:
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


def _fleet(directory: Path, events: int, seed: int, keep: bool) -> tuple[Fleet, float]:
    """The generated fleet, or (``--keep``) the one a previous run left in ``directory``."""
    saved = directory / "fleet.json"
    if keep and saved.exists():
        fleet = _load_fleet(saved)
        if all(path.exists() for path in fleet.files):
            return fleet, 0.0
    for path in directory.glob("*.ndjson"):
        path.unlink()
    started = time.perf_counter()
    fleet = generate(directory, events, seed)
    generate_s = time.perf_counter() - started
    if keep:
        _save_fleet(fleet, saved)
    return fleet, generate_s


def _ingested(
    fleet: Fleet, directory: Path, events: int, workers: int, keep: bool
) -> tuple[dict[str, Any], Path]:
    """Parse, one-process ingest and the full ingest (or, with ``--keep``, the figures and
    the store of the run that built it: ingest figures then describe that run's code)."""
    db = directory / "evidence.duckdb"
    saved = directory / "ingest.json"
    if keep and saved.exists() and db.exists():
        _say(f"{events:,}: reusing the store and ingest figures in {directory}")
        return orjson.loads(saved.read_bytes()), db
    sample = min(fleet.events, SAMPLE_LINES)
    parse = measure_parse(fleet.files, sample)
    _say(f"{events:,}: parse only {parse['events_per_s']:,.0f} events/s ({sample:,} lines)")
    one = measure_ingest_one(fleet.files, directory / "one.duckdb", sample)
    _say(f"{events:,}: ingest, 1 process {one['events_per_s']:,.0f} events/s ({sample:,} lines)")
    (directory / "one.duckdb").unlink()
    for stale in (db, directory / "evidence.duckdb.wal"):
        stale.unlink(missing_ok=True)
    ingest = measure_ingest(fleet.files, db, workers)
    _say(f"{events:,}: ingest_paths, workers={workers}: {ingest['events_per_s']:,.0f} events/s")
    floor = measure_duckdb_floor(fleet.files, directory / "floor.duckdb")
    _say(
        f"{events:,}: DuckDB's read_json alone {floor['events_per_s']:,.0f} events/s "
        f"(ingest / DuckDB {ingest['events_per_s'] / floor['events_per_s']:.2f})"
    )
    figures = {"parse": parse, "ingest_one": one, "ingest": ingest, "duckdb_floor": floor}
    if keep:
        saved.write_bytes(orjson.dumps(figures))
    return figures, db


def run_size(
    events: int,
    queries: int,
    seed: int,
    workdir: Path,
    *,
    workers: int,
    cluster: bool = False,
    profile: bool = False,
    keep: bool = False,
) -> dict[str, Any]:
    """Generate, parse, ingest and query one size.

    The files and the stores are removed afterwards, unless ``keep``: then they stay in
    ``workdir/n{events}`` and the next run with ``keep`` reuses them (generation and ingest
    are skipped; the ingest figures shown are those of the run that built the store).
    """
    directory = workdir / f"n{events}"
    directory.mkdir(parents=True, exist_ok=keep)
    fleet, generate_s = _fleet(directory, events, seed, keep)
    _say(
        f"{events:,}: {'generated' if generate_s else 'reusing'} {fleet.events:,} events "
        f"({fleet.allocations:,} allocations, {fleet.nodes} nodes, busy ones "
        f"~{fleet.allocations_per_busy_node:.0f} allocations) in {generate_s:.0f} s"
    )
    figures, db = _ingested(fleet, directory, events, workers, keep)
    if not keep:
        for path in fleet.files:
            path.unlink()
    clustered = None
    if cluster:
        if keep:  # cluster a copy: the kept store stays as the ingest left it
            copy = directory / "clustered.duckdb"
            shutil.copyfile(db, copy)
            db = copy
        clustered = measure_cluster(db)
        _say(f"{events:,}: clustered in {clustered['seconds']:.0f} s")
    timelines = measure_timelines(db, _seeds(fleet, queries, random.Random(seed)), profile=profile)
    _say(
        f"{events:,}: timeline p50 {timelines['p50_s'] * 1000:.0f} ms, "
        f"p95 {timelines['p95_s'] * 1000:.0f} ms"
    )
    if keep:
        if cluster:
            db.unlink()
    else:
        shutil.rmtree(directory)
    return {
        "size": events,
        "events": fleet.events,
        "allocations": fleet.allocations,
        "nodes": fleet.nodes,
        "busy_nodes": len(fleet.busy_nodes),
        "allocations_per_busy_node": round(fleet.allocations_per_busy_node),
        "node_instances": fleet.instances,
        "layers": dict(fleet.layers),
        "generate_s": generate_s,
        **figures,
        "workers": workers,
        "cluster": clustered,
        "timeline": timelines,
        "rss_kib": rss_kib(),
    }


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- report ----------------------------------------------------------------------------------


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The figures as a Markdown table."""
    workers = rows[0]["workers"] if rows else 2
    clustered = bool(rows and rows[0]["cluster"])
    lines = [
        "| events | parse only ev/s | ingest 1 process ev/s "
        f"| ingest_paths, workers={workers}, ev/s | ingest s | DB MiB "
        "| DuckDB read_json alone ev/s | ingest / DuckDB "
        + ("| cluster s | DB MiB after " if clustered else "")
        + "| first query ms | cardinalities s | timeline p50 ms | p95 ms | max ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|" if clustered else ""),
    ]
    for row in rows:
        t = row["timeline"]
        c = row["cluster"]
        lines.append(
            f"| {row['events']:,} | {row['parse']['events_per_s']:,.0f} "
            f"| {row['ingest_one']['events_per_s']:,.0f} "
            f"| {row['ingest']['events_per_s']:,.0f} | {row['ingest']['seconds']:.1f} "
            f"| {row['ingest']['db_mib']:,.0f} "
            + _floor_cells(row)
            + (f"| {c['seconds']:.0f} | {c['db_mib']:,.0f} " if c else "")
            + f"| {t['first_s'] * 1000:,.0f} "
            f"| {t['cardinalities_s']:.1f} "
            f"| {t['p50_s'] * 1000:,.0f} | {t['p95_s'] * 1000:,.0f} | {t['max_s'] * 1000:,.0f} |"
        )
    return "\n".join(lines)


def _floor_cells(row: dict[str, Any]) -> str:
    """DuckDB's own reader and the ingest's share of it ("-" for a store kept from a run
    before this figure existed)."""
    floor = row.get("duckdb_floor")
    if not floor:
        return "| - | - "
    ratio = row["ingest"]["events_per_s"] / floor["events_per_s"]
    return f"| {floor['events_per_s']:,.0f} | {ratio:.2f} "


def kinds_table(rows: Sequence[dict[str, Any]]) -> str:
    """Timeline latency by seed kind, with how many events the answers held."""
    lines = [
        "| events | seed kind | queries | p50 ms | p95 ms | max ms | events in answer p50 / max |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for kind, k in row["timeline"]["by_kind"].items():
            lines.append(
                f"| {row['events']:,} | {kind} | {k['queries']} | {k['p50_s'] * 1000:,.0f} "
                f"| {k['p95_s'] * 1000:,.0f} | {k['max_s'] * 1000:,.0f} "
                f"| {k['events_p50']:,} / {k['events_max']:,} |"
            )
    return "\n".join(lines)


def record(section: str) -> None:
    """Replace (or append) the ``## correlator`` section of RESULTS.md, nothing else: the
    file is read right before it is written, other sections are kept as they are."""
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == SECTION), None)
    if start is None:
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n", "utf-8")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    head, tail = "".join(lines[:start]), "".join(lines[end:])
    RESULTS.write_text(head + section.rstrip("\n") + "\n" + ("\n" + tail if tail else ""), "utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="store sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=50, help="timeline queries per size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="parse workers of the ingest")
    parser.add_argument(
        "--cluster", action="store_true", help="Store.cluster() after the ingest, then query"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm queries")
    parser.add_argument("--record", action="store_true", help="write the section of RESULTS.md")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write the fleet files and stores into DIR and keep them; reuse them when present",
    )
    args = parser.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    note = machine_note()
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--record"]
    command = " ".join(["python -m benchmarks.correlator", *shown])
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="correlator-bench-") as workdir:
        for size in sizes:
            rows.append(
                run_size(
                    size,
                    args.queries,
                    args.seed,
                    args.keep or Path(workdir),
                    workers=args.workers,
                    cluster=args.cluster,
                    profile=args.profile,
                    keep=args.keep is not None,
                )
            )
    total_s = time.perf_counter() - started
    if args.json:
        print(json.dumps({"machine": note, "total_s": total_s, "rows": rows}, indent=2))
    else:
        print(table(rows))
        print()
        print(kinds_table(rows))
        print(f"\n{note}; load average at the end {_load()}; {total_s:.0f} s in all")
    if args.record:
        record(_section(command, note, rows, total_s))
    return 0


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _section(command: str, note: str, rows: Sequence[dict[str, Any]], total_s: float) -> str:
    return "\n".join(
        [
            SECTION,
            "",
            f"`{command}` — {time.strftime('%Y-%m-%d')}, {note}; load average at the end "
            f"{_load()}; {total_s:.0f} s in all.",
            "",
            table(rows),
            "",
            kinds_table(rows),
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
