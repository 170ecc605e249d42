"""Label-set parsing and printing: Prometheus' ParseMetric and labels.String()."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.lokisim._labels import (
    LabelParseError,
    format_labels,
    go_quote,
    go_unquote,
    parse_label_set,
)


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ('{a="b", c="d"}', [("a", "b"), ("c", "d")]),
        ("{}", []),
        ('{a="b",}', [("a", "b")]),
        ('  { a = "b" }  ', [("a", "b")]),
        ('up{job="x"}', [("__name__", "up"), ("job", "x")]),
        (r'{a="x\"y\\z\n\t"}', [("a", 'x"y\\z\n\t')]),
        (r'{a="\u00e9\x41\101"}', [("a", "éAA")]),
        ("{a='it\\'s'}", [("a", "it's")]),
        ("{a=`raw\\n`}", [("a", "raw\\n")]),
        ('{b="2", a="1", a="3"}', [("b", "2"), ("a", "1"), ("a", "3")]),
        ('{a=""}', [("a", "")]),
    ],
)
def test_parse_label_set_accepts(text: str, pairs: list[tuple[str, str]]) -> None:
    assert parse_label_set(text) == pairs


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{a-b="c"}', "unexpected character '-' in label set, expected \"=\""),
        ('{a="b"', "unexpected end of input in label set"),
        ('{a!="b"}', "unexpected '!=' in label set, expected \"=\""),
        ('{a=~"b"}', "unexpected '=~' in label set, expected \"=\""),
        ('a="b"', "unexpected '='"),
        ("{a=b}", "unexpected ident b in label set"),
        ('{a="b"} x', "unexpected ident x"),
        ('{"a"="b"}', 'unexpected string "a" in label set'),
        (r'{a="\q"}', "invalid syntax"),
        ('{a="b"};', "unexpected character ';'"),
        ('{a="b\nc"}', "newline in string"),
        ('{a="b}', "unterminated quoted string"),
        ('{a:b="c"}', "unexpected ident a:b in label set"),
        ("", "unexpected end of input"),
    ],
)
def test_parse_label_set_rejects(text: str, detail: str) -> None:
    with pytest.raises(LabelParseError) as caught:
        parse_label_set(text)
    assert caught.value.detail == detail


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("a\nb\tc\rd", r'"a\nb\tc\rd"'),
        ("\a\b\f\v", r'"\a\b\f\v"'),
        ("\x01\x7f", r'"\x01\x7f"'),
        ("é ü ✓ 🙂", '"é ü ✓ 🙂"'),
        ("\u00a0\u200b", r'"\u00a0\u200b"'),
        ("\U000e0001", r'"\U000e0001"'),
    ],
)
def test_go_quote_matches_strconv_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_format_labels_sorts_and_quotes_like_prometheus() -> None:
    assert format_labels({"b": 'x"y', "a": "1"}) == '{a="1", b="x\\"y"}'
    assert format_labels([("z", "1"), ("a", "2"), ("a", "3")]) == '{a="2", a="3", z="1"}'
    assert format_labels({"a.b": "1"}) == '{"a.b"="1"}'
    assert format_labels({"a.b": "1"}, quote_names=False) == '{a.b="1"}'
    assert format_labels({}) == "{}"


_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True)
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)


@given(st.dictionaries(_names, _text, max_size=6))
def test_format_then_parse_round_trips(labels: dict[str, str]) -> None:
    assert parse_label_set(format_labels(labels)) == sorted(labels.items())


@given(_text)
def test_go_unquote_inverts_go_quote(value: str) -> None:
    assert go_unquote(go_quote(value)) == value


@given(st.text(max_size=40))
def test_parse_label_set_never_crashes(text: str) -> None:
    try:
        pairs = parse_label_set(text)
    except LabelParseError:
        return
    assert all(isinstance(name, str) and isinstance(value, str) for name, value in pairs)
