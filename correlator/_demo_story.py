"""The allocations of the demo incident, each as the evidence its layers would write.

:func:`healthy` provisions one allocation normally through AAP or EDA (and half the time
releases it); :func:`failing` is :data:`FAILING_ALLOCATION`, whose deploy call fails at the
ingress on an expired upstream certificate right after its node was reimaged; :func:`stuck` is
:data:`STUCK_ALLOCATION`, whose release fails and leaves its node fenced; :func:`drifting` is
:data:`DRIFTING_ALLOCATION`, whose AAP job was canceled while its custom resource still says
``Running``. :mod:`correlator.demo` tells the whole story and decides when each happens; the
records take their shapes from :mod:`correlator._demo_evidence`.
"""

from __future__ import annotations

import random
from typing import Final

import orjson

from agent_logging.schema import rfc3339_ns
from correlator._demo_evidence import (
    API_SKEW_NS,
    Writer,
    nginx_error_time,
    nginx_time,
    pg_time,
    provider_job,
    record,
    request,
    statement,
)

__all__ = [
    "DRIFTING_ALLOCATION",
    "FAILING_ALLOCATION",
    "STUCK_ALLOCATION",
    "drifting",
    "failing",
    "healthy",
    "stuck",
]

FAILING_ALLOCATION: Final = "a-7f3c"
STUCK_ALLOCATION: Final = "a-51d2"
DRIFTING_ALLOCATION: Final = "a-9e01"
_S: Final = 1_000_000_000


def healthy(
    w: Writer,
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
    request(
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
            "timestamp": pg_time(t + 5_000_000),
            "user": "provisioning",
            "dbname": "provisioning",
            "pid": 4242,
            "error_severity": "LOG",
            "message": statement(
                "provisioning", allocation, allocation_id=allocation, workflow_id=workflow
            ),
            "application_name": "workflow-worker",
            "backend_type": "client backend",
        },
    )
    job = provider_job(
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
        record(
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
        record(
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


def failing(w: Writer, rng: random.Random, t: int) -> None:
    allocation, node = FAILING_ALLOCATION, "n-17"
    workflow = f"wf-{allocation}-provision"
    # The node was reimaged a little earlier: ni-3 before, ni-4 after.
    w.json(
        "agent.ndjson",
        record(
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
        record(
            t - 600 * _S,
            "node-agent",
            "node",
            "agent started on a fresh image",
            node_id=node,
            node_instance_id="ni-4",
        ),
    )
    ids = {"allocation_id": allocation, "node_id": node}
    correlation = request(
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
        record(
            # Before the second nginx's error line is stamped with (its times carry no fraction):
            # the call comes before the failure it meets, in every run.
            t + int(1.9 * _S),
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
        f"{nginx_error_time(failed_at)} [error] 2211#2211: *4711 SSL_do_handshake() failed "
        "(SSL: error:0A000086:SSL routines::certificate verify failed:certificate has expired) "
        "while SSL handshaking to upstream, client: 10.20.0.7, server: agents.provisioning.local, "
        f'request: "POST /v1/nodes/{node}/deploy HTTP/1.1", '
        f'upstream: "https://10.30.0.17:9443/v1/nodes/{node}/deploy", '
        'host: "agents.provisioning.local"',
    )
    w.json(
        "nginx-access.log",
        {
            "time_iso8601": nginx_time(failed_at),
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
        record(
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
            "timestamp": pg_time(t + int(2.45 * _S)),
            "user": "provisioning",
            "dbname": "provisioning",
            "pid": 4243,
            "error_severity": "LOG",
            "message": statement(
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
    request(
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
        record(
            t + 30 * _S + API_SKEW_NS - int(0.01 * _S),
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


def stuck(w: Writer, rng: random.Random, t: int) -> None:
    allocation, node = STUCK_ALLOCATION, "n-22"
    workflow = f"wf-{allocation}-release"
    healthy(w, rng, t - 5 * 3600 * _S, allocation, node, "ni-9", "aap", 4590)
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
        record(
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


def drifting(w: Writer, rng: random.Random, t: int, now_ns: int) -> None:
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
            provider_job(
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
