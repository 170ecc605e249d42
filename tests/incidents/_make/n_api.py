"""The provisioning API and workflow worker the ``n-*`` incidents run (stdlib + psycopg).

Deliberately NOT built on ``agent_logging``: like most services in a fleet it writes its own
JSON lines (keys of the record schema, no ``error.owner_layer``), takes the correlation id
from nginx's ``X-Request-ID`` header, and appends sqlcommenter comments by hand when told to.
How it reports a failure is a per-case choice (``error_style``):

- ``error``: ``"error": {"type", "message"}`` plus a ``stack`` (python-json-logger style);
- ``exception``: uvicorn's ``Exception in ASGI application`` with the traceback only in
  ``exception`` (structlog's ``format_exc_info``);
- ``chain``: a wrapper error (``ProvisioningError``) with the causes in ``error.chain``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import psycopg
from n_lab import JsonLog, Request, chain_of, error_of, sqlc, stack_of, tagged


class ProvisioningError(Exception):
    """The API's wrapper for failures it cannot handle."""


ProvisioningError.__module__ = "provisioning_api.errors"  # as the real service names it


class ProvisioningApi:
    """Routes of the provisioning API; ``__call__`` is an :class:`n_lab.HttpServer` handler."""

    def __init__(
        self,
        log: JsonLog,
        dsn: str,
        *,
        tokens: dict[str, set[str]] | None = None,
        sqlcommenter: bool = True,
        error_style: str = "error",
        lock_timeout: str | None = None,
        db_down_status: int = 500,
        application_name: str = "provisioning-api",
        outbound: Any = None,
    ) -> None:
        self.log = log
        self.dsn = dsn
        self.tokens = tokens
        self.sqlcommenter = sqlcommenter
        self.error_style = error_style
        self.lock_timeout = lock_timeout
        self.db_down_status = db_down_status
        self.application_name = application_name
        self.outbound = outbound  # callable(ids) -> None, may raise (a call to another service)

    # -- plumbing

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.dsn, application_name=self.application_name, connect_timeout=3)
        if self.lock_timeout:
            conn.execute(f"SET lock_timeout = '{self.lock_timeout}'")
        return conn

    def _sql(self, text: str, ids: dict[str, str | None]) -> str:
        return text + (sqlc(**ids) if self.sqlcommenter else "")

    def _failed(
        self, exc: Exception, ids: dict[str, Any], status: int
    ) -> tuple[int, dict[str, Any]]:
        if self.error_style == "exception":
            self.log("error", "Exception in ASGI application", exception=stack_of(exc), **ids)
        elif self.error_style == "chain":
            try:
                raise ProvisioningError("internal server error") from exc
            except ProvisioningError as wrapper:
                error = error_of(wrapper)
                error["chain"] = chain_of(wrapper)
                self.log("error", "request failed", error=error, **ids)
        else:
            self.log(
                "error",
                "unhandled error while handling request",
                error=error_of(exc),
                stack=stack_of(exc),
                **ids,
            )
        detail = "Internal Server Error" if status == 500 else "Service Unavailable"
        return status, {"detail": detail}

    def __call__(self, request: Request) -> tuple[int, dict[str, Any] | None]:
        started = time.monotonic()
        ids: dict[str, Any] = {"correlation_id": request.headers.get("x-request-id")}
        status, body = self._route(request, ids)
        duration_s = round(time.monotonic() - started, 6)
        if duration_s > 1.0:
            self.log(
                "warning",
                f"slow request: {request.method} {request.path} took {duration_s:.2f}s",
                **ids,
            )
        if request.path != "/healthz":
            self.log(
                "info" if status < 500 else "error",
                "request",
                method=request.method,
                path=request.path,
                status=status,
                duration_s=duration_s,
                **ids,
            )
        return status, body

    def _auth(
        self, request: Request, scope: str, ids: dict[str, Any]
    ) -> tuple[int, dict[str, Any]] | None:
        if self.tokens is None:
            return None
        header = request.headers.get("authorization", "")
        token = header.removeprefix("Bearer ")
        if token not in self.tokens:
            self.log(
                "warning",
                "authentication failed: token signature verification failed",
                reason="invalid_token",
                token_kid=token.split(".")[0] if token else None,
                **ids,
            )
            return 401, {"detail": "invalid token"}
        if scope not in self.tokens[token]:
            self.log(
                "warning",
                f"forbidden: token lacks scope {scope}",
                subject=token.split(".")[0],
                required_scope=scope,
                **ids,
            )
            return 403, {"error": "forbidden", "detail": f"missing scope {scope}"}
        return None

    # -- routes

    def _route(self, request: Request, ids: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        if request.path == "/healthz":
            return 200, {"status": "ok"}
        if m := re.fullmatch(r"/v1/nodes/([^/]+)/tasks/claim", request.path):
            ids["node_id"] = m[1]
            if denied := self._auth(request, "tasks:claim", ids):
                return denied
            # The agent names the task it was woken for, when it knows it.
            ids["allocation_id"] = (request.body or {}).get("allocation_id")
            return self._claim(m[1], ids)
        if m := re.fullmatch(r"/v1/tasks/(\d+)/result", request.path):
            if denied := self._auth(request, "tasks:report", ids):
                return denied
            return self._result(int(m[1]), request.body or {}, ids)
        if m := re.fullmatch(r"/v1/allocations/([^/]+)/release", request.path):
            ids["allocation_id"] = m[1]
            if denied := self._auth(request, "allocations:release", ids):
                return denied
            return self._release(m[1], ids)
        if m := re.fullmatch(r"/v1/allocations/([^/]+)", request.path):
            ids["allocation_id"] = m[1]
            return self._get(m[1], ids)
        return 404, {"detail": "Not Found"}

    def _claim(self, node: str, ids: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        try:
            with self._connect() as conn:
                row = conn.execute(
                    self._sql(
                        "UPDATE tasks SET state = 'claimed', claimed_at = now() WHERE id = "
                        "(SELECT id FROM tasks WHERE node_id = %s AND state = 'queued' "
                        "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                        "RETURNING id, allocation_id, workflow_id, kind",
                        {"correlation_id": ids["correlation_id"], "node_id": node},
                    ),
                    (node,),
                ).fetchone()
                if self.outbound is not None and row is not None:
                    self.outbound({**ids, "allocation_id": row[1], "workflow_id": row[2]})
        except psycopg.OperationalError as exc:
            return self._failed(exc, ids, self.db_down_status)
        except Exception as exc:
            return self._failed(exc, ids, 500)
        if row is None:
            return 404, {"detail": "no pending task"}
        ids.update(allocation_id=row[1], workflow_id=row[2])
        self.log("info", "task claimed", task_id=row[0], kind=row[3], **ids)
        return 200, {
            "task_id": row[0],
            "allocation_id": row[1],
            "workflow_id": row[2],
            "kind": row[3],
        }

    def _result(
        self, task: int, body: dict[str, Any], ids: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | None]:
        ids["allocation_id"] = body.get("allocation_id")
        ids["node_id"] = body.get("node_id")
        state = "succeeded" if body.get("ok") else "failed"
        try:
            with self._connect() as conn:
                row = conn.execute(
                    self._sql(
                        "UPDATE tasks SET state = %s, result = %s WHERE id = %s "
                        "RETURNING allocation_id, workflow_id",
                        {
                            "allocation_id": ids["allocation_id"],
                            "correlation_id": ids["correlation_id"],
                        },
                    ),
                    (state, json.dumps(body), task),
                ).fetchone()
                if row is not None:
                    ids["workflow_id"] = row[1]
                    conn.execute(
                        self._sql(
                            "UPDATE allocations SET state = %s, updated_at = now() WHERE id = %s",
                            {"allocation_id": row[0], "correlation_id": ids["correlation_id"]},
                        ),
                        ("active" if state == "succeeded" else "provision_failed", row[0]),
                    )
        except psycopg.OperationalError as exc:
            return self._failed(exc, ids, self.db_down_status)
        except Exception as exc:
            return self._failed(exc, ids, 500)
        if row is None:
            return 404, {"detail": "unknown task"}
        self.log("info", "task result recorded", task_id=task, result=state, **ids)
        return 200, {"task_id": task, "state": state}

    def _release(self, alloc: str, ids: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        try:
            with self._connect() as conn:
                conn.execute(
                    self._sql(
                        "UPDATE allocations SET state = 'releasing' WHERE id = %s",
                        {"allocation_id": alloc, "correlation_id": ids["correlation_id"]},
                    ),
                    (alloc,),
                )
        except psycopg.OperationalError as exc:
            return self._failed(exc, ids, self.db_down_status)
        self.log("info", "release accepted", **ids)
        return 202, {"allocation_id": alloc, "state": "releasing"}

    def _get(self, alloc: str, ids: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        try:
            with self._connect() as conn:
                row = conn.execute(
                    self._sql(
                        "SELECT state, node_id, workflow_id FROM allocations WHERE id = %s",
                        {"allocation_id": alloc, "correlation_id": ids["correlation_id"]},
                    ),
                    (alloc,),
                ).fetchone()
        except psycopg.OperationalError as exc:
            return self._failed(exc, ids, self.db_down_status)
        if row is None:
            return 404, {"detail": "allocation not found"}
        return 200, {"id": alloc, "state": row[0], "node_id": row[1], "workflow_id": row[2]}


class Workflow:
    """The workflow worker's database side: allocations and tasks (psycopg, its own DSN)."""

    def __init__(self, dsn: str, application_name: str = "workflow-worker") -> None:
        self.dsn = dsn
        self.application_name = application_name

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, application_name=self.application_name, autocommit=True)

    def create(
        self, alloc: str, node: str, wf: str, *, tenant: str = "tenant-blue", comment: bool = True
    ) -> int:
        """The allocation row and its provision task; returns the task id."""
        tags = {"allocation_id": alloc, "workflow_id": wf} if comment else {}
        with self.connect() as conn:
            conn.execute(
                tagged("INSERT INTO nodes (node_id) VALUES (%s) ON CONFLICT DO NOTHING", **tags),
                (node,),
            )
            conn.execute(
                tagged(
                    "INSERT INTO allocations (id, node_id, tenant, state, workflow_id) "
                    "VALUES (%s, %s, %s, 'provisioning', %s)",
                    **tags,
                ),
                (alloc, node, tenant, wf),
            )
            conn.execute(
                tagged(
                    "UPDATE nodes SET state = 'allocated', allocation_id = %s WHERE node_id = %s",
                    **tags,
                ),
                (alloc, node),
            )
            row = conn.execute(
                tagged(
                    "INSERT INTO tasks (allocation_id, workflow_id, node_id, kind) "
                    "VALUES (%s, %s, %s, 'provision') RETURNING id",
                    **tags,
                ),
                (alloc, wf, node),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def task_state(self, task: int) -> str:
        with self.connect() as conn:
            row = conn.execute("SELECT state FROM tasks WHERE id = %s", (task,)).fetchone()
        return str(row[0]) if row else "missing"

    def wait_task(self, task: int, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        state = self.task_state(task)
        while state in {"queued", "claimed"} and time.monotonic() < deadline:
            time.sleep(0.5)
            state = self.task_state(task)
        return state
