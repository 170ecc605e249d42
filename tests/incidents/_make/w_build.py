"""Build the ``w-*`` incident folders from the captured program output.

Every error text, traceback and Ansible result quoted here was printed by a real program run by
``w_capture.sh`` (Go's os/exec and os, Python 3.11 and ``transitions``, ipmitool 1.8.19,
ansible-core 2.19, FastAPI behind Debian's nginx 1.22): this script only places those texts
into the log records of the services that would have written them, at the incident's times.
What it writes itself, and says so in each truth.json, is the records around them (the
services' info lines, the workflow transitions, the AAP job objects, the Kubernetes
objects), in each service's own format.

Captured nginx and API lines keep every byte but their timestamps, which are moved to the
incident's date (the whole request, its nginx line and the API lines with its
``$request_id``, by one offset).

    .venv/bin/python tests/incidents/_make/w_build.py /tmp/w_capture tests/incidents
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

NS = 1_000_000_000
CAPTURE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/w_capture")
TARGET = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[1]


# -- captured program output -----------------------------------------------------------------


def _go() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for line in (CAPTURE / "out" / "go.jsonl").read_text("utf-8").splitlines():
        item = json.loads(line)
        key = item["op"]
        if key == "power-on":
            key = "exec-missing" if "not found" in item["error"] else "ipmi-exit"
        found[key] = item
    return found


GO = _go()
PY = json.loads((CAPTURE / "out" / "python.json").read_text("utf-8"))


def ansible(name: str) -> str:
    """The output of one ansible-playbook run, without the trailing exit code line."""
    text = (CAPTURE / "out" / f"ansible-{name}.txt").read_text("utf-8")
    return text.rsplit("exit code", 1)[0].strip("\n")


def ansible_line(name: str, prefix: str) -> str:
    """The first line of a run's output starting with ``prefix`` (e.g. ``fatal:``)."""
    return next(line for line in ansible(name).splitlines() if line.startswith(prefix))


def version(name: str) -> str:
    return (CAPTURE / "out" / f"{name}-version.txt").read_text("utf-8").splitlines()[0].strip()


# -- time ------------------------------------------------------------------------------------


def at(day: str, clock: str) -> int:
    """Nanoseconds of ``day`` (2026-11-10) at ``clock`` (09:41:02.345) UTC.

    A clock given to the millisecond gets a sub-millisecond part derived from its text (the
    same every build), as real clocks have: programs print micro- or nanoseconds.
    """
    whole, _, fraction = clock.partition(".")
    moment = datetime.fromisoformat(f"{day}T{whole}+00:00")
    ns = int(moment.timestamp()) * NS + int((fraction or "0").ljust(9, "0")[:9])
    if fraction and len(fraction) <= 3:
        ns += (
            int.from_bytes(hashlib.sha256(f"{day}T{clock}".encode()).digest()[:4], "big")
            % 1_000_000
        )
    return ns


def _dt(ns: int, tz: timezone = UTC) -> datetime:
    return datetime.fromtimestamp(ns // NS, tz)


def ts_go(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: trailing zeros of the fraction dropped."""
    fraction = f"{ns % NS:09d}".rstrip("0")
    return _dt(ns).strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def ts_micro_z(ns: int) -> str:
    """structlog's TimeStamper(fmt="iso", utc=True) and AWX: microseconds and Z."""
    return _dt(ns).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % NS // 1000:06d}Z"


def ts_milli_z(ns: int) -> str:
    return _dt(ns).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % NS // 1_000_000:03d}Z"


def ts_k8s(ns: int) -> str:
    return _dt(ns).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- records, per service style ----------------------------------------------------------------


def _go_json(record: dict[str, Any]) -> str:
    # encoding/json: map keys sorted, compact, HTML characters escaped.
    text = json.dumps(dict(sorted(record.items())), separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def node_agent(ns: int, skew_s: float, level: str, event: str, **fields: Any) -> tuple[int, str]:
    """A line of the Go node agent (clock ``skew_s`` off); keys sorted as encoding/json does."""
    written = ns + int(skew_s * NS)
    record = {"ts": ts_go(written), "level": level, "event": event, "service": "node-agent"}
    record["layer"] = "node"
    record.update({key: value for key, value in fields.items() if value is not None})
    return written, _go_json(record)


def worker(ns: int, level: str, event: str, **fields: Any) -> tuple[int, str]:
    """A line of the Python workflow worker (structlog's JSONRenderer, its own config).

    Bound context first (service, layer, identifiers), then the call's keys, ``event``, and
    the keys processors add: ``level``, ``ts``, ``exception``.
    """
    exception = fields.pop("exception", None)
    record: dict[str, Any] = {"service": "workflow-worker", "layer": "workflow"}
    record.update({key: value for key, value in fields.items() if value is not None})
    record["event"] = event
    record["level"] = level
    record["ts"] = ts_micro_z(ns)
    if exception:
        record["exception"] = exception
    return ns, json.dumps(record)


def api_line(ns: int, level: str, event: str, **fields: Any) -> tuple[int, str]:
    """A line the provisioning API writes outside a request (w_api_app's format, UTC)."""
    moment = _dt(ns).replace(microsecond=ns % NS // 1000)
    record = {
        "ts": moment.isoformat(timespec="microseconds"),
        "level": level,
        "event": event,
        "service": "provisioning-api",
        "layer": "api",
        "env": "prod",
    }
    record.update({key: value for key, value in fields.items() if value is not None})
    return ns, json.dumps(record)


def transition(
    ns: int, kind: str, entity: str, to: str, frm: str | None = None, **fields: Any
) -> tuple[int, str]:
    """One row of the worker's allocation_audit table, exported as NDJSON."""
    record: dict[str, Any] = {"ts": ts_milli_z(ns), "entity_kind": kind, "entity_id": entity}
    if frm:
        record["from"] = frm
    record["to"] = to
    attributes = fields.pop("attributes", None)
    if attributes:
        record["attributes"] = attributes
    record.update({key: value for key, value in fields.items() if value is not None})
    record.setdefault("service", "workflow-worker")
    return ns, json.dumps(record, separators=(",", ":"))


def job_event(
    ns: int, job: int, level: str, stdout: str, event: str, host: str | None, **fields: Any
) -> tuple[int, str]:
    """An AWX job event from the controller's external logging (awx.analytics.job_events),
    remapped by the log shipper to the record schema: ``@timestamp`` to ``ts``, the stdout
    line to ``event``, ``host_name`` to ``node_id``, the job to ``workflow_id`` as
    ``aap:<id>``."""
    record: dict[str, Any] = {
        "ts": ts_micro_z(ns),
        "level": level,
        "event": stdout,
        "service": "aap-controller",
        "layer": "provider",
        "logger_name": "awx.analytics.job_events",
        "awx_event": event,
        "job": job,
        "workflow_id": f"aap:{job}",
    }
    if host:
        record["node_id"] = host
    record.update(fields)
    return ns, json.dumps(record, separators=(",", ":"))


def awx_job(
    job_id: int,
    name: str,
    template: int,
    status: str,
    created: int,
    started: int | None,
    finished: int | None,
    extra_vars: dict[str, Any],
    *,
    explanation: str = "",
    execution_node: str = "aap-exec-1",
    launch_type: str = "manual",
    job_type: str = "job",
) -> dict[str, Any]:
    """A job object as ``GET /api/v2/jobs/N/`` returns it (field names of the AWX API)."""
    elapsed = round((finished - started) / NS, 3) if started and finished else 0.0
    return {
        "id": job_id,
        "type": job_type,
        "url": f"/api/v2/jobs/{job_id}/",
        "related": {
            "job_template": f"/api/v2/job_templates/{template}/",
            "stdout": f"/api/v2/jobs/{job_id}/stdout/",
            "job_events": f"/api/v2/jobs/{job_id}/job_events/",
        },
        "summary_fields": {
            "job_template": {"id": template, "name": name, "description": ""},
            "inventory": {"id": 4, "name": "baremetal-fleet", "kind": ""},
            "execution_environment": {
                "id": 7,
                "name": "ee-baremetal",
                "image": "registry.dc1.example.net/ee-baremetal:3.0",
            },
            "launched_by": {"id": 11, "name": "workflow-worker-sa", "type": "user"},
        },
        "created": ts_micro_z(created),
        "modified": ts_micro_z(finished or started or created),
        "name": name,
        "description": "",
        "job_type": "run",
        "inventory": 4,
        "project": 3,
        "playbook": f"{name}.yml",
        "launch_type": launch_type,
        "status": status,
        "failed": status in ("failed", "error"),
        "started": ts_micro_z(started) if started else None,
        "finished": ts_micro_z(finished) if finished else None,
        "canceled_on": ts_micro_z(finished) if status == "canceled" and finished else None,
        "elapsed": elapsed,
        "job_explanation": explanation,
        "execution_node": execution_node,
        "controller_node": "aap-ctrl-1",
        "job_template": template,
        "extra_vars": json.dumps(extra_vars),
        "artifacts": {},
        "result_traceback": "",
        "event_processing_finished": finished is not None,
    }


def provision_request(
    name: str,
    allocation_id: str,
    node_id: str | None,
    created: int,
    resource_version: int,
    *,
    job_id: int | None,
    state: str,
    message: str,
    changed: int,
    deletion: int | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ProvisionRequest custom resource as ``kubectl get -o json`` prints it."""
    labels = {
        "app.kubernetes.io/managed-by": "provisioning-operator",
        "provisioning.example.com/allocation-id": allocation_id,
    }
    if node_id:
        labels["provisioning.example.com/node-id"] = node_id
    metadata: dict[str, Any] = {
        "creationTimestamp": ts_k8s(created),
        "finalizers": ["provisioning.example.com/node-cleanup"],
        "generation": 1,
        "labels": labels,
        "name": name,
        "namespace": "tenant-nimbus",
        "resourceVersion": str(resource_version),
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"provisionrequest/{name}")),
    }
    if deletion:
        metadata["deletionTimestamp"] = ts_k8s(deletion)
        metadata["deletionGracePeriodSeconds"] = 0
    status: dict[str, Any] = {"observedGeneration": 1}
    if conditions:
        status["conditions"] = conditions
    job: dict[str, Any] = {
        "lastTransitionTime": ts_k8s(changed),
        "message": message,
        "state": state,
    }
    if job_id:
        job |= {"id": str(job_id), "provider": "aap"}
    status["provisionJob"] = job
    return {
        "apiVersion": "provisioning.example.com/v1alpha1",
        "kind": "ProvisionRequest",
        "metadata": metadata,
        "spec": {"allocationId": allocation_id, "flavor": "bm.std.2x", "image": "rhel-9.4"},
        "status": status,
    }


def k8s_list(items: list[dict[str, Any]]) -> str:
    return (
        json.dumps(
            {
                "apiVersion": "v1",
                "items": items,
                "kind": "List",
                "metadata": {"resourceVersion": ""},
            },
            indent=4,
        )
        + "\n"
    )


def k8s_watch(items: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n"
        for kind, obj in items
    )


# -- captured HTTP traffic, moved to the incident's time --------------------------------------

_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def _shift_iso(text: str, delta_ns: int) -> str:
    """Move an ISO 8601 time, keeping its UTC offset and its number of fraction digits."""
    moment = datetime.fromisoformat(text)
    moved = moment + timedelta(microseconds=delta_ns // 1000)
    fraction = re.search(r"\.(\d+)", text)
    digits = len(fraction.group(1)) if fraction else 0
    return moved.isoformat(timespec={0: "seconds", 3: "milliseconds", 6: "microseconds"}[digits])


def _shift_nginx_json(line: str, delta_ns: int, _api_end_ns: int) -> tuple[int, str]:
    record = json.loads(line)
    whole, _, millis = record["msec"].partition(".")
    moved_ns = int(whole) * NS + int(millis.ljust(3, "0")) * 1_000_000 + delta_ns
    moved_ms = round(moved_ns / 1_000_000)
    new_msec = f"{moved_ms // 1000}.{moved_ms % 1000:03d}"
    new_iso = datetime.fromtimestamp(moved_ms // 1000, UTC).isoformat()
    line = line.replace(f'"msec":"{record["msec"]}"', f'"msec":"{new_msec}"')
    line = line.replace(f'"time_iso8601":"{record["time_iso8601"]}"', f'"time_iso8601":"{new_iso}"')
    return moved_ms * 1_000_000, line


_LOCAL = re.compile(r"\[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})\]")


def _shift_nginx_combined(line: str, _delta_ns: int, api_end_ns: int) -> tuple[int, str]:
    """$time_local has whole seconds: the second in which the (moved) request completed,
    which is just after the API's last line for it."""
    match = _LOCAL.search(line)
    if match is None:
        raise ValueError(f"no time in {line!r}")
    completed = (api_end_ns + 500_000) // NS
    moved = datetime.fromtimestamp(completed, UTC)
    text = f"[{moved.day:02d}/{_MONTHS[moved.month - 1]}/{moved.year}:{moved:%H:%M:%S} +0000]"
    return api_end_ns + 500_000, line[: match.start()] + text + line[match.end() :]


def _api_ns(line: str) -> int:
    moment = datetime.fromisoformat(json.loads(line)["ts"])
    return int(moment.timestamp()) * NS + moment.microsecond * 1000


def _shift_api(line: str, delta_ns: int) -> tuple[int, str]:
    old = json.loads(line)["ts"]
    new = _shift_iso(old, delta_ns)
    return _api_ns(line) + delta_ns, line.replace(f'"ts": "{old}"', f'"ts": "{new}"', 1)


@dataclass
class Http:
    """The captured traffic of one case: requests by label, moved by :meth:`place`."""

    case: str
    nginx: list[tuple[int, str]] = field(default_factory=list)
    api: list[tuple[int, str]] = field(default_factory=list)
    request_ids: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        folder = CAPTURE / "http" / self.case
        self._access = folder.joinpath("access.log").read_text("utf-8").splitlines()
        self._api = folder.joinpath("api.ndjson").read_text("utf-8").splitlines()
        self._requests = json.loads(folder.joinpath("requests.json").read_text("utf-8"))
        self.request_ids = {r["label"]: r["request_id"] for r in self._requests}
        self.status = {r["label"]: r["status"] for r in self._requests}

    def place(self, label: str, ns: int) -> None:
        """Put request ``label`` at ``ns`` (its API lines start there, nginx logs it after)."""
        rid = self.request_ids[label]
        api_lines = [line for line in self._api if f'"correlation_id": "{rid}"' in line]
        first = min(_api_ns(line) for line in api_lines)
        delta = ns - first
        moved = [_shift_api(line, delta) for line in api_lines]
        self.api.extend(moved)
        access = next(line for line in self._access if rid in line)
        shift = _shift_nginx_json if access.startswith("{") else _shift_nginx_combined
        self.nginx.append(shift(access, delta, max(ns for ns, _ in moved)))


# -- a case --------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    seed: str
    owner: str
    notes: str
    first_failure: str | None = None
    excluded: list[str] = field(default_factory=list)
    files: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def log(self, filename: str, kind: str, *lines: tuple[int, str]) -> None:
        self.files.setdefault(filename, []).extend(lines)
        self.sources[filename] = kind

    def document(self, filename: str, kind: str, text: str) -> None:
        self.documents[filename] = text
        self.sources[filename] = kind

    def write(self) -> None:
        folder = TARGET / self.name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for filename, lines in self.files.items():
            # A log is in the order its writer wrote it: by its own clock.
            ordered = [text for _, text in sorted(lines, key=lambda item: item[0])]
            (folder / filename).write_text("\n".join(ordered) + "\n", "utf-8")
        for filename, text in self.documents.items():
            (folder / filename).write_text(text, "utf-8")
        truth: dict[str, Any] = {"seed": self.seed, "owner_layer": self.owner}
        if self.first_failure:
            truth["first_failure_contains"] = self.first_failure
        if self.excluded:
            truth["excluded"] = self.excluded
        truth["sources"] = dict(sorted(self.sources.items()))
        truth["notes"] = " ".join(self.notes.split())
        (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", "utf-8")


PROVENANCE = (
    "Program output: Go ({go}) os/exec and os errors from w_nodeagent.go; Python 3.11 "
    "tracebacks from w_capture_python.py (Debian python3.11, transitions 0.9.3); "
    "{ipmitool}; {ansible} playbooks from w_capture_ansible.sh; nginx ({nginx}) in front of "
    "the FastAPI app w_api_app.py (fastapi 0.165.0, starlette 1.10.0, uvicorn 0.54.0) via "
    "w_ingress_run.py, the requests sent with curl 7.88.1 and httpx 0.28.1; all captured on "
    "2026-11-29 and moved to the incident's date by w_build.py (timestamps only)."
)


def provenance() -> str:
    return PROVENANCE.format(
        go=version("go").replace("go version ", ""),
        ipmitool=version("ipmitool"),
        ansible=version("ansible").replace("ansible-playbook [core ", "ansible-core ").rstrip("]"),
        nginx=version("nginx").replace("nginx version: ", ""),
    )


def main() -> None:
    import w_cases  # the cases, built with this module's helpers

    for build in w_cases.CASES:
        built = build()
        built.write()
        print(built.name, built.owner)


if __name__ == "__main__":
    main()
