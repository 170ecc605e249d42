"""The checks a line-oriented source adapter makes before it reads a line, and its rejects.

Separate so that every adapter refuses the same lines with the same words: a line longer than
:data:`~correlator.model.MAX_LINE_BYTES` or not valid UTF-8 cannot be read at all, and a
reject names the line (``line 7 is not valid JSON: ...``) and carries an excerpt of it.
:func:`iter_lines` numbers and screens the lines of a file for the JSON adapters, and
:func:`hasher` starts a line's content hash for less than building it anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any, Final

from correlator.model import MAX_LINE_BYTES, Reject

__all__ = [
    "EXCERPT_CHARS",
    "UTF8_BOM",
    "excerpt",
    "hasher",
    "iter_lines",
    "line_reject",
    "unreadable",
    "without_bom",
]

#: How much of a line a reject keeps, in characters.
EXCERPT_CHARS: Final = 200
#: The UTF-8 byte order mark, which Windows editors and PowerShell put at the start of a file.
UTF8_BOM: Final = b"\xef\xbb\xbf"
_LIMIT_MIB: Final = f"{MAX_LINE_BYTES / 2**20:g}"


def without_bom(start: bytes) -> bytes:
    """The start of an input without its UTF-8 byte order mark, if it has one.

    Inputs are read from their first line or first chunk: a mark left there fails the first
    line's JSON, hides a whole JSON document, or ends up inside an nginx field.

    Args:
        start: the first line (or the whole body) of an input.

    Returns:
        ``start`` without a leading :data:`UTF8_BOM`.
    """
    return start[3:] if start.startswith(UTF8_BOM) else start


def excerpt(raw: bytes) -> str:
    """The first :data:`EXCERPT_CHARS` characters of a line, decoded leniently, for a reject.

    Args:
        raw: the line as read.

    Returns:
        Its start, undecodable bytes replaced by U+FFFD.
    """
    # A UTF-8 character takes at most 4 bytes: decode no more than the excerpt can need.
    return raw[: EXCERPT_CHARS * 4].decode("utf-8", "replace")[:EXCERPT_CHARS]


def unreadable(line_no: int, raw: bytes) -> str | None:
    """Why a physical line cannot be read at all (too long, not UTF-8), or None.

    Args:
        line_no: the line's number, for the reason.
        raw: the line as read.

    Returns:
        A reason naming the line (``line 3 is not valid UTF-8 (byte 0xff at offset 9)``,
        ``line 4 is longer than 1 MiB (1,048,576 bytes)``), or None when the
        line can be decoded.
    """
    if len(raw) > MAX_LINE_BYTES:
        # Not its length: a file's over-long line is read only up to just past the limit
        # (correlator.ingest.read_lines), so the length seen here is not the line's.
        return f"line {line_no} is longer than {_LIMIT_MIB} MiB ({MAX_LINE_BYTES:,} bytes)"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"line {line_no} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        )
    return None


def line_reject(source: str, origin: str, line_no: int, reason: str, raw: bytes) -> Reject:
    """A reject of line ``line_no``, its reason prefixed with ``line N``.

    Args:
        source: the adapter kind (``nginx``).
        origin: where the line comes from (a path, ``http``).
        line_no: the line's number.
        reason: what is wrong, following ``line N`` (``is not valid JSON: ...``).
        raw: the line, for the excerpt.

    Returns:
        The reject.
    """
    return Reject(source, origin, line_no, f"line {line_no} {reason}", excerpt(raw))


def hasher(source: str) -> Any:
    """A blake2b state equal to the one :func:`~correlator.model.content_hash` starts from.

    ``hasher(kind).copy()`` + ``update(raw)`` gives the same digest as ``content_hash(kind,
    raw)`` for less than building the state, person string and all, for every line.

    Args:
        source: the source kind.

    Returns:
        A ``hashlib.blake2b`` object to copy, never to update directly.
    """
    return hashlib.blake2b(digest_size=8, person=source.encode()[:16])


def iter_lines(
    lines: Iterable[bytes], source: str, origin: str
) -> Iterator[tuple[int, bytes, str] | Reject]:
    """Number lines from 1 and screen them: oversized and non-UTF-8 lines become rejects.

    Args:
        lines: raw lines without their ``\\n``.
        source: the adapter kind, for the rejects.
        origin: file path or query, for the rejects.

    Yields:
        ``(line_no, data, text)`` for each non-blank line (a trailing ``\\r`` removed), or a
        :class:`Reject`.
    """
    for line_no, line in enumerate(lines, 1):
        data = bytes(line)
        if data[-1:] == b"\r":
            data = data[:-1]
        reason = unreadable(line_no, data)
        if reason is not None:
            yield Reject(source, origin, line_no, reason, excerpt(data))
            continue
        text = data.decode()
        if text and not text.isspace():
            yield line_no, data, text
