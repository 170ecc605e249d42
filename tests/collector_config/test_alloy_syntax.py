"""The Alloy syntax subset parser that the collector-config tests rely on."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.collector_config.alloy_syntax import (
    AlloySyntaxError,
    Block,
    Call,
    Concat,
    Ref,
    evaluate,
    parse,
)


def value_of(expression: str) -> Any:
    return parse(f"x = {expression}\n").attributes["x"]


def test_components_blocks_attributes_and_references() -> None:
    root = parse(
        """
        // a comment
        local.file_match "logs" {
          path_targets = [{"__path__" = "/var/log/*.log", job = "x"}]
        }
        /* a block
           comment */
        loki.source.file "logs" {
          targets    = local.file_match.logs.targets
          forward_to = [loki.write.default.receiver]
        }
        loki.write "default" {
          endpoint { url = "http://127.0.0.1:3100/loki/api/v1/push" }
          wal {
            enabled = true
            max_segment_age = "1h"
          }
        }
        """
    )
    assert [(b.name, b.label) for b in root.blocks] == [
        ("local.file_match", "logs"),
        ("loki.source.file", "logs"),
        ("loki.write", "default"),
    ]
    match, source, write = root.blocks
    assert match.attributes == {"path_targets": [{"__path__": "/var/log/*.log", "job": "x"}]}
    assert source.attributes == {
        "targets": Ref("local.file_match.logs.targets"),
        "forward_to": [Ref("loki.write.default.receiver")],
    }
    assert write.child("endpoint").attributes == {"url": "http://127.0.0.1:3100/loki/api/v1/push"}
    assert write.child("wal").attributes == {"enabled": True, "max_segment_age": "1h"}
    assert write.child("wal").label is None


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (r'"a\\b"', "a\\b"),
        (r'"say \"hi\""', 'say "hi"'),
        (r'"\a\b\f\n\r\t\v\'"', "\a\b\f\n\r\t\v'"),
        (r'"\x41\101\u00e9\U0001F600"', "AA\u00e9\U0001f600"),
        (r'"\xc3\xa9"', "\u00e9"),  # byte escapes form UTF-8
        ('`raw \\d+ "quoted"`', 'raw \\d+ "quoted"'),
        ("`two\nlines`", "two\nlines"),
        ("12", 12),
        ("1.5", 1.5),
        ("true", True),
        ("false", False),
        ("null", None),
        ("[]", []),
        ("{}", {}),
        ('[1, "a", [true],]', [1, "a", [True]]),
        ('{a = 1, "b c" = "d"}', {"a": 1, "b c": "d"}),
        ("[\n  1,\n  2,\n]", [1, 2]),
        ('coalesce(sys.env("X"), "d")', Call("coalesce", (Call("sys.env", ("X",)), "d"))),
        ('"a" + b.c + "d"', Concat(("a", Ref("b.c"), "d"))),
    ],
)
def test_values(expression: str, expected: Any) -> None:
    assert value_of(expression) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('x = "\\q"\n', "unknown escape \\q"),
        ('x = "\\x4"\n', "\\x needs 2 hexadecimal digits"),
        ('x = "\\777"\n', "octal escape \\777 is over 255"),
        ('x = "\\uD800"\n', "not a Unicode scalar value"),
        ('x = "\\xff"\n', "do not form valid UTF-8"),
        ('x = "open\n', "newline in a string"),
        ('x = "open', "unterminated string"),
        ("x = `open", "unterminated raw string"),
        ("/* open", "unterminated block comment"),
        ("x = [\n  1,\n  2\n]\n", "missing ','"),
        ("x = {\n  a = 1\n}\n", "missing ','"),
        ("x = 1 y = 2\n", "expected a newline"),
        ("x = 1\nx = 2\n", "set twice"),
        ("x = {a = 1, a = 2}\n", "set twice"),
        ("a.b = 1\n", "no dots"),
        ("x = 1 == 1\n", "expected a newline"),
        ("x = !true\n", "unexpected character"),
        ("b {\n", "expected an attribute or a block"),
        ("b {\n  = 1\n}\n", "expected an attribute or a block"),
        ("x = \n", "expected a value"),
        ('b "l" x\n', "expected '{'"),
        ("x = [1 2]\n", "expected ',' or ']'"),
    ],
)
def test_errors_name_the_problem_and_its_position(text: str, message: str) -> None:
    with pytest.raises(AlloySyntaxError, match=r"line [0-9]+, column [0-9]+: ") as caught:
        parse(text)
    assert message in str(caught.value)


def test_error_positions() -> None:
    with pytest.raises(AlloySyntaxError) as caught:
        parse('a {\n  b = "x"\n  c = "\\q"\n}\n')
    assert (caught.value.line, caught.value.column) == (3, 8)


def test_child_requires_exactly_one() -> None:
    root = parse("a {\n  b {}\n  b {}\n}\n")
    with pytest.raises(LookupError, match="expected one b block, found 2"):
        root.blocks[0].child("b")
    assert root.blocks[0].children("c") == []


@pytest.mark.parametrize(
    ("expression", "environ", "expected"),
    [
        ('sys.env("A")', {"A": "1"}, "1"),
        ('sys.env("A")', {}, ""),
        ('coalesce(sys.env("A"), "d")', {}, "d"),
        ('coalesce(sys.env("A"), "d")', {"A": "x"}, "x"),
        ('coalesce("", [], {}, null)', {}, None),
        ('coalesce(sys.env("D"), "/x") + "/*.log"', {"D": "/y"}, "/y/*.log"),
        ('[{"p" = "a" + "b"}]', {}, [{"p": "ab"}]),
        ("a.b.c", {}, Ref("a.b.c")),
    ],
)
def test_evaluate(expression: str, environ: dict[str, str], expected: Any) -> None:
    assert evaluate(value_of(expression), environ) == expected


@pytest.mark.parametrize("expression", ['"a" + 1', "unknown(1)", 'sys.env("A", "B")'])
def test_evaluate_refuses_what_it_does_not_know(expression: str) -> None:
    with pytest.raises(ValueError, match=r"unsupported call|non-strings"):
        evaluate(value_of(expression), {})


def quote(text: str) -> str:
    """Alloy's double-quoted form of ``text``."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def render(value: Any) -> str:
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[\n" + "".join(f"{render(item)},\n" for item in value) + "]"
    return "{" + ", ".join(f"{quote(k)} = {render(v)}" for k, v in value.items()) + "}"


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=0, max_value=10**12) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(text=_text)
def test_quoted_strings_round_trip(text: str) -> None:
    assert value_of(quote(text)) == text


@settings(max_examples=200, deadline=None)
@given(text=_text.filter(lambda t: "`" not in t))
def test_raw_strings_are_taken_verbatim(text: str) -> None:
    assert value_of(f"`{text}`") == text


@settings(max_examples=200, deadline=None)
@given(value=_values)
def test_nested_values_round_trip(value: Any) -> None:
    assert value_of(render(value)) == value


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='ab.="`\\{}[](),+/*\n 1', max_size=40))
def test_any_input_parses_or_raises_a_syntax_error(text: str) -> None:
    try:
        root = parse(text)
    except AlloySyntaxError:
        return
    assert isinstance(root, Block)
