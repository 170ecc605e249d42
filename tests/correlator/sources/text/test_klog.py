"""The ``klog`` format on klog's own output (``programs/klog_lines.go``), and its year."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from correlator.sources.text import Parsed
from correlator.sources.text.klog import KLOG, read_at
from tests.correlator.sources.text.records import fixture_lines, records

NOW_NS = 1_796_083_200_000_000_000  # 2026-12-01T00:00:00Z, two days after the capture


def _ns(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * 1_000_000_000


def test_every_line_of_klogs_output_is_a_record_or_its_continuation() -> None:
    lines = fixture_lines("klog.log")

    found, orphans = records(KLOG, lines)

    assert (len(lines), len(found), orphans) == (10, 8, [])
    parsed = [read_at(record, UTC, NOW_NS) for record in found]
    assert all(isinstance(record, Parsed) for record in parsed), parsed
    assert [r.level for r in parsed if isinstance(r, Parsed)] == list("IIIIWEEI")


def test_a_structured_line_reads_its_message_and_pairs() -> None:
    record = records(KLOG, fixture_lines("klog.log"))[0][2]

    assert read_at(record, UTC, NOW_NS) == Parsed(
        ts_ns=1_795_930_867_986_903_000,  # 2026-11-29T05:41:07.986903Z
        level="I",
        message="Pod status updated",
        fields={
            "pid": "14013",
            "file": "klog_lines.go",
            "line": "24",
            "pod": "kube-system/coredns-5d78c9869d-abcde",
            "status": "Running",
            "request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
        },
    )


def test_quoted_messages_and_values_are_unquoted() -> None:
    record = records(KLOG, fixture_lines("klog.log"))[0][7]

    parsed = read_at(record, UTC, NOW_NS)

    assert isinstance(parsed, Parsed)
    assert parsed.message == 'Message with "quotes" and spaces'
    assert parsed.fields["key"] == "value with spaces"
    assert parsed.fields["empty"] == ""


def test_a_multi_line_message_keeps_its_lines() -> None:
    record = records(KLOG, fixture_lines("klog.log"))[0][6]

    parsed = read_at(record, UTC, NOW_NS)

    assert isinstance(parsed, Parsed)
    assert parsed.message == "multi-line error:\nsecond line\nthird line"


@pytest.mark.parametrize(
    ("line", "now", "expected"),
    [
        (
            "I1231 23:59:59.000000 1 a.go:1] m",
            "2027-01-02T00:00:00+00:00",
            "2026-12-31T23:59:59+00:00",
        ),
        (
            "I0101 00:00:00.000000 1 a.go:1] m",
            "2026-12-31T00:00:00+00:00",
            "2026-01-01T00:00:00+00:00",
        ),
        # Less than a day ahead of now (another zone, a clock ahead): still this year.
        (
            "I1201 12:00:00.000000 1 a.go:1] m",
            "2026-12-01T00:00:00+00:00",
            "2026-12-01T12:00:00+00:00",
        ),
        (
            "I0229 00:00:00.000000 1 a.go:1] m",
            "2026-12-01T00:00:00+00:00",
            "2024-02-29T00:00:00+00:00",
        ),
    ],
)
def test_the_year_is_the_latest_not_more_than_a_day_ahead(
    line: str, now: str, expected: str
) -> None:
    parsed = read_at(line, UTC, _ns(now))

    assert isinstance(parsed, Parsed)
    assert parsed.ts_ns == _ns(expected)


def test_what_is_not_klog_gets_a_reason() -> None:
    assert read_at("hello", UTC, NOW_NS) == (
        "not a klog line (expected e.g. I1129 04:29:29.123456   12345 server.go:123] msg)"
    )
    assert read_at("I1332 00:00:00.000000 1 a.go:1] m", UTC, NOW_NS) == (
        "klog time: 2026-13-32 is not a valid date: month must be in 1..12"
    )


def test_unreadable_pairs_leave_the_text_as_the_message() -> None:
    parsed = read_at('I1129 05:41:07.000000 1 a.go:1] "msg" key="unclosed', UTC, NOW_NS)

    assert isinstance(parsed, Parsed)
    assert parsed.message == '"msg" key="unclosed'
    assert parsed.fields == {"pid": "1", "file": "a.go", "line": "1"}
