"""Hold-out cases around a real PostgreSQL: a crash and its recovery, a write to a standby
after a bad failover, a planned restart that a retry rides out.

Each function runs the programs in real time (a minute or two) and writes one case folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from h_common import from_pino, logback, pino_lines, transition, zerolog
from h_lab import (
    JDBC_JAR,
    MAKE,
    Lab,
    Lines,
    Nginx,
    Pg,
    background,
    free_port,
    fresh_case,
    go_build,
    go_request,
    iso,
    node_env,
    now_ns,
    run,
    wait_listening,
    write_truth,
)

GO_CLIENT = Path("/tmp/h_bin/h_goclient")
JAVA_CLASSES = Path("/tmp/h_bin/classes")

# nginx JSON access format with other field names than the devstack's (req_id, uri, client,
# @timestamp at one-second resolution, no msec).
EDGE_FORMAT = (
    'log_format edge escape=json \'{"@timestamp":"$time_iso8601","req_id":"$request_id",'
    '"correlation_id":"$http_x_correlation_id","client":"$remote_addr",'
    '"method":"$request_method","uri":"$request_uri","status":"$status",'
    '"upstream_status":"$upstream_status","upstream_addr":"$upstream_addr",'
    '"request_time":"$request_time","upstream_response_time":"$upstream_response_time",'
    '"user_agent":"$http_user_agent","host":"$host"}\';'
)


def build_tools() -> None:
    go_build(MAKE / "h_goclient.go", GO_CLIENT)
    JAVA_CLASSES.mkdir(parents=True, exist_ok=True)
    run(
        [
            "javac",
            "-d",
            str(JAVA_CLASSES),
            "-cp",
            str(JDBC_JAR),
            str(MAKE / "java" / "com" / "example" / "fleet" / "Capture.java"),
        ]
    )


def java_capture(*args: str) -> dict[str, Any]:
    done = run(
        ["java", "-cp", f"{JAVA_CLASSES}:{JDBC_JAR}", "com.example.fleet.Capture", *args],
        timeout_s=60,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def inventory_db(pg: Pg, allocations: list[str]) -> None:
    pg.psql("CREATE ROLE inventory LOGIN")
    pg.psql("CREATE DATABASE inventory OWNER inventory")
    rows = ", ".join(f"('{a}', 'provisioning', NULL, now())" for a in allocations)
    schema = (
        "CREATE TABLE allocations (id text PRIMARY KEY, state text NOT NULL, node_id text, "
        "updated_at timestamptz NOT NULL); ALTER TABLE allocations OWNER TO inventory; "
    )
    pg.psql(schema + f"INSERT INTO allocations VALUES {rows}", db="inventory")  # noqa: S608


def start_api(
    lab: Lab, pg_port: int, *, retries: int = 0, env: dict[str, str] | None = None
) -> tuple[int, Path]:
    port = free_port()
    log = lab.root / "inventory-api.out"
    lab.spawn(
        ["node", str(MAKE / "h_api.js")],
        log,
        env={
            **node_env(),
            "PORT": str(port),
            "PGHOST": "127.0.0.1",
            "PGPORT": str(pg_port),
            "PGDATABASE": "inventory",
            "PGUSER": "inventory",
            "DB_RETRIES": str(retries),
            **(env or {}),
        },
    )
    wait_listening(port)
    return port, log


def edge_nginx(lab: Lab, api_port: int) -> tuple[Nginx, int]:
    port = free_port()
    nginx = Nginx(lab)
    body = f"""    {EDGE_FORMAT}
    access_log {nginx.prefix}/logs/access.log edge;
    upstream inventory {{ server 127.0.0.1:{api_port}; keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        server_name inventory.prov.internal;
        location / {{
            proxy_pass http://inventory;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Request-ID $request_id;
            proxy_read_timeout 30s;
        }}
    }}"""
    nginx.start(body, port)
    nginx.set_marks()
    return nginx, port


class GoAgent:
    """A node agent (Go, zerolog) whose HTTP calls are made by the real Go client."""

    def __init__(self, node: str, base: str, *, skew_s: float = 0.0) -> None:
        self.node = node
        self.base = base
        self.skew_s = skew_s
        self.lines = Lines()

    def log(self, ns: int, level: str, event: str, **fields: Any) -> None:
        self.lines.add(
            zerolog(
                ns,
                level,
                event,
                service="bmagent",
                layer="node",
                skew_s=self.skew_s,
                node_id=self.node,
                **fields,
            )
        )

    def report(
        self,
        allocation: str,
        workflow: str,
        state: str,
        *,
        attempt: int = 1,
        caller: str = "report/report.go:88",
    ) -> dict[str, Any]:
        cid = uuid.uuid4().hex
        answer = go_request(
            GO_CLIENT,
            "POST",
            f"{self.base}/v1/allocations/{allocation}/report",
            body=json.dumps({"state": state, "node_id": self.node}),
            headers={"X-Correlation-ID": cid},
        )
        ids = {"allocation_id": allocation, "workflow_id": workflow, "correlation_id": cid}
        if answer["status"] == 200:
            self.log(
                answer["end_ns"],
                "info",
                "state reported",
                caller=caller,
                state=state,
                attempt=attempt,
                **ids,
            )
        else:
            error = answer.get("error") or f"unexpected status {answer['status_line']}"
            self.log(
                answer["end_ns"],
                "warn" if attempt < 3 else "error",
                "report state failed",
                caller=caller,
                state=state,
                attempt=attempt,
                error=error,
                **ids,
            )
        return answer


def _startup_pid(timeout_s: float = 5.0) -> int | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["pgrep", "-f", "postgres: startup"], capture_output=True, text=True, check=False
        ).stdout.split()
        if found:
            return int(found[0])
        time.sleep(0.002)
    return None


def case_db_pg_crash_recovery() -> None:
    """db: a backend crash (SIGSEGV) puts PostgreSQL in crash recovery; 57P03 for every
    new connection; the API answers 503, the agent gives up, the Java worker times out."""
    name = "h-db-pg-crash-recovery"
    seed, seed_node, seed_wf = "bm-2291a", "r12-n04", "wfr-88412"
    ok_alloc, ok_node, ok_wf = "bm-2287c", "r12-n03", "wfr-88409"
    bad_alloc, bad_node, bad_wf = "bm-2290b", "r12-n05", "wfr-88411"
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        pg = Pg(lab, "pg", 5432, {"log_min_messages": "warning", "log_checkpoints": "off"})
        pg.init()
        pg.start()
        inventory_db(pg, [seed, ok_alloc, bad_alloc])
        pg.psql(
            "CREATE TABLE racks AS SELECT 'r' || (g % 40) AS rack, g AS slot "
            "FROM generate_series(1, 200000) g",
            db="inventory",
        )
        pg.set_mark()
        api_port, api_log = start_api(lab, 5432)
        nginx, port = edge_nginx(lab, api_port)
        base = f"http://127.0.0.1:{port}"
        seed_agent = GoAgent(seed_node, base, skew_s=-9.0)
        ok_agent = GoAgent(ok_node, base, skew_s=2.0)
        bad_agent = GoAgent(bad_node, base, skew_s=0.4)
        worker, audit = Lines(), Lines()

        def work(ns: int, level: str, event: str, **fields: Any) -> None:
            worker.add(
                logback(
                    ns,
                    level,
                    event,
                    service="fleet-worker",
                    layer="workflow",
                    logger="com.example.fleet.workflow.ProvisionFlow",
                    thread="flow-exec-3",
                    **fields,
                )
            )

        for alloc, node, wf in (
            (ok_alloc, ok_node, ok_wf),
            (bad_alloc, bad_node, bad_wf),
            (seed, seed_node, seed_wf),
        ):
            ns = now_ns()
            audit.add(
                transition(
                    ns,
                    "allocation",
                    alloc,
                    "provisioning",
                    frm="scheduled",
                    attributes={"node": node},
                    allocation_id=alloc,
                    workflow_id=wf,
                    node_id=node,
                )
            )
            work(
                ns,
                "info",
                f"provision of {alloc} dispatched to {node}",
                allocation_id=alloc,
                workflow_id=wf,
                node_id=node,
            )
            time.sleep(0.3)
        ok_agent.log(
            now_ns(),
            "info",
            "image written",
            caller="image/write.go:141",
            allocation_id=ok_alloc,
            workflow_id=ok_wf,
            bytes=21474836480,
        )
        ok_agent.report(ok_alloc, ok_wf, "active")
        ns = now_ns()
        audit.add(
            transition(
                ns,
                "allocation",
                ok_alloc,
                "active",
                frm="provisioning",
                allocation_id=ok_alloc,
                workflow_id=ok_wf,
                node_id=ok_node,
            )
        )
        work(
            ns,
            "info",
            f"allocation {ok_alloc} active",
            allocation_id=ok_alloc,
            workflow_id=ok_wf,
            node_id=ok_node,
        )
        bad_agent.log(
            now_ns(),
            "error",
            "image verification failed",
            caller="image/verify.go:63",
            allocation_id=bad_alloc,
            workflow_id=bad_wf,
            error="sha256 mismatch for rhel-9.4-x86_64.qcow2: got 9f2c1e..., want 4b07d3...",
        )
        time.sleep(0.5)
        seed_agent.log(
            now_ns(),
            "info",
            "image written",
            caller="image/write.go:141",
            allocation_id=seed,
            workflow_id=seed_wf,
            bytes=21474836480,
        )
        seed_agent.report(seed, seed_wf, "imaged")
        dispatched = now_ns()
        time.sleep(1.0)
        ns = now_ns()
        work(
            ns,
            "error",
            f"provision of {bad_alloc} failed: agent reported image verification failure",
            allocation_id=bad_alloc,
            workflow_id=bad_wf,
            node_id=bad_node,
        )
        audit.add(
            transition(
                ns,
                "allocation",
                bad_alloc,
                "provision_failed",
                frm="provisioning",
                attributes={"reason": "image_verification"},
                allocation_id=bad_alloc,
                workflow_id=bad_wf,
                node_id=bad_node,
            )
        )
        # The nightly capacity report: a long query in its own session.
        report = subprocess.Popen(
            [
                "psql",
                "-X",
                "host=127.0.0.1 port=5432 user=postgres dbname=inventory "
                "application_name=capacity-report",
                "-c",
                "SELECT r.rack, count(*) FROM racks r CROSS JOIN generate_series(1, 2000) "
                "GROUP BY r.rack ORDER BY 2 DESC",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.5)
        backend = pg.psql(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'capacity-report'"
        )
        os.kill(int(backend), signal.SIGSEGV)  # stands in for a crash inside an extension
        startup = _startup_pid()
        if startup is None:
            raise RuntimeError("no startup process seen after the crash")
        os.kill(startup, signal.SIGSTOP)  # a long WAL replay
        crashed = now_ns()
        time.sleep(0.5)
        for attempt, wait_s in ((1, 2.0), (2, 4.0), (3, 0.0)):
            answer = seed_agent.report(seed, seed_wf, "active", attempt=attempt)
            if wait_s:
                time.sleep(wait_s)
        seed_agent.log(
            now_ns(),
            "error",
            "giving up on state report, next attempt in 60s",
            caller="report/report.go:102",
            allocation_id=seed,
            workflow_id=seed_wf,
            error=f"unexpected status {answer['status_line']}",
            state="active",
        )
        time.sleep(max(0.0, 14.0 - (now_ns() - crashed) / 1e9))
        os.kill(startup, signal.SIGCONT)
        report.wait(30)
        time.sleep(max(0.0, 40.0 - (now_ns() - dispatched) / 1e9))
        timeout = java_capture("timeout", "10")
        ns = now_ns()
        work(
            ns,
            "error",
            f"provision of {seed} failed: no completion report from {seed_node} within 40 s",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            stack_trace=timeout["stack_trace"],
        )
        audit.add(
            transition(
                ns,
                "allocation",
                seed,
                "provision_failed",
                frm="provisioning",
                attributes={"reason": "completion_report_timeout"},
                allocation_id=seed,
                workflow_id=seed_wf,
                node_id=seed_node,
            )
        )
        (folder / "postgres.csv").write_text(pg.evidence())
        (folder / "edge-access.json").write_text(nginx.evidence("access.log"))
        api = [from_pino(line, layer="api") for line in pino_lines(api_log.read_text())]
        Lines.write_items(api[1:], folder / "inventory-api.ndjson")
        seed_agent.lines.write(folder / "bmagent-r12-n04.jsonl")
        ok_agent.lines.write(folder / "bmagent-r12-n03.jsonl")
        bad_agent.lines.write(folder / "bmagent-r12-n05.jsonl")
        worker.write(folder / "fleet-worker.json")
        audit.write(folder / "allocation-audit.jsonl")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "db",
            "first_failure_contains": "the database system is in recovery mode",
            "excluded": [f"allocation_id={ok_alloc}", f"allocation_id={bad_alloc}"],
            "sources": {
                "edge-access.json": "nginx",
                "inventory-api.ndjson": "ndjson",
                "bmagent-r12-n04.jsonl": "ndjson",
                "bmagent-r12-n03.jsonl": "ndjson",
                "bmagent-r12-n05.jsonl": "ndjson",
                "fleet-worker.json": "ndjson",
                "allocation-audit.jsonl": "workflow",
            },
            "notes": (
                "A PostgreSQL backend serving the nightly capacity report (application_name "
                "capacity-report, no allocation ids) crashed with signal 11; the postmaster "
                "terminated every other server process and went through crash recovery. "
                "Until the startup process finished, every new connection was refused with "
                "FATAL 57P03 'the database system is in recovery mode'. The node agent of "
                f"{seed_node} reported {seed} 'active' three times in that window: the "
                "inventory API (Node.js, node-postgres) got 'the database system is in "
                "recovery mode' (DatabaseError, code 57P03) and answered 503; the agent gave up "
                "until its next poll; the Java fleet worker timed out waiting for the "
                "completion report 40 s after dispatch (a wrapper: java.util.concurrent."
                "TimeoutException) and failed the provision. Owner: the database. The API's "
                "pooled idle connection also reported 'Connection terminated unexpectedly' "
                "(no allocation id). Agent clock of r12-n04 is 9 s slow, so its 503s are "
                "stamped before the API's errors. Noise: bm-2287c (r12-n03) went active just "
                "before the crash; bm-2290b (r12-n05) failed its image checksum (deploy/"
                "image-side, excluded). Produced by h_pg_cases.py on this machine: "
                "PostgreSQL 15.18 (Debian) csvlog, the crash is a real SIGSEGV sent to the "
                "report's backend (standing in for a crash in an extension), the recovery "
                "window lengthened to ~14 s by SIGSTOP/SIGCONT of the startup process "
                "(standing in for a slow recovery; the pause shows in its 'syncing data "
                "directory' line); nginx 1.22.1 JSON access log (field "
                "names req_id/uri/client, one-second @timestamp) in front of h_api.js (Node.js "
                "20, pg 8.23, pino 9; pino lines mapped to the record schema: time->ts, "
                "msg->event, err->error{type,message,stack,code...}); agent requests made by "
                "h_goclient.go (Go 1.19 net/http), the agents' zerolog-style lines written "
                "around their real status lines; the worker's logback-style lines hand-written "
                "around a real TimeoutException stack trace from Java 17 (java/.../Capture."
                "java); the audit rows written by the generator."
            ),
        },
    )


COMBINED_CID = (
    'log_format combined_cid \'$remote_addr - $remote_user [$time_local] "$request" $status '
    '$body_bytes_sent "$http_referer" "$http_user_agent" "$request_id" '
    "cid=$http_x_correlation_id rt=$request_time us=$upstream_status "
    "urt=$upstream_response_time';"
)


def case_none_pg_restart_retry() -> None:
    """none: a planned PostgreSQL restart (minor update); the API's retry rides it out."""
    name = "h-none-pg-restart-retry"
    seed, seed_node, seed_wf = "bm-3104e", "r07-n21", "wfr-90233"
    other, other_node, other_wf = "bm-3101a", "r07-n19", "wfr-90230"
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        pg = Pg(lab, "pg", 5432, {"log_min_messages": "warning"})
        pg.init()
        pg.start()
        inventory_db(pg, [seed, other])
        pg.set_mark()
        api_port, api_log = start_api(lab, 5432, retries=4)
        nginx = Nginx(lab)
        port = free_port()
        nginx.start(
            f"""    {COMBINED_CID}
    access_log {nginx.prefix}/logs/access.log combined_cid;
    server {{
        listen 127.0.0.1:{port};
        server_name inventory.prov.internal;
        location / {{
            proxy_pass http://127.0.0.1:{api_port};
            proxy_set_header X-Request-ID $request_id;
        }}
    }}""",
            port,
        )
        nginx.set_marks()
        base = f"http://127.0.0.1:{port}"
        seed_agent = GoAgent(seed_node, base, skew_s=4.5)
        other_agent = GoAgent(other_node, base, skew_s=-1.2)
        engine, audit = Lines(), Lines()

        def eng(ns: int, level: str, event: str, **fields: Any) -> None:
            engine.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="workflow-engine",
                    layer="workflow",
                    caller="flow/provision.go:211",
                    **fields,
                )
            )

        for alloc, node, wf in ((other, other_node, other_wf), (seed, seed_node, seed_wf)):
            ns = now_ns()
            audit.add(
                transition(
                    ns,
                    "allocation",
                    alloc,
                    "provisioning",
                    frm="scheduled",
                    allocation_id=alloc,
                    workflow_id=wf,
                    node_id=node,
                )
            )
            eng(ns, "info", "provision started", allocation_id=alloc, workflow_id=wf, node_id=node)
            time.sleep(0.4)
        ns = now_ns()
        other_agent.log(
            ns,
            "error",
            "prepare disks failed",
            caller="disk/prepare.go:77",
            allocation_id=other,
            workflow_id=other_wf,
            error="open /dev/disk/by-path/pci-0000:3b:00.0-nvme-1: no such file or directory",
        )
        time.sleep(0.6)
        ns = now_ns()
        eng(
            ns,
            "error",
            "provision failed",
            allocation_id=other,
            workflow_id=other_wf,
            node_id=other_node,
            error="agent task prepare_disks failed on r07-n19",
        )
        audit.add(
            transition(
                ns,
                "allocation",
                other,
                "provision_failed",
                frm="provisioning",
                attributes={"reason": "prepare_disks"},
                allocation_id=other,
                workflow_id=other_wf,
                node_id=other_node,
            )
        )
        seed_agent.log(
            now_ns(),
            "info",
            "image written",
            caller="image/write.go:141",
            allocation_id=seed,
            workflow_id=seed_wf,
            bytes=10737418240,
        )
        seed_agent.report(seed, seed_wf, "imaged")
        time.sleep(1.0)

        # The minor update: the package's scripts stop the server (fast), unpack, start it
        # again, while the agent reports completion.
        def upgrade() -> None:
            pg.stop("fast")
            time.sleep(1.5)
            pg.start()

        restart = background(upgrade)
        time.sleep(0.15)
        answer = seed_agent.report(seed, seed_wf, "active")
        restart.join(60)
        if answer["status"] != 200:
            raise RuntimeError(f"the retry did not ride out the restart: {answer}")
        ns = now_ns()
        took = (answer["end_ns"] - answer["start_ns"]) / 1e9
        eng(
            ns,
            "warn",
            "slow completion report",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
            report_latency_s=round(took, 3),
        )
        time.sleep(0.3)
        ns = now_ns()
        eng(
            ns,
            "info",
            "provision finished",
            allocation_id=seed,
            workflow_id=seed_wf,
            node_id=seed_node,
        )
        audit.add(
            transition(
                ns,
                "allocation",
                seed,
                "active",
                frm="provisioning",
                allocation_id=seed,
                workflow_id=seed_wf,
                node_id=seed_node,
            )
        )
        time.sleep(1.0)
        (folder / "postgres.csv").write_text(pg.evidence())
        (folder / "nginx-access.log").write_text(nginx.evidence("access.log"))
        api = [from_pino(line, layer="api") for line in pino_lines(api_log.read_text())]
        Lines.write_items(api[1:], folder / "inventory-api.ndjson")
        seen = sorted(
            {r["error"]["message"] for r in api if "error" in r and r.get("correlation_id")}
        )
        seed_agent.lines.write(folder / "bmagent-r07-n21.jsonl")
        other_agent.lines.write(folder / "bmagent-r07-n19.jsonl")
        engine.write(folder / "workflow-engine.jsonl")
        audit.write(folder / "workflow.ndjson")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "none",
            "excluded": [f"allocation_id={other}"],
            "sources": {
                "inventory-api.ndjson": "ndjson",
                "bmagent-r07-n21.jsonl": "ndjson",
                "bmagent-r07-n19.jsonl": "ndjson",
                "workflow-engine.jsonl": "ndjson",
            },
            "notes": (
                f"A healthy provision of {seed} on {seed_node}. While its agent reported "
                "'active', the DBA restarted PostgreSQL for a minor update (pg_ctl stop -m "
                "fast, then start after the package was unpacked): the server logged 'received "
                "fast shutdown request', FATAL 57P01 'terminating connection due to "
                "administrator command' for the inventory API's idle pooled connection, shut "
                "down and was back about 3 s later. The "
                "API (Node.js, node-postgres) lost its idle client ('terminating connection due "
                "to administrator command', warning), its query for the report failed with "
                + " / ".join(repr(m) for m in seen)
                + " while the server was going down or coming up, and its retry (500 ms, 1 s, "
                "2 s, 4 s backoff, logged at warning) "
                "succeeded: the request answered 200 after a couple of seconds, the workflow "
                "engine logged a slow-report warning and the allocation went active. Not a "
                f"failure. Noise: {other} on {other_node} failed earlier to open its NVMe "
                "device path (excluded). Clocks: r07-n21's agent 4.5 s fast. Produced by "
                "h_pg_cases.py: PostgreSQL 15.18 csvlog (real restart), nginx 1.22.1 "
                'combined + "$request_id" cid= rt= us= urt= in front of h_api.js (Node.js '
                "20, pg 8.23, pino 9, DB_RETRIES=4; pino mapped to the record schema), agent "
                "requests by h_goclient.go (Go 1.19); the agents' and the Go workflow "
                "engine's zerolog-style lines and the transitions written by the generator "
                "around those real answers."
            ),
        },
    )


CR_STACK = (
    "sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).reconcileHandler\n"
    "\t/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.17.3/pkg/internal/controller/"
    "controller.go:329\n"
    "sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller)."
    "processNextWorkItem\n"
    "\t/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.17.3/pkg/internal/controller/"
    "controller.go:266\n"
    "sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).Start.func2.2\n"
    "\t/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.17.3/pkg/internal/controller/"
    "controller.go:227"
)


def reconcile_fields(name: str, namespace: str) -> dict[str, Any]:
    return {
        "controller": "provisionrequest",
        "controllerGroup": "provisioning.example.com",
        "controllerKind": "ProvisionRequest",
        "ProvisionRequest": {"name": name, "namespace": namespace},
        "namespace": namespace,
        "name": name,
        "reconcileID": str(uuid.uuid4()),
    }


def case_db_readonly_standby() -> None:
    """db: a failover script pointed db-rw at the hot standby; reads work, the reservation's
    UPDATE fails 25006 'cannot execute UPDATE in a read-only transaction'."""
    from h_common import controller_runtime, provision_request, watch_lines

    name = "h-db-readonly-standby"
    seed, seed_node = "7f3c9b2e-5d41-4a8e-b6f0-2c9d8e1a4b73", "r09-n22"
    ok, ok_node = "1a2b7c9d-3e4f-4a5b-8c6d-9e0f1a2b3c4d", "r09-n17"
    ns_name = "tenant-orion"
    seed_cr, ok_cr = f"pr-{seed[:8]}", f"pr-{ok[:8]}"
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        primary = Pg(lab, "primary", free_port(), {"log_connections": "on"})
        primary.init()
        primary.start()
        primary.psql("CREATE ROLE fleet LOGIN")
        primary.psql("CREATE DATABASE fleet OWNER fleet")
        rows = f"('{seed_node}', 'available', NULL), ('{ok_node}', 'available', NULL)"
        schema = (
            "CREATE TABLE nodes (id text PRIMARY KEY, state text NOT NULL, allocation_id text);"
            " ALTER TABLE nodes OWNER TO fleet; "
        )
        primary.psql(schema + f"INSERT INTO nodes VALUES {rows}", db="fleet")  # noqa: S608
        standby = Pg(lab, "standby", free_port(), {"log_connections": "on"})
        standby.init_standby(primary)
        standby.start()
        time.sleep(1.0)
        primary.set_mark()
        standby.set_mark()

        def url(pg: Pg) -> str:
            return (
                f"jdbc:postgresql://127.0.0.1:{pg.port}/fleet?user=fleet"
                "&ApplicationName=fleet-orchestrator"
            )

        orch, operator, crs = Lines(), Lines(), []
        created: dict[str, str] = {}
        version = [48211]

        def cr(
            kind: str,
            cr_name: str,
            alloc: str,
            node: str,
            phase: str,
            message: str,
            ns: int,
            conditions: list[dict[str, Any]],
        ) -> None:
            version[0] += 7
            created.setdefault(cr_name, iso(ns, digits=0))
            crs.append(
                (
                    kind,
                    provision_request(
                        cr_name,
                        ns_name,
                        allocation=alloc,
                        node=node,
                        phase=phase,
                        message=message,
                        at=iso(ns, digits=0),
                        created=created[cr_name],
                        resource_version=version[0],
                        conditions=conditions,
                        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, cr_name)),
                    ),
                )
            )

        def java(ns: int, level: str, event: str, **fields: Any) -> None:
            fields.setdefault("logger", "com.example.fleet.NodeReservationService")
            fields.setdefault("thread", "http-nio-8080-exec-4")
            orch.add(
                logback(
                    ns,
                    level,
                    event,
                    service="fleet-orchestrator",
                    layer="api",
                    offset_h=-5.0,
                    **fields,
                )
            )

        def reconcile(
            ns: int, level: str, event: str, cr_name: str, alloc: str, **fields: Any
        ) -> None:
            operator.add(
                controller_runtime(
                    ns,
                    level,
                    event,
                    allocation_id=alloc,
                    **reconcile_fields(cr_name, ns_name),
                    **fields,
                )
            )

        # The neighbour, before the flip: reserved on the primary.
        ns = now_ns()
        cr("ADDED", ok_cr, ok, ok_node, "Pending", "waiting for a node", ns, [])
        reconcile(ns, "info", "Reconciling ProvisionRequest", ok_cr, ok)
        done = java_capture("reserve", url(primary), ok_node, ok)
        if done.get("result") != "reserved":
            raise RuntimeError(f"reservation on the primary failed: {done}")
        java(
            done["at_ns"],
            "info",
            f"node {ok_node} reserved for allocation {ok}",
            allocation_id=ok,
            node_id=ok_node,
        )
        ns = now_ns()
        cond = [
            {
                "type": "NodeReserved",
                "status": "True",
                "reason": "Reserved",
                "message": f"node {ok_node} reserved",
                "lastTransitionTime": iso(ns, digits=0),
            }
        ]
        cr("MODIFIED", ok_cr, ok, ok_node, "Provisioning", f"node {ok_node} reserved", ns, cond)
        reconcile(ns, "info", "node reserved", ok_cr, ok, node_id=ok_node)
        time.sleep(2.0)
        # db-rw.prov.internal now resolves to the standby: every new connection lands there.
        ns = now_ns()
        java(
            ns,
            "info",
            "connection pool refreshed: 8 connections to db-rw.prov.internal:5432 "
            "(maxLifetime reached)",
            logger="com.zaxxer.hikari.pool.HikariPool",
            thread="HikariPool-1 housekeeper",
        )
        time.sleep(1.5)
        ns = now_ns()
        cr("ADDED", seed_cr, seed, seed_node, "Pending", "waiting for a node", ns, [])
        attempts = 0
        for wait_s in (0.005, 0.01, 5.0):
            attempts += 1
            ns = now_ns()
            reconcile(ns, "info", "Reconciling ProvisionRequest", seed_cr, seed)
            failed = java_capture("reserve", url(standby), seed_node, seed)
            if failed.get("mode") != "reserve" or "type" not in failed:
                raise RuntimeError(f"the standby accepted the reservation: {failed}")
            java(
                failed["at_ns"],
                "error",
                f"reserve failed for allocation {seed}",
                allocation_id=seed,
                node_id=seed_node,
                stack_trace=failed["stack_trace"],
            )
            ns = now_ns()
            java(
                ns,
                "info",
                "POST /internal/v1/reservations 500 (46 ms)",
                logger="com.example.fleet.http.AccessLog",
                allocation_id=seed,
            )
            reconcile(
                now_ns(),
                "error",
                "Reconciler error",
                seed_cr,
                seed,
                error=f"reserve node for {ns_name}/{seed_cr}: orchestrator answered 500 "
                f"Internal Server Error: {failed['message']}",
                stacktrace=CR_STACK,
            )
            time.sleep(wait_s)
        ns = now_ns()
        cond = [
            {
                "type": "NodeReserved",
                "status": "False",
                "reason": "ReservationFailed",
                "message": failed["message"],
                "lastTransitionTime": iso(ns, digits=0),
            }
        ]
        cr(
            "MODIFIED",
            seed_cr,
            seed,
            seed_node,
            "Failed",
            f"node reservation failed after {attempts} attempts",
            ns,
            cond,
        )
        reconcile(
            ns, "info", "ProvisionRequest failed, not requeued", seed_cr, seed, phase="Failed"
        )
        time.sleep(0.5)
        (folder / "pg-primary.csv").write_text(primary.evidence())
        (folder / "pg-standby.csv").write_text(standby.evidence())
        orch.write(folder / "orchestrator.json")
        operator.write(folder / "operator.log")
        (folder / "provisionrequests-watch.json").write_text(watch_lines(crs))
        cause = failed["stack_trace"].split("Caused by: ")[1].splitlines()[0]
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "db",
            "first_failure_contains": "read-only transaction",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "pg-primary.csv": "postgres",
                "pg-standby.csv": "postgres",
                "orchestrator.json": "ndjson",
                "operator.log": "ndjson",
                "provisionrequests-watch.json": "k8s",
            },
            "notes": (
                "A failover drill's script repointed db-rw.prov.internal at the hot standby "
                "while the primary stayed up. The Java fleet orchestrator's pool recycled its "
                "connections (maxLifetime) and reconnected to the standby: reads still work, "
                f"but reserving {seed_node} for allocation {seed} ran an UPDATE, which the "
                "standby refused: SQLSTATE 25006 in the standby's csvlog, and in the "
                f"orchestrator '{cause}' as the cause of its own ReservationException "
                "('reservation of node ... failed'); the orchestrator logs only 'reserve "
                "failed for allocation ...' with the stack trace (logstash-logback "
                "stack_trace), answers 500; the Kubernetes operator (controller-runtime) logs "
                "'Reconciler error' three times and sets the ProvisionRequest Failed. Owner: "
                "the database (writes sent to a read-only standby). 'read-only' can be read as "
                "a read-only filesystem on a node; nothing on the node is wrong. The "
                f"orchestrator logs in its JVM zone (-05:00). Noise: allocation {ok} reserved "
                f"{ok_node} on the primary just before the flip (excluded). Produced by "
                "h_pg_cases.py: two PostgreSQL 15.18 clusters (primary, and a streaming "
                "standby made with pg_basebackup -R), csvlog with log_connections; the "
                "JDBC calls and exceptions are real (Java 17, PgJDBC 42.5.5 from Debian, "
                "java/.../Capture.java, "
                "sqlcommenter comment with allocation_id and node_id in the SQL, "
                "ApplicationName=fleet-orchestrator); the orchestrator's logback lines, the "
                "operator's zap JSON lines (controller-runtime keys, error as a string, "
                "stacktrace) and the ProvisionRequest watch events are written by the "
                "generator around them (no cluster here)."
            ),
        },
    )
