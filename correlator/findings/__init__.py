"""Findings: lifecycles stuck in a bad state, projections drifting from their source of
truth, and VMs orphaned by a custom resource deleted mid-provisioning.

Pure core: :class:`~correlator.model.Event` values in (any order), :class:`Finding` values
out; no store, no I/O. Events are ordered by ``(ts_ns, hash)``, the store's order, so the
answer does not depend on the input order. State names are compared case-insensitively.

The package: ``_rules`` holds the rules, their thresholds and the order of findings (its
docstring describes each rule); ``_matching`` groups events by entity and matches projections
to their provider jobs; ``_types`` holds the state vocabularies, :class:`FindingsConfig` and
:class:`Finding`; ``_reach`` says which evidence the rules can depend on (:func:`reach`), so
that the store reads only that. Every public name is re-exported here.

JSON shape of :meth:`Finding.as_dict`::

    {"kind": "stuck", "rule": "release_failed_stuck", "severity": "warning",
     "entity_kind": "allocation", "entity_id": "a-9",
     "since_ns": 1700000000000000000, "age_s": 11520.0, "threshold_s": 3600.0,
     "ids": {"allocation_id": "a-9", "node_id": "n-17"},
     "summary": "allocation a-9 has been release_failed with occupancy=cleanup for 3h 12m
                 (deadline 1h); node n-17 stays fenced",
     "evidence": [8061926422360573214, -2305843009213693952]}

``ids`` holds the identifiers of :data:`~correlator.model.IDENTIFIER_KEYS` known for the
entity (latest value wins); ``evidence`` the content hashes of the events that prove the
finding: first the one that entered the bad state, then, oldest first, the latest that show
it unchanged (for ``release_failed_stuck`` also the latest that said ``occupancy=cleanup``;
for drift, the job's latest and the projection's latest).
"""

from __future__ import annotations

from correlator.findings._reach import Reach, reach
from correlator.findings._rules import find
from correlator.findings._types import (
    ACTIVE_JOB_STATES,
    FINISHED_PROJECTION_STATES,
    PROJECTION_STATES,
    PROVISIONING_STATES,
    UNPUBLISHED_STATES,
    VM_GONE_STATES,
    Finding,
    FindingsConfig,
)

__all__ = [
    "ACTIVE_JOB_STATES",
    "FINISHED_PROJECTION_STATES",
    "PROJECTION_STATES",
    "PROVISIONING_STATES",
    "UNPUBLISHED_STATES",
    "VM_GONE_STATES",
    "Finding",
    "FindingsConfig",
    "Reach",
    "find",
    "reach",
]
