"""Every built-in format against hostile input: random text, binary noise, huge lines and
broken multi-line groups never raise, and whatever is not a record gets a reason."""

from __future__ import annotations

import time
import zoneinfo
from datetime import UTC, timedelta, timezone, tzinfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator.sources.text import FORMATS, Parsed, TextFormat
from tests.correlator.sources.text.records import fixture_lines, records

ZONES: list[tzinfo] = [UTC, timezone(timedelta(hours=-5)), zoneinfo.ZoneInfo("Europe/Berlin")]
MIB = 2**20
#: Far above a linear read of a MiB (milliseconds), far below a backtracking one (hours).
HUGE_LINE_LIMIT_S = 5.0

#: A real line of each format, cut and spliced by the strategies below.
SAMPLES = {
    "oslo": fixture_lines("openstack_2k_head.log")[6],
    "klog": fixture_lines("klog.log")[2],
    "logfmt": fixture_lines("logfmt_gologfmt.log")[2],
    "syslog": fixture_lines("syslog_logger_stderr.log")[0],
    "journald": fixture_lines("journald.json")[46],
    "python": fixture_lines("python_asctime.log")[1],
    "json": fixture_lines("json_zap.log")[3],
}

FORMAT_NAMES = st.sampled_from(sorted(FORMATS))
NOISE = st.binary(max_size=300).map(lambda raw: raw.decode("utf-8", "replace"))
LINES = st.text(max_size=200) | NOISE


@st.composite
def spliced(draw: st.DrawFn) -> str:
    """A real line of any format, cut somewhere and followed by anything."""
    sample = SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))]
    cut = draw(st.integers(0, len(sample)))
    return sample[:cut] + draw(LINES)


def _reads(text_format: TextFormat, text: str, zone: tzinfo) -> None:
    """``text`` read by ``text_format``: a record, or a reason that says something."""
    result = text_format.read(text, zone)
    if isinstance(result, str):
        assert result.strip(), "an empty reason"
        assert len(result) < 400, result
    else:
        assert isinstance(result, Parsed)
        assert isinstance(result.message, str)
        assert all(isinstance(v, str) for v in result.fields.values())


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(name=FORMAT_NAMES, line=LINES | spliced(), zone=st.sampled_from(ZONES))
def test_any_line_is_a_record_or_a_reason(name: str, line: str, zone: tzinfo) -> None:
    text_format = FORMATS[name]

    assert isinstance(text_format.starts(line), bool)
    _reads(text_format, line, zone)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=FORMAT_NAMES,
    lines=st.lists(
        st.sampled_from(sorted(SAMPLES.values()))
        | (LINES | spliced()).map(lambda line: line.replace("\n", " ")),  # lines, as read
        max_size=12,
    ),
)
def test_broken_groups_lose_no_line(name: str, lines: list[str]) -> None:
    text_format = FORMATS[name]

    found, orphans = records(text_format, lines)

    assert sum(record.count("\n") + 1 for record in found) + len(orphans) == len(lines)
    for record in found:
        _reads(text_format, record, UTC)


HUGE = {
    "plain": "a" * MIB,
    "spaces": "a " * (MIB // 2),
    "quotes": '"' * MIB,
    "escapes": '"' + "\\" * (MIB - 1),
    "unclosed value": 'k="' + 'x\\"' * (MIB // 3),
    "pairs": "a=b " * (MIB // 4),
    "equals": "=" * MIB,
    "brackets": "[" * MIB,
    "sd": '[a b="' * (MIB // 6),
    "log words": ".log" * (MIB // 4),
    "json": '{"a":"' + "x" * MIB + '"}',
    "digits": "1" * MIB,
    "nested json": "[" * (MIB // 2) + "]" * (MIB // 2),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("kind", sorted(HUGE))
def test_a_mebibyte_line_is_read_in_linear_time(name: str, kind: str) -> None:
    text_format = FORMATS[name]
    for line in (HUGE[kind], SAMPLES[name] + HUGE[kind], SAMPLES[name][:40] + HUGE[kind]):
        started = time.perf_counter()
        text_format.starts(line)
        _reads(text_format, line, UTC)
        elapsed = time.perf_counter() - started
        assert elapsed < HUGE_LINE_LIMIT_S, f"{name} took {elapsed:.1f} s on {kind}"
