"""OpenStack's ``oslo.log`` format (nova, ironic, neutron, ...), as :data:`OSLO`.

A record::

    2017-05-16 00:00:04.500 2931 INFO nova.compute.manager [req-3ea4052c-... - - - - -] \
[instance: b9000564-...] VM Started (Lifecycle Event)

is oslo's ``logging_context_format_string`` (``%(asctime)s.%(msecs)03d %(process)d
%(levelname)s %(name)s [%(global_request_id)s %(request_id)s %(user_identity)s]
%(instance)s%(message)s``; older releases write no global request id, and a record without a
request context writes ``[-]``). Times carry no zone: they are read in the zone given.

An exception's traceback follows its record in one of two forms, both folded into it: plain
lines (``Traceback (most recent call last):``, ``  File ...``), or lines that repeat oslo's
``logging_exception_prefix`` (``%(asctime)s.%(msecs)03d %(process)d ERROR %(name)s
%(instance)s``, ``TRACE`` as the level in older releases). A prefixed line is told from a
record by what follows the logger name: a record has its request context in brackets
(``[req-...]``, ``[-]``, ``[None req-...]``), the exception prefix has none (at most
``[instance: <uuid>]``, which is not a context). The prefix is taken off each folded line,
so the message reads as the traceback did.

A line may start with one word before the time, the name of the file it came from: loghub's
OpenStack sample (``nova-api.log.1.2017-05-16_13:53:08 2017-05-16 00:00:00.008 ...``) joins
several files' lines that way. The word is kept as the ``file`` field, so that the lines of
nova-api and nova-compute stay told apart.

Fields: ``pid``, ``logger``, ``context`` (the bracket's text), ``request_id`` and
``global_request_id`` (its ``req-`` ids), ``instance`` (the uuid of ``[instance: <uuid>]``,
which stays in the message as written), ``file``.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import Final

from correlator.sources.text._civil import digits_ns
from correlator.sources.text._format import Parsed, TextFormat

__all__ = ["OSLO", "read", "starts"]

_HEAD: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? (\d+) ([A-Z]+) (\S+) ",
    re.ASCII,
)
#: A request context: anything in brackets but ``[instance: ...]``, closed on the line.
_CONTEXT: Final = re.compile(r"\[(?!instance: )([^\]\n]*)\] ?")
_INSTANCE: Final = re.compile(r"\[instance: ([0-9A-Fa-f-]{36})\] ?")
_REQUEST: Final = re.compile(r"req-[0-9A-Fa-f-]{36}")


_Head = tuple[re.Match[str] | None, str | None]
#: The last two lines :func:`_head` read, and what it found: a record's first line is read by
#: ``starts``, then the next line by ``starts`` (which ends the record), then the first again
#: by ``read``, the same string. One tuple, replaced whole: threads reading other inputs at
#: worst miss it.
_last: tuple[str, _Head, str, _Head] = ("", (None, None), "", (None, None))


def _head(line: str) -> _Head:
    """The oslo prefix of a line, and the file name before it (loghub's samples), if any."""
    global _last
    last = _last
    if last[0] is line:
        return last[1]
    if last[2] is line:
        return last[3]
    match = _HEAD.match(line)
    if match is not None or not line[:1].isalpha():
        found: _Head = (match, None)
    else:
        word, _, rest = line.partition(" ")  # one word only: a bounded look, whatever the line
        match = _HEAD.match(rest)
        found = (match, word if match is not None else None)
    _last = (line, found, last[0], last[1])
    return found


def starts(line: str) -> bool:
    """Whether a line starts an oslo record: the prefix, then a request context."""
    match, file = _head(line)
    if match is None or match.group(9) == "TRACE":
        return False
    rest = line[match.end() :] if file is None else line[len(file) + 1 + match.end() :]
    return _CONTEXT.match(rest) is not None


def _folded(line: str) -> str:
    """A traceback line without the exception prefix oslo may have repeated on it."""
    match, file = _head(line)
    if match is None:
        return line
    rest = line[match.end() :] if file is None else line[len(file) + 1 + match.end() :]
    instance = _INSTANCE.match(rest)
    return rest[instance.end() :] if instance is not None else rest


def read(text: str, zone: tzinfo) -> Parsed | str:
    """Read an oslo record (its first line, then its traceback) in ``zone``; the module
    says what it keeps.

    Returns:
        The record, or why it is not one.
    """
    first, newline, more = text.partition("\n")
    match, file = _head(first)
    if match is None:
        return "not an oslo.log line (expected e.g. 2017-05-16 00:00:04.500 2931 INFO name [-] ...)"
    year, month, day, hour, minute, second, fraction, pid, level, logger = match.groups()
    try:
        ts_ns = digits_ns(year, month, day, hour, minute, second, fraction, zone)
    except ValueError as exc:
        return f"oslo.log time: {exc}"
    rest = first[match.end() :] if file is None else first[len(file) + 1 + match.end() :]
    fields = {"pid": pid, "logger": logger}
    if file is not None:
        fields["file"] = file
    context = _CONTEXT.match(rest)
    if context is not None:
        fields["context"] = context.group(1)
        requests = _REQUEST.findall(context.group(1))
        if requests:
            fields["request_id"] = requests[-1]
        if len(requests) > 1:
            fields["global_request_id"] = requests[0]
        rest = rest[context.end() :]
    instance = _INSTANCE.match(rest)
    if instance is not None:
        fields["instance"] = instance.group(1)
    message = rest
    if newline:
        message += "\n" + "\n".join(_folded(line) for line in more.split("\n"))
    return Parsed(ts_ns=ts_ns, level=level, message=message, fields=fields)


#: The ``oslo`` format.
OSLO: Final = TextFormat(
    name="oslo",
    looks_like=(
        "2017-05-16 00:00:04.500 2931 INFO nova.compute.manager [req-<uuid> - - - - -] "
        "[instance: <uuid>] VM Started"
    ),
    starts=starts,
    read=read,
)
