"""Source adapters: one module per kind of evidence, each a function

    parse(lines: Iterable[bytes], origin: str) -> Iterator[Event | Reject]

``lines`` are raw lines without their trailing ``\\n`` (a ``\\r`` may remain), numbered from 1
by the adapter. An adapter never raises on bad input: it yields a :class:`~correlator.model.Reject`
naming the line and what is wrong, and goes on with the next line. Document sources (k8s, aap)
accept a whole JSON document spread over the lines, or one JSON object per line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from correlator.model import Event, Reject

__all__ = ["Parser"]

Parser = Callable[[Iterable[bytes], str], Iterator[Event | Reject]]
