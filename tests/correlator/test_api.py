from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

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
    assert ok.json() == {"accepted": 1, "duplicate": 0, "rejected": 0, "rejected_by_reason": {}}
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
