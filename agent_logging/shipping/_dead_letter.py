"""The dead-letter file: entries Loki refused, one JSON line each, with Loki's reason.

Each line is ``{"ts_ns", "labels", "line", "status", "reason", "dead_lettered_at"}``; the
file is rotated to ``<name>.1`` when the next line would take it past its cap
(:data:`DEAD_LETTER_MAX_BYTES` by default), so a misconfiguration that refuses everything
cannot fill the disk. :func:`append_dead_letters` writes the lines of entries refused
together (a batch Loki refused whole, for one reason) with one write and one fsync, so that a
Loki refusing everything costs a batch, not a record, per fsync; :func:`append_dead_letter`
writes one. The shipper counts and reports them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import orjson

from agent_logging.loki._entries import PushEntry

__all__ = ["DEAD_LETTER_MAX_BYTES", "append_dead_letter", "append_dead_letters"]

#: The dead-letter file is rotated to ``<name>.1`` past this size: refused entries are rare,
#: and a misconfiguration that refuses everything must not fill the disk.
DEAD_LETTER_MAX_BYTES: Final = 64 * 1024 * 1024


def _rfc3339(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def append_dead_letter(
    path: Path,
    entry: PushEntry,
    status: int | None,
    reason: str,
    *,
    now_unix_s: float,
    max_bytes: int,
) -> None:
    """Append one refused entry to the dead-letter file: :func:`append_dead_letters` of one."""
    append_dead_letters(path, [entry], status, reason, now_unix_s=now_unix_s, max_bytes=max_bytes)


def append_dead_letters(
    path: Path,
    entries: Sequence[PushEntry],
    status: int | None,
    reason: str,
    *,
    now_unix_s: float,
    max_bytes: int,
) -> None:
    """Append refused entries, all for one reason, to the dead-letter file; make them durable.

    Args:
        path: the dead-letter file; its directory is created when missing.
        entries: the entries Loki refused.
        status: Loki's HTTP status.
        reason: Loki's reason, in its words.
        now_unix_s: UNIX time, stamped as ``dead_lettered_at``.
        max_bytes: the file's cap: a non-empty file that these lines would take past it is
            first renamed to ``<name>.1`` (replacing the previous one).

    Raises:
        OSError: the file could not be written; the entries are then not recorded.
    """
    stamp = _rfc3339(now_unix_s)
    data = b"".join(
        orjson.dumps(
            {
                "ts_ns": entry.ts_ns,
                "labels": dict(entry.labels),
                "line": entry.line,
                "status": status,
                "reason": reason,
                "dead_lettered_at": stamp,
            }
        )
        + b"\n"
        for entry in entries
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    if size and size + len(data) > max_bytes:
        path.replace(path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        # The entries leave the spool right after this: the file must hold them first.
        os.fsync(fd)
    finally:
        os.close(fd)
