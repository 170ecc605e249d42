"""The demo's evidence in each layer's own form, and the writer that collects it per file.

:class:`Writer` keeps the lines of each evidence file (``agent.ndjson``, ``nginx-access.log``,
``nginx-error.log``, ``postgres.json``, ``workflow.ndjson``, ``jobs.ndjson``,
``k8s-provisionrequests.json``) and records allocation transitions as the workflow worker
does. The builders shape one record as its layer writes it: an ``agent_logging`` JSON record
(:func:`record`), the times of nginx's access and error logs and of PostgreSQL's log
(:func:`nginx_time`, :func:`nginx_error_time`, :func:`pg_time`), a
``log_min_duration_statement`` line with a sqlcommenter comment (:func:`statement`), one
request through the ingress to the API with access lines on both sides (:func:`request`; the
API's clock runs :data:`API_SKEW_NS` ahead of the ingress), and an AAP job or EDA activation
job (:func:`provider_job`).
:mod:`correlator._demo_story` tells the incident with them.
"""

from __future__ import annotations

import random
import time
from typing import Any, Final

import orjson

from agent_logging.schema import rfc3339_ns

__all__ = [
    "API_SKEW_NS",
    "Writer",
    "nginx_error_time",
    "nginx_time",
    "pg_time",
    "provider_job",
    "record",
    "request",
    "statement",
]

_S: Final = 1_000_000_000
API_SKEW_NS: Final = 1_200_000_000


class Writer:
    """Collects lines per evidence file."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}

    def line(self, name: str, text: str) -> None:
        self.files.setdefault(name, []).append(text)

    def json(self, name: str, record: dict[str, Any]) -> None:
        self.line(name, orjson.dumps(record).decode())

    def transition(
        self,
        ts_ns: int,
        allocation: str,
        states: tuple[str | None, str],
        attributes: dict[str, str],
        **ids: str,
    ) -> None:
        """One allocation state transition, as the workflow worker records it."""
        self.json(
            "workflow.ndjson",
            {
                "ts": rfc3339_ns(ts_ns),
                "entity_kind": "allocation",
                "entity_id": allocation,
                "from": states[0],
                "to": states[1],
                "attributes": attributes,
                "allocation_id": allocation,
                **ids,
                "service": "workflow-worker",
            },
        )


def record(
    ts_ns: int, service: str, layer: str, event: str, level: str = "info", **fields: Any
) -> dict[str, Any]:
    return {
        "ts": rfc3339_ns(ts_ns),
        "level": level,
        "event": event,
        "service": service,
        "layer": layer,
        "env": "demo",
        **fields,
    }


def nginx_time(ts_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(ts_ns // _S))


def nginx_error_time(ts_ns: int) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(ts_ns // _S))


def pg_time(ts_ns: int) -> str:
    seconds = ts_ns // _S
    return (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
        + f".{(ts_ns % _S) // 1_000_000:03d} UTC"
    )


def _sql_comment(**ids: str) -> str:
    return "/*" + ",".join(f"{k}='{v}'" for k, v in sorted(ids.items())) + "*/"


def statement(state: str, allocation: str, **ids: str) -> str:
    """A ``log_min_duration_statement`` line for an UPDATE carrying a sqlcommenter comment."""
    update = f"UPDATE allocations SET state = '{state}' WHERE id = '{allocation}'"  # noqa: S608 - log text, never run
    return f"duration: 1.204 ms  statement: {update} {_sql_comment(**ids)}"


def request(
    w: Writer,
    rng: random.Random,
    ts_ns: int,
    *,
    method: str,
    path: str,
    status: int,
    ids: dict[str, str],
    upstream_status: int | None = None,
    duration_s: float = 0.08,
    api: bool = True,
) -> str:
    """One request through the ingress to the API: access lines on both sides."""
    correlation_id = ids.setdefault("correlation_id", f"c-{rng.getrandbits(48):012x}")
    trace_id = f"{rng.getrandbits(128):032x}"
    span_id = f"{rng.getrandbits(64):016x}"
    api_end = ts_ns - int(0.004 * _S)
    if api:
        w.json(
            "agent.ndjson",
            record(
                api_end + API_SKEW_NS,
                "provisioning-api",
                "api",
                "request",
                "error" if status >= 500 else "info",
                method=method,
                path=path,
                status=status,
                duration_s=round(duration_s - 0.01, 4),
                trace_id=trace_id,
                span_id=span_id,
                logger="agent_logging.access",
                **ids,
            ),
        )
    w.json(
        "nginx-access.log",
        {
            "time_iso8601": nginx_time(ts_ns),
            "msec": f"{ts_ns / _S:.3f}",
            "request_id": f"{rng.getrandbits(128):032x}",
            "remote_addr": "10.20.0.5",
            "request_method": method,
            "request_uri": path,
            "status": str(status),
            "request_time": f"{duration_s:.3f}",
            "upstream_status": str(upstream_status or status),
            "upstream_addr": "127.0.0.1:8001",
            "http_x_correlation_id": correlation_id,
            "server_name": "api.provisioning.local",
        },
    )
    return correlation_id


def provider_job(
    provider: str,
    job_id: int,
    allocation: str,
    workflow: str,
    *,
    created: int,
    started: int,
    finished: int | None,
    status: str,
) -> dict[str, Any]:
    if provider == "aap":
        return {
            "id": job_id,
            "type": "job",
            "name": "provision-baremetal",
            "status": status,
            "created": rfc3339_ns(created),
            "started": rfc3339_ns(started),
            "finished": rfc3339_ns(finished) if finished else None,
            "elapsed": round(((finished or started) - started) / _S, 3),
            "failed": status in ("failed", "error"),
            "job_explanation": "Job was canceled by the provisioning operator"
            if status == "canceled"
            else "",
            "launch_type": "manual",
            "job_template": 12,
            "extra_vars": orjson.dumps(
                {"allocation_id": allocation, "workflow_id": workflow}
            ).decode(),
        }
    return {
        "id": job_id,
        "name": f"provision-{allocation}",
        "status": status,
        "activation_id": 3,
        "started_at": rfc3339_ns(started),
        "ended_at": rfc3339_ns(finished) if finished else None,
        "created_at": rfc3339_ns(created),
        "extra_vars": orjson.dumps({"allocation_id": allocation, "workflow_id": workflow}).decode(),
    }
