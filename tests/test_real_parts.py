"""The CI guard of :mod:`tests.real_parts`: in CI (``CI=true``) a missing real part fails the
tests that need it; elsewhere they skip; a part not available on this machine skips in both.

The end-to-end checks run pytest on real tests of the suite in a subprocess whose ``PATH``
lacks node and the collectors and whose environment names no Loki.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import real_parts

ROOT = Path(__file__).resolve().parents[1]

#: One test per kind of guard: a real Loki (a fixture reading $LOKI_URL), Node.js (a fixture
#: looking node up on PATH), and otelcol-contrib (not available on this machine).
GUARDED = [
    "tests/test_real_loki.py::test_records_drain_and_correlate_through_a_real_loki",
    "tests/dashboards/test_dashboards.py::test_every_logql_expression_parses[identifiers-set]",
    "tests/collector_config/test_configs.py::test_otelcol_contrib_validates_the_config",
]


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "yes"])
def test_ci_is_recognised(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(real_parts.CI_ENV, value)
    assert real_parts.in_ci()


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_anything_else_is_not_ci(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(real_parts.CI_ENV, raising=False)
    else:
        monkeypatch.setenv(real_parts.CI_ENV, value)
    assert not real_parts.in_ci()


def test_a_missing_part_fails_in_ci_naming_it_and_its_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(real_parts.CI_ENV, "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        real_parts.missing("PostgreSQL", "initdb failed: boom")
    assert str(failed.value) == (
        "CI=true and a real part is missing: PostgreSQL: initdb failed: boom "
        "(to get it: apt-get install postgresql (bash scripts/system-deps.sh))"
    )


def test_a_missing_part_skips_elsewhere_with_the_same_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(real_parts.CI_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^Chromium: gone \(to get it: apt-get"):
        real_parts.missing("Chromium", "gone")


def test_a_part_not_available_here_skips_in_ci_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(real_parts.CI_ENV, "true")
    with pytest.raises(pytest.skip.Exception, match="alloy is not on PATH and not available"):
        real_parts.not_available("alloy")


def test_without_loki_url_the_real_loki_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOKI_URL", raising=False)
    monkeypatch.setenv(real_parts.CI_ENV, "true")
    with pytest.raises(pytest.fail.Exception, match="Loki: LOKI_URL is not set"):
        real_parts.real_loki_url()
    monkeypatch.setenv("LOKI_URL", "http://127.0.0.1:3100/")
    assert real_parts.real_loki_url() == "http://127.0.0.1:3100"


def test_a_shared_loki_without_run_bits_runs_from_an_executable_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "bin").mkdir(parents=True)
    (shared / "bin" / "loki").write_bytes(b"#!/bin/sh\n")
    (shared / "bin" / "loki").chmod(0o444)  # as CI lays shared/
    monkeypatch.setattr(real_parts, "SHARED", shared)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runnable = real_parts.loki_binary(scratch)
    assert runnable == scratch / "loki"
    assert os.access(runnable, os.X_OK)
    assert runnable.read_bytes() == b"#!/bin/sh\n"


def test_no_loki_binary_at_all_is_a_missing_part(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(real_parts, "SHARED", tmp_path / "no-shared")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(real_parts.CI_ENV, "true")
    with pytest.raises(pytest.fail.Exception, match=r"Loki: neither .* nor `loki` on PATH"):
        real_parts.loki_binary(tmp_path)


def _pytest_without_parts(ci: bool) -> subprocess.CompletedProcess[str]:
    """pytest on :data:`GUARDED` with no Loki named and a PATH holding only the virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in {"LOKI_URL", "LOKI_TENANT", "CI"}}
    env["PATH"] = str(Path(sys.executable).parent)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsf", *GUARDED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _summary(output: str) -> str:
    found = re.findall(r"^=*\s*(\d+ \w+(?:, \d+ \w+)*) in [\d.]+s", output, re.M)
    assert found, output
    return str(found[-1])


@pytest.mark.integration
def test_in_ci_a_missing_part_fails_the_run_instead_of_skipping() -> None:
    done = _pytest_without_parts(ci=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _summary(done.stdout) == "1 skipped, 2 errors"
    assert "CI=true and a real part is missing: Loki: LOKI_URL is not set" in done.stdout
    assert "CI=true and a real part is missing: Node.js: node is not on PATH" in done.stdout
    assert "otelcol-contrib is not on PATH and not available on this machine" in done.stdout


@pytest.mark.integration
def test_elsewhere_a_missing_part_skips_its_tests_saying_why() -> None:
    done = _pytest_without_parts(ci=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _summary(done.stdout) == "3 skipped"
    assert "Loki: LOKI_URL is not set" in done.stdout
    assert "Node.js: node is not on PATH" in done.stdout
