"""The findings' vocabulary: the state sets and the projection table the rules judge by, and
the result (:class:`Finding`).

Separate from the package's ``__init__`` so that ``_matching`` and ``_rules`` can import them
without a cycle; ``correlator.findings`` re-exports every public name. State names are
lower-case: the rules compare states case-insensitively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "ACTIVE_JOB_STATES",
    "FINISHED_PROJECTION_STATES",
    "PROJECTION_STATES",
    "PROVISIONING_STATES",
    "UNPUBLISHED_STATES",
    "VM_GONE_STATES",
    "Finding",
]

#: Provider-job states that are not finished: AAP new/pending/waiting/running, EDA
#: pending/starting/running.
ACTIVE_JOB_STATES: Final = frozenset({"new", "pending", "waiting", "starting", "running"})

#: Outbox-row states that mean "not yet published".
UNPUBLISHED_STATES: Final = frozenset({"created", "pending", "unpublished"})

#: Allocation states during which a CR deletion counts as "during provisioning".
PROVISIONING_STATES: Final = frozenset({"requested", "pending", "provisioning"})

#: Projection states that show the projected job had finished.
FINISHED_PROJECTION_STATES: Final = frozenset({"succeeded", "failed", "canceled"})

#: VM states that mean the VM is gone.
VM_GONE_STATES: Final = frozenset({"deleted", "absent", "destroyed"})

#: What a projection (a CR's status) should show for each provider-job state. AAP job statuses
#: (``/api/v2/jobs/``) and EDA activation statuses; ``new`` (AAP) and ``starting`` (EDA) are
#: queued states, EDA's ``error`` a failure. A job of unknown provider is looked up in AAP's
#: table, then EDA's: the two never map the same name differently.
PROJECTION_STATES: Final[Mapping[str, Mapping[str, str]]] = {
    "aap": {
        "new": "Pending",
        "pending": "Pending",
        "waiting": "Pending",
        "running": "Running",
        "successful": "Succeeded",
        "failed": "Failed",
        "error": "Failed",
        "canceled": "Canceled",
    },
    "eda": {
        "pending": "Pending",
        "starting": "Pending",
        "running": "Running",
        "completed": "Succeeded",
        "failed": "Failed",
        "error": "Failed",
        "stopped": "Canceled",
    },
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One stuck lifecycle, drifting projection or orphaned VM (see ``_rules``)."""

    kind: str
    rule: str
    severity: str
    entity_kind: str
    entity_id: str
    since_ns: int
    age_s: float
    threshold_s: float
    summary: str
    ids: Mapping[str, str] = field(default_factory=dict)
    evidence: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The JSON-able form (the docstring of ``correlator.findings`` shows it)."""
        return {
            "kind": self.kind,
            "rule": self.rule,
            "severity": self.severity,
            "entity_kind": self.entity_kind,
            "entity_id": self.entity_id,
            "since_ns": self.since_ns,
            "age_s": self.age_s,
            "threshold_s": self.threshold_s,
            "ids": dict(self.ids),
            "summary": self.summary,
            "evidence": list(self.evidence),
        }
