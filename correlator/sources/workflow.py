"""The ``workflow`` adapter: lifecycle state transitions, from NDJSON or an audit table.

NDJSON, one transition per line::

    {"ts": "2024-05-01T12:00:00.123Z", "entity_kind": "allocation", "entity_id": "a-9",
     "from": "releasing", "to": "release_failed",
     "attributes": {"occupancy": "cleanup", "provider": "aap"},
     "allocation_id": "a-9", "workflow_id": "wf-2", "node_id": "n-17",
     "correlation_id": "c-1", "service": "workflow-worker"}

Required: ``ts`` (RFC 3339), ``entity_kind``, ``entity_id`` (text or integer) and the new
state (``to``; also read as ``to_state``, ``state_to`` or ``state``). Optional: the previous
state (``from``, ``from_state`` or ``state_from``), ``attributes`` (or ``attrs``: an object),
the five identifiers, ``service``. Every other field is kept in ``attrs`` beside the
attributes. An integer past 64 bits, in a line or in the audit table's ``jsonb``, is kept as
its decimal text, as the ``ndjson`` adapter keeps it (:mod:`~correlator.sources._integers`).

Each transition becomes one event of layer ``workflow``: level ``error`` when the new state is
a failure (``failed``, ``error`` or ``*_failed``), ``warning`` when the entity is fenced with
``occupancy=cleanup``, ``info`` otherwise; ``owner_hint`` is ``workflow_state`` for the states
of :data:`WORKFLOW_STATE_FAILURES` (the lifecycle itself is stuck), and the message reads
``allocation a-9: releasing → release_failed (occupancy=cleanup)``. An ``allocation``
entity's id is its ``allocation_id`` when the line names none (``workflow`` → ``workflow_id``,
``node`` → ``node_id`` likewise).

:func:`read_audit_table` reads the same transitions from a PostgreSQL audit table (see
:data:`AUDIT_COLUMNS` for the expected columns): :data:`WORKFLOW` declares it as the
source's reader when ``ingest`` is given ``--dsn``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from agent_logging.schema import rfc3339_ns
from correlator.errors import QueryError, SourceError
from correlator.model import Event, Reject, content_hash
from correlator.sources._fields import take_id
from correlator.sources._integers import exact, wide_as_text
from correlator.sources._lines import excerpt, iter_lines
from correlator.sources._record import too_deep
from correlator.sources._source import Option, Reader, Source
from correlator.sources._time import (
    MAX_NS,
    MIN_NS,
    OUT_OF_RANGE,
    parse_rfc3339_ns,
)

__all__ = [
    "AUDIT_COLUMNS",
    "WORKFLOW",
    "WORKFLOW_STATE_FAILURES",
    "parse",
    "read_audit_table",
    "transition_event",
]

_SOURCE: Final = "workflow"

#: States that prove the workflow's own lifecycle is stuck: owner ``workflow_state``.
WORKFLOW_STATE_FAILURES: Final = frozenset({"release_failed", "provision_failed"})

#: The audit table's columns, by the name this adapter gives them. Pass ``columns`` to
#: :func:`read_audit_table` to map any of them to another column name, or to None when the
#: table lacks it (``entity_kind`` then reads as ``allocation``).
AUDIT_COLUMNS: Final = {
    "ts": "ts",  # timestamptz (a timestamp without zone is read as UTC)
    "entity_kind": "entity_kind",
    "entity_id": "entity_id",
    "from_state": "from_state",
    "to_state": "to_state",
    "attributes": "attributes",  # jsonb
    "allocation_id": "allocation_id",
    "workflow_id": "workflow_id",
    "node_id": "node_id",
    "correlation_id": "correlation_id",
}

# Field aliases, first match wins.
_FROM_KEYS: Final = ("from", "from_state", "state_from")
_TO_KEYS: Final = ("to", "to_state", "state_to", "state")
_ATTR_KEYS: Final = ("attributes", "attrs")
_IDS: Final = ("node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id")
# An entity of this kind is the identifier of that key.
_ENTITY_IDS: Final = {"allocation": "allocation_id", "workflow": "workflow_id", "node": "node_id"}

# PostgreSQL identifiers as this adapter accepts them: plain, unquoted-style names (63 bytes
# is NAMEDATALEN - 1), optionally schema-qualified. psycopg quotes them anyway; the check
# turns a hostile name into a clear error instead of a strange but harmless relation name.
_SQL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
_FETCH_ROWS: Final = 2000
_CONNECT_TIMEOUT_S: Final = 10


def _text(value: object) -> str | None:
    if type(value) is str:
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _first(fields: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """Pop the first of ``keys`` that holds text; later aliases stay (in attrs)."""
    for key in keys:
        value = _text(fields.get(key))
        if value is not None:
            del fields[key]
            return value
    return None


def transition_event(
    fields: dict[str, Any],
    *,
    raw: str,
    digest: int,
    origin: str,
    line_no: int,
    ts_ns: int | None = None,
    unit: str = "line",
) -> Event | str:
    """Map one transition (a parsed line or an audit row) to an event, or say why not.

    Args:
        fields: the transition's fields (consumed: what is left goes to ``attrs``).
        raw: the evidence as read.
        digest: its content hash.
        origin: file path or table.
        line_no: line (or row) number, for the reason.
        ts_ns: the time, when the caller already has it (an audit row's timestamptz);
            otherwise ``fields["ts"]`` is read as RFC 3339.
        unit: what ``line_no`` counts, for the reason: ``line`` or ``row``.

    Returns:
        The event, or the reason the transition is refused.
    """
    pop = fields.pop
    ts = pop("ts", None)
    where = f"{unit} {line_no}"
    if ts_ns is None:
        if ts is None:
            return f"{where} lacks field 'ts'"
        if type(ts) is not str:
            return f"{where} has a field 'ts' that is a {type(ts).__name__}, not RFC 3339 text"
        try:
            ts_ns = parse_rfc3339_ns(ts)
        except ValueError as exc:
            return f"{where} has a field 'ts' that is not an RFC 3339 timestamp: {exc}"

    kind = _text(pop("entity_kind", None))
    if kind is None:
        return f"{where} lacks field 'entity_kind'"
    entity_id = _text(pop("entity_id", None))
    if entity_id is None:
        return f"{where} lacks field 'entity_id'"
    state_to = _first(fields, _TO_KEYS)
    if state_to is None:
        return f"{where} lacks field 'to' (also read as to_state, state_to, state)"
    state_from = _first(fields, _FROM_KEYS)

    attrs: dict[str, Any] = {}
    for key in _ATTR_KEYS:
        value = pop(key, None)
        if isinstance(value, dict):
            attrs.update(value)
        elif value is not None:
            attrs[key] = value
    rejected: dict[str, str] = {}
    ids = {key: take_id(key, pop(key, None), rejected) for key in _IDS}
    entity_key = _ENTITY_IDS.get(kind)
    if entity_key is not None and ids[entity_key] is None and entity_key not in rejected:
        ids[entity_key] = take_id(entity_key, entity_id, rejected)
    service = pop("service", None)
    if type(service) is not str or not service:
        if service is not None:
            fields["service"] = service
        service = None
    attrs.update(fields)
    if rejected:
        attrs["rejected_ids"] = rejected

    occupancy = attrs.get("occupancy")
    lowered = state_to.lower()
    if lowered in ("failed", "error") or lowered.endswith("_failed"):
        level = "error"
    elif occupancy == "cleanup":
        level = "warning"
    else:
        level = "info"
    arrow = f"{state_from} → {state_to}" if state_from else state_to
    message = f"{kind} {entity_id}: {arrow}"
    if isinstance(occupancy, str) and occupancy:
        message += f" (occupancy={occupancy})"
    return Event(
        ts_ns=ts_ns,
        layer="workflow",
        source=_SOURCE,
        origin=origin,
        message=message,
        raw=raw,
        hash=digest,
        service=service,
        level=level,
        owner_hint="workflow_state" if state_to in WORKFLOW_STATE_FAILURES else None,
        entity_kind=kind,
        entity_id=entity_id,
        state_from=state_from,
        state_to=state_to,
        attrs=attrs,
        node_id=ids["node_id"],
        node_instance_id=ids["node_instance_id"],
        correlation_id=ids["correlation_id"],
        allocation_id=ids["allocation_id"],
        workflow_id=ids["workflow_id"],
    )


def parse(lines: Iterable[bytes], origin: str) -> Iterator[Event | Reject]:
    """Read NDJSON state transitions (format in the module docstring).

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).

    Yields:
        An :class:`Event` per transition, a :class:`Reject` per unreadable line.
    """
    for item in iter_lines(lines, _SOURCE, origin):
        if isinstance(item, Reject):
            yield item
            continue
        line_no, data, text = item
        try:
            fields = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            yield Reject(
                _SOURCE, origin, line_no, f"line {line_no} is not valid JSON: {exc}", excerpt(data)
            )
            continue
        if not isinstance(fields, dict):
            reason = f"line {line_no} is not a JSON object"
            yield Reject(_SOURCE, origin, line_no, reason, excerpt(data))
            continue
        try:
            fields = exact(fields, data)
        except orjson.JSONEncodeError:
            yield Reject(_SOURCE, origin, line_no, too_deep(line_no, fields), excerpt(data))
            continue
        event = transition_event(
            fields,
            raw=text,
            digest=content_hash(_SOURCE, data),
            origin=origin,
            line_no=line_no,
        )
        if isinstance(event, str):
            yield Reject(_SOURCE, origin, line_no, event, excerpt(data))
        else:
            yield event


# -- the audit table -------------------------------------------------------------------------


def _sql_name(what: str, name: object) -> tuple[str, ...]:
    parts = name.split(".") if isinstance(name, str) else []
    if not parts or len(parts) > 2 or not all(_SQL_NAME.fullmatch(part) for part in parts):
        raise QueryError(
            f"{what} {name!r} is not a plain SQL name: use letters, digits, _ and $ (not first), "
            "at most 63 characters, optionally schema-qualified as schema.name"
        )
    return tuple(parts)


def _since_dt(since_ns: object) -> datetime | None:
    if since_ns is None:
        return None
    if type(since_ns) is not int:
        raise QueryError(f"since_ns must be an integer of nanoseconds, not {since_ns!r}")
    # timestamptz has microseconds: round up, so no row earlier than since_ns qualifies.
    micros = -(-since_ns // 1000)
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    except OverflowError as exc:
        raise QueryError(f"since_ns {since_ns} is outside the years 1 to 9999") from exc


def _ts_ns(value: object) -> int | None:
    """A row's timestamptz as nanoseconds; None for anything else."""
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    utc = value.astimezone(UTC)
    return calendar.timegm(utc.timetuple()) * 1_000_000_000 + utc.microsecond * 1000


def read_audit_table(
    dsn: str,
    *,
    table: str = "allocation_audit",
    since_ns: int | None = None,
    columns: Mapping[str, str | None] | None = None,
) -> Iterator[Event | Reject]:
    """Read state transitions from a PostgreSQL audit table, oldest first.

    The table and column names are checked and quoted as identifiers; ``since_ns`` is bound
    as a parameter. Nothing from the caller is ever formatted into the SQL text. The rows are
    read in a read-only transaction through a server-side cursor, 2,000 at a time.

    Args:
        dsn: a libpq connection string or URI (kept out of every message: it may hold a
            password).
        table: the audit table, optionally ``schema.table``.
        since_ns: only rows at or after this instant (nanoseconds since the epoch).
        columns: column names by the names of :data:`AUDIT_COLUMNS` (None: the table lacks it).

    Returns:
        An iterator of events (source ``workflow``, origin ``postgresql:<table>``, raw the
        row as canonical JSON) and rejects for rows that cannot be read.

    Raises:
        QueryError: an unsafe table or column name, an unknown column key, or a bad
            ``since_ns`` (raised at once, before any connection).
        SourceError: psycopg is missing, or PostgreSQL cannot be reached or queried (raised
            while iterating).
    """
    table_parts = _sql_name("table", table)
    names: dict[str, str | None] = dict(AUDIT_COLUMNS)
    for key, name in (columns or {}).items():
        if key not in AUDIT_COLUMNS:
            raise QueryError(
                f"unknown audit column key {key!r}; expected one of {', '.join(AUDIT_COLUMNS)}"
            )
        if name is not None:
            _sql_name(f"column for {key}", name)
        names[key] = name
    if names["ts"] is None:
        raise QueryError("the audit table needs a timestamp column (columns['ts'])")
    since = _since_dt(since_ns)
    return _read(dsn, table_parts, names, since)


def _read(
    dsn: str,
    table: tuple[str, ...],
    names: dict[str, str | None],
    since: datetime | None,
) -> Iterator[Event | Reject]:
    try:
        import psycopg  # optional: only this function needs PostgreSQL
        from psycopg import sql
    except ImportError as exc:
        raise SourceError(
            "reading an audit table needs psycopg: pip install 'psycopg[binary]'"
        ) from exc
    keys = [key for key, name in names.items() if name is not None]
    ts_column = sql.Identifier(names["ts"] or "ts")
    query = sql.SQL("SELECT {fields} FROM {table}{where} ORDER BY {ts}").format(
        fields=sql.SQL(", ").join(sql.Identifier(names[key] or key) for key in keys),
        table=sql.Identifier(*table),
        where=sql.SQL(" WHERE {} >= %s").format(ts_column) if since else sql.SQL(""),
        ts=ts_column,
    )
    params = (since,) if since else ()
    origin = "postgresql:" + ".".join(table)
    try:
        with psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT_S) as conn:
            conn.read_only = True
            # A `timestamp` (without time zone) column is read as UTC (_ts_ns); PostgreSQL
            # compares it with the bound `since` in the session's TimeZone. UTC for both.
            conn.execute("SET TIME ZONE 'UTC'")
            with conn.cursor(name="correlator_audit") as cursor:
                cursor.itersize = _FETCH_ROWS
                cursor.execute(query, params)
                for row_no, row in enumerate(cursor, 1):
                    yield _row_event(dict(zip(keys, row, strict=True)), origin, row_no)
    except psycopg.Error as exc:
        # The message names the table and PostgreSQL's reason, never the DSN.
        raise SourceError(f"cannot read the audit table {origin}: {exc}") from exc


def _row_event(fields: dict[str, Any], origin: str, row_no: int) -> Event | Reject:
    ts_ns = _ts_ns(fields.get("ts"))
    if ts_ns is not None:
        fields["ts"] = rfc3339_ns(ts_ns)
    fields.setdefault("entity_kind", "allocation")
    # psycopg reads jsonb with the stdlib's parser, which keeps integers past 64 bits; orjson
    # cannot write them (default= is not asked about integers).
    try:
        fields = wide_as_text(fields)
        # The row as canonical JSON is its raw evidence: the same row read again hashes the
        # same.
        raw_bytes = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS, default=str)
    except (RecursionError, orjson.JSONEncodeError):  # a jsonb nested past what orjson writes
        return Reject(_SOURCE, origin, row_no, too_deep(row_no, fields, "row"), "")
    raw = raw_bytes.decode()
    if ts_ns is not None and not MIN_NS <= ts_ns <= MAX_NS:  # timestamptz reaches year 294276
        reason = f"row {row_no} has a field 'ts' {OUT_OF_RANGE}"
        return Reject(_SOURCE, origin, row_no, reason, raw[:200])
    event = transition_event(
        {key: value for key, value in fields.items() if value is not None},  # NULL: absent
        raw=raw,
        digest=content_hash(_SOURCE, raw_bytes),
        origin=origin,
        line_no=row_no,
        ts_ns=ts_ns,
        unit="row",
    )
    if isinstance(event, str):
        return Reject(_SOURCE, origin, row_no, event, raw[:200])
    return event


WORKFLOW: Final = Source(
    _SOURCE,
    'state transitions as JSON lines: {"ts":...,"entity_kind":"allocation",'
    '"entity_id":"a-9","from":"releasing","to":"release_failed",...}; or --dsn for an audit '
    "table",
    parse=parse,
    reader=Reader(
        lambda *, dsn, table: read_audit_table(dsn, table=table),
        (
            Option(
                "dsn",
                "--dsn",
                "PostgreSQL DSN of the workflow audit table (with --source workflow)",
                "reads a PostgreSQL audit table",
            ),
            Option(
                "table",
                "--table",
                "the audit table (with --dsn; default allocation_audit)",
                "names a workflow audit table",
                default="allocation_audit",
            ),
        ),
        when="dsn",
    ),
)
