"""Hold-out cases around jobs and controllers: an Ironic deploy whose BMC is gone, a Node.js
imager filling a disk inside an AAP job, a Kubernetes Job whose image was never pushed, and
an AAP job the controller lost.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from h_ansible import (
    aap_job,
    event_record,
    jobs_page,
    run_playbook,
    run_playbook_until,
    seconds_between,
    write_events,
)
from h_common import (
    controller_runtime,
    from_pino,
    pino_lines,
    provision_request,
    transition,
    watch_lines,
    zerolog,
)
from h_lab import MAKE, VENV, Lab, Lines, fresh_case, iso, now_ns, run, write_truth
from h_pg_cases import CR_STACK, reconcile_fields

# Where the stand-in functions of h_ironic_capture.py would live in Ironic and Nova.
IRONIC_PATHS = {
    "_exec_ipmitool": "/usr/lib/python3.11/site-packages/ironic/drivers/modules/ipmitool.py",
    "_power_status": "/usr/lib/python3.11/site-packages/ironic/drivers/modules/ipmitool.py",
    "node_power_action": "/usr/lib/python3.11/site-packages/ironic/conductor/utils.py",
    "do_next_deploy_step": "/usr/lib/python3.11/site-packages/ironic/conductor/deployments.py",
    "spawn": "/usr/lib/python3.11/site-packages/nova/virt/ironic/driver.py",
    "main": "/usr/lib/python3.11/site-packages/ironic/conductor/manager.py",
}


def _rename_frames(text: str, script: str) -> str:
    """Point the capture script's frames at the modules its functions stand for."""
    out = []
    for line in text.split("\n"):
        found = re.match(r'(\s*File ")' + re.escape(script) + r'(", line \d+, in )(\w+)', line)
        if found:
            line = line.replace(script, IRONIC_PATHS.get(found[3], IRONIC_PATHS["main"]))
        out.append(line)
    return "\n".join(out)


def from_oslo(
    line: dict[str, Any], *, script: str, ids: dict[str, str], request_id: str
) -> dict[str, Any]:
    """An oslo.log JSONFormatter line in the record schema (the shipper's mapping)."""
    created = float(line["created"])
    record: dict[str, Any] = {
        "ts": dt.datetime.fromtimestamp(created, dt.UTC).isoformat(),
        "level": line["levelname"].lower(),
        "event": line["message"],
        "service": line["service"],
        "layer": "workflow",
        "name": line["name"],
        "funcname": line["funcname"],
        "lineno": line["lineno"],
        "hostname": "ironic-cond-02" if line["service"] == "ironic-conductor" else "nova-cpu-07",
        "process": line["process"],
        "request_id": request_id,
    }
    record.update({k: v for k, v in ids.items() if v in line["message"]})
    if line.get("error_summary"):
        record["error_summary"] = line["error_summary"]
    if line.get("traceback"):
        record["exception"] = _rename_frames("".join(line["traceback"]), script)
    return record


def case_node_ironic_ipmi() -> None:
    """node: the BMC of an Ironic node stopped answering IPMI; the deploy step fails with
    'IPMI call failed: power status.', the node goes 'deploy failed' and into maintenance."""
    name = "h-node-ironic-ipmi-power"
    node = "4c1f0b6e-93a2-4d5e-8f17-2a9b0c3d4e51"
    instance = "9e2d4a71-0b3c-4f6e-a5d8-7c1b2e3f4a60"
    other = "5b0c8d2e-1f4a-4b6c-9d7e-3a2b1c0d9e8f"
    other_instance = "c3b2a190-8f7e-4d6c-b5a4-938271605f4e"
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        password = lab.root / "ipmi-pw"
        password.write_text("calvin\n")
        script = str(MAKE / "h_ironic_capture.py")
        done = run(
            [
                str(VENV / "bin" / "python"),
                script,
                node,
                instance,
                other,
                other_instance,
                str(password),
            ],
            timeout_s=240,
        )
        text = done.stdout.replace(str(password), "/tmp/tmpk9w2ql1c")
        text = text.replace("-H 127.0.0.1", "-H 10.44.3.17")
        lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    finally:
        lab.close()
    req = "req-" + str(uuid.uuid4())
    ids = {"node_id": node, "allocation_id": instance}
    other_ids = {"node_id": other}
    conductor, nova, audit = [], [], Lines()
    for line in lines:
        mine = {**ids, **{k: v for k, v in other_ids.items() if v in line["message"]}}
        if other in line["message"]:
            mine = other_ids
        record = from_oslo(line, script=script, ids=mine, request_id=req)
        (conductor if line["service"] == "ironic-conductor" else nova).append(record)
        moved = re.match(
            r'Node (\S+) moved to provision state "([^"]+)" from state "([^"]+)"', line["message"]
        )
        if moved:
            subject = moved[1]
            extra = (
                {"allocation_id": instance}
                if subject == node and moved[2] in ("deploying", "deploy failed")
                else {}
            )
            audit.add(
                transition(
                    int(float(line["created"]) * 1e9),
                    "baremetal_node",
                    subject,
                    moved[2],
                    frm=moved[3],
                    attributes={"instance_uuid": instance} if extra else None,
                    service="ironic-conductor",
                    node_id=subject,
                    **extra,
                )
            )
    Lines.write_items(conductor, folder / "ironic-conductor.json")
    Lines.write_items(nova, folder / "nova-compute.json")
    audit.write(folder / "node-provision-states.jsonl")
    write_truth(
        folder,
        {
            "seed": f"node_id={node}",
            "owner_layer": "node",
            "first_failure_contains": "Unable to establish IPMI v2 / RMCP+ session",
            "excluded": [f"node_id={other}"],
            "sources": {
                "ironic-conductor.json": "ndjson",
                "nova-compute.json": "ndjson",
                "node-provision-states.jsonl": "workflow",
            },
            "notes": (
                f"Ironic node {node} (BMC 10.44.3.17) was picked for instance {instance}. "
                "Its BMC had stopped answering IPMI over LAN: the conductor's deploy step "
                "powers the node on through the ipmitool driver, whose 'power status' call "
                "failed ('Unable to establish IPMI v2 / RMCP+ session' on stderr, logged at "
                "WARNING inside oslo.concurrency's ProcessExecutionError text); Ironic raised "
                "IPMIFailure 'IPMI call failed: power status.', the deploy step failed, the "
                "node moved to 'deploy failed' (reads like a workflow state problem) and "
                "nova-compute logged 'Instance failed to spawn' with InstanceDeployFailure "
                "wrapping it; the periodic power sync then failed three times and put the "
                "node into maintenance. Owner: the node (its BMC). Everything is logged by "
                "the conductor and nova (workflow layer); the node itself logs nothing. "
                f"Noise: node {other} failed cleaning in the same minute ('Timeout reached "
                "while waiting for callback', its ramdisk never called back; excluded). "
                "Produced by h_job_cases.py running h_ironic_capture.py (Python 3.11, "
                "oslo.log 8.3 JSONFormatter, oslo.concurrency 7.6 processutils, ipmitool "
                "1.8.19 run for real against 127.0.0.1 where no BMC answers: '-H 127.0.0.1' "
                "reads '-H 10.44.3.17' and the password file's path reads like Ironic's temp "
                "file); the functions raising and logging are stand-ins named after Ironic's "
                "and Nova's with their message formats, their traceback frames renamed to "
                "those modules' paths; the JSON lines are oslo's, mapped to the record schema "
                "(created->ts, message->event, traceback->exception, node and instance UUIDs "
                "found in the message -> node_id/allocation_id, as the shipper extracts "
                "them); the provision-state transitions are derived from the conductor's own "
                "'moved to provision state' lines."
            ),
        },
    )


PROVISION_PLAYBOOK = """- name: Provision bare-metal node
  hosts: "{{ node_id }}"
  gather_facts: false
  environment:
    NODE_PATH: "{{ node_path }}"
  tasks:
    - name: Check the imager
      ansible.builtin.command: node {{ imager }} --version
      changed_when: false
    - name: Write OS image to the boot disk
      ansible.builtin.command: node {{ imager }} {{ image_source }} {{ image_target }}
      environment:
        IMAGER_LOG: "{{ imager_log }}"
        ALLOCATION_ID: "{{ allocation_id }}"
        NODE_ID: "{{ node_id }}"
        WORKFLOW_ID: "{{ workflow_id }}"
    - name: Set boot device to disk
      ansible.builtin.command: "true"
"""


def case_node_enospc_imager() -> None:
    """node: the imager (Node.js) on r27-n14 fills its disk: ENOSPC inside an AAP job; the
    job, the worker and the CR all say 'provider job failed'; the node's clock is fast."""
    from h_common import logback

    name = "h-node-enospc-imager"
    seed, seed_node, seed_wf, seed_job = "mx-88c04d", "r27-n14", "wf-mx-88c04d", 5521
    ok, ok_node, ok_wf, ok_job = "mx-88bf12", "r27-n11", "wf-mx-88bf12", 5519
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        root = lab.root / "node"
        imager = root / "opt" / "bm-imager" / "write-image.js"
        imager.parent.mkdir(parents=True)
        imager.write_text((MAKE / "h_imager.js").read_text())
        cache = root / "var" / "lib" / "bm-imager" / "cache"
        cache.mkdir(parents=True)
        source = cache / "rhel-9.4-x86_64.raw"
        with source.open("wb") as out:
            out.write(os.urandom(24 * 1024 * 1024))
        logs = root / "var" / "log" / "bm-imager"
        logs.mkdir(parents=True)
        disks = root / "dev" / "disk" / "by-id"
        disks.mkdir(parents=True)
        (disks / "nvme-SAMSUNG_MZQL2960HCJR-00A07_S64FNE0R802113").symlink_to("/dev/full")
        good = disks / "nvme-SAMSUNG_MZQL2960HCJR-00A07_S64FNE0R802118"
        inventory = (
            f"[baremetal]\n{ok_node} ansible_connection=local "
            f"ansible_python_interpreter=/usr/bin/python3\n{seed_node} "
            "ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        )
        worker, crs, jobs, records = Lines(), [], [], []
        imager_lines: dict[str, Path] = {}
        version = [771020]

        def work(ns: int, level: str, event: str, **fields: Any) -> None:
            worker.add(
                logback(
                    ns,
                    level,
                    event,
                    service="fleet-worker",
                    layer="workflow",
                    logger="com.example.fleet.provider.AapProvider",
                    thread="provider-poll-2",
                    offset_h=0.0,
                    **fields,
                )
            )

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
            version[0] += 9
            obj = provision_request(
                f"pr-{alloc}",
                "tenant-atlas",
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

        for alloc, node, wf, job, target in (
            (ok, ok_node, ok_wf, ok_job, good),
            (
                seed,
                seed_node,
                seed_wf,
                seed_job,
                disks / "nvme-SAMSUNG_MZQL2960HCJR-00A07_S64FNE0R802113",
            ),
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
                f"launching provider job for {alloc}",
                allocation_id=alloc,
                workflow_id=wf,
                node_id=node,
            )
            time.sleep(1.0)
            log_file = logs / f"{node}.log"
            imager_lines[node] = log_file
            rc, events = run_playbook(
                lab,
                str(job),
                "provision-node.yml",
                PROVISION_PLAYBOOK,
                inventory,
                {
                    "allocation_id": alloc,
                    "node_id": node,
                    "workflow_id": wf,
                    "imager": str(imager),
                    "image_source": str(source),
                    "image_target": str(target),
                    "imager_log": str(log_file),
                    "node_path": "/tmp/h_node/node_modules",
                },
            )
            for event in events:
                text = json.dumps(event_record(event, job)).replace(str(root), "")
                text = text.replace("/tmp/h_node/node_modules", "/opt/bm-imager/node_modules")
                records.append(json.loads(text))
            started, finished = events[0]["created"], events[-1]["created"]
            status = "successful" if rc == 0 else "failed"
            jobs.append(
                aap_job(
                    job,
                    name="provision-node",
                    template_id=9,
                    playbook="provision-node.yml",
                    status=status,
                    created_ns=created_ns,
                    started=started,
                    finished=finished,
                    elapsed=seconds_between(started, finished),
                    extra_vars={
                        "allocation_id": alloc,
                        "node_id": node,
                        "workflow_id": wf,
                        "image": "rhel-9.4-x86_64",
                    },
                )
            )
            time.sleep(1.5)
            ns = now_ns()
            if status == "successful":
                work(
                    ns,
                    "info",
                    f"provider job {job} successful, allocation {alloc} active",
                    allocation_id=alloc,
                    workflow_id=wf,
                    node_id=node,
                )
                cr("MODIFIED", alloc, node, job, "Provisioned", "node provisioned", ns, created)
            else:
                work(
                    ns,
                    "error",
                    f"provision of {alloc} failed: provider job {job} "
                    "finished with status 'failed'",
                    allocation_id=alloc,
                    workflow_id=wf,
                    node_id=node,
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
        write_events(records, folder / "aap-job-events.ndjson")
        (folder / "aap-jobs.json").write_text(jobs_page(sorted(jobs, key=lambda j: -j["id"])))
        worker.write(folder / "fleet-worker.json")
        (folder / "provisionrequests-watch.json").write_text(watch_lines(crs))
        for node, skew_ms in ((seed_node, 25_000), (ok_node, -3_000)):
            text = imager_lines[node].read_text().replace(str(root), "")
            mapped = [from_pino(x, layer="node", skew_ms=skew_ms) for x in pino_lines(text)]
            Lines.write_items(mapped, folder / f"bm-imager-{node}.log")
        failed = next(r for r in records if r["runner_event"] == "runner_on_failed")
    finally:
        lab.close()
    stderr = failed["event_data"]["res"]["stderr"].splitlines()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "node",
            "first_failure_contains": "ENOSPC: no space left on device, write",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "aap-job-events.ndjson": "ndjson",
                "aap-jobs.json": "aap",
                "fleet-worker.json": "ndjson",
                "provisionrequests-watch.json": "k8s",
                f"bm-imager-{seed_node}.log": "ndjson",
                f"bm-imager-{ok_node}.log": "ndjson",
            },
            "notes": (
                f"AAP job {seed_job} (provision-node) wrote the OS image to {seed_node}'s boot "
                "disk with the node-side imager (Node.js): the write failed with Node's "
                "'ENOSPC: no space left on device, write' (errno -28) on its first write; "
                "the imager logged it (pino, on the node, clock 25 s fast, so its error is "
                "stamped after the job's failure, the worker's wrapper and the CR update) and "
                "rethrew, so the command task failed ('non-zero return code', rc=1, "
                f"stderr ending {stderr[-1]!r}); the job failed, the Java fleet worker logged "
                "'provider job ... finished with status failed' and the ProvisionRequest went "
                "Failed (provisionJob state Failed): every wrapper names the provider. Owner: "
                "the node (its disk is full). Noise: job "
                f"{ok_job} provisioned {ok_node} for {ok} just before (excluded). Produced "
                "by h_job_cases.py: the playbook ran for real with ansible-runner 2.4.3 / "
                "ansible-core 2.19.14 (hosts on ansible_connection=local); the imager is "
                "h_imager.js (Node.js 20, pino 9) writing into a disk path that is a symlink "
                "to /dev/full (a real ENOSPC); paths under the capture directory read like "
                "the node's (/opt/bm-imager, /var/lib/bm-imager, /dev/disk/by-id); job "
                "events are ansible-runner's own mapped by h_ansible.py; the imager's pino "
                "lines mapped to the record schema with the node's clock offset added; the "
                "AAP job objects (AWX API fields), the worker's logback-style lines and the "
                "ProvisionRequest watch events are written by the generator."
            ),
        },
    )


def _k8s_time(ns: int) -> str:
    return iso(ns, digits=0)


def case_deploy_k8s_imagepullbackoff() -> None:
    """deploy: the operator's new release points the imager Job at an image tag that was
    never pushed: ErrImagePull / ImagePullBackOff, then the Job's deadline and the operator's
    'context deadline exceeded'. No cluster here: written from the components' texts."""
    name = "h-deploy-k8s-imagepullbackoff"
    ns_name = "tenant-hydra"
    seed, seed_node = "gpu-7741", "r61-n03"
    ok, ok_node = "gpu-7738", "r61-n01"
    image = "registry.dc1.internal/metal/bm-imager:2.31.0"
    old_image = "registry.dc1.internal/metal/bm-imager:2.30.4"
    folder = fresh_case(name)
    base = now_ns() - 12 * 60 * 1_000_000_000
    s = 1_000_000_000

    def at(seconds: float) -> int:
        return base + int(seconds * s)

    operator, events, audit = Lines(), Lines(), Lines()
    seed_pod, ok_pod = f"imager-{seed}-x7k2p", f"imager-{ok}-4mq9d"
    seed_uid, ok_uid = str(uuid.uuid4()), str(uuid.uuid4())

    def reconcile(t: float, level: str, event: str, alloc: str, **fields: Any) -> None:
        operator.add(
            controller_runtime(
                at(t),
                level,
                event,
                allocation_id=alloc,
                **reconcile_fields(f"pr-{alloc}", ns_name),
                **fields,
            )
        )

    def k8s_event(
        t: float,
        first: float,
        count: int,
        kind: str,
        reason: str,
        message: str,
        obj_kind: str,
        obj_name: str,
        component: str,
        alloc: str,
        host: str | None = None,
    ) -> None:
        # kubernetes-event-exporter's JSON, mapped by the shipper to the record schema.
        events.add(
            {
                "ts": iso(at(t), digits=0),
                "level": "warning" if kind == "Warning" else "info",
                "event": message,
                "service": component,
                "layer": "node" if component == "kubelet" else "projection",
                "allocation_id": alloc,
                "reason": reason,
                "type": kind,
                "count": count,
                "firstTimestamp": iso(at(first), digits=0),
                "lastTimestamp": iso(at(t), digits=0),
                "involvedObject": {
                    "kind": obj_kind,
                    "namespace": ns_name,
                    "name": obj_name,
                    "labels": {
                        "provisioning.example.com/allocation-id": alloc,
                        "job-name": f"imager-{alloc}",
                    },
                },
                "source": {"component": component, **({"host": host} if host else {})},
                "reportingComponent": component,
            }
        )

    def move(t: float, alloc: str, node: str, frm: str, to: str, **attrs: Any) -> None:
        audit.add(
            transition(
                at(t),
                "allocation",
                alloc,
                to,
                frm=frm,
                attributes=attrs or None,
                service="allocation-service",
                allocation_id=alloc,
                node_id=node,
                workflow_id=f"pr-{alloc}",
            )
        )

    # The neighbour, before the operator's upgrade: imager 2.30.4, fine.
    move(0, ok, ok_node, "requested", "provisioning")
    reconcile(0.2, "info", "Reconciling ProvisionRequest", ok)
    reconcile(
        0.3,
        "info",
        "created provisioning Job",
        ok,
        job=f"imager-{ok}",
        image=old_image,
        node_id=ok_node,
    )
    k8s_event(
        0.4,
        0.4,
        1,
        "Normal",
        "Scheduled",
        f"Successfully assigned {ns_name}/{ok_pod} to wk-07",
        "Pod",
        ok_pod,
        "default-scheduler",
        ok,
    )
    k8s_event(
        1.2,
        1.2,
        1,
        "Normal",
        "Pulled",
        f'Container image "{old_image}" already present on machine',
        "Pod",
        ok_pod,
        "kubelet",
        ok,
        "wk-07",
    )
    k8s_event(
        1.5,
        1.5,
        1,
        "Normal",
        "Started",
        "Started container imager",
        "Pod",
        ok_pod,
        "kubelet",
        ok,
        "wk-07",
    )
    k8s_event(
        96.0,
        96.0,
        1,
        "Normal",
        "Completed",
        "Job completed",
        "Job",
        f"imager-{ok}",
        "job-controller",
        ok,
    )
    reconcile(96.4, "info", "provisioning Job succeeded", ok, job=f"imager-{ok}")
    move(96.5, ok, ok_node, "provisioning", "active")
    # The operator's rolling update: 0.19.0 defaults the imager to 2.31.0.
    operator.add(
        controller_runtime(
            at(120.0),
            "info",
            "Starting EventSource",
            controller="provisionrequest",
            controllerGroup="provisioning.example.com",
            controllerKind="ProvisionRequest",
            source="kind source: *v1beta1.ProvisionRequest",
            logger="controller-runtime",
            version="0.19.0",
        )
    )
    operator.add(
        controller_runtime(
            at(120.1),
            "info",
            "Starting workers",
            controller="provisionrequest",
            controllerGroup="provisioning.example.com",
            controllerKind="ProvisionRequest",
            **{"worker count": 4},
        )
    )
    move(150.0, seed, seed_node, "requested", "provisioning")
    reconcile(150.2, "info", "Reconciling ProvisionRequest", seed)
    reconcile(
        150.3,
        "info",
        "created provisioning Job",
        seed,
        job=f"imager-{seed}",
        image=image,
        node_id=seed_node,
    )
    k8s_event(
        150.4,
        150.4,
        1,
        "Normal",
        "SuccessfulCreate",
        f"Created pod: {seed_pod}",
        "Job",
        f"imager-{seed}",
        "job-controller",
        seed,
    )
    k8s_event(
        150.5,
        150.5,
        1,
        "Normal",
        "Scheduled",
        f"Successfully assigned {ns_name}/{seed_pod} to wk-07",
        "Pod",
        seed_pod,
        "default-scheduler",
        seed,
    )
    pull_failed = (
        f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull '
        f'and unpack image "{image}": failed to resolve reference "{image}": {image}: '
        "not found"
    )
    for i, t in enumerate((151.3, 166.0, 193.5, 246.8, 334.1)):
        k8s_event(
            t,
            151.1,
            i + 1,
            "Normal",
            "Pulling",
            f'Pulling image "{image}"',
            "Pod",
            seed_pod,
            "kubelet",
            seed,
            "wk-07",
        )
        k8s_event(
            t + 0.6,
            151.9,
            i + 1,
            "Warning",
            "Failed",
            pull_failed,
            "Pod",
            seed_pod,
            "kubelet",
            seed,
            "wk-07",
        )
        k8s_event(
            t + 0.6,
            151.9,
            i + 1,
            "Warning",
            "Failed",
            "Error: ErrImagePull",
            "Pod",
            seed_pod,
            "kubelet",
            seed,
            "wk-07",
        )
        k8s_event(
            t + 1.1,
            152.4,
            i + 1,
            "Normal",
            "BackOff",
            f'Back-off pulling image "{image}"',
            "Pod",
            seed_pod,
            "kubelet",
            seed,
            "wk-07",
        )
        k8s_event(
            t + 1.1,
            152.4,
            i + 1,
            "Warning",
            "Failed",
            "Error: ImagePullBackOff",
            "Pod",
            seed_pod,
            "kubelet",
            seed,
            "wk-07",
        )
    for t in (180.3, 240.3, 300.3, 360.3, 420.3):
        reconcile(
            t,
            "info",
            "waiting for provisioning Job pod",
            seed,
            job=f"imager-{seed}",
            pod=seed_pod,
            phase="Pending",
        )
    k8s_event(
        450.6,
        450.6,
        1,
        "Warning",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
        "Job",
        f"imager-{seed}",
        "job-controller",
        seed,
    )
    k8s_event(
        450.7,
        450.7,
        1,
        "Normal",
        "SuccessfulDelete",
        f"Deleted pod: {seed_pod}",
        "Job",
        f"imager-{seed}",
        "job-controller",
        seed,
    )
    reconcile(
        450.9,
        "error",
        "Reconciler error",
        seed,
        error=(
            f"wait for provisioning job {ns_name}/imager-{seed}: pod {seed_pod} not running after "
            "5m0s: context deadline exceeded"
        ),
        stacktrace=CR_STACK,
    )
    reconcile(451.0, "info", "ProvisionRequest failed, not requeued", seed, phase="Failed")
    move(
        452.0,
        seed,
        seed_node,
        "provisioning",
        "provision_failed",
        reason="provisioning job deadline exceeded",
    )

    def pod(
        name_: str,
        alloc: str,
        node: str,
        uid: str,
        img: str,
        created: float,
        status: dict[str, Any],
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name_,
                "namespace": ns_name,
                "uid": uid,
                "creationTimestamp": _k8s_time(at(created)),
                "resourceVersion": str(991000 + int(created)),
                "labels": {
                    "job-name": f"imager-{alloc}",
                    "provisioning.example.com/allocation-id": alloc,
                    "provisioning.example.com/node-id": node,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": f"imager-{alloc}",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": "wk-07",
                "restartPolicy": "Never",
                "containers": [{"name": "imager", "image": img, "args": ["--target", node]}],
            },
            "status": status,
        }

    def cond(
        kind: str, value: str, t: float, reason: str | None = None, message: str | None = None
    ) -> dict[str, Any]:
        c = {
            "type": kind,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": _k8s_time(at(t)),
        }
        if reason:
            c["reason"] = reason
        if message:
            c["message"] = message
        return c

    seed_pod_obj = pod(
        seed_pod,
        seed,
        seed_node,
        seed_uid,
        image,
        150.4,
        {
            "phase": "Pending",
            "conditions": [
                cond("Initialized", "True", 150.5),
                cond("PodScheduled", "True", 150.5),
                cond(
                    "Ready",
                    "False",
                    150.5,
                    "ContainersNotReady",
                    "containers with unready status: [imager]",
                ),
                cond(
                    "ContainersReady",
                    "False",
                    150.5,
                    "ContainersNotReady",
                    "containers with unready status: [imager]",
                ),
            ],
            "containerStatuses": [
                {
                    "name": "imager",
                    "image": image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "waiting": {
                            "reason": "ImagePullBackOff",
                            "message": f'Back-off pulling image "{image}"',
                        }
                    },
                }
            ],
            "hostIP": "10.61.0.17",
            "qosClass": "Burstable",
            "startTime": _k8s_time(at(150.5)),
        },
    )
    ok_pod_obj = pod(
        ok_pod,
        ok,
        ok_node,
        ok_uid,
        old_image,
        0.3,
        {
            "phase": "Succeeded",
            "conditions": [
                cond("Initialized", "True", 0.4),
                cond("PodScheduled", "True", 0.4),
                cond("Ready", "False", 96.0, "PodCompleted"),
                cond("ContainersReady", "False", 96.0, "PodCompleted"),
            ],
            "containerStatuses": [
                {
                    "name": "imager",
                    "image": old_image,
                    "ready": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": _k8s_time(at(1.5)),
                            "finishedAt": _k8s_time(at(95.8)),
                        }
                    },
                }
            ],
        },
    )

    def job(alloc: str, node: str, img: str, created: float, status: dict[str, Any]) -> dict:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"imager-{alloc}",
                "namespace": ns_name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"job-{alloc}")),
                "creationTimestamp": _k8s_time(at(created)),
                "resourceVersion": str(990500 + int(created)),
                "labels": {
                    "provisioning.example.com/allocation-id": alloc,
                    "provisioning.example.com/node-id": node,
                },
            },
            "spec": {
                "activeDeadlineSeconds": 300,
                "backoffLimit": 0,
                "template": {"spec": {"containers": [{"name": "imager", "image": img}]}},
            },
            "status": status,
        }

    seed_job = job(
        seed,
        seed_node,
        image,
        150.3,
        {
            "startTime": _k8s_time(at(150.4)),
            "failed": 1,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                    "lastProbeTime": _k8s_time(at(450.6)),
                    "lastTransitionTime": _k8s_time(at(450.6)),
                }
            ],
        },
    )
    ok_job = job(
        ok,
        ok_node,
        old_image,
        0.3,
        {
            "startTime": _k8s_time(at(0.4)),
            "succeeded": 1,
            "completionTime": _k8s_time(at(96.0)),
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "lastProbeTime": _k8s_time(at(96.0)),
                    "lastTransitionTime": _k8s_time(at(96.0)),
                }
            ],
        },
    )
    seed_pr = provision_request(
        f"pr-{seed}",
        ns_name,
        allocation=seed,
        node=seed_node,
        phase="Failed",
        message=f"provisioning job imager-{seed} failed: DeadlineExceeded",
        at=_k8s_time(at(451.0)),
        created=_k8s_time(at(150.0)),
        resource_version=992311,
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, seed)),
        conditions=[
            {
                "type": "Provisioned",
                "status": "False",
                "reason": "JobFailed",
                "message": "Job was active longer than specified deadline",
                "lastTransitionTime": _k8s_time(at(451.0)),
            }
        ],
    )
    ok_pr = provision_request(
        f"pr-{ok}",
        ns_name,
        allocation=ok,
        node=ok_node,
        phase="Ready",
        message="node provisioned",
        at=_k8s_time(at(96.4)),
        created=_k8s_time(at(0.0)),
        resource_version=990622,
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, ok)),
        conditions=[
            {
                "type": "Provisioned",
                "status": "True",
                "reason": "JobSucceeded",
                "message": "provisioning job completed",
                "lastTransitionTime": _k8s_time(at(96.4)),
            }
        ],
    )
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [ok_pr, seed_pr, ok_job, seed_job, ok_pod_obj, seed_pod_obj],
    }
    (folder / "kubectl-get-all.json").write_text(json.dumps(listing, indent=4) + "\n")
    operator.write(folder / "operator.log")
    events.write(folder / "k8s-events.ndjson")
    audit.write(folder / "allocation-transitions.jsonl")
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "deploy",
            "first_failure_contains": "failed to resolve reference",
            "excluded": [f"allocation_id={ok}"],
            "sources": {
                "kubectl-get-all.json": "k8s",
                "operator.log": "ndjson",
                "k8s-events.ndjson": "ndjson",
                "allocation-transitions.jsonl": "workflow",
            },
            "notes": (
                "The provisioning operator was upgraded to 0.19.0, whose default imager image "
                f"is {image}; the release pipeline never pushed that tag. The operator "
                f"created the provisioning Job for {seed}; on wk-07 the kubelet failed to pull "
                "the image (containerd: 'rpc error: code = NotFound ... failed to resolve "
                "reference ...: not found', 'Error: ErrImagePull', then 'Back-off pulling "
                "image' / 'Error: ImagePullBackOff' with growing back-off); the pod stayed "
                "Pending; after activeDeadlineSeconds the job controller failed the Job "
                "('Job was active longer than specified deadline', reason DeadlineExceeded) "
                "and the operator logged 'Reconciler error' with 'context deadline exceeded' "
                "(reads like a network timeout) and failed the ProvisionRequest. Owner: "
                "deploy (a missing image: a prerequisite that was never published). The "
                "kubelet's events are on the node layer (a Kubernetes worker, not the "
                f"bare-metal node). Noise: {ok} was provisioned before the upgrade with "
                "2.30.4 (excluded). No cluster could be run here: the Kubernetes objects "
                "(kubectl get -o json List of ProvisionRequests, Jobs, Pods), the events (as "
                "kubernetes-event-exporter writes them, mapped by the shipper to the record "
                "schema), the operator's controller-runtime zap lines and the transitions are "
                "written by h_job_cases.py from the texts of the kubelet, containerd, the job "
                "controller and controller-runtime (facts about their messages); the "
                "timestamps are the generator's (about 12 minutes before it ran)."
            ),
        },
    )


WAIT_PLAYBOOK = """- name: Provision bare-metal node
  hosts: "{{ node_id }}"
  gather_facts: false
  tasks:
    - name: Wait for the node's PXE boot to finish
      ansible.builtin.command: test -e {{ pxe_flag }}
      register: pxe
      until: pxe.rc == 0
      retries: 6
      delay: 2
      changed_when: false
    - name: Write OS image to the boot disk
      ansible.builtin.command: sleep 40
    - name: Set boot device to disk
      ansible.builtin.command: "true"
"""

REDFISH_PLAYBOOK = """- name: Configure BMC boot order
  hosts: "{{ node_id }}"
  gather_facts: false
  tasks:
    - name: Set one-time PXE boot through Redfish
      community.general.redfish_command:
        category: Systems
        command: SetOneTimeBoot
        bootdevice: Pxe
        baseuri: "{{ bmc_address }}"
"""

AWX_REAPED = (
    "Task was marked as running but was not present in the job queue, so it has been "
    "marked as failed."
)


def case_provider_aap_lost_job() -> None:
    """provider: the execution node running AAP job 6231 went away mid-task; the controller's
    reaper failed the job ('not present in the job queue'). Retries before, a slow-disk
    warning on the node after, a neighbour's missing collection."""
    name = "h-provider-aap-lost-job"
    seed, seed_node, seed_wf, seed_job = "bm9-30d1", "r40-n06", "wf-bm9-30d1", 6231
    bad, bad_node, bad_wf, bad_job = "bm9-30c8", "r40-n02", "wf-bm9-30c8", 6229
    folder = fresh_case(name)
    lab = Lab(name)
    try:
        inventory = (
            f"[baremetal]\n{bad_node} ansible_connection=local "
            f"ansible_python_interpreter=/usr/bin/python3\n{seed_node} "
            "ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        )
        worker, agent, records, jobs = Lines(), Lines(), [], []

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

        def node_log(ns: int, level: str, event: str, **fields: Any) -> None:
            fields.setdefault("caller", "agent/disk.go:88")
            agent.add(
                zerolog(
                    ns,
                    level,
                    event,
                    service="bmagent",
                    layer="node",
                    skew_s=-3.0,
                    node_id=seed_node,
                    **fields,
                )
            )

        # The neighbour's job: the Redfish module's collection is not in the EE.
        created_ns = now_ns()
        work(
            created_ns,
            "info",
            "provider job launched",
            allocation_id=bad,
            node_id=bad_node,
            workflow_id=bad_wf,
            provider_job=f"aap:{bad_job}",
            template="bmc-boot-order",
        )
        time.sleep(1.0)
        _rc, events = run_playbook(
            lab,
            str(bad_job),
            "bmc-boot-order.yml",
            REDFISH_PLAYBOOK,
            inventory,
            {"node_id": bad_node, "bmc_address": "10.40.1.12", "allocation_id": bad},
        )
        kept = [e for e in events if e.get("stdout", "").strip() or e["event"] != "verbose"]
        for event in kept:
            records.append(event_record(event, bad_job))
        jobs.append(
            aap_job(
                bad_job,
                name="bmc-boot-order",
                template_id=22,
                playbook="bmc-boot-order.yml",
                status="failed",
                created_ns=created_ns,
                started=events[0]["created"],
                finished=events[-1]["created"],
                elapsed=seconds_between(events[0]["created"], events[-1]["created"]),
                extra_vars={"allocation_id": bad, "node_id": bad_node, "workflow_id": bad_wf},
            )
        )
        ns = now_ns()
        work(
            ns,
            "error",
            "provision failed",
            allocation_id=bad,
            node_id=bad_node,
            workflow_id=bad_wf,
            provider_job=f"aap:{bad_job}",
            error=f"provider job aap:{bad_job} (bmc-boot-order) finished with status failed",
        )
        time.sleep(1.0)
        # The seed's job: PXE wait retries (the node boots slowly), then the image write,
        # during which the execution node (aap-exec-03) is lost.
        created_ns = now_ns()
        work(
            created_ns,
            "info",
            "provider job launched",
            allocation_id=seed,
            node_id=seed_node,
            workflow_id=seed_wf,
            provider_job=f"aap:{seed_job}",
            template="provision-node",
        )
        flag = lab.root / "pxe-done"

        def node_boots() -> None:
            def later() -> None:
                time.sleep(5.0)
                flag.touch()
                node_log(
                    now_ns(),
                    "info",
                    "PXE boot finished, agent started",
                    allocation_id=seed,
                    workflow_id=seed_wf,
                    caller="agent/main.go:61",
                )

            import threading

            threading.Thread(target=later, daemon=True).start()

        events = run_playbook_until(
            lab,
            str(seed_job),
            "provision-node.yml",
            WAIT_PLAYBOOK,
            inventory,
            {"node_id": seed_node, "pxe_flag": str(flag), "allocation_id": seed},
            stop_when="Write OS image",
            on_start=node_boots,
        )
        lost = now_ns()
        node_log(
            lost - 1_000_000_000,
            "warn",
            "disk write throughput below threshold",
            allocation_id=seed,
            workflow_id=seed_wf,
            device="/dev/nvme0n1",
            throughput_mb_s=38.4,
            threshold_mb_s=50,
        )
        for event in events:
            records.append(event_record(event, seed_job))
        # The controller notices the job is gone at its next reaper pass.
        time.sleep(8.0)
        finished = iso(now_ns())
        jobs.append(
            aap_job(
                seed_job,
                name="provision-node",
                template_id=9,
                playbook="provision-node.yml",
                status="error",
                created_ns=created_ns,
                started=events[0]["created"],
                finished=finished,
                elapsed=seconds_between(events[0]["created"], finished),
                extra_vars={"allocation_id": seed, "node_id": seed_node, "workflow_id": seed_wf},
                explanation=AWX_REAPED,
                execution_node="aap-exec-03",
            )
        )
        time.sleep(1.5)
        ns = now_ns()
        work(
            ns,
            "error",
            "provision failed",
            allocation_id=seed,
            node_id=seed_node,
            workflow_id=seed_wf,
            provider_job=f"aap:{seed_job}",
            error=f"provider job aap:{seed_job} (provision-node) finished with status error: "
            f"{AWX_REAPED}",
        )
        time.sleep(2.0)
        node_log(
            now_ns(),
            "warn",
            "no image written after 20s, waiting for the provisioner",
            allocation_id=seed,
            workflow_id=seed_wf,
            caller="agent/task.go:140",
        )
        write_events(records, folder / "aap-job-events.ndjson")
        (folder / "aap-jobs.json").write_text(jobs_page(sorted(jobs, key=lambda j: -j["id"])))
        worker.write(folder / "provision-orchestrator.ndjson")
        agent.write(folder / "bmagent-r40-n06.ndjson")
        retries = sum(1 for r in records if r["runner_event"] == "runner_retry")
    finally:
        lab.close()
    write_truth(
        folder,
        {
            "seed": f"allocation_id={seed}",
            "owner_layer": "provider",
            "first_failure_contains": "not present in the job queue",
            "excluded": [f"allocation_id={bad}"],
            "sources": {
                "aap-job-events.ndjson": "ndjson",
                "aap-jobs.json": "aap",
                "provision-orchestrator.ndjson": "ndjson",
                "bmagent-r40-n06.ndjson": "ndjson",
            },
            "notes": (
                f"AAP job {seed_job} (provision-node) for {seed} ran on execution node "
                f"aap-exec-03. Its PXE wait retried {retries} times ('FAILED - RETRYING', "
                "warnings of a task that then succeeded), then the image-write task started "
                "and the execution node went away: the job's events stop mid-task. At its "
                "next pass the controller's reaper failed the job: status 'error', "
                f"job_explanation '{AWX_REAPED}' (AWX's text). The orchestrator failed the "
                "provision quoting it. The node itself was fine; its agent logged a "
                "disk-throughput warning during the write and, after the job was lost, a "
                "warning that no image arrived (node-looking symptoms). Owner: the provider "
                "(the AAP job itself). Agent clock 3 s slow. Noise: job "
                f"{bad_job} for {bad} failed earlier because community.general is missing "
                "from the execution environment (\"couldn't resolve module/action "
                "'community.general.redfish_command'\": deploy, excluded). Produced by "
                "h_job_cases.py: both playbooks ran for real with ansible-runner 2.4.3 / "
                "ansible-core 2.19.14 (hosts on ansible_connection=local; the PXE wait polls a "
                "file the generator creates after 5 s; the 'execution node loss' is "
                "ansible-runner's process group killed with SIGKILL two seconds into the "
                "image-write task, so its events end there); job events are ansible-runner's "
                "own mapped by h_ansible.py; the AAP job objects (AWX API fields, the "
                "reaper's job_explanation), the orchestrator's and the agent's zerolog-style "
                "lines are written by the generator around those runs."
            ),
        },
    )
