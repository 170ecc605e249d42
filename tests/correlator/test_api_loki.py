"""``GET /v1/timeline`` of a service started with a Loki (``correlator._pulls``): it pulls the
incident from the Loki test server into its store first, hop by hop, and says what it asked.
The pull itself is ``tests/correlator/test_loki_pull.py``'s subject; here, what the service
adds: one pull per seed and window in flight, a pull's writes seen by the reads after it,
Loki's failures answered as 502s that name the setting, and nothing changed without a Loki.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from agent_logging.loki import LokiClient
from correlator._pulls import Pulls
from correlator.api import create_app
from correlator.cli import main
from correlator.store import Store
from tests.asgi_client import AsgiClient
from tests.correlator.loki_incident import WINDOW_S, Incident, push_records
from tests.lokisim import LokiServer
from tests.servers import free_port

pytestmark = pytest.mark.integration

LAYERS = {"ingress", "api", "workflow", "db", "node"}


class Recording(httpx.BaseTransport):
    """The network, with every query to Loki recorded, each held ``delay_s`` first (so that
    requests to the service overlap while a pull is in flight)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.network = httpx.HTTPTransport()
        self.delay_s = delay_s
        self.queries: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.queries.append(request.url.params["query"])
        threading.Event().wait(self.delay_s)
        return self.network.handle_request(request)

    def close(self) -> None:
        self.network.close()


@pytest.fixture
def case(loki: LokiServer) -> Incident:
    """An incident and its busy node's other work, in the test server."""
    incident = Incident()
    with LokiClient(loki.url) as client:
        push_records(client, incident.own() + incident.others())
    return incident


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "service.duckdb") as opened:
        yield opened


def _pulling_app(store: Store, url: str, case: Incident, transport: httpx.BaseTransport) -> Any:
    client = LokiClient(url, transport=transport)
    pulls = Pulls(client, base_selector=case.selector, window_s=WINDOW_S)
    return create_app(store, token=None, loki=pulls), client


def test_the_timeline_is_pulled_from_loki_across_five_layers(
    loki: LokiServer, case: Incident, store: Store
) -> None:
    transport = Recording()
    app, client = _pulling_app(store, loki.url, case, transport)
    with client, AsgiClient(app) as service:
        answer = service.get(f"/v1/timeline?allocation_id={case.id('a')}")
        asked = len(transport.queries)
        generation = store.generation
        again = service.get(f"/v1/timeline?allocation_id={case.id('a')}&since=2h")

    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert {event["layer"] for event in data["events"]} == LAYERS
    assert len(data["events"]) == 8  # the incident's own: none of the busy node's other work
    assert data["verdict"]["owner_layer"] == "node"
    pulled = data["loki"]
    assert pulled["seed"] == {"allocation_id": case.id("a")}
    assert (pulled["entries"], pulled["new"]) == (8, 8)
    assert [hop["entries"] for hop in pulled["hops"]] == [4, 4]
    assert pulled["requests"] == asked == 2  # the seed's query, then one a hop
    # Asked again, over a longer window: Loki is asked again, the store gains nothing.
    assert again.status_code == 200, again.text
    assert (again.json()["loki"]["entries"], again.json()["loki"]["new"]) == (8, 0)
    assert len(again.json()["events"]) == 8
    # Nothing new stored: the answers the service keeps stay good (the generation stays).
    assert store.generation == generation


def test_what_a_pull_stores_is_in_the_next_answer(
    loki: LokiServer, case: Incident, store: Store
) -> None:
    app, client = _pulling_app(store, loki.url, case, Recording())
    path = f"/v1/timeline?allocation_id={case.id('a')}"
    with client, AsgiClient(app) as service:
        first = service.get(path).json()
        # The node reports once more: the answer kept from the first request must not be
        # given again, since the pull stored a new line (the store's generation moved).
        late = case.record(5.0, "node", "node rebooted", node_id=case.id("n"),
                           node_instance_id=case.id("ni"), allocation_id=case.id("a"))  # fmt: skip
        with LokiClient(loki.url) as pusher:
            push_records(pusher, [late])
        second = service.get(path).json()

    assert len(first["events"]) == 8
    assert second["loki"]["new"] == 1
    assert len(second["events"]) == 9
    assert "node rebooted" in {event["message"] for event in second["events"]}


def test_identical_requests_in_flight_share_one_pull(
    loki: LokiServer, case: Incident, store: Store
) -> None:
    transport = Recording(delay_s=0.2)
    app, client = _pulling_app(store, loki.url, case, transport)
    path = f"/v1/timeline?allocation_id={case.id('a')}&since=1h"

    async def together() -> list[httpx.Response]:
        asgi = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=asgi, base_url="http://testserver") as http:
            return list(await asyncio.gather(*(http.get(path) for _ in range(5))))

    with client:
        answers = asyncio.run(together())

    assert [answer.status_code for answer in answers] == [200] * 5
    pulls = [answer.json()["loki"] for answer in answers]
    assert all(pull == pulls[0] for pull in pulls)  # the one pull, took_s and all
    assert len(transport.queries) == pulls[0]["requests"] == 2


def test_a_loki_that_cannot_be_reached_is_a_502_naming_the_setting(
    case: Incident, store: Store
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    app, client = _pulling_app(store, url, case, httpx.HTTPTransport())
    with client, AsgiClient(app) as service:
        answer = service.get(f"/v1/timeline?allocation_id={case.id('a')}")

    assert answer.status_code == 502, answer.text
    body = answer.json()
    assert body["error"] == "SourceError"
    assert f"the service pulls from the Loki at {url}" in body["detail"]
    assert "--loki-url or CORRELATOR_LOKI_URL" in body["detail"]


def test_a_refusal_is_a_502_naming_lokis_setting(case: Incident, store: Store) -> None:
    refusal = "the query time range exceeds the limit (query length: 2h0m0s, limit: 1h0m0s)"

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, text=refusal)

    app, client = _pulling_app(store, "http://loki.invalid", case, httpx.MockTransport(refuse))
    with client, AsgiClient(app) as service:
        answer = service.get(f"/v1/timeline?allocation_id={case.id('a')}&since=2h")

    assert answer.status_code == 502, answer.text
    detail = answer.json()["detail"]
    assert "limits_config.max_query_length" in detail
    assert "the service pulls from the Loki at http://loki.invalid" in detail


def test_refused_credentials_name_the_credentials_settings(case: Incident, store: Store) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, text="no org id")

    app, client = _pulling_app(store, "http://loki.invalid", case, httpx.MockTransport(refuse))
    with client, AsgiClient(app) as service:
        answer = service.get(f"/v1/timeline?allocation_id={case.id('a')}")

    assert answer.status_code == 502, answer.text
    assert "CORRELATOR_LOKI_BEARER_TOKEN" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ('allocation_id=a"} |= "x', "allocation_id"),  # a hostile identifier: never sent
        ("allocation_id=a-1&since=1h&from=now-2h", "since or from, not both"),
        ("allocation_id=a-1&since=soon", "soon"),
    ],
)
def test_bad_requests_are_refused_before_loki_is_asked(
    case: Incident, store: Store, query: str, words: str
) -> None:
    transport = Recording()
    app, client = _pulling_app(store, "http://loki.invalid", case, transport)
    with client, AsgiClient(app) as service:
        answer = service.get(f"/v1/timeline?{query}")

    assert answer.status_code == 400, answer.text
    assert words in answer.json()["detail"]
    assert transport.queries == []


def test_without_a_loki_the_timeline_is_as_it_was(store: Store) -> None:
    plain = create_app(store, token=None)
    with AsgiClient(plain) as service:
        since = service.get("/v1/timeline?allocation_id=a-1&since=1h")
        missing = service.get("/v1/timeline?allocation_id=a-1")

    assert since.status_code == 400
    assert "unknown query parameter 'since'" in since.json()["detail"]
    assert missing.status_code == 404
    parameters = plain.openapi()["paths"]["/v1/timeline"]["get"]["parameters"]
    assert "since" not in {parameter["name"] for parameter in parameters}
    assert "502" not in plain.openapi()["paths"]["/v1/timeline"]["get"]["responses"]


def test_the_schema_of_a_pulling_service_declares_since_and_its_502(
    case: Incident, store: Store
) -> None:
    app, client = _pulling_app(store, "http://loki.invalid", case, Recording())
    with client:
        schema = app.openapi()
    validate(schema)
    timeline = schema["paths"]["/v1/timeline"]["get"]

    assert "since" in {parameter["name"] for parameter in timeline["parameters"]}
    assert "502" in timeline["responses"]


def test_serve_pulls_through_one_client_closed_at_shutdown(
    loki: LokiServer, case: Incident, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from correlator.sources import loki as loki_source

    made: list[LokiClient] = []

    def client(*settings: Any) -> LokiClient:
        made.append(loki_source_client(*settings))
        return made[-1]

    loki_source_client = loki_source.client
    monkeypatch.setattr(loki_source, "client", client)
    monkeypatch.setenv("CORRELATOR_FINDINGS_INTERVAL_S", "0")
    answers: list[httpx.Response] = []

    def run(app: Any, **settings: Any) -> None:  # uvicorn.run: two requests, then shut down
        with AsgiClient(app) as service:
            for _ in range(2):
                answers.append(service.get(f"/v1/timeline?allocation_id={case.id('a')}"))

    monkeypatch.setattr("uvicorn.run", run)
    argv = ["serve", "--port", "0", "--loki-url", loki.url, "--loki-selector", case.selector]
    assert main(["--db", str(tmp_path / "s.duckdb"), *argv]) == 0

    assert [answer.status_code for answer in answers] == [200, 200]
    # The incident's eight, and the node's line half an hour before: inside the 6 h window the
    # service's timelines reach around their seed (the tests above ask for 10 minutes).
    assert [answer.json()["loki"]["new"] for answer in answers] == [9, 0]
    assert len(made) == 1  # one client for both pulls
    assert made[0]._http.is_closed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tenant", "t1"], "--tenant is a setting of the pull from Loki: give --loki-url"),
        (["--loki-selector", '{env="x"}'], "--loki-selector is a setting of the pull"),
        (["--loki-url", "ftp://loki.example"], "ftp://loki.example"),
    ],
)
def test_serve_refuses_a_pull_setting_before_serving(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("CORRELATOR_LOKI_URL", raising=False)
    monkeypatch.setenv("CORRELATOR_FINDINGS_INTERVAL_S", "0")
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("serve started"))
    assert main(["--db", str(tmp_path / "c.duckdb"), "serve", "--port", "0", *argv]) == 2
    assert message in capsys.readouterr().err
