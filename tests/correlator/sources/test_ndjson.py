"""The ndjson/agent adapter: records of DESIGN §4, the row path and the columnar fast path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_logging.schema import id_problem
from correlator.model import EVENT_COLUMNS, MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources._fields import normalise_level, take_id
from correlator.sources.ndjson import parse, parse_agent, parse_columns

SAMPLES = Path(__file__).parents[1] / "samples" / "ndjson"
ORIGIN = "agent.jsonl"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
CHAIN = [
    {"type": "RuntimeError", "message": "provisioning failed"},
    {
        "type": "ssl.SSLCertVerificationError",
        "message": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate "
        "has expired (_ssl.c:1006)",
    },
]
QUOTE_PROBLEM = (
    "holds '\"' (U+0022) at position 3; allowed: ASCII letters, digits and . _ : / @ + ~ -"
)


def sample_lines() -> list[bytes]:
    return (SAMPLES / "agent.jsonl").read_bytes().splitlines()


def read(*lines: bytes, **kwargs: Any) -> list[Event | Reject]:
    return list(parse(list(lines), ORIGIN, **kwargs))


def event(raw: bytes, source: str = "ndjson", **fields: Any) -> Event:
    return Event(
        source=source,
        origin=ORIGIN,
        raw=raw.decode(),
        hash=content_hash(source, raw),
        **fields,
    )


def test_sample_file() -> None:
    lines = sample_lines()

    assert list(parse(lines, ORIGIN)) == [
        event(
            lines[0],
            ts_ns=T0 + 100_000_000,
            layer="api",
            service="api",
            message="request",
            correlation_id="c-1f3a",
            trace_id=TRACE,
            span_id=SPAN,
            http_method="POST",
            http_path="/v1/allocations/a-9/provision",
            http_status=502,
            duration_s=0.412377,
            attrs={
                "env": "prod",
                "logger": "agent_logging.access",
                "parent_span_id": "b7ad6b7169203331",
            },
        ),
        event(
            lines[1],
            ts_ns=T0 + 314_097_249,
            layer="api",
            service="api",
            message="provision requested",
            node_id="n-17",
            correlation_id="c-1f3a",
            allocation_id="a-9",
            workflow_id="wf-2",
            attrs={"env": "prod", "logger": "api.provision", "template": "rhel9"},
        ),
        event(
            lines[2],
            ts_ns=T0 + 314_208_519,
            layer="api",
            service="api",
            level="error",
            message="provisioning failed",
            node_id="n-17",
            correlation_id="c-1f3a",
            allocation_id="a-9",
            workflow_id="wf-2",
            owner_hint="cert",
            error_type="RuntimeError",
            attrs={
                "env": "prod",
                "logger": "api.provision",
                "error": {"message": "provisioning failed", "chain": CHAIN},
            },
        ),
        event(
            lines[4],
            ts_ns=T0 + 1_000_000_001,
            layer="workflow",
            service="workflow-worker",
            level="warning",
            message="allocation state changed",
            node_id="n-17",
            allocation_id="a-9",
            workflow_id="wf-2",
            entity_kind="allocation",
            entity_id="a-9",
            state_from="provisioning",
            state_to="provision_failed",
            attrs={"env": "prod", "occupancy": "cleanup"},
        ),
        event(
            lines[5],
            ts_ns=T0 + 2_500_000_000 - 3600 * 1_000_000_000,  # +01:00
            layer="node",
            service="node-agent",
            level="warning",
            message="disk almost full",
            node_id="n-17",
            node_instance_id="ni-3",
            attrs={"env": "prod", "free_bytes": 1048576},
        ),
        event(
            lines[6],
            ts_ns=T0 + 3_000_000_000,
            layer="node",
            service="node-agent",
            message="task claimed",
            node_id="n-17",
            attrs={"task": "reimage", "rejected_ids": {"allocation_id": QUOTE_PROBLEM}},
        ),
        Reject(
            "ndjson",
            ORIGIN,
            8,
            "line 8 is not valid JSON: unexpected end of data: line 1 column 67 (char 66)",
            lines[7].decode(),
        ),
        Reject("ndjson", ORIGIN, 9, "line 9 lacks field 'ts'", lines[8].decode()),
    ]


def test_agent_kind_stamps_its_source_and_hash() -> None:
    line = sample_lines()[1]

    (item,) = parse_agent([line], ORIGIN)

    assert isinstance(item, Event)
    assert (item.source, item.hash) == ("agent", content_hash("agent", line))
    assert item.hash != content_hash("ndjson", line)


GOOD = b'{"ts":"2026-11-22T13:11:19Z","layer":"api","event":"ok"}'
UTF8_BAD = b'{"ts":"2026-11-22T13:11:19Z","layer":"api","event":"caf\xff"}'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"ts":"2026-11-22T13:11:19.5Z","layer":"api"',
            "line 2 is not valid JSON: unexpected end of data: line 1 column 45 (char 44)",
        ),
        (b"[1,2]", "line 2 is a JSON array, not an object"),
        (b'"text"', "line 2 is a JSON string, not an object"),
        (b'{"layer":"api"}', "line 2 lacks field 'ts'"),
        (
            b'{"ts":"2026-13-22T13:11:19Z","layer":"api"}',
            "line 2 has a field 'ts' that is not an RFC 3339 timestamp: "
            "'2026-13-22T13:11:19Z' is not a valid date: month must be in 1..12",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19","layer":"api"}',
            "line 2 has a field 'ts' that is not an RFC 3339 timestamp: "
            "'2026-11-22T13:11:19' has no UTC offset (expected Z or ±HH:MM)",
        ),
        (
            b'{"ts":1795353079,"layer":"api"}',
            "line 2 has a field 'ts' that is not an RFC 3339 timestamp: '1795353079' is a JSON "
            "number",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z"}',
            "line 2 lacks field 'layer' (one of node, ingress, api, workflow, db, provider, "
            "projection)",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","layer":"frontend"}',
            "line 2 has a field 'layer' outside the known layers: 'frontend' (expected one of "
            "node, ingress, api, workflow, db, provider, projection)",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","layer":["api"]}',
            "line 2 has a field 'layer' outside the known layers: '[\"api\"]' (expected one of "
            "node, ingress, api, workflow, db, provider, projection)",
        ),
        (
            b'{"ts":"2300-01-01T00:00:00Z","layer":"api"}',
            "line 2 has a field 'ts' that is not an RFC 3339 timestamp: "
            "'2300-01-01T00:00:00Z' is outside the years 1677 to 2262 that nanoseconds since "
            "1970 can hold in 64 bits",
        ),
        (UTF8_BAD, "line 2 is not valid UTF-8 (byte 0xff at offset 55)"),
        (b"{" + b" " * MAX_LINE_BYTES, "line 2 is longer than 1 MiB (1,048,576 bytes)"),
    ],
)
def test_bad_lines_are_rejected_and_batch_mates_kept(line: bytes, reason: str) -> None:
    items = read(GOOD, line, GOOD)

    assert [type(item).__name__ for item in items] == ["Event", "Reject", "Event"]
    reject = items[1]
    assert isinstance(reject, Reject)
    assert (reject.line_no, reason) == (2, reject.reason)
    assert reject.excerpt == line[:200].decode("utf-8", "replace")[:200]


def _nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"ts":"2026-11-22T13:11:19Z","layer":"api","deep":' + _nested(254) + b"}",
            "line 2 has a field 'deep' nested deeper than the 254 levels of objects and arrays "
            "a record may have",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","layer":"api","event":' + _nested(300) + b"}",
            "line 2 has a field 'event' nested deeper than the 254 levels of objects and "
            "arrays a record may have",
        ),
        (
            # Too deep for the stdlib parser as well (about 1,000 levels; orjson reads 1,024),
            # beside an integer past 64 bits that would have it read again.
            b'{"ts":"2026-11-22T13:11:19Z","layer":"api","node_id":18446744073709551616,'
            b'"deep":' + _nested(1000) + b"}",
            "line 2 has a field 'deep' nested deeper than the 254 levels of objects and arrays "
            "a record may have",
        ),
        (
            b'{"ts":"2026-11-22T13:11:19Z","layer":' + _nested(300) + b"}",
            "line 2 has a field 'layer' outside the known layers: a value nested deeper than "
            "254 levels (expected one of node, ingress, api, workflow, db, provider, "
            "projection)",
        ),
    ],
)
def test_a_record_nested_too_deep_to_store_is_rejected_and_batch_mates_kept(
    line: bytes, reason: str
) -> None:
    items = read(GOOD, line, GOOD)
    columns, rejects = parse_columns([GOOD, line, GOOD], "f.ndjson")

    assert [type(item).__name__ for item in items] == ["Event", "Reject", "Event"]
    assert [(r.line_no, r.reason) for r in rejects] == [(2, reason)]
    assert isinstance(items[1], Reject)
    assert items[1].reason == reason
    assert len(columns["ts_ns"]) == 2


def test_a_record_nested_as_deep_as_a_record_may_be_is_kept() -> None:
    line = b'{"ts":"2026-11-22T13:11:19Z","layer":"api","deep":' + _nested(253) + b"}"
    columns, rejects = parse_columns([line], "f.ndjson")
    assert (rejects, len(columns["ts_ns"])) == ([], 1)


def test_blank_lines_are_skipped_and_crlf_dropped() -> None:
    items = read(b"", b"   \t", GOOD + b"\r", b"\r")

    assert items == [
        Event(
            ts_ns=T0,
            layer="api",
            source="ndjson",
            origin=ORIGIN,
            message="ok",
            raw=GOOD.decode(),
            hash=content_hash("ndjson", GOOD),
        )
    ]


def test_default_layer_applies_only_when_absent() -> None:
    items = read(b'{"ts":"2026-11-22T13:11:19Z","event":"x"}', GOOD, default_layer="node")

    assert [item.layer for item in items if isinstance(item, Event)] == ["node", "api"]


@pytest.mark.parametrize(
    ("record", "columns"),
    [
        # Unknown level: info, the word kept.
        ({"level": "verbose"}, {"level": "info", "attrs": {"level": "verbose"}}),
        ({"level": "FATAL"}, {"level": "critical", "attrs": {}}),
        # No event: msg, then message.
        ({"msg": "from msg"}, {"message": "from msg", "attrs": {}}),
        ({"event": {"k": 1}}, {"message": '{"k":1}', "attrs": {}}),
        ({}, {"message": "", "attrs": {}}),
        # Integers are identifiers too (inventories number nodes); booleans are not.
        ({"node_id": 17}, {"node_id": "17", "attrs": {}}),
        (
            {"node_id": True, "trace_id": "0" * 32, "span_id": "XYZ"},
            {
                "node_id": None,
                "trace_id": None,
                "span_id": None,
                "attrs": {
                    "rejected_ids": {
                        "node_id": "must be a string, got bool",
                        "trace_id": "must be 32 lower-case hex digits, not all zero "
                        "(W3C trace-context)",
                        "span_id": "must be 16 lower-case hex digits, not all zero "
                        "(W3C trace-context)",
                    }
                },
            },
        ),
        (
            {"correlation_id": ""},
            {
                "correlation_id": None,
                "attrs": {
                    "rejected_ids": {
                        "correlation_id": "is empty (leave an unknown identifier out instead)"
                    }
                },
            },
        ),
        # Access fields that do not fit their columns stay in attrs.
        (
            {"status": "ok", "duration_s": "1s", "method": 5},
            {
                "http_status": None,
                "duration_s": None,
                "http_method": None,
                "attrs": {"status": "ok", "duration_s": "1s", "method": 5},
            },
        ),
        ({"status": 204, "duration_s": 2}, {"http_status": 204, "duration_s": 2.0, "attrs": {}}),
        # Lifecycle aliases and integer entity ids.
        (
            {"entity_kind": "outbox", "entity_id": 42, "state_from": "new", "to_state": "sent"},
            {
                "entity_kind": "outbox",
                "entity_id": "42",
                "state_from": "new",
                "state_to": "sent",
                "attrs": {},
            },
        ),
        # An owner layer outside DESIGN §4 and an error that is not an object are kept, untrusted.
        (
            {"error": {"type": "E", "owner_layer": "martians", "stack": "long"}},
            {
                "owner_hint": None,
                "error_type": "E",
                "attrs": {"error": {"owner_layer": "martians"}},
            },
        ),
        ({"error": "boom"}, {"owner_hint": None, "error_type": None, "attrs": {"error": "boom"}}),
        # Tracebacks stay in raw only.
        ({"exception": "Traceback ...", "stack": "..."}, {"attrs": {}}),
        ({"service": 7}, {"service": None, "attrs": {"service": 7}}),
    ],
)
def test_field_mapping(record: dict[str, Any], columns: dict[str, Any]) -> None:
    line = orjson.dumps({"ts": "2026-11-22T13:11:19Z", "layer": "db", **record})

    (item,) = read(line)

    assert isinstance(item, Event)
    assert {name: getattr(item, name) for name in columns} == columns


WIDE = "123456789012345678901234567890"  # past 64 bits: orjson reads it as 1.2345678901234568e+29
HEX_PROBLEM = "must be 32 lower-case hex digits, not all zero (W3C trace-context)"
SPAN_PROBLEM = "must be 16 lower-case hex digits, not all zero (W3C trace-context)"


def read_both_ways(line: bytes) -> dict[str, Any]:
    """The row of one good line, as :func:`parse` and :func:`parse_columns` agree it is (attrs
    as JSON text)."""
    (item,) = read(line)
    assert isinstance(item, Event)
    columns, rejects = parse_columns([line], ORIGIN)
    assert rejects == []
    row = {name: values[0] for name, values in columns.items()}
    attrs = orjson.dumps(item.attrs).decode() if item.attrs else None
    assert {name: getattr(item, name) for name in EVENT_COLUMNS} | {"attrs": attrs} == row
    return row


@pytest.mark.parametrize(
    ("fields", "attrs"),
    [
        # Past 64 bits, either way: the decimal text, every digit.
        (f'"job_seq":{WIDE}', f'{{"job_seq":"{WIDE}"}}'),
        ('"job_seq":-9223372036854775809', '{"job_seq":"-9223372036854775809"}'),
        ('"job_seq":18446744073709551616', '{"job_seq":"18446744073709551616"}'),
        # Inside an object and a list, beside numbers that stay numbers.
        (
            f'"job":{{"seq":{WIDE},"parts":[1,{WIDE},2.5]}}',
            f'{{"job":{{"seq":"{WIDE}","parts":[1,"{WIDE}",2.5]}}}}',
        ),
        # The ends of what orjson holds stay numbers; so do large floats, and text with "e+".
        ('"u64_max":18446744073709551615', '{"u64_max":18446744073709551615}'),
        ('"i64_min":-9223372036854775808', '{"i64_min":-9223372036854775808}'),
        ('"big":1.5e+300,"seq":1e+20', '{"big":1.5e+300,"seq":1e+20}'),
        ('"note":"one+two 1e+29"', '{"note":"one+two 1e+29"}'),
        # A large float beside a wide integer: both as they are.
        (f'"big":1.5e+300,"seq":{WIDE}', f'{{"big":1.5e+300,"seq":"{WIDE}"}}'),
        # Fields the mapping leaves in attrs.
        (f'"level":{WIDE},"status":{WIDE}', f'{{"level":"{WIDE}","status":"{WIDE}"}}'),
        (f'"error":{{"type":"E","code":{WIDE}}}', f'{{"error":{{"code":"{WIDE}"}}}}'),
    ],
)
def test_integers_past_64_bits_keep_every_digit_in_attrs(fields: str, attrs: str) -> None:
    line = b'{"ts":"2026-11-22T13:11:19Z","layer":"db",%s}' % fields.encode()

    assert read_both_ways(line)["attrs"] == attrs


@pytest.mark.parametrize(
    ("fields", "columns"),
    [
        # An integer identifier is taken as its text, however long.
        (f'"node_id":{WIDE}', {"node_id": WIDE, "attrs": None}),
        (f'"entity_id":{WIDE}', {"entity_id": WIDE, "attrs": None}),
        (f'"event":{WIDE}', {"message": WIDE, "attrs": None}),
        (f'"event":{{"seq":{WIDE}}}', {"message": f'{{"seq":"{WIDE}"}}', "attrs": None}),
        # Never a trace id, though its reason is now about hex digits, not floats.
        (
            f'"trace_id":{WIDE}',
            {"trace_id": None, "attrs": f'{{"rejected_ids":{{"trace_id":"{HEX_PROBLEM}"}}}}'},
        ),
        (
            f'"span_id":{WIDE}',
            {"span_id": None, "attrs": f'{{"rejected_ids":{{"span_id":"{SPAN_PROBLEM}"}}}}'},
        ),
    ],
)
def test_integers_past_64_bits_in_columns(fields: str, columns: dict[str, Any]) -> None:
    line = b'{"ts":"2026-11-22T13:11:19Z","layer":"db",%s}' % fields.encode()

    row = read_both_ways(line)

    assert {name: row[name] for name in columns} == columns


def test_a_wide_integer_changes_neither_raw_nor_hash() -> None:
    line = b'{"ts":"2026-11-22T13:11:19Z","layer":"db","seq":%s}' % WIDE.encode()

    row = read_both_ways(line)

    assert (row["raw"], row["hash"]) == (line.decode(), content_hash("ndjson", line))


@pytest.mark.parametrize(
    ("word", "level"),
    [
        ("debug", "debug"),
        ("TRACE", "debug"),
        ("info", "info"),
        ("Notice", "info"),
        ("warn", "warning"),
        ("WARNING", "warning"),
        ("err", "error"),
        ("exception", "error"),
        ("crit", "critical"),
        ("panic", "critical"),
        ("emerg", "critical"),
        ("chatty", None),
        (3, None),
    ],
)
def test_normalise_level(word: object, level: str | None) -> None:
    assert normalise_level(word) == level


@given(st.text(max_size=300))
def test_identifier_check_agrees_with_agent_logging(value: str) -> None:
    rejected: dict[str, str] = {}

    taken = take_id("allocation_id", value, rejected)

    reason = id_problem("allocation_id", value)
    assert taken == (value if reason is None else None)
    assert rejected == ({} if reason is None else {"allocation_id": reason})


@given(st.from_regex(r"[0-9a-fA-F]{30,34}", fullmatch=True))
def test_trace_id_check_agrees_with_agent_logging(value: str) -> None:
    assert (take_id("trace_id", value, {}) is None) == (id_problem("trace_id", value) is not None)


def test_rejects_are_numbered_from_start_line() -> None:
    columns, rejects = parse_columns([GOOD, b"[]"], ORIGIN, start_line=50_001)

    assert columns["ts_ns"] == [T0]
    assert rejects == [
        Reject("ndjson", ORIGIN, 50_002, "line 50002 is a JSON array, not an object", "[]")
    ]


def test_columns_of_nothing() -> None:
    columns, rejects = parse_columns([b"", b"x"], ORIGIN)

    assert columns == {name: [] for name in EVENT_COLUMNS}
    assert [r.reason for r in rejects] == [
        "line 2 is not valid JSON: unexpected character, expected a JSON value: line 1 column 1 "
        "(char 0)"
    ]


def test_columns_render_attrs_as_json_text() -> None:
    lines = sample_lines()[:2]

    columns, rejects = parse_columns(lines, ORIGIN)

    assert rejects == []
    assert list(columns) == list(EVENT_COLUMNS)
    assert columns["attrs"] == [
        '{"env":"prod","logger":"agent_logging.access","parent_span_id":"b7ad6b7169203331"}',
        '{"env":"prod","logger":"api.provision","template":"rhel9"}',
    ]
    assert columns["hash"] == [content_hash("ndjson", line) for line in lines]


# -- properties ---------------------------------------------------------------------------

IDENTIFIER_VALUES = st.one_of(
    st.sampled_from(["a-9", "n-17", "c-1f3a", "wf-2", 'a"9', "", "x" * 300, TRACE, SPAN]),
    st.integers(-5, 5),
    st.none(),
    st.text(max_size=8),
)


def json_values(integers: st.SearchStrategy[int], max_leaves: int) -> st.SearchStrategy[Any]:
    """JSON values: scalars (integers drawn from ``integers``), lists and objects of them."""
    return st.recursive(
        st.none()
        | st.booleans()
        | integers
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


JSON_VALUES = json_values(st.integers(-(2**63), 2**63), max_leaves=6)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "ts": st.sampled_from(
            ["2026-11-22T13:11:19.123456789Z", "2026-11-22T14:11:19+01:00", "yesterday", ""]
        )
        | JSON_VALUES,
        "layer": st.sampled_from(["api", "node", "db", "frontend"]) | JSON_VALUES,
        "level": st.sampled_from(["info", "ERROR", "warn", "loud"]) | JSON_VALUES,
        "event": st.text(max_size=20) | JSON_VALUES,
        "service": st.text(max_size=5) | JSON_VALUES,
        **{key: IDENTIFIER_VALUES for key in ("node_id", "allocation_id", "correlation_id")},
        "trace_id": IDENTIFIER_VALUES,
        "span_id": IDENTIFIER_VALUES,
        "error": st.fixed_dictionaries(
            {},
            optional={
                "type": JSON_VALUES,
                "owner_layer": st.sampled_from(["cert", "db", "nope"]) | JSON_VALUES,
                "message": JSON_VALUES,
                "stack": JSON_VALUES,
            },
        )
        | JSON_VALUES,
        "method": JSON_VALUES,
        "status": st.integers(0, 700) | JSON_VALUES,
        "duration_s": st.floats(0, 10) | JSON_VALUES,
        "entity_id": JSON_VALUES,
        "from_state": JSON_VALUES,
        "stack": JSON_VALUES,
        "extra": JSON_VALUES,
    },
)
LINES = st.lists(
    st.one_of(
        RECORDS.map(orjson.dumps),
        st.binary(max_size=40),
        st.sampled_from([b"", b"  ", b"\xff{}", b"{}\r", b"[]"]),
    ),
    max_size=12,
)


@settings(max_examples=100)
@given(LINES)
def test_columns_agree_with_events(lines: list[bytes]) -> None:
    events = list(parse(lines, ORIGIN, default_layer="api"))

    columns, rejects = parse_columns(lines, ORIGIN, default_layer="api")

    rows = [e for e in events if isinstance(e, Event)]
    expected = {name: [getattr(e, name) for e in rows] for name in EVENT_COLUMNS}
    expected["attrs"] = [orjson.dumps(e.attrs).decode() if e.attrs else None for e in rows]
    assert columns == expected
    assert rejects == [e for e in events if isinstance(e, Reject)]
    for row in rows:
        assert row.hash == content_hash("ndjson", row.raw)


#: JSON values with integers of any size (the stdlib writes those orjson cannot).
WIDE_JSON_VALUES = json_values(st.integers(-(10**40), 10**40), max_leaves=8)


def digits_past_64_bits(value: Any) -> Any:
    """``value`` with each integer orjson cannot hold written as its decimal text."""
    if type(value) is int and not -(2**63) <= value < 2**64:
        return str(value)
    if isinstance(value, dict):
        return {key: digits_past_64_bits(item) for key, item in value.items()}
    if isinstance(value, list):
        return [digits_past_64_bits(item) for item in value]
    return value


@settings(max_examples=200)
@given(WIDE_JSON_VALUES)
def test_any_integer_is_exact_in_attrs(value: Any) -> None:
    line = json.dumps({"ts": "2026-11-22T13:11:19Z", "layer": "db", "extra": value}).encode()

    attrs = read_both_ways(line)["attrs"]

    assert attrs == orjson.dumps({"extra": digits_past_64_bits(value)}).decode()


@given(st.lists(st.binary(max_size=60), max_size=10))
def test_parse_never_raises_and_answers_each_line_at_most_once(lines: list[bytes]) -> None:
    items = read(*lines)

    assert len(items) <= len(lines)
    numbers = [item.line_no for item in items if isinstance(item, Reject)]
    assert numbers == sorted(set(numbers))
    for item in items:
        if isinstance(item, Event):
            assert item.level in ("debug", "info", "warning", "error", "critical")
