"""Ansible runs for the hold-out cases: ``ansible-runner`` (as an AAP execution node runs
jobs), its job events, and the AAP job objects around them.

The job events are ansible-runner's own (``artifacts/<ident>/job_events/*.json``); the log
shipper of the controller keeps their shape and adds the record schema's keys: ``ts`` is the
event's ``created``, ``event`` its ``stdout`` (or the event name when it printed nothing),
``layer`` ``provider``, ``node_id`` the host, ``workflow_id`` ``aap:<job id>``; the rest
(``runner_event``, ``counter``, ``uuid``, ``parent_uuid``, ``event_data`` with the module's
result) stays as ansible-runner wrote it. The private data directory's path is replaced by
``/runner`` (where an execution environment keeps it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from h_lab import VENV, Lab, iso, run

LEVELS = {
    "runner_on_failed": "error",
    "runner_on_unreachable": "error",
    "runner_item_on_failed": "error",
    "runner_retry": "warning",
    "runner_on_skipped": "info",
}


def run_playbook(
    lab: Lab,
    ident: str,
    playbook_name: str,
    playbook: str,
    inventory: str,
    extravars: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
) -> tuple[int, list[dict[str, Any]]]:
    """Run ``playbook`` with ansible-runner; returns its rc and its job events, in order."""
    base = lab.root / "runner"
    for sub in ("project", "inventory", "env"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "project" / playbook_name).write_text(playbook)
    for name, text in (files or {}).items():
        path = base / "project" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (base / "inventory" / "hosts").write_text(inventory)
    (base / "env" / "extravars").write_text(json.dumps(extravars))
    (base / "env" / "envvars").write_text(
        json.dumps({"ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", **(env or {})})
    )
    shutil.rmtree(base / "artifacts" / ident, ignore_errors=True)
    done = run(
        [
            str(VENV / "bin" / "ansible-runner"),
            "run",
            str(base),
            "-p",
            playbook_name,
            "--ident",
            ident,
        ],
        env={"PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"},
        check=False,
        timeout_s=300,
    )
    events = []
    for path in (base / "artifacts" / ident / "job_events").glob("*.json"):
        text = path.read_text().replace(str(base), "/runner")
        events.append(json.loads(text))
    events.sort(key=lambda e: e["counter"])
    return done.returncode, events


def run_playbook_until(
    lab: Lab,
    ident: str,
    playbook_name: str,
    playbook: str,
    inventory: str,
    extravars: dict[str, Any],
    *,
    stop_when: str,
    on_start: Any = None,
) -> list[dict[str, Any]]:
    """Run ``playbook`` and kill ansible-runner (its whole process group) once a task whose
    name holds ``stop_when`` has started: the execution node going away mid-task. Returns
    the events written until then; ``on_start`` is called once the run has begun."""
    import signal
    import subprocess
    import time

    base = lab.root / "runner"
    for sub in ("project", "inventory", "env"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "project" / playbook_name).write_text(playbook)
    (base / "inventory" / "hosts").write_text(inventory)
    (base / "env" / "extravars").write_text(json.dumps(extravars))
    (base / "env" / "envvars").write_text(
        json.dumps({"ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    )
    folder = base / "artifacts" / ident / "job_events"
    shutil.rmtree(base / "artifacts" / ident, ignore_errors=True)
    proc = subprocess.Popen(
        [
            str(VENV / "bin" / "ansible-runner"),
            "run",
            str(base),
            "-p",
            playbook_name,
            "--ident",
            ident,
        ],
        env={**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if on_start is not None:
        on_start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        started = (
            [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.exists() else []
        )
        if any(
            e["event"] == "playbook_on_task_start"
            and stop_when in e.get("event_data", {}).get("task", "")
            for e in started
        ):
            time.sleep(2.0)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"no task named {stop_when!r} started")
    events = [
        json.loads(p.read_text().replace(str(base), "/runner")) for p in folder.glob("*.json")
    ]
    events.sort(key=lambda e: e["counter"])
    return events


def event_record(event: dict[str, Any], job_id: int) -> dict[str, Any]:
    """One job event in the record schema (the controller's log shipper)."""
    data = event.get("event_data", {})
    stdout = event.get("stdout", "").replace("\r\n", "\n").strip("\n")
    level = LEVELS.get(event["event"], "info")
    if event["event"] == "runner_on_failed" and data.get("ignore_errors"):
        level = "warning"
    if stdout.startswith("[WARNING]"):
        level = "warning"
    if stdout.startswith("[ERROR]"):
        level = "error"
    record: dict[str, Any] = {
        "ts": event["created"],
        "level": level,
        "event": stdout or event["event"],
        "service": "aap-controller",
        "layer": "provider",
        "logger_name": "awx.analytics.job_events",
        "job": job_id,
        "workflow_id": f"aap:{job_id}",
        "runner_event": event["event"],
        "counter": event["counter"],
        "uuid": event["uuid"],
        "parent_uuid": event.get("parent_uuid"),
        "event_data": data,
    }
    host = data.get("host")
    if host:
        record["node_id"] = host
    return {k: v for k, v in record.items() if v not in (None, "")}


def events_window(events: list[dict[str, Any]]) -> tuple[str, str]:
    """The first and the last event's ``created`` (the job's start and end)."""
    return events[0]["created"], events[-1]["created"]


def aap_job(
    job_id: int,
    *,
    name: str,
    template_id: int,
    playbook: str,
    status: str,
    created_ns: int,
    started: str | None,
    finished: str | None,
    elapsed: float,
    extra_vars: dict[str, Any],
    explanation: str = "",
    execution_node: str = "aap-exec-02",
    credential: str = "",
) -> dict[str, Any]:
    """A job as ``GET /api/v2/jobs/N/`` returns it (the fields the AWX API names)."""
    return {
        "id": job_id,
        "type": "job",
        "url": f"/api/v2/jobs/{job_id}/",
        "related": {
            "job_template": f"/api/v2/job_templates/{template_id}/",
            "stdout": f"/api/v2/jobs/{job_id}/stdout/",
            "job_events": f"/api/v2/jobs/{job_id}/job_events/",
        },
        "summary_fields": {
            "job_template": {"id": template_id, "name": name, "description": ""},
            "inventory": {"id": 3, "name": "bare-metal", "kind": ""},
            "credentials": [{"id": 41, "name": credential, "kind": "registry_token"}]
            if credential
            else [],
            "execution_environment": {
                "id": 5,
                "name": "ee-metal",
                "image": "quay.dc1.internal/aap/ee-metal:2.5.3",
            },
        },
        "created": iso(created_ns),
        "modified": finished or started or iso(created_ns),
        "name": name,
        "job_type": "run",
        "playbook": playbook,
        "launch_type": "workflow",
        "status": status,
        "failed": status in ("failed", "error"),
        "started": started,
        "finished": finished,
        "canceled_on": None,
        "elapsed": elapsed,
        "job_explanation": explanation,
        "execution_node": execution_node,
        "controller_node": "aap-ctrl-01",
        "extra_vars": json.dumps(extra_vars),
        "artifacts": {},
        "result_traceback": "",
        "event_processing_finished": True,
    }


def jobs_page(jobs: list[dict[str, Any]]) -> str:
    """A page of ``GET /api/v2/jobs/?order_by=-id``."""
    page = {"count": len(jobs), "next": None, "previous": None, "results": jobs}
    return json.dumps(page, indent=2) + "\n"


def seconds_between(a: str, b: str) -> float:
    import datetime as dt

    return round((dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds(), 3)


def write_events(records: list[dict[str, Any]], path: Path) -> None:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
