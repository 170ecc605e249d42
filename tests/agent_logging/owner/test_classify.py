"""The owner table applied to text: links, stacks, wrappers, the RE2 prefilter's exactness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_logging.owner import (
    DEFAULT_RULES,
    MAX_TEXT_CHARS,
    Evidence,
    OwnerMatch,
    OwnerRule,
    classify_evidence,
    is_wrapper,
    stack_links,
)
from agent_logging.owner._rule import errnos_in, exit_codes_in

WORDING = Path(__file__).with_name("wording.jsonl")


def test_every_built_in_pattern_is_in_the_linear_time_subset() -> None:
    # RE2 refuses backreferences and look-around, the constructs that need backtracking;
    # the table's patterns must also have no nested quantifiers (RE2 runs those in linear
    # time, Python's re may not): checked by eye in review, and by this compile for the rest.
    options = re2.Options()
    options.log_errors = False
    for rule in DEFAULT_RULES:
        for pattern in rule.message_patterns:
            re2.compile(pattern, options)


def _corpus() -> list[Evidence]:
    entries = [json.loads(line) for line in WORDING.read_text("utf-8").splitlines() if line]
    return [
        Evidence(
            type=e.get("type"),
            message=e.get("message"),
            stack=e.get("stack"),
            status=e.get("status"),
            exit_code=e.get("exit_code"),
            layer=e.get("layer"),
        )
        for e in entries
    ]


def test_the_prefilter_changes_no_answer_on_the_real_wording() -> None:
    # A list gets no prefilter (it may change under it): every rule is searched.
    unfiltered = list(DEFAULT_RULES)
    corpus = _corpus()
    assert len(corpus) > 100
    for evidence in corpus:
        assert classify_evidence(evidence) == classify_evidence(evidence, unfiltered)


_FRAGMENTS = st.sampled_from(
    [
        "certificate has expired",
        "connection refused",
        "dial tcp 10.0.0.1:5432: connect: ",
        "No space left on device",
        "[Errno 111]",
        "rc=127",
        "401 Unauthorized",
        "502 Bad Gateway",
        "x509: ",
        "provision failed",
        "deadlock detected",
        "command not found",
        "ÄÖ straße",
        "\n",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=20)), max_size=8).map("".join),
    st.one_of(st.none(), st.sampled_from(["FileNotFoundError", "psycopg.OperationalError"])),
    st.one_of(st.none(), st.sampled_from([401, 404, 500, 502])),
    st.one_of(st.none(), st.sampled_from(["api", "node"])),
)
def test_the_prefilter_agrees_with_searching_every_rule(
    text: str, type_: str | None, status: int | None, layer: str | None
) -> None:
    evidence = Evidence(type=type_, message=text, status=status, layer=layer, event=text[::-1])
    assert classify_evidence(evidence) == classify_evidence(evidence, list(DEFAULT_RULES))


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        Evidence,
        type=st.one_of(st.none(), st.text(max_size=50)),
        message=st.one_of(st.none(), st.text(max_size=300)),
        chain=st.lists(
            st.tuples(st.one_of(st.none(), st.text(max_size=30)), st.one_of(st.none(), st.text()))
        ).map(tuple),
        stack=st.one_of(st.none(), st.text(max_size=500)),
        event=st.one_of(st.none(), st.text(max_size=100)),
        status=st.one_of(st.none(), st.integers(-(2**70), 2**70)),
        exit_code=st.one_of(st.none(), st.integers(-(2**70), 2**70)),
    )
)
def test_any_evidence_is_classified_without_raising(evidence: Evidence) -> None:
    found = classify_evidence(evidence)
    assert found is None or isinstance(found, OwnerMatch)


def test_huge_binary_text_is_read_in_bounded_pieces() -> None:
    noise = "\x00\xff\ud800" * (4 * MAX_TEXT_CHARS)
    assert classify_evidence(Evidence(message=noise, stack=noise, event=noise)) is None
    tail = classify_evidence(
        Evidence(stack=noise + "\nKeyError: 'x'\nOSError: No space left on device")
    )
    assert tail is not None
    assert tail.owner_layer == "node"


PYTHON_STACK = """Traceback (most recent call last):
  File "/srv/agent/power.py", line 20, in power_on
    subprocess.run(["ipmitool", "power", "on"], check=True)
FileNotFoundError: [Errno 2] No such file or directory: 'ipmitool'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/agent/task.py", line 9, in run
    raise TaskFailed("power on failed") from exc
agent.errors.TaskFailed: power on failed
"""

JAVA_STACK = """java.lang.RuntimeException: claim failed
\tat com.example.Agent.claim(Agent.java:42)
Caused by: java.net.ConnectException: Connection refused
\tat java.base/sun.nio.ch.Net.connect0(Native Method)
"""


def test_stack_links_come_innermost_first() -> None:
    assert stack_links(PYTHON_STACK) == [
        ("FileNotFoundError", "[Errno 2] No such file or directory: 'ipmitool'"),
        ("agent.errors.TaskFailed", "power on failed"),
    ]
    assert stack_links(JAVA_STACK) == [
        ("java.net.ConnectException", "Connection refused"),
        ("java.lang.RuntimeException", "claim failed"),
    ]


@pytest.mark.parametrize(
    ("text", "wrapper"),
    [
        ("provision failed", True),
        ("Provisioning failed.", True),
        ("the release task failed; see worker logs", True),
        ("internal server error", True),
        ("Internal Server Error", True),
        ("unexpected error", True),
        ("An error occurred", True),
        ("HTTP 500", True),
        ("500 Internal Server Error", True),
        ("job failed for allocation a-9", True),
        ("", True),
        (None, True),
        ("claim failed: connection refused", False),
        ("deadlock detected", False),
        ("disk /dev/sdb failed SMART check", False),
        ("x" * 200 + " failed", False),
    ],
)
def test_is_wrapper(text: str | None, wrapper: bool) -> None:
    assert is_wrapper(text) is wrapper


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Command '['sh', '-c', 'x']' returned non-zero exit status 127.", {127}),
        ("exit status 2", {2}),
        ("Process exited with exit code: 126", {126}),
        ('fatal: [n1]: FAILED! => {"changed": false, "rc": 127}', {127}),
        ("non-zero return code rc=1", {1}),
        ("Main process exited, code=exited, status=203/EXEC", {203}),
        ("port 5432", set()),
    ],
)
def test_exit_codes_in(text: str, codes: set[int]) -> None:
    assert exit_codes_in(text) == codes


def test_errnos_in() -> None:
    assert errnos_in("[Errno 111] Connection refused; errno=28") == {111, 28}
    assert errnos_in("no errno here") == set()


def test_operator_rules_are_prefiltered_with_the_table() -> None:
    mine = OwnerRule("node", message_patterns=("BMC .{0,20} timed out",), name="bmc", linear=True)
    rules = (mine, *DEFAULT_RULES)
    found = classify_evidence(Evidence(message="BMC r07 session timed out"), rules)
    assert found == OwnerMatch("node", "bmc", "BMC r07 session timed out")
    assert classify_evidence(Evidence(message="nothing here"), rules) is None
