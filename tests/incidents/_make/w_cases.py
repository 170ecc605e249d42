"""The ``w-*`` incidents: what happened in each, told through the records of each service.

Built by ``w_build.py`` (its helpers; the program output it captured). Each function returns
one :class:`w_build.Case`. Times in the calls are true UTC times; a node agent's own clock
is off by its ``skew_s``, which its records show.
"""

from __future__ import annotations

from w_build import (
    GO,
    PY,
    Case,
    Http,
    ansible,
    ansible_line,
    api_line,
    at,
    awx_job,
    job_event,
    k8s_list,
    k8s_watch,
    node_agent,
    provenance,
    provision_request,
    transition,
    ts_k8s,
    ts_micro_z,
    worker,
)

CASES = []


def clock_on(day: str):
    """``t(clock)``: nanoseconds of ``day`` at ``clock`` (see :func:`w_build.at`)."""

    def t(clock: str) -> int:
        return at(day, clock)

    return t


def case(build):
    CASES.append(build)
    return build


EXEC_MISSING = GO["exec-missing"]["error"]  # exec: "ipmitool": executable file not found in $PATH
IPMI_EXIT = GO["ipmi-exit"]["error"]  # exit status 1
IPMI_STDERR = GO["ipmi-exit"][
    "stderr"
].strip()  # Error: Unable to establish IPMI v2 / RMCP+ session
ENOSPC = GO["write-image"]["error"]
EROFS_RENAME = GO["persist-state"]["error"]
EROFS_OPEN = GO["persist-state-open"]["error"]
MODULE = PY["module_missing"]
IPMI = PY["ipmi_session"]
IPMI_NOISE = PY["ipmi_session_noise"]
MACHINE = PY["invalid_transition"]
AWX_STARTUP = (
    "Task was marked as running at system start up. The system must have not shut down "
    "properly, so it has been marked as failed."
)  # awx/main/tasks/system.py (reap on dispatcher start-up)
AWX_REAPED = "Job reaped due to instance shutdown"  # awx/main/tasks/system.py (lost instance)

HTTP_NOTE = (
    "ingress-access.log: Debian nginx's real access lines ({fmt}) for requests sent through it "
    "to the FastAPI provisioning API; provisioning-api.log: what that API (w_api_app.py, its "
    "own JSON logging, not agent_logging) wrote for the same requests, joined by nginx's "
    "$request_id, which nginx forwards as X-Correlation-ID. {extra}"
)
JSON_FMT = "JSON log_format with $request_id, as devstack/ingress.py"
COMBINED_FMT = 'combined format followed by "$request_id" $upstream_status $request_time'


def http_notes(fmt: str, extra: str = "") -> str:
    return HTTP_NOTE.format(fmt=fmt, extra=extra)


@case
def deploy_ipmitool_missing() -> Case:
    day = "2026-11-10"
    a, n, ni, wf, task = "alloc-5d1e07", "n-r12-07", "ni-r12-07-0c41", "wf-5d1e07-p1", "t-5d1e07-01"
    b, n2, ni2, wf2 = "alloc-a0913f", "n-r12-09", "ni-r12-09-77aa", "wf-a0913f-p1"
    c, wfc = "alloc-90c3e4", "wf-90c3e4-r1"
    skew, skew2 = 18.0, -6.0
    t = clock_on(day)
    http = Http("w-deploy-ipmitool-missing")
    for label, clock in (
        ("provision", "09:41:02.310"),
        ("noise_provision", "09:41:02.955"),
        ("poll1", "09:41:15.020"),
        ("noise_poll", "09:41:40.500"),
        ("poll2", "09:41:45.100"),
        ("poll3", "09:42:15.300"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-deploy-ipmitool-missing",
        seed=f"allocation_id={a}",
        owner="deploy",
        first_failure="executable file not found in $PATH",
        excluded=[f"allocation_id={b}", f"allocation_id={c}"],
        notes=f"""Node agent 2.7.0 was rolled out to rack r12 at 08:05 as a new container image
        that no longer ships ipmitool (the agent's PATH has no ipmitool). The next provision on
        {n} ({a}) fails at its first step: the agent's power-on cannot exec ipmitool
        ("{EXEC_MISSING}"), three attempts, then the task fails; the workflow worker only says
        the task failed and moves the allocation to provision_failed (a workflow state that
        is a symptom here). The agent's clock runs {skew:+.0f} s ahead, so its error is
        stamped after the worker's wrapper. Noise: {b} on {n2} (old agent 2.6.3) fails in the
        same minute for another owner (node: its image cache disk is full, "no space left on
        device"); {c} is the previous allocation of {n}, released at 07:10. Files:
        node-agent-{n}.log and node-agent-{n2}.log: the Go agent's JSON lines (encoding/json
        key order), written by w_cases.py around the error strings Go's os/exec and os
        printed when w_nodeagent.go ran exec.Command("ipmitool") with the agent's PATH and
        wrote an image into a file on a full device (/dev/full); workflow-worker.log: the
        Python worker's structlog JSON lines; allocation-transitions.ndjson: the worker's
        allocation_audit rows as NDJSON (workflow source); {http_notes(JSON_FMT)}
        {provenance()}""",
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("07:09:40.118"),
            skew,
            "info",
            "wipe complete",
            node_id=n,
            node_instance_id=ni,
            allocation_id=c,
            task_id="t-90c3e4-07",
            disks=2,
            duration_s=412.7,
        ),
        node_agent(
            t("07:10:02.004"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=c,
            task_id="t-90c3e4-07",
            kind="wipe_disks",
        ),
        node_agent(
            t("08:05:12.231"),
            skew,
            "info",
            "node agent starting",
            node_id=n,
            node_instance_id=ni,
            version="2.7.0",
            build="2.7.0+g41c9e0a",
            image="registry.dc1.example.net/node-agent:2.7.0",
        ),
        node_agent(
            t("08:05:12.418"),
            skew,
            "info",
            "power backend configured",
            node_id=n,
            node_instance_id=ni,
            backend="ipmitool",
            bmc="10.20.8.11",
        ),
        node_agent(
            t("08:05:13.002"),
            skew,
            "info",
            "registered with workflow",
            node_id=n,
            node_instance_id=ni,
            endpoint="https://workflow.dc1.example.net",
        ),
        node_agent(
            t("09:41:03.512"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="power_on",
        ),
        node_agent(
            t("09:41:03.520"),
            skew,
            "error",
            "power on failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task,
            attempt=1,
            error=EXEC_MISSING,
        ),
        node_agent(
            t("09:41:08.531"),
            skew,
            "error",
            "power on failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task,
            attempt=2,
            error=EXEC_MISSING,
        ),
        node_agent(
            t("09:41:13.540"),
            skew,
            "error",
            "power on failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task,
            attempt=3,
            error=EXEC_MISSING,
        ),
        node_agent(
            t("09:41:13.541"),
            skew,
            "error",
            "task failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="power_on",
            attempts=3,
            error=EXEC_MISSING,
        ),
    )
    out.log(
        f"node-agent-{n2}.log",
        "ndjson",
        node_agent(
            t("09:41:04.010"),
            skew2,
            "info",
            "task accepted",
            node_id=n2,
            node_instance_id=ni2,
            allocation_id=b,
            workflow_id=wf2,
            task_id="t-a0913f-01",
            kind="power_on",
        ),
        node_agent(
            t("09:41:06.877"),
            skew2,
            "info",
            "task succeeded",
            node_id=n2,
            node_instance_id=ni2,
            allocation_id=b,
            task_id="t-a0913f-01",
            kind="power_on",
        ),
        node_agent(
            t("09:41:35.502"),
            skew2,
            "info",
            "task accepted",
            node_id=n2,
            node_instance_id=ni2,
            allocation_id=b,
            workflow_id=wf2,
            task_id="t-a0913f-02",
            kind="image_download",
            image="rhel-9.4-x86_64.qcow2",
        ),
        node_agent(
            t("09:41:46.213"),
            skew2,
            "error",
            "image download failed",
            node_id=n2,
            node_instance_id=ni2,
            allocation_id=b,
            task_id="t-a0913f-02",
            error=ENOSPC,
        ),
        node_agent(
            t("09:41:46.214"),
            skew2,
            "error",
            "task failed",
            node_id=n2,
            node_instance_id=ni2,
            allocation_id=b,
            workflow_id=wf2,
            task_id="t-a0913f-02",
            kind="image_download",
            attempts=1,
            error=ENOSPC,
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("07:10:03.120"),
            "info",
            "release complete",
            allocation_id=c,
            workflow_id=wfc,
            node_id=n,
        ),
        worker(
            t("09:41:02.331"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.std.2x",
        ),
        worker(
            t("09:41:02.981"),
            "info",
            "provision accepted",
            allocation_id=b,
            workflow_id=wf2,
            correlation_id=rid["noise_provision"],
            flavor="bm.std.4x",
        ),
        worker(
            t("09:41:03.395"), "info", "node selected", allocation_id=a, workflow_id=wf, node_id=n
        ),
        worker(
            t("09:41:03.402"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task,
            kind="power_on",
        ),
        worker(
            t("09:41:03.870"),
            "info",
            "dispatching task",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            task_id="t-a0913f-01",
            kind="power_on",
        ),
        worker(
            t("09:41:14.102"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"task {task} (power_on) failed on {n} after 3 attempts",
        ),
        worker(
            t("09:41:35.400"),
            "info",
            "dispatching task",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            task_id="t-a0913f-02",
            kind="image_download",
        ),
        worker(
            t("09:41:46.790"),
            "error",
            "provision failed",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            reason=f"task t-a0913f-02 (image_download) failed on {n2}",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("07:10:03.118"),
            "allocation",
            c,
            "released",
            "releasing",
            allocation_id=c,
            workflow_id=wfc,
            node_id=n,
            attributes={"occupancy": "free"},
        ),
        transition(
            t("09:41:02.334"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.std.2x"},
        ),
        transition(
            t("09:41:02.984"),
            "allocation",
            b,
            "requested",
            correlation_id=rid["noise_provision"],
            attributes={"flavor": "bm.std.4x"},
        ),
        transition(
            t("09:41:03.398"),
            "allocation",
            a,
            "provisioning",
            "requested",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "node-agent"},
        ),
        transition(
            t("09:41:03.866"),
            "allocation",
            b,
            "provisioning",
            "requested",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            attributes={"provider": "node-agent"},
        ),
        transition(
            t("09:41:14.108"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("09:41:46.795"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            attributes={"occupancy": "cleanup"},
        ),
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    return out


def ansible_times(line: str, end_ns: int) -> str:
    """A command result's "start"/"end" (the target's local clock, here UTC) moved to end_ns."""
    import re
    from datetime import UTC, datetime

    found = dict(re.findall(r'"(start|end)": "([^"]+)"', line))
    if not found:
        return line
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    start = datetime.strptime(found["start"], fmt).replace(tzinfo=UTC)
    end = datetime.strptime(found["end"], fmt).replace(tzinfo=UTC)
    new_end = datetime.fromtimestamp(end_ns / 1e9, UTC)
    new_start = new_end - (end - start)
    line = line.replace(f'"end": "{found["end"]}"', f'"end": "{new_end.strftime(fmt)}"')
    return line.replace(f'"start": "{found["start"]}"', f'"start": "{new_start.strftime(fmt)}"')


def recap(name: str) -> str:
    """The PLAY RECAP header and the host's line of a captured run."""
    lines = ansible(name).splitlines()
    at_recap = next(i for i, line in enumerate(lines) if line.startswith("PLAY RECAP"))
    return "\n".join(lines[at_recap : at_recap + 2])


def stdout_line(name: str, prefix: str) -> str:
    return ansible_line(name, prefix)


AAP_NOTE = (
    "aap-jobs.json: job objects in the shape of the AWX/AAP controller API (GET /api/v2/jobs/N/ or "
    "a page of /api/v2/jobs/, field names from the AWX API), written by w_cases.py; "
    "no controller could be run here, job_explanation strings are AWX's own (awx/main/tasks/"
    "system.py). aap-job-events.log: the controller's job events from its external logging "
    "(logger awx.analytics.job_events) as the log shipper writes them in the record schema "
    "(@timestamp to ts, host_name to node_id, the job as workflow_id aap:N); the stdout "
    "lines in it were printed by ansible-playbook (ansible-core) running the same tasks "
    "here (w_capture_ansible.sh), the command's start/end times moved to the incident. "
)
WATCH = " --watch --output-watch-events"
K8S_NOTE = (
    "{file}: ProvisionRequest custom resources as kubectl get -o json{watch} prints them, "
    "written by w_cases.py (no cluster here). "
)


@case
def deploy_python_module_missing() -> Case:
    day = "2026-11-12"
    a, n, wf = "alloc-f3a9c2", "n-s02-11", "wf-f3a9c2-p1"
    ni_old, ni_new = "ni-s02-11-4b1f", "ni-s02-11-9e03"
    prev, wfp = "alloc-6e21b8", "wf-6e21b8-r1"
    b, n2, wf2 = "alloc-c0d7e5", "n-s02-12", "wf-c0d7e5-p1"
    skew = -31.0
    t = clock_on(day)
    out = Case(
        "w-deploy-python-module-missing",
        seed=f"allocation_id={a}",
        owner="deploy",
        first_failure="No module named 'pyghmi'",
        excluded=[f"allocation_id={prev}", f"allocation_id={b}"],
        notes=f"""The workflow worker was redeployed at 13:40 as 2.15.0, whose requirements no
        longer install pyghmi, the library its Supermicro BMC driver imports lazily on first
        use. {n} had been reimaged after its previous allocation {prev} (node_instance_id
        {ni_old} -> {ni_new}). The seed {a} is the first provision on a pyghmi-driven node after
        the redeploy: the power-on task's driver import fails with ModuleNotFoundError (three
        attempts), the worker marks the provision failed; later the node agent on {n} warns
        that no boot arrived (a node-layer symptom). The agent's clock is {skew:+.0f} s off.
        Noise: {b} on {n2} (ipmitool driver) fails in the same minutes for another owner
        (node: its BMC does not answer, ipmitool: "Unable to establish IPMI v2 / RMCP+
        session"); {prev} is the previous allocation on {n}, before the reimage. Files:
        workflow-worker.log: the Python worker's structlog JSON lines, with the tracebacks
        (key "exception") Python 3.11 printed when w_capture_python.py ran the worker's
        driver loader (importlib.import_module of a module doing "from pyghmi.ipmi import
        command") and its ipmitool driver (subprocess.run, check=True, against an
        unanswering BMC address) in a venv without pyghmi; node-agent-{n}.log: the Go agent's
        JSON lines, written by w_cases.py; allocation-transitions.ndjson: the worker's audit
        rows (allocations and the node's reimage) as NDJSON. {provenance()}""",
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("12:58:10.210"),
            "info",
            "release accepted",
            allocation_id=prev,
            workflow_id=wfp,
            node_id=n,
        ),
        worker(
            t("12:58:10.530"),
            "info",
            "dispatching task",
            allocation_id=prev,
            workflow_id=wfp,
            node_id=n,
            task_id="t-6e21b8-06",
            kind="wipe_disks",
        ),
        worker(
            t("13:02:42.008"),
            "info",
            "release complete",
            allocation_id=prev,
            workflow_id=wfp,
            node_id=n,
        ),
        worker(
            t("13:03:00.114"),
            "info",
            "reimage requested",
            node_id=n,
            node_instance_id=ni_old,
            image="node-base-2026.11",
        ),
        worker(t("13:19:50.660"), "info", "node available", node_id=n, node_instance_id=ni_new),
        worker(
            t("13:40:11.021"),
            "info",
            "worker starting",
            version="2.15.0",
            image="registry.dc1.example.net/workflow-worker:2.15.0",
        ),
        worker(
            t("13:40:11.407"),
            "info",
            "bmc drivers registered",
            drivers=["ipmitool", "pyghmi", "redfish"],
        ),
        worker(
            t("14:02:45.700"),
            "info",
            "node selected",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            node_instance_id=ni_new,
        ),
        worker(
            t("14:02:45.752"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-01",
            kind="prepare_boot",
        ),
        worker(
            t("14:02:45.820"),
            "info",
            "running task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            driver="pyghmi",
            bmc="10.20.8.31",
            attempt=1,
        ),
        worker(
            t("14:02:45.846"),
            "error",
            "task failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            attempt=1,
            exception=MODULE["stack"],
        ),
        worker(
            t("14:02:50.310"),
            "info",
            "running task",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            task_id="t-c0d7e5-02",
            kind="power_on",
            driver="ipmitool",
            bmc="10.20.6.22",
            attempt=1,
        ),
        worker(
            t("14:03:10.377"),
            "error",
            "task failed",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            task_id="t-c0d7e5-02",
            kind="power_on",
            attempt=1,
            stderr=IPMI_NOISE["stderr"],
            returncode=1,
            exception=IPMI_NOISE["stack"],
        ),
        worker(
            t("14:03:10.402"),
            "error",
            "provision failed",
            allocation_id=b,
            workflow_id=wf2,
            node_id=n2,
            reason="task t-c0d7e5-02 (power_on) failed",
        ),
        worker(
            t("14:03:15.911"),
            "info",
            "running task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            driver="pyghmi",
            bmc="10.20.8.31",
            attempt=2,
        ),
        worker(
            t("14:03:15.930"),
            "error",
            "task failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            attempt=2,
            exception=MODULE["stack"],
        ),
        worker(
            t("14:04:16.002"),
            "info",
            "running task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            driver="pyghmi",
            bmc="10.20.8.31",
            attempt=3,
        ),
        worker(
            t("14:04:16.019"),
            "error",
            "task failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-f3a9c2-02",
            kind="power_on",
            attempt=3,
            exception=MODULE["stack"],
        ),
        worker(
            t("14:04:16.031"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason="task t-f3a9c2-02 (power_on) failed 3 times",
        ),
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("12:58:11.020"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni_old,
            allocation_id=prev,
            workflow_id=wfp,
            task_id="t-6e21b8-06",
            kind="wipe_disks",
        ),
        node_agent(
            t("13:02:40.871"),
            skew,
            "info",
            "wipe complete",
            node_id=n,
            node_instance_id=ni_old,
            allocation_id=prev,
            task_id="t-6e21b8-06",
            disks=4,
            duration_s=269.8,
        ),
        node_agent(
            t("13:02:41.003"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni_old,
            allocation_id=prev,
            task_id="t-6e21b8-06",
            kind="wipe_disks",
        ),
        node_agent(
            t("13:03:05.450"),
            skew,
            "info",
            "node agent stopping",
            node_id=n,
            node_instance_id=ni_old,
            reason="reimage",
        ),
        node_agent(
            t("13:19:48.312"),
            skew,
            "info",
            "node agent starting",
            node_id=n,
            node_instance_id=ni_new,
            version="2.6.4",
            image="node-base-2026.11",
        ),
        node_agent(
            t("13:19:49.010"),
            skew,
            "info",
            "registered with workflow",
            node_id=n,
            node_instance_id=ni_new,
            endpoint="https://workflow.dc1.example.net",
        ),
        node_agent(
            t("14:02:45.781"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni_new,
            allocation_id=a,
            workflow_id=wf,
            task_id="t-f3a9c2-01",
            kind="prepare_boot",
        ),
        node_agent(
            t("14:02:45.902"),
            skew,
            "info",
            "next boot set",
            node_id=n,
            node_instance_id=ni_new,
            allocation_id=a,
            task_id="t-f3a9c2-01",
            device="pxe",
        ),
        node_agent(
            t("14:07:45.903"),
            skew,
            "warning",
            "boot not observed, clearing boot override",
            node_id=n,
            node_instance_id=ni_new,
            allocation_id=a,
            task_id="t-f3a9c2-01",
            waited_s=300,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("12:58:10.205"),
            "allocation",
            prev,
            "releasing",
            "active",
            workflow_id=wfp,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("13:02:42.001"),
            "allocation",
            prev,
            "released",
            "releasing",
            workflow_id=wfp,
            node_id=n,
            attributes={"occupancy": "free"},
        ),
        transition(
            t("13:03:00.110"),
            "node",
            n,
            "reimaging",
            "available",
            node_instance_id=ni_old,
            attributes={"image": "node-base-2026.11"},
        ),
        transition(t("13:19:50.655"), "node", n, "available", "reimaging", node_instance_id=ni_new),
        transition(
            t("14:02:44.990"), "allocation", a, "requested", attributes={"flavor": "bm.std.4x"}
        ),
        transition(
            t("14:02:45.611"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "workflow-worker"},
        ),
        transition(
            t("14:02:49.870"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wf2,
            node_id=n2,
            attributes={"provider": "workflow-worker"},
        ),
        transition(
            t("14:03:10.405"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wf2,
            node_id=n2,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("14:04:16.036"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
    )
    return out


@case
def deploy_ansible_rc127() -> Case:
    day = "2026-11-14"
    a, n, wf, job = "alloc-b7e412", "n-c04-11", "wf-b7e412-p1", 7342
    b, n2, wfb, jobb = "alloc-19d6f0", "n-c04-14", "wf-19d6f0-p1", 7340
    c, n3, wfc, jobc = "alloc-5a0c33", "n-c04-12", "wf-5a0c33-p1", 7343
    t = clock_on(day)
    fatal = ansible_times(stdout_line("rc127", "fatal:"), t("10:15:27.391"))
    out = Case(
        "w-deploy-ansible-rc127",
        seed=f"allocation_id={a}",
        owner="deploy",
        first_failure="racadm: not found",
        excluded=[f"allocation_id={b}", f"allocation_id={c}"],
        notes=f"""The AAP execution environment of the baremetal-provision template was moved
        to ee-baremetal:3.0, an image without Dell's racadm. Job {job} for {a} fails at its
        first task: the shell task "racadm ... serveraction powerup" exits 127 ("/bin/sh: 1:
        racadm: not found"). The controller then reports the job failed (provider layer) and
        the CR and the worker echo it: every later record blames the provider, the cause is
        a missing executable in the image (deploy). Noise: job {jobb} for {b} on {n2} was
        reaped by the controller a minute earlier (provider: "{AWX_REAPED}"), job {jobc} for
        {c} succeeds. Files: {AAP_NOTE}{
            K8S_NOTE.format(
                file="provisionrequests-watch.json", watch=" --watch --output-watch-events"
            )
        }workflow-worker.log: the worker's structlog
        JSON lines; allocation-transitions.ndjson: its audit rows. {provenance()}""",
    )

    def extra(alloc: str, node: str, wfx: str) -> dict[str, str]:
        bmc = "10.20.8.11" if node == n else "10.20.8.14"
        return {
            "allocation_id": alloc,
            "node_id": node,
            "workflow_id": wfx,
            "bmc_address": bmc,
            "image": "rhel-9.4",
        }

    jobs = [
        awx_job(
            jobc,
            "baremetal-provision",
            21,
            "successful",
            t("10:15:40.118"),
            t("10:15:44.090"),
            t("10:22:10.551"),
            extra(c, n3, wfc),
            launch_type="manual",
        ),
        awx_job(
            job,
            "baremetal-provision",
            21,
            "failed",
            t("10:15:22.804"),
            t("10:15:26.117"),
            t("10:15:28.950"),
            extra(a, n, wf),
        ),
        awx_job(
            jobb,
            "baremetal-provision",
            21,
            "failed",
            t("10:12:01.337"),
            t("10:12:05.006"),
            t("10:14:40.212"),
            extra(b, n2, wfb),
            explanation=AWX_REAPED,
            execution_node="aap-exec-2",
        ),
    ]
    import json

    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 3, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    out.log(
        "aap-job-events.log",
        "ndjson",
        job_event(
            t("10:12:06.201"),
            jobb,
            "info",
            stdout_line("rc127", "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(
            t("10:12:06.412"),
            jobb,
            "info",
            stdout_line("rc127", "TASK ["),
            "playbook_on_task_start",
            None,
        ),
        job_event(t("10:12:09.870"), jobb, "info", f"changed: [{n2}]", "runner_on_ok", n2),
        job_event(
            t("10:15:26.902"),
            job,
            "info",
            stdout_line("rc127", "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(
            t("10:15:27.204"),
            job,
            "info",
            stdout_line("rc127", "TASK ["),
            "playbook_on_task_start",
            None,
        ),
        job_event(
            t("10:15:27.398"),
            job,
            "error",
            fatal,
            "runner_on_failed",
            n,
            task="Power on node through the BMC",
        ),
        job_event(t("10:15:27.611"), job, "info", recap("rc127"), "playbook_on_stats", None),
        job_event(
            t("10:15:44.870"),
            jobc,
            "info",
            stdout_line("rc127", "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(
            t("10:15:45.102"),
            jobc,
            "info",
            stdout_line("rc127", "TASK ["),
            "playbook_on_task_start",
            None,
        ),
        job_event(t("10:15:48.660"), jobc, "info", f"changed: [{n3}]", "runner_on_ok", n3),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("10:12:01.102"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=n2,
            template="baremetal-provision",
        ),
        worker(
            t("10:12:01.402"),
            "info",
            "provider job launched",
            allocation_id=b,
            workflow_id=wfb,
            node_id=n2,
            provider_job=f"aap:{jobb}",
        ),
        worker(
            t("10:14:42.330"),
            "error",
            "provider job failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=n2,
            provider_job=f"aap:{jobb}",
            status="failed",
            job_explanation=AWX_REAPED,
        ),
        worker(
            t("10:15:21.302"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="baremetal-provision",
        ),
        worker(
            t("10:15:22.880"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("10:15:31.204"),
            "error",
            "provider job failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="failed",
            job_explanation="",
        ),
        worker(
            t("10:15:40.010"),
            "info",
            "launching provider job",
            allocation_id=c,
            workflow_id=wfc,
            node_id=n3,
            template="baremetal-provision",
        ),
        worker(
            t("10:22:12.740"),
            "info",
            "provider job finished",
            allocation_id=c,
            workflow_id=wfc,
            node_id=n3,
            provider_job=f"aap:{jobc}",
            status="successful",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("10:12:00.950"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=n2,
            attributes={"provider": "aap"},
        ),
        transition(
            t("10:14:42.336"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=n2,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("10:15:20.512"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("10:15:21.118"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("10:15:31.251"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("10:15:39.930"),
            "allocation",
            c,
            "provisioning",
            "requested",
            workflow_id=wfc,
            node_id=n3,
            attributes={"provider": "aap"},
        ),
        transition(
            t("10:22:12.744"),
            "allocation",
            c,
            "active",
            "provisioning",
            workflow_id=wfc,
            node_id=n3,
            attributes={"provider": "aap"},
        ),
    )
    name = f"pr-{a}"
    pending = provision_request(
        name,
        a,
        n,
        t("10:15:20"),
        4410231,
        job_id=None,
        state="Pending",
        message="waiting for the workflow",
        changed=t("10:15:20"),
    )
    running = provision_request(
        name,
        a,
        n,
        t("10:15:20"),
        4410260,
        job_id=job,
        state="Running",
        message=f"job {job} running",
        changed=t("10:15:26"),
    )
    failed = provision_request(
        name,
        a,
        n,
        t("10:15:20"),
        4410277,
        job_id=job,
        state="Failed",
        message=f"job {job} failed",
        changed=t("10:15:29"),
    )
    out.document(
        "provisionrequests-watch.json",
        "k8s",
        k8s_watch([("ADDED", pending), ("MODIFIED", running), ("MODIFIED", failed)]),
    )
    return out


@case
def deploy_api_config_missing() -> Case:
    day = "2026-11-17"
    a = "alloc-61c9d4"
    b, nb, wfb = "alloc-0e5a2f", "n-b03-14", "wf-0e5a2f-r1"
    t = clock_on(day)
    http = Http("w-deploy-api-config-missing")
    for label, clock in (
        ("healthz", "16:31:58.204"),
        ("get", "16:32:10.410"),
        ("provision1", "16:32:11.052"),
        ("noise_get", "16:32:20.733"),
        ("provision2", "16:32:41.318"),
        ("noise_release", "16:32:44.905"),
        ("provision3", "16:33:41.620"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    api_extra = (
        "The API ran with W_FLAVORS pointing at the absent /etc/provisioning-api/flavors.conf, "
        "so the FileNotFoundError and its traceback are the real ones; the API's two start-up "
        "lines were written by w_cases.py in its format."
    )
    out = Case(
        "w-deploy-api-config-missing",
        seed=f"allocation_id={a}",
        owner="deploy",
        first_failure="No such file or directory: '/etc/provisioning-api/flavors.conf'",
        excluded=[f"allocation_id={b}"],
        notes=f"""provisioning-api 4.8.0 was deployed at 16:22 with a Helm chart that no longer
        mounts the flavors ConfigMap at /etc/provisioning-api/flavors.conf. The API starts
        fine (the catalog is read at the first provision) and serves reads and releases;
        every provision returns 500 with a FileNotFoundError traceback in the API's log. It
        looks like an API bug (a 500 from the API, a Python traceback), but the code is
        right and the file is missing from the deployment: deploy. The portal retried
        twice. Noise: {b}'s release goes through the same API in the same minutes and
        succeeds. Files: {http_notes(JSON_FMT, api_extra)}
        workflow-worker.log: the worker's structlog JSON lines;
        allocation-transitions.ndjson: its audit rows. {provenance()}""",
    )
    out.log(
        "provisioning-api.log",
        "ndjson",
        api_line(
            t("16:22:03.418"),
            "info",
            "provisioning-api starting",
            logger="provisioning_api.main",
            version="4.8.0",
            image="registry.dc1.example.net/provisioning-api:4.8.0",
        ),
        api_line(
            t("16:22:03.420"),
            "info",
            "flavor catalog is read at first use",
            logger="provisioning_api.main",
            path="/etc/provisioning-api/flavors.conf",
        ),
        *http.api,
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("16:29:55.341"), "info", "allocation created", allocation_id=a, flavor="bm.std.2x"
        ),
        worker(
            t("16:32:44.931"),
            "info",
            "release accepted",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            correlation_id=rid["noise_release"],
        ),
        worker(
            t("16:32:45.210"),
            "info",
            "dispatching task",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            task_id="t-0e5a2f-09",
            kind="wipe_disks",
        ),
        worker(
            t("16:41:10.077"),
            "info",
            "release complete",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("16:29:55.338"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("16:32:44.929"),
            "allocation",
            b,
            "releasing",
            "active",
            workflow_id=wfb,
            node_id=nb,
            correlation_id=rid["noise_release"],
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("16:41:10.072"),
            "allocation",
            b,
            "released",
            "releasing",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "free"},
        ),
    )
    return out


@case
def node_ssh_unreachable() -> Case:
    day = "2026-11-19"
    a, n, ni, wf, job = "alloc-3d90af", "n-a07-02", "ni-a07-02-51c0", "wf-3d90af-p1", 8120
    b, nb, wfb, jobb = "alloc-47b1aa", "n-c04-11", "wf-47b1aa-p1", 8119
    skew = 12.0
    t = clock_on(day)
    unreachable = stdout_line("unreachable", "fatal:")
    template_missing = stdout_line("template-missing", "fatal:")
    out = Case(
        "w-node-ssh-unreachable",
        seed=f"allocation_id={a}",
        owner="node",
        first_failure="UNREACHABLE",
        excluded=[f"allocation_id={b}"],
        notes=f"""{n} (management address 10.20.4.17) hung shortly before noon: its node agent's
        heartbeats stop at 11:58:40, its sshd accepts TCP but never sends a banner. The
        prepare-node job {job} for {a} cannot reach it: fact gathering ends UNREACHABLE
        ("Connection timed out during banner exchange"), the controller reports the job
        failed, the CR and the worker follow. After a BMC power cycle at 12:31 the agent
        comes back (same instance: no reimage). Owner: the node. The agent's clock runs
        {skew:+.0f} s ahead. Noise: job {jobb} for {b} on {nb} failed a minute earlier for
        another owner (deploy: the kickstart template is missing from the project). Files:
        {AAP_NOTE}The UNREACHABLE result is from ansible-playbook gathering facts over ssh
        from this machine to the unroutable 10.20.4.17 with ConnectTimeout=5.
        {K8S_NOTE.format(file="provisionrequests.json", watch="")}node-agent-{n}.log: the Go
        agent's JSON lines, written by w_cases.py; workflow-worker.log,
        allocation-transitions.ndjson: the worker's lines and audit rows. {provenance()}""",
    )
    extra = {"allocation_id": a, "node_id": n, "workflow_id": wf, "image": "rhel-9.4"}
    extra_b = {"allocation_id": b, "node_id": nb, "workflow_id": wfb, "image": "rhel-9.4"}
    import json

    jobs = [
        awx_job(
            job,
            "prepare-node",
            24,
            "failed",
            t("12:04:12.301"),
            t("12:04:15.622"),
            t("12:04:27.905"),
            extra,
        ),
        awx_job(
            jobb,
            "kickstart-render",
            25,
            "failed",
            t("12:03:50.112"),
            t("12:03:53.340"),
            t("12:03:56.018"),
            extra_b,
        ),
    ]
    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 2, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    out.log(
        "aap-job-events.log",
        "ndjson",
        job_event(
            t("12:03:54.001"),
            jobb,
            "info",
            stdout_line("template-missing", "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(
            t("12:03:54.210"),
            jobb,
            "info",
            stdout_line("template-missing", "TASK ["),
            "playbook_on_task_start",
            None,
        ),
        job_event(
            t("12:03:55.402"),
            jobb,
            "error",
            template_missing,
            "runner_on_failed",
            nb,
            task="Render kickstart file",
        ),
        job_event(
            t("12:03:55.630"), jobb, "info", recap("template-missing"), "playbook_on_stats", None
        ),
        job_event(
            t("12:04:16.104"),
            job,
            "info",
            stdout_line("unreachable", "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(
            t("12:04:16.300"),
            job,
            "info",
            stdout_line("unreachable", "TASK ["),
            "playbook_on_task_start",
            None,
        ),
        job_event(
            t("12:04:26.417"),
            job,
            "error",
            unreachable,
            "runner_on_unreachable",
            n,
            task="Gathering Facts",
        ),
        job_event(t("12:04:26.611"), job, "info", recap("unreachable"), "playbook_on_stats", None),
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        *(
            node_agent(
                t(f"11:5{m}:40.{100 + m:03d}"),
                skew,
                "info",
                "heartbeat",
                node_id=n,
                node_instance_id=ni,
                load1=round(0.4 + m * 0.9, 2),
                mem_free_mib=max(210, 5200 - m * 840),
            )
            for m in range(6, 9)
        ),
        node_agent(
            t("12:31:02.517"),
            skew,
            "info",
            "node agent starting",
            node_id=n,
            node_instance_id=ni,
            version="2.6.4",
            previous_shutdown="unclean",
        ),
        node_agent(
            t("12:31:03.004"),
            skew,
            "info",
            "registered with workflow",
            node_id=n,
            node_instance_id=ni,
            endpoint="https://workflow.dc1.example.net",
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("12:03:49.880"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            template="kickstart-render",
        ),
        worker(
            t("12:03:58.114"),
            "error",
            "provider job failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            provider_job=f"aap:{jobb}",
            status="failed",
            job_explanation="",
        ),
        worker(
            t("12:04:11.503"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="prepare-node",
        ),
        worker(
            t("12:04:12.390"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("12:04:30.102"),
            "error",
            "provider job failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="failed",
            job_explanation="",
        ),
        worker(
            t("12:04:30.140"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"provider job aap:{job} failed",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("12:03:49.602"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "aap"},
        ),
        transition(
            t("12:03:58.120"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("12:04:10.205"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("12:04:11.011"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("12:04:30.151"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        t("12:04:10"),
        5520911,
        job_id=job,
        state="Failed",
        message=f"job {job} failed",
        changed=t("12:04:28"),
        conditions=[
            {
                "lastTransitionTime": ts_k8s(t("12:04:28")),
                "message": f"job {job} failed",
                "reason": "JobFailed",
                "status": "False",
                "type": "Provisioned",
            }
        ],
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr]))
    return out


@case
def node_disk_full() -> Case:
    day = "2026-11-20"
    a, n, ni, wf = "alloc-d4e881", "n-h03-06", "ni-h03-06-a3d7", "wf-d4e881-p1"
    b, nb, wfb = "alloc-7a9d40", "n-h03-08", "wf-7a9d40-p1"
    skew = 37.0
    t = clock_on(day)
    http = Http("w-node-disk-full")
    for label, clock in (
        ("provision", "15:10:04.210"),
        ("poll1", "15:10:34.402"),
        ("poll2", "15:11:34.917"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-node-disk-full",
        seed=f"allocation_id={a}",
        owner="node",
        first_failure="no space left on device",
        excluded=[f"allocation_id={b}"],
        notes=f"""The image cache partition of {n} (/var/lib/node-agent) filled up over the
        night (the agent warned at 03:12 and 09:12). At 15:10 {a} is provisioned there: power
        on works, the image download fails with ENOSPC, the agent prunes its cache (nothing
        to free) and fails again; the worker reports the provision failed. The agent's clock
        runs {skew:+.0f} s ahead, so its ENOSPC is stamped after the worker's "provision
        failed" and after the portal's next poll. Owner: the node (its disk). Noise: {b} on
        {nb} fails at the same time for another owner (provider: its AAP job errored).
        Files: node-agent-{n}.log: the Go agent's JSON lines, written by w_cases.py; the
        ENOSPC text is what Go printed when w_nodeagent.go copied 4 MiB into a file that is a
        symlink to /dev/full (a real ENOSPC from the kernel), the path as the agent names it;
        {http_notes(COMBINED_FMT)} workflow-worker.log, allocation-transitions.ndjson: the
        worker's lines and audit rows. {provenance()}""",
    )
    task1, task2 = "t-d4e881-01", "t-d4e881-02"
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("03:12:00.004"),
            skew,
            "warning",
            "disk usage high",
            node_id=n,
            node_instance_id=ni,
            path="/var/lib/node-agent",
            used_pct=96.8,
        ),
        node_agent(
            t("09:12:00.003"),
            skew,
            "warning",
            "disk usage high",
            node_id=n,
            node_instance_id=ni,
            path="/var/lib/node-agent",
            used_pct=99.1,
        ),
        node_agent(
            t("15:10:05.102"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task1,
            kind="power_on",
        ),
        node_agent(
            t("15:10:07.790"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task1,
            kind="power_on",
        ),
        node_agent(
            t("15:10:08.230"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task2,
            kind="image_download",
            image="rhel-9.4-x86_64.qcow2",
            size_bytes=2147483648,
        ),
        node_agent(
            t("15:10:41.207"),
            skew,
            "error",
            "image download failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task2,
            attempt=1,
            written_bytes=1317011456,
            error=ENOSPC,
        ),
        node_agent(
            t("15:10:41.330"),
            skew,
            "info",
            "pruning image cache",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task2,
            freed_bytes=0,
        ),
        node_agent(
            t("15:10:43.902"),
            skew,
            "error",
            "image download failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task2,
            attempt=2,
            written_bytes=0,
            error=ENOSPC,
        ),
        node_agent(
            t("15:10:43.904"),
            skew,
            "error",
            "task failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task2,
            kind="image_download",
            attempts=2,
            error=ENOSPC,
        ),
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("15:09:58.404"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            template="baremetal-provision",
        ),
        worker(
            t("15:10:04.240"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.std.4x",
        ),
        worker(
            t("15:10:04.902"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task1,
            kind="power_on",
        ),
        worker(
            t("15:10:08.004"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task2,
            kind="image_download",
        ),
        worker(
            t("15:10:31.660"),
            "error",
            "provider job failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            provider_job="aap:8455",
            status="error",
            job_explanation="",
        ),
        worker(
            t("15:10:44.301"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"task {task2} (image_download) failed on {n}",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("15:09:58.120"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "aap"},
        ),
        transition(
            t("15:10:04.236"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.std.4x"},
        ),
        transition(
            t("15:10:04.880"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "node-agent"},
        ),
        transition(
            t("15:10:31.664"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("15:10:44.310"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
    )
    return out


@case
def node_readonly_fs() -> Case:
    day = "2026-11-21"
    a, n, ni, wf = "alloc-31be6f", "n-j04-15", "ni-j04-15-0e88", "wf-31be6f-r1"
    e, ne, wfe = "alloc-e9d2a3", "n-j04-16", "wf-e9d2a3-r1"
    skew = -8.0
    t = clock_on(day)
    task = "t-31be6f-05"
    out = Case(
        "w-node-readonly-fs",
        seed=f"allocation_id={a}",
        owner="node",
        first_failure="read-only file system",
        excluded=[f"allocation_id={e}"],
        notes=f"""The root filesystem of {n} was remounted read-only by the kernel at about 08:14
        (ext4 errors on a failing disk). The node agent notices first when it cannot write
        its state file (a warning that names no allocation). At 09:02 the tenant deletes
        {a}; the release's wipe task fails three times because the agent cannot persist task
        state, and the worker moves the allocation to release_failed with occupancy=cleanup.
        That state and the CR's ReleaseFailed look like a stuck workflow; the cause is the
        node's filesystem. The agent's clock is {skew:+.0f} s off. Noise: {e} on {ne} has been
        in release_failed since yesterday for a workflow reason (a release retried against a
        stale version), a different owner. Files: node-agent-{n}.log: the Go agent's JSON
        lines, written by w_cases.py; the EROFS texts are Go's own formatting of
        *os.LinkError/*os.PathError with syscall.EROFS (w_nodeagent.go: a read-only remount
        cannot be made here without mount(2), so the errno is real but was not returned by
        a real write); workflow-worker.log, allocation-transitions.ndjson: the worker's lines
        and audit rows; {K8S_NOTE.format(file="provisionrequests.json", watch="")}
        {provenance()}""",
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("08:00:00.211"),
            skew,
            "info",
            "heartbeat",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
        ),
        node_agent(
            t("08:14:07.530"),
            skew,
            "warning",
            "persist task state failed",
            node_id=n,
            node_instance_id=ni,
            error=EROFS_OPEN,
        ),
        node_agent(
            t("08:15:00.208"),
            skew,
            "info",
            "heartbeat",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
        ),
        node_agent(
            t("09:02:31.402"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="wipe_disks",
        ),
        node_agent(
            t("09:02:31.411"),
            skew,
            "error",
            "persist task state failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=task,
            error=EROFS_RENAME,
        ),
        node_agent(
            t("09:02:31.413"),
            skew,
            "error",
            "task failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="wipe_disks",
            error=EROFS_RENAME,
        ),
        node_agent(
            t("09:03:31.880"),
            skew,
            "error",
            "task failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="wipe_disks",
            error=EROFS_RENAME,
        ),
        node_agent(
            t("09:04:32.310"),
            skew,
            "error",
            "task failed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=task,
            kind="wipe_disks",
            error=EROFS_RENAME,
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("07:30:00.118"),
            "warning",
            "allocation in release_failed past deadline",
            allocation_id=e,
            workflow_id=wfe,
            node_id=ne,
            state="release_failed",
            since="2026-11-20T06:12:44Z",
            retry="none",
        ),
        worker(
            t("09:02:30.021"),
            "info",
            "release accepted",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
        ),
        worker(
            t("09:02:31.104"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task,
            kind="wipe_disks",
            attempt=1,
        ),
        worker(
            t("09:02:31.990"),
            "warning",
            "task failed, retrying",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task,
            attempt=1,
            retry_in_s=60,
        ),
        worker(
            t("09:03:32.450"),
            "warning",
            "task failed, retrying",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=task,
            attempt=2,
            retry_in_s=60,
        ),
        worker(
            t("09:04:33.002"),
            "error",
            "release failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"task {task} (wipe_disks) failed on {n} after 3 attempts",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("09:02:30.018"),
            "allocation",
            a,
            "releasing",
            "active",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("09:04:33.010"),
            "allocation",
            a,
            "release_failed",
            "releasing",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        at("2026-11-03", "10:41:07"),
        6001871,
        job_id=None,
        state="ReleaseFailed",
        message=f"release workflow {wf} failed",
        changed=t("09:04:34"),
        deletion=t("09:02:29"),
    )
    cr_e = provision_request(
        f"pr-{e}",
        e,
        ne,
        at("2026-11-01", "08:02:51"),
        5990127,
        job_id=None,
        state="ReleaseFailed",
        message=f"release workflow {wfe} failed",
        changed=at("2026-11-20", "06:12:45"),
        deletion=at("2026-11-20", "06:05:02"),
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr, cr_e]))
    return out


@case
def node_bmc_ipmi() -> Case:
    day = "2026-11-23"
    a, n, wf = "alloc-6a1f5d", "n-m01-09", "wf-6a1f5d-p1"
    b, nb, wfb = "alloc-4f8e12", "n-m01-10", "wf-4f8e12-p1"
    t = clock_on(day)
    task = "t-6a1f5d-01"
    out = Case(
        "w-node-bmc-ipmi",
        seed=f"allocation_id={a}",
        owner="node",
        first_failure="Unable to establish IPMI v2 / RMCP+ session",
        excluded=[f"allocation_id={b}"],
        notes=f"""The BMC of {n} (10.20.6.14) stopped answering IPMI over LAN. The worker's
        ipmitool driver runs "ipmitool -I lanplus -H 10.20.6.14 ... chassis power on", which
        exits 1 after about 20 s with "Error: Unable to establish IPMI v2 / RMCP+ session";
        Python raises CalledProcessError (the exception only says "returned non-zero exit
        status 1", the reason is in the captured stderr). Three attempts, then provision
        failed. The host itself never powers on, so it writes nothing. Owner: the node (its
        BMC). Noise: {b} on {nb} (pyghmi driver) fails in the same minutes for another owner
        (deploy: "No module named 'pyghmi'"). Files: workflow-worker.log: the worker's
        structlog JSON lines with the tracebacks (key "exception") and stderr that Python
        3.11 and ipmitool 1.8.19 printed when w_capture_python.py ran the driver against an
        address where no BMC answers (IPMI_PASSWORD set, -E); allocation-transitions.ndjson:
        the worker's audit rows; {
            K8S_NOTE.format(
                file="provisionrequests-watch.json", watch=" --watch --output-watch-events"
            )
        }{provenance()}""",
    )
    stderr = IPMI["stderr"]
    lines = [
        worker(
            t("17:20:03.512"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            flavor="bm.std.2x",
        ),
        worker(
            t("17:20:04.240"), "info", "node selected", allocation_id=a, workflow_id=wf, node_id=n
        ),
        worker(
            t("17:20:09.880"),
            "info",
            "running task",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            task_id="t-4f8e12-01",
            kind="power_on",
            driver="pyghmi",
            bmc="10.20.8.31",
            attempt=1,
        ),
        worker(
            t("17:20:09.902"),
            "error",
            "task failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            task_id="t-4f8e12-01",
            kind="power_on",
            attempt=1,
            exception=MODULE["stack"],
        ),
        worker(
            t("17:21:12.004"),
            "error",
            "provision failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            reason="task t-4f8e12-01 (power_on) failed 3 times",
        ),
    ]
    for attempt, (start, end) in enumerate(
        (
            ("17:20:04.301", "17:20:24.412"),
            ("17:20:54.430", "17:21:14.548"),
            ("17:21:44.560", "17:22:04.671"),
        ),
        1,
    ):
        lines.append(
            worker(
                t(start),
                "info",
                "running task",
                allocation_id=a,
                workflow_id=wf,
                node_id=n,
                task_id=task,
                kind="power_on",
                driver="ipmitool",
                bmc="10.20.6.14",
                attempt=attempt,
            )
        )
        lines.append(
            worker(
                t(end),
                "error",
                "task failed",
                allocation_id=a,
                workflow_id=wf,
                node_id=n,
                task_id=task,
                kind="power_on",
                attempt=attempt,
                stderr=stderr,
                returncode=1,
                exception=IPMI["stack"],
            )
        )
    lines.append(
        worker(
            t("17:22:04.690"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"task {task} (power_on) failed 3 times",
        )
    )
    out.log("workflow-worker.log", "ndjson", *lines)
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("17:20:03.508"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("17:20:04.236"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "workflow-worker"},
        ),
        transition(
            t("17:20:09.850"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "workflow-worker"},
        ),
        transition(
            t("17:21:12.010"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("17:22:04.702"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup"},
        ),
    )
    name = f"pr-{a}"
    pending = provision_request(
        name,
        a,
        None,
        t("17:20:03"),
        7100213,
        job_id=None,
        state="Pending",
        message="waiting for the workflow",
        changed=t("17:20:03"),
    )
    running = provision_request(
        name,
        a,
        n,
        t("17:20:03"),
        7100240,
        job_id=None,
        state="Provisioning",
        message=f"node {n} selected",
        changed=t("17:20:04"),
    )
    failed = provision_request(
        name,
        a,
        n,
        t("17:20:03"),
        7100391,
        job_id=None,
        state="Failed",
        message="power on failed",
        changed=t("17:22:05"),
    )
    out.document(
        "provisionrequests-watch.json",
        "k8s",
        k8s_watch([("ADDED", pending), ("MODIFIED", running), ("MODIFIED", failed)]),
    )
    return out


@case
def wfstate_invalid_transition() -> Case:
    import json

    day = "2026-11-24"
    a, n, wfp, wfr, job = "alloc-2b77e0", "n-f01-02", "wf-2b77e0-p1", "wf-2b77e0-r1", 9051
    b, nb, wfb, jobb = "alloc-5b90d1", "n-f01-05", "wf-5b90d1-p1", 9052
    t = clock_on(day)
    http = Http("w-wfstate-invalid-transition")
    for label, clock in (
        ("release", "13:52:17.402"),
        ("poll1", "13:52:47.115"),
        ("poll2", "14:05:00.630"),
        ("poll3", "14:31:10.208"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-wfstate-invalid-transition",
        seed=f"allocation_id={a}",
        owner="workflow_state",
        first_failure="Can't trigger event provision_complete from state releasing",
        excluded=[f"allocation_id={b}"],
        notes=f"""The tenant released {a} while its provision (AAP job {job}) was still running;
        the API accepted it and the allocation went provisioning -> releasing, the release
        waiting for the provision to settle. When job {job} then finished successfully, the
        worker's lifecycle state machine (transitions) refused the provider's
        provision_complete callback in state releasing (MachineError) and dropped it, so the
        release never starts: the allocation stays in releasing, the worker keeps deferring,
        the CR shows a successful job with a deletion pending. Nothing outside the workflow
        failed: the provider job succeeded, the node is fine. Owner: workflow_state. Noise:
        job {jobb} for {b} on {nb} was reaped by the controller in the same hour (provider).
        Files: workflow-worker.log: the worker's structlog JSON lines; the MachineError
        traceback (key "exception") is what Python 3.11 printed when w_capture_python.py fed
        provision_complete to the worker's transitions 0.9.3 Machine in state releasing;
        {http_notes(JSON_FMT)} {AAP_NOTE.split(" aap-job-events.log")[0]}
        allocation-transitions.ndjson: the worker's audit rows;
        {K8S_NOTE.format(file="provisionrequests.json", watch="")}{provenance()}""",
    )
    jobs = [
        awx_job(
            jobb,
            "baremetal-provision",
            21,
            "failed",
            t("13:41:30.450"),
            t("13:41:34.011"),
            t("14:02:19.880"),
            {"allocation_id": b, "node_id": nb, "workflow_id": wfb, "image": "rhel-9.4"},
            explanation=AWX_REAPED,
            execution_node="aap-exec-2",
        ),
        awx_job(
            job,
            "baremetal-provision",
            21,
            "successful",
            t("13:40:02.611"),
            t("13:40:06.230"),
            t("13:58:40.204"),
            {"allocation_id": a, "node_id": n, "workflow_id": wfp, "image": "rhel-9.4"},
        ),
    ]
    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 2, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    lines = [
        worker(
            t("13:40:01.902"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wfp,
            node_id=n,
            template="baremetal-provision",
        ),
        worker(
            t("13:40:02.700"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wfp,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("13:41:30.380"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            template="baremetal-provision",
        ),
        worker(
            t("13:52:17.431"),
            "info",
            "release accepted",
            allocation_id=a,
            workflow_id=wfr,
            node_id=n,
            correlation_id=rid["release"],
        ),
        worker(
            t("13:52:17.502"),
            "info",
            "release deferred until provision settles",
            allocation_id=a,
            workflow_id=wfr,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("13:58:41.004"),
            "info",
            "provider callback received",
            allocation_id=a,
            workflow_id=wfp,
            node_id=n,
            provider_job=f"aap:{job}",
            callback="provision_complete",
        ),
        worker(
            t("13:58:41.011"),
            "error",
            "provider callback rejected",
            allocation_id=a,
            workflow_id=wfp,
            node_id=n,
            provider_job=f"aap:{job}",
            callback="provision_complete",
            exception=MACHINE["stack"],
        ),
        worker(
            t("14:02:22.105"),
            "error",
            "provider job failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            provider_job=f"aap:{jobb}",
            status="failed",
            job_explanation=AWX_REAPED,
        ),
    ]
    for clock in ("14:02:17.502", "14:12:17.503", "14:22:17.501", "14:32:17.504"):
        lines.append(
            worker(
                t(clock),
                "info",
                "release deferred until provision settles",
                allocation_id=a,
                workflow_id=wfr,
                node_id=n,
                provider_job=f"aap:{job}",
            )
        )
    out.log("workflow-worker.log", "ndjson", *lines)
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("13:40:00.310"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("13:40:01.880"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wfp,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("13:41:30.370"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "aap"},
        ),
        transition(
            t("13:52:17.428"),
            "allocation",
            a,
            "releasing",
            "provisioning",
            workflow_id=wfr,
            node_id=n,
            correlation_id=rid["release"],
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("14:02:22.110"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        t("13:40:00"),
        8021177,
        job_id=job,
        state="Succeeded",
        message=f"job {job} successful",
        changed=t("13:58:41"),
        deletion=t("13:52:18"),
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr]))
    return out


@case
def wfstate_release_failed() -> Case:
    import json

    day = "2026-11-25"
    a, n, ni, wf, job = "alloc-7f3c18", "n-g05-21", "ni-g05-21-c5a2", "wf-7f3c18-r1", 9310
    b, nb, nib, wfb = "alloc-1d5e39", "n-g05-22", "ni-g05-22-81b4", "wf-1d5e39-r1"
    skew = -3.0
    t = clock_on(day)
    http = Http("w-wfstate-release-failed")
    for label, clock in (
        ("release", "06:30:12.114"),
        ("poll1", "06:42:10.520"),
        ("poll2", "09:40:02.871"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-wfstate-release-failed",
        seed=f"allocation_id={a}",
        owner="workflow_state",
        first_failure="stale allocation version",
        excluded=[f"allocation_id={b}"],
        notes=f"""{a} was released at 06:30. The deprovision job {job} ran and succeeded, the
        node agent wiped the disks; but while it ran, the lease-renewer extended the lease of
        the releasing allocation (it should skip them) and bumped its version from 7 to 8.
        When the worker recorded the release it found the version changed, refused to write
        (stale allocation version) and set release_failed with occupancy=cleanup; nothing
        retries it, so it sits there for hours while the CR still says Releasing. The
        provider, the node and the API all did their part. Owner: workflow_state. The agent's
        clock is {skew:+.0f} s off. Noise: {b} on {nb} went to release_failed at the same time
        for another owner (node: its filesystem is read-only). Files:
        {http_notes(JSON_FMT)} workflow-worker.log and lease-renewer.log: the Python services'
        structlog JSON lines; node-agent-{n}.log, node-agent-{nb}.log: the Go agent's lines
        (the EROFS text as in w-node-readonly-fs); {AAP_NOTE.split(" aap-job-events.log")[0]}
        allocation-transitions.ndjson: the worker's audit rows;
        {K8S_NOTE.format(file="provisionrequests.json", watch="")}{provenance()}""",
    )
    job_obj = awx_job(
        job,
        "baremetal-deprovision",
        22,
        "successful",
        t("06:30:14.020"),
        t("06:30:18.335"),
        t("06:41:52.404"),
        {"allocation_id": a, "node_id": n, "workflow_id": wf},
    )
    out.document("aap-jobs.json", "aap", json.dumps(job_obj, indent=4) + "\n")
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("06:30:12.140"),
            "info",
            "release accepted",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            correlation_id=rid["release"],
            version=7,
        ),
        worker(
            t("06:30:13.502"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="baremetal-deprovision",
        ),
        worker(
            t("06:30:14.110"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("06:31:02.660"),
            "info",
            "release accepted",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
        ),
        worker(
            t("06:33:05.118"),
            "error",
            "release failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            reason=f"task t-1d5e39-03 (wipe_disks) failed on {nb} after 3 attempts",
        ),
        worker(
            t("06:41:53.101"),
            "info",
            "provider job finished",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="successful",
        ),
        worker(
            t("06:41:53.120"),
            "warning",
            "allocation changed during release",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            expected_version=7,
            found_version=8,
        ),
        worker(
            t("06:41:53.131"),
            "error",
            "release bookkeeping failed: stale allocation version",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            expected_version=7,
            found_version=8,
            next_state="release_failed",
        ),
        worker(
            t("09:41:53.140"),
            "warning",
            "allocation in release_failed past deadline",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            state="release_failed",
            since="2026-11-25T06:41:53Z",
            retry="none",
        ),
    )
    out.log(
        "lease-renewer.log",
        "ndjson",
        (
            t("06:41:50.204"),
            json.dumps(
                {
                    "service": "lease-renewer",
                    "layer": "workflow",
                    "allocation_id": a,
                    "event": "lease extended",
                    "new_lease_end": "2026-12-25T06:41:50Z",
                    "version": 8,
                    "level": "info",
                    "ts": "2026-11-25T06:41:50.204113Z",
                }
            ),
        ),
        (
            t("06:41:50.310"),
            json.dumps(
                {
                    "service": "lease-renewer",
                    "layer": "workflow",
                    "event": "renewal run finished",
                    "renewed": 14,
                    "failed": 0,
                    "level": "info",
                    "ts": "2026-11-25T06:41:50.310877Z",
                }
            ),
        ),
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("06:30:40.012"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id="t-7f3c18-04",
            kind="wipe_disks",
        ),
        node_agent(
            t("06:41:30.870"),
            skew,
            "info",
            "wipe complete",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id="t-7f3c18-04",
            disks=4,
            duration_s=650.9,
        ),
        node_agent(
            t("06:41:31.002"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id="t-7f3c18-04",
            kind="wipe_disks",
        ),
    )
    out.log(
        f"node-agent-{nb}.log",
        "ndjson",
        node_agent(
            t("06:31:03.220"),
            1.5,
            "info",
            "task accepted",
            node_id=nb,
            node_instance_id=nib,
            allocation_id=b,
            workflow_id=wfb,
            task_id="t-1d5e39-03",
            kind="wipe_disks",
        ),
        node_agent(
            t("06:31:03.231"),
            1.5,
            "error",
            "task failed",
            node_id=nb,
            node_instance_id=nib,
            allocation_id=b,
            workflow_id=wfb,
            task_id="t-1d5e39-03",
            kind="wipe_disks",
            error=EROFS_RENAME,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("06:30:12.136"),
            "allocation",
            a,
            "releasing",
            "active",
            workflow_id=wf,
            node_id=n,
            correlation_id=rid["release"],
            attributes={"occupancy": "cleanup", "version": 7},
        ),
        transition(
            t("06:31:02.655"),
            "allocation",
            b,
            "releasing",
            "active",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "version": 3},
        ),
        transition(
            t("06:33:05.122"),
            "allocation",
            b,
            "release_failed",
            "releasing",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "version": 4},
        ),
        transition(
            t("06:41:53.140"),
            "allocation",
            a,
            "release_failed",
            "releasing",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup", "version": 8, "reason": "stale version"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        at("2026-10-02", "11:00:40"),
        9120554,
        job_id=job,
        state="Releasing",
        message=f"job {job} running",
        changed=t("06:30:19"),
        deletion=t("06:30:12"),
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr]))
    return out


@case
def provider_aap_restart() -> Case:
    import json

    day = "2026-11-26"
    a, n, ni, wf, job = "alloc-44e0b9", "n-p02-03", "ni-p02-03-19fd", "wf-44e0b9-p1", 9630
    b, nb, wfb, jobb = "alloc-b2c6f1", "n-c04-11", "wf-b2c6f1-p1", 9629
    skew = -40.0
    t = clock_on(day)
    http = Http("w-provider-aap-restart")
    for label, clock in (("provision", "10:31:05.204"), ("poll1", "10:44:00.118")):
        http.place(label, t(clock))
    rid = http.request_ids
    fatal_b = ansible_times(stdout_line("rc127", "fatal:"), t("10:29:14.530"))
    out = Case(
        "w-provider-aap-restart",
        seed=f"allocation_id={a}",
        owner="provider",
        first_failure="Task was marked as running at system start up",
        excluded=[f"allocation_id={b}"],
        notes=f"""The AAP controller was restarted for an upgrade at 10:42 while job {job}
        (provisioning {a} on {n}) was running; on start-up the dispatcher reaped it as failed
        ("{AWX_STARTUP}"). The worker and the CR report the failure, the allocation goes to
        provision_failed (a workflow state: a symptom here), and the node, half-way through
        its install, later warns that the installer's callback never came (a node symptom).
        While the controller was down the worker's polls were refused (a warning with
        "Connection refused", which looks like an ingress fault but is the same restart).
        Owner: the provider. The agent's clock is {skew:+.0f} s off. Noise: job {jobb} for {b}
        on {nb} failed just before for another owner (deploy: racadm missing in the execution
        environment, rc=127). Files: {AAP_NOTE}{http_notes(JSON_FMT)}
        node-agent-{n}.log: the Go agent's lines, written by w_cases.py; workflow-worker.log,
        allocation-transitions.ndjson: the worker's lines and audit rows (the ConnectError
        text is httpx's own, from a GET to a port nobody listens on);
        {K8S_NOTE.format(file="provisionrequests.json", watch="")}The "changed: [host]" lines
        of successful tasks were written by w_cases.py in Ansible's format. {provenance()}""",
    )
    jobs = [
        awx_job(
            job,
            "baremetal-provision",
            21,
            "failed",
            t("10:31:06.610"),
            t("10:31:10.905"),
            t("10:43:02.511"),
            {"allocation_id": a, "node_id": n, "workflow_id": wf, "image": "rhel-9.4"},
            explanation=AWX_STARTUP,
        ),
        awx_job(
            jobb,
            "baremetal-provision",
            21,
            "failed",
            t("10:29:10.080"),
            t("10:29:13.412"),
            t("10:29:15.770"),
            {"allocation_id": b, "node_id": nb, "workflow_id": wfb, "image": "rhel-9.4"},
        ),
    ]
    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 2, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    play, task_power = stdout_line("rc127", "PLAY ["), stdout_line("rc127", "TASK [")
    out.log(
        "aap-job-events.log",
        "ndjson",
        job_event(t("10:29:14.102"), jobb, "info", play, "playbook_on_play_start", None),
        job_event(t("10:29:14.330"), jobb, "info", task_power, "playbook_on_task_start", None),
        job_event(
            t("10:29:14.536"),
            jobb,
            "error",
            fatal_b,
            "runner_on_failed",
            nb,
            task="Power on node through the BMC",
        ),
        job_event(t("10:31:11.620"), job, "info", play, "playbook_on_play_start", None),
        job_event(t("10:31:11.840"), job, "info", task_power, "playbook_on_task_start", None),
        job_event(t("10:31:14.002"), job, "info", f"changed: [{n}]", "runner_on_ok", n),
        job_event(
            t("10:31:14.230"),
            job,
            "info",
            "TASK [Wait for installer callback] " + "*" * 44,
            "playbook_on_task_start",
            None,
        ),
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("10:31:40.331"),
            skew,
            "info",
            "pxe boot observed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
        ),
        node_agent(
            t("10:36:12.740"),
            skew,
            "info",
            "installer started",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            image="rhel-9.4",
        ),
        node_agent(
            t("10:51:14.300"),
            skew,
            "warning",
            "installer callback not acknowledged",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            waited_s=900,
            callback="https://aap.dc1.example.net/api/v2/job_templates/21/callback/",
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("10:29:09.902"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            template="baremetal-provision",
        ),
        worker(
            t("10:29:18.003"),
            "error",
            "provider job failed",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            provider_job=f"aap:{jobb}",
            status="failed",
            job_explanation="",
        ),
        worker(
            t("10:31:05.230"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.gpu.a100",
        ),
        worker(
            t("10:31:06.402"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="baremetal-provision",
        ),
        worker(
            t("10:31:06.700"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("10:42:11.870"),
            "warning",
            "provider unavailable, will retry polling",
            provider="aap",
            error=connect_refused(),
        ),
        worker(
            t("10:43:05.004"),
            "error",
            "provider job failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="failed",
            job_explanation=AWX_STARTUP,
        ),
        worker(
            t("10:43:05.090"),
            "error",
            "provision failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            reason=f"provider job aap:{job} failed",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("10:29:09.880"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "aap"},
        ),
        transition(
            t("10:29:18.010"),
            "allocation",
            b,
            "provision_failed",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("10:31:05.226"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.gpu.a100"},
        ),
        transition(
            t("10:31:06.390"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("10:43:05.100"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        t("10:31:05"),
        9340012,
        job_id=job,
        state="Failed",
        message=f"job {job} failed: {AWX_STARTUP}",
        changed=t("10:43:06"),
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr]))
    return out


@case
def provider_aap_instance_lost() -> Case:
    import json

    day = "2026-11-27"
    a, n, ni, wf, job = "alloc-0c5be7", "n-q03-01", "ni-q03-01-6d02", "wf-0c5be7-p1", 9702
    c, nc, jobc = "alloc-8a3c1d", "n-q03-04", 9701
    e, ne, wfe = "alloc-e07c55", "n-q03-02", "wf-e07c55-p1"
    skew = 2.5
    t = clock_on(day)
    out = Case(
        "w-provider-aap-instance-lost",
        seed=f"workflow_id=aap:{job}",
        owner="provider",
        first_failure=AWX_REAPED,
        excluded=[f"allocation_id={e}", f"allocation_id={c}"],
        notes=f"""Within four minutes: the AAP execution node aap-exec-2 was evicted at 21:16
        while running job {job} (provision of {a} on {n}); the controller reaped the job as
        failed ("{AWX_REAPED}"). The operator starts from the failed job (seed: its workflow
        id as the aap adapter names it). The CR and worker report the failure; the node,
        mid-install, warns its installer lost the controller (a node symptom). Owner: the
        provider. The job was launched without a workflow_id in its extra_vars, so it links
        to the worker's records by allocation and node only. Noise: {e} on {ne} fails in the
        same minutes for another owner (node: its BMC does not answer); job {jobc} for {c}
        succeeded on aap-exec-1. Files: {AAP_NOTE}
        {K8S_NOTE.format(file="provisionrequests-watch.json", watch=WATCH)}
        node-agent-{n}.log: the Go agent's lines, written by w_cases.py; workflow-worker.log
        (with the ipmitool CalledProcessError and stderr captured by w_capture_python.py),
        allocation-transitions.ndjson: the worker's lines and audit rows. The "changed:
        [host]" lines were written by w_cases.py in Ansible's format. {provenance()}""",
    )
    jobs = [
        awx_job(
            job,
            "baremetal-provision",
            21,
            "failed",
            t("21:14:03.008"),
            t("21:14:06.412"),
            t("21:17:41.806"),
            {"allocation_id": a, "node_id": n, "image": "rhel-9.4"},
            explanation=AWX_REAPED,
            execution_node="aap-exec-2",
        ),
        awx_job(
            jobc,
            "baremetal-provision",
            21,
            "successful",
            t("21:05:31.440"),
            t("21:05:35.002"),
            t("21:13:58.730"),
            {"allocation_id": c, "node_id": nc, "image": "rhel-9.4"},
        ),
    ]
    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 2, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    play, task_power = stdout_line("rc127", "PLAY ["), stdout_line("rc127", "TASK [")
    out.log(
        "aap-job-events.log",
        "ndjson",
        job_event(t("21:14:07.020"), job, "info", play, "playbook_on_play_start", None),
        job_event(t("21:14:07.230"), job, "info", task_power, "playbook_on_task_start", None),
        job_event(t("21:14:11.905"), job, "info", f"changed: [{n}]", "runner_on_ok", n),
        job_event(
            t("21:14:12.110"),
            job,
            "info",
            "TASK [Wait for installer callback] " + "*" * 44,
            "playbook_on_task_start",
            None,
        ),
    )
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("21:14:35.117"),
            skew,
            "info",
            "pxe boot observed",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
        ),
        node_agent(
            t("21:15:20.640"),
            skew,
            "info",
            "installer started",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            image="rhel-9.4",
        ),
        node_agent(
            t("21:17:58.302"),
            skew,
            "warning",
            "installer lost connection to provisioning controller",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            peer="aap-exec-2.dc1.example.net:27199",
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("21:14:02.604"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="baremetal-provision",
        ),
        worker(
            t("21:14:03.090"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("21:14:50.330"),
            "info",
            "running task",
            allocation_id=e,
            workflow_id=wfe,
            node_id=ne,
            task_id="t-e07c55-01",
            kind="power_on",
            driver="ipmitool",
            bmc="10.20.6.22",
            attempt=1,
        ),
        worker(
            t("21:15:10.440"),
            "error",
            "task failed",
            allocation_id=e,
            workflow_id=wfe,
            node_id=ne,
            task_id="t-e07c55-01",
            kind="power_on",
            attempt=1,
            stderr=IPMI_NOISE["stderr"],
            returncode=1,
            exception=IPMI_NOISE["stack"],
        ),
        worker(
            t("21:15:10.460"),
            "error",
            "provision failed",
            allocation_id=e,
            workflow_id=wfe,
            node_id=ne,
            reason="task t-e07c55-01 (power_on) failed",
        ),
        worker(
            t("21:17:44.002"),
            "error",
            "provider job failed",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="failed",
            job_explanation=AWX_REAPED,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("21:14:02.101"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("21:14:50.300"),
            "allocation",
            e,
            "provisioning",
            "requested",
            workflow_id=wfe,
            node_id=ne,
            attributes={"provider": "workflow-worker"},
        ),
        transition(
            t("21:15:10.466"),
            "allocation",
            e,
            "provision_failed",
            "provisioning",
            workflow_id=wfe,
            node_id=ne,
            attributes={"occupancy": "cleanup"},
        ),
        transition(
            t("21:17:44.051"),
            "allocation",
            a,
            "provision_failed",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
    )
    name = f"pr-{a}"
    pending = provision_request(
        name,
        a,
        n,
        t("21:14:01"),
        9500102,
        job_id=None,
        state="Pending",
        message="waiting for the workflow",
        changed=t("21:14:01"),
    )
    running = provision_request(
        name,
        a,
        n,
        t("21:14:01"),
        9500131,
        job_id=job,
        state="Running",
        message=f"job {job} running",
        changed=t("21:14:07"),
    )
    failed = provision_request(
        name,
        a,
        n,
        t("21:14:01"),
        9500288,
        job_id=job,
        state="Failed",
        message=f"job {job} failed: {AWX_REAPED}",
        changed=t("21:17:42"),
    )
    out.document(
        "provisionrequests-watch.json",
        "k8s",
        k8s_watch([("ADDED", pending), ("MODIFIED", running), ("MODIFIED", failed)]),
    )
    return out


@case
def api_keyerror() -> Case:
    day = "2026-11-16"
    a = "alloc-c81f2a"
    b, nb, wfb = "alloc-3e7b90", "n-t01-04", "wf-3e7b90-p1"
    d, nd, wfd = "alloc-90d4b2", "n-t01-07", "wf-90d4b2-p1"
    t = clock_on(day)
    http = Http("w-api-keyerror")
    for label, clock in (
        ("provision1", "11:20:31.402"),
        ("noise_provision", "11:20:44.118"),
        ("provision2", "11:21:02.911"),
        ("get", "11:21:10.530"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-api-keyerror",
        seed=f"correlation_id={rid['provision1']}",
        owner="api",
        first_failure="KeyError",
        excluded=[f"allocation_id={b}", f"allocation_id={d}"],
        notes=f"""provisioning-api 4.7.2 added the flavor bm.gpu.h100 to its catalog file, but
        not to the FLAVOR_SPECS table in the code: provisioning {a} with that flavor raises
        KeyError: 'bm.gpu.h100' and returns 500 (twice: the user retried). A bug in the API,
        nothing else at fault. The operator starts from the X-Request-ID the user reported
        (the seed, nginx's $request_id of the first 500). Noise: {b} provisions through the
        same API in the same minute with a known flavor and becomes active; {d}'s AAP job
        errored at the same time (provider). Files: {http_notes(JSON_FMT)} The API's start-up
        line was written by w_cases.py in its format; workflow-worker.log,
        allocation-transitions.ndjson: the worker's lines and audit rows. {provenance()}""",
    )
    out.log(
        "provisioning-api.log",
        "ndjson",
        api_line(
            t("11:02:00.331"),
            "info",
            "provisioning-api starting",
            logger="provisioning_api.main",
            version="4.7.2",
            image="registry.dc1.example.net/provisioning-api:4.7.2",
        ),
        *http.api,
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("11:19:58.712"), "info", "allocation created", allocation_id=a, flavor="bm.gpu.h100"
        ),
        worker(
            t("11:20:44.140"),
            "info",
            "provision accepted",
            allocation_id=b,
            workflow_id=wfb,
            correlation_id=rid["noise_provision"],
            flavor="bm.std.2x",
        ),
        worker(
            t("11:20:45.002"),
            "info",
            "launching provider job",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            template="baremetal-provision",
        ),
        worker(
            t("11:20:50.406"),
            "error",
            "provider job failed",
            allocation_id=d,
            workflow_id=wfd,
            node_id=nd,
            provider_job="aap:8890",
            status="error",
            job_explanation="",
        ),
        worker(
            t("11:29:50.660"),
            "info",
            "provider job finished",
            allocation_id=b,
            workflow_id=wfb,
            node_id=nb,
            provider_job="aap:8891",
            status="successful",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("11:19:58.710"), "allocation", a, "requested", attributes={"flavor": "bm.gpu.h100"}
        ),
        transition(
            t("11:20:44.136"),
            "allocation",
            b,
            "provisioning",
            "requested",
            workflow_id=wfb,
            node_id=nb,
            correlation_id=rid["noise_provision"],
            attributes={"provider": "aap"},
        ),
        transition(
            t("11:20:50.410"),
            "allocation",
            d,
            "provision_failed",
            "provisioning",
            workflow_id=wfd,
            node_id=nd,
            attributes={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            t("11:29:50.667"),
            "allocation",
            b,
            "active",
            "provisioning",
            workflow_id=wfb,
            node_id=nb,
            attributes={"provider": "aap"},
        ),
    )
    return out


def connect_refused() -> str:
    """httpx's own error for a connection refused (a port on 127.0.0.1 nobody listens on)."""
    import socket

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    try:
        httpx.get(f"http://127.0.0.1:{port}/api/v2/jobs/", timeout=5)
    except httpx.ConnectError as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(port)


def http_error(status: int, allocation_id: str) -> str:
    """httpx's own text for raise_for_status() on a response of ``status`` (httpx 0.28.1)."""
    import httpx

    url = f"https://provisioning.dc2.example.net/v1/allocations/{allocation_id}/lease"
    try:
        httpx.Response(status, request=httpx.Request("GET", url)).raise_for_status()
    except httpx.HTTPStatusError as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(status)


@case
def api_typeerror() -> Case:
    import json

    day = "2026-11-18"
    a, n = "alloc-9a04e6", "n-e02-08"
    b = "alloc-52d7c1"
    d = "alloc-0b33e1"
    t = clock_on(day)
    http = Http("w-api-typeerror")
    for label, clock in (
        ("noise_lease", "04:00:01.204"),
        ("lease1", "04:00:01.902"),
        ("get", "08:12:30.118"),
        ("lease2", "08:12:31.040"),
        ("lease3", "08:12:44.610"),
    ):
        http.place(label, t(clock))

    def renewer(clock: str, level: str, event: str, **fields: object) -> tuple[int, str]:
        ns = t(clock)
        record = {
            "service": "lease-renewer",
            "layer": "workflow",
            **fields,
            "event": event,
            "level": level,
        }
        return ns, json.dumps(record | {"ts": ts_micro_z(ns)})

    flask_note = "The API ran with W_LOG_STYLE=flask."
    out = Case(
        "w-api-typeerror",
        seed=f"allocation_id={a}",
        owner="api",
        first_failure="unsupported operand type(s) for -: 'NoneType' and 'datetime.datetime'",
        excluded=[f"allocation_id={b}", f"allocation_id={d}"],
        notes=f"""{a} was imported the evening before from the old inventory, without a lease
        end (the worker warned). The API's lease endpoint subtracts now() from lease_end
        without checking for None: TypeError, 500, for the nightly lease-renewer at 04:00 and
        twice for the tenant at 08:12. The lease-renewer reports "lease renewal failed" (a
        wrapper in the workflow layer). An API bug; the import is legitimate (the endpoint
        must handle a missing lease). The API logs Flask/gunicorn style (message "Exception on
        PATH [METHOD]", traceback only in "exception", upper-case levels) in local time
        (+01:00) while nginx logs UTC. Noise: {b}'s lease is read fine in the same run; the
        renewer also fails for {d}, refused with 409 because that allocation is stuck in
        release_failed (another owner). Files: {http_notes(COMBINED_FMT, flask_note)}
        lease-renewer.log, workflow-worker.log,
        allocation-transitions.ndjson: the Python services' lines and the worker's audit rows,
        written by w_cases.py. {provenance()}""",
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    rid = http.request_ids
    out.log(
        "lease-renewer.log",
        "ndjson",
        renewer("04:00:00.902", "info", "renewal run started", due=3),
        renewer(
            "04:00:01.215",
            "info",
            "lease checked",
            allocation_id=b,
            remaining_s=3528000.0,
            correlation_id=rid["noise_lease"],
        ),
        renewer(
            "04:00:01.915",
            "error",
            "lease renewal failed",
            allocation_id=a,
            correlation_id=rid["lease1"],
            status=500,
            error=http_error(500, a),
        ),
        renewer(
            "04:00:02.480",
            "error",
            "lease renewal failed",
            allocation_id=d,
            status=409,
            error=http_error(409, d),
            state="release_failed",
        ),
        renewer("04:00:02.501", "info", "renewal run finished", renewed=1, failed=2),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            at("2026-11-17", "22:10:14.330"),
            "warning",
            "allocation imported without lease_end",
            allocation_id=a,
            node_id=n,
            source="inventory-v1",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            at("2026-11-17", "22:10:14.326"),
            "allocation",
            a,
            "active",
            node_id=n,
            attributes={"source": "inventory-v1-import"},
        ),
    )
    return out


@case
def none_retry_succeeds() -> Case:
    day = "2026-11-22"
    a, n, ni, wf = "alloc-1c6d3a", "n-k02-04", "ni-k02-04-2f90", "wf-1c6d3a-p1"
    skew = -15.0
    t = clock_on(day)
    http = Http("w-none-retry-succeeds")
    for label, clock in (
        ("provision", "14:00:10.102"),
        ("poll1", "14:01:00.330"),
        ("poll2", "14:10:05.871"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-none-retry-succeeds",
        seed=f"allocation_id={a}",
        owner="none",
        notes=f"""A healthy provision of {a} on {n}. The BMC was slow to answer the first power-on
        (ipmitool exited 1: "Error: Unable to establish IPMI v2 / RMCP+ session"); the agent
        logged a warning and retried after 10 s, the second attempt worked, and the
        allocation became active nine minutes later. Nothing failed. The agent's clock is
        {skew:+.0f} s off. Files: node-agent-{n}.log: the Go agent's lines, written by
        w_cases.py around the text Go's os/exec ("{IPMI_EXIT}") and ipmitool 1.8.19 (stderr)
        printed when w_nodeagent.go ran ipmitool against an address where no BMC answers;
        {http_notes(JSON_FMT)} workflow-worker.log, allocation-transitions.ndjson: the
        worker's lines and audit rows. {provenance()}""",
    )
    tasks = [
        ("t-1c6d3a-01", "power_on"),
        ("t-1c6d3a-02", "image_download"),
        ("t-1c6d3a-03", "install"),
    ]
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("14:00:11.302"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=tasks[0][0],
            kind="power_on",
        ),
        node_agent(
            t("14:00:17.410"),
            skew,
            "warning",
            "bmc power on attempt failed, retrying",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=tasks[0][0],
            attempt=1,
            retry_in_s=10,
            error=IPMI_EXIT,
            stderr=IPMI_STDERR,
        ),
        node_agent(
            t("14:00:29.120"),
            skew,
            "info",
            "chassis power on",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=tasks[0][0],
            attempt=2,
        ),
        node_agent(
            t("14:00:29.122"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=tasks[0][0],
            kind="power_on",
            attempts=2,
        ),
        node_agent(
            t("14:00:30.004"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=tasks[1][0],
            kind="image_download",
            image="rhel-9.4-x86_64.qcow2",
        ),
        node_agent(
            t("14:02:55.730"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=tasks[1][0],
            kind="image_download",
            bytes=2147483648,
        ),
        node_agent(
            t("14:02:56.010"),
            skew,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id=tasks[2][0],
            kind="install",
        ),
        node_agent(
            t("14:09:40.402"),
            skew,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id=tasks[2][0],
            kind="install",
        ),
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("14:00:10.130"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.std.2x",
        ),
        worker(
            t("14:00:11.004"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=tasks[0][0],
            kind="power_on",
        ),
        worker(
            t("14:00:29.700"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=tasks[1][0],
            kind="image_download",
        ),
        worker(
            t("14:02:55.900"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id=tasks[2][0],
            kind="install",
        ),
        worker(
            t("14:09:41.004"),
            "info",
            "provision complete",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            duration_s=570.9,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("14:00:10.127"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.std.2x"},
        ),
        transition(
            t("14:00:10.990"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "node-agent"},
        ),
        transition(
            t("14:09:41.010"), "allocation", a, "active", "provisioning", workflow_id=wf, node_id=n
        ),
    )
    return out


@case
def none_benign_404() -> Case:
    day = "2026-11-15"
    a, n, ni, wf = "alloc-e3b512", "n-u04-01", "ni-u04-01-77c3", "wf-e3b512-p1"
    typo = "alloc-e3b5l2"
    t = clock_on(day)
    http = Http("w-none-benign-404")
    for label, clock in (
        ("provision", "09:12:00.310"),
        ("poll1", "09:12:30.512"),
        ("console", "09:13:02.204"),
        ("poll2", "09:15:30.730"),
        ("typo", "09:16:01.218"),
        ("poll3", "09:21:10.402"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-none-benign-404",
        seed=f"allocation_id={a}",
        owner="none",
        excluded=[f"allocation_id={typo}"],
        notes=f"""A healthy provision of {a}. While it ran, the tenant's portal probed the serial
        console (GET .../console: 404 "console not enabled for this allocation", the normal
        answer for this flavor) and the tenant mistyped the allocation id once (GET
        /v1/allocations/{typo}: 404). The allocation became active at 09:20. Nothing failed:
        a 404 at the ingress is an answer, not a fault. Files: {http_notes(COMBINED_FMT)}
        node-agent-{n}.log: the Go agent's lines; workflow-worker.log,
        allocation-transitions.ndjson: the worker's lines and audit rows; all three written
        by w_cases.py. {provenance()}""",
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        f"node-agent-{n}.log",
        "ndjson",
        node_agent(
            t("09:12:01.660"),
            4.0,
            "info",
            "task accepted",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            workflow_id=wf,
            task_id="t-e3b512-01",
            kind="power_on",
        ),
        node_agent(
            t("09:12:04.118"),
            4.0,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id="t-e3b512-01",
            kind="power_on",
        ),
        node_agent(
            t("09:20:51.873"),
            4.0,
            "info",
            "task succeeded",
            node_id=n,
            node_instance_id=ni,
            allocation_id=a,
            task_id="t-e3b512-03",
            kind="install",
        ),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("09:12:00.340"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.std.2x",
        ),
        worker(
            t("09:12:01.402"),
            "info",
            "dispatching task",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            task_id="t-e3b512-01",
            kind="power_on",
        ),
        worker(
            t("09:20:55.011"),
            "info",
            "provision complete",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            duration_s=534.7,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("09:12:00.336"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.std.2x"},
        ),
        transition(
            t("09:12:01.380"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "node-agent"},
        ),
        transition(
            t("09:20:55.020"), "allocation", a, "active", "provisioning", workflow_id=wf, node_id=n
        ),
    )
    return out


@case
def none_warning_only() -> Case:
    import json

    day = "2026-11-13"
    a, n, wf, job = "alloc-0f7d21", "n-d01-03", "wf-0f7d21-p1", 7001
    t = clock_on(day)
    run = "warnings"
    ignored = stdout_line(run, "fatal:") + "\n...ignoring"
    out = Case(
        "w-none-warning-only",
        seed=f"allocation_id={a}",
        owner="none",
        notes=f"""A healthy provision of {a} on {n} through AAP job {job} (prepare-node) whose
        output carries only warnings: Ansible's interpreter-discovery warning, one "FAILED -
        RETRYING" of a task that waits for the node agent's socket (it appeared on the
        second try), and a task that loads optional site overrides and fails with
        ignore_errors ("Could not find or access 'bmc-overrides.yml'" ... "...ignoring": the
        file is optional, the play goes on). The job waited 95 s in the queue, which the
        worker flags against its SLO. The job succeeded and the allocation became active.
        Nothing failed. Files: {AAP_NOTE}The three stdout texts are from one real
        ansible-playbook run of the same play against a local stand-in for the node.
        {K8S_NOTE.format(file="provisionrequests.json", watch="")}workflow-worker.log,
        allocation-transitions.ndjson: the worker's lines and audit rows. {provenance()}""",
    )
    job_obj = awx_job(
        job,
        "prepare-node",
        24,
        "successful",
        t("16:03:35.112"),
        t("16:05:10.030"),
        t("16:05:17.402"),
        {"allocation_id": a, "node_id": n, "workflow_id": wf},
    )
    out.document("aap-jobs.json", "aap", json.dumps(job_obj, indent=4) + "\n")
    warning = stdout_line(run, "[WARNING]")
    retrying = stdout_line(run, "FAILED - RETRYING")
    tasks = [line for line in ansible(run).splitlines() if line.startswith("TASK [")]
    out.log(
        "aap-job-events.log",
        "ndjson",
        job_event(
            t("16:05:10.108"),
            job,
            "info",
            stdout_line(run, "PLAY ["),
            "playbook_on_play_start",
            None,
        ),
        job_event(t("16:05:10.212"), job, "info", tasks[0], "playbook_on_task_start", None),
        job_event(t("16:05:12.904"), job, "warning", warning, "warning", n),
        job_event(t("16:05:13.010"), job, "info", f"ok: [{n}]", "runner_on_ok", n),
        job_event(t("16:05:13.104"), job, "info", tasks[1], "playbook_on_task_start", None),
        job_event(t("16:05:13.402"), job, "warning", retrying, "runner_retry", n),
        job_event(t("16:05:16.611"), job, "info", f"ok: [{n}]", "runner_on_ok", n),
        job_event(t("16:05:16.705"), job, "info", tasks[2], "playbook_on_task_start", None),
        job_event(
            t("16:05:16.830"), job, "warning", ignored, "runner_on_failed", n, ignore_errors=True
        ),
        job_event(t("16:05:17.020"), job, "info", recap(run), "playbook_on_stats", None),
    )
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("16:03:34.880"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="prepare-node",
        ),
        worker(
            t("16:03:35.190"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
        ),
        worker(
            t("16:05:20.003"),
            "warning",
            "provider job queued longer than SLO",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            queued_s=94.9,
            slo_s=60,
        ),
        worker(
            t("16:05:20.010"),
            "info",
            "provider job finished",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job}",
            status="successful",
        ),
        worker(
            t("16:05:20.120"),
            "info",
            "provision complete",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("16:03:34.210"), "allocation", a, "requested", attributes={"flavor": "bm.std.2x"}
        ),
        transition(
            t("16:03:34.860"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("16:05:20.125"),
            "allocation",
            a,
            "active",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
    )
    cr = provision_request(
        f"pr-{a}",
        a,
        n,
        t("16:03:34"),
        3304018,
        job_id=job,
        state="Succeeded",
        message=f"job {job} successful",
        changed=t("16:05:18"),
    )
    out.document("provisionrequests.json", "k8s", k8s_list([cr]))
    return out


@case
def none_canceled_resubmitted() -> Case:
    import json

    day = "2026-11-28"
    a, n, wf, job1, job2 = "alloc-8d2f60", "n-w02-07", "wf-8d2f60-p1", 9801, 9806
    t = clock_on(day)
    http = Http("w-none-canceled-resubmitted")
    for label, clock in (
        ("provision", "19:40:02.204"),
        ("poll1", "19:43:30.117"),
        ("poll2", "19:52:10.605"),
    ):
        http.place(label, t(clock))
    rid = http.request_ids
    out = Case(
        "w-none-canceled-resubmitted",
        seed=f"allocation_id={a}",
        owner="none",
        notes=f"""A healthy provision of {a}. AAP job {job1} sat pending for 120 s (no capacity on
        the execution nodes); the worker canceled it, as it is configured to, and launched
        job {job2}, which ran and succeeded; the allocation became active at 19:51. A
        canceled job (warning) followed by a successful resubmission is not a failure.
        Files: {AAP_NOTE.split(" aap-job-events.log")[0]} {http_notes(COMBINED_FMT)}
        {K8S_NOTE.format(file="provisionrequests-watch.json", watch=WATCH)}
        workflow-worker.log, allocation-transitions.ndjson: the worker's lines and audit rows.
        {provenance()}""",
    )
    extra = {"allocation_id": a, "node_id": n, "workflow_id": wf, "image": "rhel-9.4"}
    jobs = [
        awx_job(
            job2,
            "baremetal-provision",
            21,
            "successful",
            t("19:42:05.330"),
            t("19:42:09.118"),
            t("19:51:40.502"),
            extra,
        ),
        awx_job(
            job1,
            "baremetal-provision",
            21,
            "canceled",
            t("19:40:03.402"),
            None,
            t("19:42:04.110"),
            extra,
        ),
    ]
    out.document(
        "aap-jobs.json",
        "aap",
        json.dumps({"count": 2, "next": None, "previous": None, "results": jobs}, indent=4) + "\n",
    )
    out.log("ingress-access.log", "nginx", *http.nginx)
    out.log("provisioning-api.log", "ndjson", *http.api)
    out.log(
        "workflow-worker.log",
        "ndjson",
        worker(
            t("19:40:02.230"),
            "info",
            "provision accepted",
            allocation_id=a,
            workflow_id=wf,
            correlation_id=rid["provision"],
            flavor="bm.std.2x",
        ),
        worker(
            t("19:40:03.110"),
            "info",
            "launching provider job",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            template="baremetal-provision",
        ),
        worker(
            t("19:40:03.490"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job1}",
        ),
        worker(
            t("19:42:03.502"),
            "warning",
            "provider job pending too long, canceling",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job1}",
            pending_s=120.0,
        ),
        worker(
            t("19:42:04.200"),
            "info",
            "provider job canceled",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job1}",
            status="canceled",
        ),
        worker(
            t("19:42:05.402"),
            "info",
            "provider job launched",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job2}",
            resubmission=1,
        ),
        worker(
            t("19:51:41.004"),
            "info",
            "provider job finished",
            allocation_id=a,
            workflow_id=wf,
            node_id=n,
            provider_job=f"aap:{job2}",
            status="successful",
        ),
    )
    out.log(
        "allocation-transitions.ndjson",
        "workflow",
        transition(
            t("19:40:02.226"),
            "allocation",
            a,
            "requested",
            correlation_id=rid["provision"],
            attributes={"flavor": "bm.std.2x"},
        ),
        transition(
            t("19:40:03.090"),
            "allocation",
            a,
            "provisioning",
            "requested",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
        transition(
            t("19:51:41.010"),
            "allocation",
            a,
            "active",
            "provisioning",
            workflow_id=wf,
            node_id=n,
            attributes={"provider": "aap"},
        ),
    )
    name = f"pr-{a}"
    states = [
        ("ADDED", 9800110, None, "Pending", "waiting for the workflow", "19:40:02"),
        ("MODIFIED", 9800134, job1, "Pending", f"job {job1} pending", "19:40:04"),
        ("MODIFIED", 9800190, job1, "Canceled", f"job {job1} canceled", "19:42:04"),
        ("MODIFIED", 9800201, job2, "Running", f"job {job2} running", "19:42:09"),
        ("MODIFIED", 9800377, job2, "Succeeded", f"job {job2} successful", "19:51:41"),
    ]
    out.document(
        "provisionrequests-watch.json",
        "k8s",
        k8s_watch(
            [
                (
                    kind,
                    provision_request(
                        name,
                        a,
                        n,
                        t("19:40:02"),
                        rv,
                        job_id=jid,
                        state=state,
                        message=msg,
                        changed=t(clock),
                    ),
                )
                for kind, rv, jid, state, msg, clock in states
            ]
        ),
    )
    return out
