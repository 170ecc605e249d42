"""Python's ``logging`` output, as :data:`PYTHON`.

Two families:

- ``%(asctime)s`` first, then the level and the logger's name in either order, separated by
  spaces or by `` - ``, then the message::

      2026-11-29 04:29:29,123 INFO app.module message
      2026-11-29 04:29:29,123 - app.module - INFO - message

  (``%(asctime)s %(levelname)s %(name)s %(message)s``, the logging cookbook's
  ``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` and their mirrors). ``asctime``
  has no zone: the time is read in the zone given.
- the default format of ``logging.basicConfig()``, ``%(levelname)s:%(name)s:%(message)s``
  (``WARNING:root:message``). It carries no time, and evidence without a time cannot be
  placed on a timeline: such a record is recognised (so that its traceback stays with it)
  and rejected with a reason that says to log ``%(asctime)s``. Taking the time of the file
  or of the ingest instead would put the record where it did not happen.

A record's following lines that start no record (a traceback from ``logger.exception``, a
message with newlines) are folded into it. Levels are ``logging``'s names (``WARN`` and
``FATAL`` too, and ``Level 5`` for a number without a name). Fields: ``logger``.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from correlator.sources.text._civil import digits_ns
from correlator.sources.text._format import Parsed, TextFormat

__all__ = ["PYTHON", "read", "starts"]

_LEVEL: Final = r"(?:CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG|NOTSET|Level \d{1,3})"
_ASCTIME: Final = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[,.](\d{1,9}))?")
#: After the time: `` LEVEL NAME message``, `` NAME LEVEL message``, or either with `` - ``.
_LEVEL_NAME: Final = re.compile(rf"( - | )({_LEVEL})\1(\S+)(?:\1|(?=\n)|\Z)")
_NAME_LEVEL: Final = re.compile(rf"( - | )(\S+)\1({_LEVEL})(?:\1|(?=\n)|\Z)")
_DEFAULT: Final = re.compile(rf"{_LEVEL}:[^:\n]*:")


def starts(line: str) -> bool:
    """Whether a line starts a record: an ``asctime``, or the default format's level."""
    if line[:1].isdigit():
        return _ASCTIME.match(line) is not None
    return _DEFAULT.match(line) is not None


def read(text: str, zone: tzinfo) -> Parsed | str:
    """Read a Python ``logging`` record (its lines joined with newlines) in ``zone``.

    Returns:
        The record, or why it is not one (the default format's, which has no time).
    """
    stamp = _ASCTIME.match(text)
    if stamp is None:
        if _DEFAULT.match(text) is not None:
            return (
                "Python logging's default format (LEVEL:logger:message) has no time; "
                "log with a format that starts with %(asctime)s"
            )
        return "not a Python logging line (expected e.g. 2026-11-29 04:29:29,123 INFO name msg)"
    year, month, day, hour, minute, second, fraction = stamp.groups()
    rest = text[stamp.end() :]
    match = _LEVEL_NAME.match(rest)
    if match is not None:
        _, level, logger = match.groups()
    else:
        match = _NAME_LEVEL.match(rest)
        if match is None:
            return "Python logging line without a level and a logger name after its time"
        _, logger, level = match.groups()
    try:
        ts_ns = digits_ns(year, month, day, hour, minute, second, fraction, zone)
    except ValueError as exc:
        return f"Python logging time: {exc}"
    return Parsed(ts_ns=ts_ns, level=level, message=rest[match.end() :], fields={"logger": logger})


#: The ``python`` format.
PYTHON: Final = TextFormat(
    name="python",
    looks_like="2026-11-29 04:29:29,123 INFO app.module message (also with ' - ' separators)",
    starts=starts,
    read=read,
)
