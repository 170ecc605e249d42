"""The provisioning API: allocations for tenants, tasks for node agents (FastAPI).

Behind the ingress (nginx terminates TLS and forwards ``X-Correlation-ID``);
``AgentLoggingMiddleware`` binds the identifiers of every request and logs one access record.
Every statement carries ``agent_logging.sql_comment()`` (``database.sql``).

- ``POST /v1/allocations`` ``{"node_id", "provider"}`` (tenant): a new allocation in state
  ``requested``, its audit row and an ``allocation.requested`` outbox row, in one transaction.
- ``GET /v1/allocations/{id}``: its state.
- ``POST /v1/allocations/{id}/release``, ``DELETE /v1/allocations/{id}``: outbox rows the
  worker acts on.
- ``POST /v1/tasks/claim`` ``{"node_id", "node_instance_id"}`` (node): long-polls (5 s) for
  the node's next queued task. A task still held by another instance of the same node is
  marked ``lost`` first: that instance was reimaged mid-task (:class:`TaskLostError`).
- ``POST /v1/tasks/{id}/result`` ``{"node_instance_id", "status", "error"}`` (node).

Authentication: ``Authorization: Bearer TOKEN`` with a tenant or node token from
``secrets/api-tokens`` (``ROLE TOKEN`` lines), re-read when the file changes, so rotating a
token is writing the file.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Final

import orjson
from fastapi import Depends, FastAPI, Header, HTTPException, Request, Response
from pydantic import BaseModel

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from devstack.config import StackConfig, configure_logging
from devstack.database import Pool, sql
from devstack.errors import TaskLostError

__all__ = ["create_app", "serve"]

_CLAIM_WAIT_S: Final = 5.0
_CLAIM_POLL_S: Final = 0.25
_PROVIDERS: Final = frozenset({"aap", "eda"})

log = agent_logging.get_logger("devstack.api")


class AllocationRequest(BaseModel):
    """The body of ``POST /v1/allocations``."""

    node_id: str
    provider: str = "aap"


class ClaimRequest(BaseModel):
    """The body of ``POST /v1/tasks/claim``."""

    node_id: str
    node_instance_id: str


class TaskResult(BaseModel):
    """The body of ``POST /v1/tasks/{id}/result``."""

    node_instance_id: str
    status: str
    error: dict[str, Any] | None = None


class _Tokens:
    """The accepted tokens, re-read when ``secrets/api-tokens`` changes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._roles: dict[str, str] = {}

    def role(self, token: str) -> str | None:
        stat = self._path.stat()
        with self._lock:
            if (stat.st_mtime_ns, stat.st_size) != self._stamp:
                roles = {}
                for line in self._path.read_text("utf-8").splitlines():
                    role, _, value = line.partition(" ")
                    if value:
                        roles[value.strip()] = role
                self._roles, self._stamp = roles, (stat.st_mtime_ns, stat.st_size)
            roles = self._roles
        # Compared in constant time, as any bearer-token check should be.
        found = [role for known, role in roles.items() if hmac.compare_digest(known, token)]
        return found[0] if found else None


def _caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> str:
    """The caller's role (``tenant`` or ``node``) from its bearer token; 401 otherwise."""
    scheme, _, token = (authorization or "").partition(" ")
    tokens: _Tokens = request.app.state.tokens
    role = tokens.role(token.strip()) if scheme.lower() == "bearer" else None
    if role is None:
        log.warning("bearer token rejected", reason="unknown token" if token else "missing")
        raise HTTPException(401, "unknown or missing bearer token")
    return role


# Module level, so FastAPI can resolve it from the (postponed) annotations of the routes.
Caller = Annotated[str, Depends(_caller)]


def _event(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def create_app(config: StackConfig) -> FastAPI:
    """The API application for ``config``'s database and tokens."""
    app = FastAPI(title="devstack provisioning API")
    # Node agents long-poll for tasks: successful polls are not worth an access record each.
    app.add_middleware(AgentLoggingMiddleware, quiet_paths=("/healthz", "/v1/tasks/claim"))
    pool = Pool(config.dsn, "provisioning-api", size=12)
    app.state.tokens = _Tokens(config.tokens_file)

    def require(role: str, wanted: str) -> None:
        if role != wanted:
            raise HTTPException(403, f"a {wanted} token is required")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/allocations", status_code=202)
    def allocate(body: AllocationRequest, role: Caller) -> dict[str, Any]:
        require(role, "tenant")
        if body.provider not in _PROVIDERS:
            raise HTTPException(422, f"provider must be one of {sorted(_PROVIDERS)}")
        allocation_id = f"a-{secrets.token_hex(4)}"
        with agent_logging.bound(allocation_id=allocation_id, node_id=body.node_id):
            correlation_id = agent_logging.current_ids().get("correlation_id")
            with pool.transaction() as cur:
                cur.execute(sql("SELECT occupancy FROM nodes WHERE node_id = %s"), (body.node_id,))
                row = cur.fetchone()
                if row is None:
                    raise HTTPException(404, f"no node {body.node_id}")
                if row[0] != "free":
                    raise HTTPException(409, f"node {body.node_id} is {row[0]}")
                cur.execute(
                    sql(
                        "INSERT INTO allocations (id, node_id, provider, state, correlation_id) "
                        "VALUES (%s, %s, %s, 'requested', %s)"
                    ),
                    (allocation_id, body.node_id, body.provider, correlation_id),
                )
                cur.execute(
                    sql(
                        "INSERT INTO allocation_audit (entity_id, to_state, attributes, "
                        "allocation_id, node_id, correlation_id) "
                        "VALUES (%s, 'requested', %s, %s, %s, %s)"
                    ),
                    (
                        allocation_id,
                        orjson.dumps({"provider": body.provider}).decode(),
                        allocation_id,
                        body.node_id,
                        correlation_id,
                    ),
                )
                payload = {**agent_logging.payload(), "provider": body.provider}
                cur.execute(
                    sql(
                        "INSERT INTO outbox (kind, payload) VALUES ('allocation.requested', %s) "
                        "RETURNING id"
                    ),
                    (orjson.dumps(payload).decode(),),
                )
                outbox = cur.fetchone()
            log.info(
                "allocation state changed",
                entity_kind="allocation",
                entity_id=allocation_id,
                state_to="requested",
                provider=body.provider,
            )
            if outbox is not None:
                log.info(
                    "outbox row written",
                    entity_kind="outbox",
                    entity_id=str(outbox[0]),
                    state_to="pending",
                    outbox_kind="allocation.requested",
                )
        return {"allocation_id": allocation_id, "state": "requested"}

    @app.get("/v1/allocations/{allocation_id}")
    def status(allocation_id: str, role: Caller) -> dict[str, Any]:
        with pool.transaction() as cur:
            cur.execute(
                sql(
                    "SELECT state, occupancy, node_id, provider, job FROM allocations WHERE id = %s"
                ),
                (allocation_id,),
            )
            row = cur.fetchone()
        if row is None:
            raise HTTPException(404, f"no allocation {allocation_id}")
        keys = ("state", "occupancy", "node_id", "provider", "job")
        return {"allocation_id": allocation_id, **dict(zip(keys, row, strict=True))}

    def enqueue(allocation_id: str, kind: str, wanted: tuple[str, ...]) -> dict[str, Any]:
        with agent_logging.bound(allocation_id=allocation_id), pool.transaction() as cur:
            cur.execute(
                sql("SELECT state, node_id FROM allocations WHERE id = %s FOR UPDATE"),
                (allocation_id,),
            )
            row = cur.fetchone()
            if row is None:
                raise HTTPException(404, f"no allocation {allocation_id}")
            if row[0] not in wanted:
                raise HTTPException(409, f"allocation {allocation_id} is {row[0]}")
            if kind == "allocation.delete_requested":
                cur.execute(
                    sql(
                        "UPDATE allocations SET delete_requested = true, "
                        "delete_requested_at = clock_timestamp() WHERE id = %s"
                    ),
                    (allocation_id,),
                )
            payload = {**agent_logging.payload(), "node_id": row[1]}
            cur.execute(
                sql("INSERT INTO outbox (kind, payload) VALUES (%s, %s) RETURNING id"),
                (kind, orjson.dumps(payload).decode()),
            )
            outbox = cur.fetchone()
            log.info(
                "outbox row written",
                entity_kind="outbox",
                entity_id=str(outbox[0]) if outbox else None,
                state_to="pending",
                outbox_kind=kind,
            )
        return {"allocation_id": allocation_id, "accepted": kind}

    @app.post("/v1/allocations/{allocation_id}/release", status_code=202)
    def release(allocation_id: str, role: Caller) -> dict[str, Any]:
        require(role, "tenant")
        return enqueue(allocation_id, "allocation.release_requested", ("active",))

    @app.delete("/v1/allocations/{allocation_id}", status_code=202)
    def delete(allocation_id: str, role: Caller) -> dict[str, Any]:
        require(role, "tenant")
        return enqueue(
            allocation_id,
            "allocation.delete_requested",
            ("requested", "provisioning", "active", "provision_failed"),
        )

    def abandon_lost(node_id: str, instance_id: str) -> None:
        with pool.transaction() as cur:
            cur.execute(
                sql(
                    "UPDATE tasks SET state = 'lost' WHERE node_id = %s AND state = 'claimed' "
                    "AND claimed_by <> %s "
                    "RETURNING id, allocation_id, workflow_id, correlation_id, claimed_by"
                ),
                (node_id, instance_id),
            )
            lost = cur.fetchall()
        for task_id, allocation_id, workflow_id, correlation_id, previous in lost:
            error = TaskLostError(
                f"task {task_id} was held by node instance {previous}, but node {node_id} came "
                f"back as {instance_id}: the node was reimaged while the task ran"
            )
            with agent_logging.bound(
                **_event(
                    allocation_id=allocation_id,
                    workflow_id=workflow_id,
                    correlation_id=correlation_id,
                )
            ):
                log.error("task lost", exc_info=error, task_id=task_id, previous_instance=previous)

    @app.post("/v1/tasks/claim")
    def claim(body: ClaimRequest, role: Caller) -> Response:
        require(role, "node")
        abandon_lost(body.node_id, body.node_instance_id)
        deadline = time.monotonic() + _CLAIM_WAIT_S
        while True:
            with pool.transaction() as cur:
                cur.execute(
                    sql(
                        "UPDATE tasks SET state = 'claimed', claimed_by = %s WHERE id = ("
                        "SELECT id FROM tasks WHERE node_id = %s AND state = 'queued' "
                        "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                        "RETURNING id, kind, allocation_id, workflow_id, correlation_id"
                    ),
                    (body.node_instance_id, body.node_id),
                )
                row = cur.fetchone()
            if row is not None:
                task_id, kind, allocation_id, workflow_id, correlation_id = row
                task = {
                    "id": task_id,
                    "kind": kind,
                    "allocation_id": allocation_id,
                    "workflow_id": workflow_id,
                    "correlation_id": correlation_id,
                }
                with agent_logging.bound(allocation_id=allocation_id, workflow_id=workflow_id):
                    log.info("task claimed", task_id=task_id, task_kind=kind)
                return Response(orjson.dumps(task), media_type="application/json")
            if time.monotonic() >= deadline:
                return Response(status_code=204)
            time.sleep(_CLAIM_POLL_S)

    @app.post("/v1/tasks/{task_id}/result")
    def result(task_id: int, body: TaskResult, role: Caller) -> dict[str, Any]:
        require(role, "node")
        if body.status not in ("succeeded", "failed"):
            raise HTTPException(422, "status must be succeeded or failed")
        with pool.transaction() as cur:
            cur.execute(
                sql(
                    "UPDATE tasks SET state = %s, error = %s WHERE id = %s AND state = 'claimed' "
                    "AND claimed_by = %s RETURNING kind"
                ),
                (
                    body.status,
                    orjson.dumps(body.error).decode() if body.error else None,
                    task_id,
                    body.node_instance_id,
                ),
            )
            row = cur.fetchone()
        if row is None:
            log.warning("task result refused: not claimed by this instance", task_id=task_id)
            raise HTTPException(409, f"task {task_id} is not claimed by {body.node_instance_id}")
        fields = {"task_id": task_id, "task_kind": row[0], "task_status": body.status}
        if body.status == "failed":
            log.warning("task reported failed", **fields)
        else:
            log.info("task reported", **fields)
        return {"task_id": task_id, "state": body.status}

    return app


def serve(config: StackConfig) -> None:
    """Run the API on 127.0.0.1 until SIGTERM."""
    import uvicorn

    configure_logging(config, service="provisioning-api", layer="api", ready="api")
    uvicorn.run(
        create_app(config),
        host="127.0.0.1",
        port=config.api_port,
        log_config=None,
        access_log=False,
        # Long polls (5 s) must not hold a stop up.
        timeout_graceful_shutdown=1,
    )
