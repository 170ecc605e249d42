"""The spool's counters as its readers see them: :class:`SpoolStats`, a snapshot.

Read by the durable sink (``shipping._durable``: its health records, its check for new write
errors), the shipper (how many records are left) and ``agent-logging drain``. The live counters
are the open spool's own (:meth:`Spool.stats <agent_logging.spool._spool.Spool.stats>` takes
the snapshot); this value holds them once taken, so that a reader never holds a lock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SpoolStats"]


@dataclass(frozen=True, slots=True)
class SpoolStats:
    """A snapshot of the spool's counters.

    ``records``, ``bytes`` (framed) and ``oldest_ts_ns`` describe what is not acknowledged yet;
    ``disk_bytes`` is what the size cap measures; ``segments`` counts segment files.
    ``appended``, ``dropped`` and ``write_errors`` count since this open; ``torn``, ``corrupt``
    and ``bad_segments`` count damage found in replayed and current segments, ``lost`` the
    records it cost (and those of segment files deleted under the spool: each reported in its
    quarantine, ``_quarantine``); ``recreated`` counts the times the spool directory was
    found deleted and made again, ``degraded`` the segments made smaller than
    ``segment_bytes`` because the disk was too full for a whole one.
    """

    records: int
    bytes: int
    oldest_ts_ns: int | None
    appended: int
    dropped: int
    torn: int
    corrupt: int
    write_errors: int
    segments: int
    bad_segments: int
    disk_bytes: int
    lost: int = 0
    recreated: int = 0
    degraded: int = 0
