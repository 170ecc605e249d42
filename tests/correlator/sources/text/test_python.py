"""The ``python`` format on CPython's ``logging`` output (``programs/python_lines.py``)."""

from __future__ import annotations

from datetime import UTC

import pytest

from correlator.sources.text import Parsed
from correlator.sources.text.python import PYTHON
from tests.correlator.sources.text.records import fixture_lines, records

T0 = 1_795_930_872_088_000_000  # 2026-11-29T05:41:12.088Z
DEFAULT_REASON = (
    "Python logging's default format (LEVEL:logger:message) has no time; "
    "log with a format that starts with %(asctime)s"
)


@pytest.mark.parametrize("name", ["python_asctime.log", "python_dashes.log"])
def test_every_line_is_a_record_or_its_continuation(name: str) -> None:
    found, orphans = records(PYTHON, fixture_lines(name))

    parsed = [PYTHON.read(record, UTC) for record in found]

    assert (len(fixture_lines(name)), len(found), orphans) == (12, 6, [])
    assert [r.level for r in parsed if isinstance(r, Parsed)] == [
        "WARNING", "INFO", "DEBUG", "ERROR", "ERROR", "CRITICAL",
    ]  # fmt: skip
    assert [r.fields["logger"] for r in parsed if isinstance(r, Parsed)] == [
        "root", "app.module", "app.module", "app.db", "app.module", "app.module",
    ]  # fmt: skip


def test_a_traceback_folds_into_its_record() -> None:
    record = records(PYTHON, fixture_lines("python_asctime.log"))[0][4]

    parsed = PYTHON.read(record, UTC)

    assert isinstance(parsed, Parsed)
    assert parsed.ts_ns == T0
    assert parsed.message.splitlines()[0] == "lookup failed"
    assert parsed.message.splitlines()[1] == "Traceback (most recent call last):"
    assert parsed.message.splitlines()[-1] == "KeyError: 'missing'"


def test_the_dashes_form_reads_as_the_spaces_form() -> None:
    spaces = records(PYTHON, fixture_lines("python_asctime.log"))[0][1]
    dashes = records(PYTHON, fixture_lines("python_dashes.log"))[0][1]

    assert PYTHON.read(spaces, UTC) == Parsed(
        ts_ns=T0,
        level="INFO",
        message="request handled request_id=req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
        fields={"logger": "app.module"},
    )
    parsed = PYTHON.read(dashes, UTC)
    assert isinstance(parsed, Parsed)
    assert (parsed.level, parsed.message) == (
        "INFO",
        "request handled request_id=req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
    )


def test_the_default_format_is_recognised_and_rejected_for_its_missing_time() -> None:
    found, orphans = records(PYTHON, fixture_lines("python_default.log"))

    assert (len(found), orphans) == (6, [])
    assert {PYTHON.read(record, UTC) for record in found} == {DEFAULT_REASON}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "hello",
            "not a Python logging line (expected e.g. 2026-11-29 04:29:29,123 INFO name msg)",
        ),
        (
            "2026-11-29 05:41:12,088 hello there",
            "Python logging line without a level and a logger name after its time",
        ),
        (
            "2026-11-31 05:41:12,088 INFO x m",
            "Python logging time: 2026-11-31 is not a valid date: day is out of range for month",
        ),
    ],
)
def test_what_is_not_python_logging_gets_a_reason(line: str, reason: str) -> None:
    assert PYTHON.read(line, UTC) == reason
