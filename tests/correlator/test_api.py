from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from openapi_spec_validator import validate

from correlator._demo_story import FAILING_ALLOCATION
from correlator.api import create_app
from correlator.store import Store
from tests.asgi_client import AsgiClient
from tests.correlator.conftest import DEMO_NOW_NS

TOKEN = "s3cret-write-token"
RECORD = {
    "ts": "2026-11-22T13:11:19.123456789Z",
    "level": "error",
    "event": "release failed",
    "service": "workflow-worker",
    "layer": "workflow",
    "allocation_id": "a-9",
    "error": {"type": "failure", "message": "release failed", "owner_layer": "workflow_state"},
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[AsgiClient]:
    with Store(tmp_path / "api.duckdb") as store:
        app = create_app(store, token=TOKEN, max_body_bytes=4096, now_ns=lambda: DEMO_NOW_NS)
        with AsgiClient(app) as test_client:
            yield test_client


@pytest.fixture
def demo_client(demo_db: Path) -> Iterator[AsgiClient]:
    with Store(demo_db, read_only=True) as store:
        app = create_app(store, token=None, read_token="reader", now_ns=lambda: DEMO_NOW_NS)
        with AsgiClient(app) as test_client:
            yield test_client


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _schema(store: Store, read_token: str | None) -> dict[str, Any]:
    return create_app(store, token=TOKEN, read_token=read_token).openapi()


def test_posting_evidence_needs_the_token(client: AsgiClient) -> None:
    body = orjson.dumps(RECORD)
    missing = client.post("/v1/evidence?source=ndjson", content=body)
    wrong = client.post("/v1/evidence?source=ndjson", content=body, headers=_auth("guess"))
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.headers["www-authenticate"] == "Bearer"
    assert (
        missing.json()["detail"]
        == "POST /v1/evidence needs 'Authorization: Bearer <CORRELATOR_TOKEN>'"
    )
    ok = client.post("/v1/evidence?source=ndjson", content=body, headers=_auth(TOKEN))
    assert ok.status_code == 200
    assert ok.json() == {
        "accepted": 1,
        "duplicate": 0,
        "rejected": 0,
        "rejected_by_reason": {},
        "notes": [],
    }
    again = client.post("/v1/evidence?source=ndjson", content=body, headers=_auth(TOKEN))
    assert again.json()["duplicate"] == 1


def test_writes_are_refused_when_no_token_is_configured(demo_client: AsgiClient) -> None:
    response = demo_client.post("/v1/evidence?source=ndjson", content=b"{}", headers=_auth("x"))
    assert response.status_code == 401
    assert "writes are disabled" in response.json()["detail"]


def test_bad_lines_are_rejected_by_reason_and_batch_mates_kept(client: AsgiClient) -> None:
    body = b"\n".join(
        [orjson.dumps(RECORD), b"{not json", b"\xff\xfe", orjson.dumps({**RECORD, "event": "x"})]
    )
    response = client.post("/v1/evidence?source=ndjson", content=body, headers=_auth(TOKEN))
    data = response.json()
    assert (data["accepted"], data["rejected"]) == (2, 2)


def test_a_body_starting_with_a_byte_order_mark_loses_no_line(client: AsgiClient) -> None:
    body = b"\xef\xbb\xbf" + orjson.dumps(RECORD) + b"\n" + orjson.dumps({**RECORD, "event": "x"})
    response = client.post("/v1/evidence?source=ndjson", content=body, headers=_auth(TOKEN))
    assert (response.json()["accepted"], response.json()["rejected"]) == (2, 0)


def test_body_size_and_source_kind_are_checked(client: AsgiClient) -> None:
    too_big = client.post("/v1/evidence?source=ndjson", content=b"x" * 5000, headers=_auth(TOKEN))
    assert too_big.status_code == 413
    assert too_big.json()["detail"] == "request body is over 4096 bytes; split the evidence"
    unknown = client.post("/v1/evidence?source=syslog", content=b"", headers=_auth(TOKEN))
    assert unknown.status_code == 400
    assert unknown.json()["detail"].startswith("unknown source kind 'syslog'")


def test_reads_need_the_read_token_when_one_is_set(demo_client: AsgiClient) -> None:
    url = f"/v1/timeline?allocation_id={FAILING_ALLOCATION}"
    assert demo_client.get(url).status_code == 401
    response = demo_client.get(url, headers=_auth("reader"))
    assert response.status_code == 200
    data = response.json()
    assert set(data) >= {"ids", "verdict", "events", "truncated", "clock_offsets"}
    assert set(data["verdict"]) >= {"owner_layer", "confidence", "first_failure", "explains"}
    assert data["verdict"]["owner_layer"] == "cert"


@pytest.mark.parametrize(
    ("query", "status", "detail"),
    [
        ("", 400, "give exactly one identifier"),
        ("?allocation_id=a-1&workflow_id=wf-1", 400, "give exactly one identifier"),
        # A mistyped key is named: what to fix.
        ("?alloc=a-1", 400, "; unknown query parameter 'alloc'"),
        (
            "?allocation_id=a-9%27%20OR%201%3D1",
            400,
            'allocation_id holds "\'" (U+0027) at position 3',
        ),
        (
            "?allocation_id=a%22%7D%20%7C~%20%22.%2A",
            400,
            "allocation_id holds '\"' (U+0022) at position 1",
        ),
        ("?allocation_id=a-nope", 404, "no evidence mentions allocation_id=a-nope"),
        (
            f"?allocation_id={FAILING_ALLOCATION}&from=yesterday",
            400,
            "'yesterday' is not a time",
        ),
        ("?allocation_id=a-9&allocation_id=a-10", 400, "give exactly one identifier"),
        (
            f"?allocation_id={FAILING_ALLOCATION}&limt=5",
            400,
            "unknown query parameter 'limt'; known: node_id, node_instance_id, correlation_id, "
            "allocation_id, workflow_id, from, limit, to",
        ),
        (f"?allocation_id={FAILING_ALLOCATION}&limit=5&limit=6", 400, "'limit' is given more"),
        (
            f"?allocation_id={FAILING_ALLOCATION}&from=2026-11-22T13:00:00Z&to=2026-11-22T12:00:00Z",
            400,
            "the window from 2026-11-22T13:00:00.000000000Z to 2026-11-22T12:00:00.000000000Z "
            "holds nothing: 'from' must be before 'to'",
        ),
        (f"?allocation_id={FAILING_ALLOCATION}&from=%C2%B2", 400, "'²' is not a time"),
    ],
)
def test_timeline_errors_are_mapped_in_one_place(
    demo_client: AsgiClient, query: str, status: int, detail: str
) -> None:
    response = demo_client.get(f"/v1/timeline{query}", headers=_auth("reader"))
    assert response.status_code == status
    assert detail in response.json()["detail"]


def test_health_says_how_many_events_when_reads_are_open(client: AsgiClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "events": 0}


def test_graph_refuses_parameters_it_does_not_take(demo_client: AsgiClient) -> None:
    response = demo_client.get(
        f"/v1/graph?allocation_id={FAILING_ALLOCATION}&limit=5", headers=_auth("reader")
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("unknown query parameter 'limit'; known: ")


def test_graph_findings_latency_health_and_openapi(demo_client: AsgiClient) -> None:
    headers = _auth("reader")
    graph = demo_client.get(f"/v1/graph?allocation_id={FAILING_ALLOCATION}", headers=headers)
    assert graph.json()["seed"] == {"allocation_id": FAILING_ALLOCATION}
    findings = demo_client.get("/v1/findings", headers=headers).json()["findings"]
    assert {f["rule"] for f in findings} == {"projection_drift", "release_failed_stuck"}
    phases = demo_client.get("/v1/latency", headers=headers).json()["phases"]
    assert {p["provider"] for p in phases} == {"aap", "eda"}
    # No token on /healthz (probes have none): with reads guarded it says no more than "ok".
    assert demo_client.get("/healthz").json() == {"status": "ok"}
    schema = demo_client.get("/openapi.json").json()
    assert set(schema["paths"]) >= {
        "/v1/evidence",
        "/v1/timeline",
        "/v1/graph",
        "/v1/findings",
        "/v1/latency",
        "/healthz",
    }
    assert demo_client.get("/").status_code == 200


@pytest.mark.parametrize("read_token", [None, "reader"])
def test_the_schema_is_valid_openapi(store: Store, read_token: str | None) -> None:
    validate(_schema(store, read_token))  # raises OpenAPIValidationError, naming the fault


def test_docs_and_the_schema_are_served(demo_client: AsgiClient) -> None:
    docs = demo_client.get("/docs")
    assert docs.status_code == 200
    assert "swagger-ui" in docs.text
    assert "/openapi.json" in docs.text
    schema = demo_client.get("/openapi.json")
    assert schema.status_code == 200
    validate(schema.json())


@pytest.mark.parametrize(
    ("path", "method", "parameters"),
    [
        (
            "/v1/evidence",
            "post",
            [
                ("source", True),
                ("tz", False),
                ("format", False),
                ("layer", False),
                ("service", False),
            ],
        ),
        (
            "/v1/timeline",
            "get",
            [
                ("from", False),
                ("to", False),
                ("limit", False),
                ("node_id", False),
                ("node_instance_id", False),
                ("correlation_id", False),
                ("allocation_id", False),
                ("workflow_id", False),
            ],
        ),
        (
            "/v1/graph",
            "get",
            [
                ("node_id", False),
                ("node_instance_id", False),
                ("correlation_id", False),
                ("allocation_id", False),
                ("workflow_id", False),
            ],
        ),
        ("/v1/findings", "get", []),
        ("/v1/latency", "get", []),
        ("/healthz", "get", []),
    ],
)
def test_the_schema_declares_every_query_parameter(
    store: Store, path: str, method: str, parameters: list[tuple[str, bool]]
) -> None:
    operation = _schema(store, None)["paths"][path][method]
    declared = operation.get("parameters", [])
    assert [(p["name"], p["required"]) for p in declared] == parameters
    assert {p["in"] for p in declared} <= {"query"}


def test_the_schema_lists_the_source_kinds(store: Store) -> None:
    [source, *_] = _schema(store, None)["paths"]["/v1/evidence"]["post"]["parameters"]
    assert source["schema"]["enum"] == [
        "ndjson",
        "agent",
        "nginx",
        "text",
        "postgres",
        "workflow",
        "k8s",
        "aap",
    ]


def test_the_schema_declares_both_bearer_tokens(store: Store) -> None:
    schemes = _schema(store, "reader")["components"]["securitySchemes"]
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "CORRELATOR_TOKEN": ("http", "bearer"),
        "CORRELATOR_READ_TOKEN": ("http", "bearer"),
    }


@pytest.mark.parametrize(
    ("read_token", "path", "method", "security"),
    [
        (None, "/v1/evidence", "post", [{"CORRELATOR_TOKEN": []}]),
        ("reader", "/v1/evidence", "post", [{"CORRELATOR_TOKEN": []}]),
        # Reads are open without a read token, and the schema asks for none.
        (None, "/v1/timeline", "get", None),
        (None, "/v1/graph", "get", None),
        (None, "/v1/findings", "get", None),
        (None, "/v1/latency", "get", None),
        ("reader", "/v1/timeline", "get", [{"CORRELATOR_READ_TOKEN": []}]),
        ("reader", "/v1/graph", "get", [{"CORRELATOR_READ_TOKEN": []}]),
        ("reader", "/v1/findings", "get", [{"CORRELATOR_READ_TOKEN": []}]),
        ("reader", "/v1/latency", "get", [{"CORRELATOR_READ_TOKEN": []}]),
        ("reader", "/healthz", "get", None),
    ],
)
def test_the_schema_says_which_routes_need_which_token(
    store: Store,
    read_token: str | None,
    path: str,
    method: str,
    security: list[dict[str, list[str]]] | None,
) -> None:
    assert _schema(store, read_token)["paths"][path][method].get("security") == security


def test_the_schema_declares_the_ndjson_body(store: Store) -> None:
    body = _schema(store, None)["paths"]["/v1/evidence"]["post"]["requestBody"]
    assert body["content"] == {
        "application/x-ndjson": {
            "schema": {"type": "string"},
            "example": '{"ts": "2026-11-22T13:11:19.123456789Z", "level": "error", '
            '"event": "release failed", "layer": "workflow", "allocation_id": "a-9"}\n',
        },
        "text/plain": {"schema": {"type": "string"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    }


@pytest.mark.parametrize(
    "content_type",
    [
        None,  # what the tests and httpx's content= send
        "application/x-ndjson",
        "text/plain",
        "application/octet-stream",
        "application/x-www-form-urlencoded",  # curl --data-binary's default
    ],
)
def test_the_body_is_read_whatever_its_content_type(
    client: AsgiClient, content_type: str | None
) -> None:
    headers = _auth(TOKEN) | ({"Content-Type": content_type} if content_type else {})
    response = client.post(
        "/v1/evidence?source=ndjson", content=orjson.dumps(RECORD), headers=headers
    )
    assert (response.status_code, response.json()["accepted"]) == (200, 1)


@pytest.mark.parametrize(
    ("read_token", "path", "method", "statuses"),
    [
        (None, "/v1/evidence", "post", ["200", "400", "401", "408", "413"]),
        (None, "/v1/timeline", "get", ["200", "400", "404"]),
        (None, "/v1/graph", "get", ["200", "400", "404"]),
        (None, "/v1/findings", "get", ["200", "400"]),
        (None, "/v1/latency", "get", ["200", "400"]),
        (None, "/healthz", "get", ["200", "400"]),
        ("reader", "/v1/timeline", "get", ["200", "400", "401", "404"]),
        ("reader", "/v1/graph", "get", ["200", "400", "401", "404"]),
        ("reader", "/v1/findings", "get", ["200", "400", "401"]),
        ("reader", "/v1/latency", "get", ["200", "400", "401"]),
        ("reader", "/healthz", "get", ["200", "400"]),
    ],
)
def test_the_schema_declares_the_error_answers(
    store: Store, read_token: str | None, path: str, method: str, statuses: list[str]
) -> None:
    responses = _schema(store, read_token)["paths"][path][method]["responses"]
    assert sorted(responses) == statuses  # no 422: a request FastAPI refuses is a 400 here
    for status in statuses[1:]:
        assert responses[status]["content"] == {
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
        }


def test_the_error_body_is_a_model_of_the_error_shape(store: Store) -> None:
    schemas = _schema(store, None)["components"]["schemas"]
    assert set(schemas) == {"ErrorBody"}
    error_body = schemas["ErrorBody"]
    assert (sorted(error_body["properties"]), sorted(error_body["required"])) == (
        ["detail", "error"],
        ["detail", "error"],
    )


@pytest.mark.parametrize(
    ("method", "url", "detail"),
    [
        (
            "POST",
            "/v1/evidence?source=ndjson&sourc=x",
            "unknown query parameter 'sourc'; known: format, layer, service, source, tz",
        ),
        (
            "POST",
            "/v1/evidence?source=ndjson&source=agent",
            "query parameter 'source' is given more than once",
        ),
        ("POST", "/v1/evidence", "query parameter 'source' is required"),
        (
            "GET",
            "/v1/timeline?allocation_id=a-9&limt=5",
            "unknown query parameter 'limt'; known: node_id, node_instance_id, correlation_id, "
            "allocation_id, workflow_id, from, limit, to",
        ),
        (
            "GET",
            "/v1/timeline?allocation_id=a-9&to=now&to=now",
            "query parameter 'to' is given more than once",
        ),
        (
            "GET",
            "/v1/timeline?allocation_id=a-9&limit=0",
            "query parameter 'limit' is '0': Input should be greater than or equal to 1",
        ),
        (
            "GET",
            "/v1/timeline?allocation_id=a-9&limit=100001",
            "query parameter 'limit' is '100001': Input should be less than or equal to 100000",
        ),
        (
            "GET",
            "/v1/timeline?allocation_id=a-9&limit=many",
            "query parameter 'limit' is 'many': Input should be a valid integer, unable to parse "
            "string as an integer",
        ),
        (
            "GET",
            "/v1/graph?allocation_id=a-9&depth=2",
            "unknown query parameter 'depth'; known: node_id, node_instance_id, correlation_id, "
            "allocation_id, workflow_id",
        ),
        (
            "GET",
            "/v1/graph?workflow_id=wf-1&workflow_id=wf-2",
            "give exactly one identifier: ?KEY=VALUE with KEY one of node_id, node_instance_id, "
            "correlation_id, allocation_id, workflow_id",
        ),
        (
            "GET",
            "/v1/graph?node_id=n-1%27",
            'node_id holds "\'" (U+0027) at position 3; allowed: ASCII letters, digits and '
            ". _ : / @ + ~ -",
        ),
        ("GET", "/v1/findings?limt=5", "unknown query parameter 'limt'; known: none"),
        ("GET", "/v1/findings?x=1&x=2", "unknown query parameter 'x'; known: none"),
        ("GET", "/v1/latency?provider=aap", "unknown query parameter 'provider'; known: none"),
        ("GET", "/v1/latency?since=1h&since=2h", "unknown query parameter 'since'; known: none"),
        ("GET", "/healthz?verbose=1", "unknown query parameter 'verbose'; known: none"),
    ],
)
def test_every_route_refuses_a_query_it_would_misread(
    client: AsgiClient, method: str, url: str, detail: str
) -> None:
    response = client.request(method, url, content=b"", headers=_auth(TOKEN))
    assert (response.status_code, response.json()) == (
        400,
        {"error": "QueryError", "detail": detail},
    )


@pytest.mark.parametrize(
    "url",
    [
        f"/v1/timeline?allocation_id={FAILING_ALLOCATION}&from=0&to=2100-01-01T00:00:00Z&limit=5",
        f"/v1/timeline?allocation_id={FAILING_ALLOCATION}&from=",
        f"/v1/graph?allocation_id={FAILING_ALLOCATION}",
        "/v1/findings",
        "/v1/latency",
        "/healthz",
        # The page reads its own query in the browser: the API's check is not its.
        f"/?allocation_id={FAILING_ALLOCATION}",
    ],
)
def test_good_queries_still_pass(demo_client: AsgiClient, url: str) -> None:
    assert demo_client.get(url, headers=_auth("reader")).status_code == 200


def test_a_caller_without_the_token_learns_nothing_of_the_parameters(
    demo_client: AsgiClient,
) -> None:
    response = demo_client.get("/v1/findings?limt=5")
    assert (response.status_code, response.json()["error"]) == (401, "AuthError")


# -- nginx bodies: the zone of the error log's times ---------------------------------------

#: One refused request as a server on Berlin time logs it: the access line's time carries its
#: offset (13:11:19Z), the error line's does not.
NGINX_BODY = (
    b'127.0.0.1 - - [22/Nov/2026:14:11:19 +0100] "POST /v1/allocations HTTP/1.1" 502 157 "-" '
    b'"curl/8.5.0" "4f7c0b2e9d1a4c3b8e6f5a4b3c2d1e0f"\n'
    b"2026/11/22 14:11:19 [error] 1234#1234: *5 connect() failed (111: Connection refused) "
    b'while connecting to upstream, client: 127.0.0.1, server: api.local, request: "POST '
    b'/v1/allocations HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/allocations", host: '
    b'"api.local"\n'
)


@pytest.mark.parametrize(
    ("query", "default", "linked"),
    [
        ("", None, False),  # read as UTC: an hour after its request, not linked
        ("&tz=Europe/Berlin", None, True),
        ("&tz=%2B01:00", None, True),
        ("", "Europe/Berlin", True),  # the service's CORRELATOR_NGINX_TZ
        ("&tz=UTC", "Europe/Berlin", False),  # the query wins
    ],
)
def test_nginx_error_times_are_read_in_the_zone_given(
    tmp_path: Path, query: str, default: str | None, linked: bool
) -> None:
    from correlator.sources._time import parse_zone

    zone = parse_zone(default) if default else None
    with Store(tmp_path / "nginx.duckdb") as store:
        app = create_app(store, token=TOKEN, source_options={"nginx": {"zone": zone}})
        with AsgiClient(app) as client:
            posted = client.post(
                f"/v1/evidence?source=nginx{query}", content=NGINX_BODY, headers=_auth(TOKEN)
            )
        assert posted.status_code == 200, posted.text
        assert posted.json()["accepted"] == 2
        errors = store.nginx_events(unlinked_errors=True, from_ns=0, to_ns=2**62)
    assert (errors == []) is linked


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("source=ndjson&tz=UTC", "query parameter 'tz' is the zone of nginx error logs"),
        ("source=nginx&tz=Mars/Olympus", "query parameter 'tz': "),
    ],
)
def test_a_zone_is_for_nginx_and_must_be_one(client: AsgiClient, query: str, detail: str) -> None:
    answer = client.post(f"/v1/evidence?{query}", content=NGINX_BODY, headers=_auth(TOKEN))
    assert answer.status_code == 400
    assert answer.json()["error"] == "QueryError"
    assert answer.json()["detail"].startswith(detail)
