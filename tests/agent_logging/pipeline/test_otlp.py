"""The OpenTelemetry Logs path: records exported over OTLP/HTTP to a collector."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

import agent_logging


class _Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportLogsServiceRequest] = []
        self.received = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportLogsServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append(request)
        self.server.received.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.integration
def test_records_reach_an_otlp_collector_with_identifiers_as_attributes(
    collector: _Collector,
) -> None:
    agent_logging.configure(
        service="node-agent",
        layer="node",
        env="prod",
        output="none",
        otlp_endpoint=f"{collector.url}/v1/logs",
    )
    with agent_logging.bound(node_id="n-17", allocation_id="a-9"):
        agent_logging.get_logger("agent").warning("task claimed", task="reimage")
    agent_logging.shutdown(timeout_s=10)
    assert collector.received.wait(10)
    resource_logs = collector.requests[0].resource_logs[0]
    resource = {a.key: a.value.string_value for a in resource_logs.resource.attributes}
    assert resource["service.name"] == "node-agent"
    assert resource["deployment.environment.name"] == "prod"
    record = resource_logs.scope_logs[0].log_records[0]
    attributes = {a.key: a.value.string_value for a in record.attributes}
    assert record.body.string_value == "task claimed"
    assert record.severity_text == "warning"
    assert record.time_unix_nano > 0
    assert attributes["node_id"] == "n-17"
    assert attributes["allocation_id"] == "a-9"
    assert attributes["task"] == "reimage"
    assert attributes["layer"] == "node"
