"""A row parser's events as columns: the columnar path of a source that has only a row parser.

A source whose parser yields an :class:`~correlator.model.Event` per record (the text
formats) gets a :data:`~correlator.sources._source.Columns` path from it, so that ingest can
hand its batches to worker processes: ``columns=partial(row_columns, parse)``; nginx's table
path reads the lines its native mapping declines with :func:`items_columns`.
The batch is parsed as the whole input would be, from its first line's number on; a source
whose records span lines also declares where batches may be cut
(:data:`~correlator.sources._source.Cuts`), so that no record is split between two batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from correlator._schema import columns_from_events
from correlator.model import Event, Reject
from correlator.sources._source import Parser

__all__ = ["items_columns", "row_columns"]


def row_columns(
    parse: Parser, lines: Sequence[bytes], origin: str, *, start_line: int = 1, **values: Any
) -> tuple[dict[str, list[Any]], list[Reject]]:
    """One batch of lines through a row parser, as one list per column and the rejects.

    Args:
        parse: the source's parser; it takes ``start_line``.
        lines: the batch, raw lines without their ``\\n``.
        origin: where they come from.
        start_line: the number of the batch's first line in its input.
        values: the source's option values by name.

    Returns:
        The events' columns (``_schema.columns_from_events``) and the rejects, in line order.
    """
    return items_columns(parse(lines, origin, start_line=start_line, **values))


def items_columns(items: Iterable[Event | Reject]) -> tuple[dict[str, list[Any]], list[Reject]]:
    """What a row parser yielded, as the events' columns and the rejects, in their order."""
    events: list[Event] = []
    rejects: list[Reject] = []
    for item in items:
        if isinstance(item, Event):
            events.append(item)
        else:
            rejects.append(item)
    return columns_from_events(events), rejects
