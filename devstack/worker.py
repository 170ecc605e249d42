"""The workflow worker: allocation lifecycles, driven from the outbox and provider jobs.

Lifecycle (``allocations.state``; every change is an ``allocation_audit`` row and a record
with ``entity_kind``/``entity_id``/``state_from``/``state_to``/``occupancy``/``provider``)::

    requested → provisioning → active → releasing → released
                     │                      └──→ release_failed   (occupancy=cleanup)
                     ├──→ provision_failed (occupancy=cleanup)
                     └──→ deleting → deleted
                                 └──→ deprovision_failed (occupancy=cleanup)

Every 200 ms the worker publishes pending outbox rows (each in its own transaction with
``lock_timeout = 500ms``: a row whose work cannot get its locks stays pending and is retried
with backoff) and advances each allocation in flight: launch the provider job, follow it,
queue the node task (``deploy`` beside the provision job, ``wipe`` after the deprovision
job), follow both, transition. Transitions are optimistic (``UPDATE ... WHERE state = FROM
[AND version = V]``); the release completes only on the row version it started from, so a
concurrent writer makes it ``release_failed`` (:class:`StaleTransitionError`) rather than
release a node nobody can prove was wiped for this allocation.
"""

from __future__ import annotations

import secrets
import signal
import threading
import time
from typing import Any, Final

import httpx
import psycopg
from psycopg import errors as pg_errors

import agent_logging
from devstack.config import StackConfig, configure_logging
from devstack.database import connect, sql
from devstack.errors import ProviderJobError, StaleTransitionError, TaskFailedError
from devstack.jobs import JobsClient, classify_status
from devstack.lifecycle import Allocation, log_transition, transition

__all__ = ["Worker", "run"]

_TICK_S: Final = 0.2

log = agent_logging.get_logger("devstack.worker")


class Worker:
    """One worker loop over one database connection."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.conn = connect(config.dsn, "workflow-worker")
        self.jobs = JobsClient(config.provider_url)
        self._outbox_workflow: dict[int, str] = {}
        self._retry_at: dict[int, tuple[float, int]] = {}

    def _move(self, row: Allocation, to: str, **options: Any) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            record = transition(cur, row, to, **options)
            occupancy = options.get("occupancy")
            if occupancy in ("free", "cleanup"):
                cur.execute(
                    sql(
                        "UPDATE nodes SET occupancy = %s, allocation_id = "
                        "CASE WHEN %s = 'free' THEN NULL ELSE allocation_id END "
                        "WHERE node_id = %s"
                    ),
                    (occupancy, occupancy, row.node_id),
                )
        log_transition(record)

    # -- the outbox --------------------------------------------------------------------------

    def publish_outbox(self) -> None:
        """Publish pending outbox rows, oldest first; a locked one waits with backoff."""
        with self.conn.cursor() as cur:
            cur.execute(
                sql("SELECT id, kind, payload FROM outbox WHERE state = 'pending' ORDER BY id")
            )
            pending = cur.fetchall()
        now = time.monotonic()
        for outbox_id, kind, payload in pending:
            retry = self._retry_at.get(outbox_id)
            if retry is not None and now < retry[0]:
                continue
            workflow = self._outbox_workflow.setdefault(outbox_id, f"wf-{secrets.token_hex(4)}")
            ids = agent_logging.ids_from_payload(payload)
            with agent_logging.bound(**{**ids, "workflow_id": workflow}):
                try:
                    records = self._publish(outbox_id, kind, payload, workflow)
                except pg_errors.LockNotAvailable:
                    attempts = (retry[1] if retry else 0) + 1
                    self._retry_at[outbox_id] = (now + min(2.0, 0.25 * 2**attempts), attempts)
                    log.exception(
                        "outbox row not published",
                        outbox_id=outbox_id,
                        outbox_kind=kind,
                        attempts=attempts,
                    )
                    continue
                self._retry_at.pop(outbox_id, None)
                self._outbox_workflow.pop(outbox_id, None)
                for record in records:
                    log_transition(record)
                log.info(
                    "outbox row published",
                    entity_kind="outbox",
                    entity_id=str(outbox_id),
                    state_from="pending",
                    state_to="published",
                    outbox_kind=kind,
                )

    def _publish(
        self, outbox_id: int, kind: str, payload: dict[str, Any], workflow: str
    ) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("SET LOCAL lock_timeout = '500ms'")
            cur.execute(
                sql("SELECT 1 FROM outbox WHERE id = %s AND state = 'pending' FOR UPDATE"),
                (outbox_id,),
            )
            if cur.fetchone() is None:
                return records
            row = self._row(cur, str(payload.get("allocation_id")))
            if row is not None:
                records.extend(self._handle(cur, kind, row, workflow))
            cur.execute(
                sql(
                    "UPDATE outbox SET state = 'published', published_at = clock_timestamp() "
                    "WHERE id = %s"
                ),
                (outbox_id,),
            )
        return records

    def _handle(
        self, cur: psycopg.Cursor[Any], kind: str, row: Allocation, workflow: str
    ) -> list[dict[str, Any]]:
        if kind == "allocation.requested" and row.state == "requested":
            # The node is taken for the allocation first.
            cur.execute(
                sql(
                    "UPDATE nodes SET occupancy = 'allocated', allocation_id = %s "
                    "WHERE node_id = %s"
                ),
                (row.id, row.node_id),
            )
            record = transition(cur, row, "provisioning", workflow_id=workflow)
            cur.execute(
                sql("UPDATE allocations SET provision_workflow_id = %s WHERE id = %s"),
                (workflow, row.id),
            )
            return [record]
        if kind == "allocation.release_requested" and row.state == "active":
            # The node is marked as being released first: the row the maintenance
            # transaction holds in the db-lock-timeout scenario.
            cur.execute(
                sql("UPDATE nodes SET occupancy = 'releasing' WHERE node_id = %s"),
                (row.node_id,),
            )
            record = transition(cur, row, "releasing", workflow_id=workflow)
            cur.execute(
                sql(
                    "UPDATE allocations SET job = NULL, task_id = NULL, release_version = version "
                    "WHERE id = %s"
                ),
                (row.id,),
            )
            return [record]
        if kind == "allocation.delete_requested" and row.state in (
            "requested",
            "provisioning",
            "active",
            "provision_failed",
        ):
            record = transition(cur, row, "deleting", workflow_id=workflow)
            cur.execute(
                sql("UPDATE allocations SET job = NULL, task_id = NULL WHERE id = %s"), (row.id,)
            )
            return [record]
        log.info("outbox row needs no action", outbox_kind=kind, state=row.state)
        return []

    # -- allocations in flight ---------------------------------------------------------------

    def _row(self, cur: psycopg.Cursor[Any], allocation_id: str) -> Allocation | None:
        cur.execute(
            sql(f"SELECT {Allocation.COLUMNS} FROM allocations WHERE id = %s"),  # noqa: S608 - fixed columns
            (allocation_id,),
        )
        found = cur.fetchone()
        return Allocation(*found) if found else None

    def advance_all(self) -> None:
        """One step for every allocation provisioning, releasing or deleting."""
        with self.conn.cursor() as cur:
            cur.execute(
                sql(
                    f"SELECT {Allocation.COLUMNS} FROM allocations "  # noqa: S608 - fixed columns
                    "WHERE state IN ('provisioning', 'releasing', 'deleting') ORDER BY created_at"
                )
            )
            rows = [Allocation(*found) for found in cur.fetchall()]
        for row in rows:
            with agent_logging.bound(**row.ids):
                try:
                    self.advance(row)
                except StaleTransitionError:
                    log.warning("allocation changed under the worker; skipped", state=row.state)
                except (httpx.HTTPError, psycopg.Error):
                    log.exception("workflow step failed; retrying", state=row.state)

    def _set(self, row: Allocation, column: str, value: Any) -> None:
        if column not in ("job", "provision_job", "task_id"):
            raise ValueError(column)
        with self.conn.cursor() as cur:
            cur.execute(
                sql(f"UPDATE allocations SET {column} = %s WHERE id = %s"),  # noqa: S608 - checked name
                (value, row.id),
            )

    def _launch(self, row: Allocation, template: str) -> None:
        ref = self.jobs.launch(row.provider, template)
        if template == "provision":
            self._set(row, "provision_job", ref)
        self._set(row, "job", ref)
        log.info("provider job launched", job=ref, template=template, provider=row.provider)

    def _job_outcome(self, ref: str) -> str:
        """``active``, ``ok``, ``failed`` or ``canceled``."""
        return classify_status(str(self.jobs.job(ref).get("status")))

    def _provider_failure(self, row: Allocation, ref: str, outcome: str) -> None:
        job = self.jobs.job(ref)
        explanation = job.get("job_explanation") or job.get("status_message") or "no explanation"
        error = ProviderJobError(f"provider job {ref} ended {job.get('status')}: {explanation}")
        log.error("provider job did not succeed", exc_info=error, job=ref, outcome=outcome)

    def _queue_task(self, row: Allocation, kind: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(
                sql(
                    "INSERT INTO tasks (kind, node_id, allocation_id, workflow_id, correlation_id)"
                    " VALUES (%s, %s, %s, %s, %s) RETURNING id"
                ),
                (kind, row.node_id, row.id, row.workflow_id, row.correlation_id),
            )
            created = cur.fetchone()
        task_id = created[0] if created else None
        self._set(row, "task_id", task_id)
        log.info("node task queued", task_id=task_id, task_kind=kind)

    def _task_state(self, row: Allocation) -> str:
        with self.conn.cursor() as cur:
            cur.execute(sql("SELECT state FROM tasks WHERE id = %s"), (row.task_id,))
            found = cur.fetchone()
        return str(found[0]) if found else "missing"

    def advance(self, row: Allocation) -> None:
        """One step of ``row``'s workflow."""
        if row.state == "provisioning":
            self._provisioning(row)
        elif row.state == "releasing":
            self._releasing(row)
        elif row.state == "deleting":
            self._deleting(row)

    def _provisioning(self, row: Allocation) -> None:
        # The provider job (the VM side) and the node's deploy task (the host side) run side
        # by side; the allocation is active when both succeeded.
        if row.job is None or row.task_id is None:
            if row.job is None:
                self._launch(row, "provision")
            if row.task_id is None:
                self._queue_task(row, "deploy")
            return
        outcome = self._job_outcome(row.job)
        if outcome in ("failed", "canceled"):
            self._provider_failure(row, row.job, outcome)
            self._move(row, "provision_failed", occupancy="cleanup")
            return
        task = self._task_state(row)
        if task in ("failed", "lost"):
            error = TaskFailedError(f"deploy task {row.task_id} ended {task}")
            log.error("provisioning failed", exc_info=error, task_id=row.task_id)
            self._move(row, "provision_failed", occupancy="cleanup")
        elif task == "succeeded" and outcome == "ok":
            self._move(row, "active", occupancy="allocated")

    def _releasing(self, row: Allocation) -> None:
        if row.job is None:
            self._launch(row, "deprovision")
            return
        outcome = self._job_outcome(row.job)
        if outcome == "active":
            return
        if outcome != "ok":
            self._provider_failure(row, row.job, outcome)
            self._move(row, "release_failed", occupancy="cleanup")
            return
        if row.task_id is None:
            self._queue_task(row, "wipe")
            return
        task = self._task_state(row)
        if task in ("queued", "claimed"):
            return
        if task != "succeeded":
            error = TaskFailedError(f"wipe task {row.task_id} ended {task}")
            log.error("release failed", exc_info=error, task_id=row.task_id)
            self._move(row, "release_failed", occupancy="cleanup")
            return
        try:
            self._move(row, "released", occupancy="free", version=row.release_version)
        except StaleTransitionError:
            log.exception("release could not be completed")
            self._move(row, "release_failed", occupancy="cleanup")

    def _deleting(self, row: Allocation) -> None:
        if row.job is None:
            if row.provision_job is not None:
                outcome = self._job_outcome(row.provision_job)
                if outcome == "active":
                    log.info("canceling provider job: allocation deleted", job=row.provision_job)
                    self.jobs.cancel(row.provision_job)
                    return
            self._launch(row, "deprovision")
            return
        outcome = self._job_outcome(row.job)
        if outcome == "active":
            return
        if outcome == "ok":
            self._move(row, "deleted", occupancy="free")
            return
        self._provider_failure(row, row.job, outcome)
        self._move(row, "deprovision_failed", occupancy="cleanup")

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; a failed tick is logged and the next one runs."""
        log.info("worker started")
        while not stop.is_set():
            try:
                self.publish_outbox()
                self.advance_all()
            except Exception:
                log.exception("worker tick failed")
            stop.wait(_TICK_S)
        log.info("worker stopped")


def run(config: StackConfig) -> None:
    """The ``worker`` role: tick until SIGTERM."""
    configure_logging(config, service="workflow-worker", layer="workflow", ready="worker")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Worker(config).run(stop)
    agent_logging.shutdown(timeout_s=5.0)
