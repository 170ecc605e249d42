from __future__ import annotations

import subprocess
import sys
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agent_logging
from agent_logging.context._propagation import (
    env_for_child,
    host_allowed,
    ids_from_env,
    parse_headers,
    render_headers,
    sql_comment_for,
)
from agent_logging.schema import IDENTIFIER_KEYS

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
            # Redacted before it is cut to 80 characters: cut first, the secret's tail would
            # no longer follow its key and be kept.
            {"traceparent": "x" * 60 + " password=hunter2secret"},
            f"traceparent header is malformed: '{'x' * 60} password=[REDACTED]'",
        ),
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


_HEX = "0123456789abcdef"
_TRACE_IDS = st.text(_HEX, min_size=32, max_size=32).filter(lambda t: t != "0" * 32)
_SPAN_IDS = st.text(_HEX, min_size=16, max_size=16).filter(lambda s: s != "0" * 16)
_OWS = st.sampled_from(["", " ", "\t"])  # optional white space around values
# (template, valid): {v} a version 01-fe, {t} {s} {f} trace id, span id, flags, {x} a suffix.
_TRACEPARENT_FORMS = [
    ("00-{t}-{s}-{f}", True),
    ("{v}-{t}-{s}-{f}", True),  # a later version, read as 00 (trace-context §3.2.2)
    ("{v}-{t}-{s}-{f}-{x}", True),  # a later version may append fields
    ("ff-{t}-{s}-{f}", False),  # version ff is invalid
    ("00-{t}-{s}-{f}-{x}", False),  # version 00 has no more fields
    ("00-{z32}-{s}-{f}", False),  # all-zero trace id
    ("00-{t}-{z16}-{f}", False),  # all-zero span id
    ("00-{t}-{s}", False),  # no flags
    ("00-{t}{s}-{f}", False),  # a field missing its dash
]


@st.composite
def _traceparents(draw: st.DrawFn) -> tuple[str, dict[str, str], int]:
    """A traceparent header, the ids it must give and the number of problems it must cause."""
    trace_id, span_id = draw(_TRACE_IDS), draw(_SPAN_IDS)
    template, valid = draw(st.sampled_from(_TRACEPARENT_FORMS))
    value = template.format(
        v=draw(st.text(_HEX, min_size=2, max_size=2).filter(lambda v: v not in ("00", "ff"))),
        t=trace_id,
        s=span_id,
        f=draw(st.text(_HEX, min_size=2, max_size=2)),
        x=draw(st.text(_HEX + "-", min_size=1, max_size=20)),
        z32="0" * 32,
        z16="0" * 16,
    )
    value = draw(_OWS) + value + draw(_OWS)
    if valid:
        return value, {"trace_id": trace_id, "span_id": span_id}, 0
    return value, {}, 1


_SAFE_IDS = st.from_regex(r"[A-Za-z0-9._:/@+~-]{1,40}", fullmatch=True)
# Ours: a valid value (percent-encoded or not), or one with a character no identifier may hold.
_OUR_VALUES = st.one_of(
    st.tuples(_SAFE_IDS, st.booleans()).map(
        lambda v: (quote(v[0], safe="") if v[1] else v[0], v[0])
    ),
    st.tuples(_SAFE_IDS, st.sampled_from("'\" ,=;é")).map(
        lambda v: (quote(v[0] + v[1], safe=""), None)
    ),
)
# Other vendors' members, which the parser leaves alone whatever their values.
_FOREIGN_MEMBERS = st.tuples(
    st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True).filter(lambda k: k not in IDENTIFIER_KEYS),
    st.text(st.characters(exclude_characters=",", codec="utf-8"), max_size=20),
).map("=".join)


@st.composite
def _baggages(draw: st.DrawFn) -> tuple[str, dict[str, str], int]:
    """A baggage header, the ids it must give and the number of problems it must cause."""
    ours = draw(st.dictionaries(st.sampled_from(IDENTIFIER_KEYS), _OUR_VALUES))
    members = [
        f"{draw(_OWS)}{key}{draw(_OWS)}={draw(_OWS)}{encoded}{draw(_OWS)}"
        + draw(st.sampled_from(["", ";prop=1", " ; p"]))
        for key, (encoded, _) in ours.items()
    ]
    members += draw(st.lists(_FOREIGN_MEMBERS, max_size=3))
    ids = {key: value for key, (_, value) in ours.items() if value is not None}
    return ",".join(draw(st.permutations(members))), ids, len(ours) - len(ids)


@given(_traceparents(), _baggages())
def test_valid_traceparent_and_baggage_give_their_ids_and_invalid_ones_a_problem(
    traceparent: tuple[str, dict[str, str], int], baggage: tuple[str, dict[str, str], int]
) -> None:
    headers = {"traceparent": traceparent[0], "baggage": baggage[0]}
    ids, problems = parse_headers(headers)
    assert ids == {**traceparent[1], **baggage[1]}
    assert len(problems) == traceparent[2] + baggage[2], problems


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
