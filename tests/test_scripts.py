"""The two commands README.md opens with: their --help says what they do and runs nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("script", "says"),
    [
        ("scripts/test.sh", "correlator eval"),
        ("scripts/demo.sh", "correlator demo"),
    ],
)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_describes_and_does_nothing_else(script: str, says: str, flag: str) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / script), flag], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: bash {script}")
    assert says in done.stdout
    # Nothing ran: no ruff, no pytest, no pip, no help of theirs.
    assert "==" not in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("module", ["dashboards", "tests.lokisim"])
def test_module_help_is_plain_text(module: str) -> None:
    # Their --help printed the module docstring: reStructuredText's ``Usage::`` and double
    # backticks, on a terminal.
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"usage: python -m {module} ")
    assert "``" not in out and "::" not in out
    assert "show this help message" in out
