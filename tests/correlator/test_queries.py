"""Durations and times as the CLI and the HTTP API read them."""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator.errors import QueryError
from correlator.queries import parse_duration_s, parse_time_ns

# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15m", 900.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1w", 604800.0),
        ("1y", 31536000.0),
        ("1d2h3m4s5ms", 93784.005),
    ],
)
def test_parse_duration_s(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'' is not a duration"),
        ("1.5h", "'1.5h' is not a duration: use integers with units y, w, d, h, m, s, ms"),
        ("30m1h", "'30m1h' is not a duration"),
        ("15 m", "is not a duration"),
        ("-5m", "is not a duration"),
        ("5", "is not a duration"),
        ("1x", "is not a duration"),
        ("0s", "duration '0s' is zero"),
        ("300y", "longer than Loki can express"),
    ],
)
def test_parse_duration_refuses(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message.replace("(", r"\(")):
        parse_duration_s(text)


UNITS = ("y", "w", "d", "h", "m", "s", "ms")
FACTORS = (31536000, 604800, 86400, 3600, 60, 1, 0.001)


@given(
    st.lists(st.integers(0, 99), min_size=7, max_size=7),
    st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_parse_duration_sums_its_parts(amounts: list[int], present: list[bool]) -> None:
    text = "".join(f"{a}{u}" for a, u, p in zip(amounts, UNITS, present, strict=True) if p)
    expected = sum(a * f for a, f, p in zip(amounts, FACTORS, present, strict=True) if p)
    if expected <= 0:
        with pytest.raises(QueryError):
            parse_duration_s(text)
    else:
        assert parse_duration_s(text) == pytest.approx(expected)


@given(st.text(max_size=12))
def test_parse_duration_raises_only_query_errors(text: str) -> None:
    with contextlib.suppress(QueryError):
        assert parse_duration_s(text) > 0


# -- times ---------------------------------------------------------------------------------


def test_parse_time_ns_reads_rfc3339_nanoseconds_and_now_minus() -> None:
    assert parse_time_ns("2026-11-22T13:11:19.5Z") == 1_795_353_079_500_000_000
    assert parse_time_ns(" 1795353079000000000 ") == 1_795_353_079_000_000_000
    before = time.time_ns()
    ago = parse_time_ns("now-1h")
    assert before - 3600 * 10**9 <= ago <= time.time_ns() - 3600 * 10**9
    assert before <= parse_time_ns("now") <= time.time_ns()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "'yesterday' is not a time: use RFC 3339, nanoseconds, or now-1h"),
        ("now-1.5h", "'1.5h' is not a duration"),
        ("now+1h", "'now\\+1h' is not a time"),
        ("2026-11-22T13:11:19", "is not a time"),
        ("\u00b2", "'\u00b2' is not a time: use RFC 3339"),  # a digit to str.isdigit()
        ("\u0663\u0663", "is not a time: use RFC 3339"),  # Arabic-Indic digits
        ("9223372036854775808", "nanoseconds since 1970 end at 2\\*\\*63 - 1"),
        ("2300-01-01T00:00:00Z", "'2300-01-01T00:00:00Z' is not a time"),
    ],
)
def test_parse_time_ns_refuses(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse_time_ns(text)
