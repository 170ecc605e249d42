"""systemd's journal as ``journalctl -o json`` exports it, as :data:`JOURNALD`.

A record is one JSON object per line, every field a string, except:

- a value that is not valid UTF-8 or holds control characters (other than newline and tab)
  is an array of its bytes (``"MESSAGE":[104,105,27,...]``); it is decoded as UTF-8, an
  undecodable byte as U+FFFD;
- a field with several values is an array of them (each a string or such an array); they
  are joined with ``\\n``;
- a value too large for journalctl (``--all`` not given, past 4 KiB) is ``null``; it is
  kept as an empty text.

The time is ``__REALTIME_TIMESTAMP``, microseconds since the epoch (when journald received
the entry; the zone given plays no part). The level is ``PRIORITY`` as written (``0``
emergency to ``7`` debug), the message ``MESSAGE`` (none: empty). Every other field is kept,
as text, by its name (``_HOSTNAME``, ``SYSLOG_IDENTIFIER``, ``_SYSTEMD_UNIT``, ``_PID``,
``_MACHINE_ID``, ...; see systemd.journal-fields(7)), but the journal's bookkeeping
(:data:`BOOKKEEPING`: the entry's address, every ``__`` field, and how journald filed it),
which the line keeps: a journal entry carries some thirty fields, and what is stored of each
record is paid for by every ingest.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any, Final

import orjson

from correlator.sources._time import MAX_NS
from correlator.sources.text._format import Parsed, TextFormat

__all__ = ["BOOKKEEPING", "JOURNALD", "read", "starts"]

_US_NS: Final = 1000
#: The journal's bookkeeping, left out of a record's fields (its line keeps them): the
#: entry's address (``__CURSOR``, ``__MONOTONIC_TIMESTAMP``, ...: every ``__`` field), and
#: trusted fields that say how journald received and filed it rather than what happened.
#: ``MESSAGE`` and ``PRIORITY`` are the message and the level.
BOOKKEEPING: Final = frozenset(
    {
        "MESSAGE",
        "PRIORITY",
        "_CAP_EFFECTIVE",
        "_STREAM_ID",
        "_SOURCE_REALTIME_TIMESTAMP",
        "_SOURCE_MONOTONIC_TIMESTAMP",
        "_SYSTEMD_CGROUP",
        "_SYSTEMD_SLICE",
        "_SYSTEMD_INVOCATION_ID",
        "_SELINUX_CONTEXT",
        "_AUDIT_SESSION",
        "_AUDIT_LOGINUID",
    }
)


def starts(_line: str) -> bool:
    """Every line starts a journal record: the export writes one object per line."""
    return True


def _text(value: Any, *, inner: bool = False) -> str | None:
    """A field's value as text (the module says how), or None when it is no journal value
    (``inner``: ``value`` is one of a field's several values, a string or bytes only)."""
    if isinstance(value, str):
        return value
    if value is None and not inner:
        return ""
    if isinstance(value, list):
        if all(type(item) is int and 0 <= item <= 255 for item in value):
            return bytes(value).decode("utf-8", "replace")
        if inner:
            return None
        values = [_text(item, inner=True) for item in value]
        if any(text is None for text in values):
            return None
        return "\n".join(text for text in values if text is not None)
    return None


def read(text: str, _zone: tzinfo) -> Parsed | str:
    """Read one line of ``journalctl -o json``; the module says what it keeps.

    Returns:
        The record, or why it is not one.
    """
    try:
        entry = orjson.loads(text)
    except orjson.JSONDecodeError as exc:  # nesting past 1,024 levels too
        return f"not a journal entry: invalid JSON ({str(exc)[:80]})"
    if not isinstance(entry, dict):
        return f"not a journal entry: a JSON {type(entry).__name__}, not an object"
    fields: dict[str, str] = {}
    message = level = stamp = None
    for name, value in entry.items():
        value_text = value if type(value) is str else _text(value)
        if value_text is None:
            return f"journal field {name[:40]!r} is neither a string, bytes nor a list of them"
        if name in BOOKKEEPING or name.startswith("__"):
            if name == "MESSAGE":
                message = value_text
            elif name == "PRIORITY":
                level = value_text
            elif name == "__REALTIME_TIMESTAMP":
                stamp = value_text
        else:
            fields[name] = value_text
    if stamp is None:
        return "journal entry without __REALTIME_TIMESTAMP"
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 19):
        return f"journal __REALTIME_TIMESTAMP {stamp[:40]!r} is not microseconds since 1970"
    ts_ns = int(stamp) * _US_NS
    if ts_ns > MAX_NS:
        return f"journal __REALTIME_TIMESTAMP {stamp} is after 2262"
    return Parsed(ts_ns=ts_ns, level=level, message=message or "", fields=fields)


#: The ``journald`` format.
JOURNALD: Final = TextFormat(
    name="journald",
    looks_like='{"__REALTIME_TIMESTAMP":"1795930893103993","PRIORITY":"4","MESSAGE":"..."}',
    starts=starts,
    read=read,
)
