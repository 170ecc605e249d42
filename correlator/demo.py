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
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import orjson

from agent_logging._render import rfc3339_ns

__all__ = ["FAILING_ALLOCATION", "build", "run", "write_evidence"]

FAILING_ALLOCATION: Final = "a-7f3c"
STUCK_ALLOCATION: Final = "a-51d2"
DRIFTING_ALLOCATION: Final = "a-9e01"
_S: Final = 1_000_000_000
_API_SKEW_NS: Final = 1_200_000_000


class _Writer:
    """Collects lines per evidence file."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}

    def line(self, name: str, text: str) -> None:
        self.files.setdefault(name, []).append(text)

    def json(self, name: str, record: dict[str, Any]) -> None:
        self.line(name, orjson.dumps(record).decode())

    def transition(
        self,
        ts_ns: int,
        allocation: str,
        states: tuple[str | None, str],
        attributes: dict[str, str],
        **ids: str,
    ) -> None:
        """One allocation state transition, as the workflow worker records it."""
        self.json(
            "workflow.ndjson",
            {
                "ts": rfc3339_ns(ts_ns),
                "entity_kind": "allocation",
                "entity_id": allocation,
                "from": states[0],
                "to": states[1],
                "attributes": attributes,
                "allocation_id": allocation,
                **ids,
                "service": "workflow-worker",
            },
        )


def _record(
    ts_ns: int, service: str, layer: str, event: str, level: str = "info", **fields: Any
) -> dict[str, Any]:
    return {
        "ts": rfc3339_ns(ts_ns),
        "level": level,
        "event": event,
        "service": service,
        "layer": layer,
        "env": "demo",
        **fields,
    }


def _nginx_time(ts_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(ts_ns // _S))


def _nginx_error_time(ts_ns: int) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(ts_ns // _S))


def _pg_time(ts_ns: int) -> str:
    seconds = ts_ns // _S
    return (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
        + f".{(ts_ns % _S) // 1_000_000:03d} UTC"
    )


def _sql_comment(**ids: str) -> str:
    return "/*" + ",".join(f"{k}='{v}'" for k, v in sorted(ids.items())) + "*/"


def _statement(state: str, allocation: str, **ids: str) -> str:
    """A ``log_min_duration_statement`` line for an UPDATE carrying a sqlcommenter comment."""
    update = f"UPDATE allocations SET state = '{state}' WHERE id = '{allocation}'"  # noqa: S608 - log text, never run
    return f"duration: 1.204 ms  statement: {update} {_sql_comment(**ids)}"


def _request(
    w: _Writer,
    rng: random.Random,
    ts_ns: int,
    *,
    method: str,
    path: str,
    status: int,
    ids: dict[str, str],
    upstream_status: int | None = None,
    duration_s: float = 0.08,
    api: bool = True,
) -> str:
    """One request through the ingress to the API: access lines on both sides."""
    correlation_id = ids.setdefault("correlation_id", f"c-{rng.getrandbits(48):012x}")
    trace_id = f"{rng.getrandbits(128):032x}"
    span_id = f"{rng.getrandbits(64):016x}"
    api_end = ts_ns - int(0.004 * _S)
    if api:
        w.json(
            "agent.ndjson",
            _record(
                api_end + _API_SKEW_NS,
                "provisioning-api",
                "api",
                "request",
                "error" if status >= 500 else "info",
                method=method,
                path=path,
                status=status,
                duration_s=round(duration_s - 0.01, 4),
                trace_id=trace_id,
                span_id=span_id,
                logger="agent_logging.access",
                **ids,
            ),
        )
    w.json(
        "nginx-access.log",
        {
            "time_iso8601": _nginx_time(ts_ns),
            "msec": f"{ts_ns / _S:.3f}",
            "request_id": f"{rng.getrandbits(128):032x}",
            "remote_addr": "10.20.0.5",
            "request_method": method,
            "request_uri": path,
            "status": str(status),
            "request_time": f"{duration_s:.3f}",
            "upstream_status": str(upstream_status or status),
            "upstream_addr": "127.0.0.1:8001",
            "http_x_correlation_id": correlation_id,
            "server_name": "api.provisioning.local",
        },
    )
    return correlation_id


def _healthy(
    w: _Writer,
    rng: random.Random,
    start_ns: int,
    allocation: str,
    node: str,
    instance: str,
    provider: str,
    job_id: int,
) -> None:
    workflow = f"wf-{allocation}-provision"
    ids = {"allocation_id": allocation, "node_id": node}
    _request(
        w,
        rng,
        start_ns + int(0.1 * _S),
        method="POST",
        path=f"/v1/allocations/{allocation}",
        status=202,
        ids=dict(ids),
    )
    phases = {
        "aap": (rng.uniform(240, 420), rng.uniform(60, 120)),
        "eda": (rng.uniform(90, 200), rng.uniform(30, 70)),
    }[provider]
    provision_s, release_s = phases
    t = start_ns
    w.transition(
        t,
        allocation,
        (None, "requested"),
        {"provider": provider},
        workflow_id=workflow,
        node_id=node,
    )
    t += int(2 * _S)
    w.transition(
        t,
        allocation,
        ("requested", "provisioning"),
        {"provider": provider},
        workflow_id=workflow,
        node_id=node,
    )
    w.json(
        "postgres.json",
        {
            "timestamp": _pg_time(t + 5_000_000),
            "user": "provisioning",
            "dbname": "provisioning",
            "pid": 4242,
            "error_severity": "LOG",
            "message": _statement(
                "provisioning", allocation, allocation_id=allocation, workflow_id=workflow
            ),
            "application_name": "workflow-worker",
            "backend_type": "client backend",
        },
    )
    job = _job(
        provider,
        job_id,
        allocation,
        workflow,
        created=t,
        started=t + int(3 * _S),
        finished=t + int(provision_s * _S),
        status="successful" if provider == "aap" else "completed",
    )
    w.line("jobs.ndjson", orjson.dumps(job).decode())
    w.json(
        "agent.ndjson",
        _record(
            t + int(10 * _S),
            "node-agent",
            "node",
            "task claimed",
            task="provision",
            allocation_id=allocation,
            workflow_id=workflow,
            node_id=node,
            node_instance_id=instance,
        ),
    )
    w.json(
        "agent.ndjson",
        _record(
            t + int((provision_s - 5) * _S),
            "node-agent",
            "node",
            "task finished",
            task="provision",
            allocation_id=allocation,
            workflow_id=workflow,
            node_id=node,
            node_instance_id=instance,
        ),
    )
    t += int(provision_s * _S)
    w.transition(
        t,
        allocation,
        ("provisioning", "active"),
        {"provider": provider, "occupancy": "tenant"},
        workflow_id=workflow,
        node_id=node,
    )
    if rng.random() < 0.5:
        release = f"wf-{allocation}-release"
        t += int(rng.uniform(600, 1800) * _S)
        w.transition(
            t,
            allocation,
            ("active", "releasing"),
            {"provider": provider},
            workflow_id=release,
            node_id=node,
        )
        t += int(release_s * _S)
        w.transition(
            t,
            allocation,
            ("releasing", "released"),
            {"provider": provider, "occupancy": "free"},
            workflow_id=release,
            node_id=node,
        )


def _job(
    provider: str,
    job_id: int,
    allocation: str,
    workflow: str,
    *,
    created: int,
    started: int,
    finished: int | None,
    status: str,
) -> dict[str, Any]:
    if provider == "aap":
        return {
            "id": job_id,
            "type": "job",
            "name": "provision-baremetal",
            "status": status,
            "created": rfc3339_ns(created),
            "started": rfc3339_ns(started),
            "finished": rfc3339_ns(finished) if finished else None,
            "elapsed": round(((finished or started) - started) / _S, 3),
            "failed": status in ("failed", "error"),
            "job_explanation": "Job was canceled by the provisioning operator"
            if status == "canceled"
            else "",
            "launch_type": "manual",
            "job_template": 12,
            "extra_vars": orjson.dumps(
                {"allocation_id": allocation, "workflow_id": workflow}
            ).decode(),
        }
    return {
        "id": job_id,
        "name": f"provision-{allocation}",
        "status": status,
        "activation_id": 3,
        "started_at": rfc3339_ns(started),
        "ended_at": rfc3339_ns(finished) if finished else None,
        "created_at": rfc3339_ns(created),
        "extra_vars": orjson.dumps({"allocation_id": allocation, "workflow_id": workflow}).decode(),
    }


def write_evidence(directory: Path, *, now_ns: int, seed: int = 7) -> list[tuple[str, Path]]:
    """Write the demo's evidence files into ``directory``; returns (source kind, path) pairs."""
    rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
    w = _Writer()
    base = now_ns - 3 * 3600 * _S
    for n in range(8):
        provider = "aap" if n % 2 == 0 else "eda"
        _healthy(
            w,
            rng,
            base + n * 600 * _S,
            f"a-{100 + n}",
            f"n-{20 + n % 3}",
            f"ni-{n % 3 + 1}",
            provider,
            4600 + n,
        )
    _failing(w, rng, now_ns - 50 * 60 * _S)
    _stuck(w, rng, now_ns - 2 * 3600 * _S)
    _drifting(w, rng, now_ns - 70 * 60 * _S, now_ns)
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


def _failing(w: _Writer, rng: random.Random, t: int) -> None:
    allocation, node = FAILING_ALLOCATION, "n-17"
    workflow = f"wf-{allocation}-provision"
    # The node was reimaged a little earlier: ni-3 before, ni-4 after.
    w.json(
        "agent.ndjson",
        _record(
            t - 900 * _S,
            "node-agent",
            "node",
            "reimage requested by inventory",
            node_id=node,
            node_instance_id="ni-3",
        ),
    )
    w.json(
        "agent.ndjson",
        _record(
            t - 600 * _S,
            "node-agent",
            "node",
            "agent started on a fresh image",
            node_id=node,
            node_instance_id="ni-4",
        ),
    )
    ids = {"allocation_id": allocation, "node_id": node}
    correlation = _request(
        w, rng, t, method="POST", path=f"/v1/allocations/{allocation}", status=202, ids=dict(ids)
    )
    w.transition(
        t + 1 * _S,
        allocation,
        ("requested", "provisioning"),
        {"provider": "aap"},
        workflow_id=workflow,
        node_id=node,
        correlation_id=correlation,
    )
    w.json(
        "agent.ndjson",
        _record(
            t + 2 * _S,
            "workflow-worker",
            "workflow",
            "calling node agent deploy endpoint",
            allocation_id=allocation,
            workflow_id=workflow,
            node_id=node,
            correlation_id=correlation,
        ),
    )
    # The ingress cannot hand the call to the node agent: its upstream certificate expired.
    failed_at = t + int(2.05 * _S)
    w.line(
        "nginx-error.log",
        f"{_nginx_error_time(failed_at)} [error] 2211#2211: *4711 SSL_do_handshake() failed "
        "(SSL: error:0A000086:SSL routines::certificate verify failed:certificate has expired) "
        "while SSL handshaking to upstream, client: 10.20.0.7, server: agents.provisioning.local, "
        f'request: "POST /v1/nodes/{node}/deploy HTTP/1.1", '
        f'upstream: "https://10.30.0.17:9443/v1/nodes/{node}/deploy", '
        'host: "agents.provisioning.local"',
    )
    w.json(
        "nginx-access.log",
        {
            "time_iso8601": _nginx_time(failed_at),
            "msec": f"{failed_at / _S:.3f}",
            "request_id": f"{rng.getrandbits(128):032x}",
            "remote_addr": "10.20.0.7",
            "request_method": "POST",
            "request_uri": f"/v1/nodes/{node}/deploy",
            "status": "502",
            "request_time": "0.031",
            "upstream_status": "502",
            "upstream_addr": "10.30.0.17:9443",
            "http_x_correlation_id": correlation,
            "server_name": "agents.provisioning.local",
        },
    )
    error = {
        "type": "RuntimeError",
        "message": "provisioning failed",
        "owner_layer": "unknown",
        "chain": [
            {"type": "RuntimeError", "message": "provisioning failed"},
            {"type": "httpx.HTTPStatusError", "message": "Server error '502 Bad Gateway'"},
        ],
    }
    w.json(
        "agent.ndjson",
        _record(
            t + int(2.2 * _S),
            "workflow-worker",
            "workflow",
            "deploy step failed",
            "error",
            allocation_id=allocation,
            workflow_id=workflow,
            node_id=node,
            correlation_id=correlation,
            error=error,
        ),
    )
    w.transition(
        t + int(2.4 * _S),
        allocation,
        ("provisioning", "provision_failed"),
        {"provider": "aap", "reason": "deploy step failed"},
        workflow_id=workflow,
        node_id=node,
        correlation_id=correlation,
    )
    w.json(
        "postgres.json",
        {
            "timestamp": _pg_time(t + int(2.45 * _S)),
            "user": "provisioning",
            "dbname": "provisioning",
            "pid": 4243,
            "error_severity": "LOG",
            "message": _statement(
                "provision_failed",
                allocation,
                allocation_id=allocation,
                correlation_id=correlation,
                workflow_id=workflow,
            ),
            "application_name": "workflow-worker",
            "backend_type": "client backend",
        },
    )
    # The tenant polls the API, which only knows the wrapped error.
    _request(
        w,
        rng,
        t + 30 * _S,
        method="GET",
        path=f"/v1/allocations/{allocation}",
        status=500,
        ids={"allocation_id": allocation},
        duration_s=0.02,
    )
    w.json(
        "agent.ndjson",
        _record(
            t + 30 * _S + _API_SKEW_NS - int(0.01 * _S),
            "provisioning-api",
            "api",
            "provisioning failed",
            "error",
            allocation_id=allocation,
            error={
                "type": "ProvisioningError",
                "message": "provisioning failed",
                "owner_layer": "unknown",
                "chain": [{"type": "ProvisioningError", "message": "provisioning failed"}],
            },
        ),
    )


def _stuck(w: _Writer, rng: random.Random, t: int) -> None:
    allocation, node = STUCK_ALLOCATION, "n-22"
    workflow = f"wf-{allocation}-release"
    _healthy(w, rng, t - 5 * 3600 * _S, allocation, node, "ni-9", "aap", 4590)
    w.transition(
        t,
        allocation,
        ("active", "releasing"),
        {"provider": "aap"},
        workflow_id=workflow,
        node_id=node,
    )
    w.json(
        "agent.ndjson",
        _record(
            t + 40 * _S,
            "node-agent",
            "node",
            "disk wipe failed",
            "error",
            allocation_id=allocation,
            workflow_id=workflow,
            node_id=node,
            node_instance_id="ni-9",
            error={
                "type": "subprocess.CalledProcessError",
                "message": "Command '['blkdiscard', '/dev/nvme0n1']' returned non-zero exit "
                "status 1.",
                "owner_layer": "node",
                "chain": [],
            },
        ),
    )
    w.transition(
        t + 45 * _S,
        allocation,
        ("releasing", "release_failed"),
        {"provider": "aap", "occupancy": "cleanup"},
        workflow_id=workflow,
        node_id=node,
    )


def _drifting(w: _Writer, rng: random.Random, t: int, now_ns: int) -> None:
    allocation, node, job_id = DRIFTING_ALLOCATION, "n-31", 4711
    workflow = f"wf-{allocation}-provision"
    w.transition(
        t,
        allocation,
        ("requested", "provisioning"),
        {"provider": "aap"},
        workflow_id=workflow,
        node_id=node,
    )
    canceled = now_ns - 40 * 60 * _S
    w.line(
        "jobs.ndjson",
        orjson.dumps(
            _job(
                "aap",
                job_id,
                allocation,
                workflow,
                created=t + 5 * _S,
                started=t + 8 * _S,
                finished=canceled,
                status="canceled",
            )
        ).decode(),
    )
    items = []
    for snapshot_ns, state, message in (
        (t + 10 * _S, "Running", "job 4711 running"),
        (now_ns - 5 * 60 * _S, "Running", "job 4711 running"),
    ):
        items.append(
            {
                "apiVersion": "provisioning.example.com/v1",
                "kind": "ProvisionRequest",
                "metadata": {
                    "name": f"prov-{allocation}",
                    "namespace": "tenants",
                    "resourceVersion": str(snapshot_ns // _S),
                    "creationTimestamp": rfc3339_ns(t)[:19] + "Z",
                    "labels": {"provisioning.example.com/allocation-id": allocation},
                },
                "spec": {"nodeId": node},
                "status": {
                    "provisionJob": {
                        "id": str(job_id),
                        "state": state,
                        "message": message,
                        "lastTransitionTime": rfc3339_ns(snapshot_ns),
                    }
                },
            }
        )
    w.line(
        "k8s-provisionrequests.json",
        orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}).decode(),
    )


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
        render.print_findings(queries.findings(store, now_ns))
        print()
        render.print_latency(queries.latency(store))
    if args.no_serve:
        return 0
    print(
        f"\nopen http://{args.host}:{args.port}/ (timeline JSON: "
        f"/v1/timeline?allocation_id={FAILING_ALLOCATION}); Ctrl-C stops",
        file=sys.stderr,
    )
    from correlator.cli import main

    return main(["--db", str(db_path), "serve", "--host", args.host, "--port", str(args.port)])
