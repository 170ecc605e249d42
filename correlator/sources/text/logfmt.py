"""logfmt, as Go's go-logfmt (go-kit's logger) and logrus's text formatter write it, as
:data:`LOGFMT`.

A record is one line of ``key=value`` pairs::

    time="2026-11-29T04:29:29Z" level=info msg="request handled" request_id=req-1 status=200

The time is the first of ``time``, ``ts`` and ``t`` present, in RFC 3339 (a time without a
UTC offset is read in the zone given); the level the first of ``level`` and ``lvl``; the
message the first of ``msg`` and ``message`` (none: the message is empty). Every other key is
a field, by its name. Values hold no newline (go-logfmt and logrus escape them as ``\\n``), so
every line starts a record.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Final

from correlator.sources.text._civil import iso_ns
from correlator.sources.text._format import Parsed, TextFormat, first_present
from correlator.sources.text._quoted import pairs

__all__ = ["LEVEL_KEYS", "LOGFMT", "MESSAGE_KEYS", "TIME_KEYS", "read", "starts"]

#: The keys that may hold the time, the level and the message, first present first.
TIME_KEYS: Final = ("time", "ts", "t")
LEVEL_KEYS: Final = ("level", "lvl")
MESSAGE_KEYS: Final = ("msg", "message")


def starts(_line: str) -> bool:
    """Every line starts a logfmt record: values never span lines."""
    return True


def read(text: str, zone: tzinfo) -> Parsed | str:
    """Read a logfmt line; the module says which keys it reads.

    Returns:
        The record, or why it is not one.
    """
    if not text.strip():
        return "a blank line is not a logfmt record"
    found = pairs(text)
    if isinstance(found, str):
        return f"not logfmt: {found}"
    time_key = first_present(found, TIME_KEYS)
    if time_key is None:
        return "logfmt line without a time (expected a time, ts or t key)"
    try:
        ts_ns = iso_ns(found.pop(time_key), zone)
    except ValueError as exc:
        return f"logfmt {time_key}: {exc}"
    level_key = first_present(found, LEVEL_KEYS)
    level = found.pop(level_key) if level_key is not None else None
    message_key = first_present(found, MESSAGE_KEYS)
    message = found.pop(message_key) if message_key is not None else ""
    return Parsed(ts_ns=ts_ns, level=level, message=message, fields=found)


#: The ``logfmt`` format.
LOGFMT: Final = TextFormat(
    name="logfmt",
    looks_like='time=2026-11-29T04:29:29Z level=info msg="request handled" key=value',
    starts=starts,
    read=read,
)
