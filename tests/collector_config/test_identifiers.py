"""The collectors lift the library's identifiers, under the library's names, from every source:
agent records, nginx access lines and PostgreSQL's sqlcommenter comments.

Neither collector can run here, so ``simulate`` executes the configs' own regular expressions
and field moves in Python (the patterns are RE2-compatible; ``test_regexes`` checks that).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agent_logging
from agent_logging.context._propagation import render_headers, sql_comment_for
from agent_logging.schema import IDENTIFIER_KEYS, TRACE_KEYS
from correlator.sources._time import parse_rfc3339_ns
from tests.collector_config.configs import (
    ID_ALPHABET,
    NO_ENV,
    alloy_ids,
    components,
    nginx_access_line,
    operators,
    otel_ids,
    otelcol,
    postgres_line,
)
from tests.collector_config.simulate import Unsimulated, parse_time_ns, run_alloy, run_filelog

# ---- a record written by the library itself, through both collectors -----------------------

RECORD_IDS: Final = {
    "node_id": "n-17",
    "node_instance_id": "ni-3",
    "correlation_id": "c-0b1e",
    "allocation_id": "a-7f3c",
    "workflow_id": "wf/2",
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "span_id": "00f067aa0ba902b7",
}


@pytest.fixture
def library_line(tmp_path: Path) -> str:
    """One JSON line written by agent_logging's rotating file output."""
    path = tmp_path / "node-agent.jsonl"
    agent_logging.configure(
        service="node-agent", layer="node", env="prod", output="none", file_path=path
    )
    with agent_logging.bound(**RECORD_IDS):
        agent_logging.get_logger("tasks").warning("task claimed", task="reimage")
    agent_logging.shutdown(timeout_s=2.0)
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    return lines[0]


def test_a_library_record_through_the_otel_collector(library_line: str) -> None:
    entry = run_filelog(otelcol()["receivers"]["filelog/agent"], library_line, "node-agent.jsonl")
    assert entry.resource == {"service.name": "node-agent", "layer": "node", "env": "prod"}
    assert entry.attributes == {
        **{key: RECORD_IDS[key] for key in IDENTIFIER_KEYS},
        "level": "warning",
        "log.file.name": "node-agent.jsonl",
    }
    assert entry.trace == {key: RECORD_IDS[key] for key in TRACE_KEYS}
    assert entry.body == library_line  # the line Loki stores is the record itself


def test_a_library_record_through_alloy(library_line: str) -> None:
    process = components("loki.process")["agent"]
    entry = run_alloy(process, library_line, {"filename": "/var/log/evidence/a.jsonl"}, NO_ENV)
    assert entry.labels == {"service_name": "node-agent", "layer": "node", "env": "prod"}
    assert entry.structured_metadata == {
        **RECORD_IDS,
        "level": "warning",
        "filename": "/var/log/evidence/a.jsonl",
    }
    assert entry.timestamps == [("ts", "RFC3339Nano")]
    assert entry.ts_ns == parse_rfc3339_ns(orjson.loads(library_line)["ts"])
    assert entry.line == library_line


# ---- nginx -------------------------------------------------------------------------------

NGINX_REQUEST_ID: Final = "6f1d2c3b4a5968778695a4b3c2d1e0f9"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"request_id": NGINX_REQUEST_ID}, {"correlation_id": NGINX_REQUEST_ID}),
        (
            {"request_id": NGINX_REQUEST_ID, "http_x_correlation_id": "c-1"},
            {"correlation_id": "c-1"},
        ),
        # nginx writes "" or "-" for an absent header: $request_id stays.
        (
            {"request_id": NGINX_REQUEST_ID, "http_x_correlation_id": "-"},
            {"correlation_id": NGINX_REQUEST_ID},
        ),
        (
            {"request_id": NGINX_REQUEST_ID, "http_x_correlation_id": ""},
            {"correlation_id": NGINX_REQUEST_ID},
        ),
        # A hostile header is not lifted.
        (
            {"request_id": NGINX_REQUEST_ID, "http_x_correlation_id": "c-1' OR 1=1"},
            {"correlation_id": NGINX_REQUEST_ID},
        ),
        # Baggage wins over the header, as in agent_logging.context._propagation.parse_headers.
        (
            {
                "request_id": NGINX_REQUEST_ID,
                "http_x_correlation_id": "c-1",
                "http_baggage": "vendor=x, correlation_id = c-2;p=1,allocation_id=a-9",
            },
            {"correlation_id": "c-2", "allocation_id": "a-9"},
        ),
        (
            {
                "request_id": NGINX_REQUEST_ID,
                "http_traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            },
            {
                "correlation_id": NGINX_REQUEST_ID,
                "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                "span_id": "00f067aa0ba902b7",
            },
        ),
        # traceparent version ff is invalid (W3C trace-context §3.2.2.1).
        (
            {
                "request_id": NGINX_REQUEST_ID,
                "http_traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            },
            {"correlation_id": NGINX_REQUEST_ID},
        ),
    ],
)
def test_nginx_access_identifiers(fields: dict[str, str], expected: dict[str, str]) -> None:
    line = nginx_access_line(**fields)
    assert otel_ids("filelog/nginx_access", line) == expected
    assert alloy_ids("nginx_access", line) == expected


def test_nginx_access_labels_and_timestamp() -> None:
    line = nginx_access_line(request_id=NGINX_REQUEST_ID)
    otel = run_filelog(otelcol()["receivers"]["filelog/nginx_access"], line)
    assert otel.resource == {"service.name": "nginx", "layer": "ingress", "env": "dev"}
    assert otel.attributes["level"] == "<expr>"
    parser = operators("filelog/nginx_access")[0]
    assert parser["timestamp"] == {
        "parse_from": "attributes.msec",
        "layout_type": "epoch",
        "layout": "s.ms",
    }
    entry = run_alloy(
        components("loki.process")["nginx_access"],
        line,
        {"filename": "/a"},
        {"EVIDENCE_ENV": "prod"},
    )
    assert entry.labels == {"service_name": "nginx", "layer": "ingress", "env": "prod"}
    assert entry.timestamps == [("msec", "Unix")]
    assert entry.ts_ns == 1_795_353_079_123_000_000  # "msec":"1795353079.123"
    assert entry.structured_metadata["level"] == "<template>"


def test_nginx_error_lines_keep_only_the_level() -> None:
    line = (
        "2026/11/22 13:11:19 [error] 1234#1234: *5 connect() failed (111: Connection refused)"
        ' while connecting to upstream, client: 127.0.0.1, request: "POST /v1/allocations HTTP/1.1"'
    )
    otel = run_filelog(otelcol()["receivers"]["filelog/nginx_error"], line, "error.log")
    assert otel.attributes == {"level": "<expr>", "log.file.name": "error.log"}
    assert otel.resource == {"service.name": "nginx", "layer": "ingress", "env": "dev"}
    entry = run_alloy(components("loki.process")["nginx_error"], line, {"filename": "/e"}, NO_ENV)
    assert entry.extracted["time"] == "2026/11/22 13:11:19"
    assert entry.extracted["nginx_level"] == "error"
    assert entry.labels == {"service_name": "nginx", "layer": "ingress", "env": "dev"}
    assert entry.structured_metadata == {"level": "<template>", "filename": "/e"}
    assert entry.ts_ns == _ns("2026-11-22T13:11:19Z")
    # In the zone NGINX_TZ names (nginx writes its local time, without an offset).
    berlin = run_alloy(
        components("loki.process")["nginx_error"], line, {}, {"NGINX_TZ": "Europe/Berlin"}
    )
    assert berlin.ts_ns == _ns("2026-11-22T12:11:19Z")
    # Both split the file into entries on the same first-line pattern.
    multiline = components("loki.process")["nginx_error"].child("stage.multiline")
    first_line = otelcol()["receivers"]["filelog/nginx_error"]["multiline"]["line_start_pattern"]
    assert multiline.attributes["firstline"] == first_line
    assert re.search(first_line, line)
    assert not re.search(first_line, '  "FastCGI sent in stderr: continued')


# ---- PostgreSQL: the sqlcommenter comment of agent_logging.context._propagation.sql_comment_for


def test_a_library_sql_comment_is_lifted_by_both_collectors() -> None:
    ids = {**RECORD_IDS, "node_id": "host-7.example:22", "allocation_id": "a+b@c"}
    comment = sql_comment_for(ids)
    assert "%3A" in comment and "%2F" in comment and "%40" in comment and "%2B" in comment
    update = "UPDATE allocations SET state = 'release_failed'\nWHERE id = $1"
    statement = f"{update} {comment}"
    line = postgres_line(statement)
    assert otel_ids("filelog/postgres", line) == ids
    assert alloy_ids("postgres", line) == ids


@pytest.mark.parametrize(
    ("statement", "message", "expected"),
    [
        # The correlator's sample line (tests/correlator/samples/postgres/postgresql.json).
        (
            "UPDATE outbox SET published = true WHERE id = 17 "
            "/*correlation_id='c-2',workflow_id='wf%2F7'*/",
            "deadlock detected",
            {"correlation_id": "c-2", "workflow_id": "wf/7"},
        ),
        # log_statement lines carry the statement in the message.
        (
            None,
            "statement: SELECT 1 /*allocation_id='a-9'*/",
            {"allocation_id": "a-9"},
        ),
        # The statement's comment wins over the message's.
        (
            "SELECT 2 /*allocation_id='a-2'*/",
            "statement: SELECT 1 /*allocation_id='a-1'*/",
            {"allocation_id": "a-2"},
        ),
        # The last comment is the appended one; an ordinary comment before it is ignored.
        (
            "/* hint */ SELECT 1 /*allocation_id='a-1'*/ /*allocation_id='a-3'*/",
            "m",
            {"allocation_id": "a-3"},
        ),
        # Not an identifier: quotes, spaces and unknown escapes stay in the line only.
        (
            "SELECT 1 /*allocation_id='a%20b',workflow_id='w%27x',correlation_id='c-1'*/",
            "m",
            {"correlation_id": "c-1"},
        ),
        # node_id= must not match inside node_instance_id=.
        ("SELECT 1 /*node_instance_id='ni-1'*/", "m", {"node_instance_id": "ni-1"}),
        ("SELECT 1", "no comment", {}),
    ],
)
def test_sqlcommenter_extraction_table(
    statement: str | None, message: str, expected: dict[str, str]
) -> None:
    line = postgres_line(statement, message)
    assert otel_ids("filelog/postgres", line) == expected
    assert alloy_ids("postgres", line) == expected


def test_postgres_labels_and_timestamp() -> None:
    line = postgres_line("SELECT 1")
    otel = run_filelog(otelcol()["receivers"]["filelog/postgres"], line)
    assert otel.resource == {"service.name": "postgresql", "layer": "db", "env": "dev"}
    assert operators("filelog/postgres")[0]["timestamp"] == {
        "parse_from": "attributes.timestamp",
        "layout_type": "gotime",
        "layout": "2006-01-02 15:04:05.999 MST",
    }
    entry = run_alloy(components("loki.process")["postgres"], line, {"filename": "/p"}, NO_ENV)
    assert entry.labels == {"service_name": "postgresql", "layer": "db", "env": "dev"}
    assert entry.timestamps == [("timestamp", "2006-01-02 15:04:05.999 MST")]
    assert entry.ts_ns == _ns("2026-11-22T13:11:19.123Z")  # "2026-11-22 13:11:19.123 UTC"


def _ns(rfc3339: str) -> int:
    return parse_rfc3339_ns(rfc3339)


@pytest.mark.parametrize(
    ("value", "layout", "expected"),
    [
        ("1795353079", "Unix", "2026-11-22T13:11:19Z"),
        ("1795353079.000000123", "Unix", "2026-11-22T13:11:19.000000123Z"),
        ("2026-11-22T13:11:19.5+01:00", "RFC3339Nano", "2026-11-22T12:11:19.5Z"),
        # Go reads a fraction after the seconds that the layout does not name.
        ("2026-11-22 13:11:19 UTC", "2006-01-02 15:04:05.999 MST", "2026-11-22T13:11:19Z"),
        ("2026/11/22 13:11:19.25", "2006/01/02 15:04:05", "2026-11-22T13:11:19.25Z"),
        ("not a time", "Unix", None),
        ("2026/11/22", "2006/01/02 15:04:05", None),
    ],
)
def test_the_timestamp_model_reads_the_layouts_the_configs_use(
    value: str, layout: str, expected: str | None
) -> None:
    assert parse_time_ns(value, layout) == (None if expected is None else _ns(expected))


@pytest.mark.parametrize(
    ("value", "layout"),
    [("2026-11-22 13:11:19 CET", "2006-01-02 15:04:05 MST"), ("Nov 22", "Jan 02")],
)
def test_the_timestamp_model_refuses_what_it_does_not_know(value: str, layout: str) -> None:
    with pytest.raises(Unsimulated):
        parse_time_ns(value, layout)


_ids = st.text(alphabet=ID_ALPHABET, min_size=1, max_size=40)
_hex32 = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32).filter(
    lambda s: s != "0" * 32
)
_hex16 = st.text(alphabet="0123456789abcdef", min_size=16, max_size=16).filter(
    lambda s: s != "0" * 16
)


@st.composite
def identifier_sets(draw: st.DrawFn) -> dict[str, str]:
    keys = draw(st.sets(st.sampled_from(IDENTIFIER_KEYS)))
    ids = {key: draw(_ids) for key in keys}
    if draw(st.booleans()):
        ids["trace_id"], ids["span_id"] = draw(_hex32), draw(_hex16)
    return ids


@settings(max_examples=60, deadline=None)
@given(ids=identifier_sets(), prefix=st.sampled_from(["", "/* note */ ", "SELECT '*/' ; "]))
def test_any_sql_comment_round_trips_through_both_collectors(
    ids: dict[str, str], prefix: str
) -> None:
    statement = f"{prefix}UPDATE t SET a = 1 {sql_comment_for(ids)}"  # noqa: S608 - a log line
    line = postgres_line(statement)
    assert otel_ids("filelog/postgres", line) == ids
    assert alloy_ids("postgres", line) == ids


@settings(max_examples=60, deadline=None)
@given(ids=identifier_sets())
def test_any_propagation_headers_round_trip_through_both_collectors(ids: dict[str, str]) -> None:
    headers = render_headers(ids)
    line = nginx_access_line(
        request_id=NGINX_REQUEST_ID,
        http_x_correlation_id=headers.get("X-Correlation-ID", ""),
        http_traceparent=headers.get("traceparent", ""),
        http_baggage=headers.get("baggage", ""),
    )
    expected = {"correlation_id": NGINX_REQUEST_ID, **ids}
    assert otel_ids("filelog/nginx_access", line) == expected
    assert alloy_ids("nginx_access", line) == expected
