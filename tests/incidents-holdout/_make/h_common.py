"""Record styles of the hold-out cases: how each ecosystem's log line looks in the schema.

Every line keeps the record schema's keys (``ts``, ``level``, ``event``, ``service``,
``layer`` and the identifiers); the rest is what each logging library writes:

- pino (Node.js): the shipper maps ``time`` to ``ts``, the level number to its word, ``msg``
  to ``event``, ``err`` to ``error`` ``{type, message, stack, code...}``;
- zerolog (Go): lower-case levels (``warn``), ``error`` as a *string* (``err.Error()``),
  ``caller``, an optional ``stacktrace`` string;
- logback JSON (Java, logstash encoder): upper-case levels, ``logger_name``,
  ``thread_name``, ``stack_trace`` (``printStackTrace`` text), ``ts`` in the JVM's zone;
- oslo.log's JSONFormatter (OpenStack): ``levelname``, ``name``, ``funcname``,
  ``traceback`` as ``exception``, ``request_id`` (``req-<uuid>``), ``hostname``;
- controller-runtime (zap, Kubernetes operators): ``logger``, ``controller``,
  ``reconcileID``, ``error`` as a string, ``stacktrace``.
"""

from __future__ import annotations

import json
from typing import Any

from h_lab import iso

PINO_LEVELS = {10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal"}
# What a shipper keeps of a pino ``err`` (the rest is the driver's internals).
ERR_KEYS = (
    "type",
    "message",
    "stack",
    "code",
    "errno",
    "syscall",
    "address",
    "port",
    "severity",
    "routine",
    "cause",
)


def pino_lines(text: str) -> list[dict[str, Any]]:
    """pino's JSON lines (stdout of a Node.js service), parsed."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def from_pino(
    line: dict[str, Any], *, layer: str, skew_ms: int = 0, ids: dict[str, str] | None = None
) -> dict[str, Any]:
    """One pino line in the record schema (shipper's mapping), ``skew_ms`` added to its clock."""
    line = dict(line)
    millis = int(line.pop("time")) + skew_ms
    record: dict[str, Any] = {
        "ts": iso(millis * 1_000_000, digits=3),
        "level": PINO_LEVELS[int(line.pop("level"))],
        "event": line.pop("msg", ""),
        "service": line.pop("service"),
        "layer": layer,
    }
    line.pop("pid", None)
    line.pop("hostname", None)
    err = line.pop("err", None)
    record.update(line)
    record.update(ids or {})
    if err is not None:
        record["error"] = {k: err[k] for k in ERR_KEYS if k in err}
    return record


def zerolog(
    ns: int,
    level: str,
    event: str,
    *,
    service: str,
    layer: str,
    skew_s: float = 0.0,
    **fields: Any,
) -> dict[str, Any]:
    """A zerolog line (``time.RFC3339Nano`` stamps, ``error`` a string)."""
    return {
        "ts": iso(ns + int(skew_s * 1e9), digits=9),
        "level": level,
        "event": event,
        "service": service,
        "layer": layer,
        **fields,
    }


def logback(
    ns: int,
    level: str,
    event: str,
    *,
    service: str,
    layer: str,
    logger: str,
    thread: str = "main",
    offset_h: float = 1.0,
    skew_s: float = 0.0,
    **fields: Any,
) -> dict[str, Any]:
    """A logstash-logback-encoder line: ISO time in the JVM's zone, upper-case level."""
    return {
        "ts": iso(ns + int(skew_s * 1e9), digits=3, offset_h=offset_h),
        "@version": "1",
        "level": level.upper(),
        "level_value": {"DEBUG": 10000, "INFO": 20000, "WARN": 30000, "ERROR": 40000}[
            level.upper()
        ],
        "event": event,
        "service": service,
        "layer": layer,
        "logger_name": logger,
        "thread_name": thread,
        **fields,
    }


def controller_runtime(
    ns: int,
    level: str,
    event: str,
    *,
    layer: str = "workflow",
    skew_s: float = 0.0,
    **fields: Any,
) -> dict[str, Any]:
    """A controller-runtime (zap JSON, ``--zap-time-encoding=iso8601``) line."""
    return {
        "ts": iso(ns + int(skew_s * 1e9), digits=3),
        "level": level,
        "event": event,
        "service": "provisioning-operator",
        "layer": layer,
        **fields,
    }


def transition(
    ns: int,
    kind: str,
    entity: str,
    to: str,
    *,
    frm: str | None = None,
    attributes: dict[str, Any] | None = None,
    service: str = "workflow-engine",
    **ids: str,
) -> dict[str, Any]:
    """One lifecycle transition for the ``workflow`` source."""
    return {
        "ts": iso(ns, digits=6),
        "entity_kind": kind,
        "entity_id": entity,
        "from": frm,
        "to": to,
        "attributes": attributes,
        "service": service,
        **ids,
    }


def provision_request(
    name: str,
    namespace: str,
    *,
    allocation: str,
    phase: str,
    message: str,
    at: str,
    resource_version: int,
    created: str,
    node: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    uid: str = "",
    extra_labels: dict[str, str] | None = None,
    deletion: str | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    """A ProvisionRequest as the API server returns it (``status.phase`` style)."""
    labels = {
        "app.kubernetes.io/managed-by": "provisioning-operator",
        "provisioning.example.com/allocation-id": allocation,
        **({"provisioning.example.com/node-id": node} if node else {}),
        **(extra_labels or {}),
    }
    metadata: dict[str, Any] = {
        "creationTimestamp": created,
        "generation": 1,
        "labels": labels,
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "uid": uid,
    }
    if finalizers:
        metadata["finalizers"] = finalizers
    if deletion:
        metadata["deletionTimestamp"] = deletion
        metadata["deletionGracePeriodSeconds"] = 0
    return {
        "apiVersion": "provisioning.example.com/v1beta1",
        "kind": "ProvisionRequest",
        "metadata": metadata,
        "spec": {"allocationId": allocation, "flavor": "bm.gpu.a100x8", "image": "rhel-9.4"},
        "status": {
            "phase": phase,
            "message": message,
            "lastUpdated": at,
            "observedGeneration": 1,
            "conditions": conditions or [],
        },
    }


def watch_lines(events: list[tuple[str, dict[str, Any]]]) -> str:
    """``kubectl get -w --output-watch-events -o json`` output, one compact object a line."""
    return "".join(
        json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n"
        for kind, obj in events
    )
