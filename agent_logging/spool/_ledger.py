"""The spool's ledger: how many records each segment was given, kept outside the segments.

Why. A segment's frames say only what survived: a reader that finds 500 intact records cannot
tell from the file alone whether it held 500 or 1,000 before it was cut, and a segment emptied,
zeroed or overwritten with random bytes holds no header left to say what it held. So the writer
notes, beside the segments, how many records it appended to each (``DIR/ledger``), and replay
(``_segments.take_stock``) compares: ``written - acknowledged - intact`` records of a segment
were lost to damage (``_quarantine``). A segment the ledger names but whose file is gone
was lost whole.

Format: text, one segment per line, then a CRC of the lines::

    ledger 1
    7 1000           segment 7 was given 1000 records
    8 12             segment 8 (the active one) 12, as of this write
    end 5f3a09c1     zlib.crc32 of the lines above, hex

Written in place (one ``pwrite``, then ``ftruncate``: a temporary file and a rename cost a
journal commit, 1.4 ms on the development machine's virtual disk), never fsynced. A reader
trusts nothing after ``end`` (a kill between the two calls leaves the old, longer tail there)
and nothing whose CRC does not match: then the ledger is unknown, and the spool is checked as
one written before the ledger existed (damage counted, not the records it cost).

When. At every segment's creation (under the append lock, once per segment), when
``drop_oldest`` deletes one, after every :meth:`Spool.sync <agent_logging.spool._spool.Spool.sync>`
(the fsyncs first, so that the ledger never counts records a power loss would take back
without it being true), at close, and at most every :data:`REFRESH_S` from
:meth:`Spool.sync_if_due <agent_logging.spool._spool.Spool.sync_if_due>`, which the shipper calls
however long Loki is down. What it cannot see: records appended to the active segment after
its last write, and then destroyed, by a crash followed by damage to that segment's tail.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = ["LEDGER_NAME", "REFRESH_S", "read_ledger", "write_ledger"]

#: The ledger's file name in the spool directory.
LEDGER_NAME: Final = "ledger"
#: ``sync_if_due`` brings the active segment's count up to date at most this often.
REFRESH_S: Final = 1.0
_HEAD: Final = "ledger 1\n"


def _text(counts: Iterable[tuple[int, int]]) -> str:
    lines = _HEAD + "".join(f"{seq} {written}\n" for seq, written in counts)
    return f"{lines}end {zlib.crc32(lines.encode('ascii')):08x}\n"


def write_ledger(directory: Path, counts: Iterable[tuple[int, int]]) -> bool:
    """Write the ledger: ``(segment seq, records appended to it)`` for every live segment.

    Returns:
        False when it could not be written (counted by the caller as a write error).
    """
    data = _text(counts).encode("ascii")
    try:
        fd = os.open(directory / LEDGER_NAME, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def read_ledger(directory: Path) -> dict[int, int] | None:
    """The ledger's counts by segment seq; None when it is missing or cannot be trusted."""
    try:
        text = (directory / LEDGER_NAME).read_text("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    head, sep, tail = text.partition("\nend ")
    if not sep or not head.startswith(_HEAD.rstrip("\n")):
        return None
    lines = head + "\n"
    crc = tail.split("\n", 1)[0]
    if crc != f"{zlib.crc32(lines.encode('ascii')):08x}":
        return None
    counts: dict[int, int] = {}
    for line in lines.splitlines()[1:]:
        fields = line.split()
        if len(fields) != 2 or not (fields[0].isdigit() and fields[1].isdigit()):
            return None
        counts[int(fields[0])] = int(fields[1])
    return counts
