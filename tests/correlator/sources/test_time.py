from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_logging.schema import rfc3339_ns
from correlator.sources._time import (
    MAX_NS,
    MIN_NS,
    parse_epoch_seconds_ns,
    parse_nginx_error_ns,
    parse_nginx_local_ns,
    parse_postgres_ns,
    parse_rfc3339_ns,
    parse_zone,
)

#: 2026-11-22T13:11:19Z in seconds since the epoch.
T0 = 1_795_353_079
NS = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T13:11:19.123456789Z", T0 * NS + 123_456_789),
        ("2026-11-22T13:11:19Z", T0 * NS),
        ("2026-11-22t13:11:19z", T0 * NS),
        ("2026-11-22 13:11:19.5Z", T0 * NS + 500_000_000),
        ("2026-11-22T13:11:19,25Z", T0 * NS + 250_000_000),
        ("2026-11-22T13:11:19.123+00:00", T0 * NS + 123_000_000),
        ("2026-11-22T14:11:19.123456+01:00", T0 * NS + 123_456_000),
        ("2026-11-22T14:11:19+0100", T0 * NS),
        ("2026-11-22T14:11:19+01", T0 * NS),
        ("2026-11-22T07:41:19-05:30", T0 * NS),
        ("2026-11-22T13:11:19.123456789012Z", T0 * NS + 123_456_789),  # truncated to ns
        ("2026-11-22T13:11:60Z", (T0 + 41) * NS),  # a leap second counts as the next second
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.5Z", -500_000_000),
    ],
)
def test_rfc3339(text: str, expected: int) -> None:
    assert parse_rfc3339_ns(text) == expected
    assert parse_rfc3339_ns(text) == expected  # second call may take the cached fast path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "2026-11-22T13:11:19",
            "'2026-11-22T13:11:19' has no UTC offset (expected Z or ±HH:MM)",
        ),
        (
            "22/Nov/2026",
            "'22/Nov/2026' is not an RFC 3339 timestamp (expected e.g. 2026-11-22T13:11:19.123Z)",
        ),
        (
            "2026-13-01T00:00:00Z",
            "'2026-13-01T00:00:00Z' is not a valid date: month must be in 1..12",
        ),
        (
            "2026-02-30T00:00:00Z",
            "'2026-02-30T00:00:00Z' is not a valid date: day is out of range for month",
        ),
        (
            "2026-11-22T24:00:00Z",
            "'2026-11-22T24:00:00Z' is not a valid time of day: 24:00:00",
        ),
        (
            "2026-11-22T13:11:19+24:00",
            "'2026-11-22T13:11:19+24:00' has an impossible UTC offset '+24:00'",
        ),
        ("", "'' is not an RFC 3339 timestamp (expected e.g. 2026-11-22T13:11:19.123Z)"),
    ],
)
def test_rfc3339_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_rfc3339_ns(text)


def test_rfc3339_fast_path_refuses_non_ascii_digits() -> None:
    parse_rfc3339_ns("2026-11-22T13:11:19.000000000Z")  # prime the minute's cache
    with pytest.raises(ValueError, match="is not an RFC 3339 timestamp"):
        parse_rfc3339_ns(
            "2026-11-22T13:11:19.\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669Z"
        )
    with pytest.raises(ValueError, match="is not an RFC 3339 timestamp"):
        parse_rfc3339_ns("2026-11-22T13:11:\u0661\u0669.000000000Z")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T13:11:00.000000001Z", (T0 - 19) * NS + 1),
        ("2026-11-22T13:11:59.999999999Z", (T0 + 40) * NS + 999_999_999),
        ("2026-11-22T13:11:60.000000000Z", (T0 + 41) * NS),  # a leap second
        ("2026-11-22T13:11:61.000000000Z", "is not a valid time of day: 13:11:61"),
        ("2026-11-22T13:11:99.000000000Z", "is not a valid time of day: 13:11:99"),
        ("2026-11-22T13:11:1x.000000000Z", "is not an RFC 3339 timestamp"),
        ("2026-11-22T13:11:19.00000000xZ", "is not an RFC 3339 timestamp"),
    ],
)
def test_rfc3339_within_a_minute_seen_before(text: str, expected: int | str) -> None:
    # Canonical timestamps of a minute parsed once are read from that minute's start: every
    # second and fraction is checked as the full parse checks it.
    parse_rfc3339_ns("2026-11-22T13:11:19.000000000Z")
    if isinstance(expected, int):
        assert parse_rfc3339_ns(text) == expected
    else:
        with pytest.raises(ValueError, match=re.escape(expected)):
            parse_rfc3339_ns(text)


@given(
    st.integers(min_value=MIN_NS + 60 * NS, max_value=MAX_NS),
    st.integers(min_value=0, max_value=60 * NS - 1),
)
def test_rfc3339_agrees_within_a_minute(minute_ns: int, offset_ns: int) -> None:
    start = minute_ns - minute_ns % (60 * NS)
    parse_rfc3339_ns(rfc3339_ns(start))  # the minute is now known, if all in range
    later = min(start + offset_ns, MAX_NS)
    assert parse_rfc3339_ns(rfc3339_ns(later)) == later


_OUT_OF_RANGE = "is outside the years 1677 to 2262 that nanoseconds since 1970 can hold in 64 bits"


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_rfc3339_ns, "2262-04-11T23:47:16.854775808Z"),
        (parse_rfc3339_ns, "2300-01-01T00:00:00Z"),
        (parse_rfc3339_ns, "1677-09-21T00:12:43.145224191Z"),
        (parse_rfc3339_ns, "0001-01-01T00:00:00Z"),
        (parse_nginx_local_ns, "01/Jan/2300:00:00:00 +0000"),
        (parse_postgres_ns, "9999-11-22 13:11:19.123 UTC"),
        (parse_epoch_seconds_ns, "10000000000"),
    ],
)
def test_instants_the_store_cannot_hold_are_refused(parse: Callable[[str], int], text: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(repr(text))} {_OUT_OF_RANGE}$"):
        parse(text)


def test_the_last_instants_in_range_are_read() -> None:
    assert parse_rfc3339_ns("2262-04-11T23:47:16.854775807Z") == MAX_NS
    assert parse_rfc3339_ns("1677-09-21T00:12:43.145224192Z") == MIN_NS
    # The minute of the last instant is not cached (its later seconds are out of range).
    with pytest.raises(ValueError, match=_OUT_OF_RANGE):
        parse_rfc3339_ns("2262-04-11T23:47:17.000000000Z")
    with pytest.raises(ValueError, match=_OUT_OF_RANGE):
        parse_nginx_error_ns("2300/01/01 00:00:00")


@given(st.integers(min_value=MIN_NS, max_value=MAX_NS))
def test_format_then_parse_round_trips(ts_ns: int) -> None:
    text = rfc3339_ns(ts_ns)
    assert len(text) == 30
    assert parse_rfc3339_ns(text) == ts_ns


@given(
    st.datetimes(
        min_value=datetime(1677, 9, 23),  # noqa: DTZ001 - hypothesis adds the zone below
        max_value=datetime(2262, 4, 10),  # noqa: DTZ001
        timezones=st.builds(
            timezone,
            st.integers(min_value=-23 * 60 + 1, max_value=23 * 60 - 1).map(
                lambda minutes: timedelta(minutes=minutes)
            ),
        ),
    )
)
def test_rfc3339_agrees_with_datetime(moment: datetime) -> None:
    expected = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    assert parse_rfc3339_ns(moment.isoformat()) == expected


@given(st.text(max_size=40))
def test_rfc3339_raises_only_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_rfc3339_ns(text)


#: Each field of an RFC 3339 timestamp: the values it may hold, and values it may not.
_FIELDS: Final = {
    "year": (st.integers(1677, 2262), st.just(0)),
    "month": (st.integers(1, 12), st.just(0) | st.integers(13, 99)),
    "day": (st.integers(1, 31), st.just(0) | st.integers(32, 99)),
    "hour": (st.integers(0, 23), st.integers(24, 99)),
    "minute": (st.integers(0, 59), st.integers(60, 99)),
    "second": (st.integers(0, 60), st.integers(61, 99)),
    "offset_hours": (st.integers(0, 23), st.integers(24, 99)),
    "offset_minutes": (st.integers(0, 59), st.integers(60, 99)),
}


@st.composite
def rfc3339_texts(draw: st.DrawFn, *, broken: bool) -> tuple[str, int | None]:
    """An RFC 3339 timestamp in any form the parser documents (``T``/``t``/space, 0 to 12
    fraction digits after ``.`` or ``,``, ``Z``/``z``/``±HH:MM``/``±HHMM``/``±HH``), and
    the instant it names, read field by field (None: it names none, e.g. 31 November).
    ``broken``: one field out of its range (minute 60, offset +24:00, ...) or no offset."""
    bad = draw(st.sampled_from([*_FIELDS, "offset"])) if broken else None
    field = {name: draw(values[name == bad]) for name, values in _FIELDS.items()}
    year, month, day = field["year"], field["month"], field["day"]
    hour, minute, second = field["hour"], field["minute"], field["second"]
    text = f"{year:04d}-{month:02d}-{day:02d}{draw(st.sampled_from('Tt '))}"
    text += f"{hour:02d}:{minute:02d}:{second:02d}"
    fraction = draw(st.text("0123456789", max_size=12))
    if fraction:
        text += draw(st.sampled_from(".,")) + fraction
    numeric = bad in ("offset_hours", "offset_minutes") or (bad != "offset" and draw(st.booleans()))
    offset_s = 0
    if numeric:
        sign = draw(st.sampled_from("+-"))
        separator = ":" if bad == "offset_minutes" else draw(st.sampled_from([":", "", None]))
        off_minutes = 0 if separator is None else field["offset_minutes"]
        text += f"{sign}{field['offset_hours']:02d}"
        if separator is not None:
            text += f"{separator}{off_minutes:02d}"
        offset_s = (-1 if sign == "-" else 1) * (field["offset_hours"] * 3600 + off_minutes * 60)
    elif bad != "offset":
        text += draw(st.sampled_from("Zz"))
    if bad is not None:
        return text, None
    try:
        days = (datetime(year, month, day, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days
    except ValueError:  # no such day (31 November)
        return text, None
    seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s
    ts_ns = seconds * NS + int(fraction[:9].ljust(9, "0"))
    return text, ts_ns if MIN_NS <= ts_ns <= MAX_NS else None


def _read_or_refused(text: str, expected: int | None) -> None:
    if expected is None:
        with pytest.raises(ValueError, match=re.escape(repr(text[:80]))):
            parse_rfc3339_ns(text)
    else:
        assert parse_rfc3339_ns(text) == expected
        assert parse_rfc3339_ns(text) == expected  # again, from the minute's cache


@settings(max_examples=300)
@given(rfc3339_texts(broken=False))
def test_rfc3339_reads_every_documented_form(case: tuple[str, int | None]) -> None:
    _read_or_refused(*case)


@settings(max_examples=300)
@given(rfc3339_texts(broken=True))
def test_rfc3339_refuses_a_field_out_of_range_with_value_error(
    case: tuple[str, int | None],
) -> None:
    _read_or_refused(*case)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("22/Nov/2026:13:11:19 +0000", T0 * NS),
        ("22/Nov/2026:14:11:19 +0100", T0 * NS),
        ("22/nov/2026:08:11:19 -0500", T0 * NS),
    ],
)
def test_nginx_local(text: str, expected: int) -> None:
    assert parse_nginx_local_ns(text) == expected
    assert parse_nginx_local_ns(text) == expected  # cached


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "22/Foo/2026:13:11:19 +0000",
            "'22/Foo/2026:13:11:19 +0000' has an unknown month 'Foo'",
        ),
        (
            "2026-11-22T13:11:19Z",
            "'2026-11-22T13:11:19Z' is not an nginx $time_local "
            "(expected e.g. 22/Nov/2026:13:11:19 +0000)",
        ),
        (
            "31/Nov/2026:13:11:19 +0000",
            "'31/Nov/2026:13:11:19 +0000' is not a valid date: day is out of range for month",
        ),
    ],
)
def test_nginx_local_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_nginx_local_ns(text)


def test_nginx_error_time_is_local_time_of_the_server() -> None:
    assert parse_nginx_error_ns("2026/11/22 13:11:19") == T0 * NS
    assert parse_nginx_error_ns("2026/11/22 14:11:19", tz_offset_s=3600.0) == T0 * NS
    with pytest.raises(ValueError, match=r"^'2026-11-22 13:11:19' is not an nginx error-log time"):
        parse_nginx_error_ns("2026-11-22 13:11:19")
    with pytest.raises(ValueError, match="is not a valid time of day: 25:11:19"):
        parse_nginx_error_ns("2026/11/22 25:11:19")


# -- the zone of nginx error-log times --------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("UTC", UTC),
        ("utc", UTC),
        ("Z", UTC),
        (" UTC ", UTC),
        ("+01:00", timezone(timedelta(hours=1))),
        ("+0100", timezone(timedelta(hours=1))),
        ("+01", timezone(timedelta(hours=1))),
        ("-0530", timezone(-timedelta(hours=5, minutes=30))),
        ("-05:30", timezone(-timedelta(hours=5, minutes=30))),
        ("+00:00", timezone(timedelta(0))),
        ("+23:59", timezone(timedelta(hours=23, minutes=59))),
        ("Europe/Berlin", BERLIN),
        ("America/New_York", ZoneInfo("America/New_York")),
        ("Etc/GMT-1", ZoneInfo("Etc/GMT-1")),  # POSIX sign: one hour east of UTC
    ],
)
def test_parse_zone(text: str, zone: tzinfo) -> None:
    assert parse_zone(text) == zone


_NOT_A_ZONE: Final = (
    " is not a time zone: use UTC, an offset such as +01:00 or -0530, or an IANA name such as "
    "Europe/Berlin"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "''" + _NOT_A_ZONE),
        ("Mars/Olympus_Mons", "'Mars/Olympus_Mons'" + _NOT_A_ZONE),
        ("europe/berlin", "'europe/berlin'" + _NOT_A_ZONE),  # tzdata's case only
        ("Europe", "'Europe'" + _NOT_A_ZONE),  # a directory of the database
        ("zone.tab", "'zone.tab'" + _NOT_A_ZONE),  # a file of it that is not a zone
        ("../../etc/passwd", "'../../etc/passwd'" + _NOT_A_ZONE),
        ("/etc/localtime", "'/etc/localtime'" + _NOT_A_ZONE),
        ("CET+1", "'CET+1'" + _NOT_A_ZONE),
        ("1:00", "'1:00'" + _NOT_A_ZONE),
        ("+1:00", "'+1:00'" + _NOT_A_ZONE),
        ("+24:00", "'+24:00' has an impossible UTC offset '+24:00'"),
        ("-01:60", "'-01:60' has an impossible UTC offset '-01:60'"),
    ],
)
def test_parse_zone_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_zone(text)


@pytest.mark.parametrize(
    ("text", "zone", "utc"),
    [
        # Winter (CET, +01:00) and summer (CEST, +02:00) in one zone.
        ("2026/11/22 14:11:19", BERLIN, "2026-11-22T13:11:19Z"),
        ("2026/07/22 15:11:19", BERLIN, "2026-07-22T13:11:19Z"),
        ("2026/11/22 14:11:19", timezone(timedelta(hours=1)), "2026-11-22T13:11:19Z"),
        ("2026/07/22 15:11:19", timezone(timedelta(hours=1)), "2026-07-22T14:11:19Z"),
        ("2026/11/22 13:11:19", UTC, "2026-11-22T13:11:19Z"),
        ("2026/11/22 07:41:19", timezone(-timedelta(hours=5, minutes=30)), "2026-11-22T13:11:19Z"),
        # Spring, 29 March 2026: at 02:00 CET the clocks jump to 03:00 CEST.
        ("2026/03/29 01:59:59", BERLIN, "2026-03-29T00:59:59Z"),
        ("2026/03/29 02:00:00", BERLIN, "2026-03-29T01:00:00Z"),  # skipped: CET, as before
        ("2026/03/29 02:30:00", BERLIN, "2026-03-29T01:30:00Z"),  # skipped: CET, as before
        ("2026/03/29 03:00:00", BERLIN, "2026-03-29T01:00:00Z"),  # the same instant as 02:00
        ("2026/03/29 03:30:00", BERLIN, "2026-03-29T01:30:00Z"),
        # Autumn, 25 October 2026: at 03:00 CEST the clocks go back to 02:00 CET.
        ("2026/10/25 01:59:59", BERLIN, "2026-10-24T23:59:59Z"),
        ("2026/10/25 02:00:00", BERLIN, "2026-10-25T00:00:00Z"),  # twice: the first, CEST
        ("2026/10/25 02:30:00", BERLIN, "2026-10-25T00:30:00Z"),  # twice: the first, CEST
        ("2026/10/25 02:59:59", BERLIN, "2026-10-25T00:59:59Z"),  # twice: the first, CEST
        ("2026/10/25 03:00:00", BERLIN, "2026-10-25T02:00:00Z"),
    ],
)
def test_nginx_error_time_in_a_zone(text: str, zone: tzinfo, utc: str) -> None:
    assert parse_nginx_error_ns(text, zone=zone) == parse_rfc3339_ns(utc)


def test_a_zone_wins_over_a_fixed_offset() -> None:
    assert parse_nginx_error_ns("2026/07/22 15:11:19", 3600.0, zone=BERLIN) == parse_rfc3339_ns(
        "2026-07-22T13:11:19Z"
    )


def test_a_zone_cannot_bring_the_last_second_of_9999_into_range() -> None:
    # Second 60 of the last day datetime can hold: out of range, not an OverflowError.
    with pytest.raises(ValueError, match=_OUT_OF_RANGE):
        parse_nginx_error_ns("9999/12/31 23:59:60", zone=BERLIN)


@given(
    st.datetimes(min_value=datetime(1678, 1, 1), max_value=datetime(2262, 1, 1)),  # noqa: DTZ001
    st.integers(min_value=-(24 * 3600 - 1), max_value=24 * 3600 - 1),
)
def test_a_fixed_zone_reads_as_its_offset(local: datetime, offset_s: int) -> None:
    text = local.strftime("%Y/%m/%d %H:%M:%S")
    zone = timezone(timedelta(seconds=offset_s))
    assert parse_nginx_error_ns(text, zone=zone) == parse_nginx_error_ns(text, float(offset_s))


@settings(max_examples=300)
@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)))  # noqa: DTZ001
def test_a_named_zone_reads_as_datetime_with_fold_0(local: datetime) -> None:
    text = local.strftime("%Y/%m/%d %H:%M:%S")
    expected = local.replace(microsecond=0, tzinfo=BERLIN, fold=0).timestamp()
    assert parse_nginx_error_ns(text, zone=BERLIN) == int(expected) * NS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22 13:11:19.123 UTC", T0 * NS + 123_000_000),
        ("2026-11-22 13:11:19 UTC", T0 * NS),
        ("2026-11-22 13:11:19.123 GMT", T0 * NS + 123_000_000),
        ("2026-11-22 14:11:19.123 CET", T0 * NS + 123_000_000),
        ("2026-11-22 15:11:19.123 CEST", T0 * NS + 123_000_000),
        ("2026-11-22 08:11:19.123 EST", T0 * NS + 123_000_000),
        ("2026-11-22 05:11:19.123 PST", T0 * NS + 123_000_000),
        ("2026-11-22 14:11:19.123 +01", T0 * NS + 123_000_000),
        ("2026-11-22 18:56:19.123 +0545", T0 * NS + 123_000_000),
        ("2026-11-22 10:11:19.123 -03", T0 * NS + 123_000_000),
    ],
)
def test_postgres(text: str, expected: int) -> None:
    assert parse_postgres_ns(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "2026-11-22 13:11:19.123 CST",
            "'2026-11-22 13:11:19.123 CST': time zone 'CST' is ambiguous; "
            "set log_timezone to UTC or a numeric offset",
        ),
        (
            "2026-11-22 13:11:19.123 XYZ",
            "'2026-11-22 13:11:19.123 XYZ': unknown time zone abbreviation 'XYZ'; "
            "set log_timezone to UTC",
        ),
        (
            "2026-11-22T13:11:19.123Z",
            "'2026-11-22T13:11:19.123Z' is not a PostgreSQL log time "
            "(expected e.g. 2026-11-22 13:11:19.123 UTC)",
        ),
    ],
)
def test_postgres_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse_postgres_ns(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1795353079.123", T0 * NS + 123_000_000), ("1795353079", T0 * NS), ("0.000001", 1000)],
)
def test_epoch_seconds(text: str, expected: int) -> None:
    assert parse_epoch_seconds_ns(text) == expected


@pytest.mark.parametrize("text", ["-1", "1e9", "", "1795353079.", " 1"])
def test_epoch_seconds_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="is not seconds since the epoch"):
        parse_epoch_seconds_ns(text)
