"""The status projector: a CR-like ``ProvisionRequest`` per allocation, like an operator's.

Every 200 ms it reads the allocations that have a provision job, asks the provider for the
job's state and, when the projected state changed, writes the custom resource's
``status.provisionJob.{id, provider, state, message, lastTransitionTime}`` (a new
``resourceVersion`` each time). Resources live in ``k8s/provisionrequests/NAME.json``; every
write is also appended to ``k8s/watch.ndjson`` as a watch event
(``{"type": "MODIFIED", "object": ...}``), which is what ``kubectl get -w
--output-watch-events -o json`` would have recorded. :func:`snapshot` is ``kubectl get -o
json``.

An allocation whose deletion was requested gets ``metadata.deletionTimestamp`` (the time the
tenant asked, as the API server stamps it on ``kubectl delete``) once; its status is not
written after that (a resource being deleted only runs its finalizer, which is the
worker's deprovisioning).

Fault ``projector-stalled`` (a flag file): the projector's watch of the provider stalls and it
stops writing status, silently, as a wedged informer does: the CR keeps saying what it said.
"""

from __future__ import annotations

import datetime as dt
import signal
import threading
import uuid
from pathlib import Path
from typing import Any, Final

import orjson

import agent_logging
from devstack.config import StackConfig, configure_logging
from devstack.database import connect, sql
from devstack.jobs import JobsClient

__all__ = ["PROJECTED_STATES", "Projector", "run", "snapshot"]

_TICK_S: Final = 0.2
_FAULT_STALLED: Final = "projector-stalled"
_GROUP: Final = "provisioning.example.com"

#: What the CR shows for each provider job state (AAP, then EDA statuses).
PROJECTED_STATES: Final = {
    "new": "Pending",
    "pending": "Pending",
    "waiting": "Pending",
    "starting": "Pending",
    "running": "Running",
    "successful": "Succeeded",
    "completed": "Succeeded",
    "failed": "Failed",
    "error": "Failed",
    "canceled": "Canceled",
    "stopped": "Canceled",
}
_FINAL: Final = frozenset({"Succeeded", "Failed", "Canceled"})

log = agent_logging.get_logger("devstack.projector")


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _now_iso() -> str:
    return _iso(dt.datetime.now(dt.UTC))


def snapshot(config: StackConfig) -> dict[str, Any]:
    """Every ProvisionRequest now, as ``kubectl get provisionrequests -o json`` prints them."""
    directory = config.k8s_dir / "provisionrequests"
    items = [orjson.loads(path.read_bytes()) for path in sorted(directory.glob("*.json"))]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


class Projector:
    """Projects provider job state into ProvisionRequest resources."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.conn = connect(config.dsn, "status-projector")
        self.jobs = JobsClient(config.provider_url)
        self.directory = config.k8s_dir / "provisionrequests"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._version = 1000
        self._objects: dict[str, dict[str, Any]] = {}
        for path in self.directory.glob("*.json"):
            self._objects[path.stem] = orjson.loads(path.read_bytes())

    def _write(self, name: str, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._objects[name] = obj
        path: Path = self.directory / f"{name}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(obj))
        temporary.replace(path)
        with self.config.watch_log.open("ab") as watch:
            watch.write(orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n")

    def _job_state(self, ref: str) -> tuple[str, str]:
        provider, _, number = ref.partition(":")
        job = self.jobs.job(ref)
        status = str(job.get("status"))
        detail = job.get("job_explanation") or job.get("status_message") or ""
        message = f"{provider.upper()} job {number} {status}" + (f": {detail}" if detail else "")
        return PROJECTED_STATES.get(status, "Unknown"), message

    def tick(self) -> None:
        """Project every allocation with a provision job once."""
        if self.config.fault(_FAULT_STALLED):
            return
        with self.conn.cursor() as cur:
            cur.execute(
                sql(
                    "SELECT id, node_id, provider, provision_workflow_id, provision_job, "
                    "delete_requested_at, created_at FROM allocations "
                    "WHERE provision_job IS NOT NULL AND state <> 'archived'"
                )
            )
            rows = cur.fetchall()
        for allocation, node, provider, workflow, job, deleted_at, created in rows:
            name = f"prov-{allocation}"
            current = self._objects.get(name)
            ids = {"allocation_id": allocation, "node_id": node, "workflow_id": workflow}
            with agent_logging.bound(**{k: v for k, v in ids.items() if v}):
                if current is not None and current["metadata"].get("deletionTimestamp"):
                    continue
                if current is not None and deleted_at is not None:
                    obj = orjson.loads(orjson.dumps(current))
                    obj["metadata"]["deletionTimestamp"] = _iso(deleted_at)
                    obj["metadata"]["finalizers"] = [f"{_GROUP}/deprovision"]
                    self._write(name, obj)
                    log.info("custom resource marked for deletion", resource=name)
                    continue
                shown = (current or {}).get("status", {}).get("provisionJob", {})
                if shown.get("state") in _FINAL:
                    continue
                state, message = self._job_state(job)
                if shown.get("state") == state and shown.get("message") == message:
                    continue
                obj = current or self._new(name, allocation, node, provider, workflow, created)
                obj["status"] = {
                    "provisionJob": {
                        "id": job.partition(":")[2],
                        "provider": provider,
                        "state": state,
                        "message": message,
                        "lastTransitionTime": _now_iso(),
                    }
                }
                self._write(name, obj)
                log.info("custom resource status written", resource=name, state=state, job=job)

    def _new(
        self,
        name: str,
        allocation: str,
        node: str,
        provider: str,
        workflow: str | None,
        created: dt.datetime,
    ) -> dict[str, Any]:
        labels = {
            f"{_GROUP}/allocation-id": allocation,
            f"{_GROUP}/node-id": node,
        }
        if workflow:
            labels[f"{_GROUP}/workflow-id"] = workflow
        return {
            "apiVersion": f"{_GROUP}/v1",
            "kind": "ProvisionRequest",
            "metadata": {
                "name": name,
                "namespace": "tenants",
                "uid": str(uuid.uuid4()),
                "generation": 1,
                "creationTimestamp": created.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "labels": labels,
            },
            "spec": {"nodeId": node, "provider": provider},
        }

    def run(self, stop: threading.Event) -> None:
        log.info("projector started")
        while not stop.wait(_TICK_S):
            try:
                self.tick()
            except Exception:
                log.exception("projection failed")


def run(config: StackConfig) -> None:
    """The ``projector`` role: project until SIGTERM."""
    configure_logging(config, service="status-projector", layer="workflow", ready="projector")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Projector(config).run(stop)
    agent_logging.shutdown(timeout_s=5.0)
