"""syslog, as :data:`SYSLOG`: RFC 5424, RFC 3164 and the files syslog daemons write, told
apart line by line.

- RFC 5424 (``logger --rfc5424``, rsyslog's ``RSYSLOG_SyslogProtocol23Format``)::

      <165>1 2003-10-11T22:14:15.003Z host app 123 ID47 [exampleSDID@32473 iut="3"] msg

- RFC 3164, with its ``<PRI>`` (on the wire, ``logger --rfc3164``) or without it, as
  ``/var/log/syslog`` and ``/var/log/messages`` write it
  (``RSYSLOG_TraditionalFileFormat``)::

      <34>Oct 11 22:14:15 host app[123]: msg
      Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; ...

- rsyslog's ``RSYSLOG_FileFormat``, what Debian 12 writes to ``/var/log/syslog``: RFC 3164
  with an RFC 3339 time::

      2026-11-29T05:41:19.616841+00:00 vm provision: instance ... spawned

RFC 3164 times carry no year and no zone: the time is read in the zone given, in the latest
year not more than a day after now (as klog's; ``_civil`` says why). :func:`read_at` takes
"now" as an argument, :data:`SYSLOG` reads the clock.

The level is the severity of ``<PRI>`` (``0`` emergency to ``7`` debug), as a number; a line
without ``<PRI>`` has none. Fields: ``facility`` (a number), ``host``, ``app`` (RFC 3164's
tag), ``procid`` (the ``[pid]`` of a tag), ``msgid``, RFC 5424's structured data as
``structured_data`` (its text) and one field per parameter, named ``<SD-ID>.<name>``
(``exampleSDID@32473.iut``). RFC 5424's ``-`` (nil) gives no field. A 3164 message without a
``tag:`` (``logger`` without ``-t``, some kernels) has no ``app``. A record is one line.
"""

from __future__ import annotations

import re
import time
from datetime import tzinfo
from typing import Final

from correlator.sources._time import parse_rfc3339_ns
from correlator.sources.text._civil import fraction_ns, yearless_ns
from correlator.sources.text._format import Parsed, TextFormat

__all__ = ["SYSLOG", "read", "read_at", "starts"]

_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_PRI: Final = re.compile(r"<(\d{1,3})>")
#: RFC 5424 §6: VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP.
_HEADER_5424: Final = re.compile(r"1 (\S+) (\S{1,255}) (\S{1,48}) (\S{1,128}) (\S{1,32}) ")
#: RFC 3164 §4.1.2: ``Mmm dd hh:mm:ss`` (a day below 10 padded with a space), then HOSTNAME.
_HEADER_3164: Final = re.compile(
    r"([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? (\S+) ", re.ASCII
)
#: ``RSYSLOG_FileFormat``: an RFC 3339 time, then HOSTNAME.
_HEADER_FILE: Final = re.compile(r"(\d{4}-\d\d-\d\dT\S+) (\S+) ", re.ASCII)
#: RFC 3164's TAG (up to 32 characters, we allow more) with an optional ``[pid]``, then ``:``.
_TAG: Final = re.compile(r"([^\s\[\]:]{1,128})(?:\[([^\]\s]{1,32})\])?: ?")
_SD_ELEMENT: Final = re.compile(r'\[([^\s\]="]{1,32})((?: [^\s\]="]{1,32}="(?:[^"\\]|\\.)*")*)\]')
_SD_PARAM: Final = re.compile(r' ([^\s\]="]{1,32})="((?:[^"\\]|\\.)*)"')
_SD_ESCAPE: Final = re.compile(r'\\(["\\\]])')


def starts(_line: str) -> bool:
    """Every line starts a syslog record: a message never spans lines."""
    return True


def _structured(text: str, fields: dict[str, str]) -> str | None:
    """Read RFC 5424 STRUCTURED-DATA at the start of ``text`` into ``fields``; the rest of
    the text (the message), or None when it is not structured data."""
    if text.startswith("- ") or text == "-":
        return text[2:]
    position = 0
    while text.startswith("[", position):
        element = _SD_ELEMENT.match(text, position)
        if element is None:
            return None
        sd_id = element.group(1)
        for name, value in _SD_PARAM.findall(element.group(2)):
            fields[f"{sd_id}.{name}"] = _SD_ESCAPE.sub(r"\1", value)
        position = element.end()
    if position == 0:
        return None
    fields["structured_data"] = text[:position]
    return text[position + 1 :] if text.startswith(" ", position) else text[position:]


def _tagged(text: str, fields: dict[str, str]) -> str:
    """The message of an RFC 3164 MSG, its TAG and ``[pid]`` (if any) moved to ``fields``."""
    tag = _TAG.match(text)
    if tag is None:
        return text
    fields["app"] = tag.group(1)
    if tag.group(2) is not None:
        fields["procid"] = tag.group(2)
    return text[tag.end() :]


def _read_5424(text: str, fields: dict[str, str]) -> Parsed | str:
    header = _HEADER_5424.match(text)
    if header is None:
        return "RFC 5424 header incomplete (expected VERSION TIMESTAMP HOST APP PROCID MSGID)"
    stamp, host, app, procid, msgid = header.groups()
    if stamp == "-":
        return "RFC 5424 record without a time (its TIMESTAMP is -)"
    try:
        ts_ns = parse_rfc3339_ns(stamp)
    except ValueError as exc:
        return f"RFC 5424 TIMESTAMP: {exc}"
    for name, value in (("host", host), ("app", app), ("procid", procid), ("msgid", msgid)):
        if value != "-":
            fields[name] = value
    message = _structured(text[header.end() :], fields)
    if message is None:
        return 'RFC 5424 STRUCTURED-DATA is neither - nor [SD-ID name="value" ...]'
    return Parsed(ts_ns=ts_ns, level=None, message=message.removeprefix("\ufeff"), fields=fields)


def read_at(text: str, zone: tzinfo, now_ns: int) -> Parsed | str:
    """Read a syslog line, RFC 3164 times in ``zone`` and in the latest year not more than a
    day after ``now_ns``.

    Returns:
        The record, or why it is not one.
    """
    fields: dict[str, str] = {}
    level = None
    rest = text
    pri = _PRI.match(text)
    if pri is not None:
        value = int(pri.group(1))
        if value > 191:  # RFC 5424 §6.2.1: facility 0-23, severity 0-7
            return f"syslog PRI <{value}> is past 191 (facility 23, severity 7)"
        level = str(value & 7)
        fields["facility"] = str(value >> 3)
        rest = text[pri.end() :]
        if rest.startswith("1 "):
            parsed = _read_5424(rest, fields)
            if isinstance(parsed, str):
                return parsed
            return Parsed(parsed.ts_ns, level, parsed.message, parsed.fields)
    header = _HEADER_3164.match(rest)
    if header is not None:
        month_name, day, hour, minute, second, fraction, host = header.groups()
        month = _MONTHS.get(month_name)
        if month is None:
            return f"syslog time: unknown month {month_name!r}"
        try:
            ts_ns = yearless_ns(
                month, int(day), int(hour), int(minute), int(second), fraction_ns(fraction),
                zone, now_ns,
            )  # fmt: skip
        except ValueError as exc:
            return f"syslog time: {exc}"
    else:
        header = _HEADER_FILE.match(rest)
        if header is None:
            return (
                "not a syslog line (expected e.g. <34>Oct 11 22:14:15 host app[123]: msg, "
                "Oct 11 22:14:15 host app: msg or <165>1 2003-10-11T22:14:15Z host app - - - msg)"
            )
        stamp, host = header.groups()
        try:
            ts_ns = parse_rfc3339_ns(stamp)
        except ValueError as exc:
            return f"syslog time: {exc}"
    fields["host"] = host
    message = _tagged(rest[header.end() :], fields)
    return Parsed(ts_ns=ts_ns, level=level, message=message, fields=fields)


def read(text: str, zone: tzinfo) -> Parsed | str:
    """:func:`read_at` now."""
    return read_at(text, zone, time.time_ns())


#: The ``syslog`` format.
SYSLOG: Final = TextFormat(
    name="syslog",
    looks_like="<34>Oct 11 22:14:15 host app[123]: msg (RFC 3164, also without <34>) or RFC 5424",
    starts=starts,
    read=read,
)
