"""The spool's counters: :class:`SpoolStats`, and taking a snapshot of them.

Read by the durable sink (``shipping._durable``: its health records, its check for new write errors)
and the shipper (how many records are left). The counters are read under the spool's append
lock; the oldest unacknowledged timestamp is then read from its frame
outside it (``_segments.first_ts_ns``: one small read, and a segment acknowledged and deleted
meanwhile is skipped), so a snapshot never holds up a logging thread for a read from disk.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_logging.spool._cap import disk_bytes
from agent_logging.spool._segments import first_ts_ns

if TYPE_CHECKING:
    from agent_logging.spool._spool import Spool

__all__ = ["SpoolStats", "snapshot"]


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


def snapshot(spool: Spool) -> SpoolStats:
    """The body of :meth:`Spool.stats <agent_logging.spool._spool.Spool.stats>`."""
    with spool._lock:
        candidates = [
            (s.path, spool._head_offset if i == 0 else 0, s.size)
            for i, s in enumerate(spool._segments)
            if s.records > 0
        ]
        stats = SpoolStats(
            records=sum(s.records for s in spool._segments),
            bytes=spool._bytes,
            oldest_ts_ns=None,
            appended=spool._appended,
            dropped=spool._dropped,
            torn=spool._torn,
            corrupt=spool._corrupt,
            write_errors=spool._write_errors,
            segments=len(spool._segments),
            bad_segments=spool._bad_segments,
            disk_bytes=disk_bytes(spool),
            lost=spool._lost,
            recreated=spool._recreated,
            degraded=spool._degraded,
        )
    for path, start, size in candidates:
        ts_ns = first_ts_ns(path, start, size)
        if ts_ns is not None:
            return dataclasses.replace(stats, oldest_ts_ns=ts_ns)
    return stats
