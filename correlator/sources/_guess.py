"""Which source kind some lines look like: each file adapter tried on a sample.

Used to answer a fully rejected ingest ("rejected 3: line is not valid JSON") with the kind
that would have read the lines (``--source nginx``), rather than a guess from a pattern of our
own: the adapters themselves are the definition of what each kind looks like.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Final

from correlator.model import Event

__all__ = ["SAMPLE_LINES", "guess_kinds"]

#: How many lines of a file are tried.
SAMPLE_LINES: Final = 50


def guess_kinds(lines: Iterable[bytes], kinds: Sequence[str]) -> list[tuple[str, int]]:
    """The kinds that read some of ``lines``, most lines first.

    Args:
        lines: the start of a file (the first :data:`SAMPLE_LINES` are tried).
        kinds: the kinds to try (``ingest.FILE_KINDS``).

    Returns:
        ``(kind, events read)`` for each kind that read at least one line, best first;
        ``agent`` is left out where ``ndjson`` reads the same (one parser).
    """
    from correlator.ingest import FILE_KINDS, parser_for

    sample = list(itertools.islice(lines, SAMPLE_LINES))
    found = []
    seen_modules = set()
    for kind in kinds:
        module = FILE_KINDS.get(kind)
        if module is None or module in seen_modules:
            continue
        seen_modules.add(module)
        try:
            read = sum(isinstance(item, Event) for item in parser_for(kind)(sample, "sample"))
        except Exception:  # noqa: BLE001 - a guess: an adapter that cannot read it is no match
            read = 0
        if read:
            found.append((kind, read))
    found.sort(key=lambda pair: -pair[1])
    return found
