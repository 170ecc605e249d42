"""nginx evidence: access logs (a JSON ``log_format`` or ``combined`` + ``$request_id``) and the
error log, told apart line by line.

A line starting with ``{`` or ``[`` is a JSON access line, one starting with an error-log time
(``2026/11/22 13:11:19 [error] ...``) an error line, one matching ``combined`` a text access
line; anything else is rejected. An error message holding an unclosed quote continues on the
following lines until the quote closes (a line that starts a record of any format ends it).

The formats: ``_nginx_access`` (the access log's JSON and ``combined`` forms),
``_nginx_request`` (what an access line says about its request: fields, identifiers) and
``_nginx_error`` (the error log, and :func:`link_errors_to_access`, re-exported here).
:data:`NGINX` declares the source: its zone option (error-log times carry none) and the
linking of error lines to access lines once an input is committed (:func:`link_stored`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, timedelta, timezone, tzinfo
from functools import partial
from typing import TYPE_CHECKING, Final

from correlator import _environ
from correlator.model import MAX_LINE_BYTES, MAX_NS, MIN_NS, Event, Reject
from correlator.sources._lines import excerpt, unreadable
from correlator.sources._nginx_access import (
    COMBINED,
    COMBINED_BYTES,
    access_combined,
    access_json,
)
from correlator.sources._nginx_batch import nginx_table
from correlator.sources._nginx_error import (
    ERROR_HEAD,
    ERROR_HEAD_BYTES,
    LINK_GAP_S,
    PendingRecord,
    error_event,
    link_errors_to_access,
    request_key,
)
from correlator.sources._nginx_request import SOURCE, reject
from correlator.sources._source import Option, Source, read_zone

if TYPE_CHECKING:
    from correlator.store import Store

__all__ = [
    "LINK_GAP_S",
    "NGINX",
    "link_errors_to_access",
    "link_stored",
    "parse",
    "starts_record",
]


def parse(
    lines: Iterable[bytes],
    origin: str,
    *,
    tz_offset_s: float = 0.0,
    zone: tzinfo | None = None,
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """Read nginx access and error logs, one event per line (per record for multi-line errors).

    Error-log times carry no zone: each is read in ``zone`` with the offset in force at that
    time (``_time.parse_nginx_error_ns``: a local time a daylight-saving change skips or
    repeats takes the offset before the change), else with the fixed ``tz_offset_s``, else
    as UTC. Access-log times carry their offset and are read with it.

    Args:
        lines: raw lines without their ``\\n``, numbered from 1.
        origin: where they come from (a path, ``http``).
        tz_offset_s: the server's fixed UTC offset in seconds, for error-log times.
        zone: the server's time zone (``_time.parse_zone``), for error-log times.
        start_line: the number of the first line (a batch's, in the middle of an input).

    Returns:
        An iterator of events and, for lines that cannot be read, rejects naming the line and
        the problem. It never raises on bad input.

    Raises:
        ValueError: at once, ``zone`` and a non-zero ``tz_offset_s`` both given, or an
            offset of a day or more.
    """
    if zone is not None and tz_offset_s:
        raise ValueError("give the nginx server's zone or its tz_offset_s, not both")
    if zone is None:
        zone = timezone(timedelta(seconds=tz_offset_s)) if tz_offset_s else UTC
    return _records(lines, origin, zone, start_line)


def _records(
    lines: Iterable[bytes], origin: str, zone: tzinfo, start_line: int
) -> Iterator[Event | Reject]:
    """:func:`parse`'s events and rejects, error-log times read in ``zone``."""
    pending: PendingRecord | None = None
    for line_no, raw in enumerate(lines, start_line):
        if pending is not None:
            if _continues(pending, raw):
                pending.add(raw)
                if pending.closed:
                    yield pending.finish(origin, zone)
                    pending = None
                continue
            yield pending.finish(origin, zone)
            pending = None
        if not raw.strip():
            continue
        reason = unreadable(line_no, raw)
        if reason is not None:
            yield Reject(SOURCE, origin, line_no, reason, excerpt(raw))
            continue
        text = raw.decode("utf-8").rstrip("\r")
        head = ERROR_HEAD.match(text)
        if head is not None and text.count('"') % 2:
            pending = PendingRecord(line_no, head, [raw], [text], len(raw), text.count('"'))
            continue
        yield _read_line(text, raw, line_no, origin, zone, head)
    if pending is not None:
        yield pending.finish(origin, zone)


def _read_line(
    text: str,
    raw: bytes,
    line_no: int,
    origin: str,
    zone: tzinfo,
    head: re.Match[str] | None,
) -> Event | Reject:
    if text.lstrip()[:1] in ("{", "["):
        return access_json(text, raw, line_no, origin)
    if head is not None:
        return error_event(text, raw, line_no, origin, zone, head)
    combined = COMBINED.fullmatch(text)
    if combined is not None:
        return access_combined(combined, text, raw, line_no, origin)
    return reject(
        origin,
        line_no,
        "is neither an nginx access-log line (JSON or combined) nor an error-log line",
        raw,
    )


def _continues(pending: PendingRecord, raw: bytes) -> bool:
    """Whether ``raw`` continues the pending multi-line error message."""
    if pending.size + len(raw) + 1 > MAX_LINE_BYTES or starts_record(raw):
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def starts_record(raw: bytes) -> bool:
    """Whether ``raw`` starts a record of one of the formats (an error line, a ``combined`` or
    a JSON access line): it ends any multi-line error message before it."""
    return bool(
        ERROR_HEAD_BYTES.match(raw) or COMBINED_BYTES.match(raw) or raw.lstrip()[:1] in (b"{", b"[")
    )


def _cuts(_values: Mapping[str, object]) -> Callable[[bytes], bool]:
    """Where batches of nginx lines may be cut: before a line that starts a record."""
    return starts_record


def link_stored(store: Store, from_ns: int, to_ns: int) -> int:
    """Link stored nginx error lines to the access line of the same request, across files and
    batches (an error log and an access log are separate files, ingested in either order).

    Only what an input covering ``[from_ns, to_ns]`` can take part in is read: unlinked errors
    up to the linker's tolerance (:data:`LINK_GAP_S`) outside it, and the access lines those
    errors could link to. Whatever lies further away was linked, or found unlinkable, when it
    was ingested; reading it again would make every ingest cost time in proportion to the
    whole nginx history.

    Args:
        store: the store the input went into (committed: this reads it from other cursors).
        from_ns: the earliest request start of the input's events (an access line's time
            less its duration).
        to_ns: the latest time of the input's events.

    Returns:
        How many error events gained a link.
    """
    gap_ns = round(LINK_GAP_S * 1_000_000_000)

    def clamped(ns: int) -> int:  # a window past the range's ends (hostile times) stops there
        return min(max(ns, MIN_NS), MAX_NS)

    # Windows are half-open and the linker's tolerance inclusive: one nanosecond more.
    errors = store.nginx_events(
        unlinked_errors=True, from_ns=clamped(from_ns - gap_ns), to_ns=clamped(to_ns + gap_ns + 1)
    )
    if not errors:
        return 0
    # Every access line the linker could choose for one of these errors, and no other: one of
    # the same request (client, method, path) whose interval, widened by the tolerance, holds
    # the error's time. (Reading every access line of the window made an hour of access log
    # with 1 % error lines cost 20 s more than without them.)
    near = [
        (*key, error.ts_ns) for error in errors if (key := request_key(error, "error")) is not None
    ]
    if not near:
        return 0
    access = store.nginx_events(
        unlinked_errors=False,
        from_ns=clamped(errors[0].ts_ns - gap_ns),
        to_ns=clamped(errors[-1].ts_ns + gap_ns + 1),
        near=near,
        slack_ns=gap_ns,
    )
    linked = link_errors_to_access([*errors, *access])
    gained = [e for e in linked[: len(errors)] if e.correlation_id is not None]
    return store.set_links(gained)


NGINX: Final = Source(
    SOURCE,
    "access logs (a JSON log_format, or combined with ' \"$request_id\"' appended) and "
    "error logs, told apart line by line (--nginx-tz for error-log times)",
    parse=parse,
    table=partial(nginx_table, parse),  # its Python path without the compiled module
    cuts=_cuts,
    options=(
        Option(
            "zone",
            "--nginx-tz",
            "time zone of nginx error-log times, which carry none (with --source nginx): UTC, "
            "+01:00, or an IANA name such as Europe/Berlin (default "
            f"${_environ.NGINX_TZ} or UTC)",
            what="is the zone of nginx error logs",
            metavar="ZONE",
            query="tz",
            query_help="With `source=nginx`: the time zone of the error log's times, which "
            "carry none (`UTC`, `+01:00`, `Europe/Berlin`); default the service's "
            f"{_environ.NGINX_TZ}, else UTC.",
            environ=(_environ.NGINX_TZ,),
            read=read_zone,
        ),
    ),
    after_commit=link_stored,
    join_advice='log $request_id: the JSON log_format with "request_id":"$request_id", or '
    "the combined format with ' \"$request_id\"' appended (README: nginx), and forward it "
    "upstream (proxy_set_header X-Correlation-ID $request_id)",
)
