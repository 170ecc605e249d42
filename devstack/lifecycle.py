"""Allocation lifecycles as rows: the state machine's one write path, and its records.

Every transition is an optimistic ``UPDATE allocations ... WHERE state = FROM [AND version =
V]``, an ``allocation_audit`` row (what the correlator's ``workflow`` source reads) and, once
committed, a record with ``entity_kind``, ``entity_id``, ``state_from``, ``state_to``,
``occupancy`` and ``provider`` (what the correlator reads from Loki).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

import agent_logging
from devstack.database import sql
from devstack.errors import StaleTransitionError

__all__ = ["Allocation", "log_transition", "transition"]

log = agent_logging.get_logger("devstack.worker")


@dataclass
class Allocation:
    """An allocation row as the workflow reads it."""

    id: str
    node_id: str
    provider: str
    state: str
    version: int
    release_version: int | None
    correlation_id: str | None
    workflow_id: str | None
    provision_job: str | None
    job: str | None
    task_id: int | None

    COLUMNS = (
        "id, node_id, provider, state, version, release_version, correlation_id, workflow_id, "
        "provision_job, job, task_id"
    )

    @property
    def ids(self) -> dict[str, str]:
        """Its identifiers, to bind while working on it."""
        found = {
            "allocation_id": self.id,
            "node_id": self.node_id,
            "correlation_id": self.correlation_id,
            "workflow_id": self.workflow_id,
        }
        return {key: value for key, value in found.items() if value}


def transition(
    cur: psycopg.Cursor[Any],
    row: Allocation,
    to: str,
    *,
    occupancy: str | None = None,
    version: int | None = None,
    workflow_id: str | None = None,
) -> dict[str, Any]:
    """Move ``row`` to ``to`` inside the caller's transaction, with its audit row.

    Args:
        cur: a cursor in the transaction.
        row: the allocation as the workflow step read it.
        to: the new state.
        occupancy: the node's occupancy from now on, when it changes.
        version: also require this row version (optimistic concurrency).
        workflow_id: the workflow run making the change (default: the row's).

    Returns:
        The record to log once the transaction commits (:func:`log_transition`).

    Raises:
        StaleTransitionError: the row is no longer in ``row.state`` (or ``version``).
    """
    workflow = workflow_id or row.workflow_id
    guard = " AND version = %s" if version is not None else ""
    params: list[Any] = [to, occupancy, workflow, row.id, row.state]
    if version is not None:
        params.append(version)
    cur.execute(
        sql(
            "UPDATE allocations SET state = %s, version = version + 1, "  # noqa: S608 - guard is fixed text
            "occupancy = coalesce(%s, occupancy), workflow_id = %s "
            "WHERE id = %s AND state = %s" + guard + " RETURNING version"
        ),
        params,
    )
    if cur.fetchone() is None:
        raise StaleTransitionError(
            f"allocation {row.id}: {row.state} → {to} refused: the row changed since this "
            "workflow step read it"
        )
    attributes = {"provider": row.provider, **({"occupancy": occupancy} if occupancy else {})}
    cur.execute(
        sql(
            "INSERT INTO allocation_audit (entity_id, from_state, to_state, attributes, "
            "allocation_id, workflow_id, node_id, correlation_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        ),
        (
            row.id,
            row.state,
            to,
            orjson.dumps(attributes).decode(),
            row.id,
            workflow,
            row.node_id,
            row.correlation_id,
        ),
    )
    record = {
        "entity_kind": "allocation",
        "entity_id": row.id,
        "state_from": row.state,
        "state_to": to,
        "provider": row.provider,
        "workflow_id": workflow,
    }
    if occupancy:
        record["occupancy"] = occupancy
    return record


def log_transition(record: dict[str, Any]) -> None:
    """Log a committed transition (a failure state at warning: the worker logged why)."""
    failed = str(record["state_to"]).endswith("_failed")
    level = log.warning if failed else log.info
    level("allocation state changed", **record)
