"""The cyclic garbage collector, paused while an answer of many objects is built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while an answer is built.

    A busy node's answer is some 100,000 new objects (events, their JSON dicts), findings'
    ~800,000 lifecycle events at 10^7 events, none of them garbage; the collector would walk
    them again and again as they survive generation after generation: a third of a
    timeline's Python time (benchmarks/correlator.py), 45 % of `correlator findings` at 10^7
    events (22 s against 12). Reference counting still frees everything; the collector
    resumes (if it was running) at the end, also on error. Threads answering at the same time
    at worst resume it early.

    Resumed as it is, the collector would walk every one of those objects once more at the
    next allocation (they are all young): ~10 ms for a busy node. They are moved to the oldest
    generation first (``gc.freeze`` then ``gc.unfreeze``: a splice of the generations' lists,
    not a walk), where only the rare full collection looks at them; most are freed by
    reference counting long before. Skipped when the process keeps objects frozen of its own
    (a pre-forking server's): unfreezing would hand those back to the collector.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
