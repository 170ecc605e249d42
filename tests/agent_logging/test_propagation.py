from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agent_logging
from agent_logging._propagation import (
    env_for_child,
    host_allowed,
    ids_from_env,
    parse_headers,
    render_headers,
    sql_comment_for,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_headers_round_trip() -> None:
    ids = {
        "node_id": "n-17",
        "node_instance_id": "ni-3",
        "correlation_id": "c-1",
        "allocation_id": "a-9",
        "workflow_id": "wf/2",
        "trace_id": TRACE,
        "span_id": SPAN,
    }
    headers = render_headers(ids)
    assert headers == {
        "traceparent": f"00-{TRACE}-{SPAN}-01",
        "baggage": "node_id=n-17,node_instance_id=ni-3,correlation_id=c-1,"
        "allocation_id=a-9,workflow_id=wf%2F2",
        "X-Correlation-ID": "c-1",
    }
    assert parse_headers(headers) == (ids, [])


def test_parse_accepts_asgi_bytes_pairs_and_foreign_baggage() -> None:
    raw = [
        (b"traceparent", f"00-{TRACE}-{SPAN}-01".encode()),
        (b"baggage", b"userId=alice, allocation_id = a-9 ;prop=1,isProduction=false"),
        (b"x-correlation-id", b"c-7"),
    ]
    assert parse_headers(raw) == (
        {"trace_id": TRACE, "span_id": SPAN, "allocation_id": "a-9", "correlation_id": "c-7"},
        [],
    )


def test_baggage_correlation_id_wins_over_the_plain_header() -> None:
    ids, _ = parse_headers({"baggage": "correlation_id=c-bag", "X-Correlation-ID": "c-hdr"})
    assert ids == {"correlation_id": "c-bag"}


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"traceparent": "garbage"}, "traceparent header is malformed: 'garbage'"),
        (
            {"traceparent": f"ff-{TRACE}-{SPAN}-01"},
            f"traceparent header has an invalid version: 'ff-{TRACE}-{SPAN}-01'",
        ),
        (
            {"traceparent": f"00-{'0' * 32}-{SPAN}-01"},
            "traceparent header: trace_id must be 32 lower-case hex digits, not all zero "
            "(W3C trace-context)",
        ),
        (
            {"baggage": "allocation_id=a%27%3B%20DROP"},
            'baggage header: allocation_id holds "\'" (U+0027) at position 1; allowed: ASCII '
            "letters, digits and . _ : / @ + ~ -",
        ),
        (
            {"X-Correlation-ID": "c-1\r\nX-Evil: 1"},
            "X-Correlation-ID header: correlation_id holds '\\r' (U+000D) at position 3; "
            "allowed: ASCII letters, digits and . _ : / @ + ~ -",
        ),
        ({"baggage": "a=" + "x" * 9000}, "baggage header is over 8192 bytes; ignored"),
        (
            {"baggage": "correlation_id=%ff"},
            "baggage header: correlation_id holds '\ufffd' (U+FFFD) at position 0; allowed: "
            "ASCII letters, digits and . _ : / @ + ~ -",
        ),
    ],
)
def test_hostile_headers_are_left_out_with_a_reason(headers: dict[str, str], problem: str) -> None:
    assert parse_headers(headers) == ({}, [problem])


@given(st.dictionaries(st.sampled_from(["traceparent", "baggage", "x-correlation-id"]), st.text()))
def test_parse_headers_never_raises(headers: dict[str, str]) -> None:
    ids, problems = parse_headers(headers)
    for key, value in ids.items():
        assert agent_logging.ids_from_payload({key: value}) == {key: value}
    assert all(isinstance(p, str) for p in problems)


def test_env_round_trip() -> None:
    ids = {"node_id": "n-17", "allocation_id": "a-9", "trace_id": TRACE, "span_id": SPAN}
    env = env_for_child(ids)
    assert env == {
        "AGENT_LOGGING_NODE_ID": "n-17",
        "AGENT_LOGGING_ALLOCATION_ID": "a-9",
        "AGENT_LOGGING_TRACEPARENT": f"00-{TRACE}-{SPAN}-01",
    }
    assert ids_from_env(env) == (ids, [])
    assert ids_from_env({"AGENT_LOGGING_NODE_ID": "n 17"})[1] == [
        "AGENT_LOGGING_NODE_ID: node_id holds ' ' (U+0020) at position 1; allowed: ASCII "
        "letters, digits and . _ : / @ + ~ -"
    ]


def test_sql_comment_follows_sqlcommenter() -> None:
    ids = {"correlation_id": "c-1", "allocation_id": "a-9", "trace_id": TRACE, "span_id": SPAN}
    assert sql_comment_for(ids) == (
        f"/*allocation_id='a-9',correlation_id='c-1',traceparent='00-{TRACE}-{SPAN}-01'*/"
    )
    assert sql_comment_for({}) == ""


@given(st.text(min_size=1, max_size=50))
def test_sql_comment_cannot_break_out_whatever_the_value(value: str) -> None:
    comment = sql_comment_for({"allocation_id": value})
    body = comment[2:-2]
    assert comment.startswith("/*") and comment.endswith("*/")
    assert "*/" not in body and "/*" not in body
    assert "\n" not in comment and "\\" not in comment
    assert body.count("'") == 2


@pytest.mark.parametrize(
    ("host", "port", "patterns", "allowed"),
    [
        ("api.internal", 443, ("api.internal",), True),
        ("API.Internal.", 443, ("api.internal",), True),
        ("api.internal", 8443, ("api.internal:443",), False),
        ("api.internal", 443, ("api.internal:443",), True),
        ("inv.svc.cluster.local", 80, ("*.svc.cluster.local",), True),
        ("svc.cluster.local", 80, ("*.svc.cluster.local",), False),
        ("evilsvc.cluster.local", 80, ("*.svc.cluster.local",), False),
        ("api.github.com", 443, ("api.internal", "*.svc.cluster.local"), False),
        ("::1", 8080, ("[::1]:8080",), True),
        ("::1", 8080, ("::1",), True),
        ("127.0.0.1", 9, (), False),
    ],
)
def test_host_allowlist(host: str, port: int, patterns: tuple[str, ...], allowed: bool) -> None:
    assert host_allowed(host, port, patterns) is allowed


@pytest.mark.integration
def test_identifiers_reach_a_subprocess_through_env() -> None:
    agent_logging.configure(service="parent", layer="workflow", output="none")
    with agent_logging.bound(allocation_id="a-9", correlation_id="c-1"):
        child_env = agent_logging.env()
    code = (
        "import agent_logging;"
        "agent_logging.configure(service='child', layer='workflow', env='test', output='stdout',"
        " format='json');"
        "agent_logging.get_logger('c').info('child ran')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": "/usr/bin:/bin", **child_env},
        capture_output=True,
        check=True,
        timeout=30,
    )
    import orjson

    record = orjson.loads(result.stdout.splitlines()[-1])
    assert record["service"] == "child"
    assert record["allocation_id"] == "a-9"
    assert record["correlation_id"] == "c-1"
