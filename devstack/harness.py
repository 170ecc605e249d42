"""What a scenario drives the stack with: a tenant, a view of the database, waits, cleanup.

A :class:`Run` is one scenario on a running stack. The tenant talks to the API through the
ingress like any client (TLS verified against the local CA, the tenant token). The harness
itself reads state straight from PostgreSQL on a connection that does not log its statements
(``log_statement = none``: the harness is not part of the system under test) and reads the
processes' ledgers to see what they logged. Faults register how to undo themselves; after the
evidence is collected the run restores them, newest first, and archives its allocations so
the next scenario starts on free, idle nodes.
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, LiteralString

import httpx
import orjson
import psycopg

from devstack.database import connect
from devstack.supervisor import Stack

__all__ = ["Run", "ScenarioError"]

_POLL_S: Final = 0.05


class ScenarioError(RuntimeError):
    """A scenario could not drive the stack to the state it needs (a timeout, a refusal)."""


class Run:
    """One scenario run on ``stack``."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.config = stack.config
        context = ssl.create_default_context(cafile=str(self.config.ca_dir / "ca.pem"))
        self.tenant = httpx.Client(base_url=self.config.ingress_url, verify=context, timeout=15.0)
        self.db = connect(self.config.dsn, "devstack-harness")
        self.db.execute("SET log_statement = 'none'")
        self.allocations: list[str] = []
        self.fault_at_ns: int | None = None
        self.settled_s = 0.0
        self._restores: list[Callable[[], None]] = []

    # -- the tenant --------------------------------------------------------------------------

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.tenant_token}"}

    def allocate(self, node_id: str, provider: str) -> str:
        """Ask for an allocation of ``node_id`` through the ingress; its id."""
        response = self.tenant.post(
            "/v1/allocations", json={"node_id": node_id, "provider": provider}, headers=self._auth()
        )
        if response.status_code != 202:
            raise ScenarioError(f"allocation refused: {response.status_code} {response.text}")
        allocation_id = str(response.json()["allocation_id"])
        self.allocations.append(allocation_id)
        return allocation_id

    def release(self, allocation_id: str) -> None:
        response = self.tenant.post(
            f"/v1/allocations/{allocation_id}/release", headers=self._auth()
        )
        if response.status_code != 202:
            raise ScenarioError(f"release refused: {response.status_code} {response.text}")

    def delete(self, allocation_id: str) -> None:
        response = self.tenant.delete(f"/v1/allocations/{allocation_id}", headers=self._auth())
        if response.status_code != 202:
            raise ScenarioError(f"delete refused: {response.status_code} {response.text}")

    # -- looking -----------------------------------------------------------------------------

    def query(self, statement: LiteralString, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of a harness query (not logged by PostgreSQL)."""
        return self.db.execute(statement, params).fetchall()

    def state(self, allocation_id: str) -> str:
        rows = self.query("SELECT state FROM allocations WHERE id = %s", allocation_id)
        return str(rows[0][0]) if rows else "missing"

    def task_state(self, allocation_id: str) -> str:
        rows = self.query(
            "SELECT state FROM tasks WHERE allocation_id = %s ORDER BY id DESC LIMIT 1",
            allocation_id,
        )
        return str(rows[0][0]) if rows else "none"

    def job(self, allocation_id: str) -> str | None:
        rows = self.query("SELECT provision_job FROM allocations WHERE id = %s", allocation_id)
        return str(rows[0][0]) if rows and rows[0][0] else None

    def resource_state(self, allocation_id: str) -> str | None:
        """The projected ``status.provisionJob.state`` of the allocation's CR."""
        path = self.config.k8s_dir / "provisionrequests" / f"prov-{allocation_id}.json"
        try:
            obj = orjson.loads(path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None
        state = obj.get("status", {}).get("provisionJob", {}).get("state")
        return str(state) if state else None

    def logged(self, event: str, **fields: str) -> bool:
        """Whether some process logged a record ``event`` with these field values."""
        needle = orjson.dumps(event).decode()
        for path in self.config.ledger_dir.glob("*.jsonl"):
            for raw in path.read_bytes().splitlines():
                if needle.encode() not in raw:
                    continue
                with contextlib.suppress(orjson.JSONDecodeError):
                    record = orjson.loads(raw)
                    if record.get("event") == event and all(
                        record.get(k) == v for k, v in fields.items()
                    ):
                        return True
        return False

    def wait(self, condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
        """Poll ``condition`` until it holds.

        Raises:
            ScenarioError: it did not hold within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() >= deadline:
                raise ScenarioError(f"timed out after {timeout_s} s waiting for {what}")
            time.sleep(_POLL_S)

    def wait_state(self, allocation_id: str, *states: str, timeout_s: float = 20.0) -> None:
        self.wait(
            lambda: self.state(allocation_id) in states,
            f"allocation {allocation_id} to be {' or '.join(states)} "
            f"(it is {self.state(allocation_id)})",
            timeout_s,
        )

    def free_node(self) -> str:
        """The free, idle node used longest ago (so a node's stragglers never meet a run)."""
        rows = self.query(
            "SELECT n.node_id FROM nodes n LEFT JOIN allocations a ON a.node_id = n.node_id "
            "WHERE n.occupancy = 'free' AND NOT EXISTS (SELECT 1 FROM tasks t "
            "WHERE t.node_id = n.node_id AND t.state IN ('queued', 'claimed')) "
            "GROUP BY n.node_id ORDER BY max(a.created_at) NULLS FIRST, n.node_id LIMIT 1"
        )
        if not rows:
            raise ScenarioError("no free node")
        return str(rows[0][0])

    def node_state(self, node_id: str) -> Path:
        return self.config.node_state(node_id)

    # -- faults ------------------------------------------------------------------------------

    def injected(self) -> None:
        """Mark the moment the fault took effect (the benchmark measures from here)."""
        self.fault_at_ns = time.time_ns()

    def settle(self, seconds: float) -> None:
        """Let a bad state last ``seconds`` (past a finding's threshold); counted apart, so
        the benchmark can tell waiting on purpose from detecting."""
        time.sleep(seconds)
        self.settled_s += seconds

    def on_restore(self, undo: Callable[[], None]) -> None:
        """Register how to undo a fault (run after the evidence is collected)."""
        self._restores.append(undo)

    def restore(self) -> None:
        """Undo the faults, newest first, then archive this run's allocations."""
        while self._restores:
            self._restores.pop()()
        # Let a node that was retrying a report deliver it now that the fault is gone.
        with contextlib.suppress(ScenarioError):
            self.wait(
                lambda: (
                    not self.query(
                        "SELECT 1 FROM tasks WHERE allocation_id = ANY(%s) AND state = 'claimed'",
                        self.allocations,
                    )
                ),
                "claimed tasks to be reported",
                timeout_s=3.0,
            )
        # Scenarios run one at a time: whatever the run left in flight (its own allocations,
        # or one a timed-out request created anyway) is archived and its node freed.
        with self.db.transaction():
            self.query(
                "UPDATE tasks SET state = 'canceled' WHERE state IN ('queued', 'claimed') "
                "RETURNING id"
            )
            self.query(
                "UPDATE allocations SET state = 'archived' WHERE state <> 'archived' RETURNING id"
            )
            self.query(
                "UPDATE nodes SET occupancy = 'free', allocation_id = NULL RETURNING node_id"
            )

    def close(self) -> None:
        self.tenant.close()
        with contextlib.suppress(psycopg.Error):
            self.db.close()
