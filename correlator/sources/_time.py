"""Timestamp parsers shared by the source adapters: text in, nanoseconds since the UNIX epoch
(UTC) out, ``ValueError`` with a message that quotes the text and says what is wrong.

Every adapter calls one of these once per record, so the common shapes have fast paths:
:func:`parse_rfc3339_ns` answers the canonical ``2026-11-22T13:11:19.123456789Z`` (what
``agent_logging`` writes) from a cache of the minute's prefix, and the nginx parsers cache
whole strings, since a busy log repeats the same second many times. The caches are bounded and
only ever hold prefixes that the full parser has validated. Every parser refuses instants the
store's 64-bit nanoseconds cannot hold (years before 1677 or after 2262).

nginx's error log is the one format without a UTC offset: :func:`parse_zone` reads the zone
an operator names for it, and :func:`parse_nginx_error_ns` applies that zone's offset at each
time (daylight saving time included).
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Final, TypeVar

from correlator.model import MAX_NS, MIN_NS

__all__ = [
    "MAX_NS",
    "MIN_NS",
    "OUT_OF_RANGE",
    "parse_epoch_seconds_ns",
    "parse_nginx_error_ns",
    "parse_nginx_local_ns",
    "parse_postgres_ns",
    "parse_rfc3339_ns",
    "parse_zone",
]

K = TypeVar("K")
V = TypeVar("V")

_NS: Final = 1_000_000_000
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
#: Entries per cache before it is emptied; a log spanning a day has 86,400 distinct seconds.
_CACHE_LIMIT: Final = 65_536
# model.MIN_NS and MAX_NS, the instants the store holds: anything outside is refused here,
# as a bad timestamp, so that it becomes a rejected line rather than an insert that fails for
# the whole batch.
#: What a reason says of an instant outside them.
OUT_OF_RANGE: Final = (
    "outside the years 1677 to 2262 that nanoseconds since 1970 can hold in 64 bits"
)

_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*([Zz]|[+-]\d\d(?::?\d\d)?)?",
    re.ASCII,
)
_NGINX_LOCAL = re.compile(
    r"(\d\d)/([A-Za-z]{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})", re.ASCII
)
_NGINX_ERROR = re.compile(r"(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)", re.ASCII)
_POSTGRES = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? "
    r"([A-Za-z]{1,6}|[+-]\d\d(?::?\d\d)?)",
    re.ASCII,
)
_EPOCH = re.compile(r"(\d{1,12})(?:\.(\d{1,9}))?", re.ASCII)
_FIXED_OFFSET = re.compile(r"[+-]\d\d(?::?\d\d)?", re.ASCII)

_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}

#: Time-zone abbreviations that PostgreSQL writes in ``log_time`` (``%Z`` of ``log_timezone``,
#: from tzdata) and whose meaning is not in doubt, in seconds east of UTC. Offsets agree with
#: current tzdata (MSK is +03 since 2014). CST (US Central, China, Cuba) and IST (India,
#: Ireland, Israel) are deliberately absent: guessing would shift evidence by hours.
_PG_ZONES: Final = {
    "UTC": 0,
    "UCT": 0,
    "UT": 0,
    "GMT": 0,
    "Z": 0,
    "ZULU": 0,
    "WET": 0,
    "WEST": 3600,
    "BST": 3600,
    "CET": 3600,
    "CEST": 7200,
    "MET": 3600,
    "MEST": 7200,
    "EET": 7200,
    "EEST": 10800,
    "MSK": 10800,
    "EST": -18000,
    "EDT": -14400,
    "CDT": -18000,
    "MST": -25200,
    "MDT": -21600,
    "PST": -28800,
    "PDT": -25200,
    "AKST": -32400,
    "AKDT": -28800,
    "HST": -36000,
    "AST": -14400,
    "ADT": -10800,
    "NST": -12600,
    "NDT": -9000,
    "JST": 32400,
    "KST": 32400,
    "HKT": 28800,
    "PKT": 18000,
    "AEST": 36000,
    "AEDT": 39600,
    "ACST": 34200,
    "ACDT": 37800,
    "AWST": 28800,
    "NZST": 43200,
    "NZDT": 46800,
}
_AMBIGUOUS_ZONES: Final = frozenset({"CST", "IST"})

# Canonical timestamps' ``YYYY-MM-DDTHH:MM`` to that minute's start in nanoseconds: records
# come several a minute per file, far fewer a second (a fleet's API log: 62 % of its seconds
# are new, 11 % of its minutes), and a miss costs the regex, a date and the checks.
_rfc3339_minutes: dict[str, int] = {}
_nginx_local: dict[str, int] = {}


def _seconds(text: str, year: str, month: str, day: str, hh: str, mm: str, ss: str) -> int:
    """Epoch seconds of a civil date and time (no offset applied), validating every field."""
    hour, minute, second = int(hh), int(mm), int(ss)
    try:
        days = date(int(year), int(month), int(day)).toordinal() - _EPOCH_ORDINAL
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid date: {exc}") from None
    if hour > 23 or minute > 59 or second > 60:
        # RFC 3339 §5.7 allows second 60 (a leap second); it is counted as the next second's
        # start, which keeps ordering and costs at most one second of accuracy.
        raise ValueError(f"{text!r} is not a valid time of day: {hh}:{mm}:{ss}")
    return days * 86_400 + hour * 3600 + minute * 60 + second


def _fraction_ns(digits: str | None) -> int:
    if not digits:
        return 0
    # More than nine digits (allowed by RFC 3339) are truncated: nanoseconds are the unit here.
    return int(digits[:9].ljust(9, "0"))


def _offset_s(text: str, offset: str) -> int:
    if offset in ("Z", "z"):
        return 0
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:  # RFC 3339 time-numoffset
        raise ValueError(f"{text!r} has an impossible UTC offset {offset!r}")
    return sign * (hours * 3600 + minutes * 60)


def _in_range(ts_ns: int, text: str) -> int:
    """``ts_ns``, or ValueError when the store cannot hold it (see :data:`MIN_NS`)."""
    if MIN_NS <= ts_ns <= MAX_NS:
        return ts_ns
    raise ValueError(f"{text[:80]!r} is {OUT_OF_RANGE}")


def _remember(cache: dict[K, V], key: K, value: V) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def parse_rfc3339_ns(text: str) -> int:
    """Parse an RFC 3339 / ISO 8601 timestamp with a UTC offset.

    Accepted: ``T``, ``t`` or a space between date and time; 0 to 9 (or more, truncated)
    fractional digits after ``.`` or ``,``; ``Z``, ``±HH:MM``, ``±HHMM`` or ``±HH``.

    Args:
        text: e.g. ``2026-11-22T13:11:19.123456789Z`` or ``2026-11-22 14:11:19+01:00``.

    Returns:
        Nanoseconds since the UNIX epoch, UTC.

    Raises:
        ValueError: the text is not such a timestamp, has no UTC offset, or names an
            impossible date, time or offset, or an instant outside 1677-2262.
    """
    # Fast path: the canonical form whose minute was parsed before; the rest is checked here
    # as the full parse would (two digits of second up to 60, nine of fraction).
    if len(text) == 30 and text[29] == "Z" and text[19] == ".":
        base = _rfc3339_minutes.get(text[:16])
        if base is not None and text[16] == ":":
            digits = text[17:19] + text[20:29]
            if digits.isdigit() and digits.isascii() and digits < "61":
                return base + int(digits[:2]) * _NS + int(digits[2:])
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:80]!r} is not an RFC 3339 timestamp (expected e.g. 2026-11-22T13:11:19.123Z)"
        )
    year, month, day, hh, mm, ss, fraction, offset = match.groups()
    if offset is None:
        raise ValueError(f"{text[:80]!r} has no UTC offset (expected Z or ±HH:MM)")
    seconds = _seconds(text, year, month, day, hh, mm, ss) - _offset_s(text, offset)
    ts_ns = _in_range(seconds * _NS + _fraction_ns(fraction), text)
    minute_ns = (seconds - int(ss)) * _NS
    # Only minutes every instant of which is in range (second 60 included) are remembered:
    # the fast path checks nothing else.
    if offset in ("Z", "z") and text[10] == "T" and MIN_NS <= minute_ns <= MAX_NS - 61 * _NS:
        _remember(_rfc3339_minutes, text[:16], minute_ns)
    return ts_ns


def parse_nginx_local_ns(text: str) -> int:
    """Parse nginx's ``$time_local`` (the ``combined`` format's ``[...]`` field).

    Args:
        text: e.g. ``22/Nov/2026:13:11:19 +0000`` (English month names, numeric offset).

    Returns:
        Nanoseconds since the UNIX epoch, UTC.

    Raises:
        ValueError: the text is not in that form or names an impossible date or time, or
            an instant outside 1677-2262.
    """
    cached = _nginx_local.get(text)
    if cached is not None:
        return cached
    match = _NGINX_LOCAL.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:80]!r} is not an nginx $time_local (expected e.g. 22/Nov/2026:13:11:19 +0000)"
        )
    day, month_name, year, hh, mm, ss, offset = match.groups()
    month = _MONTHS.get(month_name.title())
    if month is None:
        raise ValueError(f"{text!r} has an unknown month {month_name!r}")
    seconds = _seconds(text, year, str(month), day, hh, mm, ss) - _offset_s(text, offset)
    ts_ns = _in_range(seconds * _NS, text)
    _remember(_nginx_local, text, ts_ns)
    return ts_ns


def parse_zone(text: str) -> tzinfo:
    """Read a time zone as an operator names it (``--nginx-tz``, ``CORRELATOR_NGINX_TZ``).

    Args:
        text: ``UTC`` (or ``Z``), a fixed offset east of UTC (``+01:00``, ``-0530``, ``+09``),
            or an IANA name from the system's zoneinfo database (``Europe/Berlin``; the
            case as tzdata spells it).

    Returns:
        ``datetime.UTC``, a ``datetime.timezone`` or a ``zoneinfo.ZoneInfo`` (each can be
        pickled, for worker processes).

    Raises:
        ValueError: the text is none of those (or names an offset past 23:59); the message
            quotes it.
    """
    stripped = text.strip()
    if stripped.upper() in ("UTC", "Z"):
        return UTC
    if _FIXED_OFFSET.fullmatch(stripped):
        return timezone(timedelta(seconds=_offset_s(stripped, stripped)))
    try:
        return zoneinfo.ZoneInfo(stripped)
    # Not found is a KeyError; a path outside the database, or a file in it that is not a
    # zone (zone.tab), a ValueError; an unreadable one an OSError.
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"{text[:80]!r} is not a time zone: use UTC, an offset such as +01:00 or -0530, "
            "or an IANA name such as Europe/Berlin"
        ) from None


def _zone_offset_ns(zone: tzinfo, local_s: int, text: str) -> int:
    """``zone``'s UTC offset at the local time ``local_s`` (epoch seconds of the wall clock),
    ``fold=0`` at a daylight-saving change (:func:`parse_nginx_error_ns` says what that means)."""
    offset = zone.utcoffset(None)  # a fixed offset needs no date
    if offset is None:
        # Arithmetic on an aware datetime is wall-clock arithmetic, and yields fold=0.
        try:
            offset = (datetime(1970, 1, 1, tzinfo=zone) + timedelta(seconds=local_s)).utcoffset()
        except OverflowError:  # second 60 of 9999-12-31
            raise ValueError(f"{text[:80]!r} is {OUT_OF_RANGE}") from None
    if offset is None:
        raise ValueError(f"time zone {zone!r} gives no UTC offset for {text[:80]!r}")
    return (offset.days * 86_400 + offset.seconds) * _NS + offset.microseconds * 1000


def parse_nginx_error_ns(text: str, tz_offset_s: float = 0.0, *, zone: tzinfo | None = None) -> int:
    """Parse the timestamp that starts an nginx error-log line.

    nginx writes it in the server's local time without an offset, so the caller says which
    zone the server's clock is in (``zone``: the offset at that time, daylight saving time
    included; see :func:`parse_zone`), or its fixed offset (``tz_offset_s``); by default the
    server runs in UTC.

    A local time that a daylight-saving change skips or repeats takes the offset in force
    before the change (PEP 495's ``fold=0``): on 29 March 2026 in Europe/Berlin the skipped
    ``02:30:00`` is 01:30:00 UTC; on 25 October 2026 the repeated ``02:30:00`` is its first
    occurrence, 00:30:00 UTC.

    Args:
        text: e.g. ``2026/11/22 13:11:19``.
        tz_offset_s: the server's UTC offset, e.g. ``3600.0`` for CET (without ``zone``).
        zone: the server's time zone; wins over ``tz_offset_s``.

    Returns:
        Nanoseconds since the UNIX epoch, UTC.

    Raises:
        ValueError: the text is not in that form or names an impossible date or time, or
            an instant outside 1677-2262.
    """
    match = _NGINX_ERROR.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:80]!r} is not an nginx error-log time (expected e.g. 2026/11/22 13:11:19)"
        )
    local_s = _seconds(text, *match.groups())
    if zone is not None:
        return _in_range(local_s * _NS - _zone_offset_ns(zone, local_s, text), text)
    return _in_range(local_s * _NS - round(tz_offset_s * _NS), text)


def parse_postgres_ns(text: str) -> int:
    """Parse PostgreSQL's ``log_time`` (csvlog, jsonlog ``timestamp``, ``session_start``).

    PostgreSQL writes ``%Y-%m-%d %H:%M:%S.mmm %Z`` in ``log_timezone``; ``%Z`` is tzdata's
    abbreviation (``UTC``, ``CET``) or a numeric offset (``+01``, ``+0545``) for zones without
    one. Ambiguous abbreviations (``CST``, ``IST``) are refused: set ``log_timezone = 'UTC'``.

    Args:
        text: e.g. ``2026-11-22 13:11:19.123 UTC`` or ``2026-11-22 14:11:19 +01``.

    Returns:
        Nanoseconds since the UNIX epoch, UTC.

    Raises:
        ValueError: the text is not in that form, or its zone is unknown or ambiguous, or
            it names an instant outside 1677-2262.
    """
    match = _POSTGRES.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:80]!r} is not a PostgreSQL log time "
            "(expected e.g. 2026-11-22 13:11:19.123 UTC)"
        )
    year, month, day, hh, mm, ss, fraction, zone = match.groups()
    if zone[0] in "+-":
        offset_s = _offset_s(text, zone)
    else:
        upper = zone.upper()
        if upper in _AMBIGUOUS_ZONES:
            raise ValueError(
                f"{text!r}: time zone {zone!r} is ambiguous; set log_timezone to UTC or a "
                "numeric offset"
            )
        known = _PG_ZONES.get(upper)
        if known is None:
            raise ValueError(
                f"{text!r}: unknown time zone abbreviation {zone!r}; set log_timezone to UTC"
            )
        offset_s = known
    seconds = _seconds(text, year, month, day, hh, mm, ss) - offset_s
    return _in_range(seconds * _NS + _fraction_ns(fraction), text)


def parse_epoch_seconds_ns(text: str) -> int:
    """Parse seconds since the UNIX epoch with an optional fraction (nginx ``$msec``).

    Args:
        text: e.g. ``1795353079.123``.

    Returns:
        Nanoseconds since the UNIX epoch.

    Raises:
        ValueError: the text is not a non-negative decimal number of seconds, or too large
            (after 2262).
    """
    match = _EPOCH.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:80]!r} is not seconds since the epoch (expected e.g. 1795353079.123)"
        )
    whole, fraction = match.groups()
    return _in_range(int(whole) * _NS + _fraction_ns(fraction), text)
