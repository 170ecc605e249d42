"""A finding rule as data: what it is called, its threshold and that threshold's variable, how
it judges the evidence, and what of the store it must read (its reach).

Everything else is derived from the rules of ``_rules``: :class:`~correlator.findings.
FindingsConfig`'s fields and defaults, the ``CORRELATOR_FINDINGS_*`` variables and
``correlator findings --threshold``, the order :func:`~correlator.findings.find` runs them in,
and the SQL with which the store reads only what the rules can depend on
(``correlator._lifecycle``). A new kind of finding is one :class:`Rule` in ``_rules``; a
rule cannot be declared without its reach, and ``tests/correlator/test_lifecycle.py`` checks
for every rule that what the reach reads gives the findings that every event gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from correlator.findings._judge import Judge
from correlator.findings._matching import Index
from correlator.findings._types import Finding

__all__ = ["ROLES", "Reads", "Rule"]

#: The roles an entity plays for the rules (``_matching.Index``): what a :class:`Reads` names.
ROLES: Final = frozenset({"allocation", "provider_job", "outbox", "projection", "vm"})

#: The variables' prefix: a rule's threshold ``drift_threshold_s`` is set by
#: ``CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S``.
VARIABLE_PREFIX: Final = "CORRELATOR_FINDINGS_"


@dataclass(frozen=True, slots=True)
class Reads:
    """One part of a rule's reach: entities of one role, every event of each.

    Build with :meth:`latest_in`, :meth:`every` or :meth:`named_by_deleted_projection`.

    Attributes:
        role: one of :data:`ROLES`.
        states: for :meth:`latest_in`, the state names (lower case, as ``model.state_name``
            gives them) of which the entity's latest transition must be one; else empty.
        selects: ``"latest_in"``, ``"every"`` or ``"named_by_deleted_projection"``.
        when_projected: :meth:`every` only when the store holds a projection.
        occupancy: also every record reporting ``occupancy`` for the allocations picked.
    """

    role: str
    selects: str
    states: frozenset[str] = frozenset()
    when_projected: bool = False
    occupancy: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; use one of {sorted(ROLES)}")
        if self.occupancy and self.role != "allocation":
            raise ValueError("only an allocation's occupancy is reported")

    @classmethod
    def latest_in(cls, role: str, states: Iterable[str], *, occupancy: bool = False) -> Reads:
        """Each entity of ``role`` whose latest transition is one of ``states``."""
        return cls(role, "latest_in", frozenset(states), occupancy=occupancy)

    @classmethod
    def every(cls, role: str, *, when_projected: bool = False) -> Reads:
        """Every entity of ``role`` (when the store holds a projection, if so asked)."""
        return cls(role, "every", when_projected=when_projected)

    @classmethod
    def named_by_deleted_projection(cls) -> Reads:
        """Each allocation a projection that was ever deleted names (``allocation_id``)."""
        return cls("allocation", "named_by_deleted_projection")


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of finding.

    Attributes:
        name: the finding's ``rule`` (``release_failed_stuck``).
        kind: the finding's ``kind``: ``stuck``, ``drift`` or ``orphan``.
        threshold: the :class:`~correlator.findings.FindingsConfig` field that holds its
            deadline (``release_failed_deadline_s``); several rules may share one.
        default_s: the threshold's default, seconds.
        describes: what the threshold bounds, for its variable's and option's help
            ("seconds an outbox row may stay unpublished").
        judge: the judgement: the findings of the indexed evidence, each made by the
            :class:`~correlator.findings._judge.Judge` it is given.
        reach: what the rule can depend on; the store reads the union of every rule's reach.
    """

    name: str
    kind: str
    threshold: str
    default_s: float
    describes: str
    judge: Callable[[Index, Judge], Iterable[Finding]]
    reach: tuple[Reads, ...]

    def __post_init__(self) -> None:
        if not self.reach:
            raise ValueError(f"rule {self.name!r} reads nothing: give its reach")
        if not self.threshold.isidentifier() or self.default_s < 0:
            raise ValueError(f"rule {self.name!r}: a threshold is a field name with a default >= 0")

    @property
    def variable(self) -> str:
        """The environment variable that sets the threshold."""
        return VARIABLE_PREFIX + self.threshold.upper()
