"""Lines of a binary stream, read a block at a time: what every ingest reads its input with.

:func:`read_line_blocks` reads :data:`BLOCK_BYTES` at a time (one ``read1``: a damaged
``.gz`` raises only at the block where the damage is, after the blocks before it were
handed over) and splits each block into lines in C (``bytes.split``), so that a line costs no
Python bytecode of its own: ``chain.from_iterable`` of the blocks is :func:`read_lines`. The
first line loses a UTF-8 byte order mark; every line loses its ``\\n`` (a ``\\r`` stays, for the
adapter). Memory stays within a block and one line's limit, whatever the input: a line longer
than :data:`LINE_READ_BYTES` (a 3 GB file without a newline, say) is cut there, for the adapter
to reject as too long, and the rest of it is skipped as it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from typing import IO, Final

from correlator.model import MAX_LINE_BYTES
from correlator.sources._lines import UTF8_BOM, without_bom

__all__ = ["BLOCK_BYTES", "LINE_READ_BYTES", "Progress", "read_line_blocks", "read_lines"]

#: The most kept of one line: the longest line an adapter accepts
#: (:data:`~correlator.model.MAX_LINE_BYTES`) with a ``\\r\\n``. A longer line is cut there.
LINE_READ_BYTES: Final = MAX_LINE_BYTES + 2
#: What one read asks for: small enough that a block of empty lines is a list of 1 MiB of
#: pointers at most, and that a block stays in the CPU's cache while it is split (128 KiB read
#: 10^6 lines in 0.23 s, 1 MiB in 0.91 s).
BLOCK_BYTES: Final = 128 * 1024

Progress = Callable[[int], None]


def read_line_blocks(handle: IO[bytes], progress: Progress | None = None) -> Iterator[list[bytes]]:
    """The lines of a binary stream, without their ``\\n``, a block's worth at a time.

    Args:
        handle: the stream, read from where it is.
        progress: called with the bytes of each read.

    Yields:
        Lists of lines (never empty), in order; an over-long line cut to
        :data:`LINE_READ_BYTES`. A line the stream ends inside of (a last line without a
        newline) comes last; when a read raises, the partial line it interrupted is dropped
        and the exception propagates.
    """
    read = getattr(handle, "read1", handle.read)
    limit = LINE_READ_BYTES
    carry = b""  # the start of a line whose end is not read yet
    skipping = False  # inside the rest of a line already cut
    head = True  # the byte order mark is looked for until 3 bytes are read
    while block := read(BLOCK_BYTES):
        if progress is not None:
            progress(len(block))
        if head:
            carry += block
            if len(carry) < len(UTF8_BOM) and UTF8_BOM.startswith(carry):
                continue
            head = False
            block = without_bom(carry)
            carry = b""
        if skipping:
            end = block.find(b"\n")
            if end < 0:
                continue
            block = block[end + 1 :]
            skipping = False
        lines = (carry + block if carry else block).split(b"\n")
        carry = lines.pop()
        if len(carry) >= limit:  # no end in sight: cut it now, skip the rest as it comes
            lines.append(carry[:limit])
            carry = b""
            skipping = True
        if lines:
            # One C pass finds an over-long line; only then is the list rebuilt.
            if max(map(len, lines)) > limit:
                lines = [line[:limit] for line in lines]
            yield lines
    if carry:
        yield [carry]


def read_lines(handle: IO[bytes], progress: Progress | None = None) -> Iterator[bytes]:
    """The lines of :func:`read_line_blocks`, one at a time.

    Args:
        handle: the stream, read from where it is.
        progress: called with the bytes of each read.

    Returns:
        Each line without its ``\\n``; an over-long one cut to :data:`LINE_READ_BYTES`.
    """
    return chain.from_iterable(read_line_blocks(handle, progress))
