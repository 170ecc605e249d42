from __future__ import annotations

import pytest

from correlator.model import Event
from correlator.verdict import decide, is_failure
from tests.correlator.events import ev

HEALTHY = [
    ev(0, "ingress", "POST /v1/allocations", http_status=202, correlation_id="c-1"),
    ev(1, "api", "allocation requested", allocation_id="a-9"),
    ev(
        2,
        "workflow",
        "provisioning",
        entity_kind="allocation",
        entity_id="a-9",
        state_to="provisioning",
    ),
    ev(9, "workflow", "active", entity_kind="allocation", entity_id="a-9", state_to="active"),
]


def test_no_failure_at_all_gives_none() -> None:
    verdict = decide(HEALTHY)
    assert (verdict.owner_layer, verdict.confidence, verdict.first_failure) == ("none", 1.0, None)
    assert verdict.explains == []


_CUT = (
    "; the timeline was cut at {} events and later evidence was not read (narrow the window "
    "with from/to, or raise the limit)"
)


def test_a_cut_timeline_without_failure_does_not_claim_there_is_none() -> None:
    verdict = decide(HEALTHY, truncated=True)
    assert (verdict.owner_layer, verdict.confidence, verdict.first_failure) == (
        "unknown",
        0.0,
        None,
    )
    assert verdict.reason == "no failure in the events read" + _CUT.format(4)


def test_a_cut_timeline_says_a_specific_failure_may_lie_past_the_cut() -> None:
    # After the allocation went active (at 9 s): a failure before it would be recovered.
    wrapper = ev(10, "api", "provisioning failed", level="error")
    verdict = decide([*HEALTHY, wrapper], truncated=True)
    assert (verdict.owner_layer, verdict.confidence) == ("api", 0.1)
    assert verdict.reason == (
        "no evidence names an owner (1 failures); the first failure is at the api layer, so "
        "api (fallback: low confidence): provisioning failed" + _CUT.format(5)
    )


def test_a_specific_failure_in_a_cut_timeline_is_still_the_first() -> None:
    specific = ev(3, "db", "deadlock detected", level="error", owner_hint="db")
    whole = decide([*HEALTHY, specific])
    cut = decide([*HEALTHY, specific], truncated=True)
    assert (cut.owner_layer, cut.confidence, cut.first_failure) == (
        whole.owner_layer,
        whole.confidence,
        specific,
    )
    assert cut.reason == whole.reason + _CUT.format(5)


@pytest.mark.parametrize(
    ("specific", "owner", "confidence"),
    [
        (
            ev(
                3,
                "ingress",
                "SSL_do_handshake() failed: certificate has expired",
                level="error",
                owner_hint="cert",
            ),
            "cert",
            0.95,
        ),
        (
            ev(3, "api", "rejected token", level="error", http_status=401, owner_hint="api_auth"),
            "api_auth",
            0.95,
        ),
        (
            ev(
                3,
                "ingress",
                "connect() failed (111: Connection refused)",
                level="error",
                owner_hint="ingress",
            ),
            "ingress",
            0.95,
        ),
        (
            ev(3, "node", "ansible-playbook: not found", level="error", owner_hint="deploy"),
            "deploy",
            0.95,
        ),
        (
            ev(
                3,
                "workflow",
                "releasing → release_failed",
                level="error",
                owner_hint="workflow_state",
                state_to="release_failed",
            ),
            "workflow_state",
            0.95,
        ),
        (
            ev(
                3,
                "db",
                "canceling statement due to lock timeout",
                level="error",
                owner_hint="db",
                error_type="55P03",
            ),
            "db",
            0.95,
        ),
        (
            ev(3, "provider", "job 4711 failed", level="error", owner_hint="provider"),
            "provider",
            0.95,
        ),
        (
            ev(3, "api", "allocation quota table missing", level="error", owner_hint="api"),
            "api",
            0.95,
        ),
        (
            ev(3, "node", "disk /dev/sdb failed SMART check", level="error", owner_hint="node"),
            "node",
            0.95,
        ),
        (
            ev(3, "api", "odd: the ingress blamed by the API", level="error", owner_hint="ingress"),
            "ingress",
            0.8,
        ),
    ],
)
def test_each_owner_layer_wins_over_the_wrapper_that_follows(specific, owner, confidence) -> None:  # type: ignore[no-untyped-def]
    wrapper = ev(
        4,
        "api",
        "provisioning failed",
        level="error",
        error_type="RuntimeError",
        owner_hint="unknown",
    )
    symptom = ev(5, "workflow", "provision_failed", level="error", state_to="provision_failed")
    verdict = decide([*HEALTHY[:2], specific, wrapper, symptom])
    assert verdict.owner_layer == owner
    assert verdict.first_failure is specific
    assert verdict.explains == [wrapper, symptom]
    assert verdict.confidence == pytest.approx(confidence)


def test_symptoms_follow_in_corrected_order_even_when_their_clock_runs_behind() -> None:
    # The timeline is in corrected time: the API's clock ran 2 s behind, so its wrapper
    # says 1.5 s, before the ingress's TLS failure at 3 s, and comes after it in the order.
    tls = ev(3, "ingress", "SSL_do_handshake() failed", level="error", owner_hint="cert")
    wrapper = ev(1.5, "api", "provisioning failed", level="error", owner_hint="unknown")
    symptom = ev(5, "workflow", "provision_failed", level="error", state_to="provision_failed")
    verdict = decide([*HEALTHY[:2], tls, wrapper, symptom])
    assert verdict.first_failure is tls
    assert verdict.explains == [wrapper, symptom]


def test_a_wrapper_never_wins_even_when_it_is_earlier_than_nothing_specific() -> None:
    # Nothing names an owner: the fallback takes the first failure's layer, never "unknown".
    wrapper = ev(10, "api", "provisioning failed", level="error", owner_hint="unknown")
    http_500 = ev(11, "ingress", "GET /v1/allocations/a-9", http_status=500, http_method="GET")
    verdict = decide([*HEALTHY, wrapper, http_500])
    assert verdict.owner_layer == "api"
    assert verdict.confidence == 0.25
    assert verdict.first_failure is wrapper
    assert verdict.explains == [http_500]
    assert verdict.ownership is not None
    assert verdict.ownership.source == "fallback"


CERT = ev(3, "ingress", "certificate has expired", level="error", owner_hint="cert")
WRAPPER = ev(2, "api", "provisioning failed", level="error", owner_hint="unknown")
HTTP_502 = ev(2, "ingress", "POST /v1/allocations", http_status=502)
SAME_TIME_500 = ev(3, "api", "POST /v1/allocations", http_status=500)
CERT_AGAIN = ev(6, "ingress", "certificate has expired", level="error", owner_hint="cert")
DB = ev(6, "db", "deadlock detected", level="error", owner_hint="db")


@pytest.mark.parametrize(
    ("events", "explains", "confidence"),
    [
        # Alone: 0.6, +0.15 its own layer's owner, +0.05 no rival.
        ([CERT], [], 0.8),
        # Earlier failures that name no owner (or a weak one) are outranked and explained.
        ([WRAPPER, HTTP_502, CERT], [WRAPPER, HTTP_502], 0.8),
        ([WRAPPER, CERT, SAME_TIME_500], [WRAPPER, SAME_TIME_500], 0.95),
        # The same owner again is no rival; another owner is (no +0.05).
        ([CERT, CERT_AGAIN], [CERT_AGAIN], 0.95),
        ([CERT, DB], [DB], 0.9),
        ([HTTP_502, CERT, CERT_AGAIN, DB], [HTTP_502, CERT_AGAIN, DB], 0.9),
    ],
)
def test_the_earliest_specific_failure_explains_what_follows_and_rivals_lower_confidence(
    events: list[Event], explains: list[Event], confidence: float
) -> None:
    verdict = decide(events)
    assert (verdict.owner_layer, verdict.first_failure) == ("cert", CERT)
    assert verdict.explains == explains
    assert verdict.confidence == pytest.approx(confidence)


@pytest.mark.parametrize(
    ("event", "failure"),
    [
        (ev(0, "api", "ok"), False),
        (ev(0, "api", "boom", level="error"), True),
        (ev(0, "api", "boom", level="critical"), True),
        (ev(0, "ingress", "GET /", http_status=503), True),
        (ev(0, "ingress", "GET /", http_status=404), False),
        (ev(0, "workflow", "x", state_to="release_failed"), True),
        # A record's stamp on a warning is an error it handled (a retry that went on).
        (ev(0, "api", "x", owner_hint="api_auth", level="warning"), False),
        # An adapter's own failure is one at any level (nginx logs TLS failures at info).
        (ev(0, "ingress", "SSL_do_handshake() failed", source="nginx", owner_hint="cert"), True),
        # An access log's 401 is a refusal, not a failure.
        (
            ev(0, "ingress", "GET / 401", source="nginx", http_status=401, owner_hint="api_auth"),
            False,
        ),
    ],
)
def test_what_counts_as_a_failure(event, failure) -> None:  # type: ignore[no-untyped-def]
    assert is_failure(event) is failure
