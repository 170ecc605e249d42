from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_logging.context._propagation import sql_comment_for
from correlator.model import LEVELS, MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources._sqlcommenter import sqlcommenter_tags
from correlator.sources.postgres import CSV_COLUMNS, parse

SAMPLES = Path(__file__).parents[1] / "samples" / "postgres"
ORIGIN = "postgresql.log"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
MS = 1_000_000
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def read(*lines: bytes) -> list[Event | Reject]:
    return list(parse(list(lines), ORIGIN))


def pg_event(raw: bytes, **fields: Any) -> Event:
    fields.setdefault("service", "postgres")
    return Event(
        layer="db",
        source="postgres",
        origin=ORIGIN,
        raw=raw.decode(),
        hash=content_hash("postgres", raw),
        **fields,
    )


def sample(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().splitlines()


LOCK_TIMEOUT_CSV = (
    b'2026-11-22 13:11:19.123 UTC,"api","alloc",4711,"127.0.0.1:53422",6740a1b2.1267,3,'
    b'"UPDATE waiting",2026-11-22 13:10:02 UTC,5/123,0,ERROR,55P03,"canceling statement due to '
    b'lock timeout",,,,,"while updating tuple (0,7) in relation ""allocations""","UPDATE '
    b"allocations SET state = 'release_failed'\nWHERE id = $1 /*allocation_id='a-9',"
    b"correlation_id='c-1',traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'"
    b'*/",,,"api","client backend",,-6573218402930187777'
)

LOCK_TIMEOUT_ATTRS = {
    "format": "csvlog",
    "error_severity": "ERROR",
    "sqlstate": "55P03",
    "sqlstate_name": "lock_not_available",
    "pid": 4711,
    "line_num": 3,
    "query_id": -6573218402930187777,
    "user": "api",
    "dbname": "alloc",
    "remote_host": "127.0.0.1:53422",
    "session_id": "6740a1b2.1267",
    "command_tag": "UPDATE waiting",
    "vxid": "5/123",
    "application_name": "api",
    "backend_type": "client backend",
    "context": 'while updating tuple (0,7) in relation "allocations"',
    "statement": "UPDATE allocations SET state = 'release_failed'\nWHERE id = $1 "
    "/*allocation_id='a-9',correlation_id='c-1',"
    "traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/",
}


def test_csvlog_sample_file() -> None:
    items = list(parse(sample("postgresql.csv"), ORIGIN))
    assert all(isinstance(item, Event) for item in items)
    assert items[1] == pg_event(
        LOCK_TIMEOUT_CSV,
        ts_ns=T0 + 123 * MS,
        service="api",
        message="lock timeout (SQLSTATE 55P03): canceling statement due to lock timeout",
        level="error",
        correlation_id="c-1",
        allocation_id="a-9",
        trace_id=TRACE,
        span_id=SPAN,
        owner_hint="db",
        error_type="55P03",
        attrs=LOCK_TIMEOUT_ATTRS,
    )
    summary = [
        (
            e.ts_ns - T0,
            e.service,
            e.level,
            e.message,
            e.owner_hint,
            e.error_type,
            e.correlation_id,
            e.allocation_id,
            e.workflow_id,
            e.node_id,
            e.duration_s,
        )
        for e in items
        if isinstance(e, Event)
    ]
    assert summary == [
        (
            -999 * MS,
            "postgres",
            "info",
            "database system is ready to accept connections",
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ),
        (
            123 * MS,
            "api",
            "error",
            "lock timeout (SQLSTATE 55P03): canceling statement due to lock timeout",
            "db",
            "55P03",
            "c-1",
            "a-9",
            None,
            None,
            None,
        ),
        (
            1456 * MS,
            "worker",
            "error",
            "deadlock (SQLSTATE 40P01): deadlock detected; Process 4712 waits for ShareLock on "
            "transaction 1234; blocked by process 4711.",
            "db",
            "40P01",
            "c-2",
            None,
            "wf/7",
            "n-17",
            None,
        ),
        (
            2002 * MS,
            "psql",
            "error",
            "statement timeout (SQLSTATE 57014): canceling statement due to statement timeout",
            "db",
            "57014",
            None,
            None,
            None,
            None,
            None,
        ),
        (
            2789 * MS,
            "postgres",
            "critical",
            'FATAL 28P01 (invalid_password): password authentication failed for user "api"',
            "db",
            "28P01",
            None,
            None,
            None,
            None,
            None,
        ),
        (
            3500 * MS,
            "api",
            "info",
            "duration: 1503.221 ms statement: SELECT id FROM allocations WHERE occupancy = "
            "'cleanup' /*allocation_id='a-9',correlation_id='c-1'*/",
            None,
            None,
            "c-1",
            "a-9",
            None,
            None,
            1.503221,
        ),
    ]


def test_jsonlog_matches_csvlog() -> None:
    """The same records written as jsonlog and as csvlog read the same (PostgreSQL 16)."""
    from_csv = list(parse(sample("postgresql.csv"), ORIGIN))
    from_json = list(parse(sample("postgresql.json"), ORIGIN))
    assert len(from_csv) == len(from_json) == 6

    def comparable(item: Event | Reject) -> dict[str, Any]:
        assert isinstance(item, Event)
        fields = {name: getattr(item, name) for name in item.__slots__}
        del fields["raw"], fields["hash"]
        fields["attrs"] = dict(item.attrs, format=None)
        if fields["attrs"].get("sqlstate") == "00000":  # jsonlog leaves a zero SQLSTATE out
            del fields["attrs"]["sqlstate"]
        return fields

    assert [comparable(e) for e in from_json] == [comparable(e) for e in from_csv]
    lock = from_json[1]
    assert isinstance(lock, Event)
    assert lock.attrs["format"] == "jsonlog"
    assert lock.attrs["remote_host"] == "127.0.0.1:53422"


PG12 = (
    b'2026-11-22 13:11:19.000 UTC,"api","alloc",77,"10.0.0.3:40000",6740a1b2.4d,1,"INSERT",'
    b'2026-11-22 13:11:18 UTC,3/9,501,ERROR,23505,"duplicate key value violates unique '
    b'constraint ""allocations_pkey""","Key (id)=(a-9) already exists.",,,,,"INSERT INTO '
    b'allocations (id) VALUES (\'a-9\')",,"_bt_check_unique, nbtinsert.c:664","api"'
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            PG12,
            pg_event(
                PG12,
                ts_ns=T0,
                service="api",
                message="ERROR 23505 (unique_violation): duplicate key value violates unique "
                'constraint "allocations_pkey"',
                level="error",
                owner_hint="db",
                error_type="23505",
                attrs={
                    "format": "csvlog",
                    "error_severity": "ERROR",
                    "sqlstate": "23505",
                    "sqlstate_name": "unique_violation",
                    "pid": 77,
                    "line_num": 1,
                    "txid": 501,
                    "user": "api",
                    "dbname": "alloc",
                    "remote_host": "10.0.0.3:40000",
                    "session_id": "6740a1b2.4d",
                    "command_tag": "INSERT",
                    "vxid": "3/9",
                    "application_name": "api",
                    "detail": "Key (id)=(a-9) already exists.",
                    "statement": "INSERT INTO allocations (id) VALUES ('a-9')",
                    "location": "_bt_check_unique, nbtinsert.c:664",
                },
            ),
            id="pg12-23-columns-verbose-location",
        ),
        pytest.param(
            PG12 + b',"client backend"',
            pg_event(
                PG12 + b',"client backend"',
                ts_ns=T0,
                service="api",
                message="ERROR 23505 (unique_violation): duplicate key value violates unique "
                'constraint "allocations_pkey"',
                level="error",
                owner_hint="db",
                error_type="23505",
                attrs={
                    "format": "csvlog",
                    "error_severity": "ERROR",
                    "sqlstate": "23505",
                    "sqlstate_name": "unique_violation",
                    "pid": 77,
                    "line_num": 1,
                    "txid": 501,
                    "user": "api",
                    "dbname": "alloc",
                    "remote_host": "10.0.0.3:40000",
                    "session_id": "6740a1b2.4d",
                    "command_tag": "INSERT",
                    "vxid": "3/9",
                    "application_name": "api",
                    "backend_type": "client backend",
                    "detail": "Key (id)=(a-9) already exists.",
                    "statement": "INSERT INTO allocations (id) VALUES ('a-9')",
                    "location": "_bt_check_unique, nbtinsert.c:664",
                },
            ),
            id="pg13-24-columns",
        ),
    ],
)
def test_older_csvlog_widths(line: bytes, expected: Event) -> None:
    assert read(line) == [expected]


def json_line(**fields: Any) -> bytes:
    base: dict[str, Any] = {"timestamp": "2026-11-22 13:11:19.000 UTC", "pid": 42}
    return orjson.dumps(base | fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"pid": 4711, "query_id": -9223372036854775808, "txid": 0},
            {"pid": 4711, "query_id": -(2**63)},
        ),
        ({"pid": "\u00b2", "query_id": 9223372036854775808, "txid": "--5"}, {}),
        (
            {"pid": "4711", "line_num": "12", "leader_pid": "4700"},
            {"pid": 4711, "line_num": 12, "leader_pid": 4700},
        ),
    ],
)
def test_integers_fit_a_bigint_or_are_left_out(
    fields: dict[str, Any], expected: dict[str, int]
) -> None:
    (item,) = read(json_line(**fields))
    assert isinstance(item, Event)
    found = {
        key: item.attrs[key]
        for key in ("pid", "line_num", "leader_pid", "txid", "query_id")
        if key in item.attrs
    }
    assert found == expected


@pytest.mark.parametrize(
    ("fields", "level", "owner_hint", "error_type"),
    [
        ({"error_severity": "PANIC", "state_code": "XX000"}, "critical", "db", "XX000"),
        ({"error_severity": "FATAL", "state_code": "57P01"}, "critical", "db", "57P01"),
        ({"error_severity": "ERROR", "state_code": "42P01"}, "error", "db", "42P01"),
        ({"error_severity": "ERROR", "state_code": "02000"}, "error", None, "02000"),
        ({"error_severity": "WARNING", "state_code": "01000"}, "warning", None, None),
        ({"error_severity": "WARNING", "state_code": "25P01"}, "warning", None, None),
        ({"error_severity": "NOTICE", "state_code": "00000"}, "info", None, None),
        ({"error_severity": "INFO"}, "info", None, None),
        ({"error_severity": "LOG"}, "info", None, None),
        ({"error_severity": "DEBUG3"}, "debug", None, None),
        ({}, "info", None, None),
        # csvlog translates severities (lc_messages = 'de_DE'): the SQLSTATE still tells.
        ({"error_severity": "FEHLER", "state_code": "23505"}, "error", "db", "23505"),
        ({"error_severity": "HINWEIS", "state_code": "00000"}, "info", None, None),
    ],
)
def test_levels_and_owner(
    fields: dict[str, str], level: str, owner_hint: str | None, error_type: str | None
) -> None:
    (item,) = read(json_line(message="m", **fields))
    assert isinstance(item, Event)
    assert (item.level, item.owner_hint, item.error_type) == (level, owner_hint, error_type)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"application_name": "api"},
            ("api", {}, None),
            id="plain-service",
        ),
        pytest.param(
            {"application_name": "api/correlation_id=c-1,allocation_id=a-9"},
            ("api", {"correlation_id": "c-1", "allocation_id": "a-9"}, None),
            id="service-and-ids",
        ),
        pytest.param(
            {
                "application_name": "api/correlation_id=c-1",
                "statement": "SELECT 1 /*correlation_id='c-2'*/",
            },
            ("api", {"correlation_id": "c-2"}, None),
            id="statement-comment-wins",
        ),
        pytest.param(
            {"application_name": "PostgreSQL JDBC Driver"},
            ("postgres", {}, None),
            id="not-the-convention",
        ),
        pytest.param(
            {"application_name": "api/request=7"},
            ("postgres", {}, None),
            id="unknown-key",
        ),
        pytest.param(
            {"application_name": "api/correlation_id=c-1,allocation_id=" + "a" * 31},
            (
                "api",
                {"correlation_id": "c-1"},
                {
                    "application_name.allocation_id": "may be cut: application_name is 63 "
                    "bytes, the most PostgreSQL keeps"
                },
            ),
            id="63-bytes-last-value-refused",
        ),
        pytest.param(
            {"application_name": "api/node_id=", "message": "x"},
            (
                "api",
                {},
                {"application_name.node_id": "is empty (leave an unknown identifier out instead)"},
            ),
            id="empty-value",
        ),
        pytest.param(
            {
                "statement": "SELECT 1 /*allocation_id='a%27%3B%20DROP',correlation_id='c-1',"
                "traceparent='00-00000000000000000000000000000000-00f067aa0ba902b7-01'*/"
            },
            (
                "postgres",
                {"correlation_id": "c-1"},
                {
                    "allocation_id": 'holds "\'" (U+0027) at position 1; allowed: ASCII '
                    "letters, digits and . _ : / @ + ~ -",
                    "traceparent": "traceparent header: trace_id must be 32 lower-case hex "
                    "digits, not all zero (W3C trace-context)",
                },
            ),
            id="hostile-comment-values",
        ),
        pytest.param(
            {"message": "statement: SELECT 1 /*correlation_id='%ff'*/"},
            (
                "postgres",
                {},
                {
                    "correlation_id": "holds '%' (U+0025) at position 0; allowed: ASCII "
                    "letters, digits and . _ : / @ + ~ -"
                },
            ),
            id="undecodable-escape-kept-and-refused",
        ),
    ],
)
def test_identifiers(
    fields: dict[str, str], expected: tuple[str, dict[str, str], dict[str, str] | None]
) -> None:
    (item,) = read(json_line(error_severity="LOG", **fields))
    assert isinstance(item, Event)
    ids = {
        key: getattr(item, key)
        for key in ("node_id", "correlation_id", "allocation_id", "workflow_id", "trace_id")
        if getattr(item, key) is not None
    }
    assert (item.service, ids, item.attrs.get("rejected_ids")) == expected


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("SELECT 1", {}),
        ("SELECT 1 /* plain comment */", {}),
        (
            "SELECT * FROM foo /*action='%2Fparam*d',controller='index',framework='spring',"
            "traceparent='00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01',"
            "tracestate='congo%3Dt61rcWkgMzE%2Crojo%3D00f067aa0ba902b7'*/",
            {
                "action": "/param*d",
                "controller": "index",
                "framework": "spring",
                "traceparent": "00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01",
                "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
            },
        ),
        ("SELECT 1 /*route='it\\'s',key%20name='v'*/", {"route": "it's", "key name": "v"}),
        (
            "/*correlation_id='c-0'*/ SELECT 1 /*not='closed' junk*/ /*correlation_id='c-1'*/",
            {"correlation_id": "c-1"},
        ),
        ("SELECT 1 /*correlation_id='c-1'", {}),
        ("SELECT 1 /*correlation_id=c-1*/", {}),
    ],
)
def test_sqlcommenter_tags(text: str, tags: dict[str, str]) -> None:
    assert sqlcommenter_tags(text) == tags


def test_jsonlog_values_of_other_types_are_ignored() -> None:
    (item,) = read(json_line(message="m", user=True, dbname=["x"], detail={"a": 1}, hint=""))
    assert isinstance(item, Event)
    assert item.attrs == {"format": "jsonlog", "error_severity": "LOG", "pid": 42}


@pytest.mark.parametrize(
    ("fields", "location"),
    [
        (
            {"func_name": "_bt_check_unique", "file_name": "nbtinsert.c", "file_line_num": 664},
            "_bt_check_unique, nbtinsert.c:664",
        ),
        ({"file_name": "nbtinsert.c", "file_line_num": 664}, "nbtinsert.c:664"),
        ({"func_name": "_bt_check_unique"}, None),
    ],
)
def test_jsonlog_verbose_location(fields: dict[str, Any], location: str | None) -> None:
    (item,) = read(json_line(message="m", **fields))
    assert isinstance(item, Event)
    assert item.attrs.get("location") == location


def test_sql_tags_kept_in_attrs() -> None:
    statement = "SELECT 1 /*controller='allocations',correlation_id='c-1',route='%2Fv1'*/"
    (item,) = read(json_line(statement=statement))
    assert isinstance(item, Event)
    assert item.attrs["sql_tags"] == {"controller": "allocations", "route": "/v1"}


IDS = st.from_regex(r"[A-Za-z0-9._:/@+~-]{1,40}", fullmatch=True)


@given(
    ids=st.fixed_dictionaries(
        {},
        optional={
            "node_id": IDS,
            "node_instance_id": IDS,
            "correlation_id": IDS,
            "allocation_id": IDS,
            "workflow_id": IDS,
        },
    ),
    trace=st.one_of(
        st.none(),
        st.tuples(
            st.from_regex(r"[0-9a-f]{32}", fullmatch=True).filter(lambda v: v != "0" * 32),
            st.from_regex(r"[0-9a-f]{16}", fullmatch=True).filter(lambda v: v != "0" * 16),
        ),
    ),
)
def test_sqlcommenter_round_trip(ids: dict[str, str], trace: tuple[str, str] | None) -> None:
    carried = dict(ids)
    if trace is not None:
        carried["trace_id"], carried["span_id"] = trace
    statement = f"UPDATE allocations SET state = $1 {sql_comment_for(carried)}"  # noqa: S608
    (item,) = read(json_line(error_severity="LOG", statement=statement))
    assert isinstance(item, Event)
    found = {key: getattr(item, key) for key in carried}
    assert found == carried
    assert "rejected_ids" not in item.attrs


def test_rejects_name_the_line_and_keep_batch_mates() -> None:
    good = sample("postgresql.csv")[0]
    lines = [
        good,
        b"x" * (MAX_LINE_BYTES + 1),
        good.replace(b"ready", b"r\xe9ady"),
        b"",
        b"2026-11-22 13:11:19.123 UTC [4711] LOG:  database system is ready to accept connections",
        b'{"timestamp":"2026-11-22 13:11:19.123 UTC","message":',
        b'["2026-11-22 13:11:19.123 UTC"]',
        b'{"pid":4711,"message":"no time"}',
        b'{"timestamp":"2026-11-22 13:11:19.123 CST","message":"ambiguous"}',
        good.replace(b'"database system', b'"database" "system'),
        good,
    ]
    items = read(*lines)
    rejects = [item for item in items if isinstance(item, Reject)]
    assert [(r.line_no, r.reason) for r in rejects] == [
        (2, "line 2 is longer than 1 MiB (1,048,576 bytes)"),
        (3, "line 3 is not valid UTF-8 (byte 0xe9 at offset 111)"),
        (
            5,
            "line 5 is not a csvlog record: it has 1 fields; csvlog writes 23 (PostgreSQL 12), "
            "24 (PostgreSQL 13), 26 (PostgreSQL 14+)",
        ),
        (6, "line 6 is not valid JSON: unexpected end of data: line 1 column 54 (char 53)"),
        (7, "line 7 is a JSON list, not an object"),
        (8, "line 8 has no 'timestamp' field"),
        (
            9,
            "line 9 has an unreadable 'timestamp': '2026-11-22 13:11:19.123 CST': time zone "
            "'CST' is ambiguous; set log_timezone to UTC or a numeric offset",
        ),
        (10, "line 10 is not a valid csvlog record: ',' expected after '\"'"),
    ]
    assert all(r.source == "postgres" and r.origin == ORIGIN for r in rejects)
    assert rejects[1].excerpt.startswith("2026-11-22 13:11:18.001 UTC,,,4700,")
    events = [item for item in items if isinstance(item, Event)]
    assert [e.raw for e in events] == [good.decode(), good.decode()]


def test_multi_line_record_with_a_bad_line() -> None:
    lines = sample("postgresql.csv")
    second = lines[1:3]  # the lock-timeout record spans two lines
    assert b"\n".join(second) == LOCK_TIMEOUT_CSV
    damaged = [second[0], second[1].replace(b"WHERE", b"WH\xffERE"), lines[0]]
    items = read(*damaged)
    assert len(items) == 2
    reject, after = items
    assert isinstance(reject, Reject)
    assert (reject.line_no, reject.reason) == (
        1,
        "line 1 starts a csvlog record whose line 2 is not valid UTF-8 (byte 0xff at offset 2)",
    )
    assert isinstance(after, Event)


@pytest.mark.parametrize(
    ("follower", "reason"),
    [
        pytest.param(
            [
                b"2026-11-22 13:11:25.000 UTC,,,4700,,6740a1a0.125c,2,,2026-11-22 13:10:00 UTC,,0,"
                b'LOG,00000,"checkpoint starting: time",,,,,,,,,"","checkpointer",,0'
            ],
            "line 1 starts a csvlog record that has an unterminated quoted field (a new record "
            "starts at line 3)",
            id="next-csv-record",
        ),
        pytest.param(
            [b'{"timestamp":"2026-11-22 13:11:25.000 UTC","message":"checkpoint starting: time"}'],
            "line 1 starts a csvlog record that has an unterminated quoted field (a new record "
            "starts at line 3)",
            id="next-json-record",
        ),
        pytest.param(
            [],
            "line 1 starts a csvlog record that is truncated: the input ends inside a quoted field",
            id="end-of-input",
        ),
    ],
)
def test_unterminated_record(follower: list[bytes], reason: str) -> None:
    lines = LOCK_TIMEOUT_CSV.split(b"\n")
    cut = [lines[0], lines[1][:40]]  # the statement's closing quote never comes
    items = read(*cut, *follower)
    reject = items[0]
    assert isinstance(reject, Reject)
    assert (reject.line_no, reject.reason) == (1, reason)
    assert reject.excerpt == lines[0].decode()[:200]
    assert [type(item) for item in items[1:]] == [Event] * len(follower)


def test_record_over_the_size_limit() -> None:
    head = LOCK_TIMEOUT_CSV.split(b"\n")[0]
    filler = [b"-- " + b"x" * 1000] * 1100  # a 1.1 MB statement, in lines of 1,003 bytes
    tail = LOCK_TIMEOUT_CSV.split(b"\n")[1]
    items = read(head, *filler, tail, sample("postgresql.csv")[0])
    assert len(items) == 2
    reject = items[0]
    assert isinstance(reject, Reject)
    assert reject.reason == (
        "line 1 starts a csvlog record of over 1,048,576 bytes (at line 1046); "
        "the limit is 1,048,576"
    )
    assert isinstance(items[1], Event)


# -- properties ---------------------------------------------------------------------------------


@given(st.lists(st.binary(max_size=300), max_size=8))
def test_never_raises_on_arbitrary_bytes(lines: list[bytes]) -> None:
    for item in parse(lines, ORIGIN):
        if isinstance(item, Reject):
            assert 1 <= item.line_no <= len(lines)
            assert item.reason.startswith(f"line {item.line_no} ")
        else:
            assert item.level in LEVELS
            assert item.layer == "db"
            orjson.dumps(item.attrs)  # the store writes attrs as JSON


@given(
    st.lists(st.sampled_from(sample("postgresql.csv") + sample("postgresql.json")), max_size=8),
    st.lists(st.tuples(st.integers(0, 400), st.sampled_from([b'"', b",", b"\xff", b"{", b"\n"]))),
)
def test_never_raises_on_damaged_lines(lines: list[bytes], damage: list[tuple[int, bytes]]) -> None:
    damaged = list(lines)
    for index, (offset, junk) in enumerate(damage):
        if damaged:
            target = index % len(damaged)
            line = damaged[target]
            cut = offset % (len(line) + 1)
            damaged[target] = line[:cut] + junk + line[cut:]
    items = list(parse(damaged, ORIGIN))
    assert all(isinstance(item, Event | Reject) for item in items)
    for item in items:
        if isinstance(item, Event):
            orjson.dumps(item.attrs)


def csv_literal(value: str) -> str:
    """PostgreSQL's appendCSVLiteral: always quoted, ``"`` doubled."""
    return '"' + value.replace('"', '""') + '"'


TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00\r"), max_size=80)


@given(message=TEXT, statement=TEXT, detail=TEXT)
def test_csvlog_round_trip(message: str, statement: str, detail: str) -> None:
    """Records as PostgreSQL writes them, split into lines, read back field for field."""
    row = [""] * len(CSV_COLUMNS)
    row[CSV_COLUMNS.index("timestamp")] = "2026-11-22 13:11:19.123 UTC"
    row[CSV_COLUMNS.index("pid")] = "4711"
    row[CSV_COLUMNS.index("error_severity")] = "LOG"
    row[CSV_COLUMNS.index("state_code")] = "00000"
    row[CSV_COLUMNS.index("message")] = csv_literal(message)
    row[CSV_COLUMNS.index("detail")] = csv_literal(detail)
    row[CSV_COLUMNS.index("statement")] = csv_literal(statement)
    record = ",".join(row).encode()
    good = sample("postgresql.csv")[0]
    items = read(good, *record.split(b"\n"), good)
    assert len(items) == 3
    item = items[1]
    assert isinstance(item, Event)
    assert item.ts_ns == T0 + 123 * MS
    assert item.message == " ".join(message.split())
    assert item.attrs.get("detail", "") == detail
    assert item.attrs.get("statement", "") == statement
    assert item.raw == record.decode()


# -- hostile and large input --------------------------------------------------------------------


def test_a_statement_longer_than_the_csv_modules_field_limit_is_read() -> None:
    # csv refuses fields over 131,072 characters by default: a 200 KB statement, in a record
    # well within the line limit, was rejected ("field larger than field limit").
    statement = "SELECT '" + "x" * 200_000 + "' /*allocation_id='a-9'*/"
    line = (
        b'2026-11-22 13:11:19.123 UTC,"api","alloc",4711,,6740a1b2.1267,3,,,,0,ERROR,57014,'
        b'"canceling statement due to statement timeout",,,,,,"' + statement.encode() + b'",,,"api"'
    )

    (item,) = read(line)

    assert isinstance(item, Event)
    assert item.allocation_id == "a-9"
    assert len(item.attrs["statement"]) == 2048  # clipped in attrs; whole in raw
    assert item.raw == line.decode()


def test_a_statement_of_unclosed_comments_costs_time_in_proportion_to_it() -> None:
    # The sqlcommenter comment pattern tried every "/*" against the rest of the statement: a
    # 60 KB statement of "/* /* /* ..." took 13 s, 1 MiB would take most of an hour.
    line = b'{"timestamp":"2026-11-22 13:11:19.123 UTC","statement":"' + b"/* " * 20_000 + b'"}'

    started = time.process_time()
    items = read(line, line, line)

    assert time.process_time() - started < 1.0
    assert all(isinstance(item, Event) for item in items)
    assert sqlcommenter_tags("/* /* x */ a /*allocation_id='a-9'*/ /* b") == {
        "allocation_id": "a-9"
    }
