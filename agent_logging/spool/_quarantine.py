"""The spool's quarantine: damaged segments kept for an operator, with what they cost.

A segment that lost records to damage (a tail cut off, bytes flipped, the file emptied, zeroed,
overwritten or deleted; counted against the ledger, ``_ledger``) is never deleted. Its
loss is written down the moment it is found, as ``DIR/quarantine/seg-N.loss.json``; the file
itself moves to ``DIR/quarantine/seg-N.spool`` once nothing of it is left to ship (its intact
records are shipped first, as from any segment). A report::

    {"segment": "seg-0000000000000003.spool", "records_lost": 500, "at_least": false,
     "written": 1000, "acknowledged": 0, "intact": 500,
     "damage": [{"offset": 103740, "end": 103790, "kind": "torn"}],
     "why": "...", "found_unix_s": 1767225600.0, "found_by_pid": 4242}

``records_lost`` is ``written - acknowledged - intact`` when the ledger knew the segment
(``at_least`` false); without it (a spool written before the ledger existed, or a ledger that
cannot be read) it is the number of damaged regions between intact records, each of which held
at least one (``at_least`` true). ``damage`` lists the damaged byte ranges found when the report
was written (offsets in the segment file as it was then).

The reports are the gate's memory: ``agent-logging drain`` fails while any is there, until the
operator accepts the loss (``--accept-loss``) or removes the folder (``status`` and ``drain``
say so). Nothing here deletes a report or a quarantined file.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from agent_logging.spool._framing import Corrupt, Frame, read_frames

__all__ = [
    "QUARANTINE_NAME",
    "Quarantine",
    "damage_regions",
    "move_in",
    "read_quarantine",
    "report_loss",
]

#: The quarantine folder's name in the spool directory.
QUARANTINE_NAME: Final = "quarantine"
_REPORT_SUFFIX: Final = ".loss.json"
#: A report lists at most this many damaged ranges (random bytes make one per frame tried).
_MAX_REGIONS: Final = 100


@dataclass
class Quarantine:
    """What a spool's quarantine holds: the loss reports and the segment files kept."""

    folder: Path
    reports: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    #: Report files that cannot be read: a loss of unknown size.
    unreadable: int = 0

    @property
    def records_lost(self) -> int:
        return sum(int(r.get("records_lost", 0)) for r in self.reports)

    @property
    def at_least(self) -> bool:
        """Whether :attr:`records_lost` is a lower bound only."""
        return self.unreadable > 0 or any(r.get("at_least") for r in self.reports)


def damage_regions(read: Callable[[int, int], bytes], start: int, end: int) -> list[dict[str, Any]]:
    """The damaged byte ranges of a segment's ``[start, end)``, at most ``_MAX_REGIONS``."""
    regions: list[dict[str, Any]] = []
    for item in read_frames(read, start, end):
        if isinstance(item, Frame):
            continue
        kind = "corrupt" if isinstance(item, Corrupt) else "torn"
        regions.append({"offset": item.offset, "end": item.end, "kind": kind})
        if len(regions) >= _MAX_REGIONS:
            break
    return regions


def report_loss(directory: Path, segment_name: str, report: dict[str, Any]) -> bool:
    """Write (or replace) the loss report of one segment; False when it cannot be written.

    Args:
        directory: the spool directory.
        segment_name: the segment's file name, ``seg-N.spool``.
        report: the fields of the module doc but ``segment``, ``found_*``.
    """
    folder = directory / QUARANTINE_NAME
    body = {
        "segment": segment_name,
        **report,
        "found_unix_s": round(time.time(), 3),
        "found_by_pid": os.getpid(),
    }
    path = folder / (segment_name.removesuffix(".spool") + _REPORT_SUFFIX)
    tmp = path.with_name(path.name + ".tmp")
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        tmp.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def move_in(directory: Path, path: Path) -> bool:
    """Move a damaged segment file into the quarantine (a rename: no space needed)."""
    folder = directory / QUARANTINE_NAME
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        os.replace(path, folder / path.name)
    except FileNotFoundError:
        return True  # nothing left to keep: the report says the file was gone
    except OSError:
        return False
    return True


def read_quarantine(directory: Path) -> Quarantine:
    """The reports and kept files of a spool's quarantine (empty when it has none)."""
    found = Quarantine(directory / QUARANTINE_NAME)
    try:
        names = sorted(os.listdir(found.folder))
    except OSError:
        return found
    for name in names:
        path = found.folder / name
        if name.endswith(_REPORT_SUFFIX):
            try:
                report = orjson.loads(path.read_bytes())
            except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
                report = None
            if isinstance(report, dict) and isinstance(report.get("records_lost"), int):
                found.reports.append(report)
            else:
                found.unreadable += 1
        elif name.endswith(".spool"):
            found.files.append(path)
    return found
