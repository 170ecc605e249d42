"""Lines into records: a line a format says starts a record opens one, and the lines after it
that start none are folded into it (a traceback, a multi-line message).

Each physical line is screened first: a line longer than
:data:`~correlator.model.MAX_LINE_BYTES` is a reject of its own, and a line that is not valid
UTF-8 (a file written in two encodings, binary noise) is decoded with U+FFFD for what cannot be
read and kept, marked (:attr:`Record.replaced`): plain-text logs are often written by
programs that never promised UTF-8, and their lines are still evidence. A record is bounded
(:data:`MAX_RECORD_LINES` lines, :data:`~correlator.model.MAX_LINE_BYTES` of text): a line
past either bound is rejected with a reason saying which record it would have continued, so
that a file whose records never start (the wrong format) cannot grow one without end. A line
before the first record continues nothing, and is rejected saying so; blank lines there are
skipped. Blank lines at the end of a record are not part of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from correlator.model import MAX_LINE_BYTES

__all__ = ["MAX_RECORD_LINES", "Orphan", "Record", "record_start", "records"]

#: The most lines one record holds (a deep Java stack trace is a few hundred).
MAX_RECORD_LINES: Final = 5_000
_LIMIT_MIB: Final = f"{MAX_LINE_BYTES / 2**20:g}"


@dataclass(slots=True)
class Record:
    """The lines of one record.

    Attributes:
        line_no: the number of its first line.
        lines: its lines, decoded, without their line ends.
        size: their length in characters, line ends counted.
        replaced: some line was not valid UTF-8 (its undecodable bytes are U+FFFD).
    """

    line_no: int
    lines: list[str]
    size: int
    replaced: bool = False

    @property
    def text(self) -> str:
        """Its lines joined with newlines, blank lines at its end left out."""
        lines = self.lines
        end = len(lines)
        while end > 1 and not lines[end - 1].strip():
            end -= 1
        return "\n".join(lines[:end]) if end > 1 else lines[0]


@dataclass(frozen=True, slots=True)
class Orphan:
    """A line that belongs to no record, and why.

    Attributes:
        line_no: its number.
        raw: the line as read (for the reject's excerpt).
        reason: why, following ``line N`` (``is longer than 1 MiB ...``).
    """

    line_no: int
    raw: bytes
    reason: str


def records(
    lines: Iterable[bytes], starts: Callable[[str], bool], start_line: int = 1
) -> Iterator[Record | Orphan]:
    """Group lines into records; the module says how.

    Args:
        lines: raw lines without their ``\\n`` (a ``\\r`` is dropped).
        starts: whether a decoded line starts a record.
        start_line: the number of the first line.

    Yields:
        Each line that belongs to no record as it is read, and each record once the line
        after it starts another (or the input ends): a line past a record's bounds comes
        before that record.
    """
    current: Record | None = None
    for line_no, line in enumerate(lines, start_line):
        raw, text, replaced = _screened(line)
        if text is None:
            yield Orphan(
                line_no, raw, f"is longer than {_LIMIT_MIB} MiB ({MAX_LINE_BYTES:,} bytes)"
            )
            continue
        if starts(text):
            if current is not None:
                yield current
            current = Record(line_no, [text], len(text), replaced)
        elif current is None:
            if text.strip():
                yield Orphan(line_no, raw, "continues no record: none starts before it")
        elif len(current.lines) >= MAX_RECORD_LINES:
            yield Orphan(
                line_no,
                raw,
                f"would continue the record of line {current.line_no} past "
                f"{MAX_RECORD_LINES:,} lines",
            )
        elif current.size + 1 + len(text) > MAX_LINE_BYTES:
            yield Orphan(
                line_no,
                raw,
                f"would continue the record of line {current.line_no} past {_LIMIT_MIB} MiB",
            )
        else:
            current.lines.append(text)
            current.size += 1 + len(text)
            current.replaced = current.replaced or replaced
    if current is not None:
        yield current


def _screened(raw: bytes) -> tuple[bytes, str | None, bool]:
    """A physical line as :func:`records` takes it: without its ``\r``, decoded (None past
    the size bound), and whether some of it was not UTF-8 (replaced)."""
    if raw[-1:] == b"\r":
        raw = raw[:-1]
    if len(raw) > MAX_LINE_BYTES:
        return raw, None, False
    try:
        return raw, raw.decode(), False
    except UnicodeDecodeError:
        return raw, raw.decode("utf-8", "replace"), True


def record_start(starts: Callable[[str], bool]) -> Callable[[bytes], bool]:
    """Whether a raw line starts a record as :func:`records` reads it (``starts`` of the line
    screened, a line past the size bound starting none): where batches may be cut."""

    def cut(raw: bytes) -> bool:
        text = _screened(raw)[1]
        return text is not None and starts(text)

    return cut
