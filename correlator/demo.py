"""``correlator demo``: a realistic multi-layer incident, built from native evidence files.

The demo writes what each layer would really have written — agent JSON lines, nginx JSON
access and error logs, PostgreSQL ``jsonlog``, workflow transitions, a ``kubectl get -o json``
snapshot and AAP/EDA job objects — then ingests them through the same adapters as any other
input, prints the failing allocation's timeline and the findings, and serves the result.

The story (seeded, relative to now):

- eight allocations provision normally through AAP or EDA (the latency table compares them);
- ``a-7f3c`` fails: the workflow worker calls the node agent through the ingress, whose TLS
  handshake to the upstream fails because the certificate expired; the API logs only a
  wrapped "provisioning failed", the workflow moves to ``provision_failed``. Owner: ``cert``.
  The node ``n-17`` it ran on was reimaged shortly before (``ni-3`` → ``ni-4``), and the API's
  clock runs 1.2 s ahead of the ingress;
- ``a-51d2`` failed to release two hours ago and is still ``release_failed`` with
  ``occupancy=cleanup``: its node stays fenced (a stuck finding);
- ``a-9e01``'s AAP job was canceled 40 minutes ago but its custom resource still says
  ``Running`` (a drift finding).

This module holds the command: :func:`write_evidence` sets when each allocation's part happens
and writes the files, :func:`build` ingests them, :func:`run` prints and serves. Each
allocation's evidence comes from :mod:`correlator._demo_story`, in the shapes of
:mod:`correlator._demo_evidence`.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from correlator._demo_evidence import Writer
from correlator._demo_story import FAILING_ALLOCATION, drifting, failing, healthy, stuck

__all__ = ["build", "run", "write_evidence"]

_S: Final = 1_000_000_000


def write_evidence(directory: Path, *, now_ns: int, seed: int = 7) -> list[tuple[str, Path]]:
    """Write the demo's evidence files into ``directory``; returns (source kind, path) pairs."""
    rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
    w = Writer()
    base = now_ns - 3 * 3600 * _S
    for n in range(8):
        provider = "aap" if n % 2 == 0 else "eda"
        healthy(
            w,
            rng,
            base + n * 600 * _S,
            f"a-{100 + n}",
            f"n-{20 + n % 3}",
            f"ni-{n % 3 + 1}",
            provider,
            4600 + n,
        )
    failing(w, rng, now_ns - 50 * 60 * _S)
    stuck(w, rng, now_ns - 2 * 3600 * _S)
    drifting(w, rng, now_ns - 70 * 60 * _S, now_ns)
    kinds = {
        "agent.ndjson": "agent",
        "nginx-access.log": "nginx",
        "nginx-error.log": "nginx",
        "postgres.json": "postgres",
        "workflow.ndjson": "workflow",
        "k8s-provisionrequests.json": "k8s",
        "jobs.ndjson": "aap",
    }
    written = []
    for name, kind in kinds.items():
        path = directory / name
        path.write_text("\n".join(w.files.get(name, [])) + "\n", "utf-8")
        written.append((kind, path))
    return written


def build(db_path: Path, *, now_ns: int, seed: int = 7) -> dict[str, Any]:
    """Write the evidence and ingest it into a fresh database at ``db_path``."""
    from correlator.ingest import ingest_paths
    from correlator.store import IngestResult, Store

    total = IngestResult()
    with tempfile.TemporaryDirectory(prefix="correlator-demo-") as tmp, Store(db_path) as store:
        for kind, path in write_evidence(Path(tmp), now_ns=now_ns, seed=seed):
            total.add(ingest_paths(store, kind, [path]))
    return total.as_dict()


def run(args: argparse.Namespace) -> int:
    """The ``correlator demo`` command."""
    from correlator import incident, queries, render
    from correlator.store import Store

    db_path = Path(args.db if args.db != "correlator.duckdb" else "correlator-demo.duckdb")
    for leftover in (db_path, db_path.with_name(db_path.name + ".wal")):
        if leftover.exists():
            leftover.unlink()
    now_ns = time.time_ns()
    summary = build(db_path, now_ns=now_ns, seed=args.seed)
    print(
        f"demo: ingested {summary['accepted']} events into {db_path} "
        f"({summary['rejected']} rejected)\n",
        file=sys.stderr,
    )
    with Store(db_path) as store:
        data = incident.timeline_for(store, "allocation_id", FAILING_ALLOCATION)
        render.print_timeline(data)
        print()
        render.print_findings(queries.findings(store, now_ns)["findings"])
        print()
        render.print_latency(queries.latency(store)["phases"])
    if args.no_serve:
        return 0
    print(
        f"\nopen http://{args.host}:{args.port}/ (timeline JSON: "
        f"/v1/timeline?allocation_id={FAILING_ALLOCATION}); Ctrl-C stops",
        file=sys.stderr,
    )
    from correlator.cli import main

    return main(["--db", str(db_path), "serve", "--host", args.host, "--port", str(args.port)])
