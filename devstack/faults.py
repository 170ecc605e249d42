"""The scenarios' drivers: each injects one fault the way it happens for real, drives the
traffic that meets it, and waits until the failure has shown itself.

Each driver takes a :class:`~devstack.harness.Run`, returns the seed identifier of the
incident (``{"allocation_id": ...}``) and marks when the fault took effect
(:meth:`Run.injected`). Nothing here writes an owner into any record: the processes log what
they see (a TLS error, a 401, a missing file, a PostgreSQL error, a state transition) and the
correlator decides.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Final

import httpx
import psycopg

from devstack.database import connect
from devstack.harness import Run, ScenarioError
from devstack.ingress import served_certificate
from devstack.node_agent import install_image, set_deploy_seconds
from devstack.supervisor import free_port

__all__ = [
    "cert_expired",
    "db_lock_timeout",
    "delete_during_provision",
    "healthy",
    "ingress_no_route",
    "missing_prerequisite",
    "reimage_mid_task",
    "release_stuck",
    "stale_cr_status",
    "token_rotated",
]

#: The devstack's finding thresholds are 1 s (scenarios.FINDINGS_CONFIG); a stuck state must
#: have lasted longer than that when findings are computed.
_PAST_THRESHOLD_S: Final = 1.5
#: Long enough that a fault injected after the claim meets the task's report.
_SLOW_DEPLOY_S: Final = 2.0


def _claimed(run: Run, node: str, provider: str, deploy_seconds: float) -> str:
    """An allocation whose deploy task the node has claimed and is running."""
    state = run.node_state(node)
    set_deploy_seconds(state, deploy_seconds)
    run.on_restore(lambda: set_deploy_seconds(state, 0.3))
    allocation = run.allocate(node, provider)
    run.wait(lambda: run.task_state(allocation) == "claimed", "the deploy task to be claimed")
    run.wait(
        lambda: run.logged("task step started", allocation_id=allocation),
        "the node to start the deploy step",
    )
    return allocation


def _report_failed(run: Run, allocation: str) -> None:
    run.wait(
        lambda: run.logged("task report failed", allocation_id=allocation),
        "the node's report to fail",
    )


def healthy(run: Run) -> dict[str, str]:
    """No fault: provision on EDA, release."""
    node = run.free_node()
    allocation = run.allocate(node, "eda")
    run.wait_state(allocation, "active")
    run.release(allocation)
    run.wait_state(allocation, "released")
    # As long as the faulty scenarios wait: a healthy stack must show no finding either.
    run.settle(_PAST_THRESHOLD_S)
    return {"allocation_id": allocation}


def cert_expired(run: Run) -> dict[str, str]:
    """The ingress's certificate expires while a node deploys; its report's handshake fails."""
    ingress = run.stack.ingress()
    valid = ingress.cert_path.read_bytes()
    expired = (run.config.ca_dir / "server-expired.pem").read_bytes()
    allocation = _claimed(run, run.free_node(), "eda", _SLOW_DEPLOY_S)

    def serve(pem: bytes) -> None:
        before = served_certificate(run.config.ingress_port)
        ingress.use_certificate(pem)
        # A reload starts new workers; wait until new connections meet the new certificate.
        run.wait(lambda: served_certificate(run.config.ingress_port) != before, "the reload")

    serve(expired)
    run.on_restore(lambda: serve(valid))
    run.injected()
    _report_failed(run, allocation)
    return {"allocation_id": allocation}


def token_rotated(run: Run) -> dict[str, str]:
    """The API's node token is rotated before the nodes got the new one: 401."""
    allocation = _claimed(run, run.free_node(), "eda", _SLOW_DEPLOY_S)
    config = run.config
    config.node_token = secrets.token_urlsafe(24)
    config.save()
    run.stack.write_tokens()
    run.injected()

    def distribute() -> None:
        for node in config.node_ids:
            (config.node_state(node) / "etc" / "token").write_text(config.node_token, "utf-8")

    run.on_restore(distribute)
    _report_failed(run, allocation)
    return {"allocation_id": allocation}


def missing_prerequisite(run: Run) -> dict[str, str]:
    """The node's image lacks the deploy tool: the deploy step cannot run it."""
    node = run.free_node()
    state = run.node_state(node)
    (state / "bin" / "deploy-tool").unlink()
    run.on_restore(lambda: install_image(state, run.config.node_token))
    run.injected()
    allocation = run.allocate(node, "eda")
    run.wait_state(allocation, "provision_failed")
    return {"allocation_id": allocation}


def release_stuck(run: Run) -> dict[str, str]:
    """A second writer changes the allocation while it releases: the release cannot complete
    and the allocation is left ``release_failed`` with the node fenced (``cleanup``)."""
    node = run.free_node()
    state = run.node_state(node)
    set_deploy_seconds(state, 0.3, wipe_seconds=1.0)
    run.on_restore(lambda: set_deploy_seconds(state, 0.3))
    allocation = run.allocate(node, "eda")
    run.wait_state(allocation, "active")
    run.release(allocation)
    run.wait_state(allocation, "releasing")
    # A reconciler of its own (not the worker) touches the row: a lost-update race.
    with _connect_as(run, "inventory-reconciler") as rogue:
        rogue.execute("UPDATE allocations SET version = version + 1 WHERE id = %s", (allocation,))
    run.injected()
    run.wait_state(allocation, "release_failed")
    run.settle(_PAST_THRESHOLD_S)
    return {"allocation_id": allocation}


def _connect_as(run: Run, application: str) -> psycopg.Connection[Any]:
    return connect(run.config.dsn, application)


def db_lock_timeout(run: Run) -> dict[str, str]:
    """A maintenance transaction holds the node's row: the worker's publish of the
    allocation's release request times out on the lock, and the outbox row stays pending."""
    node = run.free_node()
    allocation = run.allocate(node, "eda")
    run.wait_state(allocation, "active")
    maintenance = _connect_as(run, "inventory-maintenance")
    maintenance.autocommit = False
    # An inventory batch updates the node and keeps its transaction open. Its row lock (FOR
    # NO KEY UPDATE) lets the API insert allocations referencing the node (the foreign key
    # only needs FOR KEY SHARE) but blocks the worker's update of the same row.
    maintenance.execute("UPDATE nodes SET occupancy = occupancy WHERE node_id = %s", (node,))

    def release_lock() -> None:
        maintenance.rollback()
        maintenance.close()

    run.on_restore(release_lock)
    run.injected()
    run.release(allocation)
    run.wait(
        lambda: run.logged("outbox row not published", allocation_id=allocation),
        "the worker's publish to time out",
    )
    run.settle(_PAST_THRESHOLD_S)
    return {"allocation_id": allocation}


def stale_cr_status(run: Run) -> dict[str, str]:
    """The provider cancels the job; the projector's watch has stalled, so the CR goes on
    saying ``Running``."""
    allocation = run.allocate(run.free_node(), "aap")
    run.wait(lambda: run.resource_state(allocation) == "Running", "the CR to say Running")
    flag = run.config.faults_dir / "projector-stalled"
    flag.touch()
    run.on_restore(lambda: flag.unlink(missing_ok=True))
    time.sleep(0.3)  # longer than a projector tick: it has seen the flag
    job = run.job(allocation)
    if job is None:
        raise ScenarioError("the allocation has no provision job")
    number = job.partition(":")[2]
    # What an AAP administrator's cancel does: the controller's own API.
    httpx.post(f"{run.config.provider_url}/api/v2/jobs/{number}/cancel/").raise_for_status()
    run.injected()
    run.wait_state(allocation, "provision_failed")
    run.settle(_PAST_THRESHOLD_S)
    return {"allocation_id": allocation}


def delete_during_provision(run: Run) -> dict[str, str]:
    """The tenant deletes the allocation while its AAP job runs: the job is canceled and the
    deprovision job runs, but the provider's VM stays locked by the canceled job, the
    deprovision fails and the VM is left behind (an orphan)."""
    flag = run.config.faults_dir / "provider-vm-lock"
    flag.touch()
    run.on_restore(lambda: flag.unlink(missing_ok=True))
    allocation = run.allocate(run.free_node(), "aap")
    run.wait(lambda: run.resource_state(allocation) == "Running", "the job to run")
    run.delete(allocation)
    run.injected()
    run.wait_state(allocation, "deprovision_failed")
    run.settle(_PAST_THRESHOLD_S)
    return {"allocation_id": allocation}


def reimage_mid_task(run: Run) -> dict[str, str]:
    """The node is reimaged while its deploy step runs; its spool is drained first."""
    node = run.free_node()
    allocation = _claimed(run, node, "eda", 30.0)
    run.injected()
    run.stack.reimage(node)
    run.wait_state(allocation, "provision_failed")
    return {"allocation_id": allocation}


def ingress_no_route(run: Run) -> dict[str, str]:
    """The ingress's upstream moves to an address where nothing listens while a node deploys:
    its report gets 502 (connection refused upstream)."""
    ingress = run.stack.ingress()
    allocation = _claimed(run, run.free_node(), "eda", _SLOW_DEPLOY_S)

    def route(port: int, status: int) -> None:
        ingress.set_upstream(port)
        run.wait(lambda: _probe(run) == status, f"the ingress to answer {status}")

    route(free_port(), 502)
    run.on_restore(lambda: route(run.config.api_port, 200))
    run.injected()
    _report_failed(run, allocation)
    return {"allocation_id": allocation}


def _probe(run: Run) -> int:
    try:
        return run.tenant.get("/healthz").status_code
    except httpx.HTTPError:
        return 0
