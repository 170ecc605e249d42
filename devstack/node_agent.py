"""The node agent: claims tasks through the ingress, runs them, reports results.

One process per node. ``node_id`` is fixed (inventory); ``node_instance_id`` is minted on the
first boot of an image and kept in the node's local state (``state/instance-id``): a reimage
wipes ``state/``, spool included, so the next boot is a new instance. That is why the devstack
drains the node's spool (``agent-logging drain``) before it wipes anything.

The image (:func:`install_image`) holds the deploy tool (``state/bin/deploy-tool``, a shell
script) and its configuration (``state/etc/deploy.conf``: how long a deploy takes) and the
node's API token (``state/etc/token``). Tasks:

- ``deploy``: runs ``bin/deploy-tool deploy`` (a missing tool is a missing prerequisite:
  ``FileNotFoundError``, which ``agent_logging`` classifies as ``deploy``);
- ``wipe``: runs ``bin/deploy-tool wipe``.

All calls go to ``https://127.0.0.1:PORT`` (the ingress) verifying the local CA, one
connection per request (a node agent keeps nothing open between polls), with the current
identifiers injected (``agent_logging.integrations.httpx``). A result that cannot be delivered
is retried for 10 s, then given up (:class:`TaskReportError`, whose cause says why).
"""

from __future__ import annotations

import os
import secrets
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Final

import httpx

import agent_logging
from agent_logging.integrations.httpx import event_hooks
from devstack.config import StackConfig, configure_logging
from devstack.errors import TaskReportError

__all__ = ["DEPLOY_TOOL", "install_image", "run", "set_deploy_seconds"]

_REPORT_FOR_S: Final = 10.0
_IDLE_BACKOFF_S: Final = (0.25, 2.0)

#: The deploy tool the image ships: sleeps for the configured time, as a deployment would take.
DEPLOY_TOOL: Final = """#!/bin/sh
# devstack deploy tool: $1 is deploy or wipe; deploy.conf sets deploy_seconds/wipe_seconds.
set -eu
. "$(dirname "$0")/../etc/deploy.conf"
case "$1" in
  deploy) sleep "$deploy_seconds" ;;
  wipe) sleep "$wipe_seconds" ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
"""

log = agent_logging.get_logger("devstack.node_agent")


def install_image(state: Path, token: str, *, deploy_seconds: float = 0.3) -> None:
    """Lay a fresh image into ``state``: the deploy tool, its configuration, the token."""
    (state / "bin").mkdir(parents=True, exist_ok=True)
    (state / "etc").mkdir(parents=True, exist_ok=True)
    tool = state / "bin" / "deploy-tool"
    tool.write_text(DEPLOY_TOOL, "utf-8")
    tool.chmod(0o755)
    set_deploy_seconds(state, deploy_seconds)
    token_path = state / "etc" / "token"
    token_path.touch(mode=0o600)
    token_path.write_text(token, "utf-8")


def set_deploy_seconds(state: Path, seconds: float, *, wipe_seconds: float = 0.2) -> None:
    """How long the next deploy (and wipe) takes on this node."""
    (state / "etc" / "deploy.conf").write_text(
        f"deploy_seconds={seconds}\nwipe_seconds={wipe_seconds}\n", "utf-8"
    )


class Agent:
    """One node agent."""

    def __init__(self, config: StackConfig, node_id: str, instance_id: str) -> None:
        self.config = config
        self.node_id = node_id
        self.instance_id = instance_id
        self.state = config.node_state(node_id)
        context = ssl.create_default_context(cafile=str(config.ca_dir / "ca.pem"))
        self.http = httpx.Client(
            base_url=config.ingress_url,
            verify=context,
            timeout=httpx.Timeout(15.0, connect=3.0),
            limits=httpx.Limits(max_keepalive_connections=0),
            event_hooks=event_hooks(),
        )

    def _headers(self) -> dict[str, str]:
        token = (self.state / "etc" / "token").read_text("utf-8").strip()
        return {"Authorization": f"Bearer {token}"}

    def claim(self) -> dict[str, Any] | None:
        """The next task, or None when there is none (after the API's long poll)."""
        response = self.http.post(
            "/v1/tasks/claim",
            json={"node_id": self.node_id, "node_instance_id": self.instance_id},
            headers=self._headers(),
        )
        response.raise_for_status()
        if response.status_code == 204:
            return None
        task: dict[str, Any] = response.json()
        return task

    def execute(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """Run a task's step; returns the error to report, or None on success."""
        kind = str(task["kind"])
        tool = self.state / "bin" / "deploy-tool"
        log.info("task step started", task_id=task["id"], task_kind=kind)
        try:
            subprocess.run(  # noqa: S603 - the image's own tool
                [str(tool), kind],
                check=True,
                capture_output=True,
                timeout=300,
                env={**os.environ, **agent_logging.env()},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.exception("task step failed", task_id=task["id"], task_kind=kind)
            info = {"type": type(exc).__name__, "message": str(exc)}
            return info
        log.info("task step finished", task_id=task["id"], task_kind=kind)
        return None

    def report(self, task: dict[str, Any], error: dict[str, Any] | None) -> None:
        """Deliver the result, retrying for 10 s; log why when it cannot be delivered."""
        body = {
            "node_instance_id": self.instance_id,
            "status": "failed" if error else "succeeded",
            "error": error,
        }
        deadline = time.monotonic() + _REPORT_FOR_S
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.http.post(
                    f"/v1/tasks/{task['id']}/result", json=body, headers=self._headers()
                )
                response.raise_for_status()
            except httpx.HTTPError as exc:
                wrapped = TaskReportError(f"task {task['id']} result not delivered")
                wrapped.__cause__ = exc
                log.exception("task report failed", exc_info=wrapped, attempt=attempt)
                if time.monotonic() >= deadline:
                    log.warning("task result abandoned", task_id=task["id"], attempts=attempt)
                    return
                time.sleep(0.5)
                continue
            log.info("task reported", task_id=task["id"], status=body["status"])
            return

    def run(self, stop: threading.Event) -> None:
        idle = _IDLE_BACKOFF_S[0]
        while not stop.is_set():
            try:
                task = self.claim()
            except httpx.HTTPError:
                log.exception("task claim failed")
                stop.wait(idle)
                idle = min(idle * 2, _IDLE_BACKOFF_S[1])
                continue
            idle = _IDLE_BACKOFF_S[0]
            if task is None:
                continue
            ids = agent_logging.ids_from_payload(task)
            with agent_logging.bound(**ids):
                log.info("task received", task_id=task["id"], task_kind=task["kind"])
                error = self.execute(task)
                self.report(task, error)


def _instance_id(state: Path) -> tuple[str, bool]:
    """This image's instance id, minted at its first boot; (id, whether this boot minted it)."""
    path = state / "instance-id"
    if path.exists():
        return path.read_text("utf-8").strip(), False
    minted = f"ni-{secrets.token_hex(4)}"
    path.write_text(minted, "utf-8")
    return minted, True


def run(config: StackConfig, node_id: str) -> None:
    """The ``node`` role: one agent until SIGTERM (a reimage kills it harder)."""
    state = config.node_state(node_id)
    instance_id, fresh = _instance_id(state)
    configure_logging(
        config,
        service="node-agent",
        layer="node",
        ids={"node_id": node_id, "node_instance_id": instance_id},
        spool_dir=config.node_spool(node_id),
        ledger_name=f"node-agent-{node_id}-{instance_id}",
        ready=f"node-agent-{node_id}",
    )
    log.info("agent started", first_boot=fresh)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Agent(config, node_id, instance_id).run(stop)
    log.info("agent stopped")
    agent_logging.shutdown(timeout_s=5.0)
