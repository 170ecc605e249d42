"""The shipping counters of a service whose shipper is a process (``_process``).

Each shipper process counts for itself, as a thread shipper does (``ShipperStats``), and
sends its counters with every message. A process that dies takes its counts with it unless
they are kept: :class:`ShipCounters` folds an ended child's counters into those of the
earlier ones, so ``health()`` keeps counting across replacements, and adds what the
fallback thread shipper did. The last status and error are those of whichever of them was
active last; the owner's own troubles (a child that died or could not start) count as errors
there too.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

from agent_logging.shipping._delivery import ShipperStats

__all__ = ["ShipCounters"]

#: The counters that add up across children.
_SUMMED: Final = (
    "batches_sent",
    "records_sent",
    "bytes_sent",
    "retried",
    "dead_lettered",
    "reconciled",
    "resent_unreconciled",
)


def _none() -> dict[str, Any]:
    return {
        "batches_sent": 0,
        "records_sent": 0,
        "bytes_sent": 0,
        "retried": 0,
        "dead_lettered": 0,
        "last_status": None,
        "last_error": None,
        "last_error_unix_s": None,
        "last_success_unix_s": None,
        "consecutive_failures": 0,
        "reconciled": 0,
        "resent_unreconciled": 0,
    }


def _last_activity(stats: dict[str, Any]) -> float:
    return max(stats.get("last_success_unix_s") or 0.0, stats.get("last_error_unix_s") or 0.0)


class ShipCounters:
    """The current child's counters, and those of the children before it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = _none()
        self._earlier = _none()

    def update(self, stats: dict[str, Any]) -> None:
        """The current child's counters, as it last sent them."""
        with self._lock:
            self._current = stats

    def child_ended(self) -> None:
        """Keep the current child's counts; the next child starts from zero."""
        with self._lock:
            ended, earlier = self._current, self._earlier
            for key in _SUMMED:
                earlier[key] += ended.get(key, 0)
            if _last_activity(ended) >= _last_activity(earlier):
                for key in ShipperStats.__annotations__:
                    if key not in _SUMMED:
                        earlier[key] = ended.get(key)
            self._current = _none()

    def note_error(self, message: str) -> None:
        """An error of the owner's (the child's own are in its counters)."""
        with self._lock:
            self._earlier["last_error"] = message
            self._earlier["last_error_unix_s"] = time.time()

    def merged(self, fallback: ShipperStats) -> ShipperStats:
        """Every child's counts and the fallback shipper's, summed; the rest, the latest."""
        with self._lock:
            current, earlier = dict(self._current), dict(self._earlier)
        here: dict[str, Any] = dict(fallback)
        latest = max((earlier, current, here), key=_last_activity)
        merged: dict[str, Any] = {key: latest.get(key) for key in ShipperStats.__annotations__}
        for key in _SUMMED:
            merged[key] = earlier[key] + current.get(key, 0) + here[key]
        return merged  # type: ignore[return-value]
