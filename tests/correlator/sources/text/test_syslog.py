"""The ``syslog`` format on loghub's Linux sample, rsyslog's file and ``logger``'s output."""

from __future__ import annotations

from datetime import UTC

import pytest

from correlator.sources.text import Parsed
from correlator.sources.text.syslog import SYSLOG, read_at
from tests.correlator.sources.text.records import fixture_lines

NOW_2005_NS = 1_135_987_200_000_000_000  # 2005-12-31T00:00:00Z: loghub's sample is of 2005
NOW_NS = 1_796_083_200_000_000_000  # 2026-12-01T00:00:00Z, two days after the capture


@pytest.mark.parametrize(
    ("name", "count"),
    [("linux_2k_excerpt.log", 41), ("syslog_local.log", 6), ("syslog_logger_stderr.log", 3)],
)
def test_every_line_is_a_record(name: str, count: int) -> None:
    lines = fixture_lines(name)

    parsed = [read_at(line, UTC, NOW_NS) for line in lines if SYSLOG.starts(line)]

    assert len(parsed) == len(lines) == count
    assert all(isinstance(record, Parsed) for record in parsed), parsed


def test_a_traditional_file_line() -> None:
    line = fixture_lines("linux_2k_excerpt.log")[0]

    assert read_at(line, UTC, NOW_2005_NS) == Parsed(
        ts_ns=1_118_762_161_000_000_000,  # 2005-06-14T15:16:01Z
        level=None,
        message="authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= "
        "rhost=218.188.2.4 ",
        fields={"host": "combo", "app": "sshd(pam_unix)", "procid": "19939"},
    )


def test_a_tag_without_a_pid() -> None:
    parsed = read_at(fixture_lines("linux_2k_excerpt.log")[15], UTC, NOW_2005_NS)

    assert isinstance(parsed, Parsed)
    assert parsed.fields == {"host": "combo", "app": "logrotate"}
    assert parsed.message == "ALERT exited abnormally with [1]"


def test_rfc_5424_with_structured_data() -> None:
    line = fixture_lines("syslog_logger_stderr.log")[0]

    assert read_at(line, UTC, NOW_NS) == Parsed(
        ts_ns=1_795_930_879_609_505_000,
        level="5",
        message="instance b9000564-fe1a-409b-b8cc-1e88b294cd1d spawned",
        fields={
            "facility": "20",
            "host": "vm",
            "app": "provision",
            "procid": "4242",
            "msgid": "ID47",
            "structured_data": '[timeQuality tzKnown="1" isSynced="0"]'
            '[exampleSDID@32473 iut="3" eventSource="Application"]',
            "timeQuality.tzKnown": "1",
            "timeQuality.isSynced": "0",
            "exampleSDID@32473.iut": "3",
            "exampleSDID@32473.eventSource": "Application",
        },
    )


def test_rfc_3164_with_pri_and_rsyslogs_file_format() -> None:
    wire = read_at(fixture_lines("syslog_logger_stderr.log")[2], UTC, NOW_NS)
    file = read_at(fixture_lines("syslog_local.log")[3], UTC, NOW_NS)

    assert wire == Parsed(
        ts_ns=1_795_930_879_000_000_000,
        level="4",
        message="an rfc3164 line from logger",
        fields={"facility": "1", "host": "vm", "app": "app", "procid": "123"},
    )
    assert file == Parsed(
        ts_ns=1_795_930_879_616_841_000,
        level=None,
        message="instance b9000564-fe1a-409b-b8cc-1e88b294cd1d spawned "
        "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
        fields={"host": "vm", "app": "provision"},
    )


def test_the_rfc_5424_examples_nil_values() -> None:
    # RFC 5424 §6.5 example 1.
    line = (
        "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - "
        "\ufeff'su root' failed for lonvick on /dev/pts/8"
    )

    assert read_at(line, UTC, NOW_NS) == Parsed(
        ts_ns=1_065_910_455_003_000_000,
        level="2",
        message="'su root' failed for lonvick on /dev/pts/8",
        fields={"facility": "4", "host": "mymachine.example.com", "app": "su", "msgid": "ID47"},
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("<999>Oct 11 22:14:15 h a: m", "syslog PRI <999> is past 191 (facility 23, severity 7)"),
        ("<34>1 - h a - - - m", "RFC 5424 record without a time (its TIMESTAMP is -)"),
        (
            "<34>1 2003-10-11T22:14:15Z h a - - [x m",
            'RFC 5424 STRUCTURED-DATA is neither - nor [SD-ID name="value" ...]',
        ),
        ("Foo 11 22:14:15 h a: m", "syslog time: unknown month 'Foo'"),
        (
            "Feb 30 22:14:15 h a: m",
            "syslog time: 2026-02-30 is not a valid date: day is out of range for month",
        ),
    ],
)
def test_what_is_not_syslog_gets_a_reason(line: str, reason: str) -> None:
    assert read_at(line, UTC, NOW_NS) == reason
