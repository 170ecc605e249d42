"""An Ironic conductor's and a nova-compute's view of a deploy whose BMC stopped answering.

Run with the scratch venv (oslo.log, oslo.concurrency): ``/tmp/h_venv/bin/python
h_ironic_capture.py NODE INSTANCE OTHER_NODE OTHER_INSTANCE PASSWORD_FILE``. Prints oslo.log
``JSONFormatter`` lines (one JSON object each, ``"service"`` added by this script's handler
so the conductor's and nova's lines can be told apart) while it:

1. logs the deploy request and the node's provision-state moves as the conductor does;
2. runs the real ``ipmitool -I lanplus ... power status`` through
   ``oslo_concurrency.processutils.execute`` against 127.0.0.1, where no BMC answers
   ("Unable to establish IPMI v2 / RMCP+ session");
3. raises ``IPMIFailure("IPMI call failed: power status.")`` (Ironic's message format) from
   stand-in functions named after Ironic's (``_power_status``, ``node_power_action``,
   ``do_next_deploy_step``) and logs the deploy step failure with its traceback;
4. has nova-compute log the spawn failure (``InstanceDeployFailure``, nova's class name);
5. runs the power-state sync three times, then switches the node to maintenance;
6. meanwhile another node's cleaning times out (its ramdisk never called back).

Messages follow the format strings of Ironic and Nova (facts about their logs); the functions
are this script's. The generator renames the script's path in tracebacks to the modules the
functions stand for.
"""

from __future__ import annotations

import logging
import sys
import time

from oslo_concurrency import processutils
from oslo_log import formatters

NODE, INSTANCE, OTHER, OTHER_INSTANCE, PASSWORD_FILE = sys.argv[1:6]
STEP = "{'step': 'deploy', 'priority': 100, 'argsinfo': None, 'interface': 'deploy'}"


class ServiceFilter(logging.Filter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.extra_service = self.service
        return True


class Formatter(formatters.JSONFormatter):
    def format(self, record: logging.LogRecord) -> str:
        import json

        data = json.loads(super().format(record))
        data["service"] = getattr(record, "extra_service", "")
        return json.dumps(data)


def logger(name: str, service: str) -> logging.Logger:
    log = logging.getLogger(name)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(Formatter())
    handler.addFilter(ServiceFilter(service))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


MANAGER = logger("ironic.conductor.manager", "ironic-conductor")
TASKS = logger("ironic.conductor.task_manager", "ironic-conductor")
DEPLOYMENTS = logger("ironic.conductor.deployments", "ironic-conductor")
UTILS = logger("ironic.conductor.utils", "ironic-conductor")
IPMI = logger("ironic.drivers.modules.ipmitool", "ironic-conductor")
NOVA_DRIVER = logger("nova.virt.ironic.driver", "nova-compute")
NOVA_MANAGER = logger("nova.compute.manager", "nova-compute")


class IronicException(Exception):
    _msg_fmt = "An unknown exception occurred."

    def __init__(self, **kwargs: str) -> None:
        super().__init__(self._msg_fmt % kwargs)


class IPMIFailure(IronicException):
    _msg_fmt = "IPMI call failed: %(cmd)s."


IPMIFailure.__module__ = "ironic.common.exception"


class InstanceDeployFailure(Exception):
    pass


InstanceDeployFailure.__module__ = "nova.exception"


def moved(node: str, state: str, prev: str, target: str) -> None:
    TASKS.info(
        'Node %(node)s moved to provision state "%(state)s" from state "%(prev)s"; '
        'target provision state is "%(tgt)s"',
        {"node": node, "state": state, "prev": prev, "tgt": target},
    )


def _exec_ipmitool(command: str) -> tuple[str, str]:
    return processutils.execute(
        "ipmitool",
        "-I",
        "lanplus",
        "-H",
        "127.0.0.1",
        "-L",
        "ADMINISTRATOR",
        "-U",
        "root",
        "-R",
        "1",
        "-N",
        "3",
        "-f",
        PASSWORD_FILE,
        *command.split(),
    )


def _power_status(node: str) -> str:
    cmd = "power status"
    try:
        out, _err = _exec_ipmitool(cmd)
    except processutils.ProcessExecutionError as e:
        IPMI.warning(
            "IPMI power status failed for node %(node_id)s with error: %(error)s.",
            {"node_id": node, "error": e},
        )
        raise IPMIFailure(cmd=cmd) from None
    return "power on" if out == "Chassis Power is on\n" else "power off"


def node_power_action(node: str, target: str) -> None:
    current = _power_status(node)
    if current != target:
        _exec_ipmitool("power on")


def do_next_deploy_step(node: str) -> None:
    DEPLOYMENTS.info(
        "Deploying on node %(node)s, remaining steps: %(steps)s",
        {"node": node, "steps": f"[{STEP}]"},
    )
    DEPLOYMENTS.info("Executing %(step)s on node %(node)s", {"step": STEP, "node": node})
    try:
        node_power_action(node, "power on")
    except Exception as e:
        DEPLOYMENTS.exception(
            "Node %(node)s failed deploy step %(step)s with unexpected error: %(err)s",
            {"node": node, "step": STEP, "err": e},
        )
        UTILS.error(
            "Deploy failed for instance %(instance)s. Error: %(error)s",
            {"instance": INSTANCE, "error": e},
        )
        moved(node, "deploy failed", "deploying", "active")
        raise


def spawn() -> None:
    try:
        do_next_deploy_step(NODE)
    except IPMIFailure as e:
        NOVA_DRIVER.error(
            "Error deploying instance %(instance)s on baremetal node %(node)s.",
            {"instance": INSTANCE, "node": NODE},
        )
        try:
            raise InstanceDeployFailure(
                f"Failed to provision instance {INSTANCE}: Failed to deploy: Deploy step "
                f"deploy.deploy failed on node {NODE}. {e}"
            ) from e
        except InstanceDeployFailure:
            NOVA_MANAGER.exception("[instance: %s] Instance failed to spawn", INSTANCE)


def sync_power_state(node: str) -> None:
    for attempt in range(1, 4):
        try:
            _power_status(node)
        except IPMIFailure as e:
            if attempt < 3:
                MANAGER.warning(
                    "During sync_power_state, could not get power state for node %(node)s, "
                    "attempt %(attempt)s of %(retries)s. Error: %(err)s.",
                    {"node": node, "attempt": attempt, "retries": 3, "err": e},
                )
                continue
            MANAGER.error(
                "During sync_power_state, max retries exceeded for node %(node)s, node state "
                "%(actual)s does not match expected state '%(state)s'. Updating DB state to "
                "'%(actual)s' Switching node to maintenance mode. Error: %(error)s",
                {"node": node, "actual": None, "state": "power on", "error": e},
            )


def main() -> None:
    # The node's previous tenant was deleted; automated cleaning finished just before.
    moved(NODE, "available", "cleaning", "None")
    time.sleep(1.0)
    moved(OTHER, "clean wait", "cleaning", "available")
    time.sleep(1.0)
    MANAGER.info("RPC do_node_deploy called for node %s.", NODE)
    moved(NODE, "deploying", "available", "active")
    NOVA_DRIVER.info(
        "Deploying instance %(instance)s on baremetal node %(node)s",
        {"instance": INSTANCE, "node": NODE},
    )
    spawn()
    time.sleep(1.0)
    UTILS.error("Timeout reached while waiting for callback for node %s", OTHER)
    UTILS.error(
        "Cleaning failed for node %(node)s: %(msg)s",
        {"node": OTHER, "msg": f"Timeout reached while waiting for callback for node {OTHER}"},
    )
    moved(OTHER, "clean failed", "clean wait", "available")
    time.sleep(2.0)
    sync_power_state(NODE)


if __name__ == "__main__":
    main()
