"""The findings' vocabulary: the state sets and the projection table the rules judge by, the
thresholds (:class:`FindingsConfig`) and the result (:class:`Finding`).

Separate from the package's ``__init__`` so that ``_matching`` and ``_rules`` can import them
without a cycle; ``correlator.findings`` re-exports every public name. State names are
lower-case: the rules compare states case-insensitively.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from correlator.errors import QueryError

__all__ = [
    "ACTIVE_JOB_STATES",
    "FINISHED_PROJECTION_STATES",
    "PROJECTION_STATES",
    "PROVISIONING_STATES",
    "UNPUBLISHED_STATES",
    "VM_GONE_STATES",
    "Finding",
    "FindingsConfig",
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
class FindingsConfig:
    """Deadlines and thresholds, in seconds (a finding needs an age strictly greater).

    Attributes:
        release_failed_deadline_s: ``release_failed`` with ``occupancy=cleanup`` longer than this.
        provision_job_deadline_s: a provider job pending/waiting/running longer than this.
        outbox_publish_deadline_s: an outbox row unpublished longer than this.
        drift_threshold_s: a projection disagreeing with its source of truth longer than this.
        orphan_grace_s: a VM still existing this long after its CR was deleted.
        critical_factor: severity is critical past this multiple of the threshold.

    Raises:
        QueryError: a value is negative, not finite, or not a number; ``critical_factor`` < 1.
    """

    release_failed_deadline_s: float = 3600.0
    provision_job_deadline_s: float = 7200.0
    outbox_publish_deadline_s: float = 300.0
    drift_threshold_s: float = 300.0
    orphan_grace_s: float = 600.0
    critical_factor: float = 4.0

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise QueryError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise QueryError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.critical_factor < 1:
            raise QueryError(f"critical_factor must be >= 1, not {self.critical_factor!r}")


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
