"""Generate the ``n-*`` incidents of tests/incidents/ by running real programs.

Usage (as root or any user that can ``runuser -u postgres``), from the repository root::

    .venv/bin/python tests/incidents/_make/n_cases.py [CASE...]     # default: every case

Each case runs nginx / PostgreSQL / the small services of ``n_api.py`` on 127.0.0.1 in real
time (tens of seconds), makes real requests, and writes its evidence files and ``truth.json``
into ``tests/incidents/<case>/`` (the folder is replaced). Time stamps are those of the run.
Needs: Debian nginx, postgresql-15, curl, Go (``golang-go``) and a JDK (``javac``), the
project's virtualenv (psycopg, httpx, cryptography).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
from n_api import ProvisioningApi, Workflow
from n_lab import (
    CA,
    Blackhole,
    HttpServer,
    JsonLog,
    Lab,
    NxdomainDns,
    chain_of,
    curl_request,
    error_of,
    free_port,
    go_request,
    java_request,
    lab,
    port_free,
    stack_of,
    tagged,
    versions,
    write_truth,
)

CASES: dict[str, Callable[[Lab], dict[str, Any]]] = {}


class ProvisionError(Exception):
    """The workflow worker's wrapper for a failed provision."""


class ReservationError(Exception):
    """The workflow worker could not reserve a node."""


# As the workflow worker's own package names them in its logs.
ProvisionError.__module__ = ReservationError.__module__ = "workflow_worker.errors"


def case(name: str) -> Callable[[Callable[[Lab], dict[str, Any]]], Callable[[Lab], dict[str, Any]]]:
    def register(fn: Callable[[Lab], dict[str, Any]]) -> Callable[[Lab], dict[str, Any]]:
        CASES[name] = fn
        return fn

    return register


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def server_block(
    port: int, cert: Any, key: Any, locations: str, name: str = "prov-ingress.dc1.internal"
) -> str:
    return f"""
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name {name};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        add_header X-Request-ID $request_id always;
{locations}
    }}"""


def proxied(upstream: str, extra: str = "", read_timeout_s: int = 10) -> str:
    return f"""
        location /v1/ {{
            proxy_pass {upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Request-ID $request_id;
            proxy_connect_timeout 2s;
            proxy_read_timeout {read_timeout_s}s;
{extra}
        }}"""


# ============================================================================ cert


@case("n-cert-upstream-expired")
def cert_upstream_expired(lab: Lab) -> dict[str, Any]:
    """nginx verifies the API's backend certificate; it expired: every claim is a 502."""
    ca = CA(lab.root / "pki", "Prov Internal Issuing CA 2")
    ingress_crt, ingress_key = ca.issue("ingress", ["prov-ingress.dc1.internal", "127.0.0.1"])
    api_crt, api_key = ca.issue(
        "prov-api",
        ["prov-api.svc.internal"],
        not_before=now() - dt.timedelta(days=90),
        not_after=now() - dt.timedelta(hours=3, minutes=12),
    )
    port, api_port = free_port(), free_port()
    alloc, node, ni, wf = "a-51d0e7", "r07-n12", "ni-r07-n12-20261104", "wf-prov-7be1"
    prev_alloc = "a-3c22f0"
    other_alloc, other_node, other_wf = "a-9e41b2", "r07-n13", "wf-prov-7bd9"

    agent = lab.log(
        "bmagent-r07-n12.jsonl",
        service="bmagent",
        layer="node",
        style="zap",
        skew_s=23.4,
        node_id=node,
        node_instance_id=ni,
    )
    agent2 = lab.log(
        "bmagent-r07-n13.jsonl",
        service="bmagent",
        layer="node",
        style="zap",
        skew_s=-3.9,
        node_id=other_node,
        node_instance_id="ni-r07-n13-20261021",
    )
    worker = lab.log(
        "workflow-worker.jsonl", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    api_log = lab.log("provisioning-api.jsonl", service="provisioning-api", layer="api", style="py")

    def api(request: Any) -> tuple[int, dict[str, Any] | None]:  # never reached through nginx
        api_log("info", "request", method=request.method, path=request.path, status=404)
        return 404, {"detail": "no pending task"}

    server = HttpServer(api_port, api, tls=(api_crt, api_key))
    lab.defer(server.stop)
    api_log("info", "Uvicorn running on https://0.0.0.0:8443 (Press CTRL+C to quit)")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(
        port,
        ingress_crt,
        ingress_key,
        proxied(
            "https://prov_api",
            f"""
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate {ca.pem};
            proxy_ssl_name prov-api.svc.internal;
            proxy_ssl_server_name on;""",
        ),
    )
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"

    # Earlier: the previous tenant of r07-n12 was released cleanly (before the cert lapsed the
    # agent had reported it; here only its node-side records remain in the window).
    agent(
        "info",
        "disks wiped",
        caller="task/wipe.go:77",
        allocation_id=prev_alloc,
        devices=4,
        workflow_id="wf-rel-7b90",
        ago_s=212,
    )
    agent(
        "info",
        "deprovision finished",
        caller="task/deprovision.go:212",
        allocation_id=prev_alloc,
        workflow_id="wf-rel-7b90",
        task_id=8811,
        duration_s=41.7,
        ago_s=170,
    )
    # The other node's tenant: its own failure (disk write), a node problem.
    agent2(
        "info",
        "task claimed",
        caller="agent/claim.go:64",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        task_id=8815,
        kind="provision",
    )
    dd = subprocess.run(
        ["dd", "if=/dev/zero", "of=/dev/full", "bs=1M", "count=4"],
        capture_output=True,
        text=True,
        check=False,
    )
    agent2(
        "error",
        "write image failed",
        caller="task/image.go:131",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        task_id=8815,
        error=f"exit status {dd.returncode}: {dd.stderr.strip().splitlines()[0]}",
    )
    worker(
        "error",
        "provision failed",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=other_node,
        error={
            "type": "TaskFailed",
            "message": f"task 8815 failed on {other_node}: write image failed: "
            f"exit status {dd.returncode}",
        },
    )
    transitions(
        other_alloc,
        "provisioning",
        "provision_failed",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=other_node,
    )

    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        tenant="tenant-green",
        image="rhel-9.4-x86_64",
    )
    transitions(
        alloc,
        "requested",
        "provisioning",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"image": "rhel-9.4-x86_64"},
    )
    worker(
        "info",
        "task queued",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=8820,
        kind="provision",
    )
    delay = 1.0
    for attempt in range(1, 5):
        result = go_request(
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            ca=ca.pem,
            body={"node_instance_id": ni, "allocation_id": alloc, "task_id": 8820},
            timeout_s=8,
            headers={"Authorization": "Bearer agt.r07.v41"},
        )
        rid = (result.get("headers") or {}).get("x-request-id")
        status = result.get("status_text") or result.get("error")
        agent(
            "warn",
            "claim failed",
            caller="agent/claim.go:71",
            correlation_id=rid,
            allocation_id=alloc,
            task_id=8820,
            attempt=attempt,
            error=f"unexpected status {status}",
            backoff_s=delay,
        )
        time.sleep(delay)
        delay *= 2
    agent(
        "error",
        "claim loop: giving up after 4 attempts, next poll in 60s",
        caller="agent/claim.go:88",
        allocation_id=alloc,
        task_id=8820,
        error="unexpected status 502 Bad Gateway",
    )
    time.sleep(2)
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionTimeout",
            "message": f"task 8820 not claimed by {node} within 30s",
        },
    )
    transitions(
        alloc,
        "provisioning",
        "provision_failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"reason": "task not claimed"},
    )
    nginx.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    v = versions()
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "cert",
        "first_failure_contains": "certificate has expired",
        "excluded": [f"allocation_id={prev_alloc}", f"allocation_id={other_alloc}"],
        "notes": (
            "The provisioning API's backend certificate (prov-api.svc.internal) expired about "
            "3 h before the incident; nginx verifies upstream certificates (proxy_ssl_verify on), "
            "so every call to the API through the ingress failed the upstream TLS handshake and "
            "nginx answered 502. The Go node agent on r07-n12 (clock 23 s fast) could not claim "
            f"the provision task of {alloc}; it logged only 'unexpected status 502 Bad Gateway'. "
            "The workflow worker then failed the provision with a timeout (a wrapper). The API "
            "itself never saw a request. Noise: the previous tenant of r07-n12 "
            f"({prev_alloc}, released cleanly) and another node's allocation ({other_alloc}) that "
            "failed on its own disk write (a node problem, excluded). "
            f"Produced by n_cases.py: {v['nginx']} (JSON log_format, error_log warn) as a TLS "
            "ingress proxying to a Python https server holding the expired certificate "
            "(cryptography-issued from a local CA); requests by a Go 1.19 net/http client "
            "(n_goclient.go), whose response status and X-Request-ID the agent records carry; "
            "the agent/worker JSON lines are written by the generator in zap / python-json "
            "style with the real texts (the dd error is from a real `dd of=/dev/full`)."
        ),
    }


# ============================================================================ helpers (2)


def py_client(ca: Any, agent: str = "prov-agent/1.8.2") -> httpx.Client:
    context = ssl.create_default_context(cafile=str(ca))
    return httpx.Client(
        verify=context,
        timeout=10.0,
        headers={"User-Agent": f"{agent} python-httpx/{httpx.__version__}"},
    )


def py_call(
    client: httpx.Client, method: str, url: str, **kwargs: Any
) -> tuple[Any, Exception | None, str | None]:
    """A request as a Python service makes it: ``raise_for_status`` and all."""
    try:
        response = client.request(method, url, **kwargs)
        rid = response.headers.get("x-request-id")
        response.raise_for_status()
        return response, None, rid
    except httpx.HTTPStatusError as exc:
        return exc.response, exc, exc.response.headers.get("x-request-id")
    except httpx.HTTPError as exc:
        return None, exc, None


def py_error(exc: BaseException) -> dict[str, Any]:
    error = error_of(exc)
    chain = chain_of(exc)
    if chain:
        error["chain"] = chain
    return error


def start_api(
    lab: Lab, dsn: str, log: JsonLog, **kwargs: Any
) -> tuple[int, ProvisioningApi, HttpServer]:
    port = free_port()
    api = ProvisioningApi(log, dsn, **kwargs)
    server = HttpServer(port, api)
    lab.defer(server.stop)
    log("info", f"Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)")
    return port, api, server


def ingress_pki(lab: Lab, ca_name: str = "Prov Internal Issuing CA 2") -> tuple[CA, Any, Any]:
    ca = CA(lab.root / "pki", ca_name)
    crt, key = ca.issue("ingress", ["prov-ingress.dc1.internal", "127.0.0.1"])
    return ca, crt, key


def tool_versions(*names: str) -> str:
    v = versions()
    return "; ".join(v[n] for n in names)


# ============================================================================ cert (2, 3)


@case("n-cert-client-expired")
def cert_client_expired(lab: Lab) -> dict[str, Any]:
    """The ingress's own certificate lapsed: TLS clients refuse it; probes with -k stay green."""
    ca = CA(lab.root / "pki", "Prov Internal Issuing CA 2")
    crt, key = ca.issue(
        "ingress",
        ["prov-ingress.dc1.internal", "127.0.0.1"],
        not_before=now() - dt.timedelta(days=90),
        not_after=now() - dt.timedelta(minutes=41),
    )
    port = free_port()
    alloc, node, ni, wf = "a-0d9f3a", "r11-n04", "ni-r11-n04-20261112", "wf-prov-80c4"
    other_alloc, other_node, other_wf = "a-77e0c1", "r11-n05", "wf-prov-80c1"
    agent = lab.log(
        "prov-agent-r11-n04.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=-17.2,
        node_id=node,
        node_instance_id=ni,
    )
    agent5 = lab.log(
        "prov-agent-r11-n05.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=2.1,
        node_id=other_node,
        node_instance_id="ni-r11-n05-20261030",
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="structlog"
    )
    transitions = lab.transitions("workflow-transitions.ndjson", "workflow-worker")
    nginx = lab.nginx(error_level="info")
    body = server_block(
        port,
        crt,
        key,
        """
        location = /healthz { return 200 "ok\\n"; }
        location /v1/ { return 503; }""",
    )
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"

    # The other node's provision failed earlier on a missing tool in its image (deploy).
    agent5(
        "info",
        "task claimed",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        task_id=5102,
        ago_s=95,
    )
    try:
        subprocess.run(["/usr/local/sbin/mkfs.xfs", "-f", "/dev/sdb1"], check=True)
    except FileNotFoundError as exc:
        agent5(
            "error",
            "task failed",
            allocation_id=other_alloc,
            workflow_id=other_wf,
            task_id=5102,
            error=py_error(exc),
            stack=stack_of(exc),
            ago_s=93,
        )
    worker(
        "error",
        "provision failed",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=other_node,
        error={"type": "TaskFailed", "message": "task 5102 reported failure"},
        ago_s=92,
    )
    transitions(
        other_alloc,
        "provisioning",
        "provision_failed",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=other_node,
        ago_s=92,
    )

    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        image="ubuntu-24.04",
    )
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    worker("info", "task queued", allocation_id=alloc, workflow_id=wf, node_id=node, task_id=5107)
    client = py_client(ca.pem)
    for attempt in range(1, 4):
        # The blackbox probe (curl -k) keeps reporting the ingress healthy.
        curl_request(
            ["-ks", "-o", "/dev/null", "-A", "blackbox-exporter/0.25.0", f"{base}/healthz"]
        )
        _, exc, _ = py_call(
            client,
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            json={"node_instance_id": ni, "allocation_id": alloc, "task_id": 5107},
        )
        assert exc is not None
        agent(
            "warning" if attempt < 3 else "error",
            "claim request failed"
            + (", retrying" if attempt < 3 else ", giving up until next poll"),
            allocation_id=alloc,
            task_id=5107,
            attempt=attempt,
            error=py_error(exc),
        )
        time.sleep(2.0 * attempt)
    curl_request(["-ks", "-o", "/dev/null", "-A", "blackbox-exporter/0.25.0", f"{base}/healthz"])
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionTimeout",
            "message": f"node {node} did not claim task 5107 within 20s",
        },
    )
    transitions(
        alloc,
        "provisioning",
        "provision_failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"reason": "agent_timeout"},
    )
    nginx.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "cert",
        "first_failure_contains": "expired",
        "excluded": [f"allocation_id={other_alloc}"],
        "notes": (
            "The ingress's own server certificate expired 41 minutes before the incident. The "
            f"Python node agent on {node} (clock 17 s slow) verifies it and every claim failed the "
            "TLS handshake (httpx.ConnectError over ssl.SSLCertVerificationError 'certificate "
            "has expired'); nginx never saw a request, only logged the client's alert at info "
            "level. The blackbox probe uses curl -k, so the access log shows only healthy "
            "/healthz 200s. The workflow worker gave up with a timeout wrapper. Noise: another "
            f"node's allocation {other_alloc} failed earlier on a missing mkfs.xfs (deploy), "
            "excluded. Produced by n_cases.py: "
            + tool_versions("nginx", "python", "httpx", "curl")
            + " (combined + $request_id, error_log info); the agent's error objects are the real "
            "httpx/ssl exceptions (type, message, chain innermost last); worker/agent JSON written "
            "by the generator; the mkfs.xfs error is a real FileNotFoundError."
        ),
    }


@case("n-cert-unknown-ca")
def cert_unknown_ca(lab: Lab) -> dict[str, Any]:
    """The AAP gateway was re-issued from a new CA; the Java orchestrator trusts only the old."""
    old_ca = CA(lab.root / "pki-old", "Prov Internal Issuing CA 2")
    new_ca = CA(lab.root / "pki-new", "Prov Internal Issuing CA 3")
    crt, key = new_ca.issue("aap-gw", ["aap-gw.prov.internal", "127.0.0.1"])
    port, aap_port = free_port(), free_port()
    alloc, node, wf = "a-c41e08", "r02-n15", "wf-prov-9a02"
    other_alloc, other_wf = "a-c3ff7d", "wf-rel-99f1"
    orch = lab.log("orchestrator.json", service="wf-orchestrator", layer="workflow", style="java")
    api = lab.log("provisioning-api.json", service="provisioning-api", layer="api", style="py")
    transitions = lab.transitions("workflow.jsonl", "wf-orchestrator")

    def aap(request: Any) -> tuple[int, dict[str, Any] | None]:
        return 201, {"job": 90412, "status": "pending"}

    server = HttpServer(aap_port, aap)
    lab.defer(server.stop)
    nginx = lab.nginx(error_level="info")
    body = f"""
    upstream aap_controller {{ server 127.0.0.1:{aap_port}; }}
""" + server_block(
        port,
        crt,
        key,
        """
        location /api/ {
            proxy_pass http://aap_controller;
            proxy_set_header X-Request-ID $request_id;
        }""",
        name="aap-gw.prov.internal",
    )
    nginx.start(body, access_format="combined_rid", port=port)
    url = f"https://127.0.0.1:{port}/api/v2/job_templates/42/launch/"
    # An operator's CLI, which already trusts the new CA, reaches the gateway fine.
    curl_request(
        [
            "-sS",
            "-o",
            "/dev/null",
            "--cacert",
            str(new_ca.pem),
            "-A",
            "awx-cli/24.6.1",
            f"https://127.0.0.1:{port}/api/v2/ping/",
        ]
    )

    # Noise: an operator tried to release another allocation while it was still provisioning.
    api(
        "info",
        "request",
        method="POST",
        path=f"/v1/allocations/{other_alloc}/release",
        status=409,
        duration_s=0.004,
        allocation_id=other_alloc,
        correlation_id="8b1f0c2ad94e4c0f9d3e5b7a6c1d2e3f",
        ago_s=30,
    )
    orch(
        "ERROR",
        f"release of {other_alloc} rejected",
        thread="release-exec-1",
        logger="c.p.orchestrator.ReleaseFlow",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        stack_trace=(
            "java.lang.IllegalStateException: cannot release allocation "
            + other_alloc
            + " in state PROVISIONING (expected ACTIVE)\n\tat c.p.orchestrator.ReleaseFlow"
            ".start(ReleaseFlow.java:58)\n\tat c.p.orchestrator.FlowRunner.run(FlowRunner"
            ".java:131)\n"
        ),
        ago_s=29,
    )

    api(
        "info",
        "allocation accepted",
        allocation_id=alloc,
        node_id=node,
        tenant="tenant-orange",
        correlation_id="f3a9d41e0b7c4d6a8e2f1c0b9a8d7e6f",
    )
    api(
        "info",
        "request",
        method="POST",
        path="/v1/allocations",
        status=202,
        duration_s=0.031,
        allocation_id=alloc,
        correlation_id="f3a9d41e0b7c4d6a8e2f1c0b9a8d7e6f",
    )
    orch(
        "INFO",
        f"starting provision flow for {alloc} on {node}",
        thread="provision-exec-3",
        logger="c.p.orchestrator.ProvisionFlow",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
    )
    transitions(
        alloc,
        "requested",
        "provisioning",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"provider": "aap"},
    )
    result: dict[str, Any] = {}
    for attempt in range(1, 4):
        result = java_request(
            "POST",
            url,
            ca=old_ca.pem,
            body={"extra_vars": {"allocation_id": alloc, "node_id": node}},
            timeout_s=5,
        )
        orch(
            "WARN",
            f"launch job template 42 failed (attempt {attempt}/3): {result['error']}",
            thread="provision-exec-3",
            logger="c.p.orchestrator.aap.AapClient",
            allocation_id=alloc,
            workflow_id=wf,
            node_id=node,
        )
        time.sleep(1.5 * attempt)
    orch(
        "ERROR",
        f"provision flow failed for {alloc}",
        thread="provision-exec-3",
        logger="c.p.orchestrator.ProvisionFlow",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        stack_trace=(
            "c.p.orchestrator.ProvisionException: launch of job template 42 failed after 3 "
            "attempts\n\tat c.p.orchestrator.ProvisionFlow.launch(ProvisionFlow.java:144)\n"
            "\tat c.p.orchestrator.ProvisionFlow.run(ProvisionFlow.java:87)\nCaused by: "
            + result.get("stack", "")
        ),
    )
    transitions(
        alloc,
        "provisioning",
        "provision_failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"provider": "aap", "reason": "job_launch_failed"},
    )
    api(
        "info",
        "request",
        method="GET",
        path=f"/v1/allocations/{alloc}",
        status=200,
        duration_s=0.006,
        allocation_id=alloc,
        correlation_id="0c5e2b9d7a1f4e3c8b6d5a4f3e2d1c0b",
    )
    nginx.stop()
    lab.save(nginx.access_snapshot, "nginx-gw-access.log")
    lab.save(nginx.error_snapshot, "nginx-gw-error.log")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "cert",
        "first_failure_contains": "PKIX path building failed",
        "excluded": [f"allocation_id={other_alloc}"],
        "notes": (
            "The AAP gateway's certificate was re-issued from a new internal CA (Issuing CA 3) "
            "while the Java workflow orchestrator's truststore still held only Issuing CA 2. "
            "Every job launch failed the TLS handshake with javax.net.ssl.SSLHandshakeException: "
            "PKIX path building failed (a cert problem on the client's trust side); the "
            "orchestrator wrapped it as ProvisionException and failed the allocation. The "
            "gateway logged only the client's alert (info) and no access line. Noise: an "
            f"operator's premature release of {other_alloc} (a workflow state conflict, 409), "
            "excluded. Produced by n_cases.py: "
            + tool_versions("nginx", "java")
            + " (java.net.http.HttpClient, NJavaClient.java; the WARN messages carry e.toString() "
            "and the ERROR's stack_trace the real printStackTrace of the failed call, under a "
            "hand-written wrapper frame); orchestrator records in logback-JSON style and API "
            "records written by the generator."
        ),
    }


# ============================================================================ ingress


@case("n-ingress-refused")
def ingress_refused(lab: Lab) -> dict[str, Any]:
    """A config push pointed the ingress at the API's old ports: refused, then no live upstreams."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="csvlog")
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, sqlcommenter=True)
    old1, old2 = free_port(), free_port()
    port = free_port()
    alloc, node, ni, wf = "a-2b7d91", "r02-n08", "ni-r02-n08-20261020", "wf-prov-a811"
    prev_alloc = "a-2b10c4"
    report_alloc = "a-1f0e55"
    agent = lab.log(
        "bmagent-r02-n08.ndjson",
        service="bmagent",
        layer="node",
        style="zap",
        skew_s=31.0,
        node_id=node,
        node_instance_id=ni,
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{
        server 127.0.0.1:{old1} max_fails=1 fail_timeout=30s;
        server 127.0.0.1:{old2} max_fails=1 fail_timeout=30s;
        keepalive 8;
    }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid_up", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())

    agent(
        "info",
        "deprovision finished",
        caller="task/deprovision.go:212",
        allocation_id=prev_alloc,
        workflow_id="wf-rel-a7f2",
        task_id=2290,
        ago_s=140,
    )
    # Noise in the DB: a report query for another allocation hits its statement timeout.
    with psycopg.connect(pg.dsn(), application_name="billing-report", autocommit=True) as conn:
        conn.execute("SET statement_timeout = '500ms'")
        with contextlib.suppress(psycopg.errors.QueryCanceled):
            conn.execute(
                tagged("SELECT pg_sleep(2), count(*) FROM allocations", allocation_id=report_alloc)
            )
    task = flow.create(alloc, node, wf)
    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=task,
    )
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    # Kubelet's probe goes straight to the pod: the API is up.
    httpx.get(f"http://127.0.0.1:{api_port}/healthz")
    api_log("info", "request", method="GET", path="/healthz", status=200, duration_s=0.0004)
    delay = 1.0
    for attempt in range(1, 6):
        result = go_request(
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            ca=ca.pem,
            body={"node_instance_id": ni, "allocation_id": alloc, "task_id": task},
            timeout_s=8,
            headers={"Authorization": "Bearer agt.r02.v12"},
        )
        rid = (result.get("headers") or {}).get("x-request-id")
        status = result.get("status_text") or result.get("error")
        agent(
            "warn",
            f"claim task {task}: unexpected status {status}",
            caller="agent/claim.go:71",
            correlation_id=rid,
            allocation_id=alloc,
            task_id=task,
            attempt=attempt,
        )
        time.sleep(delay)
        delay = min(delay * 2, 4)
    httpx.get(f"http://127.0.0.1:{api_port}/healthz")
    api_log("info", "request", method="GET", path="/healthz", status=200, duration_s=0.0003)
    state = flow.wait_task(task, 2)
    worker(
        "error",
        f"provision failed: task {task} still {state} after 20s (agent never claimed it)",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
    )
    with flow.connect() as conn:
        conn.execute(
            tagged(
                "UPDATE allocations SET state = 'provision_failed' WHERE id = %s",
                allocation_id=alloc,
                workflow_id=wf,
            ),
            (alloc,),
        )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "ingress",
        "first_failure_contains": "Connection refused",
        "excluded": [f"allocation_id={prev_alloc}", f"allocation_id={report_alloc}"],
        "notes": (
            "A configuration push left the ingress's upstream block pointing at two ports the "
            "API no longer listens on (the API itself was up: its direct /healthz probes answer "
            "200). nginx logged connect() failed (111: Connection refused) for both servers, "
            "marked them failed (max_fails=1) and then answered 'no live upstreams' 502s. The Go "
            f"node agent on {node} (clock 31 s fast) saw only 502s; the workflow failed the "
            "provision after its wait. Noise: the node's previous tenant "
            f"({prev_alloc}) and a billing report for {report_alloc} cancelled by "
            "statement_timeout in PostgreSQL (a db error of another allocation), excluded. "
            "Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go")
            + " (combined + $request_id + rt/us/ua/urt; csvlog); the API is n_api.py "
            "(http.server + psycopg) writing its own JSON lines; agent/worker JSON written by "
            "the generator with the Go client's real status text."
        ),
    }


@case("n-ingress-timeout-504")
def ingress_timeout(lab: Lab) -> dict[str, Any]:
    """After a reload the ingress proxies to a stale LB address that accepts and never answers."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="jsonlog", settings={"log_statement": "mod"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, sqlcommenter=False)
    stale = free_port()
    hole = Blackhole(stale)
    lab.defer(hole.stop)
    port = free_port()
    alloc, node, ni, wf = "a-6e03b2", "r05-n21", "ni-r05-n21-20261101", "wf-prov-b377"
    ok_alloc, ok_node, ok_wf = "a-6df911", "r05-n20", "wf-prov-b36c"
    agent = lab.log("bmagent-r05.ndjson", service="bmagent", layer="node", style="zap", skew_s=-8.5)
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    nginx = lab.nginx(error_level="notice")

    def conf(upstream_port: int) -> str:
        return f"""
    upstream prov_api {{ server 127.0.0.1:{upstream_port}; }}
""" + server_block(port, crt, key, proxied("http://prov_api", read_timeout_s=5))

    nginx.start(conf(api_port), access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    client = py_client(ca.pem, agent="workflow-worker/4.2.0")

    # Before the reload: another node's provision goes through end to end.
    ok_task = flow.create(ok_alloc, ok_node, ok_wf)
    worker(
        "info", "provision requested", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node
    )
    r = go_request("POST", f"{base}/v1/nodes/{ok_node}/tasks/claim", ca=ca.pem, body={})
    agent(
        "info",
        "task claimed",
        caller="agent/claim.go:64",
        node_id=ok_node,
        correlation_id=r["headers"].get("x-request-id"),
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
    )
    time.sleep(1)
    r = go_request(
        "POST",
        f"{base}/v1/tasks/{ok_task}/result",
        ca=ca.pem,
        body={"ok": True, "allocation_id": ok_alloc, "node_id": ok_node},
    )
    agent(
        "info",
        "task result reported",
        caller="agent/report.go:40",
        node_id=ok_node,
        correlation_id=r["headers"].get("x-request-id"),
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
        status=r.get("status"),
    )
    worker("info", "provision finished", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node)

    nginx.reload(conf(stale), access_format="json_ingress")
    task = flow.create(alloc, node, wf)
    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=task,
    )
    _, exc, rid = py_call(client, "GET", f"{base}/v1/allocations/{alloc}")
    assert exc is not None
    worker(
        "warning",
        "allocation status check failed, continuing",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        correlation_id=rid,
        error=py_error(exc),
    )
    for attempt in (1, 2):
        r = go_request(
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            ca=ca.pem,
            body={"allocation_id": alloc, "task_id": task},
            timeout_s=15,
        )
        agent(
            "error",
            "claim failed",
            caller="agent/claim.go:71",
            node_id=node,
            node_instance_id=ni,
            correlation_id=(r.get("headers") or {}).get("x-request-id"),
            allocation_id=alloc,
            task_id=task,
            attempt=attempt,
            error=f"unexpected status {r.get('status_text') or r.get('error')}",
        )
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionError",
            "message": f"provision of {alloc} failed",
            "chain": [
                {"type": "ProvisionTimeout", "message": f"task {task} not claimed within 15s"}
            ],
        },
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.json")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    lab.save(pg.log_snapshot, "postgres.json")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "ingress",
        "first_failure_contains": "upstream timed out",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "A reload of the ingress switched the API upstream to a stale load-balancer address "
            "that still accepts TCP connections but never answers: nginx waited "
            "proxy_read_timeout (5 s) and answered 504 ('upstream timed out (110: Connection "
            "timed out) while reading response header from upstream'). The workflow worker's "
            "status check (httpx: Server error '504 Gateway Time-out') and the Go node agent's "
            "claims got 504s; the API and PostgreSQL were healthy and saw none of these "
            f"requests. Before the reload {ok_alloc} on {ok_node} provisioned normally "
            "(excluded). The agent's clock is 8.5 s slow. Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go", "httpx")
            + " (JSON log_format, error_log notice incl. the reload; jsonlog, log_statement=mod); "
            "a Python socket "
            "that accepts and holds connections plays the stale address."
        ),
    }


@case("n-ingress-dns")
def ingress_dns(lab: Lab) -> dict[str, Any]:
    """The ingress resolves the API's service name at request time; DNS answers NXDOMAIN."""
    ca, crt, key = ingress_pki(lab)
    dns_port, port = free_port(), free_port()
    dns = NxdomainDns(dns_port)
    lab.defer(dns.stop)
    alloc, node, ni, wf = "a-e5180f", "r09-n02", "ni-r09-n02-20261109", "wf-prov-c5d0"
    other_alloc, other_node = "a-e4c7aa", "r09-n06"
    agent = lab.log(
        "node-agent-r09-n02.ndjson",
        service="node-agent.sh",
        layer="node",
        style="py",
        skew_s=12.0,
        node_id=node,
        node_instance_id=ni,
    )
    other = lab.log(
        "node-agent-r09-n06.ndjson",
        service="node-agent.sh",
        layer="node",
        style="py",
        skew_s=-2.0,
        node_id=other_node,
        node_instance_id="ni-r09-n06-20261002",
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = server_block(
        port,
        crt,
        key,
        f"""
        resolver 127.0.0.1:{dns_port} valid=10s ipv6=off;
        resolver_timeout 2s;
        location /v1/ {{
            set $prov_api prov-api.provisioning.svc.cluster.local;
            proxy_pass http://$prov_api:8080;
            proxy_set_header X-Request-ID $request_id;
        }}""",
    )
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"

    # Noise: the other node's agent cannot run its privileged step (deploy: sudo needs a password).
    sudo = subprocess.run(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "sudo",
            "-n",
            "/usr/sbin/ipmitool",
            "chassis",
            "bootdev",
            "pxe",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    other(
        "error",
        f"set boot device failed: rc={sudo.returncode}: {sudo.stderr.strip()}",
        allocation_id=other_alloc,
        workflow_id="wf-prov-c5c9",
        ago_s=50,
    )
    worker("info", "provision requested", allocation_id=alloc, workflow_id=wf, node_id=node)
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    for attempt in range(1, 4):
        rc, out, err = curl_request(
            [
                "-sS",
                "--fail",
                "--cacert",
                str(ca.pem),
                "-X",
                "POST",
                "-A",
                "node-agent.sh/0.9",
                "-H",
                "Content-Type: application/json",
                "-d",
                json.dumps({"node_instance_id": ni, "allocation_id": alloc}),
                "-o",
                "/dev/null",
                "-w",
                "%header{x-request-id}",
                f"{base}/v1/nodes/{node}/tasks/claim",
            ]
        )
        agent(
            "error",
            f"claim failed: {err}",
            rc=rc,
            attempt=attempt,
            allocation_id=alloc,
            correlation_id=out.strip() or None,
        )
        time.sleep(3)
    worker(
        "error",
        "provision failed: agent did not claim the task in time",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "ingress",
        "first_failure_contains": "could not be resolved",
        "excluded": [f"allocation_id={other_alloc}"],
        "notes": (
            "The ingress proxies to the API by service name, resolved at request time through "
            "its configured resolver; the name (prov-api.provisioning.svc.cluster.local) stopped "
            "resolving (NXDOMAIN) and nginx answered 502 with 'could not be resolved (3: Host "
            f"not found)'. The shell node agent on {node} (curl --fail; clock 12 s fast) logged "
            "only 'curl: (22) The requested URL returned error: 502'. Noise: another node's "
            f"agent ({other_alloc}) failed a sudo step (deploy), excluded. Produced by "
            "n_cases.py: "
            + tool_versions("nginx", "curl")
            + " (combined + $request_id); a tiny Python UDP responder answering every query with "
            "RCODE 3 plays the DNS server; the sudo text is from a real `sudo -n` run as nobody."
        ),
    }


# ============================================================================ api_auth


@case("n-auth-rotated-401")
def auth_rotated(lab: Lab) -> dict[str, Any]:
    """The API's signing key rotated; one node agent still presents a token of the old key."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="jsonlog", settings={"log_statement": "mod"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    tokens = {"k2.agent.r03-n08": {"tasks:claim", "tasks:report"}}
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, tokens=tokens)
    port = free_port()
    alloc, node, ni, wf = "a-4a90d3", "r03-n07", "ni-r03-n07-20261018", "wf-prov-d019"
    ok_alloc, ok_node, ok_wf = "a-4a8e21", "r03-n08", "wf-prov-d012"
    agent = lab.log(
        "prov-agent-r03-n07.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=-26.0,
        node_id=node,
        node_instance_id=ni,
    )
    agent8 = lab.log(
        "prov-agent-r03-n08.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=0.7,
        node_id=ok_node,
        node_instance_id="ni-r03-n08-20261025",
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    api_log("info", "token signing key rotated", kid="k2", retired_kid="k1", ago_s=240)

    ok_task = flow.create(ok_alloc, ok_node, ok_wf)
    task = flow.create(alloc, node, wf)
    for a, n, w in ((ok_alloc, ok_node, ok_wf), (alloc, node, wf)):
        worker("info", "provision requested", allocation_id=a, workflow_id=w, node_id=n)
        transitions(a, "requested", "provisioning", allocation_id=a, workflow_id=w, node_id=n)
    good = py_client(ca.pem)
    good.headers["Authorization"] = "Bearer k2.agent.r03-n08"
    _r, exc, rid = py_call(good, "POST", f"{base}/v1/nodes/{ok_node}/tasks/claim", json={})
    agent8(
        "info",
        "task claimed",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
        correlation_id=rid,
    )
    stale = py_client(ca.pem)
    stale.headers["Authorization"] = "Bearer k1.agent.r03-n07"
    for attempt in range(1, 4):
        _, exc, rid = py_call(
            stale,
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            json={"node_instance_id": ni, "allocation_id": alloc, "task_id": task},
        )
        assert exc is not None
        agent(
            "error",
            "claim failed",
            attempt=attempt,
            correlation_id=rid,
            allocation_id=alloc,
            task_id=task,
            error=py_error(exc),
        )
        time.sleep(2)
    _, exc, rid = py_call(
        good,
        "POST",
        f"{base}/v1/tasks/{ok_task}/result",
        json={"ok": True, "allocation_id": ok_alloc, "node_id": ok_node},
    )
    agent8(
        "info",
        "task result reported",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
        correlation_id=rid,
    )
    worker("info", "provision finished", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node)
    transitions(
        ok_alloc,
        "provisioning",
        "active",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        node_id=ok_node,
    )
    state = flow.wait_task(task, 1)
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionTimeout",
            "message": f"task {task} {state}: no claim from {node} within 15s",
        },
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.json")
    lab.save(pg.log_snapshot, "postgres.json")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "api_auth",
        "first_failure_contains": "401",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "The API's token signing key was rotated (k1 retired for k2). The node agent on "
            f"{node} (clock 26 s slow) had not picked up its re-issued token and kept presenting "
            "a k1 token: every claim got 401 (httpx.HTTPStatusError \"Client error '401 "
            "Unauthorized'\"), the API logged 'token signature verification failed', and the "
            f"workflow timed the provision out. {ok_alloc} on {ok_node}, with a fresh token, "
            "provisioned through the same ingress and API (excluded). Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "httpx")
            + " (JSON log_format; jsonlog, log_statement=mod); the API is n_api.py with a "
            "bearer-token check; "
            "agent and worker JSON written by the generator with the real httpx exceptions."
        ),
    }


@case("n-auth-forbidden-403")
def auth_forbidden(lab: Lab) -> dict[str, Any]:
    """An RBAC change dropped the orchestrator's release scope: 403, then release_failed."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="csvlog", settings={"log_statement": "mod"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    tokens = {
        "wf-orchestrator.v7": {"tasks:claim", "tasks:report"},
        "ops-cli.jdoe": {"allocations:release"},
    }
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, tokens=tokens)
    port = free_port()
    alloc, node, wf = "a-8c2e47", "r12-n30", "wf-rel-e4a1"
    ops_alloc, ops_node = "a-8b77f0", "r12-n31"
    orch = lab.log(
        "wf-orchestrator.ndjson", service="wf-orchestrator", layer="workflow", style="java"
    )
    transitions = lab.transitions("workflow.ndjson", "wf-orchestrator")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    flow.create(alloc, node, "wf-prov-e2b0")
    flow.create(ops_alloc, ops_node, "wf-prov-e2a9")
    with flow.connect() as conn:
        conn.execute("UPDATE allocations SET state = 'active'")
    api_log("info", "rbac policy reloaded", policy_version="2026-11-28.3", roles=14, ago_s=600)

    # An operator releases another allocation by hand with a token that has the scope.
    curl_request(
        [
            "-sS",
            "--cacert",
            str(ca.pem),
            "-X",
            "POST",
            "-A",
            "provctl/1.4",
            "-H",
            "Authorization: Bearer ops-cli.jdoe",
            f"{base}/v1/allocations/{ops_alloc}/release",
        ]
    )
    transitions(
        ops_alloc,
        "active",
        "releasing",
        allocation_id=ops_alloc,
        node_id=ops_node,
        workflow_id="wf-rel-e49c",
    )
    orch(
        "INFO",
        f"release requested for {alloc}",
        thread="release-exec-2",
        logger="c.p.orchestrator.ReleaseFlow",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
    )
    transitions(alloc, "active", "releasing", allocation_id=alloc, workflow_id=wf, node_id=node)
    result: dict[str, Any] = {}
    for attempt in (1, 2):
        result = java_request(
            "POST",
            f"{base}/v1/allocations/{alloc}/release",
            ca=ca.pem,
            headers={"Authorization": "Bearer wf-orchestrator.v7"},
        )
        orch(
            "WARN",
            f"POST /v1/allocations/{alloc}/release returned HTTP {result['status']}: "
            f"{result['body']}",
            thread="release-exec-2",
            logger="c.p.orchestrator.api.ProvApiClient",
            allocation_id=alloc,
            workflow_id=wf,
            node_id=node,
            correlation_id=result["headers"].get("x-request-id"),
            attempt=attempt,
        )
        time.sleep(2)
    orch(
        "ERROR",
        f"release flow failed for {alloc}; node {node} left fenced for cleanup",
        thread="release-exec-2",
        logger="c.p.orchestrator.ReleaseFlow",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        stack_trace=(
            f"c.p.orchestrator.ReleaseException: release of {alloc} failed\n\tat "
            "c.p.orchestrator.ReleaseFlow.run(ReleaseFlow.java:102)\n\tat "
            "c.p.orchestrator.FlowRunner.run(FlowRunner.java:131)\nCaused by: "
            "c.p.orchestrator.api.ApiException: HTTP 403 "
            + result.get("body", "")
            + "\n\tat c.p.orchestrator.api.ProvApiClient.post(ProvApiClient.java:77)\n"
        ),
    )
    transitions(
        alloc,
        "releasing",
        "release_failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        attributes={"occupancy": "cleanup"},
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "api_auth",
        "first_failure_contains": "403",
        "excluded": [f"allocation_id={ops_alloc}"],
        "notes": (
            "An RBAC policy reload (10 minutes earlier) dropped the allocations:release scope "
            "from the workflow orchestrator's service account. Its release call got 403 "
            "(missing scope allocations:release) twice; the orchestrator failed the release and "
            "the allocation went releasing -> release_failed with occupancy=cleanup, which looks "
            "like a stuck workflow but is an authorisation failure. An operator's manual release "
            f"of {ops_alloc} with a scoped token succeeded (excluded). Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "java", "curl")
            + " (combined + $request_id; csvlog, log_statement=mod); the 403 is the real API's "
            "(n_api.py) answer to "
            "the Java HttpClient (NJavaClient.java), whose status and body the orchestrator's "
            "logback-style records quote."
        ),
    }


# ============================================================================ db


@case("n-db-lock-timeout")
def db_lock_timeout(lab: Lab) -> dict[str, Any]:
    """A reconciler holds row locks on the rack; the API's update hits lock_timeout -> 500."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="csvlog", settings={"log_lock_waits": "on", "deadlock_timeout": "1s"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, lock_timeout="2s", error_style="error")
    port = free_port()
    alloc, node, ni, wf = "a-f1a2c9", "r04-n17", "ni-r04-n17-20261027", "wf-prov-f310"
    ok_alloc, ok_node, ok_wf = "a-f19e04", "r06-n03", "wf-prov-f30b"
    agent = lab.log("bmagent.ndjson", service="bmagent", layer="node", style="zap", skew_s=6.2)
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    tasks = {}
    for a, n, w in ((ok_alloc, ok_node, ok_wf), (alloc, node, wf)):
        tasks[a] = flow.create(a, n, w)
        worker(
            "info",
            "provision requested",
            allocation_id=a,
            workflow_id=w,
            node_id=n,
            task_id=tasks[a],
        )
        transitions(a, "requested", "provisioning", allocation_id=a, workflow_id=w, node_id=n)

    def agent_call(path: str, n: str, body: Any) -> tuple[dict[str, Any], str | None]:
        r = go_request("POST", f"{base}{path}", ca=ca.pem, body=body, timeout_s=15)
        return r, (r.get("headers") or {}).get("x-request-id")

    for a, n, w in ((ok_alloc, ok_node, ok_wf), (alloc, node, wf)):
        r, rid = agent_call(f"/v1/nodes/{n}/tasks/claim", n, {})
        agent(
            "info",
            "task claimed",
            caller="agent/claim.go:64",
            node_id=n,
            correlation_id=rid,
            allocation_id=a,
            workflow_id=w,
            task_id=tasks[a],
        )
    r, rid = agent_call(
        f"/v1/tasks/{tasks[ok_alloc]}/result",
        ok_node,
        {"ok": True, "allocation_id": ok_alloc, "node_id": ok_node},
    )
    agent(
        "info",
        "task result reported",
        caller="agent/report.go:40",
        node_id=ok_node,
        correlation_id=rid,
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=tasks[ok_alloc],
    )
    worker("info", "provision finished", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node)
    transitions(
        ok_alloc,
        "provisioning",
        "active",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        node_id=ok_node,
    )

    # The nightly rack reconciler locks every allocation of rack r04 and works for ~25 s.
    locked = threading.Event()

    def reconciler() -> None:
        with psycopg.connect(pg.dsn(), application_name="rack-reconciler") as conn:
            conn.execute("SELECT id FROM allocations WHERE node_id LIKE 'r04-%%' FOR UPDATE")
            locked.set()
            time.sleep(25)
            conn.commit()

    holder = threading.Thread(target=reconciler, daemon=True)
    holder.start()
    locked.wait(10)
    time.sleep(2.5)  # the node agent writes the image
    agent(
        "info",
        "image written",
        caller="task/image.go:120",
        node_id=node,
        node_instance_id=ni,
        allocation_id=alloc,
        workflow_id=wf,
        task_id=tasks[alloc],
        bytes=10737418240,
    )
    for attempt in range(1, 4):
        r, rid = agent_call(
            f"/v1/tasks/{tasks[alloc]}/result",
            node,
            {"ok": True, "allocation_id": alloc, "node_id": node},
        )
        agent(
            "error",
            f"report result: unexpected status {r.get('status_text') or r.get('error')}",
            caller="agent/report.go:52",
            node_id=node,
            node_instance_id=ni,
            correlation_id=rid,
            allocation_id=alloc,
            workflow_id=wf,
            task_id=tasks[alloc],
            attempt=attempt,
        )
        time.sleep(1.5)
    state = flow.task_state(tasks[alloc])
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionTimeout",
            "message": f"task {tasks[alloc]} is '{state}': no result within 20s",
        },
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    holder.join(30)
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "db",
        "first_failure_contains": "lock timeout",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "A rack reconciler job opened a transaction that locked every allocation row of rack "
            "r04 (SELECT ... FOR UPDATE) and held it for 25 s. The node agent's result report for "
            f"{alloc} made the API update that row; the API runs with lock_timeout=2s, so "
            "PostgreSQL cancelled the statement (55P03 'canceling statement due to lock "
            "timeout', after a log_lock_waits line naming the holder) and the API answered 500 "
            "Internal Server Error. The Go agent (clock 6 s fast) saw only 500s; the workflow "
            f"timed out. {ok_alloc} on rack r06 completed (excluded). Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go", "psycopg")
            + " (JSON log_format; csvlog, log_lock_waits=on); the API is n_api.py, whose error "
            "record holds the real psycopg.errors.LockNotAvailable and its traceback; its SQL "
            "carries sqlcommenter comments with the correlation and allocation ids."
        ),
    }


@case("n-db-deadlock")
def db_deadlock(lab: Lab) -> dict[str, Any]:
    """Two workflow workers lock two node rows in opposite orders; the seed's is the victim."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="jsonlog", settings={"deadlock_timeout": "1s"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, error_style="exception")
    port = free_port()
    alloc, node, wf = "a-3d5c70", "r10-n05", "wf-prov-1c08"
    spare = "r10-n06"
    other_alloc, other_wf = "a-3d49e2", "wf-rel-1bf7"
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    flow.create(other_alloc, spare, "wf-prov-1a90")
    with flow.connect() as conn:
        conn.execute("UPDATE allocations SET state = 'active' WHERE id = %s", (other_alloc,))
    portal = py_client(ca.pem, agent="tenant-portal/2.3.0")
    _, _, _rid = py_call(portal, "GET", f"{base}/v1/allocations/{other_alloc}")

    worker("info", "provision requested", allocation_id=alloc, workflow_id=wf, node_id=node)
    worker(
        "info", "release requested", allocation_id=other_alloc, workflow_id=other_wf, node_id=spare
    )
    c1 = psycopg.connect(pg.dsn(), application_name="workflow-worker")
    c2 = psycopg.connect(pg.dsn(), application_name="workflow-worker")
    c1.execute(
        tagged("INSERT INTO nodes (node_id) VALUES (%s)", allocation_id=alloc, workflow_id=wf),
        (node,),
    )
    c1.execute(
        tagged(
            "INSERT INTO allocations (id, node_id, tenant, state, workflow_id) VALUES "
            "(%s, %s, 'tenant-red', 'provisioning', %s)",
            allocation_id=alloc,
            workflow_id=wf,
        ),
        (alloc, node, wf),
    )
    c1.commit()
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    transitions(
        other_alloc,
        "active",
        "releasing",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=spare,
    )
    # Provision: reserve the node, then fence the rack's spare. Release: free the spare, then
    # re-balance the neighbour. Opposite orders.
    c1.execute(
        tagged(
            "UPDATE nodes SET state = 'reserved', allocation_id = %s WHERE node_id = %s",
            allocation_id=alloc,
            workflow_id=wf,
        ),
        (alloc, node),
    )
    c2.execute(
        tagged(
            "UPDATE nodes SET state = 'draining' WHERE node_id = %s",
            allocation_id=other_alloc,
            workflow_id=other_wf,
        ),
        (spare,),
    )
    errors: dict[str, Exception] = {}

    def seed_tx() -> None:
        try:
            c1.execute(
                tagged(
                    "UPDATE nodes SET state = 'fenced-spare' WHERE node_id = %s",
                    allocation_id=alloc,
                    workflow_id=wf,
                ),
                (spare,),
            )
            c1.commit()
        except psycopg.Error as exc:
            c1.rollback()
            errors["seed"] = exc

    t1 = threading.Thread(target=seed_tx)
    t1.start()
    time.sleep(0.3)
    c2.execute(
        tagged(
            "UPDATE nodes SET updated_at = now() WHERE node_id = %s",
            allocation_id=other_alloc,
            workflow_id=other_wf,
        ),
        (node,),
    )
    c2.commit()
    t1.join()
    exc = errors["seed"]
    try:
        raise ProvisionError(f"provision of {alloc} failed: could not reserve {node}") from exc
    except ProvisionError as wrapped:
        worker(
            "error",
            "provision failed",
            allocation_id=alloc,
            workflow_id=wf,
            node_id=node,
            error=py_error(wrapped),
        )
    c1.execute(
        tagged(
            "UPDATE allocations SET state = 'provision_failed' WHERE id = %s",
            allocation_id=alloc,
            workflow_id=wf,
        ),
        (alloc,),
    )
    c1.commit()
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    worker(
        "info", "release finished", allocation_id=other_alloc, workflow_id=other_wf, node_id=spare
    )
    transitions(
        other_alloc,
        "releasing",
        "released",
        allocation_id=other_alloc,
        workflow_id=other_wf,
        node_id=spare,
    )
    c1.close()
    c2.close()
    time.sleep(1)
    _, _, _ = py_call(portal, "GET", f"{base}/v1/allocations/{alloc}")
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(pg.log_snapshot, "postgres.json")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "db",
        "first_failure_contains": "deadlock detected",
        "excluded": [f"allocation_id={other_alloc}"],
        "notes": (
            f"Two workflow workers ran at once: the provision of {alloc} locked its node {node} "
            f"and then the rack's spare {spare}; the release of {other_alloc} locked the spare and "
            f"then {node}. PostgreSQL detected the deadlock (40P01) and cancelled the provision's "
            "transaction; the worker did not retry and failed the provision with a wrapper "
            "(ProvisionError, cause psycopg.errors.DeadlockDetected). The release went on and "
            "finished (excluded). The tenant portal's status reads through the ingress are all "
            "200. Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "psycopg")
            + " (combined + $request_id; jsonlog, deadlock_timeout=1s): a real deadlock between "
            "two psycopg sessions, statements with sqlcommenter comments."
        ),
    }


@case("n-db-auth-failed")
def db_auth_failed(lab: Lab) -> dict[str, Any]:
    """The DB role's password was rotated; the API still uses the old one (scram)."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="csvlog", scram=True, settings={"log_connections": "on"})
    pg.start()
    old_dsn = pg.dsn()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    api_port, _, _ = start_api(lab, old_dsn, api_log, error_style="exception", db_down_status=503)
    port = free_port()
    alloc, node, ni, wf = "a-90b4e6", "r08-n01", "ni-r08-n01-20261111", "wf-prov-2e71"
    ok_alloc, ok_node, ok_wf = "a-90a1f3", "r08-n02", "wf-prov-2e6a"
    agent = lab.log(
        "prov-agent-r08-n01.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=-9.0,
        node_id=node,
        node_instance_id=ni,
    )
    agent2 = lab.log(
        "prov-agent-r08-n02.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        node_id=ok_node,
        node_instance_id="ni-r08-n02-20261111",
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid_up", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(old_dsn)
    ok_task = flow.create(ok_alloc, ok_node, ok_wf)
    worker(
        "info", "provision requested", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node
    )
    client = py_client(ca.pem)
    _r, exc, rid = py_call(client, "POST", f"{base}/v1/nodes/{ok_node}/tasks/claim", json={})
    agent2(
        "info",
        "task claimed",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
        correlation_id=rid,
    )
    _, exc, rid = py_call(
        client,
        "POST",
        f"{base}/v1/tasks/{ok_task}/result",
        json={"ok": True, "allocation_id": ok_alloc, "node_id": ok_node},
    )
    agent2(
        "info",
        "task result reported",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        task_id=ok_task,
        correlation_id=rid,
    )
    worker("info", "provision finished", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node)

    # The DBA rotates the role's password; the workflow worker's secret is updated, the API's not.
    new_password = "s3cr3t-2026-11"
    with pg.admin("psql") as conn:
        conn.execute("SET log_statement = 'none'")
        conn.execute(f"ALTER ROLE provisioning PASSWORD '{new_password}'")
    flow = Workflow(pg.dsn(new_password))
    task = flow.create(alloc, node, wf)
    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=task,
    )
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    for attempt in range(1, 4):
        _, exc, rid = py_call(
            client,
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            json={"node_instance_id": ni, "allocation_id": alloc, "task_id": task},
        )
        assert exc is not None
        agent(
            "warning" if attempt < 3 else "error",
            "claim failed",
            attempt=attempt,
            correlation_id=rid,
            allocation_id=alloc,
            task_id=task,
            error=py_error(exc),
        )
        time.sleep(2)
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={"type": "ProvisionTimeout", "message": f"task {task} not claimed within 15s"},
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "db",
        "first_failure_contains": "password authentication failed",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "The DBA rotated the PostgreSQL password of the 'provisioning' role (scram-sha-256); "
            "the workflow worker's secret was updated but the API's was not. From then on every "
            "API connection failed (FATAL 28P01 'password authentication failed for user "
            "\"provisioning\"' in the server log; psycopg.OperationalError in the API's uvicorn-"
            "style 'Exception in ASGI application' traceback) and the API answered 503. The node "
            f"agent on {node} (clock 9 s slow) saw only 503s ('Server error '503 Service "
            "Unavailable''). The word 'authentication' points at api_auth; the owner is the "
            f"database credentials. {ok_alloc} completed before the rotation (excluded). "
            "Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "httpx", "psycopg")
            + " (combined + $request_id + upstream fields; csvlog, log_connections=on, "
            "initdb --auth-host=scram-sha-256)."
        ),
    }


@case("n-db-down-refused")
def db_down_refused(lab: Lab) -> dict[str, Any]:
    """PostgreSQL was shut down mid-flow; the API gets 'Connection refused' on 5432 -> 500."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="jsonlog", port=5432 if port_free(5432) else None)
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, error_style="error")
    port = free_port()
    alloc, node, ni, wf = "a-b7e512", "r01-n09", "ni-r01-n09-20261107", "wf-prov-3f44"
    ok_alloc, ok_node, ok_wf = "a-b7d0a8", "r01-n10", "wf-prov-3f3e"
    agent = lab.log("bmagent.ndjson", service="bmagent", layer="node", style="zap", skew_s=14.5)
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    tasks = {}
    for a, n, w in ((ok_alloc, ok_node, ok_wf), (alloc, node, wf)):
        tasks[a] = flow.create(a, n, w)
        worker(
            "info",
            "provision requested",
            allocation_id=a,
            workflow_id=w,
            node_id=n,
            task_id=tasks[a],
        )
        transitions(a, "requested", "provisioning", allocation_id=a, workflow_id=w, node_id=n)
    for path, body_ in (
        (f"/v1/nodes/{ok_node}/tasks/claim", {}),
        (
            f"/v1/tasks/{tasks[ok_alloc]}/result",
            {"ok": True, "allocation_id": ok_alloc, "node_id": ok_node},
        ),
    ):
        r = go_request("POST", base + path, ca=ca.pem, body=body_)
        agent(
            "info",
            "claimed task" if "claim" in path else "reported result",
            caller="agent/loop.go:93",
            node_id=ok_node,
            allocation_id=ok_alloc,
            workflow_id=ok_wf,
            correlation_id=r["headers"].get("x-request-id"),
            status=r["status"],
        )
    worker("info", "provision finished", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node)
    transitions(
        ok_alloc,
        "provisioning",
        "active",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        node_id=ok_node,
    )

    pg.stop("fast")  # an operator's minor-version upgrade, without draining the API first
    for attempt in range(1, 4):
        r = go_request(
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            ca=ca.pem,
            body={"allocation_id": alloc, "task_id": tasks[alloc]},
        )
        status = r.get("status_text") or r.get("error")
        agent(
            "error",
            f"claim task {tasks[alloc]} failed: unexpected status {status}",
            caller="agent/loop.go:88",
            node_id=node,
            node_instance_id=ni,
            correlation_id=(r.get("headers") or {}).get("x-request-id"),
            allocation_id=alloc,
            task_id=tasks[alloc],
            attempt=attempt,
        )
        time.sleep(2)
    try:
        with flow.connect() as conn:
            conn.execute(
                "UPDATE allocations SET state = 'provision_failed' WHERE id = %s", (alloc,)
            )
    except psycopg.OperationalError as exc:
        worker(
            "error",
            "could not record provision timeout",
            allocation_id=alloc,
            workflow_id=wf,
            node_id=node,
            error=py_error(exc),
            stack=stack_of(exc),
        )
    time.sleep(3)
    pg.start(init=False)
    time.sleep(1)
    with flow.connect() as conn:
        conn.execute(
            tagged(
                "UPDATE allocations SET state = 'provision_failed' WHERE id = %s",
                allocation_id=alloc,
                workflow_id=wf,
            ),
            (alloc,),
        )
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={
            "type": "ProvisionTimeout",
            "message": f"task {tasks[alloc]} not claimed within 15s",
        },
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(pg.log_snapshot, "postgres.json")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "db",
        "first_failure_contains": "Is the server running",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "An operator stopped PostgreSQL (fast shutdown, for a minor upgrade) without draining "
            "the API. While it was down every API request failed to connect (psycopg."
            "OperationalError '... port " + str(pg.port) + " failed: Connection refused / Is the "
            "server running ...') and the API answered 500; the Go node agent (clock 14.5 s fast) "
            f"could not claim {alloc}'s task and the workflow worker could not even record the "
            "timeout until the server was back. 'Connection refused' points at the ingress; the "
            f"owner is the database being down. {ok_alloc} finished before (excluded). Produced "
            "by n_cases.py: "
            + tool_versions("nginx", "postgres", "go", "psycopg")
            + " (JSON log_format; jsonlog: the shutdown and restart lines are the server's own)."
        ),
    }


# ============================================================================ mixed


@case("n-mixed-api500-cert-hostname")
def mixed_api500_cert(lab: Lab) -> dict[str, Any]:
    """The API calls the BMC gateway, whose new cert lacks its name; the API says only 500."""
    ca, crt, key = ingress_pki(lab)
    bmc_crt, bmc_key = ca.issue("bmc-gw", ["bmc-gw-legacy.prov.internal"])
    bmc_port = free_port()
    bmc = HttpServer(bmc_port, lambda request: (200, {"power": "on"}), tls=(bmc_crt, bmc_key))
    lab.defer(bmc.stop)
    pg = lab.pg(log_format="csvlog", settings={"log_statement": "mod"})
    pg.start()
    outbound_client = httpx.Client(verify=ssl.create_default_context(cafile=str(ca.pem)), timeout=5)

    def power_on(ids: dict[str, Any]) -> None:
        response = outbound_client.post(
            f"https://127.0.0.1:{bmc_port}/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
            json={"ResetType": "On"},
            extensions={"sni_hostname": "bmc-gw.prov.internal"},
        )
        response.raise_for_status()

    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, error_style="chain", outbound=power_on)
    port = free_port()
    alloc, node, ni, wf = "a-5f0c3b", "r14-n02", "ni-r14-n02-20261113", "wf-prov-4a19"
    other_alloc = "a-5e9d71"
    agent = lab.log(
        "bmagent-r14-n02.ndjson",
        service="bmagent",
        layer="node",
        style="zap",
        skew_s=-4.0,
        node_id=node,
        node_instance_id=ni,
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    # Noise: another tenant's request for an allocation that does not exist.
    portal = py_client(ca.pem, agent="tenant-portal/2.3.0")
    py_call(portal, "GET", f"{base}/v1/allocations/{other_alloc}")
    worker(
        "error",
        "release failed",
        allocation_id=other_alloc,
        workflow_id="wf-rel-49f0",
        error={
            "type": "InvalidTransition",
            "message": f"allocation {other_alloc}: cannot go from released to releasing",
        },
    )
    task = flow.create(alloc, node, wf)
    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=task,
    )
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    for attempt in range(1, 4):
        r = go_request(
            "POST",
            f"{base}/v1/nodes/{node}/tasks/claim",
            ca=ca.pem,
            body={"node_instance_id": ni, "allocation_id": alloc, "task_id": task},
        )
        agent(
            "error",
            "claim failed",
            caller="agent/claim.go:71",
            allocation_id=alloc,
            task_id=task,
            correlation_id=(r.get("headers") or {}).get("x-request-id"),
            attempt=attempt,
            error=f"unexpected status {r.get('status_text') or r.get('error')}: "
            f"{r.get('body', '')}",
        )
        time.sleep(2)
    worker(
        "error",
        "provision failed",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        error={"type": "ProvisionTimeout", "message": f"task {task} not claimed within 15s"},
    )
    transitions(
        alloc, "provisioning", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "cert",
        "first_failure_contains": "Hostname mismatch",
        "excluded": [f"allocation_id={other_alloc}"],
        "notes": (
            "On every task claim the API powers the node on through the BMC gateway over HTTPS. "
            "The gateway's renewed certificate names only bmc-gw-legacy.prov.internal, so the "
            "API's TLS check failed ('Hostname mismatch, certificate is not valid for "
            "'bmc-gw.prov.internal''); the API rolled the claim back and logged a generic "
            "ProvisioningError('internal server error') with the real cause only in "
            "error.chain, answering 500. The Go agent and the workflow saw only 500 / a timeout. "
            f"Noise: {other_alloc}, a release in the wrong state and a 404 from the portal "
            "(excluded). Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go", "httpx")
            + " (JSON log_format; csvlog, log_statement=mod: the claim's UPDATE is logged, then "
            "rolled back); the chain holds the real httpx/httpcore/ssl exceptions "
            "(the API's client uses httpx with sni_hostname=bmc-gw.prov.internal against a "
            "Python https server with the wrong-name certificate)."
        ),
    }


@case("n-mixed-workflow-wraps-db")
def mixed_workflow_db(lab: Lab) -> dict[str, Any]:
    """A leaking exporter exhausts max_connections; the workflow's 'provision failed' hides it."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(
        log_format="csvlog",
        settings={"max_connections": "8", "superuser_reserved_connections": "0"},
    )
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, error_style="exception")
    port = free_port()
    alloc, node, wf = "a-71c8d2", "r09-n03", "wf-prov-5b60"
    ok_alloc, ok_node, ok_wf = "a-71b04e", "r09-n04", "wf-prov-5b5a"
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    exporter = lab.log(
        "metrics-exporter.ndjson", service="pg-metrics-exporter", layer="db", style="zap"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    portal = py_client(ca.pem, agent="tenant-portal/2.3.0")
    flow.create(ok_alloc, ok_node, ok_wf)
    worker(
        "info", "provision requested", allocation_id=ok_alloc, workflow_id=ok_wf, node_id=ok_node
    )
    transitions(
        ok_alloc,
        "requested",
        "provisioning",
        allocation_id=ok_alloc,
        workflow_id=ok_wf,
        node_id=ok_node,
    )
    py_call(portal, "GET", f"{base}/v1/allocations/{ok_alloc}")
    # The exporter opens a connection per scrape and never closes them.
    leaked = []
    for _ in range(8):
        try:
            leaked.append(psycopg.connect(pg.dsn(), application_name="pg-metrics-exporter"))
        except psycopg.OperationalError:
            break
        time.sleep(0.4)
    exporter("info", "scrape finished", caller="collector/pg.go:211", open_conns=len(leaked))
    transitions(alloc, None, "requested", allocation_id=alloc, workflow_id=wf, node_id=node)
    try:
        try:
            flow.create(alloc, node, wf)
        except psycopg.OperationalError as exc:
            raise ReservationError(f"could not reserve node {node}") from exc
    except ReservationError as exc:
        try:
            raise ProvisionError("provision failed") from exc
        except ProvisionError as wrapped:
            worker(
                "error",
                "provision failed",
                allocation_id=alloc,
                workflow_id=wf,
                node_id=node,
                error=py_error(wrapped),
            )
    transitions(
        alloc, "requested", "provision_failed", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    for _ in range(2):
        py_call(portal, "GET", f"{base}/v1/allocations/{alloc}")
        time.sleep(2)
    for conn in leaked:
        conn.close()
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "db",
        "first_failure_contains": "too many clients",
        "excluded": [f"allocation_id={ok_alloc}"],
        "notes": (
            "A PostgreSQL metrics exporter leaked a connection per scrape until the server's "
            "max_connections (8 here) was used up. The workflow worker could not open a "
            f"connection to reserve {node} for {alloc}: it logged a generic ProvisionError "
            "('provision failed') whose chain holds ReservationError and, innermost, psycopg."
            "OperationalError '... FATAL:  sorry, too many clients already'. The tenant portal's "
            "status polls then got 500s from the API (same cause, in a uvicorn traceback). "
            f"{ok_alloc} was created before the exhaustion (excluded). Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "psycopg")
            + " (combined + $request_id; csvlog with max_connections=8, "
            "superuser_reserved_connections=0); the exporter's one record is written by the "
            "generator."
        ),
    }


# ============================================================================ healthy


@case("n-ok-retry-succeeds")
def ok_retry(lab: Lab) -> dict[str, Any]:
    """The API is mid-rollout on the first claim (502), the retry succeeds; all is well."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="csvlog", settings={"log_statement": "mod"})
    pg.start()
    api_port = free_port()
    port = free_port()
    alloc, node, ni, wf = "a-c09e14", "r13-n08", "ni-r13-n08-20261119", "wf-prov-6d21"
    bad_alloc, bad_node, bad_wf = "a-c08f93", "r13-n09", "wf-prov-6d1c"
    agent = lab.log(
        "prov-agent-r13-n08.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        skew_s=3.3,
        node_id=node,
        node_instance_id=ni,
    )
    agent9 = lab.log(
        "prov-agent-r13-n09.ndjson",
        service="prov-agent",
        layer="node",
        style="py",
        node_id=bad_node,
        node_instance_id="ni-r13-n09-20261119",
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    tasks = {}
    for a, n, w in ((bad_alloc, bad_node, bad_wf), (alloc, node, wf)):
        tasks[a] = flow.create(a, n, w)
        worker(
            "info",
            "provision requested",
            allocation_id=a,
            workflow_id=w,
            node_id=n,
            task_id=tasks[a],
        )
        transitions(a, "requested", "provisioning", allocation_id=a, workflow_id=w, node_id=n)
    client = py_client(ca.pem)
    _, exc, rid = py_call(
        client, "POST", f"{base}/v1/nodes/{node}/tasks/claim", json={"node_instance_id": ni}
    )
    assert exc is not None
    agent(
        "warning",
        "claim attempt 1/5 failed, retrying in 2.0s",
        correlation_id=rid,
        error=py_error(exc),
    )
    api = ProvisioningApi(api_log, pg.dsn())
    server = HttpServer(api_port, api)
    lab.defer(server.stop)
    api_log("info", "Application startup complete.")
    time.sleep(2)
    _r, exc, rid = py_call(
        client, "POST", f"{base}/v1/nodes/{node}/tasks/claim", json={"node_instance_id": ni}
    )
    agent(
        "info",
        "task claimed",
        attempt=2,
        correlation_id=rid,
        allocation_id=alloc,
        workflow_id=wf,
        task_id=tasks[alloc],
    )
    # The other node's task fails on its own: the image's checksum does not match (excluded).
    _r9, _, rid9 = py_call(client, "POST", f"{base}/v1/nodes/{bad_node}/tasks/claim", json={})
    agent9(
        "info",
        "task claimed",
        correlation_id=rid9,
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        task_id=tasks[bad_alloc],
    )
    agent9(
        "error",
        "image verification failed",
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        task_id=tasks[bad_alloc],
        error={
            "type": "ChecksumMismatch",
            "message": "sha256 of rhel-9.4-x86_64.qcow2 is 3f1c...e07a, expected 9ab2...41d0",
        },
    )
    _, _, rid9 = py_call(
        client,
        "POST",
        f"{base}/v1/tasks/{tasks[bad_alloc]}/result",
        json={"ok": False, "allocation_id": bad_alloc, "node_id": bad_node},
    )
    worker(
        "error",
        "provision failed",
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        node_id=bad_node,
        error={"type": "TaskFailed", "message": "image verification failed"},
    )
    transitions(
        bad_alloc,
        "provisioning",
        "provision_failed",
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        node_id=bad_node,
    )
    time.sleep(2)
    _, exc, rid = py_call(
        client,
        "POST",
        f"{base}/v1/tasks/{tasks[alloc]}/result",
        json={"ok": True, "allocation_id": alloc, "node_id": node},
    )
    agent(
        "info",
        "task result reported",
        correlation_id=rid,
        allocation_id=alloc,
        workflow_id=wf,
        task_id=tasks[alloc],
    )
    worker("info", "provision finished", allocation_id=alloc, workflow_id=wf, node_id=node)
    transitions(alloc, "provisioning", "active", allocation_id=alloc, workflow_id=wf, node_id=node)
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(nginx.error_snapshot, "nginx-error.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "none",
        "excluded": [f"allocation_id={bad_alloc}"],
        "notes": (
            f"Healthy. The node agent's first claim for {node} arrived while the API was being "
            "rolled out: nginx logged connect() failed (111: Connection refused) and answered "
            "502, the agent logged a warning and retried 2 s later, claimed the task and the "
            "provision finished (provisioning -> active). The 502 and the nginx [error] line are "
            "expected and recovered. Noise: "
            f"{bad_alloc} on {bad_node} failed its image checksum (excluded). Produced by "
            "n_cases.py: "
            + tool_versions("nginx", "postgres", "httpx")
            + " (combined + $request_id; csvlog, log_statement=mod); the API (n_api.py) was "
            "started only after the "
            "first request."
        ),
    }


@case("n-ok-benign-404")
def ok_benign_404(lab: Lab) -> dict[str, Any]:
    """The agent polls for work and gets 404 'no pending task' until the task is queued."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(log_format="jsonlog", settings={"log_statement": "mod"})
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="structlog"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log)
    port = free_port()
    alloc, node, ni, wf = "a-d4e3f0", "r06-n11", "ni-r06-n11-20261121", "wf-prov-7e02"
    ghost = "a-d4e3f9"
    agent = lab.log(
        "bmagent-r06-n11.ndjson",
        service="bmagent",
        layer="node",
        style="zap",
        skew_s=-21.0,
        node_id=node,
        node_instance_id=ni,
    )
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(
        port,
        crt,
        key,
        proxied("http://prov_api")
        + """
        location = /favicon.ico { return 404; }""",
    )
    nginx.start(body, access_format="json_ingress", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    for _ in range(3):
        r = go_request("POST", f"{base}/v1/nodes/{node}/tasks/claim", ca=ca.pem, body={})
        agent(
            "debug",
            "no pending task",
            caller="agent/claim.go:59",
            correlation_id=r["headers"].get("x-request-id"),
            status=r["status"],
        )
        time.sleep(2)
    portal = py_client(ca.pem, agent="Mozilla/5.0 (X11; Linux x86_64) tenant-portal/2.3.0")
    py_call(portal, "GET", f"{base}/v1/allocations/{ghost}")
    py_call(portal, "GET", f"{base}/favicon.ico")
    task = flow.create(alloc, node, wf)
    worker(
        "info",
        "provision requested",
        allocation_id=alloc,
        workflow_id=wf,
        node_id=node,
        task_id=task,
    )
    transitions(
        alloc, "requested", "provisioning", allocation_id=alloc, workflow_id=wf, node_id=node
    )
    py_call(portal, "GET", f"{base}/v1/allocations/{alloc}")
    time.sleep(1)
    r = go_request("POST", f"{base}/v1/nodes/{node}/tasks/claim", ca=ca.pem, body={})
    agent(
        "info",
        "task claimed",
        caller="agent/claim.go:64",
        correlation_id=r["headers"].get("x-request-id"),
        allocation_id=alloc,
        workflow_id=wf,
        task_id=task,
    )
    time.sleep(2)
    r = go_request(
        "POST",
        f"{base}/v1/tasks/{task}/result",
        ca=ca.pem,
        body={"ok": True, "allocation_id": alloc, "node_id": node},
    )
    agent(
        "info",
        "task result reported",
        caller="agent/report.go:40",
        correlation_id=r["headers"].get("x-request-id"),
        allocation_id=alloc,
        workflow_id=wf,
        task_id=task,
        status=r["status"],
    )
    worker("info", "provision finished", allocation_id=alloc, workflow_id=wf, node_id=node)
    transitions(alloc, "provisioning", "active", allocation_id=alloc, workflow_id=wf, node_id=node)
    r = go_request("POST", f"{base}/v1/nodes/{node}/tasks/claim", ca=ca.pem, body={})
    agent(
        "debug",
        "no pending task",
        caller="agent/claim.go:59",
        correlation_id=r["headers"].get("x-request-id"),
        status=r["status"],
    )
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx-access.log")
    lab.save(pg.log_snapshot, "postgres.json")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "none",
        "excluded": [f"allocation_id={ghost}"],
        "notes": (
            f"Healthy. The Go node agent on {node} (clock 21 s slow) long-polls for work: its "
            "claims get 404 'no pending task' until the workflow queues the provision, then it "
            "claims, reports success, and polls again (404). A tenant portal asks for a "
            f"mistyped allocation id ({ghost}, 404) and a favicon (404). Nothing failed. "
            "Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go")
            + " (JSON log_format; jsonlog, log_statement=mod); API n_api.py."
        ),
    }


@case("n-ok-warning-only")
def ok_warning_only(lab: Lab) -> dict[str, Any]:
    """A slow update (1.3 s lock wait), a PostgreSQL WARNING and a clock warning; all succeeds."""
    ca, crt, key = ingress_pki(lab)
    pg = lab.pg(
        log_format="csvlog",
        settings={"log_min_duration_statement": "1000", "log_min_error_statement": "warning"},
    )
    pg.start()
    api_log = lab.log(
        "provisioning-api.ndjson", service="provisioning-api", layer="api", style="py"
    )
    api_port, _, _ = start_api(lab, pg.dsn(), api_log, lock_timeout="5s")
    port = free_port()
    alloc, node, ni, wf = "a-e8a1b7", "r15-n04", "ni-r15-n04-20261117", "wf-prov-8f90"
    bad_alloc, bad_node, bad_wf = "a-e89c02", "r15-n05", "wf-prov-8f8b"
    agent = lab.log("bmagent.ndjson", service="bmagent", layer="node", style="zap", skew_s=0.8)
    worker = lab.log(
        "workflow-worker.ndjson", service="workflow-worker", layer="workflow", style="py"
    )
    transitions = lab.transitions("workflow.ndjson", "workflow-worker")
    nginx = lab.nginx()
    body = f"""
    upstream prov_api {{ server 127.0.0.1:{api_port}; keepalive 8; }}
""" + server_block(port, crt, key, proxied("http://prov_api"))
    nginx.start(body, access_format="combined_rid_up", port=port)
    base = f"https://127.0.0.1:{port}"
    flow = Workflow(pg.dsn())
    tasks = {}
    for a, n, w in ((bad_alloc, bad_node, bad_wf), (alloc, node, wf)):
        tasks[a] = flow.create(a, n, w)
        worker(
            "info",
            "provision requested",
            allocation_id=a,
            workflow_id=w,
            node_id=n,
            task_id=tasks[a],
        )
        transitions(a, "requested", "provisioning", allocation_id=a, workflow_id=w, node_id=n)
    agent(
        "warn",
        "clock offset 0.82s exceeds 0.5s; chronyd not synchronised",
        caller="health/ntp.go:31",
        node_id=node,
        node_instance_id=ni,
    )
    with flow.connect() as conn:
        # The worker's driver wrapper issues a stray COMMIT outside a transaction.
        conn.execute(tagged("COMMIT", allocation_id=alloc, workflow_id=wf))
    for a, n, w in ((bad_alloc, bad_node, bad_wf), (alloc, node, wf)):
        r = go_request("POST", f"{base}/v1/nodes/{n}/tasks/claim", ca=ca.pem, body={})
        agent(
            "info",
            "task claimed",
            caller="agent/claim.go:64",
            node_id=n,
            correlation_id=r["headers"].get("x-request-id"),
            allocation_id=a,
            workflow_id=w,
            task_id=tasks[a],
        )
    r = go_request(
        "POST",
        f"{base}/v1/tasks/{tasks[bad_alloc]}/result",
        ca=ca.pem,
        body={"ok": False, "allocation_id": bad_alloc, "node_id": bad_node},
    )
    agent(
        "error",
        'task failed: exec: "sgdisk": executable file not found in $PATH',
        caller="task/partition.go:48",
        node_id=bad_node,
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        task_id=tasks[bad_alloc],
        correlation_id=r["headers"].get("x-request-id"),
    )
    worker(
        "error",
        "provision failed",
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        node_id=bad_node,
        error={"type": "TaskFailed", "message": "task reported failure"},
    )
    transitions(
        bad_alloc,
        "provisioning",
        "provision_failed",
        allocation_id=bad_alloc,
        workflow_id=bad_wf,
        node_id=bad_node,
    )

    # The worker's status sync holds the allocation row for 1.3 s while the report comes in.
    def sync() -> None:
        with psycopg.connect(pg.dsn(), application_name="workflow-worker") as conn:
            conn.execute(
                tagged(
                    "SELECT state FROM allocations WHERE id = %s FOR UPDATE",
                    allocation_id=alloc,
                    workflow_id=wf,
                ),
                (alloc,),
            )
            time.sleep(1.3)
            conn.commit()

    holder = threading.Thread(target=sync)
    holder.start()
    time.sleep(0.1)
    r = go_request(
        "POST",
        f"{base}/v1/tasks/{tasks[alloc]}/result",
        ca=ca.pem,
        body={"ok": True, "allocation_id": alloc, "node_id": node},
    )
    holder.join()
    agent(
        "info",
        "task result reported",
        caller="agent/report.go:40",
        node_id=node,
        correlation_id=r["headers"].get("x-request-id"),
        allocation_id=alloc,
        workflow_id=wf,
        task_id=tasks[alloc],
        status=r["status"],
    )
    worker("info", "provision finished", allocation_id=alloc, workflow_id=wf, node_id=node)
    transitions(alloc, "provisioning", "active", allocation_id=alloc, workflow_id=wf, node_id=node)
    nginx.stop()
    pg.stop()
    lab.save(nginx.access_snapshot, "nginx.log")
    lab.save(pg.log_snapshot, "postgres.csv")
    return {
        "seed": f"allocation_id={alloc}",
        "owner_layer": "none",
        "excluded": [f"allocation_id={bad_alloc}"],
        "notes": (
            f"Healthy. The provision of {alloc} succeeded; along the way there were only "
            "warnings: the node agent's NTP check, a stray COMMIT outside a transaction "
            "(PostgreSQL WARNING 25P01 'there is no transaction in progress', its statement "
            "tagged with the allocation), and a result report that waited about 1.2 s on a row "
            "lock held by the "
            "worker's status sync (PostgreSQL logs the slow statement; the API logs a slow "
            f"request). Noise: {bad_alloc} on {bad_node} failed (sgdisk missing from the image: "
            "deploy), excluded. Produced by n_cases.py: "
            + tool_versions("nginx", "postgres", "go")
            + " (combined + $request_id + upstream fields; csvlog, "
            "log_min_duration_statement=1000, log_min_error_statement=warning); API n_api.py."
        ),
    }


def main(argv: list[str]) -> int:
    names = argv or list(CASES)
    for name in names:
        print(f"== {name}", flush=True)
        with lab(name) as the_lab:
            truth = CASES[name](the_lab)
            sources = the_lab.sources()
            if sources:
                truth = {**truth, "sources": sources}
                truth["notes"] = truth.pop("notes")  # notes last, for readers
            write_truth(the_lab.out, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
