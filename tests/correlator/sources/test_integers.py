"""Integers past 64 bits: how they are found cheaply, read exactly, and written as text."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator.sources._integers import exact, exponent_in, may_hold_wide, reread, wide_as_text

WIDE = "123456789012345678901234567890"
#: Nested as deep as orjson reads (1,024 levels): deeper than the stdlib parser can go.
DEEPEST = b"[" * 1024 + b"]" * 1024


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (f'{{"seq":{WIDE}}}', {"seq": WIDE}),
        (f"[{WIDE},-{WIDE}]", [WIDE, f"-{WIDE}"]),
        (
            "[-9223372036854775809,18446744073709551616]",
            ["-9223372036854775809", "18446744073709551616"],
        ),
        # What orjson holds stays an integer; floats stay floats.
        ("[-9223372036854775808,18446744073709551615,-0]", [-(2**63), 2**64 - 1, 0]),
        (
            "[1.5e+300,1e16,-0.0,12345678901234567890.0]",
            [1.5e300, 1e16, -0.0, 1.2345678901234567e19],
        ),
        # The last of duplicate keys wins, as in orjson.
        ('{"a":1,"b":2,"a":3}', {"a": 3, "b": 2}),
    ],
)
def test_reread(text: str, value: Any) -> None:
    read = reread(text, None)

    assert repr(read) == repr(value)  # types too: 1e16 is not 10**16
    assert reread(text.encode(), None) == read


def test_reread_falls_back_where_the_stdlib_parser_cannot_go() -> None:
    fallback = orjson.loads(DEEPEST)

    assert reread(DEEPEST, fallback) is fallback


#: Decimal numbers with more digits than a float holds: how they round is where parsers differ.
FLOAT_TEXT = st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})\.[0-9]{1,24}([eE][+-]?[0-9]{1,3})?", fullmatch=True
)


@given(FLOAT_TEXT)
def test_floats_read_as_orjson_reads_them(text: str) -> None:
    try:
        expected = orjson.loads(text)
    except orjson.JSONDecodeError:  # past the largest float: orjson refuses the line
        return

    assert repr(reread(text, None)) == repr(expected)


@given(
    st.floats(min_value=1e16, allow_infinity=False)
    | st.floats(max_value=-1e16, allow_infinity=False)
)
def test_every_float_from_1e16_is_written_with_an_exponent(value: float) -> None:
    assert may_hold_wide(orjson.dumps({"x": [value]}))


@given(st.integers(min_value=2**64, max_value=10**308) | st.integers(-(10**308), -(2**63) - 1))
def test_orjson_reads_every_integer_past_64_bits_as_such_a_float(value: int) -> None:
    read = orjson.loads(str(value))

    assert type(read) is float
    assert may_hold_wide(orjson.dumps(read))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"seq":1.2345678901234568e+29}', True),
        ('{"seq":-9.223372036854776e+18}', True),
        ('{"seq":9999999999999998.0,"t":"2026-11-22T14:11:19+01:00"}', False),
        ('{"note":"one+two e+3"}', False),
    ],
)
def test_exponent_in(text: str, found: bool) -> None:
    assert exponent_in(text) is found
    assert may_hold_wide(text.encode()) is found


def test_exact_reads_again_only_what_lost_digits() -> None:
    text = f'{{"seq":{WIDE},"big":1.5e+300}}'.encode()
    plain = b'{"seq":18446744073709551615,"t":"2026-11-22T14:11:19+01:00"}'
    read_plain = orjson.loads(plain)

    assert exact(orjson.loads(text), text) == {"seq": WIDE, "big": 1.5e300}
    assert exact(read_plain, plain) is read_plain


def test_exact_refuses_what_orjson_cannot_write() -> None:
    deep = b"[" * 300 + b"]" * 300  # orjson reads 1,024 levels and writes at most 254

    with pytest.raises(orjson.JSONEncodeError):
        exact(orjson.loads(deep), deep)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (
            {"a": [2**64, -(2**63) - 1, 2**64 - 1, -(2**63)]},
            {"a": [str(2**64), str(-(2**63) - 1), 2**64 - 1, -(2**63)]},
        ),
        (
            {"a": {"b": int(WIDE)}, "c": 1.5, "d": True, "e": None},
            {"a": {"b": WIDE}, "c": 1.5, "d": True, "e": None},
        ),
        (int(WIDE), WIDE),
        ("text", "text"),
    ],
)
def test_wide_as_text(value: Any, written: Any) -> None:
    assert wide_as_text(value) == written
    orjson.dumps(wide_as_text(value))  # orjson can write it
