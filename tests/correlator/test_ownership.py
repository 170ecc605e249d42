"""Who owns one failure, and how we know: stamped, adapter, inferred from text, fallback."""

from __future__ import annotations

import orjson
import pytest

from agent_logging.owner import OwnerRule
from correlator.model import Event
from correlator.ownership import Ownership, evidence_of, fallback_owner, owner_of, says_why
from correlator.verdict import decide
from tests.correlator.events import ev


def _record(offset_s: float, layer: str, record: dict[str, object], **fields: object) -> Event:
    """An event as the ndjson adapter makes it of a record: ``error`` kept in attrs but its
    type (a column) and stack (left in raw)."""
    error = record.get("error")
    attrs: dict[str, object] = {}
    error_type = None
    if isinstance(error, dict):
        error_type = error.get("type")
        attrs["error"] = {k: v for k, v in error.items() if k not in ("type", "stack")}
    for key, value in record.items():
        if key not in ("error", "event", "stack", "exception"):
            attrs[key] = value
    event = ev(
        offset_s,
        layer,
        str(record.get("event", "")),
        level="error",
        error_type=error_type,
        attrs=attrs,
        **fields,
    )
    event.raw = orjson.dumps(record).decode()
    return event


SSL_EXPIRED = _record(
    1,
    "node",
    {
        "event": "claim failed",
        "error": {
            "type": "ssl.SSLCertVerificationError",
            "message": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
            "certificate has expired (_ssl.c:1006)",
        },
    },
)
IPMITOOL = _record(
    1,
    "node",
    {
        "event": "power on failed",
        "error": {
            "type": "FileNotFoundError",
            "message": "[Errno 2] No such file or directory: 'ipmitool'",
        },
    },
)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        # The two misses of the issue: a record that names its cause in words, no stamp.
        (
            SSL_EXPIRED,
            Ownership("cert", "inferred", "tls-certificate-type", "ssl.SSLCertVerificationError"),
        ),
        (
            IPMITOOL,
            Ownership("deploy", "inferred", "missing-prerequisite-type", "FileNotFoundError"),
        ),
        # A stamp wins over the words; a stamp of "unknown" does not stop the words.
        (
            ev(1, "node", "certificate has expired", level="error", owner_hint="db"),
            Ownership("db", "stamped", "error.owner_layer", None),
        ),
        (
            ev(1, "node", "certificate has expired", level="error", owner_hint="unknown"),
            Ownership("cert", "inferred", "tls-certificate-message", "certificate has expired"),
        ),
        # An adapter's own failure; an access log's status and a failed state are weak.
        (
            ev(
                1,
                "ingress",
                "SSL_do_handshake() failed",
                source="nginx",
                owner_hint="cert",
                error_type="ssl_handshake_failed",
            ),
            Ownership("cert", "adapter", "nginx adapter", "ssl_handshake_failed"),
        ),
        (
            ev(
                1,
                "ingress",
                "GET /v1 502",
                source="nginx",
                owner_hint="ingress",
                http_status=502,
                http_method="GET",
                error_type="HTTP 502",
            ),
            Ownership("ingress", "adapter", "nginx adapter", "HTTP 502", weak=True),
        ),
        (
            ev(
                1,
                "workflow",
                "a-1: releasing → release_failed",
                source="workflow",
                owner_hint="workflow_state",
                state_to="release_failed",
            ),
            Ownership("workflow_state", "adapter", "workflow adapter", None, weak=True),
        ),
        # Go services: the database's port tells a DB refusal from the ingress's.
        (
            ev(1, "api", "dial tcp 10.0.0.5:5432: connect: connection refused", level="error"),
            Ownership(
                "db",
                "inferred",
                "db-message",
                "dial tcp 10.0.0.5:5432: connect: connection refused",
            ),
        ),
        (
            ev(
                1,
                "node",
                'Post "https://api:8443/v1/claim": dial tcp 10.0.0.7:8443: connect: '
                "connection refused",
                level="error",
            ),
            Ownership("ingress", "inferred", "connect-message", "connect: connection refused"),
        ),
        # An exit code in a field; a client relaying a 502 in words is weak.
        (
            ev(1, "workflow", "task failed", level="error", attrs={"rc": 127}),
            Ownership("deploy", "inferred", "missing-prerequisite-exit", "exit code 127"),
        ),
        (
            ev(1, "node", "unexpected status 502 Bad Gateway", level="error"),
            Ownership("ingress", "inferred", "http-502-504-message", "status 502", weak=True),
        ),
        # Words no rule knows, and a wrapper: no owner.
        (ev(1, "api", "quota table missing", level="error"), None),
        (ev(1, "workflow", "provision failed", level="error"), None),
    ],
)
def test_owner_of(event: Event, expected: Ownership | None) -> None:
    assert owner_of(event) == expected


def test_a_stack_trace_is_read_from_the_raw_line_when_nothing_else_names_an_owner() -> None:
    stack = (
        "Traceback (most recent call last):\n"
        '  File "/srv/api/db.py", line 12, in reserve\n'
        "    cur.execute(sql)\n"
        "psycopg.errors.LockNotAvailable: canceling statement due to lock timeout\n"
    )
    event = _record(
        1, "api", {"event": "reserve failed", "error": {"type": "RuntimeError", "stack": stack}}
    )
    assert evidence_of(event).stack is None
    assert evidence_of(event, with_stack=True).stack == stack
    assert owner_of(event) == Ownership(
        "db", "inferred", "db-driver", "psycopg.errors.LockNotAvailable"
    )


def test_a_java_stack_is_read_innermost_cause_first() -> None:
    stack = (
        "java.lang.RuntimeException: provisioning failed\n"
        "\tat com.example.Provisioner.run(Provisioner.java:42)\n"
        "Caused by: javax.net.ssl.SSLHandshakeException: PKIX path building failed: "
        "sun.security.provider.certpath.SunCertPathBuilderException: unable to find valid "
        "certification path to requested target\n"
        "\tat java.base/sun.security.ssl.Alert.createSSLException(Alert.java:131)\n"
    )
    event = _record(1, "api", {"event": "provisioning failed", "stack": stack})
    got = owner_of(event)
    assert got is not None
    assert (got.owner_layer, got.rule) == ("cert", "tls-certificate-type")


def test_an_operators_rule_is_tried_before_the_table() -> None:
    rule = OwnerRule("node", message_patterns=("certificate has expired",), name="mine")
    event = ev(1, "node", "certificate has expired", level="error")
    assert owner_of(event, (rule,)) == Ownership(
        "node", "inferred", "mine", "certificate has expired"
    )


def test_huge_and_binary_error_text_is_read_in_bounded_pieces() -> None:
    noise = "\x00\xff" * 2_000_000
    event = ev(
        1,
        "node",
        noise + " certificate has expired",
        level="error",
        attrs={"error": {"message": noise}},
    )
    assert owner_of(event) is None  # the cause lies past what is read: not a crash
    event = ev(1, "node", "certificate has expired " + noise, level="error")
    got = owner_of(event)
    assert got is not None
    assert got.owner_layer == "cert"


@pytest.mark.parametrize(
    ("event", "owner"),
    [
        (ev(0, "node", "x"), "node"),
        (ev(0, "api", "x"), "api"),
        (ev(0, "workflow", "x"), "workflow_state"),
        (ev(0, "db", "x"), "db"),
        (ev(0, "ingress", "x"), "ingress"),
        (ev(0, "provider", "x"), "provider"),
        (ev(0, "projection", "x"), "workflow_state"),
        # An ingress relays its upstream's 500 and 503; 502 and 504 are its own.
        (ev(0, "ingress", "GET / 500", http_status=500), "api"),
        (ev(0, "ingress", "GET / 503", http_status=503), "api"),
        (ev(0, "ingress", "GET / 502", http_status=502), "ingress"),
    ],
)
def test_fallback_owner(event: Event, owner: str) -> None:
    assert fallback_owner(event) == owner


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("provision failed", False),
        ("Provisioning failed; see logs", False),
        ("internal server error", False),
        ("HTTP 500", False),
        ("task failed for allocation a-1", False),
        ("", False),
        ("disk /dev/sdb failed SMART check", True),
        ("claim failed: connection refused", True),
        ("quota table missing", True),
    ],
)
def test_says_why(message: str, why: bool) -> None:
    assert says_why(ev(0, "api", message, level="error")) is why


def test_an_access_record_never_says_why() -> None:
    assert not says_why(ev(0, "ingress", "GET /x 500", http_status=500, http_method="GET"))


# The verdict over unstamped evidence (rules 3-6 of correlator.verdict).


def test_the_issue_example_a_node_agents_expired_certificate_under_a_wrapper() -> None:
    wrapper = ev(2, "workflow", "provision failed", level="error")
    verdict = decide([SSL_EXPIRED, wrapper])
    assert (verdict.owner_layer, verdict.first_failure) == ("cert", SSL_EXPIRED)
    assert verdict.explains == [wrapper]
    # 0.55 inferred, +0.15 it explains a later failure, +0.05 no rival (cert is not the
    # node layer's to prove).
    assert verdict.confidence == pytest.approx(0.75)
    assert verdict.reason == (
        "first failure at the node layer: rule tls-certificate-type matched "
        "'ssl.SSLCertVerificationError': claim failed; explains 1 other failures"
    )
    assert verdict.as_dict()["owner_source"] == "inferred"
    assert verdict.as_dict()["matched"] == "ssl.SSLCertVerificationError"


def test_a_wrapper_before_its_cause_is_explained_by_it() -> None:
    wrapper = ev(0, "workflow", "provision failed", level="error")
    cause = ev(1, "node", 'exec: "ipmitool": executable file not found in $PATH', level="error")
    verdict = decide([wrapper, cause])
    assert (verdict.owner_layer, verdict.first_failure, verdict.explains) == (
        "deploy",
        cause,
        [wrapper],
    )


def test_a_relayed_502_is_outranked_by_the_upstreams_own_words() -> None:
    relayed = ev(0, "node", "unexpected status 502 Bad Gateway", level="error")
    cause = ev(
        1,
        "api",
        "reserve failed",
        level="error",
        error_type="psycopg.OperationalError",
        attrs={"error": {"message": "connection failed: Connection refused"}},
    )
    verdict = decide([relayed, cause])
    assert (verdict.owner_layer, verdict.first_failure) == ("db", cause)
    assert verdict.explains == [relayed]


def test_only_a_weak_owner_names_it_at_a_lower_confidence() -> None:
    relayed = ev(0, "node", "unexpected status 502 Bad Gateway", level="error")
    wrapper = ev(1, "workflow", "provision failed", level="error")
    verdict = decide([relayed, wrapper])
    assert (verdict.owner_layer, verdict.first_failure) == ("ingress", relayed)
    assert verdict.confidence == pytest.approx(0.5)
    assert verdict.reason.startswith("no failure names its owner in words; ")


def test_a_refusal_in_the_access_log_before_a_wrapper_names_api_auth() -> None:
    refused = ev(
        0,
        "ingress",
        "POST /v1/claim 401",
        source="nginx",
        level="warning",
        http_status=401,
        http_method="POST",
        owner_hint="api_auth",
    )
    wrapper = ev(1, "node", "claim failed", level="error")
    verdict = decide([refused, wrapper])
    assert (verdict.owner_layer, verdict.first_failure, verdict.explains) == (
        "api_auth",
        refused,
        [wrapper],
    )
    assert verdict.confidence == pytest.approx(0.5)


def test_a_retry_of_the_first_failure_is_its_symptom_not_a_rival() -> None:
    first = ev(
        0, "node", "attempt 1: dial tcp 10.0.0.7:8443: connect: connection refused", level="error"
    )
    again = ev(
        5, "node", "attempt 2: dial tcp 10.0.0.7:8443: connect: connection refused", level="error"
    )
    other = ev(9, "db", "deadlock detected", level="error")
    assert decide([first, again]).confidence == pytest.approx(0.75)  # 0.55+0.15+0.05
    verdict = decide([first, again, other])
    assert verdict.explains == [again, other]
    assert verdict.confidence == pytest.approx(0.7)  # the deadlock is a rival


def test_the_fallback_prefers_a_failure_that_says_why_over_an_earlier_wrapper() -> None:
    wrapper = ev(0, "api", "internal server error", level="error")
    unknown_words = ev(1, "node", "disk /dev/sdb failed SMART check", level="error")
    verdict = decide([wrapper, unknown_words])
    assert (verdict.owner_layer, verdict.first_failure) == ("node", unknown_words)
    assert verdict.confidence == pytest.approx(0.25)
    assert verdict.ownership == Ownership("node", "fallback", "layer node", None)


def test_a_handled_error_followed_by_success_is_no_failure() -> None:
    retried = ev(
        0,
        "node",
        "claim failed, retrying",
        level="warning",
        owner_hint="ingress",
        error_type="ConnectionRefusedError",
    )
    success = ev(3, "node", "claimed")
    assert decide([retried, success]).owner_layer == "none"


def test_retries_that_kept_failing_name_the_cause_their_wrapper_does_not() -> None:
    attempts = [
        ev(
            i,
            "workflow",
            f"launch failed (attempt {i}/3): javax.net.ssl.SSLHandshakeException: "
            "PKIX path building failed",
            level="warning",
        )
        for i in (1, 2, 3)
    ]
    wrapper = ev(5, "workflow", "provision flow failed for a-1", level="error")
    state = ev(
        5,
        "workflow",
        "a-1: provisioning → provision_failed",
        source="workflow",
        level="error",
        owner_hint="workflow_state",
        state_to="provision_failed",
    )
    verdict = decide([*attempts, wrapper, state])
    assert (verdict.owner_layer, verdict.first_failure) == ("cert", attempts[0])
    assert verdict.explains == [wrapper, state]
    assert verdict.confidence == pytest.approx(0.55)
    # The same warnings followed by success: a retry that worked is no incident.
    assert decide([*attempts, ev(6, "workflow", "launched")]).owner_layer == "none"


def test_a_refusal_outranks_a_failed_state_but_not_a_status_that_came_first() -> None:
    refused = ev(
        2,
        "ingress",
        "POST /v1/x 403",
        source="nginx",
        level="warning",
        http_status=403,
        http_method="POST",
        owner_hint="api_auth",
    )
    state = ev(
        3,
        "workflow",
        "a-1: releasing → release_failed",
        source="workflow",
        level="error",
        owner_hint="workflow_state",
        state_to="release_failed",
    )
    assert decide([refused, state]).owner_layer == "api_auth"
    relayed = ev(1, "node", "claim failed: unexpected status 502 Bad Gateway", level="error")
    assert decide([relayed, refused, state]).owner_layer == "ingress"


def test_failures_that_name_no_cause_and_were_retried_to_success_are_no_incident() -> None:
    # controller-runtime logs a lost optimistic-concurrency race at error level and requeues.
    conflict = ev(
        1,
        "workflow",
        "Reconciler error",
        level="error",
        attrs={
            "error": 'Operation cannot be fulfilled on provisionrequests "pr-1": the '
            "object has been modified; please apply your changes to the latest "
            "version and try again"
        },
    )
    active = ev(
        2,
        "workflow",
        "a-1: provisioning → active",
        source="workflow",
        entity_kind="allocation",
        entity_id="a-1",
        state_to="active",
    )
    verdict = decide([conflict, active])
    assert (verdict.owner_layer, verdict.first_failure) == ("none", None)
    assert verdict.reason == (
        "1 failures, none naming a cause, all before allocation a-1 reached active: retried "
        "and recovered"
    )
    # A failure that names its cause is an incident even if the work later succeeded.
    cause = ev(1, "node", "write image: No space left on device", level="error")
    assert decide([cause, active]).owner_layer == "node"
    # And the success must come after the failures.
    assert decide([active, ev(3, "workflow", "Reconciler error", level="error")]).owner_layer == (
        "workflow_state"
    )


def test_a_handled_error_is_looked_for_among_the_warnings_just_before_the_failure() -> None:
    # A busy node's timeline holds thousands of warnings about other things: the retries that
    # name the cause come shortly before the failure that gives up.
    noise = [ev(i / 100, "node", f"disk latency {i} ms", level="warning") for i in range(3000)]
    retry = ev(31, "node", "claim failed: x509: certificate has expired", level="warning")
    wrapper = ev(32, "node", "claim loop gave up", level="error")
    verdict = decide([*noise, retry, wrapper])
    assert (verdict.owner_layer, verdict.first_failure) == ("cert", retry)
    # Further back than the 200 warnings before the failure, it is not looked for.
    early = ev(-1, "node", "claim failed: x509: certificate has expired", level="warning")
    assert decide([early, *noise, wrapper]).owner_layer == "node"  # the fallback
