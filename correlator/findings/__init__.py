"""Findings: lifecycles stuck in a bad state, projections drifting from their source of
truth, and VMs orphaned by a custom resource deleted mid-provisioning.

Pure core: :class:`~correlator.model.Event` values in (any order), :class:`Finding` values
out; no store, no I/O. Events are ordered by ``(ts_ns, hash)``, the store's order, so the
answer does not depend on the input order. State names are compared case-insensitively.

The package: ``_rules`` holds :data:`RULES`, each rule as data (its docstring describes each):
its name and kind, its threshold and default, its judgement and its reach (the evidence it can
depend on, which the store reads and nothing else); ``_rule`` the shape of a rule; ``_judge``
the threshold and severity every rule shares; ``_config`` :class:`FindingsConfig`, whose fields
are the rules' thresholds; ``_find`` runs the rules; ``_matching`` groups events by entity and
matches projections to their provider jobs; ``_types`` holds the state vocabularies and
:class:`Finding`. Adding a kind of finding is one :class:`Rule` in ``_rules``. Every public
name is re-exported here.

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

from correlator.findings._config import DEFAULTS, FindingsConfig
from correlator.findings._find import find
from correlator.findings._rule import Reads, Rule
from correlator.findings._rules import RULES
from correlator.findings._types import (
    ACTIVE_JOB_STATES,
    FINISHED_PROJECTION_STATES,
    PROJECTION_STATES,
    PROVISIONING_STATES,
    UNPUBLISHED_STATES,
    VM_GONE_STATES,
    Finding,
)

__all__ = [
    "ACTIVE_JOB_STATES",
    "DEFAULTS",
    "FINISHED_PROJECTION_STATES",
    "PROJECTION_STATES",
    "PROVISIONING_STATES",
    "RULES",
    "UNPUBLISHED_STATES",
    "VM_GONE_STATES",
    "Finding",
    "FindingsConfig",
    "Reads",
    "Rule",
    "find",
]
