from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_logging.context._ids import new_correlation_id, new_span_id, new_trace_id
from agent_logging.errors import InvalidIdentifierError
from agent_logging.schema import check_id, id_problem

ALLOWED = "allowed: ASCII letters, digits and . _ : / @ + ~ -"
W3C_TRACE = "must be 32 lower-case hex digits, not all zero (W3C trace-context)"
KEYS = "node_id, node_instance_id, correlation_id, allocation_id, workflow_id, trace_id, span_id"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("node_id", "n-17"),
        ("node_instance_id", "ni-3"),
        ("allocation_id", "3f2b8c1e-9a1d-4c55-8f00-2b1c7d9e0a11"),
        ("workflow_id", "aap/job/4711"),
        ("correlation_id", "01HZX3K5Q7R8S9T0V1W2X3Y4Z5"),
        ("node_id", "rack-04.dc1.example.com"),
        ("node_id", "a" * 256),
        ("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
        ("span_id", "00f067aa0ba902b7"),
    ],
)
def test_acceptable_identifiers(key: str, value: str) -> None:
    assert id_problem(key, value) is None
    assert check_id(key, value) == value


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("node_id", "", "is empty (leave an unknown identifier out instead)"),
        ("node_id", "a" * 257, "is 257 characters long; at most 256 are allowed"),
        ("allocation_id", "a" * 10240, "is 10240 characters long; at most 256 are allowed"),
        (
            "allocation_id",
            "a-9'; DROP TABLE allocations; --",
            f"holds \"'\" (U+0027) at position 3; {ALLOWED}",
        ),
        (
            "allocation_id",
            "a\n9",
            f"holds '\\n' (U+000A) at position 1; {ALLOWED}",
        ),
        (
            "workflow_id",
            "wf-é",
            f"holds 'é' (U+00E9) at position 3; {ALLOWED}",
        ),
        (
            "node_id",
            'n"}',
            f"holds '\"' (U+0022) at position 1; {ALLOWED}",
        ),
        ("node_id", 17.5, "must be a string, got float"),
        ("trace_id", "0" * 32, W3C_TRACE),
        ("trace_id", "4BF92F3577B34DA6A3CE929D0E0E4736", W3C_TRACE),
        ("span_id", "xyz", "must be 16 lower-case hex digits, not all zero (W3C trace-context)"),
        ("tenant", "t-1", f"unknown identifier key 'tenant'; expected one of {KEYS}"),
    ],
)  # fmt: skip
def test_unsafe_identifiers_are_refused_with_the_reason(
    key: str, value: object, reason: str
) -> None:
    assert id_problem(key, value) == reason
    with pytest.raises(InvalidIdentifierError) as info:
        check_id(key, value)
    assert info.value.key == key
    assert str(info.value) == f"invalid {key}: {reason}"


def test_integer_identifiers_become_text() -> None:
    assert check_id("node_id", 17) == "17"
    with pytest.raises(InvalidIdentifierError):
        check_id("node_id", True)
    # Past Python's limit on int-to-text digits (4,300): refused as too long, not a bare
    # ValueError from str().
    with pytest.raises(InvalidIdentifierError, match="is an integer longer than 256 digits"):
        check_id("node_id", 10**5000)


def test_minted_ids_are_valid_and_distinct() -> None:
    assert id_problem("trace_id", new_trace_id()) is None
    assert id_problem("span_id", new_span_id()) is None
    assert id_problem("correlation_id", new_correlation_id()) is None
    assert len({new_correlation_id() for _ in range(100)}) == 100


@given(st.text(max_size=300))
def test_problem_never_raises_and_agrees_with_check(value: str) -> None:
    reason = id_problem("allocation_id", value)
    if reason is None:
        assert check_id("allocation_id", value) == value
    else:
        with pytest.raises(InvalidIdentifierError):
            check_id("allocation_id", value)
