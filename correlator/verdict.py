"""The verdict: which layer owns the first failure, and which later failures it explains.

Failures are events at level error/critical, or with an owner hint, or answering HTTP 5xx.
Not all failures are equal: a *specific* failure names its owner layer (a TLS handshake error
at the ingress says ``cert``; an exception classified by ``agent_logging`` carries
``error.owner_layer``; a workflow transition to ``release_failed`` says ``workflow_state``); a
*wrapper* or symptom does not ("provisioning failed", an HTTP 500, ``owner_layer=unknown``).
The verdict is the earliest specific failure; every failure after it is a symptom it
explains. A wrapper never wins over the earlier, more specific failure it wraps; when there is
no specific failure at all, the earliest failure is reported with owner ``unknown`` and low
confidence. No failure at all gives owner ``none``.

A timeline cut at its limit holds the *earliest* events, so a specific failure found in it is
still the first one; but "no failure" or "no failure names its owner" may only mean the
evidence that would say otherwise lies past the cut. Then the verdict says so: owner
``unknown`` with confidence 0 instead of ``none``, and a lower confidence for ``unknown``.

Confidence (0..1) is a plain score, documented so an operator can weigh it: 0.6 for a specific
first failure, +0.15 when its own layer agrees with its owner (the ingress reporting a cert
error), +0.15 when it explains later symptoms, +0.05 when no other specific owner appears
before the first symptom; 0.2 for ``unknown`` (0.1 when the timeline was cut); 1.0 for
``none``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from correlator.model import Event

__all__ = ["Verdict", "decide", "is_failure"]

#: The owner layers a layer can prove about itself.
_SELF_EVIDENT: Final = {
    "ingress": {"ingress", "cert"},
    "api": {"api", "api_auth"},
    "workflow": {"workflow_state", "provider"},
    "db": {"db"},
    "node": {"node", "deploy"},
    "provider": {"provider"},
}
_FAILED_STATES: Final = ("failed", "error", "release_failed", "provision_failed")


def is_failure(event: Event) -> bool:
    """Whether an event records a failure (as opposed to normal evidence)."""
    if event.level in ("error", "critical"):
        return True
    if event.owner_hint is not None:
        return True
    if event.http_status is not None and event.http_status >= 500:
        return True
    return bool(event.state_to and event.state_to.lower().endswith(_FAILED_STATES))


def _specific(event: Event) -> bool:
    return event.owner_hint is not None and event.owner_hint != "unknown"


@dataclass
class Verdict:
    """The owner layer of the first failure and what it explains."""

    owner_layer: str
    confidence: float
    first_failure: Event | None
    explains: list[Event] = field(default_factory=list)
    reason: str = ""

    def as_dict(self, render: Any = None) -> dict[str, Any]:
        """JSON shape of DESIGN §6; ``render`` turns an Event into its JSON form."""
        show = render or (lambda e: e)
        return {
            "owner_layer": self.owner_layer,
            "confidence": round(self.confidence, 2),
            "first_failure": show(self.first_failure) if self.first_failure else None,
            "explains": [show(e) for e in self.explains],
            "reason": self.reason,
        }


def decide(events: Sequence[Event], *, truncated: bool = False) -> Verdict:
    """The verdict over events in timeline order (corrected time, oldest first).

    Args:
        events: the timeline's events.
        truncated: the events are the earliest of more (the timeline hit its limit).
    """
    failures = [e for e in events if is_failure(e)]
    cut = (
        f"; the timeline was cut at {len(events):,} events and later evidence was not read "
        "(narrow the window with from/to, or raise the limit)"
        if truncated
        else ""
    )
    if not failures:
        if truncated:
            return Verdict("unknown", 0.0, None, [], "no failure in the events read" + cut)
        return Verdict("none", 1.0, None, [], "no failure in the evidence")
    specific = next((e for e in failures if _specific(e)), None)
    if specific is None:
        first = failures[0]
        return Verdict(
            "unknown",
            0.1 if truncated else 0.2,
            first,
            failures[1:],
            f"{len(failures)} failures, none names its owner; the first: {first.message[:120]}"
            + cut,
        )
    # After it in the timeline's order, which is corrected time: a source's raw time may run
    # behind, and its symptom still comes after the failure it follows from.
    explains = failures[failures.index(specific) + 1 :]
    owner = str(specific.owner_hint)
    confidence = 0.6
    if owner in _SELF_EVIDENT.get(specific.layer, ()):
        confidence += 0.15
    if explains:
        confidence += 0.15
    rivals = [e for e in explains if _specific(e) and e.owner_hint != owner]
    if not rivals:
        confidence += 0.05
    symptoms = f"; explains {len(explains)} later failures" if explains else ""
    reason = f"first specific failure at the {specific.layer} layer: {specific.message[:160]}"
    return Verdict(owner, min(confidence, 0.95), specific, explains, reason + symptoms + cut)
