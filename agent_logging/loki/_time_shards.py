"""Old entries go to a stream of their own hour: Loki's time sharding, done by the shipper.

Why. Loki's ingester refuses an entry older than the newest entry of its stream minus
``max_chunk_age / 2`` (1 h by default): "entry too far behind". A stream that a live process
keeps at the present refuses a backlog more than an hour old: the orphan spool of a crashed
worker adopted while its parent logs on (``shipping._adoption``), or the backlogs of several
replicas whose streams share their labels, draining at different speeds after a Loki outage, each
behind the others' present. Loki 3.4 and later answer this with
``shard_streams.time_sharding_enabled`` (off by default): an entry older than
``time_sharding_ignore_recent`` (40 min) gets a ``__time_shard__`` label naming the
``max_chunk_age / 2`` window its timestamp falls in, ``<start>_<end>`` in UNIX seconds, so
that no stream holding old entries spans more than one window, and none of them can be too
far behind. The shipper labels the entries it pushes the same way, whatever the Loki's
setting (:func:`time_sharded`), with Loki's defaults: a Loki with time sharding on finds the
label it would have set.

What it changes for a query: an old entry is in the stream of its labels plus
``__time_shard__``; a selector of its labels matches it (and every other shard), and
``LokiClient.iter_query_range`` yields an entry that differs from another only by its shard
labels once. The reconcile (``shipping._reconcile``) and ``agent-logging drain``
(``shipping._visibility``)
select by labels, so they find it wherever it went.

What it does not change: Loki refuses an entry older than ``reject_old_samples_max_age`` (a
week) in any stream ("timestamp too old"); those are dead-lettered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agent_logging.loki._entries import PushEntry

__all__ = [
    "IGNORE_RECENT_S",
    "TIME_SHARD_LABEL",
    "WINDOW_S",
    "shard_label_value",
    "time_sharded",
]

#: The label Loki's time sharding adds (``pkg/distributor``), and the shipper with it.
TIME_SHARD_LABEL: Final = "__time_shard__"
#: ``max_chunk_age / 2`` of a stock Loki (2 h / 2): the out-of-order window of a stream, and
#: the width of a time shard.
WINDOW_S: Final = 3600
#: ``time_sharding_ignore_recent`` of a stock Loki: entries younger than this stay in their
#: stream (the newest entry of a live stream is at most ``creation_grace_period``, 10 min,
#: ahead of the present, so they are well within its hour).
IGNORE_RECENT_S: Final = 40 * 60

_NS_PER_S: Final = 1_000_000_000


def shard_label_value(ts_ns: int) -> str:
    """The ``__time_shard__`` value of an entry stamped ``ts_ns``: its window's bounds."""
    start_s = ts_ns // _NS_PER_S // WINDOW_S * WINDOW_S
    return f"{start_s}_{start_s + WINDOW_S}"


def time_sharded(entries: Sequence[PushEntry], *, now_ns: int) -> Sequence[PushEntry]:
    """``entries`` with those older than :data:`IGNORE_RECENT_S` put in their time shard.

    Args:
        entries: the entries of one push.
        now_ns: the present, nanoseconds since the epoch.

    Returns:
        ``entries`` itself when none is that old (the common case, nothing copied), else a
        list in the same order, old entries' labels extended by :data:`TIME_SHARD_LABEL`
        (kept sorted by name, as :class:`PushEntry` labels are).
    """
    cutoff_ns = now_ns - IGNORE_RECENT_S * _NS_PER_S
    if all(entry.ts_ns >= cutoff_ns for entry in entries):
        return entries
    return [
        entry
        if entry.ts_ns >= cutoff_ns or any(name == TIME_SHARD_LABEL for name, _ in entry.labels)
        else entry._replace(
            labels=tuple(
                sorted((*entry.labels, (TIME_SHARD_LABEL, shard_label_value(entry.ts_ns))))
            )
        )
        for entry in entries
    ]
