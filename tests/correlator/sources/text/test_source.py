"""The ``text`` source end to end: the formats chosen, the identifiers their rules find, the
layers, the operator's rules file, and the OpenStack sample joined on one instance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator.api import create_app
from correlator.cli import main
from correlator.errors import QueryError
from correlator.incident import timeline_for
from correlator.model import MAX_LINE_BYTES, Event, Reject
from correlator.sources import SOURCES
from correlator.sources.text import FORMATS, TEXT
from correlator.sources.text._pattern import pattern_format
from correlator.sources.text._records import MAX_RECORD_LINES
from correlator.sources.text._rules_file import TextRules
from correlator.sources.text._source import parse, settle
from correlator.store import Store
from tests.asgi_client import AsgiClient
from tests.correlator.sources.text.records import FIXTURES

INSTANCE = "b9000564-fe1a-409b-b8cc-1e88b294cd1d"
REQUEST = "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"


def _read(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines()


def _parse(lines: list[bytes], origin: str = "stdin", **options: object) -> list[Event | Reject]:
    return list(parse(lines, origin, **options))  # type: ignore[arg-type]


def _events(items: list[Event | Reject]) -> list[Event]:
    return [item for item in items if isinstance(item, Event)]


def _rejects(items: list[Event | Reject]) -> list[Reject]:
    return [item for item in items if isinstance(item, Reject)]


def test_the_text_source_is_one_registry_line() -> None:
    assert SOURCES["text"] is TEXT
    assert [option.flag for option in TEXT.options] == [
        "--format",
        "--layer",
        "--service",
        "--text-tz",
        "--text-rules",
    ]


@pytest.mark.parametrize(
    ("fixture", "chosen"),
    [
        ("openstack_2k_head.log", "oslo"),
        ("klog.log", "klog"),
        ("logfmt_gologfmt.log", "logfmt"),
        ("logfmt_logrus.log", "logfmt"),
        ("linux_2k_excerpt.log", "syslog"),
        ("syslog_local.log", "syslog"),
        ("syslog_logger_stderr.log", "syslog"),
        ("journald.json", "journald"),
        ("python_asctime.log", "python"),
        ("python_dashes.log", "python"),
        ("json_zap.log", "json"),
        ("json_zerolog.log", "json"),
        ("json_logrus.log", "json"),
        ("json_ecs.log", "json"),
        ("json_pino.log", "json"),
        ("json_bunyan.log", "json"),
        ("json_python.log", "json"),
        ("json_structlog.log", "json"),
    ],
)
def test_auto_chooses_each_fixtures_format_and_says_so(fixture: str, chosen: str) -> None:
    head = _read(fixture)[:50]

    values, note = settle(head, {"text_format": "auto"})

    assert values["text_format"] == chosen
    assert note is not None
    assert note.startswith(f"--format auto chose {chosen}: it reads ")


def test_auto_says_when_no_format_reads_the_lines() -> None:
    with pytest.raises(QueryError) as raised:
        settle([b"\x00\x01 binary", b"nothing here either"], {"text_format": "auto"})

    assert str(raised.value) == (
        "--format auto: none of the formats (oslo, klog, journald, json, syslog, python, "
        "logfmt) reads any of the first 2 lines; give --format, or declare the format in a "
        "--text-rules file"
    )


def test_an_unknown_format_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(QueryError, match=r"unknown --format 'osl'; use auto or one of oslo, klog"):
        settle([b"x"], {"text_format": "osl"})


def test_the_openstack_sample_joins_nova_api_and_nova_compute_on_one_instance(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "c.duckdb")
    path = str(FIXTURES / "openstack_2k_head.log")
    assert main(["--db", db, "ingest", "--source", "text", path]) == 0
    with Store(db) as store:
        rows = (
            store.cursor()
            .execute(
                "SELECT service, layer, count(*), count(correlation_id), count(allocation_id) "
                "FROM events GROUP BY ALL ORDER BY ALL"
            )
            .fetchall()
        )
        timeline = timeline_for(store, "allocation_id", INSTANCE)

    # Every line with a request context has its request id ([-] has none); nova-compute's
    # lines of an instance name it, nova-api's only when their URL does; nova-api is placed
    # in api, nova-compute in node, by their names.
    assert rows == [("nova-api", "api", 27, 25, 1), ("nova-compute", "node", 27, 25, 14)]
    services = {event["service"] for event in timeline["events"]}
    assert services == {"nova-api", "nova-compute"}
    delete = next(e for e in timeline["events"] if e["service"] == "nova-api")
    assert (delete["http_method"], delete["http_status"]) == ("DELETE", 204)
    assert delete["http_path"].endswith(f"/servers/{INSTANCE}")
    assert delete["duration_s"] == pytest.approx(0.253438)
    # The delete's request id is the one nova-compute's terminate lines carry.
    terminating = [e for e in timeline["events"] if "Terminating instance" in e["message"]]
    assert [e["correlation_id"] for e in terminating] == [delete["correlation_id"]]


def test_the_built_in_identifier_rules_of_each_format() -> None:
    klog = _events(_parse(_read("klog.log"), layer="node"))
    syslog = _events(_parse(_read("syslog_logger_stderr.log"), layer="node"))
    journald = _events(_parse(_read("journald.json"), layer="node"))
    logrus = _events(_parse(_read("logfmt_logrus.log"), layer="api"))
    zap = _events(_parse(_read("json_zap.log"), layer="api"))

    assert {e.node_id for e in klog} >= {"worker-1"}
    assert REQUEST in {e.correlation_id for e in klog}
    assert {e.node_id for e in syslog} == {"vm"}
    assert {e.node_id for e in journald} == {"vm"}
    assert len({e.node_instance_id for e in journald} - {None}) == 1  # _MACHINE_ID
    assert REQUEST in {e.correlation_id for e in logrus}
    assert "4bf92f3577b34da6a3ce929d0e0e4736" in {e.trace_id for e in zap}
    assert REQUEST in {e.correlation_id for e in zap}


def test_levels_read_as_the_model_reads_them() -> None:
    klog = _events(_parse(_read("klog.log"), layer="node"))
    syslog = _events(_parse(_read("syslog_logger_stderr.log"), layer="node"))

    assert {e.level for e in klog} >= {"info", "warning", "error"}
    assert [e.level for e in syslog] == ["info", "error", "warning"]  # notice, err, warning


def test_a_record_without_a_layer_is_rejected_saying_what_to_give() -> None:
    items = _parse([b"time=2026-11-29T04:29:29Z level=info msg=hello request_id=r-1"])

    [reject] = _rejects(items)
    assert reject.reason == (
        "line 1 (logfmt): no layer for this record (no service, which no layer rule places): "
        "give --layer (node, ingress, api, workflow, db, provider, projection), or a "
        "[[layers]] rule in --text-rules"
    )


def test_the_service_comes_from_the_option_the_record_or_the_file_name() -> None:
    line = [b"time=2026-11-29T04:29:29Z level=info msg=hello"]
    with_app = [b"time=2026-11-29T04:29:29Z level=info msg=hello app=billing-api"]

    [by_file] = _events(_parse(line, "/var/log/provision-agent.log.1"))
    [by_record] = _events(_parse(with_app, "/var/log/x.log", layer="api"))
    [by_option] = _events(_parse(with_app, "/var/log/x.log", service="kubelet"))

    assert (by_file.service, by_file.layer) == ("provision-agent", "node")
    assert (by_record.service, by_record.layer) == ("billing-api", "api")
    assert (by_option.service, by_option.layer) == ("kubelet", "node")


def test_a_refused_identifier_is_noted_and_the_line_kept() -> None:
    line = b'time=2026-11-29T04:29:29Z msg=x request_id="a b<script>" allocation_id=a-1'

    [event] = _events(_parse([line], layer="api"))

    assert (event.correlation_id, event.allocation_id) == (None, "a-1")
    assert set(event.attrs["rejected_ids"]) == {"correlation_id"}
    assert event.attrs["rejected_ids"]["correlation_id"].startswith("field request_id: ")


def test_a_folded_traceback_names_the_error_and_the_owner_reads_it() -> None:
    lines = [
        b"2026-11-29 04:29:29.100 1705 ERROR ironic.conductor.deployments [req-3ea4052c-895d-"
        b"4b64-9e2d-04d64c4d94ab - - - - -] Deploy failed for node "
        b"1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
        b"Traceback (most recent call last):",
        b'  File "/usr/lib/python3/dist-packages/requests/adapters.py", line 517, in send',
        b"requests.exceptions.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
        b"failed: certificate has expired (_ssl.c:992)",
        b"2026-11-29 04:29:30.000 1705 INFO ironic.conductor.manager [-] next",
    ]

    events = _events(_parse(lines, "/var/log/ironic/ironic-conductor.log"))

    first = events[0]
    assert (first.service, first.layer) == ("ironic-conductor", "workflow")
    assert first.node_id == "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
    assert first.correlation_id == REQUEST
    assert first.error_type == "requests.exceptions.SSLError"
    assert first.message.endswith("Deploy failed for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123")
    assert first.raw == b"\n".join(lines[:4]).decode()
    from correlator.ownership import owner_of

    owner = owner_of(first)
    assert owner is not None
    assert owner.owner_layer == "cert"
    assert len(events) == 2


def test_lines_before_any_record_and_past_a_records_bounds_are_rejected() -> None:
    head = b"2026-11-29 04:29:29,123 INFO app start"
    lines = [b"  orphan continuation", head, *([b"  more"] * (MAX_RECORD_LINES + 1))]

    items = _parse(lines, layer="api", text_format="python")

    rejects = _rejects(items)
    assert rejects[0].reason == "line 1 continues no record: none starts before it"
    assert rejects[1].reason == (
        f"line {MAX_RECORD_LINES + 2} would continue the record of line 2 past "
        f"{MAX_RECORD_LINES:,} lines"
    )
    assert len(_events(items)) == 1


def test_a_line_not_utf8_is_kept_marked_and_an_overlong_one_rejected() -> None:
    lines = [
        b"time=2026-11-29T04:29:29Z msg=caf\xe9 allocation_id=a-1",
        b"time=2026-11-29T04:29:30Z msg=" + b"x" * MAX_LINE_BYTES,
    ]

    items = _parse(lines, layer="api", text_format="logfmt")

    [event] = _events(items)
    assert event.message == "caf\ufffd"
    assert event.attrs["encoding"] == "not UTF-8: undecodable bytes replaced with U+FFFD"
    [reject] = _rejects(items)
    assert reject.reason == "line 2 is longer than 1 MiB (1,048,576 bytes)"


def test_the_ingest_warns_when_no_line_can_join(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubelet.log"
    path.write_text("I1129 05:41:07.986784   14013 main.go:22] Starting kubelet\n")

    assert main(["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", "text", str(path)]) == 0

    err = capsys.readouterr().err
    assert f"{path}: --format auto chose klog: it reads 1 of the first 1 lines" in err
    assert "WARNING: 1 of the 1 lines accepted carry no identifier" in err
    assert "an [[identifiers]] rule in a --text-rules file" in err


def test_the_api_reads_text_with_its_parameters_and_says_what_auto_chose(tmp_path: Path) -> None:
    body = (FIXTURES / "openstack_2k_head.log").read_bytes()
    auth = {"Authorization": "Bearer text-token"}
    with Store(tmp_path / "c.duckdb") as store:
        with AsgiClient(create_app(store, token="text-token")) as client:
            auto = client.post("/v1/evidence?source=text&layer=api", content=body, headers=auth)
            named = client.post(
                "/v1/evidence?source=text&format=klog&layer=node", content=body, headers=auth
            )
            wrong = client.post("/v1/evidence?source=text&layer=web", content=body, headers=auth)
        layers = store.cursor().execute("SELECT DISTINCT layer FROM events").fetchall()

    assert auto.status_code == 200, auto.text
    assert auto.json()["accepted"] == 54
    assert auto.json()["notes"] == [
        "http: --format auto chose oslo: it reads 50 of the first 50 lines"
    ]
    assert layers == [("api",)]  # --layer wins over the names; no file name over the body
    assert named.status_code == 200
    assert named.json()["accepted"] == 0  # klog reads none of it: each line a reject
    assert named.json()["rejected"] == 54
    assert wrong.status_code == 400
    assert wrong.json()["detail"] == (
        "query parameter 'layer': 'web' is not a layer; use one of node, ingress, api, "
        "workflow, db, provider, projection"
    )


USER_FORMAT = pattern_format(
    "mine",
    re.compile(r"(?P<time>\S+) (?P<level>[A-Z]+) (?P<request_id>\S+) "),
    start=re.compile(r"\d{4}-"),
)
RULES = TextRules(formats={"mine": USER_FORMAT})
RAW_LINES = st.lists(
    st.binary(max_size=120).map(lambda raw: raw.replace(b"\n", b" "))
    | st.sampled_from(
        [
            line
            for name in ("openstack_2k_head.log", "klog.log", "journald.json")
            for line in _read(name)[:3]
        ]
    )
    | st.just(b"2026-11-29T04:29:29Z ERROR req-1 boom")
    | st.just(b"Traceback (most recent call last):"),
    max_size=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=RAW_LINES, name=st.sampled_from(["auto", "mine", *FORMATS]))
def test_any_input_in_any_format_is_events_or_named_rejects(lines: list[bytes], name: str) -> None:
    items = _parse(lines, "/var/log/any.log", layer="node", rules=RULES, text_format=name)

    for item in items:
        if isinstance(item, Reject):
            assert item.reason.startswith(f"line {item.line_no}"), item.reason
        else:
            assert item.layer == "node"
            assert item.raw.count("\n") < len(lines)
    # A line is in at most one record or reject.
    covered = sum(item.raw.count("\n") + 1 if isinstance(item, Event) else 1 for item in items)
    assert covered <= len(lines)


def test_structlog_json_reads_its_event_as_the_message_and_its_traceback() -> None:
    events = _events(_parse(_read("json_structlog.log"), "/var/log/deployer.log", layer="workflow"))

    assert [e.message for e in events] == ["deploy started", "retrying", "deploy failed"]
    assert [e.level for e in events] == ["info", "warning", "error"]
    assert events[0].allocation_id == INSTANCE
    assert events[2].correlation_id == REQUEST
    assert "TimeoutError: ansible job 4711 timed out" in events[2].attrs["exception"]
