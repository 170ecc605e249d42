"""The correlator's service logs through agent_logging, with the request's identifiers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from correlator.api import create_app
from correlator.store import Store
from tests.asgi_client import AsgiClient

RECORD = {
    "ts": "2026-11-22T13:11:19.5Z",
    "level": "error",
    "event": "provisioning failed",
    "layer": "api",
    "allocation_id": "a-9",
}


def test_requests_and_ingests_are_logged_with_the_request_identifiers(
    store: Store, captured: Callable[..., Any]
) -> None:
    sink = captured(service="correlator", layer="api")
    app = create_app(store, token="t")
    with AsgiClient(app) as client:
        posted = client.post(
            "/v1/evidence?source=ndjson",
            content=orjson.dumps(RECORD) + b"\nnot json\n",
            headers={"Authorization": "Bearer t", "X-Correlation-ID": "c-77"},
        )
        refused = client.post("/v1/evidence?source=ndjson", content=b"{}")

    assert (posted.status_code, refused.status_code) == (200, 401)
    assert posted.headers["X-Correlation-ID"] == "c-77"
    records = sink.records
    (ingested,) = [r for r in records if r["event"] == "evidence ingested"]
    assert ingested["service"] == "correlator"
    assert ingested["correlation_id"] == "c-77"  # the caller's, carried into the handler
    assert (ingested["source"], ingested["accepted"]) == ("ndjson", 1)
    requests = [r for r in records if r["event"] == "request"]
    assert [(r["method"], r["status"]) for r in requests] == [("POST", 200), ("POST", 401)]
    assert requests[0]["correlation_id"] == "c-77"
    # A request that brought none got one minted, echoed back and logged.
    minted = requests[1]["correlation_id"]
    assert minted and minted != "c-77"
    # The bearer token never reaches a record.
    assert b"Bearer t" not in sink.stream.getvalue()
