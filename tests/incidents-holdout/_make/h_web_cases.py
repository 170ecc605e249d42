"""Hold-out cases around a real nginx ingress: a CA rotation a Node.js agent does not trust,
a stale upstream the Go agents time out on, an expired token behind an Ansible ``uri`` task,
a release the workflow engine's state machine refuses, and a healthy run with benign 404s.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from h_common import (
    controller_runtime,
    from_pino,
    pino_lines,
    provision_request,
    transition,
    watch_lines,
    zerolog,
)
from h_lab import (
    MAKE,
    VENV,
    Blackhole,
    Lab,
    Lines,
    Nginx,
    free_port,
    fresh_case,
    go_request,
    iso,
    node_env,
    now_ns,
    run,
    wait_listening,
    write_truth,
)
from h_pg_cases import CR_STACK, GO_CLIENT, reconcile_fields

sys.path.insert(0, str(MAKE.parents[2]))  # the repository root: devstack's local CA
from devstack.ca import LocalCA


def stub_api(lab: Lab, state: dict[str, Any]) -> tuple[int, Path, Path]:
    """The Python provisioning API; returns (port, its state file, its log)."""
    port = free_port()
    tasks = lab.root / "api-state.json"
    tasks.write_text(json.dumps(state))
    log = lab.root / "provisioning-api.log"
    lab.spawn(
        [sys.executable, str(MAKE / "h_stubapi.py"), str(port), str(tasks), str(log)],
        lab.root / "stubapi.out",
    )
    wait_listening(port)
    return port, tasks, log


def api_records(log: Path, *, skip_start: bool = True) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    return lines[1:] if skip_start else lines


def fetch(method: str, url: str, *, ca: Path, body: str = "") -> dict[str, Any]:
    """One request by Node.js fetch (h_fetch.js) trusting ``ca`` besides the system's."""
    done = run(
        ["node", str(MAKE / "h_fetch.js"), method, url, body],
        env={**node_env(), "NODE_EXTRA_CA_CERTS": str(ca)},
        check=False,
    )
    answer = json.loads(done.stdout)
    answer["start_ns"], answer["end_ns"] = int(answer["start_ns"]), int(answer["end_ns"])
    return answer


class Engine:
    """The Go workflow engine's zerolog lines and its transitions."""

    def __init__(self) -> None:
        self.lines = Lines()
        self.audit = Lines()

    def log(self, ns: int, level: str, event: str, **fields: Any) -> None:
        fields.setdefault("caller", "flow/provision.go:187")
        self.lines.add(
            zerolog(ns, level, event, service="workflow-engine", layer="workflow", **fields)
        )

    def move(
        self,
        ns: int,
        alloc: str,
        frm: str | None,
        to: str,
        *,
        wf: str,
        node: str,
        **attributes: Any,
    ) -> None:
        self.audit.add(
            transition(
                ns,
                "allocation",
                alloc,
                to,
                frm=frm,
                attributes=attributes or None,
                allocation_id=alloc,
                workflow_id=wf,
                node_id=node,
            )
        )


def tls_files(lab: Lab) -> dict[str, Path]:
    """Two CAs (the old and the new internal one) and the ingress's leaf certificates."""
    old_ca = LocalCA.create(lab.root / "ca-2024")
    new_ca = LocalCA.create(lab.root / "ca-2026")
    hosts = ["prov-ingress.dc1.internal", "127.0.0.1"]
    old_leaf = old_ca.issue(
        "prov-ingress.dc1.internal",
        hosts=hosts,
        key_path=lab.root / "leaf-2024.key",
        cert_path=lab.root / "leaf-2024.pem",
    )
    new_leaf = new_ca.issue(
        "prov-ingress.dc1.internal",
        hosts=hosts,
        key_path=lab.root / "leaf-2026.key",
        cert_path=lab.root / "leaf-2026.pem",
    )
    # The new chain as the PKI team shipped it: leaf, then the (self-signed) new root.
    chain = lab.root / "chain-2026.pem"
    chain.write_bytes(new_leaf.cert_path.read_bytes() + new_ca.cert_path.read_bytes())
    bundle = lab.root / "bundle.pem"
    bundle.write_bytes(old_ca.cert_path.read_bytes() + new_ca.cert_path.read_bytes())
    return {
        "old_ca": old_ca.cert_path,
        "new_ca": new_ca.cert_path,
        "bundle": bundle,
        "old_cert": old_leaf.cert_path,
        "old_key": old_leaf.key_path,
        "new_chain": chain,
        "new_key": new_leaf.key_path,
    }


def case_cert_selfsigned_chain() -> None:
    """cert: the ingress now serves a chain from a new internal CA; the Node.js agent of
    r31-n07 pins the old CA: 'self-signed certificate in certificate chain'."""
    name = "h-cert-node-selfsigned-chain"
    seed, seed_node, seed_wf, seed_task = "a3-7c0d19", "r31-n07", "wf-7c0d19", 8841
    ok, ok_node, ok_wf, ok_task = "a3-7bf2e4", "r31-n02", "wf-7bf2e4", 8839
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        tls = tls_files(lab)
        api_port, state_file, api_log = stub_api(lab, {"tasks": {}})
        nginx = Nginx(lab)
        port = free_port()

        def server(cert: Path, key: Path) -> str:
            return f"""    log_format main '$remote_addr - $remote_user [$time_local] '
        '"$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_id';
    access_log {nginx.prefix}/logs/access.log main;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name prov-ingress.dc1.internal;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        add_header X-Request-ID $request_id always;
        location / {{
            proxy_pass http://127.0.0.1:{api_port};
            proxy_set_header X-Request-ID $request_id;
        }}
    }}"""

        nginx.start(server(tls["old_cert"], tls["old_key"]), port, error_level="info")
        time.sleep(0.5)
        nginx.set_marks()
        base = f"https://127.0.0.1:{port}"
        engine = Engine()
        seed_lines, ok_lines = Lines(), Lines()
        seed_skew_ms = 21_000

        def seed_log(
            ns: int, level: str, event: str, answer: dict[str, Any] | None = None, **fields: Any
        ) -> None:
            record: dict[str, Any] = {
                "time": ns // 1_000_000,
                "level": {"info": 30, "warn": 40, "error": 50}[level],
                "msg": event,
                "service": "bmagent-js",
                "node_id": seed_node,
                **fields,
            }
            if answer is not None and "err" in answer:
                record["err"] = {**answer["err"], "code": answer.get("cause_code")}
            seed_lines.add(from_pino(record, layer="node", skew_ms=seed_skew_ms))

        def ok_log(ns: int, level: str, event: str, **fields: Any) -> None:
            ok_lines.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="bmagent",
                    layer="node",
                    skew_s=-0.8,
                    node_id=ok_node,
                    **fields,
                )
            )

        # The PKI rotation: the new chain goes live with a reload.
        nginx.reload(server(tls["new_chain"], tls["new_key"]), error_level="info")
        ns = now_ns()
        for alloc, node, wf, task in (
            (ok, ok_node, ok_wf, ok_task),
            (seed, seed_node, seed_wf, seed_task),
        ):
            engine.log(
                ns,
                "info",
                "task queued",
                allocation_id=alloc,
                workflow_id=wf,
                node_id=node,
                task_id=task,
                kind="provision",
            )
            engine.move(ns, alloc, "scheduled", "provisioning", wf=wf, node=node)
            ns += 2_000_000
        state_file.write_text(
            json.dumps(
                {
                    "tasks": {
                        ok_node: {"task_id": ok_task, "allocation_id": ok, "workflow_id": ok_wf},
                        seed_node: {
                            "task_id": seed_task,
                            "allocation_id": seed,
                            "workflow_id": seed_wf,
                        },
                    }
                }
            )
        )
        queued = now_ns()
        # The neighbour's Go agent trusts both CAs (its bundle was updated).
        answer = go_request_tls(f"{base}/v1/nodes/{ok_node}/tasks/claim", tls["bundle"])
        ok_log(
            answer["end_ns"],
            "info",
            "task claimed",
            caller="agent/claim.go:64",
            allocation_id=ok,
            workflow_id=ok_wf,
            task_id=ok_task,
            correlation_id=answer["request_id"],
        )
        # The seed's Node.js agent pins /etc/bmagent/ca.pem: the 2024 CA only.
        for attempt, backoff in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 0.0)):
            answer = fetch(
                "POST", f"{base}/v1/nodes/{seed_node}/tasks/claim", ca=tls["old_ca"], body="{}"
            )
            seed_log(
                answer["end_ns"],
                "warn",
                "claim failed",
                answer,
                attempt=attempt,
                backoff_s=backoff or None,
                allocation_id=seed,
                task_id=seed_task,
            )
            if attempt == 2:
                beat = fetch(
                    "POST", f"{base}/v1/nodes/{seed_node}/heartbeat", ca=tls["old_ca"], body="{}"
                )
                seed_log(beat["end_ns"], "warn", "heartbeat failed", beat)
            time.sleep(backoff)
        seed_log(
            now_ns(),
            "error",
            "claim loop: giving up after 4 attempts, next poll in 60s",
            answer,
            allocation_id=seed,
            task_id=seed_task,
        )
        time.sleep(1.0)
        answer = go_request_tls(f"{base}/v1/tasks/{ok_task}/result", tls["bundle"])
        ok_log(
            answer["end_ns"],
            "info",
            "task result reported",
            caller="agent/report.go:40",
            allocation_id=ok,
            workflow_id=ok_wf,
            task_id=ok_task,
            correlation_id=answer["request_id"],
        )
        ns = now_ns()
        engine.log(
            ns, "info", "provision finished", allocation_id=ok, workflow_id=ok_wf, node_id=ok_node
        )
        engine.move(ns, ok, "provisioning", "active", wf=ok_wf, node=ok_node)
        time.sleep(1.0)
        beat = fetch("POST", f"{base}/v1/nodes/{seed_node}/heartbeat", ca=tls["old_ca"], body="{}")
        seed_log(beat["end_ns"], "warn", "heartbeat failed", beat)
        engine.log(
            now_ns(),
            "warn",
            "node missed 3 heartbeats",
            node_id=seed_node,
            caller="fleet/heartbeat.go:58",
            last_seen_s=31.2,
        )
        time.sleep(max(0.0, 30.0 - (now_ns() - queued) / 1e9))
        ns = now_ns()
        engine.log(
            ns,
            "error",
            "provision failed",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            error=f"task {seed_task} not claimed by {seed_node} within 30s",
        )
        engine.move(
            ns,
            seed,
            "provisioning",
            "provision_failed",
            wf=seed_wf,
            node=seed_node,
            reason="task_not_claimed",
        )
        (folder / "nginx-access.log").write_text(nginx.evidence("access.log"))
        (folder / "nginx-error.log").write_text(nginx.evidence("error.log"))
        Lines.write_items(api_records(api_log), folder / "provisioning-api.jsonl")
        seed_lines.write(folder / "bmagent-js-r31-n07.ndjson")
        ok_lines.write(folder / "bmagent-r31-n02.ndjson")
        engine.lines.write(folder / "workflow-engine.ndjson")
        engine.audit.write(folder / "workflow.ndjson")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "cert",
            "first_failure_contains": "self-signed certificate in certificate chain",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "provisioning-api.jsonl": "ndjson",
                "bmagent-js-r31-n07.ndjson": "ndjson",
                "bmagent-r31-n02.ndjson": "ndjson",
                "workflow-engine.ndjson": "ndjson",
            },
            "notes": (
                "The PKI team rotated the ingress certificate to the new internal CA "
                "(ca-2026) and shipped the chain as leaf + the new self-signed root; nginx was "
                "reloaded (the reload is in the error log). The Go agents' CA bundle already "
                f"held both CAs, so {ok_node} claimed and finished {ok} through the ingress. "
                f"{seed_node} runs the Node.js agent (bmagent-js), which pins its own CA file "
                "with the 2024 CA only: every claim and heartbeat failed the TLS handshake "
                "with Node's 'self-signed certificate in certificate chain' "
                "(SELF_SIGNED_CERT_IN_CHAIN), wrapped by fetch as 'TypeError: fetch failed' "
                "(pino's serializer appends the cause). nginx has no access line for those "
                "attempts, only info-level handshake lines without a request; the API never "
                "saw them. The workflow engine then saw missed heartbeats (a node-looking "
                "symptom) and failed the provision as 'not claimed within 30s' (a timeout "
                "wrapper). Owner: the certificate (chain/trust). The Node agent's clock runs "
                "21 s fast. Noise: the neighbour's healthy allocation (excluded). Produced by "
                "h_web_cases.py: nginx 1.22.1 TLS ingress (combined + bare $request_id; "
                "error log at info) with certificates from two local CAs made with "
                "cryptography (devstack/ca.py); the seed agent's requests by Node.js 20 fetch "
                "(h_fetch.js, NODE_EXTRA_CA_CERTS=the 2024 CA, error serialised by "
                "pino-std-serializers 7), its log lines pino records mapped to the record "
                "schema; the neighbour's by Go 1.19 net/http (h_goclient.go) with a bundle of "
                "both CAs; the API is h_stubapi.py; the engine's zerolog-style lines and the "
                "transitions are written by the generator around those answers."
            ),
        },
    )


def go_request_tls(url: str, cacert: Path, *, method: str = "POST") -> dict[str, Any]:
    """A request by the Go client trusting only ``cacert``."""
    done = run(
        [
            str(GO_CLIENT),
            "-method",
            method,
            "-url",
            url,
            "-body",
            "{}",
            "-timeout",
            "10s",
            "-cacert",
            str(cacert),
        ],
        check=False,
    )
    return json.loads(done.stdout)


def case_ingress_go_client_timeout() -> None:
    """ingress: a config push leaves the upstream pool with one stale endpoint that accepts
    and never answers; the Go agent's client times out (nginx 499), the worker gets 504."""
    name = "h-ingress-go-client-timeout"
    seed, seed_node, seed_wf, seed_task = "px-40f7d2", "r22-n08", "px-40f7d2-prov", 30117
    ok, ok_node, ok_wf, ok_task = "px-40f1a9", "r22-n03", "px-40f1a9-prov", 30112
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        api_port, state_file, api_log = stub_api(
            lab,
            {"tasks": {ok_node: {"task_id": ok_task, "allocation_id": ok, "workflow_id": ok_wf}}},
        )
        stale = free_port()
        Blackhole(lab, stale)
        nginx = Nginx(lab)
        port = free_port()
        fmt = (
            'log_format jsonl escape=json \'{"time_local":"$time_local",'
            '"msec":"$msec","req_id":"$request_id","client":"$remote_addr",'
            '"request":"$request","status":"$status",'
            '"upstream_status":"$upstream_status","upstream_addr":"$upstream_addr",'
            '"request_time":"$request_time",'
            '"upstream_response_time":"$upstream_response_time",'
            '"user_agent":"$http_user_agent"}\';'
        )

        def config(upstream: int) -> str:
            return f"""    {fmt}
    access_log {nginx.prefix}/logs/access.log jsonl;
    upstream provisioning_api {{ server 127.0.0.1:{upstream}; }}
    server {{
        listen 127.0.0.1:{port};
        server_name prov-ingress.dc1.internal;
        add_header X-Request-ID $request_id always;
        location / {{
            proxy_pass http://provisioning_api;
            proxy_set_header X-Request-ID $request_id;
            proxy_connect_timeout 3s;
            proxy_read_timeout 8s;
        }}
    }}"""

        nginx.start(config(api_port), port, error_level="info")
        time.sleep(0.5)
        nginx.set_marks()
        base = f"http://127.0.0.1:{port}"
        engine = Engine()
        seed_lines, ok_lines, worker = Lines(), Lines(), Lines()

        def agent(
            lines: Lines, node: str, skew: float, ns: int, level: str, event: str, **fields: Any
        ) -> None:
            lines.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="bmagent",
                    layer="node",
                    skew_s=skew,
                    node_id=node,
                    **fields,
                )
            )

        ns = now_ns()
        engine.log(
            ns,
            "info",
            "task queued",
            allocation_id=ok,
            workflow_id=ok_wf,
            node_id=ok_node,
            task_id=ok_task,
        )
        engine.move(ns, ok, "scheduled", "provisioning", wf=ok_wf, node=ok_node)
        answer = go_request(GO_CLIENT, "POST", f"{base}/v1/nodes/{ok_node}/tasks/claim", body="{}")
        agent(
            ok_lines,
            ok_node,
            1.1,
            answer["end_ns"],
            "info",
            "task claimed",
            caller="agent/claim.go:64",
            allocation_id=ok,
            workflow_id=ok_wf,
            task_id=ok_task,
            correlation_id=answer["request_id"],
        )
        time.sleep(0.5)
        answer = go_request(GO_CLIENT, "POST", f"{base}/v1/tasks/{ok_task}/result", body="{}")
        agent(
            ok_lines,
            ok_node,
            1.1,
            answer["end_ns"],
            "info",
            "task result reported",
            caller="agent/report.go:40",
            allocation_id=ok,
            workflow_id=ok_wf,
            task_id=ok_task,
            correlation_id=answer["request_id"],
        )
        ns = now_ns()
        engine.log(
            ns, "info", "provision finished", allocation_id=ok, workflow_id=ok_wf, node_id=ok_node
        )
        engine.move(ns, ok, "provisioning", "active", wf=ok_wf, node=ok_node)
        time.sleep(1.0)
        # The config push: the pool's only server is now a pod address that no longer
        # serves (its socket accepts, nothing answers).
        nginx.reload(config(stale), error_level="info")
        state_file.write_text(
            json.dumps(
                {
                    "tasks": {
                        seed_node: {
                            "task_id": seed_task,
                            "allocation_id": seed,
                            "workflow_id": seed_wf,
                        }
                    }
                }
            )
        )
        ns = now_ns()
        engine.log(
            ns,
            "info",
            "task queued",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            task_id=seed_task,
        )
        engine.move(ns, seed, "scheduled", "provisioning", wf=seed_wf, node=seed_node)
        seed_skew = -14.0
        for attempt, backoff in ((1, 1.0), (2, 2.0), (3, 0.0)):
            answer = go_request(
                GO_CLIENT,
                "POST",
                f"{base}/v1/nodes/{seed_node}/tasks/claim",
                body="{}",
                timeout_s=5.0,
            )
            agent(
                seed_lines,
                seed_node,
                seed_skew,
                answer["end_ns"],
                "warn",
                "claim failed",
                caller="agent/claim.go:71",
                allocation_id=seed,
                task_id=seed_task,
                attempt=attempt,
                error=answer.get("error") or answer.get("status_line"),
            )
            time.sleep(backoff)
        agent(
            seed_lines,
            seed_node,
            seed_skew,
            now_ns(),
            "error",
            "claim loop: giving up after 3 attempts, next poll in 60s",
            caller="agent/claim.go:88",
            allocation_id=seed,
            task_id=seed_task,
            error=answer.get("error") or answer.get("status_line"),
        )
        # The worker asks the API (through the ingress) whether the task was claimed.
        check = run(
            [sys.executable, "-c", WORKER_CHECK, f"{base}/v1/allocations/{seed}"],
            check=False,
            timeout_s=60,
        )
        result = json.loads(check.stdout)
        worker.add(
            {
                "ts": iso(result["at_ns"]),
                "level": "error",
                "event": "provision failed",
                "service": "provision-worker",
                "layer": "workflow",
                "logger": "worker.provision",
                "allocation_id": seed,
                "workflow_id": seed_wf,
                "node_id": seed_node,
                "error": {"type": result["type"], "message": result["message"]},
                "exception": result["traceback"],
            }
        )
        ns = now_ns()
        engine.move(
            ns,
            seed,
            "provisioning",
            "provision_failed",
            wf=seed_wf,
            node=seed_node,
            reason="status_check_failed",
        )
        engine.log(
            ns,
            "error",
            "provision failed",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            error=f"status check: {result['message'].splitlines()[0]}",
        )
        time.sleep(0.5)
        (folder / "nginx-access.json").write_text(nginx.evidence("access.log"))
        (folder / "nginx-error.log").write_text(nginx.evidence("error.log"))
        Lines.write_items(api_records(api_log), folder / "provisioning-api.jsonl")
        seed_lines.write(folder / "bmagent-r22-n08.log")
        ok_lines.write(folder / "bmagent-r22-n03.log")
        engine.lines.write(folder / "workflow-engine.ndjson")
        engine.audit.write(folder / "workflow.ndjson")
        worker.write(folder / "provision-worker.ndjson")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "ingress",
            "first_failure_contains": "Client.Timeout exceeded while awaiting headers",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "nginx-access.json": "nginx",
                "provisioning-api.jsonl": "ndjson",
                "bmagent-r22-n08.log": "ndjson",
                "bmagent-r22-n03.log": "ndjson",
                "workflow-engine.ndjson": "ndjson",
                "provision-worker.ndjson": "ndjson",
            },
            "notes": (
                "A configuration push to the ingress replaced the provisioning API upstream "
                "with a stale pod address; nginx was reloaded (reload lines in the error log). "
                "That address still accepts TCP connections (a socket whose backlog completes "
                "the handshake) but nothing answers. The Go node agent of r22-n08 (http.Client "
                "Timeout 5 s) got 'context deadline exceeded (Client.Timeout exceeded while "
                f"awaiting headers)' on each claim of {seed}'s task; nginx logged those as 499 "
                "with an info-level 'client prematurely closed connection' (reads like the "
                "client's fault). The Python worker's status check (httpx, 20 s timeout) got "
                "nginx's own 504 after proxy_read_timeout 8 s ('upstream timed out (110: "
                "Connection timed out) while reading response header from upstream') and "
                "failed the provision with httpx.HTTPStatusError. The API itself was healthy "
                "and never saw those requests. Owner: the ingress (its upstream). Agent clock "
                f"of r22-n08 is 14 s slow. Noise: {ok} on r22-n03 claimed and finished just "
                "before the push (excluded). Produced by h_web_cases.py: nginx 1.22.1 (JSON "
                "access log with time_local/msec/req_id/request, error log at info), the API "
                "h_stubapi.py, the agents' requests by Go 1.19 net/http (h_goclient.go), the "
                "worker's check by httpx 0.28 (real traceback); zerolog-style agent/engine "
                "lines and transitions written by the generator around those answers."
            ),
        },
    )


# The worker's status check, run in a separate interpreter: the real httpx exception.
WORKER_CHECK = """
import json, sys, time, traceback
import httpx
try:
    with httpx.Client(timeout=20.0) as client:
        client.get(sys.argv[1], headers={"User-Agent": "provision-worker/4.1"}).raise_for_status()
    print(json.dumps({"ok": True, "at_ns": time.time_ns()}))
except Exception as exc:
    print(json.dumps({"type": type(exc).__module__ + "." + type(exc).__qualname__,
                      "message": str(exc), "traceback": traceback.format_exc(),
                      "at_ns": time.time_ns()}))
"""


def jwt(secret: str, claims: dict[str, Any]) -> str:
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


REGISTER_PLAYBOOK = """- name: Register bare-metal node
  hosts: "{{ node_id }}"
  gather_facts: false
  tasks:
    - name: Read BMC firmware inventory
      ansible.builtin.command: "true"
      changed_when: false
    - name: Register node in the node registry
      ansible.builtin.uri:
        url: "{{ registry_url }}/v1/nodes/{{ node_id }}/registration"
        method: POST
        headers:
          Authorization: "Bearer {{ registry_token }}"
        body_format: json
        body:
          allocation_id: "{{ allocation_id }}"
          node_id: "{{ node_id }}"
        status_code: [200, 201]
      delegate_to: localhost
    - name: Mark node registered
      ansible.builtin.command: "true"
"""


def case_auth_ansible_uri_401() -> None:
    """api_auth: the AAP credential behind the register-node template holds a JWT that
    expired; the uri task gets 401, the job fails, everything downstream blames the job."""
    from h_ansible import (
        aap_job,
        event_record,
        jobs_page,
        run_playbook,
        seconds_between,
        write_events,
    )

    name = "h-auth-ansible-uri-401"
    seed, seed_node, seed_job = "rg-5591c", "r05-n11", 7714
    ok, ok_node, ok_job = "rg-5588a", "r05-n09", 7712
    folder = fresh_case(name)
    lab = Lab(name)
    secret = uuid.uuid4().hex
    try:
        reg_port = free_port()
        reg_log = lab.root / "node-registry.out"
        lab.spawn(
            [
                "java",
                "-cp",
                "/tmp/h_bin/classes",
                "com.example.registry.RegistryServer",
                str(reg_port),
                secret,
            ],
            reg_log,
        )
        wait_listening(reg_port)
        nginx = Nginx(lab)
        port = free_port()
        nginx.start(
            f"""    log_format upstreaminfo '$remote_addr - $remote_user [$time_local] "$request" '
        '$status $body_bytes_sent "$http_referer" "$http_user_agent" "$request_id" '
        '$upstream_status $request_time $upstream_response_time $upstream_addr';
    access_log {nginx.prefix}/logs/access.log upstreaminfo;
    server {{
        listen 127.0.0.1:{port};
        server_name registry.dc1.internal;
        location / {{
            proxy_pass http://127.0.0.1:{reg_port};
            proxy_set_header X-Request-ID $request_id;
        }}
    }}""",
            port,
        )
        nginx.set_marks()
        now_s = int(time.time())
        legacy = jwt(
            secret,
            {
                "sub": "svc-aap-register",
                "iss": "https://sso.dc1.internal/realms/metal",
                "iat": now_s - 90 * 86400,
                "exp": now_s - 7260,
            },
        )
        fresh = jwt(
            secret,
            {
                "sub": "svc-aap-register-v2",
                "iss": "https://sso.dc1.internal/realms/metal",
                "iat": now_s - 60,
                "exp": now_s + 3540,
            },
        )
        inventory = (
            f"[baremetal]\n{ok_node} ansible_connection=local "
            f"ansible_python_interpreter=/usr/bin/python3\n{seed_node} "
            "ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        )
        worker, crs = Lines(), []
        jobs, records = [], []

        def work(ns: int, level: str, event: str, **fields: Any) -> None:
            worker.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="provision-orchestrator",
                    layer="workflow",
                    caller="provider/aap.go:133",
                    **fields,
                )
            )

        version = [88120]

        def cr(
            kind: str,
            alloc: str,
            node: str,
            job: int,
            phase: str,
            message: str,
            ns: int,
            created: str,
        ) -> None:
            version[0] += 11
            obj = provision_request(
                f"pr-{alloc}",
                "tenant-vega",
                allocation=alloc,
                node=node,
                phase=phase,
                message=message,
                at=iso(ns, digits=0),
                created=created,
                resource_version=version[0],
                uid=str(uuid.uuid5(uuid.NAMESPACE_URL, alloc)),
            )
            obj["status"]["provisionJob"] = {
                "id": job,
                "provider": "aap",
                "state": phase,
                "message": message,
            }
            crs.append((kind, obj))

        for alloc, node, job, template, template_id, token, credential in (
            (ok, ok_node, ok_job, "register-node-v2", 31, fresh, "registry-oidc"),
            (seed, seed_node, seed_job, "register-node", 18, legacy, "registry-legacy"),
        ):
            created_ns = now_ns()
            created = iso(created_ns, digits=0)
            cr(
                "ADDED",
                alloc,
                node,
                job,
                "Pending",
                "waiting for provider job",
                created_ns,
                created,
            )
            work(
                created_ns,
                "info",
                "provider job launched",
                allocation_id=alloc,
                node_id=node,
                provider_job=f"aap:{job}",
                template=template,
            )
            time.sleep(1.2)
            extra = {
                "allocation_id": alloc,
                "node_id": node,
                "registry_url": f"http://127.0.0.1:{port}",
            }
            rc, events = run_playbook(
                lab,
                str(job),
                "register-node.yml",
                REGISTER_PLAYBOOK,
                inventory,
                {**extra, "registry_token": token},
            )
            for event in events:
                record = event_record(event, job)
                text = json.dumps(record).replace(token, "********")
                records.append(json.loads(text))
            started, finished = events[0]["created"], events[-1]["created"]
            status = "successful" if rc == 0 else "failed"
            jobs.append(
                aap_job(
                    job,
                    name=template,
                    template_id=template_id,
                    playbook="register-node.yml",
                    status=status,
                    created_ns=created_ns,
                    started=started,
                    finished=finished,
                    elapsed=seconds_between(started, finished),
                    extra_vars={
                        "allocation_id": alloc,
                        "node_id": node,
                        "registry_url": "https://registry.dc1.internal",
                    },
                    credential=credential,
                )
            )
            time.sleep(0.8)
            ns = now_ns()
            if status == "successful":
                work(
                    ns,
                    "info",
                    "provider job finished",
                    allocation_id=alloc,
                    node_id=node,
                    provider_job=f"aap:{job}",
                    status=status,
                )
                cr("MODIFIED", alloc, node, job, "Provisioned", "node registered", ns, created)
            else:
                work(
                    ns,
                    "error",
                    "provision failed",
                    allocation_id=alloc,
                    node_id=node,
                    provider_job=f"aap:{job}",
                    error=f"provider job aap:{job} ({template}) finished with status failed",
                )
                cr(
                    "MODIFIED",
                    alloc,
                    node,
                    job,
                    "Failed",
                    f"provider job {job} failed",
                    ns,
                    created,
                )
            time.sleep(1.0)
        (folder / "nginx-access.log").write_text(nginx.evidence("access.log"))
        registry = [json.loads(x) for x in reg_log.read_text().splitlines() if x.startswith("{")][
            1:
        ]
        Lines.write_items(registry, folder / "node-registry.json")
        write_events(records, folder / "aap-job-events.ndjson")
        (folder / "aap-jobs.json").write_text(jobs_page(sorted(jobs, key=lambda j: -j["id"])))
        worker.write(folder / "provision-orchestrator.log")
        (folder / "provisionrequests-watch.json").write_text(watch_lines(crs))
        failed = next(r["event"] for r in records if r["runner_event"] == "runner_on_failed")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "api_auth",
            "first_failure_contains": "Status code was 401",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "node-registry.json": "ndjson",
                "aap-job-events.ndjson": "ndjson",
                "aap-jobs.json": "aap",
                "provision-orchestrator.log": "ndjson",
                "provisionrequests-watch.json": "k8s",
            },
            "notes": (
                f"AAP job {seed_job} (template register-node) registers {seed_node} for "
                f"allocation {seed} with the node registry; its credential 'registry-legacy' "
                "injects a static JWT that expired about two hours earlier (nobody rotated it "
                "after the move to OIDC client credentials). The registry (Java) rejected it: "
                "'Bearer token rejected' (WARN, InvalidBearerTokenException 'Jwt expired at "
                '...\'), 401 with WWW-Authenticate: Bearer error="invalid_token"; nginx logged '
                "the 401; the uri task failed (ansible-core's own text: "
                f"{failed.splitlines()[0][:160]!r}), so the job failed, the orchestrator "
                "logged 'provider job ... finished with status failed' and the "
                "ProvisionRequest went Failed: every downstream symptom names the provider "
                "job. Owner: API authentication (the expired token). Noise: job "
                f"{ok_job} (register-node-v2, a fresh OIDC token) registered {ok_node} for "
                f"{ok} through the same registry a few seconds earlier (excluded). The "
                "registry logs in +01:00. Produced by h_web_cases.py: the playbooks ran for "
                "real with ansible-runner 2.4.3 / ansible-core 2.19.14 (hosts on "
                "ansible_connection=local, the uri task delegated to localhost); job events "
                "are ansible-runner's own, mapped by h_ansible.py (the token replaced by "
                "********, the private data dir shown as /runner); the registry is "
                "java/com/example/registry/RegistryServer.java (Java 17 HttpServer, HS256 "
                "JWT check, logback-style JSON it writes itself) behind nginx 1.22.1 "
                '(combined + "$request_id" $upstream_status $request_time '
                "$upstream_response_time $upstream_addr); the AAP job objects (AWX API "
                "fields), the orchestrator's zerolog-style lines and the ProvisionRequest "
                "watch events are written by the generator around those runs."
            ),
        },
    )


def case_wfstate_release_while_provisioning() -> None:
    """workflow_state: the engine restarted with the seed's 'provisioned' event still queued;
    the machine stays in provisioning; the CR's deletion asks for a release: 409 forever."""
    from h_ansible import aap_job, jobs_page
    from h_lab import Pg
    from h_pg_cases import GoAgent, inventory_db, start_api

    name = "h-wfstate-release-while-provisioning"
    seed, seed_node, seed_wf, seed_job = "k8a-19f3", "r18-n02", "wf-19f3", 6120
    ok, ok_node, ok_wf, ok_job = "k8a-19e7", "r18-n01", "wf-19e7", 6117
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        pg = Pg(lab, "pg", 5432)
        pg.init()
        pg.start()
        inventory_db(pg, [seed, ok])
        state = lab.root / "engine-state.json"
        state.write_text(
            json.dumps(
                {
                    alloc: {"state": "requested", "workflow_id": wf, "node_id": node}
                    for alloc, wf, node in ((ok, ok_wf, ok_node), (seed, seed_wf, seed_node))
                }
            )
        )
        engine_log, audit = lab.root / "engine.log", lab.root / "engine-audit.jsonl"
        engine_port = free_port()
        python = str(VENV / "bin" / "python")
        engine_cmd = [
            python,
            str(MAKE / "h_engine.py"),
            str(engine_port),
            str(state),
            str(engine_log),
            str(audit),
        ]
        first = lab.spawn([*engine_cmd, "2.8.0"], lab.root / "engine.out")
        wait_listening(engine_port)
        api_port, api_log = start_api(
            lab, 5432, env={"ENGINE_URL": f"http://127.0.0.1:{engine_port}"}
        )
        nginx = Nginx(lab)
        port = free_port()
        fmt = (
            'log_format json_combined escape=json \'{"time_iso8601":"$time_iso8601",'
            '"msec":"$msec","request_id":"$request_id",'
            '"http_x_correlation_id":"$http_x_correlation_id","remote_addr":"$remote_addr",'
            '"request_method":"$request_method","request_uri":"$request_uri",'
            '"status":"$status","upstream_status":"$upstream_status",'
            '"request_time":"$request_time","http_user_agent":"$http_user_agent"}\';'
        )
        nginx.start(
            f"""    {fmt}
    access_log {nginx.prefix}/logs/access.log json_combined;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{api_port};
            proxy_set_header X-Request-ID $request_id;
        }}
    }}""",
            port,
        )
        nginx.set_marks()
        base = f"http://127.0.0.1:{port}"
        relay, operator, crs, jobs = Lines(), Lines(), [], []

        def publish(alloc: str, event: str, event_id: int) -> None:
            cid = uuid.uuid4().hex
            answer = go_request(
                GO_CLIENT,
                "POST",
                f"http://127.0.0.1:{engine_port}/allocations/{alloc}/events/{event}",
                headers={"X-Correlation-ID": cid, "User-Agent": "outbox-relay/1.4.2"},
            )
            relay.add(
                zerolog(
                    answer["end_ns"],
                    "info",
                    "outbox event published",
                    service="outbox-relay",
                    layer="workflow",
                    caller="relay/publish.go:92",
                    allocation_id=alloc,
                    outbox_id=event_id,
                    topic="allocation.events",
                    event_name=event,
                    status=answer["status"],
                    correlation_id=cid,
                )
            )

        created: dict[str, str] = {}
        version = [51200]

        def cr(
            kind: str,
            alloc: str,
            node: str,
            phase: str,
            message: str,
            ns: int,
            deletion: str | None = None,
        ) -> None:
            version[0] += 5
            created.setdefault(alloc, iso(ns, digits=0))
            crs.append(
                (
                    kind,
                    provision_request(
                        f"pr-{alloc}",
                        "tenant-lyra",
                        allocation=alloc,
                        node=node,
                        phase=phase,
                        message=message,
                        at=iso(ns, digits=0),
                        created=created[alloc],
                        resource_version=version[0],
                        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, alloc)),
                        finalizers=["provisioning.example.com/release"],
                        deletion=deletion,
                    ),
                )
            )

        def reconcile(ns: int, level: str, event: str, alloc: str, **fields: Any) -> None:
            operator.add(
                controller_runtime(
                    ns,
                    level,
                    event,
                    allocation_id=alloc,
                    **reconcile_fields(f"pr-{alloc}", "tenant-lyra"),
                    **fields,
                )
            )

        event_id = 90411
        for alloc, node, _wf, _job in (
            (ok, ok_node, ok_wf, ok_job),
            (seed, seed_node, seed_wf, seed_job),
        ):
            ns = now_ns()
            cr("ADDED", alloc, node, "Pending", "waiting for the workflow engine", ns)
            reconcile(ns, "info", "Reconciling ProvisionRequest", alloc)
            event_id += 1
            publish(alloc, "provision", event_id)
            time.sleep(0.3)
        time.sleep(2.5)
        for alloc, node, wf, job in (
            (ok, ok_node, ok_wf, ok_job),
            (seed, seed_node, seed_wf, seed_job),
        ):
            ns = now_ns()
            cr("MODIFIED", alloc, node, "Provisioning", f"provider job {job} running", ns)
            started = now_ns()
            time.sleep(1.0)
            agent = GoAgent(node, base, skew_s=0.0)
            agent.report(alloc, wf, "active")
            jobs.append(
                aap_job(
                    job,
                    name="provision-baremetal",
                    template_id=12,
                    playbook="provision.yml",
                    status="successful",
                    created_ns=started - 400_000_000,
                    started=iso(started),
                    finished=iso(now_ns()),
                    elapsed=round((now_ns() - started) / 1e9, 3),
                    extra_vars={"allocation_id": alloc, "node_id": node, "workflow_id": wf},
                )
            )
            agent.lines.write(folder / f"bmagent-{node}.jsonl")
            event_id += 1
            publish(alloc, "provisioned", event_id)
            if alloc == ok:
                time.sleep(2.5)
                ns = now_ns()
                cr("MODIFIED", ok, ok_node, "Ready", "allocation active", ns)
                reconcile(ns, "info", "ProvisionRequest ready", ok)
        # The engine's rolling update lands while the seed's event is still queued.
        time.sleep(0.2)
        first.terminate()
        first.wait(10)
        lab.spawn([*engine_cmd, "2.8.1"], lab.root / "engine2.out")
        wait_listening(engine_port)
        time.sleep(6.0)
        # The tenant deletes the ProvisionRequest; the finalizer asks for a release.
        deletion = iso(now_ns(), digits=0)
        cr(
            "MODIFIED",
            seed,
            seed_node,
            "Provisioning",
            f"provider job {seed_job} running",
            now_ns(),
            deletion=deletion,
        )
        for attempt, backoff in ((1, 0.005), (2, 0.01), (3, 5.0)):
            answer = go_request(
                GO_CLIENT,
                "POST",
                f"{base}/v1/allocations/{seed}/release",
                headers={"User-Agent": "provisioning-operator/0.9.2"},
            )
            reconcile(
                answer["end_ns"],
                "error",
                "Reconciler error",
                seed,
                error=f"release allocation {seed}: POST /v1/allocations/{seed}/release: "
                f"{answer['status_line']}: {answer['body']}",
                stacktrace=CR_STACK,
                attempt=attempt,
            )
            time.sleep(backoff)
        time.sleep(1.0)
        (folder / "nginx-access.json").write_text(nginx.evidence("access.log"))
        api = [from_pino(line, layer="api") for line in pino_lines(api_log.read_text())]
        Lines.write_items(api[1:], folder / "inventory-api.ndjson")
        (folder / "workflow-engine.log").write_text(engine_log.read_text())
        (folder / "workflow.ndjson").write_text(audit.read_text())
        relay.write(folder / "outbox-relay.jsonl")
        operator.write(folder / "operator.jsonl")
        (folder / "provisionrequests-watch.json").write_text(watch_lines(crs))
        (folder / "aap-jobs.json").write_text(jobs_page(sorted(jobs, key=lambda j: -j["id"])))
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "workflow_state",
            "first_failure_contains": "Can't Release when in Provisioning",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "nginx-access.json": "nginx",
                "inventory-api.ndjson": "ndjson",
                "workflow-engine.log": "ndjson",
                "outbox-relay.jsonl": "ndjson",
                "operator.jsonl": "ndjson",
                "provisionrequests-watch.json": "k8s",
                f"bmagent-{seed_node}.jsonl": "ndjson",
                f"bmagent-{ok_node}.jsonl": "ndjson",
            },
            "notes": (
                f"{seed} provisioned fine: AAP job {seed_job} successful, the node agent "
                "reported 'active' (200), the outbox relay published the 'provisioned' event "
                "and the workflow engine queued it (202). The engine then got its rolling "
                "update: SIGTERM with the event still queued ('1 queued event(s) not "
                "processed', no allocation id) and v2.8.1 started from the persisted state, "
                f"where {seed} is still 'provisioning'. When the tenant deleted the "
                "ProvisionRequest, the operator's finalizer asked the inventory API for a "
                "release; the API asked the engine, whose python-statemachine refused: "
                "statemachine.exceptions.TransitionNotAllowed \"Can't Release when in "
                "Provisioning.\" (traceback in the engine's log); the API answered 409, nginx "
                "logged 409s, the operator logged 'Reconciler error' and requeued, the CR "
                "stays Deleting behind its finalizer. Owner: the workflow state machine (the "
                "allocation's state is stale and the release transition is refused). The 409s "
                "read like an API error; the provider and the node are fine. Noise: "
                f"{ok} (r18-n01) went through the same engine before the restart and is "
                "active (excluded). Produced by h_web_cases.py: the engine is h_engine.py "
                "(python-statemachine 3.2.2 under Python 3.11, its own JSON log and audit "
                "lines: the workflow.ndjson transitions are what it wrote), the inventory API "
                "h_api.js (Node.js 20, pino, pg 8.23 against PostgreSQL 15.18) behind nginx "
                "1.22.1 (JSON log_format with request_id and X-Correlation-ID), the agents', "
                "relay's and operator's HTTP calls by Go 1.19 net/http (h_goclient.go) with "
                "their zerolog/controller-runtime-style lines written around the real "
                "answers; the AAP job objects and ProvisionRequest watch events are written "
                "by the generator."
            ),
        },
    )


EACCES_JS = """
const fs = require('fs');
const { err } = require('pino-std-serializers');
try { fs.readFileSync(process.argv[2]); }
catch (e) { process.stdout.write(JSON.stringify(err(e)) + '\\n'); }
"""


def case_none_operator_conflict_404() -> None:
    """none: controller-runtime logs an optimistic-concurrency conflict at error level and
    requeues; the agent long-polls 404 'no pending task'; the portal's console probe 404s."""
    name = "h-none-operator-conflict-404"
    seed, seed_node, seed_wf, seed_task = "ax-2c71e0", "r44-n15", "wf-2c71e0", 51207
    bad, bad_node, bad_wf = "ax-2c6f9b", "r44-n16", "wf-2c6f9b"
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        api_port, state_file, api_log = stub_api(lab, {"tasks": {}, "allocations": {}})
        nginx = Nginx(lab)
        port = free_port()
        nginx.start(
            f"""    log_format main '$remote_addr - $remote_user [$time_local] "$request" $status '
        '$body_bytes_sent "$http_referer" "$http_user_agent" "$request_id" '
        'rt=$request_time uct="$upstream_connect_time" urt="$upstream_response_time"';
    access_log {nginx.prefix}/logs/access.log main;
    server {{
        listen 127.0.0.1:{port};
        add_header X-Request-ID $request_id always;
        location / {{
            proxy_pass http://127.0.0.1:{api_port};
            proxy_set_header X-Request-ID $request_id;
        }}
    }}""",
            port,
        )
        nginx.set_marks()
        base = f"http://127.0.0.1:{port}"
        engine = Engine()
        agent, operator, bad_agent, crs = Lines(), Lines(), Lines(), []
        version = [230411]
        created: dict[str, str] = {}

        def cr(kind: str, alloc: str, node: str | None, phase: str, message: str, ns: int) -> None:
            version[0] += 3
            created.setdefault(alloc, iso(ns, digits=0))
            crs.append(
                (
                    kind,
                    provision_request(
                        f"pr-{alloc}",
                        "tenant-nova",
                        allocation=alloc,
                        node=node,
                        phase=phase,
                        message=message,
                        at=iso(ns, digits=0),
                        created=created[alloc],
                        resource_version=version[0],
                        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, alloc)),
                    ),
                )
            )

        def reconcile(ns: int, level: str, event: str, alloc: str, **fields: Any) -> None:
            operator.add(
                controller_runtime(
                    ns,
                    level,
                    event,
                    allocation_id=alloc,
                    **reconcile_fields(f"pr-{alloc}", "tenant-nova"),
                    **fields,
                )
            )

        def seed_agent(ns: int, level: str, event: str, **fields: Any) -> None:
            agent.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="bmagent",
                    layer="node",
                    skew_s=-6.5,
                    node_id=seed_node,
                    **fields,
                )
            )

        def portal() -> int:
            done = run(
                [
                    "curl",
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "-A",
                    "Mozilla/5.0 (X11; Linux x86_64) tenant-portal/5.2",
                    f"{base}/v1/allocations/{seed}/console",
                ],
                check=False,
            )
            return int(done.stdout)

        # The agent long-polls before the task exists.
        for _ in range(2):
            answer = go_request(
                GO_CLIENT, "POST", f"{base}/v1/nodes/{seed_node}/tasks/claim", body="{}"
            )
            seed_agent(
                answer["end_ns"],
                "debug",
                "no task",
                caller="agent/poll.go:51",
                status=answer["status"],
                correlation_id=answer["request_id"],
            )
            time.sleep(1.0)
        ns = now_ns()
        cr("ADDED", seed, None, "Pending", "waiting for a node", ns)
        reconcile(ns, "info", "Reconciling ProvisionRequest", seed)
        ns = now_ns()
        reconcile(
            ns,
            "error",
            "Reconciler error",
            seed,
            error=(
                f"update status of tenant-nova/pr-{seed}: Operation cannot be fulfilled on "
                f'provisionrequests.provisioning.example.com "pr-{seed}": the object has been '
                "modified; please apply your changes to the latest version and try again"
            ),
            stacktrace=CR_STACK,
        )
        time.sleep(0.05)
        ns = now_ns()
        reconcile(ns, "info", "Reconciling ProvisionRequest", seed)
        reconcile(ns + 2_000_000, "info", "node selected", seed, node_id=seed_node)
        cr("MODIFIED", seed, seed_node, "Provisioning", f"node {seed_node} selected", ns)
        engine.log(
            ns,
            "info",
            "task queued",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            task_id=seed_task,
        )
        engine.move(ns, seed, "scheduled", "provisioning", wf=seed_wf, node=seed_node)
        state_file.write_text(
            json.dumps(
                {
                    "tasks": {
                        seed_node: {
                            "task_id": seed_task,
                            "allocation_id": seed,
                            "workflow_id": seed_wf,
                        }
                    },
                    "allocations": {seed: {"state": "provisioning"}},
                }
            )
        )
        # The neighbour's Node.js agent cannot read its host key (EACCES: runs as nobody).
        key = lab.root / "host.pem"
        key.write_text("-----BEGIN PRIVATE KEY-----\n")
        os.chmod(key, 0o600)
        script = lab.root / "eacces.js"
        script.write_text(EACCES_JS)
        os.chmod(lab.root, 0o755)  # noqa: S103 - nobody must reach the key to be refused
        done = run(
            ["runuser", "-u", "nobody", "--", "node", str(script), str(key)],
            env=node_env(),
            check=False,
        )
        err = json.loads(done.stdout)
        err["message"] = err["message"].replace(str(key), "/var/lib/bmagent/keys/host.pem")
        err["stack"] = err["stack"].replace(str(key), "/var/lib/bmagent/keys/host.pem")
        err["stack"] = err["stack"].replace(str(script), "/opt/bmagent-js/lib/tls.js")
        ns = now_ns()
        bad_agent.add(
            from_pino(
                {
                    "time": ns // 1_000_000,
                    "level": 50,
                    "service": "bmagent-js",
                    "msg": "cannot load host key",
                    "node_id": bad_node,
                    "allocation_id": bad,
                    "workflow_id": bad_wf,
                    "err": err,
                },
                layer="node",
            )
        )
        engine.log(
            ns + 300_000_000,
            "error",
            "provision failed",
            allocation_id=bad,
            workflow_id=bad_wf,
            node_id=bad_node,
            error="agent r44-n16 reported 'cannot load host key'",
        )
        engine.move(
            ns + 300_000_000,
            bad,
            "provisioning",
            "provision_failed",
            wf=bad_wf,
            node=bad_node,
            reason="agent_error",
        )
        # The tenant opens the console before the node is ready.
        for _ in range(2):
            portal()
            time.sleep(0.7)
        answer = go_request(
            GO_CLIENT, "POST", f"{base}/v1/nodes/{seed_node}/tasks/claim", body="{}"
        )
        seed_agent(
            answer["end_ns"],
            "info",
            "task claimed",
            caller="agent/claim.go:64",
            allocation_id=seed,
            workflow_id=seed_wf,
            task_id=seed_task,
            correlation_id=answer["request_id"],
        )
        time.sleep(2.0)
        seed_agent(
            now_ns(),
            "info",
            "image written",
            caller="image/write.go:141",
            allocation_id=seed,
            workflow_id=seed_wf,
            task_id=seed_task,
            bytes=10737418240,
        )
        answer = go_request(GO_CLIENT, "POST", f"{base}/v1/tasks/{seed_task}/result", body="{}")
        seed_agent(
            answer["end_ns"],
            "info",
            "task result reported",
            caller="agent/report.go:40",
            allocation_id=seed,
            workflow_id=seed_wf,
            task_id=seed_task,
            correlation_id=answer["request_id"],
        )
        state_file.write_text(
            json.dumps(
                {"tasks": {}, "consoles": [seed], "allocations": {seed: {"state": "active"}}}
            )
        )
        ns = now_ns()
        engine.log(
            ns,
            "info",
            "provision finished",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
        )
        engine.move(ns, seed, "provisioning", "active", wf=seed_wf, node=seed_node)
        cr("MODIFIED", seed, seed_node, "Ready", "allocation active", ns + 40_000_000)
        reconcile(ns + 40_000_000, "info", "ProvisionRequest ready", seed)
        time.sleep(0.5)
        if portal() != 200:
            raise RuntimeError("the console should answer now")
        answer = go_request(
            GO_CLIENT, "POST", f"{base}/v1/nodes/{seed_node}/tasks/claim", body="{}"
        )
        seed_agent(
            answer["end_ns"],
            "debug",
            "no task",
            caller="agent/poll.go:51",
            status=answer["status"],
            correlation_id=answer["request_id"],
        )
        time.sleep(0.5)
        (folder / "nginx-access.log").write_text(nginx.evidence("access.log"))
        Lines.write_items(api_records(api_log), folder / "provisioning-api.jsonl")
        agent.write(folder / "bmagent-r44-n15.ndjson")
        bad_agent.write(folder / "bmagent-js-r44-n16.ndjson")
        operator.write(folder / "operator.jsonl")
        engine.lines.write(folder / "workflow-engine.ndjson")
        engine.audit.write(folder / "workflow.ndjson")
        (folder / "provisionrequests-watch.json").write_text(watch_lines(crs))
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "none",
            "excluded": [f"allocation_id={bad}"],
            "sources": {
                "provisioning-api.jsonl": "ndjson",
                "bmagent-r44-n15.ndjson": "ndjson",
                "bmagent-js-r44-n16.ndjson": "ndjson",
                "operator.jsonl": "ndjson",
                "workflow-engine.ndjson": "ndjson",
                "provisionrequests-watch.json": "k8s",
            },
            "notes": (
                f"A healthy provision of {seed} on {seed_node}. The operator's first status "
                "update lost an optimistic-concurrency race and controller-runtime logged it "
                "at error level ('Reconciler error': 'Operation cannot be fulfilled on "
                "provisionrequests...: the object has been modified; please apply your "
                "changes to the latest version and try again', the API server's 409 Conflict "
                "text); the requeue 50 ms later succeeded. The node agent long-polls for "
                "tasks and gets 404 'no pending task' before and after its task; the tenant "
                "portal asked for the console twice before the node was ready (404 'console "
                "not ready'), then got it (200). The allocation went active. No failure. "
                f"Noise: {bad} on {bad_node}, whose Node.js agent could not read its host key "
                "(EACCES, excluded). Agent clock of r44-n15 is 6.5 s slow. Produced by "
                'h_web_cases.py: nginx 1.22.1 (combined + "$request_id" rt= uct= urt=) in '
                "front of h_stubapi.py, the agent's requests by Go 1.19 net/http "
                "(h_goclient.go), the portal's by curl 7.88; the EACCES error is Node.js 20's "
                "own (readFileSync of a 0600 root file run as nobody, serialised by "
                "pino-std-serializers; paths renamed to the agent's); the operator's "
                "controller-runtime-style lines, the engine's zerolog-style lines, the "
                "transitions and the ProvisionRequest watch events are written by the "
                "generator (the conflict text is the Kubernetes API server's)."
            ),
        },
    )
