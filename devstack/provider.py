"""The provider simulator: an AAP-style job API and an EDA-style one, with VMs.

AAP (automation controller) style::

    POST /api/v2/job_templates/{provision|deprovision}/launch/  {"extra_vars": {...}}
         -> 201 {"job": N, "id": N, ...}
    GET  /api/v2/jobs/N/          a job object (id, type "job", status, created, started,
                                  finished, elapsed, failed, job_explanation, extra_vars)
    POST /api/v2/jobs/N/cancel/   -> 202; the job ends "canceled"
    GET  /api/v2/jobs/            {"count", "next", "previous", "results"}

EDA (event-driven ansible) style, one instance per activation, ids shared::

    POST /api/eda/v1/activations/                 {"name", "extra_var": {...}} -> 201 {"id": N}
    GET  /api/eda/v1/activation-instances/N/      (status, activation_id, created_at,
                                                   started_at, ended_at, status_message)
    POST /api/eda/v1/activations/N/disable/       -> 202; the instance ends "stopped"
    GET  /api/eda/v1/activation-instances/        a list page

Phase timings differ by provider (:data:`TIMINGS`): AAP queues and runs longer than EDA.
A provision job creates a VM when it starts (``building``) and makes it ``running`` when it
succeeds; a deprovision job destroys the allocation's VMs (``deleted``). VM changes are
logged as lifecycle records (``entity_kind="vm"``) with the job's identifiers.

Fault ``provider-vm-lock`` (a flag file): a VM left ``building`` by a canceled job stays
locked by that job, and a deprovision job that meets it fails ("VM ... is locked").
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from fastapi import Body, FastAPI, HTTPException
from fastapi.responses import JSONResponse

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from devstack.config import StackConfig, configure_logging

__all__ = ["TIMINGS", "Simulator", "create_app", "serve"]

#: (seconds queued before running, seconds running) per (provider, template).
TIMINGS: Final = {
    ("aap", "provision"): (0.2, 1.5),
    ("aap", "deprovision"): (0.2, 0.5),
    ("eda", "provision"): (0.15, 0.6),
    ("eda", "deprovision"): (0.1, 0.3),
}
_TICK_S: Final = 0.05
_FAULT_VM_LOCK: Final = "provider-vm-lock"

log = agent_logging.get_logger("devstack.provider")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="microseconds")[:-6] + "Z"


@dataclass
class _Job:
    id: int
    provider: str
    template: str
    extra_vars: dict[str, Any]
    created: float
    status: str
    started: float | None = None
    finished: float | None = None
    explanation: str = ""

    @property
    def ref(self) -> str:
        return f"{self.provider}:{self.id}"

    @property
    def ids(self) -> dict[str, str]:
        return agent_logging.ids_from_payload(self.extra_vars)

    def as_json(self) -> dict[str, Any]:
        variables = orjson.dumps(self.extra_vars).decode()
        if self.provider == "aap":
            elapsed = (self.finished or time.time()) - self.started if self.started else 0.0
            return {
                "id": self.id,
                "type": "job",
                "url": f"/api/v2/jobs/{self.id}/",
                "name": f"{self.template}-baremetal",
                "status": self.status,
                "created": _iso(self.created),
                "started": _iso(self.started),
                "finished": _iso(self.finished),
                "elapsed": round(elapsed, 3),
                "failed": self.status in ("failed", "error"),
                "job_explanation": self.explanation,
                "launch_type": "manual",
                "job_template": 12 if self.template == "provision" else 13,
                "extra_vars": variables,
            }
        return {
            "id": self.id,
            "name": f"{self.template}-{self.extra_vars.get('allocation_id', self.id)}",
            "status": self.status,
            "activation_id": self.id,
            "created_at": _iso(self.created),
            "started_at": _iso(self.started),
            "ended_at": _iso(self.finished),
            "status_message": self.explanation,
            "extra_var": variables,
        }


@dataclass
class _VM:
    name: str
    allocation_id: str
    job: _Job
    state: str = "building"
    ids: dict[str, str] = field(default_factory=dict)


class Simulator:
    """Jobs and VMs, advanced by a background thread."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._jobs: dict[int, _Job] = {}
        self._vms: dict[str, _VM] = {}
        self._numbers = itertools.count(101)
        self._vm_numbers = itertools.count(1)

    def launch(self, provider: str, template: str, extra_vars: dict[str, Any]) -> _Job:
        with self._lock:
            job = _Job(next(self._numbers), provider, template, extra_vars, time.time(), "pending")
            self._jobs[job.id] = job
        with agent_logging.bound(**job.ids):
            log.info("job created", job=job.ref, template=template, status=job.status)
        return job

    def get(self, provider: str, number: int) -> _Job:
        with self._lock:
            job = self._jobs.get(number)
        if job is None or job.provider != provider:
            raise HTTPException(404, "Not found.")
        return job

    def listing(self, provider: str) -> dict[str, Any]:
        with self._lock:
            results = [j.as_json() for j in self._jobs.values() if j.provider == provider]
        return {"count": len(results), "next": None, "previous": None, "results": results}

    def cancel(self, job: _Job) -> bool:
        with self._lock:
            if job.finished is not None:
                return False
            job.status = "canceled" if job.provider == "aap" else "stopped"
            job.finished = time.time()
            job.explanation = "Job was canceled by request"
        with agent_logging.bound(**job.ids):
            log.info("job status changed", job=job.ref, status=job.status)
        return True

    def _vm_state(self, vm: _VM, state: str) -> None:
        previous, vm.state = vm.state, state
        with agent_logging.bound(**vm.ids):
            log.info(
                "vm state changed",
                entity_kind="vm",
                entity_id=vm.name,
                state_from=previous,
                state_to=state,
                job=vm.job.ref,
            )

    def _start(self, job: _Job, now: float) -> None:
        job.started = now
        job.status = "running"
        if job.template == "provision":
            vm = _VM(
                f"vm-{next(self._vm_numbers)}",
                str(job.extra_vars.get("allocation_id")),
                job,
                ids=job.ids,
            )
            self._vms[vm.name] = vm
            with agent_logging.bound(**vm.ids):
                log.info(
                    "vm state changed",
                    entity_kind="vm",
                    entity_id=vm.name,
                    state_to="building",
                    job=job.ref,
                )

    def _finish(self, job: _Job, now: float) -> None:
        job.finished = now
        allocation = job.extra_vars.get("allocation_id")
        mine = [vm for vm in self._vms.values() if vm.allocation_id == allocation]
        if job.template == "provision":
            for vm in mine:
                if vm.job is job:
                    self._vm_state(vm, "running")
            job.status = "successful" if job.provider == "aap" else "completed"
            return
        locked = [
            vm
            for vm in mine
            if vm.state == "building"
            and vm.job.status in ("canceled", "stopped")
            and self.config.fault(_FAULT_VM_LOCK)
        ]
        if locked:
            vm = locked[0]
            job.status = "failed"
            job.explanation = (
                f"VM {vm.name} is locked by canceled job {vm.job.ref}; destroy refused"
            )
            return
        for vm in mine:
            if vm.state != "deleted":
                self._vm_state(vm, "deleted")
        job.status = "successful" if job.provider == "aap" else "completed"

    def tick(self) -> None:
        """Advance every unfinished job whose phase is over."""
        now = time.time()
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.finished is None]
        for job in jobs:
            queued_s, running_s = TIMINGS[(job.provider, job.template)]
            with self._lock:
                if job.finished is not None:
                    continue
                before = job.status
                if job.started is None and now - job.created >= queued_s:
                    self._start(job, now)
                elif job.started is not None and now - job.started >= running_s:
                    self._finish(job, now)
                elif job.provider == "eda" and job.status == "pending":
                    job.status = "starting"
                changed = job.status != before
            if changed:
                with agent_logging.bound(**job.ids):
                    fields = {"job": job.ref, "status": job.status}
                    if job.explanation:
                        fields["explanation"] = job.explanation
                    level = log.error if job.status == "failed" else log.info
                    level("job status changed", **fields)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(_TICK_S):
            try:
                self.tick()
            except Exception:
                log.exception("provider tick failed")


def create_app(simulator: Simulator) -> FastAPI:
    """The HTTP API over ``simulator``."""
    app = FastAPI(title="devstack provider simulator")
    # The jobs' own records are the provider's evidence; per-request access records are
    # polling noise (the worker and the projector poll every 200 ms).
    app.add_middleware(AgentLoggingMiddleware, access_log=False)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/v2/job_templates/{template}/launch/", status_code=201)
    def aap_launch(template: str, body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        if template not in ("provision", "deprovision"):
            raise HTTPException(404, "Not found.")
        job = simulator.launch("aap", template, dict(body.get("extra_vars") or {}))
        return {"job": job.id, **job.as_json()}

    @app.get("/api/v2/jobs/")
    def aap_jobs() -> dict[str, Any]:
        return simulator.listing("aap")

    @app.get("/api/v2/jobs/{number}/")
    def aap_job(number: int) -> dict[str, Any]:
        return simulator.get("aap", number).as_json()

    @app.post("/api/v2/jobs/{number}/cancel/", status_code=202)
    def aap_cancel(number: int) -> JSONResponse:
        if not simulator.cancel(simulator.get("aap", number)):
            return JSONResponse({"error": "Job is not running."}, status_code=405)
        return JSONResponse({}, status_code=202)

    @app.post("/api/eda/v1/activations/", status_code=201)
    def eda_launch(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        name = str(body.get("name", ""))
        template = "deprovision" if name.startswith("deprovision") else "provision"
        job = simulator.launch("eda", template, dict(body.get("extra_var") or {}))
        return job.as_json()

    @app.get("/api/eda/v1/activation-instances/")
    def eda_instances() -> dict[str, Any]:
        return simulator.listing("eda")

    @app.get("/api/eda/v1/activation-instances/{number}/")
    def eda_instance(number: int) -> dict[str, Any]:
        return simulator.get("eda", number).as_json()

    @app.post("/api/eda/v1/activations/{number}/disable/", status_code=202)
    def eda_disable(number: int) -> JSONResponse:
        simulator.cancel(simulator.get("eda", number))
        return JSONResponse({}, status_code=202)

    return app


def serve(config: StackConfig) -> None:
    """The ``provider`` role: the simulator and its API until SIGTERM."""
    import uvicorn

    configure_logging(config, service="provider-sim", layer="workflow", ready="provider")
    simulator = Simulator(config)
    stop = threading.Event()
    threading.Thread(
        target=agent_logging.carry_context(simulator.run), args=(stop,), daemon=True
    ).start()
    try:
        uvicorn.run(
            create_app(simulator),
            host="127.0.0.1",
            port=config.provider_port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=1,
        )
    finally:
        stop.set()
