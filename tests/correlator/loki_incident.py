"""One incident across five layers on a busy node, pushed into a Loki (the test server or the
real one) as ``agent_logging`` ships records: stream labels ``service_name``, ``layer`` and
``env``, the identifiers as structured metadata (``entry_from_record``).

Every value is unique to the run (``Incident.run``), and every stream carries ``env`` =
``it-<run>``, so a real Loki holding other data, or earlier runs, cannot answer for this one:
the pull's stream selector is :attr:`Incident.selector`.

The incident (allocation ``a``): the ingress line, API record and database line of its
request ``c``; its workflow run ``wf`` (one record naming the allocation, one naming only the
run); the node ``n`` (installation ``ni``) that deploys it and fails; a line of the node that
names no work, inside the incident's window. Not the incident's: the node's other
allocations (``a2``, ``a3``) and their request, and a line of the node half an hour earlier,
outside a 10-minute incident window.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_logging.loki import LokiClient
from agent_logging.loki._entries import PushEntry, entry_from_record
from agent_logging.schema import rfc3339_ns
from correlator import loki_pull
from correlator.store import Store
from tests.stored import stored_events

__all__ = ["OWN", "Incident", "pull_incident", "pulled_messages", "push_records", "wait_visible"]

_S = 1_000_000_000
#: The incident's window around its seed's evidence in these tests (``pull(window_s=...)``):
#: the node's line :data:`EARLY_S` before the incident is outside it, inside the operator's.
WINDOW_S = 600.0
EARLY_S = 1800


@dataclass
class Incident:
    """The identifiers of one run, and its records."""

    run: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    start_ns: int = field(default_factory=lambda: time.time_ns() - 120 * _S)

    def id(self, name: str) -> str:
        return f"{name}-{self.run}"

    @property
    def env(self) -> str:
        return f"it-{self.run}"

    @property
    def selector(self) -> str:
        return f'{{env="{self.env}"}}'

    def record(self, offset_s: float, layer: str, event: str, **fields: Any) -> dict[str, Any]:
        return {
            "ts": rfc3339_ns(self.start_ns + int(offset_s * _S)),
            "level": fields.pop("level", "info"),
            "event": event,
            "service": f"{layer}-svc",
            "layer": layer,
            "env": self.env,
            **fields,
        }

    def own(self) -> list[dict[str, Any]]:
        """The incident's eight records, oldest first."""
        c, a, wf, n, ni = (self.id(k) for k in ("c", "a", "wf", "n", "ni"))
        return [
            self.record(0.0, "ingress", "POST /v1/allocations", correlation_id=c),
            self.record(0.1, "api", "allocation created", correlation_id=c, allocation_id=a),
            self.record(0.2, "db", "INSERT INTO allocations", correlation_id=c),
            self.record(1.0, "workflow", "workflow started", allocation_id=a, workflow_id=wf),
            self.record(1.5, "workflow", "step provision", workflow_id=wf),
            self.record(2.0, "node", "deploy started", node_id=n, node_instance_id=ni,
                        allocation_id=a),
            self.record(3.0, "node", "disk latency high", node_id=n, node_instance_id=ni),
            self.record(4.0, "node", "deploy failed", level="error", node_id=n,
                        node_instance_id=ni, allocation_id=a, owner_layer="node"),
        ]  # fmt: skip

    def others(self) -> list[dict[str, Any]]:
        """The busy node's other work, and its line before the incident's window."""
        n, ni = self.id("n"), self.id("ni")
        records = [
            self.record(-EARLY_S, "node", "fan speed changed", node_id=n, node_instance_id=ni)
        ]
        for number, name in enumerate(("a2", "a3")):
            other = self.id(name)
            records.append(
                self.record(
                    0.5 + number,
                    "api",
                    "allocation created",
                    correlation_id=self.id(f"c-{name}"),
                    allocation_id=other,
                )
            )
            records += [
                self.record(
                    2.5 + number + step / 10,
                    "node",
                    f"task step {step}",
                    node_id=n,
                    node_instance_id=ni,
                    allocation_id=other,
                )
                for step in range(3)
            ]
        return records


def entries(records: list[dict[str, Any]]) -> list[PushEntry]:
    """The records as ``agent_logging`` ships them."""
    from correlator.sources._time import parse_rfc3339_ns

    return [
        entry_from_record(
            parse_rfc3339_ns(record["ts"]),
            orjson.dumps(record),
            node_id_label=False,
            default_labels={},
        )
        for record in records
    ]


def push_records(
    client: LokiClient, records: list[dict[str, Any]], timeout_s: float = 30.0
) -> None:
    """Push the records, oldest first (Loki takes a stream's entries up to an hour behind its
    newest), a thousand at a time, each again after a 429 until ``timeout_s`` (the tenant's
    4 MB/s may be spent by the test before); raise when Loki does not take them all."""
    ordered = sorted(entries(records), key=lambda entry: entry.ts_ns)
    pause = threading.Event()
    deadline = time.monotonic() + timeout_s
    start = 0
    while start < len(ordered):
        result = client.push(ordered[start : start + 1000])
        if result.outcome == "ok":
            start += 1000
        elif result.outcome == "retry" and time.monotonic() < deadline:
            pause.wait(result.refill_s or result.retry_after_s or 0.5)
        else:
            raise RuntimeError(f"Loki did not take the test's records: {result}")


def wait_visible(client: LokiClient, selector: str, expected: int, timeout_s: float) -> int:
    """Wait until a query of ``selector`` over the last two hours finds ``expected`` entries
    (a real Loki may take a moment); the number found."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout_s
    while True:
        now = time.time_ns()
        found = sum(
            1 for _ in client.iter_query_range(selector, start_ns=now - 7200 * _S, end_ns=now)
        )
        if found >= expected or time.monotonic() > deadline:
            return found
        pause.wait(0.5)


#: The events of the incident's own entries, sorted: what a pull must store, and nothing else.
OWN = sorted(
    [
        "POST /v1/allocations",
        "allocation created",
        "INSERT INTO allocations",
        "workflow started",
        "step provision",
        "deploy started",
        "disk latency high",
        "deploy failed",
    ]
)


def pull_incident(
    store: Store, fetch: loki_pull.Fetch, case: Incident, seed: str, **options: object
) -> loki_pull.Pull:
    """Pull ``seed``'s incident into ``store`` over the last ``since`` (an option, default 1h),
    the run's streams only, with the 10-minute incident window."""
    start_ns, end_ns = loki_pull.window(str(options.pop("since", "1h")), None, None)
    return loki_pull.pull(
        store,
        fetch,
        seed,
        start_ns=start_ns,
        end_ns=end_ns,
        base_selector=case.selector,
        window_s=WINDOW_S,
        **options,  # type: ignore[arg-type]
    )


def pulled_messages(store: Store) -> list[str]:
    """The ``event`` of every record the store holds, sorted."""
    return sorted(orjson.loads(event.raw)["event"] for event in stored_events(store))
