"""Adopting orphan spools: the spools under the root that no live process holds.

A spool's owner may die (a crash, a restart that comes back under another pid, a forked worker
that crashed while its parent runs on): its records stay on disk, locked by nobody. The
durable sink's ``agent-logging-adopt`` thread runs :meth:`Adoption.run`: at start, and every
``_RESCAN_S`` after, it opens each such spool (taking its lock, so its owner cannot be alive),
ships it with a shipper of its own, and removes it once empty. A spool that still holds dead
letters keeps its directory.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agent_logging import _state
from agent_logging.shipping._shipper import Shipper
from agent_logging.spool._dirs import remove_spool_files, spool_dirs, spool_kwargs
from agent_logging.spool._spool import Spool

if TYPE_CHECKING:
    from agent_logging._settings import Settings

__all__ = ["Adoption"]

#: How long an adopted orphan spool may take to ship before the adopter gives up for now.
_DEADLINE_S: Final = 3600.0
#: Seconds between two looks for orphans: a forked worker that crashed leaves its spool
#: behind while its parent lives on, possibly for months.
_RESCAN_S: Final = 60.0
#: A spool found locked is tried once more after this pause: a reader's lock is brief.
_PROBE_RETRY_S: Final = 0.5
#: An adoption ships in slices of this length, re-checking between them whether the sink is
#: closing: ``close()`` must not leave a thread pushing through a closed client for an hour.
_SLICE_S: Final = 1.0


class Adoption:
    """Looks for orphan spools under ``settings.spool_dir`` and ships them.

    Args:
        settings: the durable path's settings (the root, the spool options).
        own: this process's spool directory, never adopted.
        shipper_for: a shipper for an opened spool, configured as the process's own.
        stop: set when the sink closes; ends :meth:`run` and any adoption in progress.
    """

    def __init__(
        self,
        settings: Settings,
        own: Path,
        shipper_for: Callable[[Spool], Shipper],
        stop: threading.Event,
    ) -> None:
        self._settings = settings
        self._own = own
        self._shipper_for = shipper_for
        self._stop = stop
        #: Records shipped from adopted spools.
        self.adopted = 0
        #: Looks for orphans completed.
        self.rounds = 0
        #: The shipper of the spool being adopted now, if any.
        self.current: Shipper | None = None
        self._done = threading.Condition()

    def run(self) -> None:
        """Look for orphans now and every ``_RESCAN_S`` until ``stop`` is set."""
        while not self._stop.is_set():
            self._round()
            with self._done:
                self.rounds += 1
                self._done.notify_all()
            if self._stop.wait(_RESCAN_S):
                return

    def wait(self, rounds: int, timeout_s: float) -> bool:
        """Block until ``rounds`` looks are complete; False when ``timeout_s`` passed first."""
        with self._done:
            return self._done.wait_for(lambda: self.rounds >= rounds, timeout_s)

    def cancel(self) -> None:
        """End the adoption in progress, if any (``stop`` is set already)."""
        current = self.current
        if current is not None:
            current.stop(timeout_s=0.0)  # ends its ship_pending() in the adoption thread

    def _round(self) -> None:
        root = self._settings.spool_dir
        if root is None:
            return
        options = spool_kwargs(self._settings)
        for directory in spool_dirs(root):
            if self._stop.is_set():
                return
            if directory == self._own or directory in self._own.parents:
                continue  # our own spool, or a directory that holds it
            try:
                orphan = Spool.try_open(directory, **options)
                if orphan is None and not self._stop.wait(_PROBE_RETRY_S):
                    # Held for a moment by `agent-logging status` or `drain` reading it (a
                    # shared lock), or by a live owner: only the owner still holds it now.
                    orphan = Spool.try_open(directory, **options)
            except Exception as exc:  # noqa: BLE001 - a broken orphan must not stop this one
                _state.report_once(f"adopt:{directory}", f"cannot adopt spool {directory}: {exc}")
                continue
            if orphan is None:
                continue  # a live process owns it
            with orphan:
                shipper = self._shipper_for(orphan)
                self.current = shipper
                try:
                    emptied = self._ship(shipper)
                finally:
                    self.current = None
                    self.adopted += shipper.stats()["records_sent"]
                if emptied:
                    # Still holding its lock: a process of that service starting now cannot
                    # have opened it, so nothing of a live spool is removed.
                    remove_spool_files(directory)
            if emptied:
                with contextlib.suppress(OSError):
                    directory.rmdir()  # fails, keeping it, when a dead letter or else remains

    def _ship(self, shipper: Shipper) -> bool:
        """Ship an adopted spool in slices until it is empty (True) or closing/deadline."""
        deadline = time.monotonic() + _DEADLINE_S
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if shipper.ship_pending(min(_SLICE_S, remaining)):
                return True
        return False
