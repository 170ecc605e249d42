"""agent_logging.schema: the vocabulary every part of the project derives from sits at the
bottom of the package, and writes times as RFC 3339 with nine digits whatever their order."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from agent_logging import schema


def _reference(ts_ns: int) -> str:
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def test_the_schema_imports_nothing_of_the_package_but_its_errors() -> None:
    tree = ast.parse(Path(schema.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert {name for name in imported if name.startswith("agent_logging")} == {
        "agent_logging.errors"
    }


def test_the_stream_schema_is_labels_then_metadata() -> None:
    assert schema.LABEL_NAMES == ("service_name", "layer", "env", "node_id")
    assert (*schema.IDENTIFIER_KEYS, "trace_id", "span_id", "level") == schema.METADATA_KEYS
    assert not set(schema.LABEL_NAMES) & set(schema.METADATA_KEYS) - {schema.NODE_LABEL}


@given(st.lists(st.integers(min_value=-(2**62), max_value=2**62), min_size=1, max_size=50))
@example([1_772_323_199_999_999_999, 1_772_323_200_000_000_000])  # across a day's end
@example([1_700_000_000_000_000_001, 1_700_000_000_999_999_999, 1_700_000_001_000_000_000])
@example([0, 999_999_999, 1_000_000_000, -1])
def test_times_are_written_the_same_in_any_order(instants: list[int]) -> None:
    # The last second and the days written are remembered: whatever came before, each
    # instant is written as the reference writes it.
    for ts_ns in instants:
        assert schema.rfc3339_ns(ts_ns) == _reference(ts_ns)


def test_many_days_in_a_row_are_written_right_past_the_days_kept() -> None:
    day_ns = 86_400 * 1_000_000_000
    start = 1_600_000_000_123_456_789
    for n in range(5000):  # more days than the cache keeps
        ts_ns = start + n * day_ns
        assert schema.rfc3339_ns(ts_ns) == _reference(ts_ns)
