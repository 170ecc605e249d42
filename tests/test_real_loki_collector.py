"""Evidence a collector shipped, found by the timeline pulled from the real Loki at ``$LOKI_URL``.

The incident is one the devstack's real nginx and PostgreSQL wrote (the ``db-lock-timeout``
scenario, captured in ``tests/collector_config/devstack_capture/`` and moved to now by
:mod:`tests.collector_config.capture`). Its nginx access and error lines and PostgreSQL
``jsonlog`` lines go to Loki as ``collector-config/alloy/agent-logs.alloy`` makes them: the
config's own stages, run by :mod:`tests.collector_config.simulate`, give each entry its labels
(``service_name``, ``layer``, ``env``), its structured metadata (the identifiers of
``$request_id``, the headers and the sqlcommenter comment; the file name) and its timestamp.
The processes' records go beside them as agent_logging ships them. Neither Alloy nor
``otelcol-contrib`` can be installed on this machine (:data:`tests.real_parts.NOT_AVAILABLE`),
so the simulation is as far as this machine allows; Alloy's rather than the OpenTelemetry
Collector's, because it pushes to the same API as agent_logging's ``LokiClient``
(``tests/collector_config/test_identifiers.py`` checks that both lift the same identifiers).
The model does not evaluate the configs' Go templates, so the entries carry no ``level``.

Every run has its own ``env`` label; the pull's stream selector is that label.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Final

import orjson
import pytest

from agent_logging.loki import LokiClient
from agent_logging.loki._entries import PushEntry
from correlator.cli import main as correlator
from correlator.store import Store
from tests.collector_config.capture import ALLOCATION, Incident, incident
from tests.collector_config.configs import components
from tests.collector_config.simulate import run_alloy
from tests.correlator.loki_incident import push_records, wait_visible
from tests.lokisim.fixtures import LOKI_TENANT_ENV, VISIBILITY_TIMEOUT_S
from tests.stored import stored_events

pytestmark = pytest.mark.integration

TENANT = os.environ.get(LOKI_TENANT_ENV) or None
_S = 1_000_000_000

#: The incident's requests, by nginx's ``$request_id``: the allocation's creation, the node's
#: claim of its deploy task, and its release. The access line of the task's result names the
#: first in ``X-Correlation-ID`` and the allocation in ``baggage``.
CREATE, CLAIM, RELEASE = (
    "9726837c83ae2ed80a6871285b8d53e9",
    "5e3506ea6ffb2e4ccc38cce1f1278c84",
    "169dc14a8702a1fb289f7edf6597dc92",
)
#: Where each captured file lies on a host the configs' defaults describe.
_FILES: Final = {
    "nginx_access": "/var/log/nginx/access.log",
    "nginx_error": "/var/log/nginx/error.log",
    "postgres": "/var/lib/postgresql/data/log/postgresql.json",
}
#: What the timeline says of an event, beside its time and raw line, that the Loki path must
#: say as the file path does (the service is the stream's label in Loki, the access line's
#: ``server_name`` in the file: not compared).
_MAPPED: Final = (
    "layer",
    "level",
    "message",
    "node_id",
    "node_instance_id",
    "correlation_id",
    "allocation_id",
    "workflow_id",
    "http_method",
    "http_path",
    "http_status",
    "error_type",
    "owner_hint",
)


def _collected(process: str, line: str, env: str) -> PushEntry:
    """``line`` as the Alloy pipeline ``process`` hands it to Loki."""
    entry = run_alloy(
        components("loki.process")[process],
        line,
        {"filename": _FILES[process]},
        {"EVIDENCE_ENV": env},
    )
    assert entry.ts_ns is not None, f"{process}: no timestamp read from {line[:80]}"
    metadata = {k: v for k, v in entry.structured_metadata.items() if v != "<template>"}
    return PushEntry(
        tuple(sorted(entry.labels.items())), entry.ts_ns, line, tuple(sorted(metadata.items()))
    )


def _push(client: LokiClient, entries: list[PushEntry], timeout_s: float = 30.0) -> None:
    """Push, oldest first, again after a 429 (the tenant's rate may be spent) until
    ``timeout_s``."""
    ordered = sorted(entries, key=lambda entry: entry.ts_ns)
    deadline = time.monotonic() + timeout_s
    while (result := client.push(ordered)).outcome == "retry" and time.monotonic() < deadline:
        threading.Event().wait(result.refill_s or result.retry_after_s or 0.5)
    assert result.outcome == "ok", result


@pytest.fixture(scope="module")
def shipped(real_loki: str) -> tuple[Incident, str]:
    """The incident in the real Loki, once for the module: (its lines, its env label)."""
    env = f"it-{uuid.uuid4().hex[:10]}"
    case = incident(time.time_ns() - 120 * _S, env)
    collected = [
        *(_collected("nginx_access", line, env) for line in case.access),
        *(_collected("nginx_error", line, env) for line in case.errors),
        *(_collected("postgres", line, env) for line in case.postgres),
    ]
    with LokiClient(real_loki, tenant=TENANT) as client:
        _push(client, collected)
        push_records(client, case.records)
        total = len(collected) + len(case.records)
        selector = f'{{env="{env}"}}'
        assert wait_visible(client, selector, total, VISIBILITY_TIMEOUT_S) == total
    return case, env


def _window(case: Incident) -> list[str]:
    return ["--from", str(case.start_ns - 60 * _S), "--to", str(case.start_ns + 120 * _S)]


def _timeline_from_loki(
    real_loki: str, shipped: tuple[Incident, str], db: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str]:
    case, env = shipped
    code = correlator(
        [
            *("--db", str(db), "timeline", "--id", f"allocation_id={ALLOCATION}", "--json"),
            *("--loki-url", real_loki, "--loki-selector", f'{{env="{env}"}}'),
            *(["--tenant", TENANT] if TENANT else []),
            *_window(case),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return orjson.loads(out), err


def _pulled(db: Path, source: str) -> dict[str, str]:
    """The lines the pull stored that ``source`` read (the program that wrote them: a line a
    collector shipped is read as its file is), with the query that brought each."""
    with Store(db, read_only=True) as store:
        events = stored_events(store, "source = ? AND origin LIKE '{%'", [source])
    return {event.raw: event.origin for event in events}


def test_the_pull_finds_the_lines_a_collector_shipped(
    real_loki: str,
    shipped: tuple[Incident, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case, _ = shipped
    _, said = _timeline_from_loki(real_loki, shipped, tmp_path / "pulled.duckdb", capsys)

    # The access lines of the incident's requests (the first four), not the other nodes'
    # claims after them; no error line (it names no request, so nothing can ask for it).
    access = _pulled(tmp_path / "pulled.duckdb", "nginx")
    assert sorted(access) == sorted(case.access[:4])
    create, claim, result, release = case.access[:4]
    assert f'correlation_id="{CREATE}"' in access[create]
    assert f'correlation_id="{CLAIM}"' in access[claim]
    assert f'correlation_id="{RELEASE}"' in access[release]
    # The result's line names the allocation in its baggage: the seed's own query found it.
    assert access[result].endswith(f'| allocation_id="{ALLOCATION}"')

    # PostgreSQL's lines whose comment names the allocation, and the claim's statement, whose
    # comment names its request and node only.
    statements = _pulled(tmp_path / "pulled.duckdb", "postgres")
    naming = [line for line in case.postgres if f"allocation_id='{ALLOCATION}'" in line]
    [claimed] = [line for line in case.postgres if f"correlation_id='{CLAIM}'" in line]
    assert len(naming) == 36
    assert sorted(statements) == sorted([*naming, claimed])
    assert all(statements[line].endswith(f'| allocation_id="{ALLOCATION}"') for line in naming)
    assert f'correlation_id="{CLAIM}"' in statements[claimed]
    assert "correlator: Loki: 2 hops, 2 queries, 71 entries pulled (71 new)" in said


def _timeline_from_files(
    case: Incident, directory: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """The same lines ingested from files, as the correlator's own sources read them."""
    directory.mkdir()
    files = {
        "access.log": case.access,
        "error.log": case.errors,
        "postgresql.json": case.postgres,
        "records.jsonl": [orjson.dumps(record).decode() for record in case.records],
    }
    for name, lines in files.items():
        (directory / name).write_text("".join(f"{line}\n" for line in lines))
    db = str(directory / "files.duckdb")
    for source, names in (
        ("nginx", ["access.log", "error.log"]),
        ("postgres", ["postgresql.json"]),
        ("ndjson", ["records.jsonl"]),
    ):
        paths = [str(directory / name) for name in names]
        assert correlator(["--db", db, "ingest", "--source", source, "--quiet", *paths]) == 0
    capsys.readouterr()
    code = correlator(
        ["--db", db, "timeline", "--id", f"allocation_id={ALLOCATION}", "--json", *_window(case)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    timeline: dict[str, Any] = orjson.loads(out)
    return timeline


def test_the_timeline_maps_a_collectors_lines_as_it_maps_the_files(
    real_loki: str,
    shipped: tuple[Incident, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case, _ = shipped
    from_files = _timeline_from_files(case, tmp_path / "files", capsys)
    from_loki, _ = _timeline_from_loki(real_loki, shipped, tmp_path / "pulled.duckdb", capsys)

    with Store(tmp_path / "pulled.duckdb", read_only=True) as store:
        stored = {
            event.raw: {key: getattr(event, key) for key in _MAPPED}
            for event in stored_events(store)
        }
    on_timeline = {event["raw"] for event in from_loki["events"]}

    differ = []
    for event in from_files["events"]:
        if event["layer"] not in ("ingress", "db"):
            continue
        line = f"{event['layer']} {event['message'][:50]!r}"
        fields = {key: event.get(key) for key in _MAPPED}
        pulled = stored.get(event["raw"])
        if pulled is None:
            differ.append(f"{line}: not pulled")
            continue
        wrong = [f"{k} {fields[k]!r} (files) {pulled[k]!r} (Loki)" for k in _MAPPED
                 if fields[k] != pulled[k]]  # fmt: skip
        if event["raw"] not in on_timeline:
            wrong.insert(0, "not on the timeline from Loki")
        if wrong:
            differ.append(f"{line}: {', '.join(wrong)}")
    assert not differ, "\n".join(differ)
    first = from_loki["verdict"]["first_failure"]
    assert first["raw"] == from_files["verdict"]["first_failure"]["raw"]
