"""The whole path against a real Loki: the one at ``$LOKI_URL``.

``bash scripts/test.sh`` starts a real Loki (``../shared/loki/start-loki``) and exports its URL;
by hand, ``eval "$(../shared/loki/start-loki)"; export LOKI_URL`` first, or point ``LOKI_URL``
at a Loki of your own (``LOKI_TENANT`` too, for a multi-tenant one). Without ``LOKI_URL`` these
tests skip, and fail in CI (``CI=true``: :mod:`tests.real_parts`). Every run uses its own
service name and identifiers, so a shared Loki holding other data does not confuse it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest

import agent_logging
from agent_logging.loki._client import LokiClient
from correlator.cli import main as correlator
from tests.lokisim.fixtures import LOKI_TENANT_ENV, VISIBILITY_TIMEOUT_S

TENANT = os.environ.get(LOKI_TENANT_ENV) or None

pytestmark = pytest.mark.integration


def _wait_visible(
    url: str, query: str, start_ns: int, expected: int, timeout_s: float = VISIBILITY_TIMEOUT_S
) -> list[str]:
    pause = threading.Event()
    with LokiClient(url, tenant=TENANT) as client:
        deadline = time.monotonic() + timeout_s
        while True:
            lines = [
                e.line
                for e in client.iter_query_range(
                    query, start_ns=start_ns, end_ns=time.time_ns() + 1
                )
            ]
            if len(lines) >= expected or time.monotonic() > deadline:
                return lines
            pause.wait(0.5)


def test_records_drain_and_correlate_through_a_real_loki(real_loki: str, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:10]
    service, allocation = f"real-{run}", f"a-{run}"
    start_ns = time.time_ns()
    agent_logging.configure(
        service=service,
        layer="node",
        env="it",
        output="none",
        loki_url=real_loki,
        loki_tenant=TENANT,
        spool_dir=tmp_path / "spool",
        batch_interval_s=0.2,
        ids={"node_id": f"n-{run}"},
    )
    log = agent_logging.get_logger("it")
    with agent_logging.bound(allocation_id=allocation, workflow_id=f"wf-{run}"):
        for step in range(5):
            log.info("task step", step=step)
        log.error("deploy failed", owner_layer="deploy")
    # Leave the spool to the gate: drain ships whatever shutdown had no time for.
    agent_logging.shutdown(timeout_s=0.0)
    drained = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_logging._cli",
            "drain",
            "--spool-dir",
            str(tmp_path / "spool"),
            "--loki-url",
            real_loki,
            "--timeout-s",
            "60",
            *(["--tenant", TENANT] if TENANT else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert drained.returncode == 0, drained.stderr

    lines = _wait_visible(
        real_loki, f'{{service_name="{service}"}} | allocation_id="{allocation}"', start_ns, 6
    )
    assert sorted(orjson.loads(line).get("step", 99) for line in lines) == [0, 1, 2, 3, 4, 99]

    db = str(tmp_path / "c.duckdb")
    code = correlator(
        [
            "--db",
            db,
            "ingest",
            "--source",
            "loki",
            "--loki-url",
            real_loki,
            *(["--tenant", TENANT] if TENANT else []),
            "--query",
            f'{{service_name="{service}"}}',
            "--since",
            "15m",
        ]
    )
    assert code == 0
    from correlator import incident
    from correlator.store import Store

    with Store(db) as store:
        data = incident.timeline_for(store, "allocation_id", allocation)
    assert data["verdict"]["owner_layer"] == "deploy"
    assert len(data["events"]) == 6
