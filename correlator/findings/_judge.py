"""How every rule judges: the threshold compared in whole nanoseconds, the severity, and the
finding built with the rule's name and kind; with the helpers the rules' summaries share.

Thresholds: a finding is raised when its age is *strictly greater* than its threshold; an age
equal to the threshold is not a finding. Ages and thresholds are compared in integer
nanoseconds (the threshold rounded to the nearest nanosecond). Severity is ``critical`` when
the age is strictly greater than ``critical_factor`` times the threshold, else ``warning``.
"""

from __future__ import annotations

from typing import Final

from correlator.findings._types import Finding
from correlator.model import Event

__all__ = ["Judge", "evidence", "human", "label"]

_CR_KINDS: Final = frozenset({"cr", "custom_resource", "customresource"})


class Judge:
    """One rule's threshold at one moment: says whether an age counts and builds findings.

    Args:
        rule: the rule's name; kind: its kind (both copied into each finding).
        now_ns: the reference time.
        threshold_s: the rule's threshold, seconds.
        critical_factor: severity is critical past this multiple of the threshold.
    """

    def __init__(
        self, rule: str, kind: str, *, now_ns: int, threshold_s: float, critical_factor: float
    ) -> None:
        self.rule = rule
        self.kind = kind
        self.now_ns = now_ns
        self.threshold_s = threshold_s
        self._threshold_ns = round(threshold_s * 1e9)
        self._critical_ns = round(threshold_s * critical_factor * 1e9)

    def over(self, since_ns: int, end_ns: int | None = None) -> int | None:
        """The age in ns (to ``end_ns``, default now) when strictly greater than the
        threshold, else None."""
        age_ns = (self.now_ns if end_ns is None else end_ns) - since_ns
        return age_ns if age_ns > self._threshold_ns else None

    def make(
        self,
        *,
        entity: tuple[str, str],
        since_ns: int,
        age_ns: int,
        ids: dict[str, str],
        summary: str,
        evidence: tuple[int, ...],
    ) -> Finding:
        """The finding about ``entity`` (kind, id), its severity from its age."""
        return Finding(
            kind=self.kind,
            rule=self.rule,
            severity="critical" if age_ns > self._critical_ns else "warning",
            entity_kind=entity[0],
            entity_id=entity[1],
            since_ns=since_ns,
            age_s=age_ns / 1e9,
            threshold_s=self.threshold_s,
            summary=summary,
            ids=ids,
            evidence=evidence,
        )


def human(seconds: float) -> str:
    """``3h 12m``: whole units, zero units left out."""
    if 0 < seconds < 1:
        return f"{seconds:g}s"
    rest = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"


def evidence(*events: Event | None) -> tuple[int, ...]:
    """The events' content hashes, in order, each once, absent ones left out."""
    return tuple(dict.fromkeys(e.hash for e in events if e is not None))


def label(kind: str) -> str:
    """An entity kind as a summary names it: ``CR`` for a custom resource."""
    return "CR" if kind.lower() in _CR_KINDS else kind
