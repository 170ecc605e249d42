"""The HTTP API against its own OpenAPI schema, fuzzed by schemathesis: whatever a client
sends that the schema allows (and much it does not), the service answers with a status and
a body its schema declares, never a server error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from correlator.api import create_app
from correlator.store import Store
from tests.correlator.conftest import DEMO_NOW_NS

TOKEN = "fuzz-token"
OPERATIONS = [
    ("POST", "/v1/evidence"),
    ("GET", "/v1/timeline"),
    ("GET", "/v1/graph"),
    ("GET", "/v1/findings"),
    ("GET", "/v1/latency"),
    ("GET", "/healthz"),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Any]:
    """The schema of a service over a copy of the demo (posts write to it)."""
    copy = tmp_path_factory.mktemp("fuzz") / "demo.duckdb"
    copy.write_bytes(demo_db.read_bytes())
    with Store(copy) as store:
        app = create_app(store, token=TOKEN, now_ns=lambda: DEMO_NOW_NS)
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


def test_the_schema_names_every_operation(api: Any) -> None:
    found = {(op.ok().method.upper(), op.ok().path) for op in api.get_all_operations()}
    assert found == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[" ".join(o) for o in OPERATIONS])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_answer_is_one_the_schema_declares(
    api: Any, method: str, path: str, data: st.DataObject
) -> None:
    operation = api[path][method]
    case = data.draw(operation.as_strategy())
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code < 500, response.text
    # Every check but "a request the schema allows is accepted": the schema cannot say which
    # strings are identifiers, times or zones, and the service refuses the others with a 400
    # naming them (tests/correlator/test_api.py holds those answers).
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
