"""The workflow adapter: NDJSON transitions, and the same from a real PostgreSQL audit table."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator.errors import QueryError, SourceError
from correlator.model import Event, Reject, content_hash
from correlator.sources.workflow import AUDIT_COLUMNS, _row_event, parse, read_audit_table
from tests.correlator.sources.strategies import ANY_JSON, TIMES, TIMESTAMPS
from tests.servers import free_port

SAMPLES = Path(__file__).parents[1] / "samples" / "workflow"
ORIGIN = "transitions.jsonl"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
S = 1_000_000_000


def sample_lines() -> list[bytes]:
    return (SAMPLES / "transitions.jsonl").read_bytes().splitlines()


def connect(dsn: str, **kwargs: Any) -> Any:
    """A psycopg connection (psycopg is the correlator extra's; skip without it)."""
    psycopg = pytest.importorskip("psycopg")
    return psycopg.connect(dsn, **kwargs)


def transition(raw: bytes, origin: str = ORIGIN, **fields: Any) -> Event:
    fields.setdefault("service", "workflow-worker")
    return Event(
        layer="workflow",
        source="workflow",
        origin=origin,
        raw=raw.decode(),
        hash=content_hash("workflow", raw),
        **fields,
    )


def test_sample_file() -> None:
    lines = sample_lines()

    assert list(parse(lines, ORIGIN)) == [
        transition(
            lines[0],
            ts_ns=T0,
            message="allocation a-9: requested",
            correlation_id="c-1f3a",
            allocation_id="a-9",
            entity_kind="allocation",
            entity_id="a-9",
            state_to="requested",
            attrs={"provider": "aap"},
        ),
        transition(
            lines[1],
            ts_ns=T0 + 1_250_000_000,
            message="allocation a-9: requested → provisioning",
            node_id="n-17",
            allocation_id="a-9",
            workflow_id="wf-1",
            entity_kind="allocation",
            entity_id="a-9",
            state_from="requested",
            state_to="provisioning",
            attrs={"provider": "aap"},
        ),
        transition(
            lines[2],
            ts_ns=T0 + 1801 * S,
            level="error",
            message="allocation a-9: releasing → release_failed (occupancy=cleanup)",
            owner_hint="workflow_state",
            node_id="n-17",
            allocation_id="a-9",
            workflow_id="wf-2",
            entity_kind="allocation",
            entity_id="a-9",
            state_from="releasing",
            state_to="release_failed",
            attrs={"occupancy": "cleanup", "provider": "aap"},
        ),
        transition(
            lines[3],
            ts_ns=T0 + 1802 * S,
            level="error",
            message="workflow wf-2: running → failed",
            allocation_id="a-9",
            workflow_id="wf-2",
            entity_kind="workflow",
            entity_id="wf-2",
            state_from="running",
            state_to="failed",
            attrs={"step": "wipe-disks", "reason": "timeout after 600 s"},
        ),
        transition(
            lines[4],
            ts_ns=T0 + 1803 * S,
            service=None,
            level="warning",
            message="node n-17: fenced (occupancy=cleanup)",
            node_id="n-17",
            entity_kind="node",
            entity_id="n-17",
            state_to="fenced",
            attrs={"occupancy": "cleanup", "retries": 3},
        ),
        Reject(
            "workflow",
            ORIGIN,
            7,
            "line 7 lacks field 'to' (also read as to_state, state_to, state)",
            lines[6].decode(),
        ),
        Reject("workflow", ORIGIN, 8, "line 8 lacks field 'entity_id'", lines[7].decode()),
    ]


GOOD = b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"allocation","entity_id":"a-1","to":"x"}'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"allocation"',
            "line 2 is not valid JSON: unexpected end of data: line 1 column 56 (char 55)",
        ),
        (b"[]", "line 2 is not a JSON object"),
        (b'{"entity_kind":"allocation","entity_id":"a-1","to":"x"}', "line 2 lacks field 'ts'"),
        (
            b'{"ts":"noon","entity_kind":"allocation","entity_id":"a-1","to":"x"}',
            "line 2 has a field 'ts' that is not an RFC 3339 timestamp: 'noon' is not an RFC 3339 "
            "timestamp (expected e.g. 2026-11-22T13:11:19.123Z)",
        ),
        (
            b'{"ts":12,"entity_kind":"allocation","entity_id":"a-1","to":"x"}',
            "line 2 has a field 'ts' that is a int, not RFC 3339 text",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","entity_id":"a-1","to":"x"}',
            "line 2 lacks field 'entity_kind'",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"a","entity_id":"\xe9","to":"x"}',
            "line 2 is not valid UTF-8 (byte 0xe9 at offset 60)",
        ),
        (b" " * 1_048_577, "line 2 is longer than 1 MiB (1,048,576 bytes)"),
        (
            # Read (orjson reads 1,024 levels) but not writable (254): the store's insert
            # failed with TypeError, and the whole file with it.
            b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"a","entity_id":"b","to":"x",'
            b'"attributes":{"deep":' + b"[" * 300 + b"]" * 300 + b"}}",
            "line 2 has a field 'attributes' nested deeper than the 254 levels of objects and "
            "arrays a record may have",
        ),
    ],
)
def test_bad_lines_are_rejected_and_batch_mates_kept(line: bytes, reason: str) -> None:
    items = list(parse([GOOD, line, GOOD], ORIGIN))

    assert [type(item).__name__ for item in items] == ["Event", "Reject", "Event"]
    assert isinstance(items[1], Reject)
    assert (items[1].line_no, items[1].reason) == (2, reason)


def test_hostile_identifiers_are_dropped_not_stored() -> None:
    line = orjson.dumps(
        {
            "ts": "2026-11-22T13:11:19Z",
            "entity_kind": "allocation",
            "entity_id": "a'; DROP TABLE x; --",
            "to": "requested",
            "workflow_id": "wf 2",
        }
    )

    (item,) = parse([line], ORIGIN)

    assert isinstance(item, Event)
    assert (item.entity_id, item.allocation_id, item.workflow_id) == (
        "a'; DROP TABLE x; --",
        None,
        None,
    )
    assert item.attrs == {
        "rejected_ids": {
            "workflow_id": "holds ' ' (U+0020) at position 2; allowed: ASCII letters, digits "
            "and . _ : / @ + ~ -",
            "allocation_id": 'holds "\'" (U+0027) at position 1; allowed: ASCII letters, '
            "digits and . _ : / @ + ~ -",
        }
    }


WIDE = "123456789012345678901234567890"  # past 64 bits: orjson reads it as 1.2345678901234568e+29


@pytest.mark.parametrize(
    ("fields", "entity_id", "attrs"),
    [
        (
            f'"entity_id":"a-9","attributes":{{"job_seq":{WIDE},"n":-9223372036854775809}}',
            "a-9",
            {"job_seq": WIDE, "n": "-9223372036854775809"},
        ),
        (f'"entity_id":{WIDE},"step":[{WIDE}]', WIDE, {"step": [WIDE]}),
        # The ends of what orjson holds stay numbers, large floats floats.
        (
            '"entity_id":"a-9","u":18446744073709551615,"i":-9223372036854775808,"f":1.5e+300',
            "a-9",
            {"u": 18446744073709551615, "i": -9223372036854775808, "f": 1.5e300},
        ),
    ],
)
def test_integers_past_64_bits_keep_every_digit(
    fields: str, entity_id: str, attrs: dict[str, Any]
) -> None:
    line = b'{"ts":"2026-11-22T13:11:19Z","entity_kind":"job","to":"done",%s}' % fields.encode()

    (item,) = parse([line], ORIGIN)

    assert isinstance(item, Event)
    assert (item.entity_id, orjson.dumps(item.attrs)) == (entity_id, orjson.dumps(attrs))
    assert item.hash == content_hash("workflow", line)


def test_an_audit_row_with_an_integer_past_64_bits_in_its_jsonb() -> None:
    # psycopg reads jsonb with the stdlib's json, which keeps the integer whole.
    attributes = {"job_seq": int(WIDE), "small": 7}
    fields = {"ts": datetime(2026, 11, 22, 13, 11, 19, tzinfo=UTC), "entity_id": "a-9"}
    fields |= {"to_state": "requested", "attributes": attributes}

    event = _row_event(fields, "postgresql:audit", 1)

    assert isinstance(event, Event)
    assert event.attrs == {"job_seq": WIDE, "small": 7}
    assert event.raw == (
        f'{{"attributes":{{"job_seq":"{WIDE}","small":7}},"entity_id":"a-9",'
        '"entity_kind":"allocation","to_state":"requested","ts":"2026-11-22T13:11:19.000000000Z"}'
    )


@pytest.mark.parametrize(
    ("state", "occupancy", "level", "owner"),
    [
        ("provision_failed", None, "error", "workflow_state"),
        ("deprovision_failed", None, "error", None),
        ("error", "cleanup", "error", None),
        ("released", "cleanup", "warning", None),
        ("released", "free", "info", None),
    ],
)
def test_levels_and_owner(state: str, occupancy: str | None, level: str, owner: str | None) -> None:
    record: dict[str, Any] = {
        "ts": "2026-11-22T13:11:19Z",
        "entity_kind": "allocation",
        "entity_id": "a-1",
        "state_to": state,
    }
    if occupancy is not None:
        record["attributes"] = {"occupancy": occupancy}

    (item,) = parse([orjson.dumps(record)], ORIGIN)

    assert isinstance(item, Event)
    assert (item.level, item.owner_hint) == (level, owner)


@given(st.lists(st.binary(max_size=80), max_size=8))
def test_parse_never_raises(lines: list[bytes]) -> None:
    items = list(parse(lines, ORIGIN))

    assert len(items) <= len(lines)


_ATTRIBUTES = (
    st.fixed_dictionaries(
        {}, optional={"occupancy": st.just("cleanup") | ANY_JSON, "provider": ANY_JSON}
    )
    | ANY_JSON
)
#: Transitions with a readable time, a kind, an id and a new state; anything at all in every
#: other field the adapter reads.
TRANSITIONS = st.fixed_dictionaries(
    {
        "ts": TIMESTAMPS,
        "entity_kind": st.sampled_from(["allocation", "workflow", "node"])
        | st.text(min_size=1, max_size=8),
        "entity_id": st.text(min_size=1, max_size=8) | st.integers(-(2**63), 2**63 - 1),
        "to": st.sampled_from(["release_failed", "failed", "released"])
        | st.text(min_size=1, max_size=8),
    },
    optional={
        "from": ANY_JSON,
        "state": ANY_JSON,
        "attributes": _ATTRIBUTES,
        "attrs": _ATTRIBUTES,
        "allocation_id": ANY_JSON,
        "workflow_id": ANY_JSON,
        "node_id": ANY_JSON,
        "correlation_id": ANY_JSON,
        "service": ANY_JSON,
        "step": ANY_JSON,
    },
)


@given(st.lists(TRANSITIONS, min_size=1, max_size=4))
def test_every_transition_with_its_required_fields_becomes_an_event(
    records: list[dict[str, Any]],
) -> None:
    items = list(parse([orjson.dumps(record) for record in records], ORIGIN))

    assert [
        (i.ts_ns, i.entity_kind, i.entity_id, i.state_to) if isinstance(i, Event) else i
        for i in items
    ] == [(TIMES[r["ts"]], r["entity_kind"], str(r["entity_id"]), r["to"]) for r in records]


# -- the audit table (real PostgreSQL) ------------------------------------------------------

AUDIT_DDL = """
CREATE TABLE {table} (
    id bigserial PRIMARY KEY,
    ts timestamptz NOT NULL,
    entity_kind text,
    entity_id text,
    from_state text,
    to_state text,
    attributes jsonb,
    allocation_id text,
    workflow_id text,
    node_id text,
    correlation_id text
)
"""
AUDIT_ROWS = [
    (
        "2026-11-22T13:11:19.000001Z",
        "allocation",
        "a-9",
        None,
        "requested",
        None,
        None,
        None,
        None,
        "c-1f3a",
    ),
    (
        "2026-11-22T13:41:20Z",
        "allocation",
        "a-9",
        "releasing",
        "release_failed",
        '{"occupancy": "cleanup", "provider": "aap"}',
        "a-9",
        "wf-2",
        "n-17",
        None,
    ),
    (
        "2026-11-22T13:41:21Z",
        "allocation",
        "a-9",
        "release_failed",
        None,
        None,
        None,
        None,
        None,
        None,
    ),
]


@pytest.fixture
def audit_table(postgres_dsn: str) -> Iterator[str]:
    """A fresh audit table holding AUDIT_ROWS; its name."""
    table = f"audit_{uuid.uuid4().hex[:12]}"
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(AUDIT_DDL.format(table=table))
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} (ts, entity_kind, entity_id, from_state, to_state, "  # noqa: S608
                "attributes, allocation_id, workflow_id, node_id, correlation_id) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                AUDIT_ROWS,
            )
    yield table
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def row_count(dsn: str, table: str) -> int:
    with connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608
    return int(row[0]) if row else -1


@pytest.mark.parametrize("year", [1600, 2300])
def test_an_audit_row_the_store_cannot_date_is_rejected(year: int) -> None:
    # timestamptz spans years 4713 BC to 294276 AD; the store's nanoseconds 1677 to 2262.
    fields = {"ts": datetime(year, 1, 1, tzinfo=UTC), "entity_id": "a-9", "to_state": "requested"}
    reject = _row_event(fields, "postgresql:audit", 7)
    assert isinstance(reject, Reject)
    assert (reject.line_no, reject.reason) == (
        7,
        "row 7 has a field 'ts' outside the years 1677 to 2262 that nanoseconds since 1970 "
        "can hold in 64 bits",
    )


def test_an_audit_row_nested_past_what_can_be_stored_is_rejected() -> None:
    # psycopg reads jsonb with the stdlib's parser, which reads deeper than orjson writes.
    deep: list[Any] = []
    for _ in range(300):
        deep = [deep]
    fields = {"ts": datetime(2026, 11, 22, tzinfo=UTC), "entity_id": "a-9", "to_state": "x"}
    reject = _row_event({**fields, "attributes": {"deep": deep}}, "postgresql:audit", 7)
    assert reject == Reject(
        "workflow",
        "postgresql:audit",
        7,
        "row 7 has a field 'attributes' nested deeper than the 254 levels of objects and "
        "arrays a record may have",
        "",
    )


@pytest.mark.integration
def test_read_audit_table(postgres_dsn: str, audit_table: str) -> None:
    items = list(read_audit_table(postgres_dsn, table=audit_table))

    origin = f"postgresql:{audit_table}"
    raw_1 = (
        b'{"allocation_id":null,"attributes":null,"correlation_id":"c-1f3a",'
        b'"entity_id":"a-9","entity_kind":"allocation","from_state":null,"node_id":null,'
        b'"to_state":"requested","ts":"2026-11-22T13:11:19.000001000Z","workflow_id":null}'
    )
    raw_2 = (
        b'{"allocation_id":"a-9","attributes":{"occupancy":"cleanup","provider":"aap"},'
        b'"correlation_id":null,"entity_id":"a-9","entity_kind":"allocation",'
        b'"from_state":"releasing","node_id":"n-17","to_state":"release_failed",'
        b'"ts":"2026-11-22T13:41:20.000000000Z","workflow_id":"wf-2"}'
    )
    assert items[:2] == [
        transition(
            raw_1,
            origin,
            service=None,
            ts_ns=T0 + 1000,
            message="allocation a-9: requested",
            correlation_id="c-1f3a",
            allocation_id="a-9",
            entity_kind="allocation",
            entity_id="a-9",
            state_to="requested",
        ),
        transition(
            raw_2,
            origin,
            service=None,
            ts_ns=T0 + 1801 * S,
            level="error",
            message="allocation a-9: releasing → release_failed (occupancy=cleanup)",
            owner_hint="workflow_state",
            node_id="n-17",
            allocation_id="a-9",
            workflow_id="wf-2",
            entity_kind="allocation",
            entity_id="a-9",
            state_from="releasing",
            state_to="release_failed",
            attrs={"occupancy": "cleanup", "provider": "aap"},
        ),
    ]
    reject = items[2]
    assert isinstance(reject, Reject)
    assert (reject.origin, reject.line_no, reject.reason) == (
        origin,
        3,
        "row 3 lacks field 'to' (also read as to_state, state_to, state)",
    )
    # Reading again gives the same hashes: re-ingesting adds nothing.
    again = list(read_audit_table(postgres_dsn, table=audit_table))
    assert [getattr(i, "hash", None) for i in again] == [getattr(i, "hash", None) for i in items]


@pytest.mark.integration
def test_an_integer_past_64_bits_in_jsonb_keeps_every_digit(postgres_dsn: str) -> None:
    table = f"audit_{uuid.uuid4().hex[:12]}"
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(AUDIT_DDL.format(table=table))
        conn.execute(
            f"INSERT INTO {table} (ts, entity_kind, entity_id, to_state, attributes) "  # noqa: S608
            "VALUES ('2026-11-22T13:11:19Z', 'allocation', 'a-9', 'requested', "
            f"'{{\"job_seq\": {WIDE}}}')"
        )
    try:
        (item,) = read_audit_table(postgres_dsn, table=table)
    finally:
        with connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table}")

    assert isinstance(item, Event)
    assert item.attrs == {"job_seq": WIDE}


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The statements the audit reader sends PostgreSQL, as (SQL text, parameters)."""
    psycopg = pytest.importorskip("psycopg")
    sent: list[tuple[str, Any]] = []
    execute = psycopg.ServerCursor.execute

    def recording(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((query.as_string(cursor.connection), params))
        return execute(cursor, query, params, **kwargs)

    monkeypatch.setattr(psycopg.ServerCursor, "execute", recording)
    return sent


_SELECT_AUDIT = (
    'SELECT "ts", "entity_kind", "entity_id", "from_state", "to_state", "attributes", '
    '"allocation_id", "workflow_id", "node_id", "correlation_id" FROM "{table}"'
)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("since_ns", "bound", "states"),
    [
        # inclusive, to the microsecond
        (
            T0 + 1000,
            datetime(2026, 11, 22, 13, 11, 19, 1, tzinfo=UTC),
            ["requested", "release_failed"],
        ),
        # rounded up: nothing earlier than asked
        (T0 + 1001, datetime(2026, 11, 22, 13, 11, 19, 2, tzinfo=UTC), ["release_failed"]),
        (T0 + 1801 * S, datetime(2026, 11, 22, 13, 41, 20, tzinfo=UTC), ["release_failed"]),
        (T0 + 1900 * S, datetime(2026, 11, 22, 13, 42, 59, tzinfo=UTC), []),
    ],
)
def test_since_is_bound_and_inclusive(
    postgres_dsn: str,
    audit_table: str,
    executed: list[tuple[str, Any]],
    since_ns: int,
    bound: datetime,
    states: list[str],
) -> None:
    items = read_audit_table(postgres_dsn, table=audit_table, since_ns=since_ns)

    assert [i.state_to for i in items if isinstance(i, Event)] == states
    # The instant travels as a parameter; the SQL text holds a placeholder, never the value.
    assert executed == [
        (_SELECT_AUDIT.format(table=audit_table) + ' WHERE "ts" >= %s ORDER BY "ts"', (bound,))
    ]


@pytest.mark.integration
def test_without_since_nothing_is_bound(
    postgres_dsn: str, audit_table: str, executed: list[tuple[str, Any]]
) -> None:
    assert len(list(read_audit_table(postgres_dsn, table=audit_table))) == len(AUDIT_ROWS)
    assert executed == [(_SELECT_AUDIT.format(table=audit_table) + ' ORDER BY "ts"', ())]


@pytest.fixture
def scratch_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh, empty schema (lower case); its name. Dropped with everything in it."""
    schema = f"s_{uuid.uuid4().hex[:8]}"
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield schema
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


#: Every audit column absent: a row names only what it maps.
_NO_COLUMNS: dict[str, str | None] = dict.fromkeys(AUDIT_COLUMNS)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("statements", "table", "columns", "since_ns", "messages"),
    [
        pytest.param(
            [
                'CREATE TABLE {s}."Audit" (ts timestamptz, entity_id text, to_state text)',
                "CREATE TABLE {s}.audit (ts timestamptz, entity_id text, to_state text)",
                """INSERT INTO {s}."Audit" VALUES ('2026-11-22T13:11:19Z', 'a-1', 'requested')""",
                "INSERT INTO {s}.audit VALUES ('2026-11-22T13:11:19Z', 'a-2', 'twin')",
            ],
            "{s}.Audit",
            {**_NO_COLUMNS, "ts": "ts", "entity_id": "entity_id", "to_state": "to_state"},
            None,
            ["allocation a-1: requested"],
            id="mixed-case-table-beside-its-lower-case-twin",
        ),
        pytest.param(
            [
                'CREATE TABLE {s}.history ("Changed_At" timestamptz, "user" text, "from" text, '
                '"order" text, "select" jsonb)',
                "INSERT INTO {s}.history VALUES "
                "('2026-11-22T13:11:21Z', 'a-3', 'provisioning', 'provision_failed', "
                """'{"provider": "eda"}'), """
                "('2026-11-22T13:11:20Z', 'a-3', 'requested', 'provisioning', NULL), "
                "('2026-11-22T13:11:19Z', 'a-3', NULL, 'requested', NULL)",
            ],
            "{s}.history",
            {
                **_NO_COLUMNS,
                "ts": "Changed_At",
                "entity_id": "user",
                "from_state": "from",
                "to_state": "order",
                "attributes": "select",
            },
            T0 + S,
            [
                "allocation a-3: requested → provisioning",
                "allocation a-3: provisioning → provision_failed",
            ],
            id="reserved-word-and-mixed-case-columns",
        ),
    ],
)
def test_names_that_need_quoting_read_what_they_name(
    postgres_dsn: str,
    scratch_schema: str,
    statements: list[str],
    table: str,
    columns: dict[str, str | None],
    since_ns: int | None,
    messages: list[str],
) -> None:
    # Legal to the name check, yet unquoted they fold to lower case (another table) or are
    # keywords (a syntax error): only quoting reads them.
    with connect(postgres_dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.replace("{s}", scratch_schema))

    items = list(
        read_audit_table(
            postgres_dsn,
            table=table.replace("{s}", scratch_schema),
            since_ns=since_ns,
            columns=columns,
        )
    )

    assert [i.message if isinstance(i, Event) else i for i in items] == messages


@pytest.mark.integration
def test_custom_column_names_and_schema(postgres_dsn: str) -> None:
    schema = f"s_{uuid.uuid4().hex[:8]}"
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            f"CREATE TABLE {schema}.history (changed_at timestamp, alloc text, "
            "old_state text, new_state text, extra jsonb)"
        )
        conn.execute(
            f"INSERT INTO {schema}.history VALUES "  # noqa: S608
            "('2026-11-22 13:11:19.5', 'a-3', 'provisioning', 'provision_failed', "
            """'{"provider": "eda"}')"""
        )
    try:
        (item,) = read_audit_table(
            postgres_dsn,
            table=f"{schema}.history",
            columns={
                "ts": "changed_at",
                "entity_kind": None,
                "entity_id": "alloc",
                "from_state": "old_state",
                "to_state": "new_state",
                "attributes": "extra",
                "allocation_id": None,
                "workflow_id": None,
                "node_id": None,
                "correlation_id": None,
            },
        )
    finally:
        with connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    assert isinstance(item, Event)
    assert (item.ts_ns, item.entity_kind, item.allocation_id, item.message, item.attrs) == (
        T0 + 500_000_000,  # a timestamp without zone is read as UTC
        "allocation",
        "a-3",
        "allocation a-3: provisioning → provision_failed",
        {"provider": "eda"},
    )
    assert item.origin == f"postgresql:{schema}.history"


@pytest.mark.integration
@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
def test_a_timestamp_without_zone_is_utc_when_read_and_when_filtered(
    postgres_dsn: str, scratch_schema: str, zone: str
) -> None:
    """Whatever the server's or the DSN's TimeZone: rows are read as UTC, so ``since_ns``
    must compare them as UTC too (a Tokyo session dropped the row at exactly ``since``, a New
    York one let in rows hours earlier)."""
    with connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {scratch_schema}.history "
            "(ts timestamp, entity_id text, from_state text, to_state text)"
        )
        conn.execute(
            f"INSERT INTO {scratch_schema}.history VALUES "  # noqa: S608 - a test's own schema
            "('2026-11-22 09:11:19', 'a-1', 'active', 'releasing'), "
            "('2026-11-22 13:11:19', 'a-1', 'releasing', 'release_failed'), "
            "('2026-11-22 18:11:19', 'a-1', 'release_failed', 'released')"
        )
    dsn = f"{postgres_dsn} options='-c TimeZone={zone}'"
    columns = {**_NO_COLUMNS, "ts": "ts", "entity_id": "entity_id"}
    columns.update(from_state="from_state", to_state="to_state")

    items = list(
        read_audit_table(dsn, table=f"{scratch_schema}.history", since_ns=T0, columns=columns)
    )

    assert [(i.ts_ns, i.state_to) for i in items if isinstance(i, Event)] == [
        (T0, "release_failed"),
        (T0 + 5 * 3600 * S, "released"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": "allocation_audit; DROP TABLE allocation_audit"}, "is not a plain SQL name"),
        ({"table": 'allocation_audit" ; DROP TABLE allocation_audit; --'}, "not a plain SQL"),
        ({"table": "a.b.c"}, "is not a plain SQL name"),
        ({"table": ""}, "is not a plain SQL name"),
        ({"since_ns": "0; DROP TABLE allocation_audit"}, "since_ns must be an integer"),
        ({"since_ns": 1.5}, "since_ns must be an integer"),
        ({"since_ns": 10**30}, "outside the years 1 to 9999"),
        ({"columns": {"ts": "ts) FROM pg_shadow --"}}, "column for ts 'ts) FROM pg_shadow --'"),
        ({"columns": {"tenant": "t"}}, "unknown audit column key 'tenant'"),
        ({"columns": {"ts": None}}, "needs a timestamp column"),
    ],
)
def test_unsafe_arguments_are_refused_before_connecting(
    kwargs: dict[str, Any], message: str
) -> None:
    # The DSN points nowhere: a QueryError proves nothing was sent.
    with pytest.raises(QueryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_audit_table("host=127.0.0.1 port=1 dbname=none", **kwargs)


@pytest.mark.integration
def test_injection_attempts_leave_the_table_alone(
    postgres_dsn: str,
    audit_table: str,
) -> None:
    with pytest.raises(QueryError):
        read_audit_table(postgres_dsn, table=f"{audit_table}; DROP TABLE {audit_table}")
    with pytest.raises(QueryError):
        read_audit_table(postgres_dsn, table=audit_table, since_ns=f"0; DROP TABLE {audit_table}")  # type: ignore[arg-type]
    # A quoted identifier that merely looks hostile names a table that does not exist.
    with pytest.raises(SourceError, match="does not exist"):
        list(read_audit_table(postgres_dsn, table=f"{audit_table}$x"))
    # Quoted, the upper-case name is not the table (unquoted, it would fold to it).
    with pytest.raises(SourceError, match="does not exist"):
        list(read_audit_table(postgres_dsn, table=audit_table.upper()))

    assert row_count(postgres_dsn, audit_table) == len(AUDIT_ROWS)


@pytest.mark.integration
def test_unreachable_database_is_a_source_error_without_the_password() -> None:
    dsn = f"host=127.0.0.1 port={free_port()} user=u password=s3cret dbname=d connect_timeout=2"

    with pytest.raises(SourceError, match="cannot read the audit table") as caught:
        list(read_audit_table(dsn))

    assert "s3cret" not in str(caught.value)


def test_missing_psycopg_is_a_source_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes "import psycopg" fail

    rows = read_audit_table("host=127.0.0.1 port=1")

    with pytest.raises(SourceError, match=r"needs psycopg: pip install 'psycopg\[binary\]'"):
        next(rows)
