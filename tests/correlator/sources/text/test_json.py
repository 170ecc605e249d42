"""The ``json`` format on zap's, zerolog's, logrus's, ecs-logging's, pino's, bunyan's and
python-json-logger's output (``programs/``), and on what is not such a line."""

from __future__ import annotations

import zoneinfo
from datetime import UTC

import orjson
import pytest

from correlator.sources._record import MAX_DEPTH
from correlator.sources.text import Parsed
from correlator.sources.text.json import JSON
from tests.correlator.sources.text.records import fixture_lines

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
REQUEST_ID = "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def read(name: str, index: int) -> Parsed:
    """Line ``index`` of a fixture, read in Berlin (where the programs ran)."""
    parsed = JSON.read(fixture_lines(name)[index], BERLIN)
    assert isinstance(parsed, Parsed), parsed
    return parsed


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("json_zap.log", 10),
        ("json_zerolog.log", 9),
        ("json_logrus.log", 5),
        ("json_ecs.log", 4),
        ("json_pino.log", 6),
        ("json_bunyan.log", 6),
        ("json_python.log", 8),
    ],
)
def test_every_line_is_a_record(name: str, count: int) -> None:
    lines = fixture_lines(name)

    parsed = [JSON.read(line, BERLIN) for line in lines if JSON.starts(line)]

    assert len(parsed) == len(lines) == count
    assert all(isinstance(record, Parsed) for record in parsed), parsed


def test_zap_production_epoch_seconds_and_fields_as_json_text() -> None:
    assert read("json_zap.log", 1) == Parsed(
        ts_ns=1_795_936_013_171_689_000,  # "ts":1795936013.171689
        level="info",
        message="request handled",
        fields={
            "caller": "programs/json_zap_lines.go:32",
            "request_id": REQUEST_ID,
            "trace_id": TRACE_ID,
            "status": "200",
            "latency": "0.001234",
            "cached": "false",
            "tags": '["a","b"]',
        },
    )


def test_zap_epoch_seconds_keep_every_digit_written() -> None:
    assert read("json_zap.log", 0).ts_ns == 1_795_936_013_171_641_800  # 1795936013.1716418


def test_zap_error_and_namespace() -> None:
    error = read("json_zap.log", 2)
    namespaced = read("json_zap.log", 3)

    assert (error.level, error.fields["error"]) == ("error", "dial tcp 10.0.0.1:443: i/o timeout")
    assert error.fields["stacktrace"].startswith("main.main\n\t/")
    assert (namespaced.message, dict(namespaced.fields)) == (
        'slow "spawn"',
        {
            "logger": "http",
            "caller": "programs/json_zap_lines.go:42",
            "http.method": "POST",
            "http.instance": "b9000564-fe1a-409b-b8cc-1e88b294cd1d",
        },
    )


def test_zap_development_keys_and_iso8601_offset() -> None:
    assert read("json_zap.log", 5) == Parsed(
        ts_ns=1_795_936_013_172_000_000,  # "T":"2026-11-29T08:06:53.172+0100"
        level="INFO",
        message="query done",
        fields={"N": "db", "C": "programs/json_zap_lines.go:50", "rows": "3"},
    )


@pytest.mark.parametrize(
    ("index", "ts_ns"),
    [
        (6, 1_795_936_013_172_000_000),  # ISO 8601: "2026-11-29T08:06:53.172+0100"
        (7, 1_795_936_013_172_536_636),  # RFC 3339: "2026-11-29T08:06:53.172536636+01:00"
        (8, 1_795_936_013_172_669_400),  # epoch milliseconds: 1795936013172.6694
        (9, 1_795_936_013_172_813_286),  # epoch nanoseconds: 1795936013172813286
    ],
)
def test_zap_time_encoders(index: int, ts_ns: int) -> None:
    assert read("json_zap.log", index).ts_ns == ts_ns


@pytest.mark.parametrize(
    ("index", "ts_ns"),
    [
        (0, 1_795_936_013_000_000_000),  # "2026-11-29T08:06:53+01:00"
        (5, 1_795_936_013_705_791_086),  # "2026-11-29T08:06:53.705791086+01:00"
        (6, 1_795_936_013_000_000_000),  # 1795936013
        (7, 1_795_936_013_705_000_000),  # 1795936013705
        (8, 1_795_936_013_705_795_000),  # 1795936013705795
    ],
)
def test_zerolog_times(index: int, ts_ns: int) -> None:
    assert read("json_zerolog.log", index).ts_ns == ts_ns


def test_zerolog_nested_dict_and_a_line_without_a_message() -> None:
    warn = read("json_zerolog.log", 3)
    silent = read("json_zerolog.log", 4)

    assert warn == Parsed(
        ts_ns=1_795_936_013_000_000_000,
        level="warn",
        message='slow "spawn"\nsecond line',
        fields={
            "host": "worker-1",
            "http.method": "GET",
            "http.status": "503",
            "tags": '["x","y"]',
            "ratio": "0.25",
        },
    )
    assert (silent.message, dict(silent.fields)) == (
        "",
        {"host": "worker-1", "instance": "b9000564-fe1a-409b-b8cc-1e88b294cd1d"},
    )


def test_logrus_json_formatter() -> None:
    assert read("json_logrus.log", 2) == Parsed(
        ts_ns=1_795_936_014_000_000_000,  # "2026-11-29T08:06:54+01:00"
        level="error",
        message="write failed",
        fields={"error": "boom: disk full", "trace.id": TRACE_ID},
    )
    assert read("json_logrus.log", 3).level == "warning"


def test_ecs_dotted_and_nested_keys_are_one_spelling() -> None:
    parsed = read("json_ecs.log", 2)

    assert (parsed.ts_ns, parsed.level, parsed.message) == (
        1_795_936_139_195_000_000,  # "@timestamp":"2026-11-29T07:08:59.195Z"
        "warning",  # "log.level":"warning"
        'slow "spawn"\nsecond line',
    )
    assert parsed.fields["trace.id"] == TRACE_ID  # "trace":{"id":...}
    assert parsed.fields["log.logger"] == "app.module"
    assert parsed.fields["process.pid"].isdigit()


def test_ecs_level_as_a_nested_object() -> None:
    parsed = JSON.read(
        '{"@timestamp":"2026-11-29T07:07:04.359Z","log":{"level":"info","logger":"app"},'
        '"message":"hi"}',
        UTC,
    )

    assert parsed == Parsed(
        ts_ns=1_795_936_024_359_000_000, level="info", message="hi", fields={"log.logger": "app"}
    )


@pytest.mark.parametrize(
    ("index", "level"),
    [(0, "info"), (1, "debug"), (2, "warn"), (3, "error"), (4, "fatal"), (5, "trace")],
)
def test_pino_numbered_levels(index: int, level: str) -> None:
    assert read("json_pino.log", index).level == level


def test_pino_epoch_milliseconds_and_error_object() -> None:
    parsed = read("json_pino.log", 3)

    assert parsed.ts_ns == 1_795_936_036_829_000_000  # "time":1795936036829
    assert (parsed.fields["hostname"], parsed.fields["err.type"], parsed.fields["attempt"]) == (
        "vm",
        "Error",
        "3",
    )
    assert parsed.fields["err.stack"].startswith("Error: boom: disk full\n    at lines")


def test_bunyan_iso_time_and_numbered_level() -> None:
    parsed = read("json_bunyan.log", 1)

    assert parsed == Parsed(
        ts_ns=1_795_936_036_454_000_000,  # "time":"2026-11-29T07:07:16.454Z"
        level="debug",  # "level":20
        message="handling request",
        fields={
            "name": "app",
            "hostname": "vm",
            "pid": parsed.fields["pid"],  # a process id: it changes with every run
            "request_id": REQUEST_ID,
            "host": "worker-1",
            "v": "0",
        },
    )
    assert parsed.fields["pid"].isdigit()


def test_python_json_logger_asctime_is_read_in_the_zone_given() -> None:
    line = fixture_lines("json_python.log")[1]  # "asctime": "2026-11-29 08:08:59,126"

    in_berlin = JSON.read(line, BERLIN)
    in_utc = JSON.read(line, UTC)

    assert in_berlin == Parsed(
        ts_ns=1_795_936_139_126_000_000,
        level="DEBUG",
        message="handling request",
        fields={"name": "app.module", "request_id": REQUEST_ID, "host": "worker-1"},
    )
    assert isinstance(in_utc, Parsed)
    assert in_utc.ts_ns == 1_795_936_139_126_000_000 + 3600 * 10**9


def test_python_json_logger_timestamp_and_severity() -> None:
    parsed = read("json_python.log", 7)

    assert (parsed.ts_ns, parsed.level, parsed.message) == (
        1_795_936_139_127_032_000,  # "timestamp": "2026-11-29T07:08:59.127032+00:00"
        "ERROR",  # "severity": "ERROR"
        "write failed",
    )
    assert parsed.fields["exc_info"].endswith("ValueError: boom: disk full")


def test_google_cloud_structured_logging() -> None:
    # The shape of https://cloud.google.com/logging/docs/structured-logging's example.
    trace = "projects/my-projectid/traces/06796866738c859f2f19b7cfb3214824"
    line = (
        '{"severity":"ERROR","message":"There was an error in the application.",'
        '"httpRequest":{"requestMethod":"GET"},"time":"2020-10-12T07:20:50.52Z",'
        f'"logging.googleapis.com/trace":"{trace}"}}'
    )

    assert JSON.read(line, UTC) == Parsed(
        ts_ns=1_602_487_250_520_000_000,
        level="ERROR",
        message="There was an error in the application.",
        fields={
            "httpRequest.requestMethod": "GET",
            "logging.googleapis.com/trace": trace,
        },
    )


@pytest.mark.parametrize(
    ("ts", "ts_ns"),
    [
        ("0", 0),
        ("100000000000", 100_000_000_000_000_000),  # 10^11: milliseconds, 1973-03-03T09:46:40Z
        ("100000000000000", 100_000_000_000_000_000),  # 10^14: microseconds
        ("100000000000000000", 100_000_000_000_000_000),  # 10^17: nanoseconds
        ("1795936013.5", 1_795_936_013_500_000_000),
        ("1795936013172.25", 1_795_936_013_172_250_000),
    ],
)
def test_epoch_numbers_are_told_apart_by_magnitude(ts: str, ts_ns: int) -> None:
    parsed = JSON.read('{"ts":' + ts + "}", UTC)

    assert isinstance(parsed, Parsed)
    assert parsed.ts_ns == ts_ns


def test_a_number_level_that_is_not_pinos_and_a_number_message_are_their_text() -> None:
    parsed = JSON.read('{"ts":"2026-11-29T00:00:00Z","level":35,"msg":42,"x":null}', UTC)

    assert parsed == Parsed(
        ts_ns=1_795_910_400_000_000_000, level="35", message="42", fields={"x": "null"}
    )


def test_a_dotted_key_and_a_nested_one_the_later_wins() -> None:
    parsed = JSON.read('{"ts":1,"trace.id":"a","trace":{"id":"b"},"empty":{}}', UTC)

    assert isinstance(parsed, Parsed)
    assert dict(parsed.fields) == {"trace.id": "b", "empty": "{}"}


def nested(levels: int, *, array: bool) -> str:
    """A line whose objects (or one key's arrays) nest ``levels`` deep, the line included."""
    if array:
        return '{"ts":1,"a":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"
    return '{"ts":1,' + '"a":{' * (levels - 1) + '"b":1' + "}" * (levels - 1) + "}"


@pytest.mark.parametrize("array", [False, True])
def test_nesting_up_to_what_the_store_can_hold(array: bool) -> None:
    deepest = nested(MAX_DEPTH, array=array)
    too_deep = nested(MAX_DEPTH + 1, array=array)

    assert isinstance(JSON.read(deepest, UTC), Parsed)
    orjson.dumps(orjson.loads(deepest))  # what the store can write, as MAX_DEPTH says
    name = "a" if array else ".".join(["a"] * MAX_DEPTH)
    assert JSON.read(too_deep, UTC) == (
        f"JSON field {name[:60]!r} is nested deeper than the 254 levels of objects and arrays "
        "a record may have"
    )
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(orjson.loads(too_deep))


def test_journald_export_lines_are_not_read_as_json_records() -> None:
    # journald's reader reads them; a guess between the two must not prefer this one.
    line = fixture_lines("journald.json")[46]

    assert JSON.read(line, UTC) == (
        "JSON line without a time (expected one of the keys time, ts, @timestamp, timestamp, "
        "asctime, T)"
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("", "a blank line is not a JSON record"),
        (
            "time=2026-11-29T00:00:00Z msg=x",
            "not JSON: invalid literal, expected 'true': line 1 column 1 (char 0)",
        ),
        (
            '{"ts":1}{"ts":2}',
            "not JSON: unexpected content after document: line 1 column 9 (char 8)",
        ),
        ("[1,2]", "not a JSON object: an array"),
        ('"x"', "not a JSON object: a string"),
        ("42", "not a JSON object: a number"),
        ("null", "not a JSON object: null"),
        (
            '{"msg":"x","level":"info"}',
            "JSON line without a time (expected one of the keys time, ts, @timestamp, timestamp, "
            "asctime, T)",
        ),
        (
            '{"time":"yesterday"}',
            "JSON time: 'yesterday' is not an RFC 3339 timestamp "
            "(expected e.g. 2026-11-22T13:11:19.123Z)",
        ),
        (
            '{"time":"2026-02-30T00:00:00Z"}',
            "JSON time: '2026-02-30T00:00:00Z' is not a valid date: day is out of range for month",
        ),
        ('{"ts":true}', "JSON ts: true is neither a time string nor a number since 1970"),
        ('{"ts":[1]}', "JSON ts: [1] is neither a time string nor a number since 1970"),
        ('{"ts":-1}', "JSON ts: -1 is a negative time since 1970"),
        (  # the last seconds below 10^11: the year 5138
            '{"ts":99999999999}',
            "JSON ts: 99999999999 is outside the years 1677 to 2262 that nanoseconds since 1970 "
            "can hold in 64 bits",
        ),
        (
            '{"ts":1e300}',
            "JSON ts: 1e+300 is outside the years 1677 to 2262 that nanoseconds since 1970 can "
            "hold in 64 bits",
        ),
    ],
)
def test_what_is_not_a_json_record_gets_a_reason(line: str, reason: str) -> None:
    assert JSON.read(line, UTC) == reason
