"""uvicorn's and gunicorn's own logging, routed through the pipeline."""

from __future__ import annotations

import io
import logging
import logging.config

import orjson
import pytest
import uvicorn.config

import agent_logging
from agent_logging.integrations.servers import SERVER_LOGGERS, route_server_logs


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines() if line]


def test_uvicorns_access_and_error_lines_become_records(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    agent_logging.configure(service="api", layer="api", format="json")
    # What uvicorn.run does with its default log_config: handlers of its own, no propagation.
    logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)
    try:
        route_server_logs()
        # As uvicorn's protocols log them (uvicorn/protocols/http/httptools_impl.py).
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/v1/x", "1.1", 200
        )
        logging.getLogger("uvicorn.error").info(
            "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)",
            "http",
            "127.0.0.1",
            8000,
            extra={"color_message": "Uvicorn running on \x1b[1m%s://%s:%d\x1b[0m"},
        )
    finally:
        agent_logging.shutdown()
    records = _records(out)
    assert [(r["logger"], r["event"]) for r in records] == [
        ("uvicorn.access", '127.0.0.1:5000 - "GET /v1/x HTTP/1.1" 200'),
        ("uvicorn.error", "Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)"),
    ]
    assert all(r["service"] == "api" for r in records)
    assert "color_message" not in records[1]
    assert "\x1b" not in out.getvalue()


def test_every_server_logger_propagates_with_no_handler_of_its_own() -> None:
    for name in SERVER_LOGGERS:
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False
    route_server_logs()
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        assert (logger.handlers, logger.propagate, logger.level) == ([], True, logging.NOTSET)
