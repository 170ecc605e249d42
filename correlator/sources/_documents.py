"""Framing JSON documents for the document sources (``k8s``, ``aap``): one document spread over
many lines (``kubectl get -o json``, a pretty-printed API answer), several concatenated, or one
per line (NDJSON), in any mix.

A line that is a whole document by itself (NDJSON) is read at once. Other lines are gathered
while a document is open and handed to the decoder when the nesting of ``{``/``[`` against
``}``/``]`` (outside strings, which cannot span lines in JSON) comes back to zero at the end of
a line: memory holds the document being read, never the whole input. Two limits bound it; a
document past either is a :class:`~correlator.model.Reject` naming the limit, the lines it has
so far are let go, and reading resumes as after invalid JSON:

- :data:`MAX_DOCUMENT_BYTES` (64 MiB): ``kubectl get -o json`` of 20,000 small custom
  resources is about 20 MiB (``managedFields`` and the last-applied annotation add to that);
  parsed, a document takes several times its size in Python objects. A larger list can be
  read as one object per line (``kubectl get -o json | jq -c '.items[]'``);
- :data:`MAX_DOCUMENT_DEPTH` (512 levels): the stdlib decoder, which finds where a document
  ends, recurses once per level (Python's recursion limit is 1,000 frames): without the limit
  ``[`` * 100,000 crashed the ingest with ``RecursionError`` and lost every document of the
  file. The adapters refuse, item by item, what nests deeper than the 254 levels orjson writes
  (``_record.MAX_DEPTH``), so nothing deeper is ever stored.

After a document that is not valid JSON, too large or nested too deep, reading resumes at the
next line that starts with ``{`` or ``[`` in its first column (where a top-level document
starts, whether pretty-printed by kubectl or one per line), so later documents are kept; that
line may be the one at which the refused document went past a limit (a broken document that
never closed, followed by a good one), which is then read again as a document's start.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson

from correlator.model import MAX_LINE_BYTES, Reject
from correlator.sources._lines import excerpt, unreadable

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_DOCUMENT_DEPTH", "item_excerpt", "iter_documents"]

#: The largest document read, in bytes (its lines and their newlines).
MAX_DOCUMENT_BYTES: Final = 64 * 1024 * 1024
#: The deepest nesting of objects and arrays a document may have.
MAX_DOCUMENT_DEPTH: Final = 512

# A JSON string, or an unterminated one (to the end of the line: the document is broken, and
# what follows the quote is no structure). Its closing quote optional, so that a line of
# `"\"\"\"...` is one linear pass rather than a failed match from every quote; the loop
# unrolled (runs of plain characters, then an escape), 2.5 times faster than `(?:[^"\\]|\\.)*`.
_STRING: Final = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_BRACKETS: Final = re.compile(r"[\[\]{}]")
_STARTS: Final = ("{", "[")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)


def _nesting(text: str, depth: int) -> tuple[int, bool]:
    """The nesting after a line of a document, from ``depth`` before it, and whether it went
    deeper than :data:`MAX_DOCUMENT_DEPTH` on the way (then the depth returned is not
    meaningful: the document is refused)."""
    if '"' in text:
        text = _STRING.sub("", text)
    opens = text.count("{") + text.count("[")
    if depth + opens <= MAX_DOCUMENT_DEPTH:  # cannot have gone deeper: no need to follow it
        return depth + opens - text.count("}") - text.count("]"), False
    for bracket in _BRACKETS.finditer(text):  # to where it gets too deep, if it does
        depth += 1 if bracket[0] in _STARTS else -1
        if depth > MAX_DOCUMENT_DEPTH:
            return depth, True
    return depth, False


def iter_documents(
    lines: Iterable[bytes], source: str, origin: str
) -> Iterator[tuple[int, Any] | Reject]:
    """Frame JSON documents: one spread over many lines, several concatenated, or NDJSON.

    Lines that are oversized or not UTF-8 are rejected, and so is any document spanning one.
    A document larger than :data:`MAX_DOCUMENT_BYTES` or nested deeper than
    :data:`MAX_DOCUMENT_DEPTH` is rejected as soon as it gets there (the module docstring says
    why, and where reading resumes). Never raises on bad input.

    Args:
        lines: raw lines without their ``\\n``.
        source: the adapter kind, for rejects.
        origin: file path, for rejects.

    Yields:
        ``(first_line_no, document)`` per document, or a :class:`Reject`.
    """
    texts: list[str] = []  # the lines of the open document(s), from line `first`
    bad: list[int] = []  # rejected lines among them, by number
    first = size = depth = 0
    skipping = False  # past a refused document, up to the next line that starts one
    numbered = enumerate(lines, 1)
    again: tuple[int, bytes] | None = None  # a line to read once more, as a document's start
    while True:
        if again is not None:
            (line_no, line), again = again, None
        elif (taken := next(numbered, None)) is not None:
            line_no, line = taken
        else:
            break
        data = bytes(line)
        if data[-1:] == b"\r":
            data = data[:-1]
        if skipping:
            if data[:1] not in (b"{", b"["):
                continue
            skipping = False
        if (
            not texts
            and data[:1] in (b"{", b"[")
            and len(data) <= MAX_LINE_BYTES
            and data.count(b"{") + data.count(b"[") <= MAX_DOCUMENT_DEPTH
        ):
            # A line that is a whole document (NDJSON, watch output): orjson reads it, and
            # says so, for less than framing it (what framing would find, it finds).
            try:
                document = orjson.loads(data)
            except orjson.JSONDecodeError:
                pass  # the start of a longer document, or not JSON: framed as any line
            else:
                yield line_no, document
                continue
        try:
            if len(data) > MAX_LINE_BYTES:
                raise ValueError  # noqa: TRY301 - joins the unreadable path below
            text = data.decode()
        except ValueError:  # too long, or not UTF-8 (UnicodeDecodeError)
            yield Reject(source, origin, line_no, unreadable(line_no, data) or "", excerpt(data))
            bad.append(line_no)
            text = ""
        else:
            if not texts and (not text or text.isspace()):
                continue  # between documents
        if not texts:
            first = line_no
        texts.append(text)
        size += len(data) + 1
        # Most lines of a pretty-printed document hold no bracket: four `in` tests (~40 ns).
        if "{" in text or "[" in text or "}" in text or "]" in text:
            depth, too_deep = _nesting(text, depth)
        else:
            too_deep = False
        if too_deep or size > MAX_DOCUMENT_BYTES:
            if too_deep:
                problem = f"nested deeper than {MAX_DOCUMENT_DEPTH} levels"
                limit = f"{MAX_DOCUMENT_DEPTH} levels"
            else:
                problem = f"of over {MAX_DOCUMENT_BYTES:,} bytes"
                limit = f"{MAX_DOCUMENT_BYTES:,} bytes" + (
                    f" ({MAX_DOCUMENT_BYTES // 2**20} MiB)"
                    if MAX_DOCUMENT_BYTES % 2**20 == 0
                    else ""
                )
            reason = (
                f"line {first} starts a JSON document {problem} (at line {line_no}); "
                f"the limit is {limit}"
            )
            yield Reject(source, origin, first, reason, texts[0][:200])
            # The line that went past the limit may be the next document's first (the refused
            # one never closed): read it again as one, else skip to the next line that is.
            restart = line_no != first and data[:1] in (b"{", b"[")
            texts, bad, size, depth, skipping = [], [], 0, 0, not restart
            if restart:
                again = (line_no, line)
        elif depth <= 0:  # closed (or closed more than it opened: the decoder says so)
            yield from _documents(texts, first, bad, source, origin)
            texts, bad, size, depth = [], [], 0, 0
    if texts:  # left open at the end: the decoder says where it breaks
        yield from _documents(texts, first, bad, source, origin)


def item_excerpt(item: Any) -> str:
    """The start of a document's item as JSON, for a reject (words when it nests deeper than
    orjson writes: not ``repr``, which recurses as deep as the item goes).

    Args:
        item: a value of a document.

    Returns:
        Its first 200 characters.
    """
    try:
        return orjson.dumps(item).decode()[:200]
    except orjson.JSONEncodeError:
        return "(an item nested too deep to show)"


def _documents(
    texts: list[str], first_line: int, bad: list[int], source: str, origin: str
) -> Iterator[tuple[int, Any] | Reject]:
    """The documents of ``texts`` (lines numbered from ``first_line``), or their rejects."""
    text = "\n".join(texts)
    starts = [0]
    for line in texts[:-1]:
        starts.append(starts[-1] + len(line) + 1)

    def line_of(offset: int) -> int:
        return first_line - 1 + bisect.bisect_right(starts, offset)

    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return
        first = line_of(pos)
        try:
            document, stop = _DECODER.raw_decode(text, pos)
        except ValueError as exc:
            yield Reject(source, origin, first, _json_problem(exc, first, line_of), _at(text, pos))
            pos = _resync(text, starts, first - first_line + 1)
            continue
        except RecursionError:
            # Within MAX_DOCUMENT_DEPTH, but called from deep in a stack already.
            reason = f"line {first} starts a JSON document nested too deep to read here"
            yield Reject(source, origin, first, reason, _at(text, pos))
            pos = _resync(text, starts, first - first_line + 1)
            continue
        try:
            # The stdlib decoder finds where the document ends; orjson has the final say on
            # its content (it refuses lone surrogates, which no UTF-8 column can store).
            document = orjson.loads(text[pos:stop])
        except orjson.JSONDecodeError as exc:
            reason = f"line {first} is not valid JSON: {exc}"
            yield Reject(source, origin, first, reason, _at(text, pos))
            pos = stop
            continue
        last = line_of(stop - 1)
        spanned = [n for n in bad[bisect.bisect_left(bad, first) :] if n <= last]
        if spanned:
            reason = (
                f"line {first} starts a document (to line {last}) that spans rejected line "
                f"{spanned[0]}"
            )
            yield Reject(source, origin, first, reason, _at(text, pos))
        else:
            yield first, document
        pos = stop


def _json_problem(exc: ValueError, first: int, line_of: Any) -> str:
    if isinstance(exc, json.JSONDecodeError):
        where = line_of(exc.pos)
        if where == first:
            return f"line {first} is not valid JSON: {exc.msg} (column {exc.colno})"
        return (
            f"line {first} starts a JSON document that breaks at line {where}: {exc.msg} "
            f"(column {exc.colno})"
        )
    return f"line {first} is not valid JSON: {exc}"


def _at(text: str, pos: int) -> str:
    return text[pos : pos + 200]


def _resync(text: str, starts: list[int], failed_index: int) -> int:
    """Offset of the next line after the ``failed_index``-th (1-based) of the text that opens
    a top-level document."""
    for offset in starts[failed_index:]:
        if text[offset : offset + 1] in _STARTS:
            return offset
    return len(text)
