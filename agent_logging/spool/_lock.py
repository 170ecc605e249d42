"""Who owns a spool directory: the exclusive ``flock`` on its ``lock`` file.

:func:`lock_directory` creates the directory (0700) and its ``lock`` file (0600) if needed,
takes the lock without waiting (``LOCK_EX | LOCK_NB``) and writes the owner's pid into the
file; the open :class:`~agent_logging.spool._spool.Spool` keeps the descriptor, and with it
the lock, until it closes. The pid serves error messages only (:func:`owner_pid`): the lock, not the
file's content, says whether a directory is owned.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from agent_logging.errors import SpoolError

__all__ = ["lock_directory", "owner_pid"]


def lock_directory(path: Path) -> int | None:
    """Create the directory if needed and flock it; None when another owner holds it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SpoolError(f"cannot open spool {path}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise SpoolError(f"cannot lock spool {path}: {exc}") from exc
    with contextlib.suppress(OSError):  # the pid only serves error messages
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def owner_pid(path: Path) -> str:
    try:
        text = (path / "lock").read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return "unknown"
    return text if text.isdigit() else "unknown"
