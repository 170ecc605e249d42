"""Run every rule of ``_rules`` over the evidence and order what they find."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from correlator.findings._config import FindingsConfig
from correlator.findings._judge import Judge
from correlator.findings._matching import Index
from correlator.findings._rules import RULES
from correlator.findings._types import Finding
from correlator.model import Event

__all__ = ["find"]

_SEVERITY_ORDER: Final = {"critical": 0, "warning": 1}
#: ``find``'s default: immutable, so one shared instance is safe.
_DEFAULT_CONFIG: Final = FindingsConfig()


def find(
    events: Iterable[Event], *, now_ns: int, config: FindingsConfig = _DEFAULT_CONFIG
) -> list[Finding]:
    """Every finding the events prove at ``now_ns``.

    Args:
        events: lifecycle evidence in any order (entity transitions, provider and projection
            events, records carrying ``occupancy``).
        now_ns: the reference time, nanoseconds since the UNIX epoch, UTC.
        config: deadlines and thresholds.

    Returns:
        Findings, critical first, then oldest first, then by rule and entity.
    """
    index = Index(events)
    found = [
        finding
        for rule in RULES
        for finding in rule.judge(
            index,
            Judge(
                rule.name,
                rule.kind,
                now_ns=now_ns,
                threshold_s=config.threshold(rule.threshold),
                critical_factor=config.critical_factor,
            ),
        )
    ]
    found.sort(
        key=lambda f: (_SEVERITY_ORDER[f.severity], -f.age_s, f.rule, f.entity_kind, f.entity_id)
    )
    return found
