"""What the store has read, kept until its next write: the reads of timelines shared.

A timeline is a handful of DuckDB round trips (the seed, the links of the identifiers it
reaches, their events, their parents' events), each 0.4-6 ms of CPU whatever the store's
size, mostly planning: about 20 ms of a 14-event timeline, against under 1 ms for the Python
that builds the answer (``benchmarks/RESULTS.md``, issue 21). Timelines asked together share
most of those reads: a burst of the same incident with other limits or windows, the page's
timeline and graph of one seed, a bare value tried as each identifier kind, the incident's
other identifiers. :class:`ReadCache` keeps the answers of the store's reads for the store's
current generation (``Store.generation``, bumped after every committed write) and forgets all
of them at the next: an answer read before a write is never given after it.

Lists of events are kept whole when a read found every match, so that a later read with
another ``limit`` takes its first ``limit`` (:func:`first`) instead of asking DuckDB again.
What is kept is shared between the threads that read it: events and link counts are never
changed after they are read (the pure core builds new objects), and every list of events
handed out is a new one.
The cache is bounded by an estimate of the memory it holds (``weight``), the least recently
used answers dropped first; an answer heavier than the whole bound is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, TypeVar

__all__ = ["DEFAULT_MAX_BYTES", "EVENT_BYTES", "ReadCache", "first", "same"]

#: What the cache may hold by default: 64 MiB (a busy node's 10,000 events are ~20 MiB).
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
#: The memory an event is counted for: its object, its strings (``raw``, the message) and its
#: ``attrs`` dict (tracemalloc: 1.8-2.0 KB for the demo's events and the 10^6 fleet's).
EVENT_BYTES: Final = 2048
T = TypeVar("T")
K = TypeVar("K")
A = TypeVar("A")


class ReadCache:
    """Answers of reads for one generation of the store, least recently used dropped first.

    Args:
        max_bytes: the estimated memory the answers may take in all; 0 keeps nothing.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._generation = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._flights: dict[tuple[int, Hashable], _Flight] = {}

    def get(self, generation: int, key: Hashable) -> Any | None:
        """The answer kept for ``key`` in ``generation``, or None."""
        with self._lock:
            if generation != self._generation:
                return None
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, generation: int, key: Hashable, value: Any, weight: int) -> None:
        """Keep ``value`` (``weight`` bytes, estimated) as the answer of ``key``, read in
        ``generation`` (the store's generation before the read began): an answer of an older
        generation than the newest seen is dropped, a newer one forgets every older answer."""
        if self.max_bytes <= 0 or weight > self.max_bytes:
            return
        with self._lock:
            if generation < self._generation:
                return
            if generation > self._generation:
                self._generation = generation
                self._entries.clear()
                self._bytes = 0
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, weight)
            self._bytes += weight
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def kept_or_read(
        self,
        generation: int,
        key: Hashable,
        read: Callable[[], K],
        weight: Callable[[K], int],
        answer: Callable[[K], A | None],
    ) -> A:
        """``answer(kept)`` of the read kept for ``key``, else of ``read()``, kept (:meth:`put`,
        ``weight(kept)`` bytes); ``generation`` is the store's before the read began.

        Threads that ask for the same key while it is read wait for that read and take its
        answer (Go's ``singleflight``): the first timelines of a burst of one incident read it
        once, not once per read thread. ``answer`` returns None when the kept read cannot
        answer this question (a list cut before the ``limit`` asked): then it is read again.
        With ``max_bytes`` 0 nothing is kept, nor shared.

        Raises:
            Whatever ``read`` raised (a thread that waited for it reads afresh).
        """
        kept: K | None = self.get(generation, key)
        if kept is not None:
            found = answer(kept)
            if found is not None:
                return found
        if self.max_bytes <= 0:
            return _answered(read(), answer)
        flown = (generation, key)
        with self._lock:
            flight = self._flights.get(flown)
            leader = flight is None
            if flight is None:
                flight = self._flights[flown] = _Flight()
        if not leader:
            flight.done.wait()
            if flight.read is not None:
                found = answer(flight.read)
                if found is not None:
                    return found
            return _answered(read(), answer)
        try:
            flight.read = read()
            self.put(generation, key, flight.read, weight(flight.read))
        finally:  # kept before the flight lands: no thread in between reads it again
            with self._lock:
                del self._flights[flown]
            flight.done.set()
        return _answered(flight.read, answer)


class _Flight:
    """A read in progress: its answer (None until it is read, or when it failed)."""

    __slots__ = ("done", "read")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.read: Any = None


def same(kept: T) -> T:
    """The ``answer`` of :meth:`ReadCache.kept_or_read` when what is kept is the answer."""
    return kept


def _answered(kept: K, answer: Callable[[K], A | None]) -> A:
    found = answer(kept)
    if found is None:  # a read always answers the question it was read for
        raise LookupError("a fresh read could not answer its own question")
    return found


def first(kept: tuple[list[T], bool, int], limit: int) -> tuple[list[T], bool] | None:
    """The first ``limit`` items of an ordered read kept as ``(items, truncated, read_limit)``
    (the first ``read_limit`` matches at most, and whether more matched), and whether more
    than ``limit`` matched; None when the kept read cannot tell (it was cut before ``limit``).
    """
    items, truncated, read_limit = kept
    if limit <= read_limit:
        return items[:limit], truncated or len(items) > limit
    if not truncated:
        return items[:], False
    return None
