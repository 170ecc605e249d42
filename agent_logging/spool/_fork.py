"""The spool's fork safety: a forked child never writes, unlocks or deletes its parent's files.

Every open spool is registered (weakly) in :data:`LIVE`, and one ``os.register_at_fork`` hook
for all of them (a per-spool hook could never be unregistered) runs in a forked child:
:func:`disown` closes the child's copies of the fds without touching the files (no unlink, no
unlock: the flock belongs to the open file description the parent still holds) and makes the
spool unusable there; the child opens its own spool.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["LIVE", "disown"]

#: Every open spool of this process, weakly: added once open, gone at ``close()`` or :func:`disown`.
LIVE: weakref.WeakSet[Spool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for spool in list(LIVE):
        spool.after_fork_in_child()


# One hook for every spool (a per-spool hook could never be unregistered).
os.register_at_fork(after_in_child=_after_fork_in_child)


def disown(spool: Spool) -> None:
    """The body of :meth:`~agent_logging.spool._spool.Spool.after_fork_in_child` (no lock taken)."""
    spool._lock = threading.Lock()
    spool._room = threading.Condition(spool._lock)
    spool._read_lock = threading.Lock()
    spool.wake = threading.Event()
    spool._writer.forget()  # this process's mapping and fd; the file and the parent's stay
    if spool._lock_fd >= 0:
        with contextlib.suppress(OSError):
            os.close(spool._lock_fd)
    spool._lock_fd = -1
    spool._usable = False
    spool._fast_limit = -1
    spool._closed = True  # close() in the child must neither unlock nor unlink
    spool._closed_why = "closed in this process: it belongs to the parent of a fork"
    LIVE.discard(spool)
