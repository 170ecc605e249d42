"""The configs' regular expressions: RE2-compatible (Go's regexp is what runs them), shared by
both collectors, and as strict about identifier values as the library is.
"""

from __future__ import annotations

import re
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_logging.schema import IDENTIFIER_KEYS, id_problem
from tests.collector_config.configs import (
    ID_ALPHABET,
    components,
    operators,
    otelcol,
)

# ---- the regular expressions themselves ----------------------------------------------------


def otel_regexes() -> list[str]:
    found: list[str] = []
    for receiver in otelcol()["receivers"].values():
        for op in receiver["operators"]:
            if "regex" in op:
                found.append(op["regex"])
        if "multiline" in receiver:
            found.append(receiver["multiline"]["line_start_pattern"])
    return found


def alloy_regexes() -> list[str]:
    found: list[str] = []
    for process in components("loki.process").values():
        for stage in process.blocks:
            for key in ("expression", "firstline"):
                if key in stage.attributes:
                    value = stage.attributes[key]
                    assert isinstance(value, str)
                    found.append(value)
    return found


def _outside_classes(pattern: str) -> str:
    """``pattern`` with every character class replaced by ``C``."""
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
        elif char == "[":
            index += 1
            if pattern[index : index + 1] == "^":
                index += 1
            if pattern[index : index + 1] == "]":
                index += 1  # a leading ] is literal, in RE2 as in Python
            while pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
            index += 1
            out.append("C")
        else:
            out.append(char)
            index += 1
    return "".join(out)


_NOT_RE2: Final = re.compile(r"\(\?[=!]|\(\?<[=!]|\(\?P=|\(\?>|\\[1-9]|[*+?}]\+|\(\?<[A-Za-z]")


def test_every_regex_is_re2_compatible_and_parsers_use_named_groups_only() -> None:
    parser_patterns = {
        op["regex"]
        for receiver in otelcol()["receivers"].values()
        for op in receiver["operators"]
        if op["type"] == "regex_parser"
    } | {
        str(stage.attributes["expression"])
        for process in components("loki.process").values()
        for stage in process.children("stage.regex")
    }
    for pattern in otel_regexes() + alloy_regexes():
        assert not _NOT_RE2.search(_outside_classes(pattern)), pattern
        compiled = re.compile(pattern)
        if pattern in parser_patterns:
            # Unnamed groups would be lost (Alloy) or become an attribute named "" (stanza).
            assert compiled.groups == len(compiled.groupindex), pattern


def test_both_collectors_use_the_same_regular_expressions() -> None:
    assert sorted(set(otel_regexes())) == sorted(set(alloy_regexes()))


def test_both_collectors_decode_the_same_escapes() -> None:
    otel = {
        (op["regex"], op["replace_with"])
        for receiver in otelcol()["receivers"].values()
        for op in receiver["operators"]
        if op["type"] == "regex_replace"
    }
    alloy_pairs = {
        (str(stage.attributes["expression"]), str(stage.attributes["replace"]))
        for process in components("loki.process").values()
        for stage in process.children("stage.replace")
    }
    assert (
        otel
        == alloy_pairs
        == {
            ("(%3[Aa])", ":"),
            ("(%2[Ff])", "/"),
            ("(%40)", "@"),
            ("(%2[Bb])", "+"),
        }
    )


def _value_class() -> str:
    """The identifier value pattern the sqlcommenter parsers use."""
    pattern = next(
        op["regex"]
        for op in operators("filelog/postgres")
        if op.get("id") == "sqlcomment_allocation_id"
    )
    match = re.search(r"\(\?P<allocation_id>(.*?)\)'", pattern)
    assert match is not None
    return match.group(1)


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=ID_ALPHABET + " '\"=,;%*\\\n\u00e9", min_size=0, max_size=300))
def test_the_identifier_pattern_accepts_exactly_what_the_library_accepts(value: str) -> None:
    accepted = re.fullmatch(_value_class(), value) is not None
    assert accepted == (id_problem("allocation_id", value) is None)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("a", True),
        ("-", True),
        ("a" * 256, True),  # the library's longest identifier
        ("a" * 257, False),
        ("~" * 255 + "9", True),
        ("~" * 256 + "9", False),
        ("", False),
        ("c 1", False),
    ],
)
def test_the_identifier_pattern_stops_where_the_library_does(value: str, accepted: bool) -> None:
    assert (re.fullmatch(_value_class(), value) is not None) == accepted
    assert (id_problem("allocation_id", value) is None) == accepted


def test_every_identifier_pattern_uses_that_value_pattern() -> None:
    value_class = _value_class()
    lifting = [
        pattern
        for pattern in otel_regexes()
        if any(f"(?P<{key}>" in pattern for key in IDENTIFIER_KEYS)
    ]
    keys_seen = set()
    for pattern in lifting:
        groups = re.findall(r"\(\?P<([a-z_]+)>", pattern)
        if groups == ["correlation_id"] and pattern.startswith("^(?P<correlation_id>"):
            continue  # the single-value header form, tested below
        assert len(groups) == 1 and f"(?P<{groups[0]}>{value_class})" in pattern, pattern
        keys_seen.add(groups[0])
    assert keys_seen == set(IDENTIFIER_KEYS)


@pytest.mark.parametrize(
    ("value", "lifted"),
    [
        ("c-1", True),
        ("0b1e2f3a-4d5c-6b7a-8f9e-0d1c2b3a4f5e", True),
        ("a" * 256, True),
        ("a" * 257, False),
        ("-", False),
        ("-c", False),
        ("", False),
        ("c 1", False),
        ("c\u00e9", False),
    ],
)
def test_header_correlation_pattern(value: str, lifted: bool) -> None:
    pattern = next(
        op["regex"]
        for op in operators("filelog/nginx_access")
        if op.get("id") == "correlation_from_header"
    )
    assert (re.search(pattern, value) is not None) == lifted
