"""Wall-clock times read in a zone: what the formats that write no UTC offset (oslo, klog,
Python's ``asctime``, syslog's RFC 3164) need, and the year of the formats that write none
(klog, RFC 3164).

A local time that a daylight-saving change skips or repeats takes the offset in force before
the change (PEP 495's ``fold=0``), as nginx's error-log times do (``correlator.sources._time``).

A time without a year is placed in the latest year that does not put it more than
:data:`FUTURE_SLACK_NS` after now: a log read in January whose lines say ``Dec 31`` is last
year's, one read the same day is this year's, and a clock a few hours ahead of the reader's
(another zone, a drifting host) does not throw a line back a year.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Final

from correlator.sources._time import MAX_NS, MIN_NS, OUT_OF_RANGE, parse_rfc3339_ns

__all__ = [
    "FUTURE_SLACK_NS",
    "UNKNOWN_OFFSET",
    "ZoneTable",
    "civil_ns",
    "digits_ns",
    "epoch_ns",
    "fraction_ns",
    "iso_ns",
    "now_year",
    "wall_offset_s",
    "yearless_ns",
    "zone_table",
]

_NS: Final = 1_000_000_000
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
#: How far after now a yearless time may fall and still be this year's: a day, for clocks in
#: other zones and hosts that drift.
FUTURE_SLACK_NS: Final = 86_400 * _NS
#: How many years back a yearless 29 February looks for a leap year (at most 8 apart: 1896
#: to 1904, 2096 to 2104).
_LEAP_SEARCH: Final = 8
#: Epoch numbers below each bound, and the nanoseconds in one of their unit (:func:`epoch_ns`
#: says why these bounds); a number past the last bound is nanoseconds.
_UNITS: Final = ((10**11, 10**9), (10**14, 10**6), (10**17, 10**3))
#: An ISO 8601 date and time without a UTC offset (``T`` or a space between them; a ``.`` or,
#: as Python's ``asctime``, a ``,`` before the fraction).
_LOCAL: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?", re.ASCII
)


def fraction_ns(digits: str | None) -> int:
    """Nanoseconds of a decimal fraction of a second (``"123"`` is 123 ms); more than nine
    digits are truncated."""
    if not digits:
        return 0
    return int(digits[:9].ljust(9, "0"))


def civil_ns(
    year: int, month: int, day: int, hour: int, minute: int, second: int, nanos: int, zone: tzinfo
) -> int:
    """The instant of a wall-clock time in ``zone``.

    Args:
        year, month, day, hour, minute, second: the time as written (second 60, a leap
            second, counts as the next second's start).
        nanos: its fraction of a second, in nanoseconds.
        zone: the zone the clock that wrote it was in.

    Returns:
        Nanoseconds since the UNIX epoch, UTC.

    Raises:
        ValueError: an impossible date or time of day, or an instant outside 1677-2262.
    """
    try:
        days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError as exc:
        raise ValueError(f"{year:04}-{month:02}-{day:02} is not a valid date: {exc}") from None
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError(f"{hour:02}:{minute:02}:{second:02} is not a valid time of day")
    local_s = days * 86_400 + hour * 3600 + minute * 60 + second
    try:
        offset_s = wall_offset_s(local_s, zone)
    except OverflowError:
        raise ValueError(f"year {year} is {OUT_OF_RANGE}") from None
    ts_ns = (local_s - offset_s) * _NS + nanos
    if not MIN_NS <= ts_ns <= MAX_NS:
        raise ValueError(f"year {year} is {OUT_OF_RANGE}")
    return ts_ns


def wall_offset_s(local_s: int, zone: tzinfo) -> int:
    """The UTC offset, in seconds, of a wall-clock time in ``zone`` (seconds since 1970-01-01
    00:00 on that clock): ``fold=0`` where a change skips or repeats it.

    Raises:
        OverflowError: a time outside the years ``datetime`` holds.
        ValueError: the zone gives no offset.
    """
    offset = zone.utcoffset(None)  # a fixed offset needs no date
    if offset is None:
        # Arithmetic on an aware datetime is wall-clock arithmetic, and yields fold=0.
        offset = (datetime(1970, 1, 1, tzinfo=zone) + timedelta(seconds=local_s)).utcoffset()
        if offset is None:
            raise ValueError(f"time zone {zone!r} gives no UTC offset")
    return int(offset.total_seconds())


#: A zone's offsets by wall-clock time, for the compiled text mapping: ``(starts, offsets)``,
#: each wall-clock second from ``starts[i]`` (seconds since 1970 on that clock) up to the next
#: start reads with ``offsets[i]``; :data:`UNKNOWN_OFFSET` where the table does not say.
ZoneTable = tuple[tuple[int, ...], tuple[int, ...]]
#: What a :data:`ZoneTable` gives where it does not know the offset (the reader declines).
UNKNOWN_OFFSET: Final = -(2**31)
#: The years a zone's table covers around now (logs are read soon after they are written; a
#: time outside is read by the parser).
_TABLE_YEARS: Final = (30, 2)
#: The step a zone's offsets are sampled at before each change is found to the second: two
#: changes of a zone are months apart.
_TABLE_STEP_S: Final = 6 * 3600


def zone_table(zone: tzinfo, now_ns: int) -> ZoneTable:
    """The offsets of ``zone`` by wall-clock time (:data:`ZoneTable`), as
    :func:`wall_offset_s` gives them: one segment for a fixed offset, else the wall-clock
    times from :data:`_TABLE_YEARS` years before the year of ``now_ns`` to as many after,
    each change found to the second."""
    fixed = zone.utcoffset(None)
    if fixed is not None:
        return (-(2**63),), (int(fixed.total_seconds()),)
    year = now_year(zone, now_ns)
    first = (date(year - _TABLE_YEARS[0], 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400
    last = (date(year + _TABLE_YEARS[1], 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400
    starts, offsets = [-(2**63), first], [UNKNOWN_OFFSET, wall_offset_s(first, zone)]
    at = first
    while at < last:
        step = min(_TABLE_STEP_S, last - at)
        if wall_offset_s(at + step, zone) != offsets[-1]:
            low, high = at, at + step  # the offset changes in (low, high]
            while high - low > 1:
                middle = (low + high) // 2
                if wall_offset_s(middle, zone) == offsets[-1]:
                    low = middle
                else:
                    high = middle
            starts.append(high)
            offsets.append(wall_offset_s(high, zone))
        at += step
    starts.append(last)
    offsets.append(UNKNOWN_OFFSET)
    return tuple(starts), tuple(offsets)


def now_year(zone: tzinfo, now_ns: int) -> int:
    """The year it is at ``now_ns`` on a clock in ``zone``."""
    return datetime.fromtimestamp(now_ns // _NS, zone).year


def digits_ns(
    year: str,
    month: str,
    day: str,
    hour: str,
    minute: str,
    second: str,
    fraction: str | None,
    zone: tzinfo,
) -> int:
    """:func:`civil_ns` of a time as a pattern's groups capture it: decimal digits, and the
    fraction's digits or None.

    Raises:
        ValueError: as :func:`civil_ns`.
    """
    return civil_ns(
        int(year), int(month), int(day), int(hour), int(minute), int(second),
        fraction_ns(fraction), zone,
    )  # fmt: skip


def yearless_ns(
    month: int,
    day: int,
    hour: int,
    minute: int,
    second: int,
    nanos: int,
    zone: tzinfo,
    now_ns: int,
) -> int:
    """The instant of a wall-clock time without a year, in the latest year that puts it no
    more than :data:`FUTURE_SLACK_NS` after ``now_ns`` (the module says why).

    Raises:
        ValueError: no such year (an impossible date or time of day, 29 February with no leap
            year near), or an instant outside 1677-2262.
    """
    year = now_year(zone, now_ns)
    error = ValueError(f"{month:02}-{day:02} is not a valid date in any recent year")
    for candidate in range(year, year - _LEAP_SEARCH, -1):
        try:
            ts_ns = civil_ns(candidate, month, day, hour, minute, second, nanos, zone)
        except ValueError as exc:
            error = exc
            if month == 2 and day == 29:  # look for the last leap year
                continue
            raise
        if ts_ns <= now_ns + FUTURE_SLACK_NS:
            return ts_ns
    raise error


def iso_ns(text: str, zone: tzinfo) -> int:
    """An RFC 3339 time, or an ISO 8601 one without an offset read in ``zone``.

    Raises:
        ValueError: neither (the message quotes the text).
    """
    try:
        return parse_rfc3339_ns(text)
    except ValueError:
        local = _LOCAL.fullmatch(text)
        if local is None:
            raise
    year, month, day, hour, minute, second, fraction = local.groups()
    return digits_ns(year, month, day, hour, minute, second, fraction, zone)


def epoch_ns(number: int | Decimal) -> int:
    """Nanoseconds of a time written as a number since 1970, in the unit its magnitude says:
    below 10^11 seconds, below 10^14 milliseconds, below 10^17 microseconds, else
    nanoseconds. Each bound is the year 5138 read in the larger of its two units and
    1973-03-03 in the smaller, so every time from 1973 to 2262 (the last year the store
    holds) is read in the unit it was written in. A fraction is kept to the nanosecond.

    Raises:
        ValueError: negative, or after 2262.
    """
    shown = format(number, "g") if isinstance(number, Decimal) else str(number)
    if number < 0:
        raise ValueError(f"{shown} is a negative time since 1970")
    scale = 1
    for bound, unit_ns in _UNITS:
        if number < bound:
            scale = unit_ns
            break
    ts_ns = int(number * scale)
    if ts_ns > MAX_NS:
        raise ValueError(f"{shown} is {OUT_OF_RANGE}")
    return ts_ns
