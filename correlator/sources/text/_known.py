"""What the ``text`` source knows of the built-in formats without being told: which fields
name a record's service, the identifier rules that come with each format, and the layers that
common service names place their records in.

The identifier rules (:data:`BUILTIN_IDS`), first first:

- every format: a field named like one of our identifiers (``allocation_id``, ``trace_id``,
  ...) is that identifier; a request id under the names other libraries and proxies give it
  (``request_id``, ``requestId``, ``req_id``, ``x-request-id``, ``X-Request-ID``,
  ``correlation-id``, ...) is the ``correlation_id``; ``trace.id``/``traceId`` (ECS,
  OpenTelemetry's JSON) and ``span.id``/``spanId`` the trace context;
- ``oslo`` (OpenStack): the request context's global request id, else its request id, is the
  ``correlation_id`` (oslo.context carries the request id over RPC, and a service called by
  another writes the caller's as its global one: nova's ``req-`` id reappears in ironic's
  line); ``[instance: <uuid>]`` and a compute API path (``/servers/<uuid>``) name the
  ``allocation_id`` (an instance is what a node is allocated to); a bare-metal node
  (``Node <uuid>``, ironic's ``/nodes/<uuid>``) the ``node_id``;
- ``klog``: the structured ``node`` key is the ``node_id``;
- ``syslog`` and ``journald``: the host that wrote the line (``host``, ``_HOSTNAME``) is the
  ``node_id``, and journald's ``_MACHINE_ID`` (regenerated when a machine is installed
  afresh) the ``node_instance_id``.

Service (:data:`SERVICE_FIELDS`): the first of a format's service fields present; else the
``--service`` option; else the input file's name up to its first dot (``nova-compute.log.1``
is ``nova-compute``; standard input and request bodies have none).

Layers (:data:`NAMED_LAYERS`): without ``--layer``, a record is placed by its service's name
as control planes commonly name their parts: API servers (``*-api``, ``kube-apiserver``) in
``api``; proxies (``nginx``, ``haproxy``, ``envoy``, ``traefik``, ingress controllers) in
``ingress``; databases (``postgres``, ``mysql``, ``mariadb``) in ``db``; what drives the work
(``*-conductor``, ``*-scheduler``, ``*-engine``, operators, controllers, Ansible, AWX) in
``workflow``; what runs on the machine itself (``*-compute``, ``*-agent``, ``kubelet``,
``systemd``, the kernel) in ``node``. A record none of them places is rejected with a reason
that says to give ``--layer``.
"""

from __future__ import annotations

import re
from typing import Final

from correlator.sources.text._rules import ID_TARGETS, IdRule, LayerRule

__all__ = ["BUILTIN_IDS", "NAMED_LAYERS", "SERVICE_FIELDS", "rules_for"]

_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def _field(name: str, to: str, *formats: str) -> IdRule:
    return IdRule(to, field=name, formats=frozenset(formats), name=f"field {name}")


def _pattern(pattern: str, to: str, *formats: str, needs: str, field: str = "message") -> IdRule:
    return IdRule(
        to,
        field=field,
        pattern=re.compile(pattern),
        formats=frozenset(formats),
        name=f"pattern {pattern} in {field}",
        needs=needs,
    )


_OWN_NAMES: Final = tuple(_field(key, key) for key in ID_TARGETS)
_REQUEST_ALIASES: Final = (
    "request_id",
    "requestId",
    "RequestId",
    "request-id",
    "req_id",
    "reqId",
    "x-request-id",
    "x_request_id",
    "X-Request-ID",
    "X-Request-Id",
    "correlationId",
    "correlation-id",
    "x-correlation-id",
    "X-Correlation-ID",
)

#: Every built-in identifier rule, first first.
BUILTIN_IDS: Final[tuple[IdRule, ...]] = (
    *_OWN_NAMES,
    _field("global_request_id", "correlation_id", "oslo"),
    *(_field(name, "correlation_id") for name in _REQUEST_ALIASES),
    _field("trace.id", "trace_id"),
    _field("traceId", "trace_id"),
    _field("span.id", "span_id"),
    _field("spanId", "span_id"),
    _field("instance", "allocation_id", "oslo"),
    _pattern(rf"/servers/({_UUID})\b", "allocation_id", "oslo", needs="/servers/"),
    _pattern(rf"(?i:\bnode) ({_UUID})\b", "node_id", "oslo", needs=""),  # any case
    _pattern(rf"/nodes/({_UUID})\b", "node_id", "oslo", needs="/nodes/"),
    _field("node", "node_id", "klog"),
    _field("host", "node_id", "syslog"),
    _field("_HOSTNAME", "node_id", "journald"),
    _field("_MACHINE_ID", "node_instance_id", "journald"),
)

#: The fields that name a record's service, by format, first present first.
SERVICE_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "oslo": ("file",),
    "syslog": ("app",),
    "journald": ("SYSLOG_IDENTIFIER", "_COMM", "_SYSTEMD_UNIT"),
    "logfmt": ("service", "app", "component"),
    "json": ("service", "service.name", "app", "application", "component"),
}


def _named(layer: str, pattern: str) -> LayerRule:
    return LayerRule(layer, re.compile(pattern, re.IGNORECASE), name=f"service name {pattern}")


#: The layers common service names place their records in, first match first.
NAMED_LAYERS: Final[tuple[LayerRule, ...]] = (
    _named("ingress", r"nginx|haproxy|envoy|traefik|ingress"),
    _named("db", r"postgres|mysql|mariadb"),
    _named("api", r"(^|[-_.])api([-_.]|$)|apiserver"),
    _named(
        "workflow",
        r"[-_.](conductor|scheduler|engine)$|operator|controller|ansible|awx|workflow",
    ),
    _named("node", r"[-_.](compute|agent)$|^agent|kubelet|^kernel$|^systemd|node"),
)


def rules_for(format_name: str, rules: tuple[IdRule, ...] = BUILTIN_IDS) -> tuple[IdRule, ...]:
    """The rules of ``rules`` that apply to a format, in their order."""
    return tuple(rule for rule in rules if not rule.formats or format_name in rule.formats)
