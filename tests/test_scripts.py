"""The two commands README.md opens with: their --help says what they do and runs nothing."""

from __future__ import annotations

import subprocess
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
