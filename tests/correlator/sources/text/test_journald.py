"""The ``journald`` format on ``journalctl -o json``'s output."""

from __future__ import annotations

from datetime import UTC

import pytest

from correlator.sources.text import Parsed
from correlator.sources.text.journald import JOURNALD
from tests.correlator.sources.text.records import fixture_lines


def test_every_line_is_a_record() -> None:
    lines = fixture_lines("journald.json")

    parsed = [JOURNALD.read(line, UTC) for line in lines if JOURNALD.starts(line)]

    assert len(parsed) == len(lines) == 50
    assert all(isinstance(record, Parsed) for record in parsed), parsed


def test_an_entry_keeps_every_field_but_the_journals_bookkeeping() -> None:
    parsed = JOURNALD.read(fixture_lines("journald.json")[46], UTC)

    assert isinstance(parsed, Parsed)
    assert (parsed.ts_ns, parsed.level) == (1_795_930_893_103_993_000, "4")
    assert (
        parsed.message == "plain message from systemd-cat req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"
    )
    assert {key: parsed.fields[key] for key in ("SYSLOG_IDENTIFIER", "_HOSTNAME", "_PID")} == {
        "SYSLOG_IDENTIFIER": "provision",
        "_HOSTNAME": "vm",
        "_PID": "14379",
    }
    # The message, the level, the entry's address and how journald filed it: not fields.
    left_out = {"MESSAGE", "PRIORITY", "__REALTIME_TIMESTAMP", "__CURSOR", "_STREAM_ID"}
    assert not left_out & set(parsed.fields)
    assert sorted(parsed.fields) == [
        "SYSLOG_IDENTIFIER",
        "_BOOT_ID",
        "_COMM",
        "_GID",
        "_HOSTNAME",
        "_MACHINE_ID",
        "_PID",
        "_RUNTIME_SCOPE",
        "_TRANSPORT",
        "_UID",
    ]


def test_a_message_of_bytes_is_decoded_with_replacement() -> None:
    parsed = JOURNALD.read(fixture_lines("journald.json")[49], UTC)

    assert isinstance(parsed, Parsed)
    assert parsed.message == "multiline\x1b[31m red \ufffd\ufffd binary"
    assert parsed.fields["INSTANCE_ID"] == "b9000564-fe1a-409b-b8cc-1e88b294cd1d"


def test_several_values_are_joined_and_null_is_empty() -> None:
    line = '{"__REALTIME_TIMESTAMP":"1","MESSAGE":["a",[98]],"BIG":null}'

    assert JOURNALD.read(line, UTC) == Parsed(
        ts_ns=1000,
        level=None,
        message="a\nb",
        fields={"BIG": ""},
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[1]", "not a journal entry: a JSON list, not an object"),
        ('{"MESSAGE":"x"}', "journal entry without __REALTIME_TIMESTAMP"),
        (
            '{"__REALTIME_TIMESTAMP":"-1"}',
            "journal __REALTIME_TIMESTAMP '-1' is not microseconds since 1970",
        ),
        (
            '{"__REALTIME_TIMESTAMP":"9999999999999999999"}',
            "journal __REALTIME_TIMESTAMP 9999999999999999999 is after 2262",
        ),
        (
            '{"__REALTIME_TIMESTAMP":"1","X":[[[1]]]}',
            "journal field 'X' is neither a string, bytes nor a list of them",
        ),
        (
            '{"__REALTIME_TIMESTAMP":"1","X":[256]}',
            "journal field 'X' is neither a string, bytes nor a list of them",
        ),
        (
            '{"__REALTIME_TIMESTAMP":1}',
            "journal field '__REALTIME_TIMESTAMP' is neither a string, bytes nor a list of them",
        ),
    ],
)
def test_what_is_not_a_journal_entry_gets_a_reason(line: str, reason: str) -> None:
    assert JOURNALD.read(line, UTC) == reason


def test_invalid_and_too_deep_json_get_a_reason() -> None:
    invalid = JOURNALD.read("{", UTC)
    deep = JOURNALD.read("[" * 100_000 + "]" * 100_000, UTC)

    assert isinstance(invalid, str) and invalid.startswith("not a journal entry: invalid JSON")
    assert isinstance(deep, str) and deep.startswith("not a journal entry")
