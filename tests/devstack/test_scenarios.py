"""The devstack's scenarios end to end: real nginx, PostgreSQL, services and node agents, one
fault each, and the correlator must name the owner layer from the evidence alone.

One stack serves every test of this module (it takes seconds to bring up); the scenarios run
one after the other on it, each with its own evidence window and DuckDB. Skipped, saying
why, when nginx or the PostgreSQL server binaries are not installed; in CI (``CI=true``) that
fails instead (:mod:`tests.real_parts`). With ``$LOKI_URL`` set (``scripts/test.sh`` sets it)
every process ships to that real Loki instead of the test server.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devstack.scenarios import SCENARIOS, Result, run_scenario
from devstack.supervisor import Stack
from tests.real_parts import need_devstack_parts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_LAYERS = {"node", "ingress", "api", "workflow", "db"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """A running devstack, shared by the module's tests."""
    need_devstack_parts()
    # Not under pytest's private temporary root: the postgres user and nginx's workers must
    # be able to reach the stack's directories.
    directory = Path(tempfile.mkdtemp(prefix="devstack-test-"))
    try:
        running = Stack.up(directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # what failed is in the exception
        raise
    try:
        yield running
    finally:
        running.down()


def _common(result: Result, owner: str, findings: list[str]) -> None:
    assert result.verdict["owner_layer"] == owner, result.verdict["reason"]
    assert set(result.layers_seen) >= _LAYERS
    assert result.finding_rules == findings
    assert result.records_logged > 0
    assert result.records_logged == result.records_seen
    # The timeline pulled the incident's records from Loki: every one naming the seed.
    assert result.seed_records > 0
    assert result.seed_records_pulled == result.seed_records
    assert "correlator: Loki: " in result.ingest_summary
    assert sorted(result.as_json()) == [
        "expected_owner_layer",
        "findings",
        "layers_seen",
        "records_logged",
        "records_pulled",
        "records_seen",
        "scenario",
        "seed",
        "seed_records",
        "seed_records_pulled",
        "verdict",
    ]


#: Each scenario's true owner layer and findings, stated here rather than read from SCENARIOS.
OWNERS: list[tuple[str, str, list[str]]] = [
    ("healthy", "none", []),
    ("cert-expired", "cert", []),
    ("token-rotated", "api_auth", []),
    ("missing-prerequisite", "deploy", []),
    ("release-stuck", "workflow_state", ["release_failed_stuck"]),
    ("db-lock-timeout", "db", ["outbox_unpublished"]),
    ("stale-cr-status", "provider", ["projection_drift"]),
    ("delete-during-provision", "provider", ["vm_orphaned"]),
    ("ingress-no-route", "ingress", []),
]


def test_every_scenario_is_run_here_with_the_truth_it_declares() -> None:
    stated = {name: (owner, findings) for name, owner, findings in OWNERS}
    stated["reimage-mid-task"] = ("node", [])
    declared = {
        name: (scenario.expected_owner_layer, list(scenario.expected_findings))
        for name, scenario in SCENARIOS.items()
    }
    assert declared == stated


@pytest.mark.parametrize(("name", "owner", "findings"), OWNERS)
def test_scenario_names_its_owner_layer(
    stack: Stack, name: str, owner: str, findings: list[str]
) -> None:
    result = run_scenario(stack, SCENARIOS[name])

    _common(result, owner, findings)
    assert result.problems == []


def test_reimage_mid_task_keeps_the_old_instance_evidence(stack: Stack) -> None:
    result = run_scenario(stack, SCENARIOS["reimage-mid-task"])

    _common(result, "node", [])
    instances = result.timeline["ids"]["node_instance_id"]
    assert len(instances) == 2
    [reimage] = result.timeline["reimages"]
    old = reimage["from_instance"]
    assert old in instances
    assert any(
        event["layer"] == "node" and event.get("node_instance_id") == old
        for event in result.timeline["events"]
    )
    # In Loki itself, not only in the correlator's copy: the drain before the wipe shipped it.
    response = httpx.get(
        f"{stack.config.loki_url}/loki/api/v1/query_range",
        params={
            "query": f'{{service_name="node-agent"}} | node_instance_id="{old}"',
            "start": str(result.started_ns),
            "end": str(result.verdict_at_ns),
            "limit": "1000",
            # Oldest first: the step started early, before any later line could push it out
            # of the page (Loki's default direction is backward).
            "direction": "forward",
        },
        headers={"X-Scope-OrgID": stack.config.loki_tenant} if stack.config.loki_tenant else {},
        timeout=10.0,
    )
    streams = response.raise_for_status().json()["data"]["result"]
    lines = [line for stream in streams for _, line in stream["values"]]
    assert any('"event":"task step started"' in line for line in lines)
