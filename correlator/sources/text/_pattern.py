"""An operator's own text format: a regular expression with named groups, as a
:class:`~correlator.sources.text._format.TextFormat` (:func:`pattern_format`).

The expression is matched at the start of a record's first line. Its named groups: ``time``
(required), ``level`` and ``message`` (optional: no ``message`` group, the rest of the line
after the match is the message), and any other name, which becomes a field by that name (an
identifier rule can then take it: ``(?P<request_id>req-\\S+)``). A group that did not take
part in the match gives no field.

A record starts at a line that matches the ``start`` expression (default: the format's own
expression); the lines after it that do not start one are folded into its message (a
traceback, a multi-line message).

The time is read with ``time_format`` (Python's ``strptime`` directives: ``%d/%b/%Y:%H:%M:%S
%z``) when one is given, else as RFC 3339, ISO 8601 without an offset (``2026-11-29
04:29:29,123``), or a number since the epoch in the unit its magnitude says
(``_civil.epoch_ns``). A time without an offset is read in the format's ``zone``, else in the
zone the ingest is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from decimal import Decimal
from typing import Final

from correlator.sources.text._civil import civil_ns, epoch_ns, iso_ns
from correlator.sources.text._format import Parsed, TextFormat

__all__ = ["PatternFormat", "pattern_format"]

_EPOCH: Final = re.compile(r"[0-9]{1,19}(?:\.[0-9]{1,9})?", re.ASCII)


@dataclass(frozen=True, slots=True)
class PatternFormat:
    """The reading of an operator's format; :func:`pattern_format` makes it a TextFormat.

    Attributes:
        pattern: matched at the start of a record's first line.
        start: a line it matches starts a record.
        time_format: ``strptime``'s format of the ``time`` group, or None (the module says
            which times are read without one).
        zone: the zone of times without an offset, or None (the ingest's).
    """

    pattern: re.Pattern[str]
    start: re.Pattern[str]
    time_format: str | None = None
    zone: tzinfo | None = None

    def starts(self, line: str) -> bool:
        """Whether a line starts a record."""
        return self.start.match(line) is not None

    def _time_ns(self, text: str, zone: tzinfo) -> int:
        zone = self.zone or zone
        if self.time_format is None:
            if _EPOCH.fullmatch(text):
                return epoch_ns(Decimal(text))
            return iso_ns(text, zone)
        read = datetime.strptime(text, self.time_format)  # noqa: DTZ007 - a zone is applied below
        return civil_ns(
            read.year, read.month, read.day, read.hour, read.minute, read.second,
            read.microsecond * 1_000, read.tzinfo or zone,
        )  # fmt: skip

    def read(self, text: str, zone: tzinfo) -> Parsed | str:
        """Read a record (its lines joined with newlines); the module says how."""
        first, newline, more = text.partition("\n")
        match = self.pattern.match(first)
        if match is None:
            return f"does not match the format's pattern {self.pattern.pattern[:120]!r}"
        groups = match.groupdict()
        stamp = groups.pop("time")
        if stamp is None:
            return "the pattern's time group took no part in the match"
        try:
            ts_ns = self._time_ns(stamp, zone)
        except (ValueError, OverflowError) as exc:
            return f"time {stamp[:80]!r}: {exc}"
        level = groups.pop("level", None)
        message = groups.pop("message", None)
        if message is None:
            message = first[match.end() :]
        if newline:
            message += "\n" + more
        fields = {name: value for name, value in groups.items() if value is not None}
        return Parsed(ts_ns=ts_ns, level=level, message=message, fields=fields)


def pattern_format(
    name: str,
    pattern: re.Pattern[str],
    *,
    start: re.Pattern[str] | None = None,
    time_format: str | None = None,
    zone: tzinfo | None = None,
    looks_like: str = "",
) -> TextFormat:
    """An operator's format, as a TextFormat named ``name`` (the module says how it reads).

    Args:
        pattern: with a ``time`` group (checked by the caller, which names the file).
        start: what starts a record (default: ``pattern``).
        time_format: ``strptime``'s format of the time.
        zone: the zone of its times without an offset.
        looks_like: an example line, for messages.
    """
    reading = PatternFormat(pattern, start or pattern, time_format, zone)
    return TextFormat(
        name=name,
        looks_like=looks_like or pattern.pattern,
        starts=reading.starts,
        read=reading.read,
    )
