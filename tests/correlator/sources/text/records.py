"""How the text formats' tests group lines into records, as the ``text`` source will: a line
that does not start a record continues the one above it."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from correlator.sources.text import TextFormat

__all__ = ["FIXTURES", "fixture_lines", "records"]

FIXTURES: Final = Path(__file__).parent / "fixtures"


def fixture_lines(name: str) -> list[str]:
    """The lines of a fixture, without their line ends."""
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def records(text_format: TextFormat, lines: list[str]) -> tuple[list[str], list[str]]:
    """The records of ``lines`` (each its lines joined with newlines), and the lines that
    continue nothing (before the first record)."""
    found: list[list[str]] = []
    orphans: list[str] = []
    for line in lines:
        if text_format.starts(line):
            found.append([line])
        elif found:
            found[-1].append(line)
        else:
            orphans.append(line)
    return ["\n".join(record) for record in found], orphans
