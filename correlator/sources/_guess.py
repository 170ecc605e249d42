"""Which source kind some lines look like: each guessed source's parser tried on a sample.

Used to answer a fully rejected ingest ("rejected 3: line is not valid JSON") with the kind
that would have read the lines (``--source nginx``), rather than a guess from a pattern of our
own: the parsers themselves are the definition of what each kind looks like.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Final

from correlator.model import Event
from correlator.sources import SOURCES

__all__ = ["SAMPLE_LINES", "guess_kinds"]

#: How many lines of a file are tried.
SAMPLE_LINES: Final = 50


def guess_kinds(lines: Iterable[bytes]) -> list[tuple[str, int]]:
    """The kinds that read some of ``lines``, most lines first.

    Args:
        lines: the start of a file (the first :data:`SAMPLE_LINES` are tried).

    Returns:
        ``(kind, events read)`` for each source of the registry with a parser that read at
        least one line, best first, in the registry's order among equals; sources declared
        ``guessed=False`` are left out (``agent``: ``ndjson`` reads the same).
    """
    sample = list(itertools.islice(lines, SAMPLE_LINES))
    found = []
    for kind, declared in SOURCES.items():
        if declared.parse is None or not declared.guessed:
            continue
        try:
            items = declared.parse(sample, "sample", **declared.guess_values)
            read = sum(isinstance(item, Event) for item in items)
        except Exception:  # noqa: BLE001 - a guess: a parser that cannot read it is no match
            read = 0
        if read:
            found.append((kind, read))
    found.sort(key=lambda pair: -pair[1])
    return found
