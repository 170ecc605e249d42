"""``--format auto``: the format that reads the most of an input's first lines.

Each candidate groups the first :data:`HEAD_LINES` lines into records as it would and reads
them; its score is the lines of the records it read. The best score wins; on a tie the
candidate listed first (an operator's own formats, then the built-in ones from the most
particular to the most lenient: logfmt reads any ``key=value`` line). The choice is made once
per input and said (the ingest's notes), so a file in another format than its neighbours is
read as what it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import tzinfo
from typing import Final

from correlator.sources.text._format import Parsed, TextFormat
from correlator.sources.text._records import Record, records

__all__ = ["HEAD_LINES", "Choice", "choose"]

#: How many lines of an input the choice reads.
HEAD_LINES: Final = 50
#: Lines longer than this are left out of the choice: a format shows in a line's start, and
#: eight formats each reading a line of a megabyte cost more than the ingest itself.
SAMPLE_LINE_BYTES: Final = 64 * 1024

Choice = tuple[TextFormat | None, list[tuple[str, int]], int]
"""The format chosen (None: none reads a line), every candidate's score best first, and the
number of lines read (non-blank)."""


def choose(head: Sequence[bytes], candidates: Iterable[TextFormat], zone: tzinfo) -> Choice:
    """Choose the format of an input from its first lines (the module says how).

    Args:
        head: its first lines (at most :data:`HEAD_LINES` are read, those longer than
            :data:`SAMPLE_LINE_BYTES` left out).
        candidates: the formats, first preferred on a tie.
        zone: the zone of times without one (some formats refuse an impossible local time).
    """
    sample = [line for line in itertools.islice(head, HEAD_LINES) if len(line) <= SAMPLE_LINE_BYTES]
    lines = sum(1 for line in sample if line.strip())
    scores: list[tuple[str, int]] = []
    best: TextFormat | None = None
    best_score = 0
    for candidate in candidates:
        score = 0
        for item in records(sample, candidate.starts):
            if isinstance(item, Record) and isinstance(candidate.read(item.text, zone), Parsed):
                score += len(item.lines)
        scores.append((candidate.name, score))
        if score > best_score:
            best, best_score = candidate, score
    scores.sort(key=lambda pair: -pair[1])
    return best, scores, lines


def described(choice: Choice, formats: Mapping[str, TextFormat]) -> str:
    """What the choice says, for the ingest's notes or its error."""
    chosen, scores, lines = choice
    others = ", ".join(
        f"{name} {score}"
        for name, score in scores
        if score and name != (chosen.name if chosen else None)
    )
    if chosen is None:
        return (
            f"--format auto: none of the formats ({', '.join(formats)}) reads any of the "
            f"first {lines} lines; give --format, or declare the format in a --text-rules file"
        )
    read = dict(scores)[chosen.name]
    line = f"--format auto chose {chosen.name}: it reads {read} of the first {lines} lines"
    return f"{line} (also read: {others})" if others else line
