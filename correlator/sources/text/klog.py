"""Kubernetes' ``klog`` text format, as :data:`KLOG`.

A record::

    I1129 04:29:29.123456   12345 server.go:123] "Pod status updated" pod="ns/x" status="Up"

is klog's header (``Lmmdd hh:mm:ss.uuuuuu threadid file:line]``: the level's letter ``I``,
``W``, ``E`` or ``F``; ``threadid`` is the process id klog writes) and the message: plain text
(``klog.Info``), or a quoted message and ``key=value`` pairs (``klog.InfoS``, the structured
form), values quoted as Go quotes them. A message with newlines (``klog.Error("a\\nb")``)
continues on the following lines, which start no header and are folded into the record.

klog writes no year and no zone: the time is read in the zone given, in the latest year that
does not put it more than a day after now (``_civil``: a log read in January whose lines say
``1231`` is last year's). :func:`read_at` takes "now" as an argument, for a reader that knows
better (a file's modification time) and for tests; :data:`KLOG` reads the clock.

Fields: ``pid``, ``file``, ``line``, and each pair's key (a key named like one of those three
is dropped: the header wins). A structured message whose pairs cannot be read keeps all of its
text as the message.
"""

from __future__ import annotations

import re
import time
from datetime import tzinfo
from typing import Final

from correlator.sources.text._civil import fraction_ns, yearless_ns
from correlator.sources.text._format import Parsed, TextFormat
from correlator.sources.text._quoted import pairs, unquote

__all__ = ["KLOG", "read", "read_at", "starts"]

_HEAD: Final = re.compile(
    r"([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? +(\d+) ([^\s:\]]+):(\d+)\] ",
    re.ASCII,
)
_QUOTED: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def starts(line: str) -> bool:
    """Whether a line starts a klog record (its header)."""
    return line[:1] in ("I", "W", "E", "F") and _HEAD.match(line) is not None


def read_at(text: str, zone: tzinfo, now_ns: int) -> Parsed | str:
    """Read a klog record in ``zone``, its year the latest that is not more than a day after
    ``now_ns`` (nanoseconds since the epoch).

    Returns:
        The record, or why it is not one.
    """
    match = _HEAD.match(text)
    if match is None:
        return "not a klog line (expected e.g. I1129 04:29:29.123456   12345 server.go:123] msg)"
    level, month, day, hour, minute, second, fraction, pid, file, line = match.groups()
    try:
        ts_ns = yearless_ns(
            int(month), int(day), int(hour), int(minute), int(second), fraction_ns(fraction),
            zone, now_ns,
        )  # fmt: skip
    except ValueError as exc:
        return f"klog time: {exc}"
    fields = {"pid": pid, "file": file, "line": line}
    message = text[match.end() :]
    quoted = _QUOTED.match(message) if message.startswith('"') else None
    if quoted is not None:
        found = pairs(message[quoted.end() :])
        if isinstance(found, dict):
            for key, value in found.items():
                fields.setdefault(key, value)
            message = unquote(quoted.group())
    return Parsed(ts_ns=ts_ns, level=level, message=message, fields=fields)


def read(text: str, zone: tzinfo) -> Parsed | str:
    """:func:`read_at` now."""
    return read_at(text, zone, time.time_ns())


#: The ``klog`` format.
KLOG: Final = TextFormat(
    name="klog",
    looks_like='I1129 04:29:29.123456   12345 server.go:123] "msg" key="value"',
    starts=starts,
    read=read,
)
