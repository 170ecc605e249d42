"""What a plain-text log format is, as one declaration: :class:`TextFormat`, and what it reads
from a record, :class:`Parsed`.

A format says which lines start a record (the others continue the one above it: a Python or
Java traceback, a multi-line message) and reads a record's text into its time, level, message
and named fields. Identifiers are not the format's business: declarative rules map a named
field or a pattern in the message to one of the five identifiers (issue 24 item 3), so that a
format stays a pure reading of its lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo

__all__ = ["Parsed", "TextFormat", "first_present"]


@dataclass(frozen=True, slots=True)
class Parsed:
    """One record of a text format, read.

    Attributes:
        ts_ns: its time, nanoseconds since the UNIX epoch, UTC (a format without a zone reads
            its times in the zone it is given).
        level: the level as the line says it (``ERROR``, ``E``, ``err``, ``3``), or None.
        message: the message, continuation lines included (joined with ``\\n``).
        fields: what else the format names (``logger``, ``pid``, ``host``, ``app``,
            ``request_id``, logfmt's keys, journald's fields, ...), by name, as text.
    """

    ts_ns: int
    level: str | None
    message: str
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextFormat:
    """A plain-text log format.

    Attributes:
        name: what ``--format`` calls it (``oslo``, ``klog``, ``logfmt``, ``syslog``,
            ``journald``, ``python``).
        looks_like: an example line, for ``--help``.
        starts: whether a line starts a record; a line that does not continues the record
            above it (none above: the line is rejected as a continuation of nothing).
        read: ``read(text, zone)``: the record (its lines joined with ``\\n``) read, or a
            sentence saying why it is not a record of this format (it becomes a reject's
            reason). Never raises on bad input.
    """

    name: str
    looks_like: str
    starts: Callable[[str], bool]
    read: Callable[[str, tzinfo], Parsed | str]


def first_present(found: Mapping[str, object], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` present in ``found`` (a format's time, level or message key),
    or None."""
    for key in keys:
        if key in found:
            return key
    return None
