"""PostgreSQL server logs: ``jsonlog`` (PostgreSQL 15+) and ``csvlog``, told apart by content.

A line starting with ``{`` is a jsonlog object (keys as written by ``jsonlog.c``:
``timestamp``, ``user``, ``dbname``, ``pid``, ``remote_host``, ``remote_port``, ``session_id``,
``line_num``, ``ps``, ``session_start``, ``vxid``, ``txid``, ``error_severity``, ``state_code``,
``message``, ``detail``, ``hint``, ``internal_query``, ``context``, ``statement``,
``application_name``, ``backend_type``, ``leader_pid``, ``query_id``, ...). Anything else starts
a csvlog record, whose columns are those of :data:`CSV_COLUMNS` (23 up to PostgreSQL 12, 24 in
13 with ``backend_type``, 26 from 14 with ``leader_pid`` and ``query_id``). A csvlog record
spans several lines when a quoted field (a statement, a detail) holds newlines: lines are
joined while a quote is open (PostgreSQL doubles ``"`` inside quoted fields, so an odd count of
``"`` means "still inside"). A record still open at the end of input, or when a line that can
only start a new record arrives, is rejected as unterminated.

Identifiers come from the statement's sqlcommenter comment and from ``application_name``
(``_sqlcommenter`` says how). Values failing :func:`agent_logging.schema.id_problem` are left out
and named in ``attrs["rejected_ids"]``. Errors (ERROR/FATAL/PANIC with a SQLSTATE outside
classes 00, 01 and 02) get ``owner_hint="db"`` and the SQLSTATE as ``error_type``.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson

from correlator.model import MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources._lines import excerpt, line_reject, unreadable
from correlator.sources._source import Source
from correlator.sources._sqlcommenter import identifiers
from correlator.sources._time import parse_postgres_ns

__all__ = ["CSV_COLUMNS", "POSTGRES", "parse"]

_SOURCE: Final = "postgres"
_MAX_ATTR_CHARS: Final = 2048
_MAX_SQL_TAGS: Final = 16

#: csvlog columns in PostgreSQL's order (runtime-config-logging, "Using CSV-Format Log
#: Output"), named as this adapter names them for both formats (jsonlog's ``statement`` is
#: csvlog's ``query``, ``ps`` is ``command_tag``, ...).
CSV_COLUMNS: Final = (
    "timestamp",  # log_time
    "user",  # user_name
    "dbname",  # database_name
    "pid",  # process_id
    "remote_host",  # connection_from (host:port)
    "session_id",
    "line_num",  # session_line_num
    "ps",  # command_tag
    "session_start",  # session_start_time
    "vxid",  # virtual_transaction_id
    "txid",  # transaction_id
    "error_severity",
    "state_code",  # sql_state_code
    "message",
    "detail",
    "hint",
    "internal_query",
    "internal_position",  # internal_query_pos
    "context",
    "statement",  # query
    "cursor_position",  # query_pos
    "location",
    "application_name",
    "backend_type",  # PostgreSQL 13+
    "leader_pid",  # PostgreSQL 14+
    "query_id",  # PostgreSQL 14+
)
_CSV_WIDTHS: Final = {23: "PostgreSQL 12", 24: "PostgreSQL 13", 26: "PostgreSQL 14+"}

# The csv module refuses a field over 131,072 characters by default (csv.field_size_limit), so
# a statement of 200 KB in a record well within the 1 MiB line limit was rejected. The limit
# is process-wide: raised to what a record may hold, never lowered (another user's higher
# limit stays).
if csv.field_size_limit() < MAX_LINE_BYTES:
    csv.field_size_limit(MAX_LINE_BYTES)

_CSV_START = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? [A-Za-z0-9+:-]{1,8},")
_INTEGER = re.compile(r"-?\d{1,19}", re.ASCII)
_DURATION = re.compile(r"duration: (\d+(?:\.\d+)?) ms")

_LEVELS: Final = {
    "PANIC": "critical",
    "FATAL": "critical",
    "ERROR": "error",
    "WARNING": "warning",
    "NOTICE": "info",
    "INFO": "info",
    "LOG": "info",
    **{f"DEBUG{n}": "debug" for n in range(1, 6)},
}
#: SQLSTATE classes that are not failures: successful completion, warning, no data.
_BENIGN_CLASSES: Final = frozenset({"00", "01", "02"})

#: Condition names (PostgreSQL Appendix A) of the SQLSTATEs an incident usually involves.
_SQLSTATE_NAMES: Final = {
    "08006": "connection_failure",
    "08P01": "protocol_violation",
    "22P02": "invalid_text_representation",
    "23502": "not_null_violation",
    "23503": "foreign_key_violation",
    "23505": "unique_violation",
    "23514": "check_violation",
    "25P02": "in_failed_sql_transaction",
    "28000": "invalid_authorization_specification",
    "28P01": "invalid_password",
    "3D000": "invalid_catalog_name",
    "40001": "serialization_failure",
    "40P01": "deadlock_detected",
    "42501": "insufficient_privilege",
    "42601": "syntax_error",
    "42703": "undefined_column",
    "42P01": "undefined_table",
    "53100": "disk_full",
    "53200": "out_of_memory",
    "53300": "too_many_connections",
    "55P03": "lock_not_available",
    "57014": "query_canceled",
    "57P01": "admin_shutdown",
    "57P03": "cannot_connect_now",
}


def parse(lines: Iterable[bytes], origin: str) -> Iterator[Event | Reject]:
    """Read PostgreSQL jsonlog and csvlog output, one event per log record.

    Args:
        lines: raw lines without their ``\\n``, numbered from 1.
        origin: where they come from (a path, ``http``).

    Returns:
        An iterator of events and, for records that cannot be read, rejects naming the line
        and the problem. It never raises on bad input.
    """
    record: _CsvRecord | None = None
    for line_no, raw in enumerate(lines, 1):
        if record is not None:
            if not _CSV_START.match(raw) and not raw.startswith(b'{"timestamp":'):
                record.add(line_no, raw)
                if record.closed:
                    yield record.finish(origin)
                    record = None
                continue
            yield record.reject(
                origin, f"has an unterminated quoted field (a new record starts at line {line_no})"
            )
            record = None
        if not raw.strip():
            continue
        if raw.lstrip()[:1] in (b"{", b"["):
            yield _json_record(raw, line_no, origin)
            continue
        record = _CsvRecord(line_no)
        record.add(line_no, raw)
        if record.closed:
            yield record.finish(origin)
            record = None
    if record is not None:
        yield record.reject(origin, "is truncated: the input ends inside a quoted field")


def _reject(origin: str, line_no: int, reason: str, raw: bytes) -> Reject:
    return line_reject(_SOURCE, origin, line_no, reason, raw)


@dataclasses.dataclass(slots=True)
class _CsvRecord:
    """Physical lines of one csvlog record, gathered while a quoted field is open."""

    line_no: int
    raws: list[bytes] = dataclasses.field(default_factory=list)
    size: int = 0
    quotes: int = 0
    problem: str | None = None

    @property
    def closed(self) -> bool:
        return self.quotes % 2 == 0

    def add(self, line_no: int, raw: bytes) -> None:
        # Counting quotes on bytes is safe for UTF-8 (0x22 never occurs inside a multi-byte
        # character) and keeps the record's framing even when a line is not readable.
        self.quotes += raw.count(b'"')
        self.size += len(raw) + 1
        if self.problem is None:
            self.problem = unreadable(line_no, raw)
            if self.problem is not None and line_no != self.line_no:
                self.problem = f"line {self.line_no} starts a csvlog record whose {self.problem}"
            elif self.problem is None and self.size > MAX_LINE_BYTES:
                self.problem = (
                    f"line {self.line_no} starts a csvlog record of over {MAX_LINE_BYTES:,} bytes"
                    f" (at line {line_no}); the limit is {MAX_LINE_BYTES:,}"
                )
        if self.problem is None or not self.raws:
            self.raws.append(raw)

    def reject(self, origin: str, reason: str) -> Reject:
        reason = f"line {self.line_no} starts a csvlog record that {reason}"
        return Reject(_SOURCE, origin, self.line_no, reason, excerpt(self.raws[0]))

    def finish(self, origin: str) -> Event | Reject:
        raw = b"\n".join(self.raws)
        if self.problem is not None:
            return Reject(_SOURCE, origin, self.line_no, self.problem, excerpt(self.raws[0]))
        text = raw.decode("utf-8")
        try:
            rows = list(csv.reader([text.rstrip("\r")], strict=True))
        except csv.Error as exc:
            return _reject(origin, self.line_no, f"is not a valid csvlog record: {exc}", raw)
        row = rows[0] if len(rows) == 1 else []
        if len(row) not in _CSV_WIDTHS:
            widths = ", ".join(f"{n} ({name})" for n, name in _CSV_WIDTHS.items())
            reason = f"is not a csvlog record: it has {len(row)} fields; csvlog writes {widths}"
            return _reject(origin, self.line_no, reason, raw)
        fields = {name: value for name, value in zip(CSV_COLUMNS, row, strict=False) if value}
        return _event(fields, text, raw, self.line_no, origin, "csvlog")


def _json_record(raw: bytes, line_no: int, origin: str) -> Event | Reject:
    reason = unreadable(line_no, raw)
    if reason is not None:
        return Reject(_SOURCE, origin, line_no, reason, excerpt(raw))
    text = raw.decode("utf-8").rstrip("\r")
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return _reject(origin, line_no, f"is not valid JSON: {exc}", raw)
    if not isinstance(obj, dict):
        return _reject(origin, line_no, f"is a JSON {type(obj).__name__}, not an object", raw)
    fields: dict[str, str] = {}
    for key, value in obj.items():
        if isinstance(value, str):
            if value:
                fields[key] = value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            fields[key] = str(value)
    if "remote_port" in fields and "remote_host" in fields:
        fields["remote_host"] = f"{fields['remote_host']}:{fields.pop('remote_port')}"
    if "file_name" in fields:  # log_error_verbosity = verbose: csvlog's location, in parts
        where = f"{fields['file_name']}:{fields.get('file_line_num', '?')}"
        fields["location"] = f"{fields['func_name']}, {where}" if "func_name" in fields else where
    return _event(fields, text, raw, line_no, origin, "jsonlog")


def _event(
    fields: dict[str, str], text: str, raw: bytes, line_no: int, origin: str, log_format: str
) -> Event | Reject:
    stamp = fields.get("timestamp")
    if stamp is None:
        return _reject(origin, line_no, "has no 'timestamp' field", raw)
    try:
        ts_ns = parse_postgres_ns(stamp)
    except ValueError as exc:
        return _reject(origin, line_no, f"has an unreadable 'timestamp': {exc}", raw)
    severity = fields.get("error_severity", "LOG").upper()
    sqlstate = fields.get("state_code")
    failing = sqlstate is not None and sqlstate[:2] not in _BENIGN_CLASSES
    # csvlog translates the severity (lc_messages); an unknown word with a failing SQLSTATE
    # is still an error.
    level = _LEVELS.get(severity, "error" if failing else "info")
    is_error = level in ("error", "critical")
    attrs: dict[str, Any] = {"format": log_format, "error_severity": severity}
    if sqlstate is not None:
        attrs["sqlstate"] = sqlstate
        if sqlstate in _SQLSTATE_NAMES:
            attrs["sqlstate_name"] = _SQLSTATE_NAMES[sqlstate]
    for key in ("pid", "line_num", "leader_pid", "txid", "query_id"):
        value = fields.get(key)
        number = _int64(value)
        if number:  # a zero txid or query_id means "none"
            attrs[key] = number
    for key in (
        "user",
        "dbname",
        "remote_host",
        "session_id",
        "ps",
        "vxid",
        "application_name",
        "backend_type",
        "detail",
        "hint",
        "context",
        "statement",
        "internal_query",
        "location",
    ):
        if (value := fields.get(key)) is not None:
            attrs["command_tag" if key == "ps" else key] = _clip(value)
    identified = identifiers(fields)
    if identified.tags:  # framework tags (route, controller, application...): a few, clipped
        attrs["sql_tags"] = {key: _clip(value) for key, value in identified.tags[:_MAX_SQL_TAGS]}
    if identified.rejected:
        attrs["rejected_ids"] = identified.rejected
    ids = identified.ids
    message = fields.get("message", "")
    duration = _DURATION.search(message)
    return Event(
        ts_ns=ts_ns,
        layer="db",
        source=_SOURCE,
        origin=origin,
        message=_summary(severity, sqlstate, message, fields.get("detail"), is_error),
        raw=text,
        hash=content_hash(_SOURCE, raw),
        service=identified.service,
        level=level,
        correlation_id=ids.get("correlation_id"),
        allocation_id=ids.get("allocation_id"),
        node_id=ids.get("node_id"),
        node_instance_id=ids.get("node_instance_id"),
        workflow_id=ids.get("workflow_id"),
        trace_id=ids.get("trace_id"),
        span_id=ids.get("span_id"),
        duration_s=float(duration[1]) / 1000 if duration else None,
        owner_hint="db" if is_error and failing else None,
        error_type=sqlstate if is_error else None,
        attrs=attrs,
    )


def _int64(value: str | None) -> int | None:
    """The integer ``value`` spells if it fits a signed 64-bit column (query_id uses the whole
    range), else None."""
    if value is None or not _INTEGER.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def _clip(value: str) -> str:
    return value if len(value) <= _MAX_ATTR_CHARS else value[: _MAX_ATTR_CHARS - 1] + "…"


def _summary(
    severity: str, sqlstate: str | None, message: str, detail: str | None, is_error: bool
) -> str:
    """A one-line message; the failures incidents hinge on are named in words."""
    text = " ".join(message.split())
    if is_error and sqlstate is not None:
        if sqlstate == "55P03" and "lock timeout" in text:
            text = f"lock timeout (SQLSTATE 55P03): {text}"
        elif sqlstate == "40P01":
            first = " ".join((detail or "").split("\n", 1)[0].split())
            text = f"deadlock (SQLSTATE 40P01): {text}" + (f"; {first}" if first else "")
        elif sqlstate == "57014" and "statement timeout" in text:
            text = f"statement timeout (SQLSTATE 57014): {text}"
        else:
            name = _SQLSTATE_NAMES.get(sqlstate)
            text = f"{severity} {sqlstate}{f' ({name})' if name else ''}: {text}"
    return _clip(text)


POSTGRES: Final = Source(
    _SOURCE,
    "PostgreSQL csvlog or jsonlog, told apart by content; sqlcommenter comments "
    "(/*allocation_id='a-9'*/) in statements join them",
    parse=parse,
    join_advice="append sqlcommenter comments to statements (agent_logging.sql_comment()) "
    "and log them (log_statement, or log_min_duration_statement)",
)
