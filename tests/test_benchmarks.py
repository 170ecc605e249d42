"""Every benchmark runs end to end at a tiny size and prints its figures.

Benchmarks are not timed here (their figures live in ``benchmarks/RESULTS.md``): these runs
only keep them from rotting between the sessions that record them. Each is run as its
README command is, ``python -m benchmarks.NAME``, with counts small enough for seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lokisim.fixtures import LOKI_TENANT_ENV
from tests.real_parts import need_devstack_parts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]

#: (benchmark, its arguments, text its report always holds).
RUNS = [
    ("bindings", ["--records", "2000", "--repeats", "1"], "direct/full"),
    ("log_call", ["--calls", "2000", "--repeats", "1"], "agent_logging/this"),
    ("convoy", ["--calls", "1000"], "this / durable spool"),
    ("lokisim_ingest", ["--rounds", "1", "--batches", "2"], "entries/s"),
    ("store_insert", ["--events", "5000", "--lookups", "10"], "| layout |"),
    ("ingest_floor", ["--events", "3000"], "/ copy"),
    ("lifecycle", ["--events", "3000", "--repeat", "1"], "same as baseline"),
    ("correlator", ["--sizes", "2e3", "--queries", "4"], "timeline p50 ms"),
    ("api", ["--sizes", "small", "--requests", "20"], "| small | distinct | uncached |"),
    ("ship", ["--quick", "--repeat", "1", "--skip-breakdown"], "lines/s"),
    ("text", ["--lines", "2e3", "--repeat", "1"], "| text --format oslo |"),
]


def _run(name: str, args: list[str], tmp_path: Path | None) -> str:
    """The report of ``python -m benchmarks.NAME ARGS``; its temporary files under ``tmp_path``
    when given."""
    env = {**os.environ, "TMPDIR": str(tmp_path)} if tmp_path else None
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"benchmarks.{name} failed:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize(("name", "args", "shown"), RUNS, ids=[run[0] for run in RUNS])
def test_a_benchmark_runs_and_reports(
    name: str, args: list[str], shown: str, tmp_path: Path
) -> None:
    assert shown in _run(name, args, tmp_path)


def test_the_devstack_benchmark_runs_a_scenario() -> None:
    need_devstack_parts()
    # The system temporary directory: the postgres user and nginx's workers must reach the
    # stack's directories, which pytest's private ones do not let them.
    report = _run("devstack", ["--scenarios", "missing-prerequisite", "--rounds", "1"], None)
    assert "`missing-prerequisite` | deploy (deploy) | 1/1" in report


def test_the_loki_timeline_benchmark_pulls_from_the_real_loki(
    real_loki: str, tmp_path: Path
) -> None:
    tenant = os.environ.get(LOKI_TENANT_ENV)
    args = ["--lines", "2e4", "--seeds", "2", "--loki-url", real_loki]
    report = _run("loki_timeline", [*args, *(["--tenant", tenant] if tenant else [])], tmp_path)
    assert "| pull from Loki (time to verdict) |" in report
    # The pull and today's path agree with the generator on every seed.
    assert "show the incident's own entries: every seed." in report
