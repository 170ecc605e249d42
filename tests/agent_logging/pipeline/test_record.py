"""The record of DESIGN §4, as written by structlog and stdlib loggers alike."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import agent_logging
from agent_logging.pipeline import _pipeline
from agent_logging.pipeline._processors import MAX_STACK_CHARS
from tests.conftest import Captured

Capture = Callable[..., Captured]
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z")


def test_a_record_holds_the_envelope_identifiers_and_fields(captured: Capture) -> None:
    sink = captured(service="node-agent", layer="node", env="prod")
    log = agent_logging.get_logger("agent.tasks")
    agent_logging.bind(node_id="n-17", node_instance_id="ni-3")
    with agent_logging.bound(allocation_id="a-9", workflow_id="wf-2"):
        log.info("task claimed", task="reimage")
    record = sink.last()
    assert TS.fullmatch(record.pop("ts"))
    assert record == {
        "level": "info",
        "event": "task claimed",
        "service": "node-agent",
        "layer": "node",
        "env": "prod",
        "node_id": "n-17",
        "node_instance_id": "ni-3",
        "allocation_id": "a-9",
        "workflow_id": "wf-2",
        "logger": "agent.tasks",
        "task": "reimage",
    }
    assert list(orjson.loads(sink.lines[-1]))[:6] == [
        "ts",
        "level",
        "event",
        "service",
        "layer",
        "env",
    ]


def test_call_site_fields_named_like_the_envelope_do_not_replace_it(captured: Capture) -> None:
    # "the service this call concerns", a job's env: kept, but not as the record's own.
    sink = captured(service="node-agent", layer="node", env="prod")
    log = agent_logging.get_logger("agent.tasks").bind(service="payments")
    log.info("calling", env="staging", level="error", ts="yesterday", layer="db", task="x")
    logging.getLogger("lib").warning("from a library", extra={"env": "dev"})
    record, library = sink.records[-2:]
    assert TS.fullmatch(record.pop("ts"))
    assert record == {
        "level": "info",
        "event": "calling",
        "service": "node-agent",
        "layer": "node",
        "env": "prod",
        "logger": "agent.tasks",
        "service_field": "payments",
        "env_field": "staging",
        "level_field": "error",
        "ts_field": "yesterday",
        "layer_field": "db",
        "task": "x",
    }
    assert (library["env"], library["env_field"], library["level"]) == ("prod", "dev", "warning")


def test_ts_is_stamped_once_with_nanoseconds(
    captured: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = captured()
    monkeypatch.setattr(_pipeline.time, "time_ns", lambda: 1_795_871_479_123_456_789)
    agent_logging.get_logger().warning("clock check")
    assert sink.last()["ts"] == "2026-11-28T13:11:19.123456789Z"
    assert sink.last()["level"] == "warning"


def test_unknown_identifiers_are_absent_never_empty(captured: Capture) -> None:
    sink = captured()
    agent_logging.get_logger().info("no ids")
    record = sink.last()
    for key in agent_logging.IDENTIFIER_KEYS:
        assert key not in record


def test_process_wide_ids_apply_in_every_thread_and_context_wins(captured: Capture) -> None:
    import threading

    sink = captured(ids={"node_id": "n-1"})
    log = agent_logging.get_logger()
    thread = threading.Thread(target=lambda: log.info("from a thread"))
    thread.start()
    thread.join(5)
    with agent_logging.bound(node_id="n-2"):
        log.info("overridden")
    assert [(r["event"], r["node_id"]) for r in sink.records] == [
        ("from a thread", "n-1"),
        ("overridden", "n-2"),
    ]


def test_level_filtering_and_names(captured: Capture) -> None:
    sink = captured(level="warning")
    log = agent_logging.get_logger()
    log.debug("hidden")
    log.info("hidden")
    log.warning("shown")
    log.error("shown")
    log.critical("shown")
    logging.getLogger("lib").info("hidden")
    logging.getLogger("lib").error("shown")
    assert [r["level"] for r in sink.records] == ["warning", "error", "critical", "error"]


def test_exceptions_carry_error_with_owner_layer_and_chain(captured: Capture) -> None:
    sink = captured()
    log = agent_logging.get_logger()
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as inner:
            raise RuntimeError("provisioning failed") from inner
    except RuntimeError:
        log.exception("provision step failed")
    error = sink.last()["error"]
    assert sink.last()["level"] == "error"
    assert error["type"] == "RuntimeError"
    assert error["message"] == "provisioning failed"
    assert error["owner_layer"] == "ingress"
    assert [link["type"] for link in error["chain"]] == ["RuntimeError", "ConnectionRefusedError"]
    assert "Traceback" in error["stack"]
    assert "exc_info" not in sink.last()


def test_explicit_owner_layer_wins_and_works_without_an_exception(captured: Capture) -> None:
    sink = captured()
    log = agent_logging.get_logger()
    try:
        raise FileNotFoundError(2, "No such file or directory", "/usr/bin/ansible-playbook")
    except FileNotFoundError as exc:
        log.error("deploy failed", exc_info=exc, owner_layer="provider")
    assert sink.last()["error"]["owner_layer"] == "provider"
    log.error("release failed", owner_layer="workflow_state")
    assert sink.last()["error"] == {
        "type": "failure",
        "message": "release failed",
        "owner_layer": "workflow_state",
        "chain": [],
    }
    log.error("odd", owner_layer="the moon")
    assert sink.last()["error"]["owner_layer"] == "unknown"
    assert sink.last()["error"]["owner_layer_invalid"] == "the moon"


def test_stdlib_records_from_libraries_carry_the_same_fields(captured: Capture) -> None:
    sink = captured(service="api", layer="api")
    third_party = logging.getLogger("urllib3.connectionpool")
    with agent_logging.bound(correlation_id="c-1", allocation_id="a-9"):
        third_party.warning(
            "Retrying (%s) after %s", "Retry(total=2)", "timeout", extra={"host": "inv"}
        )
        try:
            raise TimeoutError("read timed out")
        except TimeoutError:
            third_party.exception("gave up")
    first, second = sink.records
    assert first["event"] == "Retrying (Retry(total=2)) after timeout"
    assert first["logger"] == "urllib3.connectionpool"
    assert first["host"] == "inv"
    assert (first["correlation_id"], first["allocation_id"], first["service"]) == (
        "c-1",
        "a-9",
        "api",
    )
    assert second["error"]["type"] == "TimeoutError"


def test_a_broken_format_string_in_a_library_is_logged_not_raised(captured: Capture) -> None:
    sink = captured()
    logging.getLogger("lib").error("%d items", "not a number")
    assert sink.last()["event"].startswith("unformattable log message: '%d items'")


def test_call_site_identifiers_are_checked(captured: Capture) -> None:
    sink = captured()
    agent_logging.get_logger().info("claimed", allocation_id='a-9\n{"level":"fake"}', node_id=17)
    record = sink.last()
    assert "allocation_id" not in record
    assert record["node_id"] == "17"
    assert record["rejected_ids"]["allocation_id"]["reason"].startswith("holds '\\n' (U+000A)")
    assert len(sink.lines) == 1


@pytest.mark.parametrize("given", [7, "text", None, {"workflow_id": {"reason": "earlier"}}])
def test_a_rejected_identifier_beside_a_field_named_rejected_ids(
    captured: Capture, given: object
) -> None:
    # A field of that name that is not a dict once lost the whole record.
    sink = captured()
    kept = {"workflow_id": {"reason": "earlier"}}
    agent_logging.get_logger().info("claimed", allocation_id="a\n", rejected_ids=given)
    record = sink.last()
    assert record["rejected_ids"]["allocation_id"]["reason"].startswith("holds '\\n'")
    if isinstance(given, dict):
        assert record["rejected_ids"]["workflow_id"] == {"reason": "earlier"}
        assert given == kept  # the caller's dict is not changed
        assert "rejected_ids_field" not in record
    elif given is not None:
        assert record["rejected_ids_field"] == given
    assert len(sink.lines) == 1


def test_secrets_are_redacted_before_rendering(captured: Capture) -> None:
    sink = captured()
    agent_logging.get_logger().info(
        "calling https://bob:s3cr3t@inventory/x",
        password="hunter2",
        headers={"Authorization": "Bearer abc"},
    )
    line = sink.lines[-1]
    assert b"s3cr3t" not in line and b"hunter2" not in line and b"abc" not in line


def test_odd_values_render_and_huge_records_are_cut_not_lost(captured: Capture) -> None:
    sink = captured()
    log = agent_logging.get_logger()
    log.info("odd", blob=b"\xff\x00ok", tags={"b", "a"}, big=2**70, obj=object())
    record = sink.last()
    assert record["blob"] == "\\xff\x00ok"
    assert record["big"] == 2**70
    log.info("huge", dump="x" * 400_000, allocation_id="a-9")
    record = sink.last()
    assert len(sink.lines[-1]) < 256 * 1024
    assert record["allocation_id"] == "a-9"
    assert record["truncated"]["fields"] == {"dump": 400_000}
    assert record["dump"].endswith("...[truncated 398976 chars]")


def test_a_huge_record_is_cut_after_redaction(captured: Capture) -> None:
    # The cut that keeps an oversized record (render, after redaction) splits the URL from
    # its "@": cut first, the password would no longer be recognised.
    sink = captured()
    url = "postgres://app:hunter2"
    dump = "x" * (1024 - len(url)) + url + "@db/x " + "y" * 400_000
    agent_logging.get_logger().info("huge", dump=dump)
    record = sink.last()
    assert record["dump"] == "x" * 1002 + "postgres://app:[REDACT...[truncated 400009 chars]"
    assert b"hunter2" not in sink.lines[-1]


def _private_key_pem(kind: str) -> str:
    """A new private key, as a deploy step that failed to parse one would print it."""
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    ec_key = ec.generate_private_key(ec.SECP384R1())
    return ec_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _key_error(pem: str, pad: int) -> BaseException:
    """A failure to parse ``pem`` wrapped in an error whose message is ``pad`` long."""
    try:
        try:
            raise ValueError(f"cannot parse key material: {pem}")
        except ValueError as cause:
            raise RuntimeError("provisioning failed: " + "x" * pad) from cause
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_a_private_key_the_stack_limit_cuts_through_is_redacted(
    captured: Capture, kind: str
) -> None:
    # error.stack keeps the last 8192 characters. The inner exception, holding the key, is
    # printed first: the outer one's message is padded so that the cut falls in the middle of
    # the key, below its BEGIN line, where its base64 lines are no longer recognisable.
    pem = _private_key_pem(kind)
    body = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    stack = "".join(traceback.format_exception(_key_error(pem, 0)))
    middle = (stack.index("-----BEGIN") + stack.index("-----END")) // 2
    exc = _key_error(pem, middle + MAX_STACK_CHARS - len(stack))
    stack = "".join(traceback.format_exception(exc))
    assert stack.index("-----BEGIN") < len(stack) - MAX_STACK_CHARS < stack.index("-----END")
    sink = captured()
    agent_logging.get_logger().error("provisioning failed", exc_info=exc)
    line = sink.lines[-1].decode()
    assert [key_line for key_line in body if key_line in line] == []
    error = sink.last()["error"]
    assert "[REDACTED PRIVATE KEY]" in error["stack"]
    assert error["chain"][1]["message"] == "cannot parse key material: [REDACTED PRIVATE KEY]\n"


def test_an_exception_message_cut_between_a_password_and_its_at_is_redacted(
    captured: Capture,
) -> None:
    sink = captured()
    url = "postgres://app:hunter2"
    message = "x" * (2048 - len(url)) + url + "@db.internal:5432/app failed"
    try:
        try:
            raise ValueError(message)
        except ValueError as cause:
            raise ConnectionError(message) from cause
    except ConnectionError:
        agent_logging.get_logger().exception("db")
    error = sink.last()["error"]
    shown = "x" * 2026 + "postgres://app:[REDACT"
    assert error["message"] == shown
    assert [link["message"] for link in error["chain"]] == [shown, shown]
    assert error["stack"].endswith("postgres://app:[REDACTED]@db.internal:5432/app failed\n")
    assert b"hunter2" not in sink.lines[-1]


def test_values_kept_in_part_are_redacted_before_they_are_cut(captured: Capture) -> None:
    # An invalid owner layer is kept to 100 characters, a rejected identifier to 300 (its
    # repr, which adds a quote before it): both cuts fall between a password and its "@".
    sink = captured()
    log = agent_logging.get_logger()
    url = "postgres://app:hunter2"
    log.error("release failed", owner_layer="x" * 78 + url + "@db/x")
    assert sink.last()["error"]["owner_layer_invalid"] == "x" * 78 + "postgres://app:[REDACT"
    log.info("claimed", allocation_id="x" * 277 + url + "@db/x")
    rejected = sink.last()["rejected_ids"]["allocation_id"]
    assert rejected["value"] == "'" + "x" * 277 + "postgres://app:[REDACT"
    assert rejected["reason"] == "is 304 characters long; at most 256 are allowed"
    assert b"hunter2" not in b"".join(sink.lines)


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


@pytest.mark.parametrize("how", ["call", "bind", "extra"])
@pytest.mark.parametrize(
    ("fields", "rejected"),
    [
        ({"trace_id": "password=hunter2", "span_id": "x"}, ["trace_id", "span_id"]),
        ({"trace_id": "ab" * 40_000}, ["trace_id"]),
        ({"trace_id": TRACE_ID.upper(), "span_id": SPAN_ID}, ["trace_id"]),
        ({"trace_id": TRACE_ID, "span_id": SPAN_ID.upper()}, ["span_id"]),
        ({"trace_id": "0" * 32, "span_id": "0" * 16}, ["trace_id", "span_id"]),
        ({"trace_id": TRACE_ID, "span_id": SPAN_ID}, []),
        # With one of the five identifiers, checked before the bound ids are merged in.
        ({"trace_id": "token=hunter2", "node_id": "n-1"}, ["trace_id"]),
    ],
    ids=["hostile", "too long", "upper-case", "upper-case span", "all zeros", "valid", "with id"],
)
def test_call_site_trace_ids_must_be_w3c_trace_context(
    captured: Capture, fields: dict[str, str], rejected: list[str], how: str
) -> None:
    sink = captured()
    if how == "call":
        agent_logging.get_logger().info("hello", **fields)
    elif how == "bind":
        agent_logging.get_logger().bind(**fields).info("hello")
    else:
        logging.getLogger("lib").warning("hello", extra=fields)
    record = sink.last()
    assert sorted(record.get("rejected_ids", {})) == sorted(rejected)
    for key, value in fields.items():
        if key in rejected:
            assert key not in record
            assert record["rejected_ids"][key]["reason"].endswith(
                "not all zero (W3C trace-context)"
            )
            assert len(record["rejected_ids"][key]["value"]) <= 300
        else:
            assert record[key] == value
    assert b"hunter2" not in sink.lines[-1]
    assert len(sink.lines[-1]) < 2048  # 80 KB of trace id made Loki refuse the whole record


class _NoRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("fields", "key", "shown", "reason"),
    [
        (
            {"node_id": 10**5000},  # past int's str() limit: the whole record was lost
            "node_id",
            "<unrepresentable int object>",
            "is an integer longer than 256 digits",
        ),
        (
            {"trace_id": _NoRepr()},
            "trace_id",
            "<unrepresentable _NoRepr object>",
            "must be a string, got _NoRepr",
        ),
    ],
    ids=["huge int", "broken repr"],
)
def test_a_call_site_value_that_cannot_be_shown_is_rejected_not_lost(
    captured: Capture, fields: dict[str, object], key: str, shown: str, reason: str
) -> None:
    sink = captured()
    agent_logging.get_logger().info("claimed", **fields)
    assert sink.last()["rejected_ids"] == {key: {"value": shown, "reason": reason}}
    assert agent_logging.health()["failures"] == 0


def test_a_rejected_trace_id_gives_way_to_the_bound_one_and_a_span_wins(
    captured: Capture,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    sink = captured()
    log = agent_logging.get_logger()
    with agent_logging.bound(trace_id=TRACE_ID, span_id=SPAN_ID):
        log.info("bound", trace_id="password=hunter2")
    with TracerProvider().get_tracer("test").start_as_current_span("claim") as span:
        log.info("span", trace_id="password=hunter2", span_id="x")
        context = span.get_span_context()
    bound, spanned = sink.records
    assert (bound["trace_id"], bound["span_id"]) == (TRACE_ID, SPAN_ID)
    assert bound["rejected_ids"]["trace_id"]["value"] == "'password=[REDACTED]'"
    assert (spanned["trace_id"], spanned["span_id"]) == (
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    assert b"hunter2" not in b"".join(sink.lines)


class _Broken:
    def write(self, *args: Any) -> None:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        return


def test_a_failing_sink_never_raises_and_is_counted(capsys: pytest.CaptureFixture[str]) -> None:
    agent_logging.configure(service="s", layer="api", output=_Broken())
    log = agent_logging.get_logger()
    log.info("one")
    log.info("two")
    health = agent_logging.health()
    assert (health["records"], health["failures"]) == (2, 2)
    err = capsys.readouterr().err
    assert err.count("No space left on device") == 1


def test_reconfiguring_keeps_existing_loggers_working(captured: Capture) -> None:
    log = agent_logging.get_logger("early")
    first = captured(service="one")
    log.info("a")
    second = captured(service="two")
    log.info("b")
    assert [r["service"] for r in first.records] == ["one"]
    assert [r["service"] for r in second.records] == ["two"]
    agent_logging.shutdown()
    log.info("after shutdown goes nowhere")
    assert len(second.records) == 1


def test_console_format_is_readable(captured: Capture) -> None:
    import io

    stream = io.StringIO()
    agent_logging.configure(service="s", layer="node", output=stream, format="console")
    with agent_logging.bound(node_id="n-17"):
        agent_logging.get_logger().info("hello there")
    text = stream.getvalue()
    assert "hello there" in text and "node_id" in text and "n-17" in text
    assert not text.startswith("{")


def test_rotating_file_output_keeps_exactly_the_newest_records_that_fit(tmp_path: Any) -> None:
    path = tmp_path / "agent.jsonl"
    agent_logging.configure(
        service="s",
        layer="node",
        env="dev",
        output="none",
        file_path=path,
        file_max_bytes=2000,
        file_backups=2,
    )
    log = agent_logging.get_logger()
    for n in range(60):
        log.info("line", n=n)
    agent_logging.shutdown()
    lines = {p.name: p.read_bytes().splitlines() for p in tmp_path.iterdir()}
    # A record is 117 bytes and its newline from n=10 on (one less before): the first file
    # took records 0-16 (1,996 bytes), each later one 2000 // 118 = 16 records. The third
    # rotation dropped 0-16; the backups hold the next two files, the file the last 11.
    assert {name: [orjson.loads(line)["n"] for line in kept] for name, kept in lines.items()} == {
        "agent.jsonl": list(range(49, 60)),
        "agent.jsonl.1": list(range(33, 49)),
        "agent.jsonl.2": list(range(17, 33)),
    }
    assert {len(line) for kept in lines.values() for line in kept} == {117}


def test_active_opentelemetry_span_ids_are_in_every_record(captured: Capture) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    sink = captured()
    log = agent_logging.get_logger()
    with tracer.start_as_current_span("claim") as span:
        log.info("inside")
        context = span.get_span_context()
    log.info("outside")
    inside, outside = sink.records
    assert inside["trace_id"] == f"{context.trace_id:032x}"
    assert inside["span_id"] == f"{context.span_id:016x}"
    assert "trace_id" not in outside
    with tracer.start_as_current_span("pivot"):
        assert agent_logging.current_ids()["trace_id"] != inside["trace_id"]
        headers = agent_logging.headers()
    assert headers["traceparent"].startswith("00-")


def test_configuration_errors_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        agent_logging.ConfigurationError, match="AGENT_LOGGING_LAYER / layer: expected one of"
    ):
        agent_logging.configure(service="s", layer="kernel")
    monkeypatch.setenv("AGENT_LOGGING_LEVEL", "loud")
    with pytest.raises(
        agent_logging.ConfigurationError, match="AGENT_LOGGING_LEVEL: expected one of"
    ):
        agent_logging.configure(service="s", layer="api")
    monkeypatch.delenv("AGENT_LOGGING_LEVEL")
    monkeypatch.setenv("AGENT_LOGGING_SHIPPER", "fork")
    with pytest.raises(
        agent_logging.ConfigurationError,
        match="AGENT_LOGGING_SHIPPER: expected one of thread, process, got 'fork'",
    ):
        agent_logging.configure(service="s", layer="api")
    monkeypatch.delenv("AGENT_LOGGING_SHIPPER")
    with pytest.raises(agent_logging.ConfigurationError, match="only spool_dir was given"):
        agent_logging.configure(service="s", layer="api", spool_dir="/tmp/x")
    with pytest.raises(agent_logging.ConfigurationError, match="unknown options: colour"):
        agent_logging.configure(service="s", layer="api", colour=True)


def test_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENT_LOGGING_SERVICE", "from-env")
    monkeypatch.setenv("AGENT_LOGGING_LAYER", "db")
    monkeypatch.setenv("AGENT_LOGGING_OUTPUT", "stdout")
    monkeypatch.setenv("AGENT_LOGGING_FORMAT", "json")
    monkeypatch.setenv("AGENT_LOGGING_NODE_ID", "n-env")
    monkeypatch.setenv("AGENT_LOGGING_ALLOCATION_ID", "bad id")
    settings = agent_logging.configure()
    agent_logging.get_logger().info("hi")
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert settings.service == "from-env"
    assert lines[0]["event"] == "inherited identifier ignored"
    assert "AGENT_LOGGING_ALLOCATION_ID" in lines[0]["problem"]
    assert (lines[1]["service"], lines[1]["layer"], lines[1]["node_id"]) == (
        "from-env",
        "db",
        "n-env",
    )


def test_the_http_stack_logging_about_our_own_shipping_is_not_shipped(captured: Capture) -> None:
    import threading

    sink = captured(level="debug")

    def ship() -> None:
        logging.getLogger("httpx").info("HTTP Request: POST http://loki/loki/api/v1/push")
        logging.getLogger("urllib3.connectionpool").debug("Starting new HTTP connection")
        logging.getLogger("app").info("the service's own record, even on this thread")

    for name in ("agent-logging-shipper", "OtelBatchLogRecordProcessor"):
        thread = threading.Thread(target=ship, name=name)
        thread.start()
        thread.join(5)
    logging.getLogger("httpx").info("the service's own HTTP call")
    assert [r["event"] for r in sink.records] == [
        "the service's own record, even on this thread",
        "the service's own record, even on this thread",
        "the service's own HTTP call",
    ]


def test_a_10_kb_identifier_never_crashes_logging(captured: Capture) -> None:
    sink = captured()
    huge = "a" * 10240
    with pytest.raises(agent_logging.InvalidIdentifierError, match="10240 characters long"):
        agent_logging.bind(allocation_id=huge)
    agent_logging.get_logger().info("claimed", allocation_id=huge)
    record = sink.last()
    assert "allocation_id" not in record
    assert record["rejected_ids"]["allocation_id"]["reason"].startswith("is 10240 characters")
    assert len(record["rejected_ids"]["allocation_id"]["value"]) == 300
