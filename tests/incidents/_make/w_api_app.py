"""The provisioning API the ``w-*`` incidents run behind a real nginx (FastAPI, not agent_logging).

A small FastAPI service with the bugs and deployment faults of the incidents left in it, as a
service in a fleet would have them. It writes its own JSON lines (keys of the record schema,
never ``error.owner_layer``) to ``W_API_LOG``, taking the correlation id from the
``X-Correlation-ID`` header nginx sets (its ``$request_id`` when the client sent none).

Environment:

- ``W_API_LOG``: the JSON-lines log file.
- ``W_API_STATE``: JSON ``{allocation_id: {"state", "node_id", "workflow_id", "lease_end"}}``.
- ``W_FLAVORS``: the flavor catalog (one flavor name a line), read at the first provision.
- ``W_LOG_STYLE``: ``error`` (``"error": {"type", "message"}`` and a ``stack``, UTC) or
  ``flask`` (Flask/gunicorn-style ``Exception on PATH [METHOD]`` with the traceback in
  ``exception``, upper-case levels, local time at +01:00).

Run: ``uvicorn w_api_app:app --port N`` from this folder.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI(title="provisioning-api")

_LOG = Path(os.environ.get("W_API_LOG", "api.ndjson"))
_STATE: dict[str, dict[str, Any]] = json.loads(os.environ.get("W_API_STATE", "{}"))
_STYLE = os.environ.get("W_LOG_STYLE", "error")
_CET = timezone(timedelta(hours=1))

# Hardware profile per flavor. bm.gpu.h100 was added to the catalog file in the last release;
# nobody added its profile here (the bug of w-api-keyerror).
FLAVOR_SPECS = {
    "bm.std.2x": {"cpus": 64, "memory_gib": 512, "disks": 2},
    "bm.std.4x": {"cpus": 128, "memory_gib": 1024, "disks": 4},
    "bm.gpu.a100": {"cpus": 96, "memory_gib": 1024, "disks": 2, "gpus": 8},
}
_catalog: list[str] | None = None


def _now() -> str:
    if _STYLE == "flask":
        return datetime.now(_CET).isoformat(timespec="milliseconds")
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _write(level: str, event: str, **fields: Any) -> None:
    record = {
        "ts": _now(),
        "level": level.upper() if _STYLE == "flask" else level,
        "event": event,
        "service": "provisioning-api",
        "layer": "api",
        "env": "prod",
    }
    record.update({key: value for key, value in fields.items() if value is not None})
    with _LOG.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _ids(request: Request, allocation_id: str | None) -> dict[str, Any]:
    known = _STATE.get(allocation_id or "", {})
    return {
        "correlation_id": request.headers.get("x-correlation-id"),
        "allocation_id": allocation_id,
        "node_id": known.get("node_id"),
    }


def _catalog_flavors() -> list[str]:
    global _catalog
    if _catalog is None:
        path = os.environ.get("W_FLAVORS", "/etc/provisioning-api/flavors.conf")
        with open(path, encoding="utf-8") as catalog:
            _catalog = [line.strip() for line in catalog if line.strip()]
    return _catalog


@app.middleware("http")
async def access_log(request: Request, call_next: Any) -> Any:
    started = time.monotonic()
    allocation_id = request.url.path.split("/")[3] if request.url.path.count("/") >= 3 else None
    try:
        response = await call_next(request)
    except Exception as exc:
        ids = _ids(request, allocation_id)
        if _STYLE == "flask":
            _write(
                "error",
                f"Exception on {request.url.path} [{request.method}]",
                logger="provisioning_api.app",
                exception=traceback.format_exc(),
                **ids,
            )
        else:
            _write(
                "error",
                "unhandled exception",
                logger="provisioning_api.app",
                error={"type": type(exc).__name__, "message": str(exc)},
                stack=traceback.format_exc(),
                **ids,
            )
        response = JSONResponse({"detail": "Internal Server Error"}, status_code=500)
    _write(
        "info" if response.status_code < 500 else "error",
        f"{request.method} {request.url.path} {response.status_code}",
        logger="provisioning_api.access",
        method=request.method,
        path=request.url.path,
        status=response.status_code,
        duration_s=round(time.monotonic() - started, 6),
        **_ids(request, allocation_id),
    )
    return response


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/allocations/{allocation_id}/provision", status_code=202)
async def provision(allocation_id: str, request: Request) -> Any:
    body = await request.json()
    flavor = body["flavor"]
    if flavor not in _catalog_flavors():
        return JSONResponse({"detail": f"unknown flavor {flavor!r}"}, status_code=422)
    spec = FLAVOR_SPECS[flavor]
    allocation = _STATE.setdefault(allocation_id, {})
    allocation.update(state="requested", flavor=flavor, spec=spec)
    _write(
        "info",
        "provision requested",
        logger="provisioning_api.allocations",
        workflow_id=allocation.get("workflow_id"),
        flavor=flavor,
        **_ids(request, allocation_id),
    )
    return {"allocation_id": allocation_id, "workflow_id": allocation.get("workflow_id")}


@app.get("/v1/allocations/{allocation_id}")
async def allocation(allocation_id: str) -> Any:
    known = _STATE.get(allocation_id)
    if known is None:
        return JSONResponse({"detail": "allocation not found"}, status_code=404)
    return {"allocation_id": allocation_id, "state": known.get("state")}


@app.get("/v1/allocations/{allocation_id}/lease")
async def lease(allocation_id: str) -> Any:
    known = _STATE[allocation_id]
    lease_end = known.get("lease_end")
    if isinstance(lease_end, str):
        lease_end = datetime.fromisoformat(lease_end)
    remaining = lease_end - datetime.now(UTC)
    return {"allocation_id": allocation_id, "remaining_s": remaining.total_seconds()}


@app.get("/v1/allocations/{allocation_id}/console")
async def console(allocation_id: str) -> Any:
    return JSONResponse({"detail": "console not enabled for this allocation"}, status_code=404)


@app.delete("/v1/allocations/{allocation_id}", status_code=202)
async def release(allocation_id: str, request: Request) -> Any:
    known = _STATE.setdefault(allocation_id, {})
    known["state"] = "releasing"
    _write(
        "info",
        "release requested",
        logger="provisioning_api.allocations",
        workflow_id=known.get("release_workflow_id"),
        **_ids(request, allocation_id),
    )
    return {"allocation_id": allocation_id}
