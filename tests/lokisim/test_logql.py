"""The LogQL subset: selectors, line filters, parsers and label filters, without sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.lokisim._labels import go_quote
from tests.lokisim._logql import LogQLParseError, parse_query

STREAM = {"service_name": "api", "layer": "node", "env": "prod"}
META = {"allocation_id": "a-9", "detected_level": "error"}
LINE = '{"msg": "release failed", "status": 503, "node": {"id": "n1"}}'


@pytest.mark.parametrize(
    ("query", "selected"),
    [
        ('{layer="node"}', True),
        ('{layer="api"}', False),
        ('{env="prod", layer!="api"}', True),
        ('{layer=~"no.*"}', True),
        ('{layer=~"o"}', False),  # anchored, like Prometheus
        ('{env="prod", layer!~"n.*"}', False),
        ('{layer="node", env="dev"}', False),
        ('{layer="node", missing=""}', True),
        ('{layer="node", missing!="x"}', True),
        ('{allocation_id="a-9"}', False),  # metadata is not a stream label
    ],
)
def test_stream_selector(query: str, selected: bool) -> None:
    assert parse_query(query).selects(STREAM) is selected


@pytest.mark.parametrize(
    ("pipeline", "kept"),
    [
        ('|= "release"', True),
        ('|= "Release"', False),
        ('!= "release"', False),
        ('|~ "rel.*ed"', True),  # unanchored, like Go's MatchString
        ('|~ "(?i)RELEASE"', True),
        ('!~ "fail"', False),
        ('|= "release" |= "failed" != "ok"', True),
        ('|= "release" |= "nope"', False),
        ('|= "nope" or "failed"', True),
        ('!= "nope" or "failed"', False),
        ('|= `"msg"`', True),
        ('| allocation_id="a-9"', True),
        ('| allocation_id!="a-9"', False),
        ('| allocation_id=~"a-[0-9]"', True),
        ('| allocation_id!~"a-.*"', False),
        ('| detected_level="error", layer="node"', True),
        ('| detected_level="error" and layer="api"', False),
        ('| detected_level="info" or layer="node"', True),
        ('| (layer="api" or env="prod") and allocation_id="a-9"', True),
        ('| workflow_id=""', True),
        ('| json | msg="release failed"', True),
        ("| json | status >= 500", True),
        ("| json | status < 500", False),
        ("| json | status == 503", True),
        ('| json | node_id="n1"', True),
        ('| json | layer_extracted="x"', False),
        ('| json | msg="nope"', False),
        ("| allocation_id > 5", False),  # not a number: dropped
    ],
)
def test_pipeline(pipeline: str, kept: bool) -> None:
    query = parse_query('{layer="node"} ' + pipeline)
    assert (query.process(STREAM, META, LINE) is not None) is kept


def test_json_parser_returns_extracted_labels_renaming_clashes() -> None:
    query = parse_query('{layer="node"} | json')
    line = '{"layer": "x", "a.b": 1, "ok": true, "n": null, "arr": [1], "deep": {"k": "v"}}'
    assert query.process(STREAM, {}, line) == {
        "layer_extracted": "x",
        "a_b": "1",
        "ok": "true",
        "deep_k": "v",
    }


def test_json_parser_marks_a_non_json_line_with_an_error_label() -> None:
    query = parse_query('{layer="node"} | json | __error__="JSONParserErr"')
    assert query.process(STREAM, {}, "not json") is not None


def test_logfmt_parser() -> None:
    query = parse_query('{layer="node"} | logfmt | msg="a b" | code="7"')
    assert query.process(STREAM, {}, 'msg="a b" code=7 flag') == {
        "msg": "a b",
        "code": "7",
        "flag": "",
    }


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            '{layer="node"',
            "parse error at line 1, col 14: syntax error: unexpected $end, expecting } or ,",
        ),
        ("", "parse error at line 1, col 1: syntax error: unexpected $end"),
        (
            '{layer~"x"}',
            "parse error at line 1, col 7: syntax error: unexpected character '~', "
            "expecting = or =~ or !~ or !=",
        ),
        (
            '{layer="node"} |= 3',
            "parse error at line 1, col 19: syntax error: unexpected number 3",
        ),
        (
            '{layer="node"}\n| foo',
            "parse error at line 2, col 6: syntax error: unexpected $end",
        ),
        (
            '{layer=~"("}',
            "parse error at line 1, col 9: error parsing regexp: "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            'count_over_time({layer="node"}[5m])',
            "parse error at line 1, col 1: syntax error: unexpected ident count_over_time",
        ),
        (
            '{layer=~".*"}',
            "parse error : queries require at least one regexp or equality matcher that does "
            'not have an empty-compatible value. For instance, app=~".*" does not meet this '
            'requirement, but app=~".+" will',
        ),
        (
            '{layer=""}',
            "parse error : queries require at least one regexp or equality matcher that does "
            'not have an empty-compatible value. For instance, app=~".*" does not meet this '
            'requirement, but app=~".+" will',
        ),
    ],
)
def test_parse_errors_use_lokis_wording(query: str, message: str) -> None:
    with pytest.raises(LogQLParseError) as caught:
        parse_query(query)
    assert str(caught.value) == message


def test_not_equal_empty_counts_as_a_real_matcher() -> None:
    assert parse_query('{layer!=""}').selects(STREAM)


@given(st.text(max_size=40))
def test_quoted_line_filter_matches_exactly_its_text(needle: str) -> None:
    query = parse_query(f'{{layer="node"}} |= {go_quote(needle)}')
    assert query.process(STREAM, {}, f"<{needle}>") is not None
