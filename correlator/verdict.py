"""The verdict: which layer owns the first failure, and which other failures it explains.

Rules, in the order they are applied (each an operator can check against the timeline):

1. **Failures.** An event is a failure when it is logged at ``error``/``critical``, answers
   HTTP 5xx, moves an entity into a failed state, or is a failure its adapter knows (an nginx
   TLS line, a SQLSTATE, an AAP job's status). A record that carries an error but was logged
   at ``warning`` or below is a handled one (a retry that went on to succeed), not a failure;
   an access log's 401/403 is weak evidence of ``api_auth`` (rule 6), not a failure.
2. **Owners.** Each failure's owner comes from its evidence (:mod:`correlator.ownership`): a
   stamp, an adapter that knows its failures, or the shared owner table applied to its text
   (type, message, causes, stack, exit code, status). A *wrapper* ("provision failed",
   "internal server error", an access log's 500) names none.
3. **Specific first.** The verdict is the earliest failure whose own words name an owner.
   A wrapper never outranks it, wherever it stands. A failure whose owner rests on an HTTP
   status alone (a 502 at the ingress) is weak: a failure that names its cause in words
   outranks it, earlier or later (the upstream's own "connection refused" after the clock
   correction still explains the 502 the ingress logged about it).
4. **Recovered.** When no failure names a cause and a lifecycle later reached a state that
   says the work succeeded (``active``, ``provisioned``, ``released``, ``succeeded``...), the
   failures were retried and recovered (a controller's requeue after a conflict): ``none``.
5. **Handled errors next.** With no failure that names its cause, an error the service
   handled before the last failure, logged at ``warning``, whose words name one (the retries
   that kept failing before a wrapper said "provision flow failed") names the owner.
6. **Weak next.** Then the earliest weak owner: an HTTP status (a 502 at the ingress, a
   client's "502 Bad Gateway"), or an access log's 401/403 before the last failure; a
   transition into a failed state (``provision_failed``) only after those, since it says that
   the workflow gave up, not why.
7. **Fallback.** With no owner named at all, the layer of the first failure that says more
   than that something failed (else of the first failure) gives the owner: node → ``node``,
   ingress → ``ingress`` (``api`` for a 500/503 it relayed from its upstream), api → ``api``,
   workflow → ``workflow_state``, db → ``db``, provider → ``provider``, projection →
   ``workflow_state``. It is marked ``fallback``; the verdict is never ``unknown`` while a
   failure exists.
8. **Symptoms.** The verdict explains every failure after it and every earlier failure that
   names no owner of its own or a weak one. A repeat of the first failure (the same words but
   for numbers: a retry) is one of its symptoms, never a rival.

No failure at all gives owner ``none``. A timeline cut at its limit holds the *earliest*
events, so a specific failure found in it is still the first; but "no failure" may only mean
that the evidence lies past the cut: then the owner is ``unknown`` with confidence 0, and every
confidence is lowered.

Confidence (0..1), a plain score an operator can weigh: a specific owner starts at 0.6 when
stamped or from an adapter and 0.55 when inferred from text, +0.15 when the failure's own
layer can prove it (the ingress reporting a cert error), +0.15 when it explains later
failures, +0.05 when no other specific owner appears among them (at most 0.95); a weak owner
0.4 (+0.1 when it explains others); a handled error 0.55; the fallback 0.25. A cut timeline
leaves a specific owner's confidence as it is (it is still the first) and takes 0.1 off a
handled or weak one and 0.15 off the fallback. ``none`` is 1.0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent_logging.owner import DEFAULT_RULES, OwnerRule
from correlator.model import Event, state_name
from correlator.ownership import (
    RECORD_SOURCES,
    Ownership,
    fallback_owner,
    owner_of,
    says_why,
)

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
_DIGITS: Final = re.compile(r"\d+")


def is_failure(event: Event) -> bool:
    """Whether an event records a failure (as opposed to normal evidence); rule 1 above."""
    if event.level in ("error", "critical"):
        return True
    if event.http_status is not None and event.http_status >= 500:
        return True
    if event.state_to and event.state_to.lower().endswith(_FAILED_STATES):
        return True
    # An adapter's own failures (nginx logs a client's TLS handshake failure at info); a
    # record's stamp on a warning is a handled error, an access log's 4xx a refusal.
    return (
        event.owner_hint is not None
        and event.source not in RECORD_SOURCES
        and event.http_status is None
    )


#: Lifecycle states that say the work succeeded.
_SUCCEEDED: Final = frozenset(
    {
        "active",
        "provisioned",
        "ready",
        "succeeded",
        "successful",
        "completed",
        "complete",
        "released",
        "available",
        "deployed",
        "done",
    }
)


def _succeeded(event: Event) -> bool:
    return state_name(event.state_to) in _SUCCEEDED


#: The most warnings read back from the last failure for a handled error that names its cause:
#: retries come shortly before the failure that gives up, and a busy node's timeline holds
#: thousands of warnings about other things (each read costs a table lookup).
_HANDLED_WARNINGS: Final = 200


def _handled_error(
    events: Sequence[Event], last_ns: int, rules: Sequence[OwnerRule]
) -> tuple[Event, Ownership] | None:
    """The earliest of the last :data:`_HANDLED_WARNINGS` warnings before ``last_ns`` whose
    words name an owner (a specific one), and that owner; warnings that read alike (the same
    message, error type and error text) are read once."""
    recent: list[Event] = []
    for event in reversed(events):
        if event.ts_ns > last_ns or event.level != "warning" or is_failure(event):
            continue
        recent.append(event)
        if len(recent) == _HANDLED_WARNINGS:
            break
    found: tuple[Event, Ownership] | None = None
    seen: dict[tuple[Any, ...], Ownership | None] = {}
    for event in recent:  # latest first: the last one found is the earliest
        key = (
            event.layer,
            event.service,
            event.message,
            event.error_type,
            event.http_status,
            repr(event.attrs.get("error")) if isinstance(event.attrs, dict) else None,
        )
        if key not in seen:
            seen[key] = owner_of(event, rules)
        ownership = seen[key]
        if ownership is not None and not ownership.weak:
            found = (event, ownership)
    return found


def _auth_refusal(event: Event) -> bool:
    return event.http_status in (401, 403)


@dataclass
class Verdict:
    """The owner layer of the first failure and what it explains.

    Attributes:
        owner_layer: the owner, ``none``, or ``unknown`` (a cut timeline without failure).
        confidence: 0..1, see the module's docstring.
        first_failure: the failure the verdict stands on.
        explains: the other failures it explains, in timeline order.
        reason: the verdict in words: the rule that named the owner and the text it matched.
        ownership: how the owner was named (None for ``none``/``unknown``).
        owners: the owner each failure's evidence names, by the event's hash.
    """

    owner_layer: str
    confidence: float
    first_failure: Event | None
    explains: list[Event] = field(default_factory=list)
    reason: str = ""
    ownership: Ownership | None = None
    owners: dict[int, Ownership] = field(default_factory=dict)

    def as_dict(self, render: Any = None) -> dict[str, Any]:
        """JSON shape of DESIGN §6; ``render`` turns an Event into its JSON form."""
        show = render or (lambda e: e)
        shown: dict[str, Any] = {
            "owner_layer": self.owner_layer,
            "confidence": round(self.confidence, 2),
            "first_failure": show(self.first_failure) if self.first_failure else None,
            "explains": [show(e) for e in self.explains],
            "reason": self.reason,
        }
        if self.ownership is not None:
            shown["owner_source"] = self.ownership.source
            if self.ownership.rule is not None:
                shown["rule"] = self.ownership.rule
            if self.ownership.matched is not None:
                shown["matched"] = self.ownership.matched
        return shown


def _shape(event: Event) -> str:
    return _DIGITS.sub("#", event.message.strip().lower())


def _quote(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _reason(event: Event, ownership: Ownership) -> str:
    where = (
        f"at the {event.layer} layer ({event.service})"
        if event.service
        else (f"at the {event.layer} layer")
    )
    said = _quote(event.message, 160)
    if ownership.source == "stamped":
        return f"first failure {where} names its owner (error.owner_layer): {said}"
    if ownership.source == "adapter":
        what = f" {ownership.matched}" if ownership.matched else ""
        kind = "weak: only its HTTP status" if ownership.weak else "the adapter knows it"
        return f"first failure {where}, {event.source}{what} ({kind}): {said}"
    weak = " (weak: it rests on the HTTP status alone)" if ownership.weak else ""
    return (
        f"first failure {where}: rule {ownership.rule} matched "
        f"{_quote(ownership.matched, 80)!r}{weak}: {said}"
    )


def decide(
    events: Sequence[Event],
    *,
    truncated: bool = False,
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
) -> Verdict:
    """The verdict over events in timeline order (corrected time, oldest first).

    Args:
        events: the timeline's events.
        truncated: the events are the earliest of more (the timeline hit its limit).
        rules: the owner table (an operator's rules first, then the built-in table).

    Returns:
        The verdict, with the owner each failure's evidence names.
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
    owners: dict[int, Ownership] = {}
    for event in failures:
        if event.hash not in owners and (ownership := owner_of(event, rules)) is not None:
            owners[event.hash] = ownership
    penalty = 0.1 if truncated else 0.0

    strong = next((e for e in failures if e.hash in owners and not owners[e.hash].weak), None)
    if strong is not None:
        chosen = owners[strong.hash]
        position = failures.index(strong)
        explains = [
            e
            for i, e in enumerate(failures)
            if i > position or (i < position and (e.hash not in owners or owners[e.hash].weak))
        ]
        later = failures[position + 1 :]
        shape = _shape(strong)
        rivals = [
            e
            for e in later
            if e.hash in owners
            and not owners[e.hash].weak
            and owners[e.hash].owner_layer != chosen.owner_layer
            and _shape(e) != shape
        ]
        confidence = 0.6 if chosen.source in ("stamped", "adapter") else 0.55
        if chosen.owner_layer in _SELF_EVIDENT.get(strong.layer, ()):
            confidence += 0.15
        if later:
            confidence += 0.15
        if not rivals:
            confidence += 0.05
        symptoms = f"; explains {len(explains)} other failures" if explains else ""
        return Verdict(
            chosen.owner_layer,
            min(confidence, 0.95),
            strong,
            explains,
            _reason(strong, chosen) + symptoms + cut,
            chosen,
            owners,
        )

    last_ns = failures[-1].ts_ns
    # Nothing names a cause, and the work went on to succeed: the failures were retried
    # (a controller's requeue after a conflict, a retry that worked) and are no incident.
    recovered = next(
        (e for e in reversed(events) if e.state_to and e.ts_ns > last_ns and _succeeded(e)), None
    )
    if recovered is not None and all(owners[e.hash].weak for e in failures if e.hash in owners):
        return Verdict(
            "none",
            0.8,
            None,
            [],
            f"{len(failures)} failures, none naming a cause, all before {recovered.entity_kind} "
            f"{recovered.entity_id} reached {recovered.state_to}: retried and recovered" + cut,
            None,
            owners,
        )
    # Errors a service handled before it gave up: the retries that kept failing, logged at
    # warning, then the wrapper logged at error ("attempt 3/3: PKIX path building failed",
    # then "provision flow failed"). Their words name the cause the failures do not.
    handled = _handled_error(events, last_ns, rules)
    if handled is not None:
        event, ownership = handled
        owners[event.hash] = ownership
        return Verdict(
            ownership.owner_layer,
            0.55 - penalty,
            event,
            failures,
            "no failure names its owner; an error handled before them does (logged at "
            f"warning, retried): {_reason(event, ownership)}; explains {len(failures)} "
            "failures" + cut,
            ownership,
            owners,
        )

    # Weak owners: a status, an access log's refusal, then (last) a failed state.
    candidates = [e for e in failures if e.hash in owners and e.state_to is None]
    refusal = next((e for e in events if _auth_refusal(e) and e.ts_ns <= last_ns), None)
    if refusal is not None and refusal.hash not in owners:
        owners[refusal.hash] = Ownership(
            "api_auth", "adapter", f"{refusal.source} adapter", f"HTTP {refusal.http_status}", True
        )
        candidates.append(refusal)
    if len(candidates) > 1:
        position_of = {e.hash: i for i, e in enumerate(events)}
        candidates.sort(key=lambda e: position_of.get(e.hash, 0))
    weak = candidates[0] if candidates else None
    if weak is None:
        weak = next((e for e in failures if e.hash in owners), None)
    if weak is not None:
        chosen = owners[weak.hash]
        explains = [e for e in failures if e is not weak]
        confidence = 0.4 + (0.1 if explains else 0.0) - penalty
        symptoms = f"; explains {len(explains)} other failures" if explains else ""
        return Verdict(
            chosen.owner_layer,
            confidence,
            weak,
            explains,
            "no failure names its owner in words; " + _reason(weak, chosen) + symptoms + cut,
            chosen,
            owners,
        )

    first = next((e for e in failures if says_why(e)), failures[0])
    owner = fallback_owner(first)
    fallback = Ownership(owner, "fallback", f"layer {first.layer}", None)
    explains = [e for e in failures if e is not first]
    what = "the first failure that says why" if says_why(first) else "the first failure"
    return Verdict(
        owner,
        0.25 - (0.15 if truncated else 0.0),
        first,
        explains,
        f"no evidence names an owner ({len(failures)} failures); {what} is at the "
        f"{first.layer} layer, so {owner} (fallback: low confidence): {_quote(first.message)}"
        + cut,
        fallback,
        owners,
    )
