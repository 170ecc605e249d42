"""The ``logfmt`` format on go-logfmt's and logrus's output (``programs/``)."""

from __future__ import annotations

import zoneinfo
from datetime import UTC

import pytest

from correlator.sources.text import Parsed
from correlator.sources.text.logfmt import LOGFMT
from tests.correlator.sources.text.records import fixture_lines


@pytest.mark.parametrize(("name", "count"), [("logfmt_gologfmt.log", 5), ("logfmt_logrus.log", 5)])
def test_every_line_is_a_record(name: str, count: int) -> None:
    lines = fixture_lines(name)

    parsed = [LOGFMT.read(line, UTC) for line in lines if LOGFMT.starts(line)]

    assert len(parsed) == len(lines) == count
    assert all(isinstance(record, Parsed) for record in parsed), parsed


def test_go_logfmt_escapes_are_read() -> None:
    line = fixture_lines("logfmt_gologfmt.log")[2]

    assert LOGFMT.read(line, UTC) == Parsed(
        ts_ns=1_795_930_862_544_871_242,  # 2026-11-29T05:41:02.544871242Z
        level="error",
        message='upstream failed: "timeout"\nretrying',
        fields={"host": "worker-1", "err": "dial tcp 10.0.0.1:443: i/o timeout"},
    )


def test_the_other_time_level_and_message_keys() -> None:
    lines = fixture_lines("logfmt_gologfmt.log")

    warn = LOGFMT.read(lines[3], UTC)
    last = LOGFMT.read(lines[4], UTC)

    assert isinstance(warn, Parsed)
    assert (warn.level, warn.message, dict(warn.fields)) == (
        "warn",
        "=equals and spaces=",
        {"empty": ""},
    )
    assert isinstance(last, Parsed)
    assert (last.ts_ns, last.message) == (1_795_930_862_546_871_242, "unicode ✓ ünïcödé")


def test_logrus_text_formatter_lines() -> None:
    line = fixture_lines("logfmt_logrus.log")[1]

    assert LOGFMT.read(line, UTC) == Parsed(
        ts_ns=1_795_930_863_627_249_176,
        level="debug",
        message="handling request",
        fields={"host": "worker-1", "request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"},
    )


def test_a_time_without_an_offset_is_read_in_the_zone_given() -> None:
    parsed = LOGFMT.read("time=2026-07-01T12:00:00.5 msg=x", zoneinfo.ZoneInfo("Europe/Berlin"))

    assert isinstance(parsed, Parsed)
    assert parsed.ts_ns == 1_782_900_000_500_000_000


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("", "a blank line is not a logfmt record"),
        ("hello world", "logfmt line without a time (expected a time, ts or t key)"),
        (
            'ts=2026-11-29T00:00:00Z msg="unclosed',
            "not logfmt: not key=value pairs from character 25: 'msg=\"unclosed'",
        ),
        (
            "ts=yesterday msg=x",
            "logfmt ts: 'yesterday' is not an RFC 3339 timestamp "
            "(expected e.g. 2026-11-22T13:11:19.123Z)",
        ),
    ],
)
def test_what_is_not_logfmt_gets_a_reason(line: str, reason: str) -> None:
    assert LOGFMT.read(line, UTC) == reason
