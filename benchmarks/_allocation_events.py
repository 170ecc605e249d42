"""The evidence one allocation leaves in the five layers, for the benchmark fleet.

:class:`AllocationEvents` writes, for one allocation on one node: the tenant's requests
(ingress access, the API's access record and its log lines, a database statement), its
workflows (provision, release, sometimes a reconfiguration: lifecycle transitions, the
node agent's task steps through the ingress, statements), and, for about 3 % of them, a
failure with its owner layer wrapped by the API's "provisioning failed"; also the node's
heartbeats and reimages. ``benchmarks.fleet`` decides which allocation runs where and when.
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import TYPE_CHECKING, Any, Final

from agent_logging.schema import rfc3339_ns

if TYPE_CHECKING:
    from benchmarks.fleet import Writer

__all__ = ["MIN", "AllocationEvents", "S", "random_hex"]

#: A second and a minute, in nanoseconds.
S: Final = 1_000_000_000
MIN: Final = 60 * S

# Owner layers of the failures, with the layer that reports them and what it says.
_FAILURES: Final = (
    ("cert", "ingress", "SSL_do_handshake() failed: certificate has expired", "SSLError"),
    ("ingress", "ingress", "connect() failed (111: Connection refused) to upstream", "Upstream"),
    ("db", "db", "deadlock detected", "DeadlockDetected"),
    ("deploy", "node", "image checksum mismatch after download", "DeployError"),
    ("node", "node", "BMC did not answer power-on within 300 s", "PowerError"),
)


#: What the node agent's task logs at each step of a workflow of this kind.
_STEPS: Final = {
    "provision": (
        "task claimed",
        "firmware checked",
        "disks wiped",
        "image written",
        "network configured",
        "cloud-init done",
        "task finished",
    ),
    "release": (
        "task claimed",
        "tenant keys removed",
        "disks wiped",
        "bmc reset",
        "task finished",
    ),
    "reconfigure": ("task claimed", "bios settings applied", "reboot done", "task finished"),
}


def random_hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _uuid4(rng: random.Random) -> str:
    h = random_hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


class AllocationEvents:
    """Writes the records of allocations, requests, workflows and heartbeats; a subclass sets
    the attributes below (``benchmarks.fleet``'s generator)."""

    rng: random.Random
    out: Writer
    #: node -> [(from_ns, instance)]: records look up the instance of their moment.
    instances: dict[str, list[tuple[int, str]]]
    #: How far ahead of the ingress's clock the API's runs.
    api_skew_ns: int

    def _instance(self, node: str, ts_ns: int) -> str:
        history = self.instances[node]
        return history[bisect.bisect_right(history, (ts_ns, "~")) - 1][1]

    def _heartbeat(self, ts_ns: int, node: str) -> None:
        self.out.add(
            ts_ns,
            "node",
            {
                "ts": rfc3339_ns(ts_ns),
                "level": "info",
                "event": "heartbeat",
                "service": "node-agent",
                "layer": "node",
                "env": "prod",
                "node_id": node,
                "node_instance_id": self._instance(node, ts_ns),
                "load1": round(self.rng.uniform(0.0, 4.0), 2),
                "agent_version": "2.14.3",
            },
        )

    def _record(self, ts_ns: int, layer: str, service: str, event: str, **fields: Any) -> None:
        record = {
            "ts": rfc3339_ns(ts_ns),
            "level": "info",
            "event": event,
            "service": service,
        }
        record["layer"] = layer
        record["env"] = "prod"
        record.update(fields)
        self.out.add(ts_ns, layer, record)

    def _request(
        self,
        end_ns: int,
        method: str,
        path: str,
        status: int,
        *,
        allocation: str,
        failure: tuple[str, str, str, str] | None = None,
    ) -> str:
        """A tenant request: ingress access, API access + log line(s), one statement."""
        rng = self.rng
        correlation = _uuid4(rng)
        trace = random_hex(rng, 32)
        ingress_span, api_span = random_hex(rng, 16), random_hex(rng, 16)
        duration = rng.uniform(0.01, 0.4)
        self._record(
            end_ns,
            "ingress",
            "edge-nginx",
            "request",
            method=method,
            path=path,
            status=status,
            duration_s=round(duration, 4),
            correlation_id=correlation,
            trace_id=trace,
            span_id=ingress_span,
            client="10.40.2.17",
            upstream="provisioning-api:8000",
        )
        api_end = end_ns - int(0.002 * S) + self.api_skew_ns
        common = {
            "correlation_id": correlation,
            "allocation_id": allocation,
            "trace_id": trace,
        }
        self._record(
            api_end - int(duration * 0.6 * S),
            "db",
            "postgres",
            "statement",
            duration_ms=round(rng.uniform(0.2, 8.0), 3),
            statement="SELECT|UPDATE allocations",
            **common,
        )
        if failure is not None:
            self._record(
                api_end - int(duration * 0.2 * S),
                "api",
                "provisioning-api",
                "provisioning failed",
                level="error",
                span_id=api_span,
                error={
                    "type": "ProvisioningFailed",
                    "message": "provisioning failed",
                    "owner_layer": "unknown",
                    "chain": [{"type": failure[3], "message": failure[2]}],
                },
                **common,
            )
        elif rng.random() < 0.7:
            self._record(
                api_end - int(duration * 0.3 * S),
                "api",
                "provisioning-api",
                rng.choice(("allocation read", "allocation updated", "quota checked")),
                span_id=api_span,
                **common,
            )
        self._record(
            api_end,
            "api",
            "provisioning-api",
            "request",
            level="error" if status >= 500 else "info",
            logger="agent_logging.access",
            method=method,
            path=path,
            status=status,
            duration_s=round(duration - 0.003, 4),
            span_id=api_span,
            parent_span_id=ingress_span,
            **common,
        )
        return correlation

    def _workflow(
        self,
        t: int,
        kind: str,
        allocation: str,
        node: str,
        instance: str,
        states: tuple[str, ...],
        failure: tuple[str, str, str, str] | None,
    ) -> tuple[int, str, list[str]]:
        """One workflow: transitions, agent calls through the ingress, the agent's steps."""
        rng = self.rng
        workflow = f"wf-{random_hex(rng, 12)}"
        provider = "aap" if rng.random() < 0.6 else "eda"
        ids = {"allocation_id": allocation, "workflow_id": workflow, "node_id": node}
        correlations = []
        for before, after in itertools.pairwise(states):
            failing = failure is not None and after == states[-1]
            to_state = f"{kind}_failed" if failing else after
            self._record(
                t,
                "workflow",
                "workflow-worker",
                f"allocation {allocation}: {before} → {to_state}",
                level="error" if failing else "info",
                entity_kind="allocation",
                entity_id=allocation,
                state_from=before,
                state_to=to_state,
                provider=provider,
                **ids,
            )
            if after == states[-1]:
                break
            # The worker calls the node agent through the ingress, 1-2 times per phase.
            for _ in range(rng.randint(1, 2)):
                t += int(rng.uniform(1, 20) * S)
                correlation = _uuid4(rng)
                correlations.append(correlation)
                self._record(
                    t,
                    "workflow",
                    "workflow-worker",
                    "calling node agent",
                    correlation_id=correlation,
                    **ids,
                )
                duration = rng.uniform(0.05, 1.5)
                call_end = t + int(duration * S)
                self._record(
                    call_end,
                    "ingress",
                    "edge-nginx",
                    "request",
                    method="POST",
                    path="/v1/tasks",
                    status=202,
                    duration_s=round(duration, 4),
                    correlation_id=correlation,
                    client="10.40.3.9",
                    upstream=f"{node}:9443",
                )
                self._record(
                    call_end - int(0.001 * S),
                    "node",
                    "node-agent",
                    "request",
                    logger="agent_logging.access",
                    method="POST",
                    path="/v1/tasks",
                    status=202,
                    duration_s=round(duration - 0.002, 4),
                    correlation_id=correlation,
                    node_instance_id=instance,
                    **ids,
                )
                for step in rng.sample(_STEPS[kind], rng.randint(2, 4)):
                    t += int(rng.uniform(5, 90) * S)
                    self._record(
                        t,
                        "node",
                        "node-agent",
                        step,
                        task=kind,
                        node_instance_id=instance,
                        **ids,
                    )
            t += int(rng.uniform(0.5, 3) * S)
            self._record(
                t,
                "db",
                "postgres",
                "statement",
                duration_ms=round(rng.uniform(0.3, 5.0), 3),
                statement="UPDATE allocations SET state",
                allocation_id=allocation,
                workflow_id=workflow,
            )
            t += int(rng.uniform(1, 30) * S)
        if failure is not None:
            owner, layer, message, error_type = failure
            fields: dict[str, Any] = {
                "level": "error",
                "error": {"type": error_type, "message": message, "owner_layer": owner},
            }
            if layer == "node":
                fields["node_instance_id"] = instance
            elif layer == "ingress":
                fields["correlation_id"] = correlations[-1] if correlations else _uuid4(rng)
            service = {"ingress": "edge-nginx", "db": "postgres", "node": "node-agent"}[layer]
            self._record(t - int(2 * S), layer, service, message, **fields, **ids)
        return t, workflow, correlations

    def _allocation(self, begin: int, lease: int, node: str) -> dict[str, list[str]]:
        rng = self.rng
        allocation = f"alloc-{random_hex(rng, 10)}"
        history = self.instances[node]
        instance = history[-1][1]
        t = begin
        if rng.random() < 0.2:  # reimaged before the new tenant
            new = f"ni-{random_hex(rng, 10)}"
            self._record(
                t + 5 * S,
                "node",
                "node-agent",
                "reimage requested by inventory",
                node_id=node,
                node_instance_id=instance,
            )
            history.append((t + 120 * S, new))
            instance = new
            self._record(
                t + 120 * S,
                "node",
                "node-agent",
                "agent started on a fresh image",
                node_id=node,
                node_instance_id=instance,
            )
            t += 130 * S
        failure = rng.choice(_FAILURES) if rng.random() < 0.03 else None
        correlations = [
            self._request(
                t + int(rng.uniform(0.05, 1) * S),
                "POST",
                "/v1/allocations",
                201,
                allocation=allocation,
            )
        ]
        t += 2 * S
        workflows = []
        t, workflow, calls = self._workflow(
            t,
            "provision",
            allocation,
            node,
            instance,
            ("requested", "provisioning", "active"),
            failure,
        )
        workflows.append(workflow)
        correlations += calls
        requests = rng.randint(3, 10) - 2
        polls = requests // 2
        path = f"/v1/allocations/{allocation}"
        end = begin + lease
        for i in range(polls):
            when = begin + int((i + 1) * (t - begin) / (polls + 1)) + int(rng.uniform(0, 1) * S)
            status = 500 if failure is not None and i == polls - 1 else 200
            correlations.append(
                self._request(
                    when,
                    "GET",
                    path,
                    status,
                    allocation=allocation,
                    failure=failure if status == 500 else None,
                )
            )
        for _ in range(requests - polls):
            when = t + int(rng.uniform(0.1, 0.9) * max(end - t, MIN))
            correlations.append(self._request(when, "GET", path, 200, allocation=allocation))
        if failure is None and rng.random() < 0.3:
            mid = t + int(rng.uniform(0.2, 0.6) * max(end - t, MIN))
            _, workflow, calls = self._workflow(
                mid,
                "reconfigure",
                allocation,
                node,
                instance,
                ("active", "reconfiguring", "active"),
                None,
            )
            workflows.append(workflow)
            correlations += calls
        release_at = max(end - 20 * MIN, t + MIN)
        correlations.append(self._request(release_at, "DELETE", path, 202, allocation=allocation))
        _, workflow, calls = self._workflow(
            release_at + 2 * S,
            "release",
            allocation,
            node,
            instance,
            ("active", "releasing", "released"),
            None,
        )
        workflows.append(workflow)
        correlations += calls
        return {
            "allocation_id": [allocation],
            "correlation_id": correlations,
            "workflow_id": workflows,
        }
