"""Where spools live: a service's spool directory under ``spool_dir``, and what is in it.

A spool directory is ``<spool_dir>/<service>/`` (``<service>.<pid>/`` when another live process
holds that one): a ``lock`` file, ``seg-*.spool`` segments, ``acked``, ``in-flight`` (how far
records may have reached Loki, ``shipping._reconcile``), ``ledger``, the ``quarantine`` folder
(``_quarantine``), and the dead-letter files of entries Loki refused. The durable sink
(``shipping._durable``) opens its own and adopts orphans; ``agent-logging status`` and ``drain``
(``_cli``, ``shipping._drain``) find them and read them from outside (:func:`spooled_records`,
:func:`live_owner_pid`: unlike ``_lock.owner_pid``, None when no live process holds the lock),
their owner alive or not.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agent_logging.errors import SpoolError
from agent_logging.spool._framing import Corrupt, TornTail
from agent_logging.spool._quarantine import QUARANTINE_NAME
from agent_logging.spool._segments import SpooledRecord, read_all
from agent_logging.spool._spool import Spool

if TYPE_CHECKING:
    from agent_logging._settings import Settings

__all__ = [
    "DEAD_LETTER_NAME",
    "dead_letter_paths",
    "is_spool_dir",
    "live_owner_pid",
    "open_own_spool",
    "remove_spool_files",
    "spool_dirs",
    "spool_kwargs",
    "spooled_records",
    "storage_problem",
]

DEAD_LETTER_NAME: Final = "dead-letter.ndjson"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
#: The files a spool directory consists of (see ``_spool``); removing an emptied orphan
#: deletes only these, so a directory holding anything else is never removed.
_SPOOL_FILES: Final = re.compile(r"seg-\d{16}\.spool|acked|acked\.tmp|in-flight|ledger")


def is_spool_dir(path: Path) -> bool:
    """Whether ``path`` is a spool directory: it holds a ``lock`` file or ``seg-*.spool`` files."""
    return (path / "lock").exists() or any(path.glob("seg-*.spool"))


def spool_dirs(root: Path) -> list[Path]:
    """The spool directories under ``root`` (or ``root`` itself if it is one), sorted."""
    if is_spool_dir(root):
        return [root]
    if not root.is_dir():
        return []
    return sorted(path for path in root.iterdir() if path.is_dir() and is_spool_dir(path))


def spooled_records(
    directory: Path, on_damage: Callable[[Path, Corrupt | TornTail], None] | None = None
) -> Iterator[SpooledRecord]:
    """The spool's unacknowledged records; none once its directory is gone.

    An adopting process removes an orphan spool it emptied, possibly while we look at it:
    a directory that vanished holds nothing, which is not an error. ``on_damage`` is
    ``read_all``'s.
    """
    try:
        yield from read_all(directory, on_damage)
    except SpoolError:
        if directory.exists():
            raise


def live_owner_pid(directory: Path) -> str | None:
    """The pid holding the spool's lock, or None when nobody does."""
    lock = directory / "lock"
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # no lock file, or the spool was removed meanwhile
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            text = lock.read_text("ascii", "replace").strip()
        except OSError:
            text = ""
        return text or "unknown"
    finally:
        os.close(fd)  # closing drops our shared lock, if we got it
    return None


def dead_letter_paths(directory: Path) -> list[Path]:
    """The dead-letter files of a spool directory that exist, the rotated (older) one first.

    ``shipping._dead_letter`` rotates ``dead-letter.ndjson`` to ``dead-letter.ndjson.1`` at its cap.
    """
    current = directory / DEAD_LETTER_NAME
    return [p for p in (current.with_name(current.name + ".1"), current) if p.exists()]


def storage_problem(directory: Path, needed_bytes: int) -> str:
    """Why a spool could not store a record, as far as the filesystem tells."""
    try:
        vfs = os.statvfs(directory)
    except OSError as exc:
        return f"its directory cannot be examined: {exc}"
    free = vfs.f_bavail * vfs.f_frsize
    if free < needed_bytes:
        return f"the disk is full ({free:,} bytes free; a new segment needs {needed_bytes:,})"
    return "a segment file could not be created or written"


def spool_kwargs(settings: Settings) -> dict[str, Any]:
    return {
        "max_bytes": settings.spool_max_bytes,
        "segment_bytes": min(8 * 1024 * 1024, settings.spool_max_bytes // 2),
        "full_policy": settings.spool_full_policy,
        "fsync": settings.spool_fsync,
    }


def remove_spool_files(directory: Path) -> None:
    """Delete a spool's own files, the lock last; anything else is left alone."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if _SPOOL_FILES.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    if not dead_letter_paths(directory) and not (directory / QUARANTINE_NAME).exists():
        # Kept with the lock, so that ``agent-logging drain`` still finds the dead letters
        # and the quarantine (records lost to damage).
        with contextlib.suppress(OSError):
            os.unlink(directory / "lock")


def open_own_spool(settings: Settings) -> Spool:
    root = settings.spool_dir
    if root is None:  # pragma: no cover - configure() requires it with loki_url
        raise ValueError("spool_dir is required")
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SpoolError(f"cannot create spool directory {root}: {exc}") from exc
    name = _UNSAFE_NAME.sub("_", settings.service) or "service"
    kwargs = spool_kwargs(settings)
    spool = Spool.try_open(root / name, **kwargs)
    if spool is None:
        spool = Spool.open(root / f"{name}.{os.getpid()}", **kwargs)
    return spool
