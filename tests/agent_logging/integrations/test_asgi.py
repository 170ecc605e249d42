from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware, Receive, Scope, Send
from agent_logging.integrations.httpx import async_event_hooks, event_hooks, instrument
from tests.conftest import Captured
from tests.servers import uvicorn_server

Capture = Callable[..., Captured]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def _app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(AgentLoggingMiddleware)
    log = agent_logging.get_logger("app")

    @app.get("/work/{allocation_id}")
    async def work(allocation_id: str) -> dict[str, str]:
        with agent_logging.bound(allocation_id=allocation_id):
            log.info("started")
            await asyncio.sleep(0.001)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(
                None, agent_logging.carry_context(lambda: log.info("in a thread"))
            )
            await asyncio.sleep(0)
            log.info("finished")
            return agent_logging.current_ids()

    @app.get("/fail")
    async def fail() -> None:
        raise RuntimeError("boom")

    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    return app


def test_middleware_binds_incoming_ids_and_echoes_the_correlation_id(captured: Capture) -> None:
    sink = captured(service="api", layer="api")
    transport = httpx.ASGITransport(app=_app())

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.get(
                "/work/a-9",
                headers={
                    "traceparent": f"00-{TRACE}-{SPAN}-01",
                    "baggage": "node_id=n-17,correlation_id=c-1",
                },
            )

    response = asyncio.run(call())
    assert response.headers["x-correlation-id"] == "c-1"
    ids = response.json()
    assert (ids["trace_id"], ids["correlation_id"], ids["node_id"]) == (TRACE, "c-1", "n-17")
    assert ids["span_id"] != SPAN  # this service's own span, child of the caller's
    mine = [r for r in sink.records if r["logger"] in ("app", "agent_logging.access")]
    events = [(r["event"], r.get("allocation_id"), r["correlation_id"]) for r in mine]
    assert events == [
        ("started", "a-9", "c-1"),
        ("in a thread", "a-9", "c-1"),
        ("finished", "a-9", "c-1"),
        ("request", None, "c-1"),
    ]
    access = mine[-1]
    assert access["method"] == "GET" and access["path"] == "/work/a-9" and access["status"] == 200
    assert access["parent_span_id"] == SPAN
    assert isinstance(access["duration_s"], float)


def test_middleware_mints_ids_logs_failures_and_skips_quiet_paths(captured: Capture) -> None:
    sink = captured()
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)

    async def calls() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return [
                await client.get("/fail", headers={"X-Correlation-ID": "bad id"}),
                await client.get("/healthz"),
            ]

    failed, healthy = asyncio.run(calls())
    assert failed.status_code == 500 and healthy.status_code == 200
    minted = failed.headers["x-correlation-id"]
    assert agent_logging.ids_from_payload({"correlation_id": minted}) == {"correlation_id": minted}
    warning, access = [r for r in sink.records if r["logger"] == "agent_logging.access"]
    assert warning["event"] == "incoming identifier ignored"
    assert warning["problem"].startswith("X-Correlation-ID header: correlation_id holds ' '")
    assert (access["event"], access["status"], access["level"]) == ("request", 500, "error")
    assert access["correlation_id"] == minted == warning["correlation_id"]


@pytest.mark.integration
def test_200_concurrent_requests_never_see_each_others_ids(captured: Capture) -> None:
    sink = captured(service="api", layer="api")
    with uvicorn_server(_app()) as url:

        async def burst() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
                return await asyncio.gather(
                    *(
                        client.get(f"/work/a-{n}", headers={"X-Correlation-ID": f"c-{n}"})
                        for n in range(200)
                    )
                )

        responses = asyncio.run(burst())
    assert all(r.status_code == 200 for r in responses)
    records = [r for r in sink.records if r["logger"] == "app"]
    assert len(records) == 600
    for record in records:
        assert record["allocation_id"] == "a-" + record["correlation_id"].removeprefix("c-")
    traces = {r["correlation_id"]: r["trace_id"] for r in records}
    assert len(set(traces.values())) == 200


def test_outbound_hooks_inject_only_to_allowed_hosts(captured: Capture) -> None:
    captured(propagate_hosts=("inventory.internal",))
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(200)

    transport = httpx.MockTransport(handler)
    with agent_logging.bound(allocation_id="a-9", correlation_id="c-1"):
        with httpx.Client(transport=transport, event_hooks=event_hooks()) as client:
            client.get("http://inventory.internal/x")
            client.get("https://api.thirdparty.example/x")
        with instrument(httpx.Client(transport=transport), ["other.internal"]) as client:
            client.get("http://other.internal/x")
            client.get("http://inventory.internal/x")

        async def async_call() -> None:
            async with httpx.AsyncClient(
                transport=transport, event_hooks=async_event_hooks()
            ) as client:
                await client.get("http://inventory.internal/y")

        asyncio.run(async_call())
    assert [h.get("baggage") for h in seen] == [
        "correlation_id=c-1,allocation_id=a-9",
        None,
        "correlation_id=c-1,allocation_id=a-9",
        None,
        "correlation_id=c-1,allocation_id=a-9",
    ]
    assert seen[0]["x-correlation-id"] == "c-1"
    assert "traceparent" not in seen[1] and "x-correlation-id" not in seen[1]


def test_requests_adapter_injects_only_to_allowed_hosts(
    captured: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import requests

    from agent_logging.integrations.requests import PropagatingAdapter
    from agent_logging.integrations.requests import instrument as instrument_session

    captured()
    sent: list[requests.PreparedRequest] = []

    def fake_send(
        self: requests.adapters.HTTPAdapter, request: requests.PreparedRequest, **kwargs: object
    ) -> requests.Response:
        sent.append(request)
        response = requests.Response()
        response.status_code = 204
        return response

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", fake_send)
    session = instrument_session(requests.Session(), ["127.0.0.1"])
    assert isinstance(session.get_adapter("https://x/"), PropagatingAdapter)
    with agent_logging.bound(workflow_id="wf-2"):
        session.get("http://127.0.0.1:9/x")
        session.get("http://example.org/x")
    assert sent[0].headers["baggage"] == "workflow_id=wf-2"
    assert "baggage" not in sent[1].headers


@pytest.mark.integration
def test_identifiers_flow_across_a_real_http_hop_and_a_subprocess(tmp_path: Path) -> None:
    from examples.two_services import run_demo

    records = run_demo(tmp_path)
    by_service: dict[str, list[dict[str, str]]] = {}
    for record in records:
        by_service.setdefault(record["service"], []).append(record)
    assert set(by_service) == {"provisioner", "inventory", "deploy-job"}
    requested = next(r for r in by_service["provisioner"] if r["event"] == "allocation requested")
    reserved = next(r for r in by_service["inventory"] if r["event"] == "node reserved")
    job = by_service["deploy-job"][0]
    for record in (reserved, job):
        assert record["correlation_id"] == requested["correlation_id"]
        assert record["trace_id"] == requested["trace_id"]
        assert record["allocation_id"] == "a-9"
        assert record["workflow_id"] == "wf-a-9"
    assert job["node_id"] == "n-17"
    inventory_access = next(
        r for r in by_service["inventory"] if r.get("path") == "/v1/nodes/reserve"
    )
    assert inventory_access["parent_span_id"] == requested["span_id"]


def _baggage_seen_inside_a_request(middleware_options: dict[str, Any]) -> dict[str, Any]:
    """What OpenTelemetry and the library would send from inside a request to the
    middleware: OpenTelemetry's W3C baggage propagator's header (what any instrumented client
    adds, for any host), the baggage entries, and ``agent_logging.headers()``."""
    from opentelemetry import baggage
    from opentelemetry.baggage.propagation import W3CBaggagePropagator

    seen: dict[str, Any] = {}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        carrier: dict[str, str] = {}
        W3CBaggagePropagator().inject(carrier)
        seen["otel"] = carrier.get("baggage")
        seen["entries"] = dict(baggage.get_all())
        seen["ours"] = agent_logging.headers().get("baggage")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    transport = httpx.ASGITransport(app=AgentLoggingMiddleware(app, **middleware_options))

    async def call() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            await client.get(
                "/x", headers={"X-Correlation-ID": "c-1", "baggage": "allocation_id=a-9"}
            )

    asyncio.run(call())
    seen["after"] = dict(baggage.get_all())
    return seen


def test_identifiers_stay_out_of_opentelemetry_baggage_by_default(captured: Capture) -> None:
    captured()  # no propagate_hosts: nothing may carry the identifiers to any host
    seen = _baggage_seen_inside_a_request({})
    assert seen["otel"] is None
    assert seen["entries"] == {}
    # The library's own carrier still has them, for its hooks to send to allowed hosts.
    assert seen["ours"] == "correlation_id=c-1,allocation_id=a-9"


def test_otel_baggage_opts_in_to_opentelemetry_propagating_the_identifiers(
    captured: Capture,
) -> None:
    captured()
    seen = _baggage_seen_inside_a_request({"otel_baggage": True})
    assert seen["otel"] == "correlation_id=c-1,allocation_id=a-9"
    assert seen["entries"] == {"correlation_id": "c-1", "allocation_id": "a-9"}
    assert seen["after"] == {}  # detached when the request ends
