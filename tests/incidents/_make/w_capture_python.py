"""Capture the failures of the w-* incidents' Python services by running them for real.

Writes the workflow worker's small modules (the BMC driver loader, the ipmitool driver, the
allocation state machine) under ``ROOT/opt/workflow-worker/lib/python3.11/site-packages``,
runs the failing operations and prints one JSON object: per capture the exception's type
(module-qualified, as ``traceback`` names it), ``str(exc)``, the traceback text with ``ROOT``
removed from its paths (so it reads ``/opt/workflow-worker/...``, where the worker would be
installed) and, for a process, its stderr.

Run with a venv made from Debian's python3 at ``ROOT/opt/workflow-worker`` that has
``transitions`` and no ``pyghmi`` (so every path in the tracebacks is where a Debian host
would have it once ``ROOT`` is removed)::

    /usr/bin/python3 -m venv /tmp/w_capture/root/opt/workflow-worker
    /tmp/w_capture/root/opt/workflow-worker/bin/pip install transitions==0.9.3
    IPMI_PASSWORD=x /tmp/w_capture/root/opt/workflow-worker/bin/python \
        tests/incidents/_make/w_capture_python.py /tmp/w_capture/root \
        > /tmp/w_capture/out/python.json

The outermost frame (this script calling the worker's task runner) is left out of each
traceback: the worker's own ``workflow_worker.tasks`` frame is where a real one starts.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

SITE = "opt/workflow-worker/lib/python3.11/site-packages"

MODULES = {
    "workflow_worker/__init__.py": "",
    "workflow_worker/bmc/__init__.py": '''
        """Out-of-band power control: one driver module per BMC flavour."""
        import importlib


        def load_driver(name):
            return importlib.import_module(f"workflow_worker.bmc.{name}_driver")


        def power_on(driver, host, user):
            return load_driver(driver).power_on(host, user)
        ''',
    "workflow_worker/bmc/pyghmi_driver.py": """
        from pyghmi.ipmi import command as ipmi_command


        def power_on(host, user):
            session = ipmi_command.Command(bmc=host, userid=user, password=None)
            return session.set_power("on", wait=True)
        """,
    "workflow_worker/bmc/ipmitool_driver.py": """
        import subprocess


        def power_on(host, user):
            argv = ["ipmitool", "-I", "lanplus", "-H", host, "-U", user, "-E",
                    "chassis", "power", "on"]
            return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
        """,
    "workflow_worker/tasks.py": '''
        """The worker's task runner: one handler per task kind."""
        from workflow_worker import bmc, lifecycle


        def handle_power_on(task):
            return bmc.power_on(task["driver"], task["bmc_address"], task["bmc_user"])


        def handle_callback(task):
            allocation = lifecycle.Allocation(task["allocation_id"], task["state"])
            return lifecycle.apply_callback(allocation, task["event"])


        HANDLERS = {"power_on": handle_power_on, "provider_callback": handle_callback}


        def run_task(task):
            handler = HANDLERS[task["kind"]]
            return handler(task)
        ''',
    "workflow_worker/lifecycle.py": '''
        """The allocation lifecycle as a state machine (transitions)."""
        from transitions import Machine

        STATES = ["requested", "provisioning", "active", "releasing", "released",
                  "provision_failed", "release_failed"]
        TRANSITIONS = [
            {"trigger": "start_provision", "source": "requested", "dest": "provisioning"},
            {"trigger": "provision_complete", "source": "provisioning", "dest": "active"},
            {"trigger": "provision_error", "source": "provisioning", "dest": "provision_failed"},
            {"trigger": "release", "source": "active", "dest": "releasing"},
            {"trigger": "release_complete", "source": "releasing", "dest": "released"},
            {"trigger": "release_error", "source": "releasing", "dest": "release_failed"},
        ]


        class Allocation:
            def __init__(self, allocation_id, state):
                self.allocation_id = allocation_id
                Machine(model=self, states=STATES, transitions=TRANSITIONS, initial=state)


        def apply_callback(allocation, event):
            trigger = getattr(allocation, event)
            return trigger()
        ''',
}


def _write(root: Path) -> Path:
    site = root / SITE
    for name, text in MODULES.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), "utf-8")
    return site


def _captured(exc: BaseException, root: Path) -> dict[str, str]:
    kind = type(exc)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    # Drop the outermost frame (this script's call into the worker).
    exc.__traceback__ = exc.__traceback__.tb_next if exc.__traceback__ else None
    stack = "".join(traceback.format_exception(exc)).replace(str(root), "")
    return {"type": name, "message": str(exc), "stack": stack}


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    site = _write(root)
    sys.path.insert(0, str(site))
    tasks = importlib.import_module("workflow_worker.tasks")
    out: dict[str, dict[str, str]] = {}
    power_on = {"kind": "power_on", "bmc_user": "admin"}

    try:
        tasks.run_task(power_on | {"driver": "pyghmi", "bmc_address": "10.20.8.31"})
    except ImportError as exc:
        out["module_missing"] = _captured(exc, root)

    for key, address in (("ipmi_session", "10.20.6.14"), ("ipmi_session_noise", "10.20.6.22")):
        try:
            tasks.run_task(power_on | {"driver": "ipmitool", "bmc_address": address})
        except subprocess.CalledProcessError as exc:
            out[key] = _captured(exc, root) | {
                "stderr": exc.stderr,
                "returncode": str(exc.returncode),
            }

    callback = {"kind": "provider_callback", "allocation_id": "alloc-2b77e0"}
    try:
        tasks.run_task(callback | {"state": "releasing", "event": "provision_complete"})
    except Exception as exc:
        out["invalid_transition"] = _captured(exc, root)

    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
