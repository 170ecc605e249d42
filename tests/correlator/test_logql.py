"""LogQL building: every value comes back from Loki's grammar exactly as it went in."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from correlator.errors import QueryError
from correlator.logql import metadata_filter, query_for, selector, string_literal
from tests.lokisim._labels import Matcher
from tests.lokisim._logql import LabelBool, LabelTest, parse_query

# Text without lone surrogates: everything a UTF-8 query can carry.
TEXT = st.text(st.characters(exclude_categories=["Cs"]))
HOSTILE = [
    'a-9"',
    'a-9" or allocation_id=~".+',
    'a-9"} |= "x',
    "a\\",
    'a\\"',
    "a}\n{b",
    "a | json",
    "`a`",
    "a\r\nb\tc\x00d\x7fe",
    "a\u2028b\ufeff",
    "é😀",
    "",
]


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("a-9", '"a-9"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("C:\\temp", '"C:\\\\temp"'),
        ("two\nlines", '"two\\nlines"'),
        ("tab\there", '"tab\\there"'),
        ("bell\x07", '"bell\\a"'),
        ("nul\x00", '"nul\\x00"'),
        ("del\x7f", '"del\\x7f"'),
        ("line\u2028sep", '"line\\u2028sep"'),
        ("é and 😀", '"é and 😀"'),
        ("`raw`", '"`raw`"'),
        ("", '""'),
    ],
)
def test_string_literal(value: str, literal: str) -> None:
    assert string_literal(value) == literal


def test_string_literal_refuses_a_lone_surrogate() -> None:
    with pytest.raises(QueryError, match="lone surrogate U\\+D800"):
        string_literal("a\ud800")


@given(TEXT)
@example("\\")
@example('"')
@example("\n")
@example("\U0010ffff")
def test_string_literal_round_trips_through_the_logql_lexer(value: str) -> None:
    query = parse_query(f'{{service_name="api", allocation_id={string_literal(value)}}}')

    assert query.matchers == (
        Matcher("service_name", "=", "api"),
        Matcher("allocation_id", "=", value),
    )


@pytest.mark.parametrize("value", HOSTILE)
def test_metadata_filter_keeps_a_hostile_value_one_matcher(value: str) -> None:
    query = parse_query('{service_name="api"} ' + metadata_filter("allocation_id", value))

    (stage,) = query.stages
    assert isinstance(stage, LabelTest)
    assert stage.matcher == Matcher("allocation_id", "=", value)


@given(TEXT)
def test_metadata_filter_parses_back_to_the_value(value: str) -> None:
    query = parse_query('{service_name="api"} ' + metadata_filter("correlation_id", value))

    (stage,) = query.stages
    assert isinstance(stage, LabelTest)
    assert stage.matcher == Matcher("correlation_id", "=", value)


def test_metadata_filter_literal() -> None:
    assert metadata_filter("allocation_id", "a-9") == '| allocation_id="a-9"'


@pytest.mark.parametrize("name", ["allocation-id", "9lives", "", "a b", 'x="y"} |', "é"])
def test_invalid_label_names_are_refused(name: str) -> None:
    with pytest.raises(QueryError, match="is not a valid label name"):
        metadata_filter(name, "v")
    with pytest.raises(QueryError, match="is not a valid label name"):
        selector(**{name: "v"})


@given(st.text().filter(lambda name: not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name)))
def test_any_invalid_label_name_is_refused(name: str) -> None:
    with pytest.raises(QueryError):
        metadata_filter(name, "v")


def test_selector_keeps_order_and_escapes() -> None:
    assert selector(service_name="api", layer='no"de') == '{service_name="api", layer="no\\"de"}'
    assert parse_query(selector(service_name="api", layer='no"de')).matchers == (
        Matcher("service_name", "=", "api"),
        Matcher("layer", "=", 'no"de'),
    )


@pytest.mark.parametrize(
    ("matchers", "message"),
    [
        ({}, "needs at least one matcher"),
        ({"service_name": ""}, "is empty"),
    ],
)
def test_selector_refuses(matchers: dict[str, str], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        selector(**matchers)


def test_query_for_one_identifier() -> None:
    assert query_for({"allocation_id": "a-9"}) == '{service_name=~".+"} | allocation_id="a-9"'


def test_query_for_several_identifiers_is_one_or_filter() -> None:
    text = query_for({"allocation_id": "a-9", "node_id": "n-17"}, base_selector='{layer="api"}')

    assert text == '{layer="api"} | allocation_id="a-9" or node_id="n-17"'
    query = parse_query(text)
    (stage,) = query.stages
    assert isinstance(stage, LabelBool)
    keep = query.process({"layer": "api"}, {"node_id": "n-17"}, "line")
    drop = query.process({"layer": "api"}, {"node_id": "n-170"}, "line")
    assert (keep, drop) == ({}, None)


@pytest.mark.parametrize("value", HOSTILE[:-1])
def test_query_for_hostile_value_matches_only_itself(value: str) -> None:
    query = parse_query(query_for({"correlation_id": value, "allocation_id": "a-9"}))

    assert query.process({"service_name": "api"}, {"correlation_id": value}, "x") == {}
    assert query.process({"service_name": "api"}, {"correlation_id": value + "x"}, "x") is None
    assert query.process({"service_name": "api"}, {"correlation_id": "other"}, "x") is None
    assert query.process({"service_name": "api"}, {}, "x") is None


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ({}, "at least one identifier"),
        ({"tenant": "t"}, "unknown identifier key 'tenant'"),
        ({"allocation_id": ""}, "allocation_id is empty"),
        ({"allocation_id": "a\udc00"}, "lone surrogate"),
    ],
)
def test_query_for_refuses(ids: dict[str, str], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        query_for(ids)
