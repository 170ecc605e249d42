"""The timeline pulled hop by hop from the real Loki at ``$LOKI_URL`` (``correlator.loki_pull``).

What the Loki test server cannot vouch for: that a structured-metadata key an entry lacks
compares equal to ``""`` in a label filter (a place's lines that name no work), that the
queries' ``or`` and ``!=`` stages read as meant, that paging crosses the 5,000-entry limit,
what Loki answers a window longer than its ``max_query_length``, and that a value holding
quotes, backslashes, ``} |`` and a newline matches only itself. ``bash scripts/test.sh``
starts the Loki; without ``LOKI_URL`` these tests skip, and fail in CI
(:mod:`tests.real_parts`). Every run has its own ``env`` label and identifiers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agent_logging.loki import LokiClient
from agent_logging.loki._entries import PushEntry
from correlator import loki_pull
from correlator.cli import main as correlator
from correlator.errors import SourceError
from correlator.loki_pull import Ask, PullLimits, hop_queries
from correlator.sources import loki
from correlator.store import Store
from tests.correlator.loki_incident import (
    OWN,
    Incident,
    pull_incident,
    pulled_messages,
    push_records,
    wait_visible,
)
from tests.lokisim.fixtures import LOKI_TENANT_ENV, VISIBILITY_TIMEOUT_S

TENANT = os.environ.get(LOKI_TENANT_ENV) or None

pytestmark = pytest.mark.integration

_S = 1_000_000_000


@pytest.fixture
def client(real_loki: str) -> Iterator[LokiClient]:
    with LokiClient(real_loki, tenant=TENANT) as opened:
        yield opened


@pytest.fixture
def incident_in(client: LokiClient) -> Incident:
    """An incident and the busy node's other work, visible in the real Loki."""
    case = Incident()
    records = case.own() + case.others()
    push_records(client, records)
    assert wait_visible(client, case.selector, len(records), VISIBILITY_TIMEOUT_S) == len(records)
    return case


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "pulled.duckdb") as opened:
        yield opened


def _pull(
    real_loki: str, store: Store, case: Incident, seed: str, **options: object
) -> loki_pull.Pull:
    with loki.client(real_loki, TENANT, None, None) as client:
        return pull_incident(store, loki_pull.client_fetch(client), case, seed, **options)


def test_the_pull_follows_the_incident_and_leaves_the_busy_nodes_other_work(
    real_loki: str, incident_in: Incident, store: Store
) -> None:
    seed = f"allocation_id={incident_in.id('a')}"
    done = _pull(real_loki, store, incident_in, seed)

    # Hop 1's query asked for the request and the run, and for the node's lines with no
    # allocation, request or run: only "disk latency high" has none of the three keys, of the
    # node's ten lines. One query: the real Loki reads the predicates joined with or.
    assert [hop.entries for hop in done.hops] == [4, 4]
    assert [hop.requests for hop in done.hops] == [1, 1]
    assert done.new == 8
    assert pulled_messages(store) == OWN

    again = _pull(real_loki, store, incident_in, seed)
    assert (again.entries, again.new) == (8, 0)
    assert store.count() == 8


def test_a_missing_metadata_key_compares_equal_to_empty(
    client: LokiClient, incident_in: Incident
) -> None:
    unset = ("correlation_id", "allocation_id", "workflow_id")
    [(query, _)] = hop_queries(
        [Ask("node_id", incident_in.id("n"), unset)], base_selector=incident_in.selector
    )
    now = time.time_ns()
    lines = [e.line for e in client.query_range(query, start_ns=now - 3600 * _S, end_ns=now)]

    # The node's line half an hour earlier and the one inside the incident: neither names
    # any work, unlike the node's other eight lines.
    assert sorted(orjson.loads(line)["event"] for line in lines) == [
        "disk latency high",
        "fan speed changed",
    ]


def test_pages_cross_lokis_entry_limit(real_loki: str, client: LokiClient, store: Store) -> None:
    case = Incident()
    allocation = case.id("a")
    records = [
        case.record(i / 1000, "node", f"task step {i}", allocation_id=allocation)
        for i in range(6000)
    ]
    push_records(client, records)
    assert wait_visible(client, case.selector, 6000, VISIBILITY_TIMEOUT_S) == 6000

    done = _pull(real_loki, store, case, f"allocation_id={allocation}")

    assert done.requests == 1
    assert done.entries == done.new == 6000


def test_a_window_longer_than_lokis_max_query_length(
    real_loki: str, incident_in: Incident, store: Store
) -> None:
    seed = f"allocation_id={incident_in.id('a')}"
    # Told that Loki takes 800 h at once, the pull sends the window whole: the real Loki
    # refuses it, and the error names the setting. (Loki's message, v3.7: "the query time
    # range exceeds the limit (query length: 800h0m0s, limit: 30d1h)".)
    with pytest.raises(SourceError) as refused:
        _pull(
            real_loki,
            store,
            incident_in,
            seed,
            since="800h",
            limits=PullLimits(max_query_length_s=800 * 3600.0),
        )
    message = str(refused.value)
    assert "HTTP 400: the query time range exceeds the limit (query length: 800h0m0s" in message
    assert "limits_config.max_query_length" in message

    # With Loki's default taken, the seed's window goes in two pieces and the pull completes.
    done = _pull(real_loki, store, incident_in, seed, since="800h")
    assert [hop.requests for hop in done.hops] == [2, 1]  # the seed's window in two pieces
    assert pulled_messages(store) == OWN


def test_a_hostile_value_matches_only_itself(client: LokiClient) -> None:
    case = Incident()
    hostile = f'c-{case.run}"}} | x="1\\\n` or correlation_id=~".+'
    plain = f"c-{case.run}"
    now = time.time_ns()
    labels = (("env", case.env), ("service_name", "api-svc"))
    result = client.push(
        [
            PushEntry(labels, now - 3 * _S, "hostile", (("correlation_id", hostile),)),
            PushEntry(labels, now - 2 * _S, "plain", (("correlation_id", plain),)),
            PushEntry(labels, now - 1 * _S, "other", (("correlation_id", f"{plain}-2"),)),
        ]
    )
    assert result.outcome == "ok", result
    assert wait_visible(client, case.selector, 3, VISIBILITY_TIMEOUT_S) == 3

    def lines(*values: str) -> list[str]:
        asks = [Ask("correlation_id", value) for value in values]
        [(query, _)] = hop_queries(asks, base_selector=case.selector)
        end = time.time_ns()
        return sorted(e.line for e in client.query_range(query, start_ns=now - 60 * _S, end_ns=end))

    assert lines(hostile) == ["hostile"]
    assert lines(plain) == ["plain"]
    assert lines(hostile, plain) == ["hostile", "plain"]


def test_the_timeline_command_pulls_from_the_real_loki(
    real_loki: str, incident_in: Incident, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = correlator(
        [
            "--db",
            str(tmp_path / "cli.duckdb"),
            "timeline",
            "--id",
            f"allocation_id={incident_in.id('a')}",
            "--loki-url",
            real_loki,
            *(["--tenant", TENANT] if TENANT else []),
            "--loki-selector",
            incident_in.selector,
            "--since",
            "1h",
            "--json",
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    data = orjson.loads(out)
    # The timeline's window (6 h around the seed) holds the node's earlier line too.
    assert len(data["events"]) == 9
    assert data["verdict"]["owner_layer"] == "node"
    assert "correlator: Loki: 2 hops, 2 queries, 9 entries pulled (9 new)" in err
