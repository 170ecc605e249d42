"""Which lifecycle evidence a run of the rules can depend on, so that the store reads only that.

A store of 10^7 events holds ~800,000 lifecycle events, nearly all of entities whose latest
state is healthy. The rules (``_rules``) raise a finding about an entity only when its latest
transition is in a bad state, so everything else may be left unread provided what is read
holds, for every entity it holds at all, all of that entity's events. :class:`Reach` names the
bad states as the store has them written (the rules compare ``model.state_name`` of them); the
store (``correlator._lifecycle``) then reads:

- every event of each allocation whose latest transition is ``release_failed``, and every
  event that reports ``occupancy`` for it (``release_failed_stuck``);
- every event of each provider job whose latest transition is an active state
  (``provision_job_overdue``), and of every provider job when the store holds a projection:
  which job a projection shows depends on all of them (``projection_drift``, ``vm_orphaned``);
- every event of each outbox row whose latest transition is unpublished
  (``outbox_unpublished``);
- every event of every projection, and when the store holds one: of every VM (any of them may
  share an identifier with a deleted projection) and of each allocation named by a projection
  that was ever deleted (whether the deletion came during provisioning);
- every event of any entity one of the events above belongs to, so that no entity is read in
  part.

The rules then see, for every entity they can raise a finding about, exactly the events they
would have seen in the whole store: ``tests/correlator/test_lifecycle.py`` checks that the
findings are the same both ways.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from correlator.findings._types import ACTIVE_JOB_STATES, UNPUBLISHED_STATES
from correlator.model import state_name

__all__ = ["Reach", "reach"]


@dataclass(frozen=True, slots=True)
class Reach:
    """The ``state_to`` texts, as written, that make an entity's events worth reading.

    Attributes:
        release_failed: texts the rules read as ``release_failed``.
        active_jobs: texts of :data:`~correlator.findings.ACTIVE_JOB_STATES`.
        unpublished: texts of :data:`~correlator.findings.UNPUBLISHED_STATES`.
        deleting: texts the rules read as ``deleting`` (a projection's deletion).
    """

    release_failed: list[str]
    active_jobs: list[str]
    unpublished: list[str]
    deleting: list[str]


def reach(state_texts: Iterable[str]) -> Reach:
    """Sort the distinct ``state_to`` texts of a store by what the rules read them as.

    Args:
        state_texts: every distinct ``state_to`` the store holds (more does no harm).

    Returns:
        The texts each rule looks for, each list sorted.
    """
    named = sorted((text, state_name(text)) for text in set(state_texts))
    return Reach(
        release_failed=[text for text, name in named if name == "release_failed"],
        active_jobs=[text for text, name in named if name in ACTIVE_JOB_STATES],
        unpublished=[text for text, name in named if name in UNPUBLISHED_STATES],
        deleting=[text for text, name in named if name == "deleting"],
    )
