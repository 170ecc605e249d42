"""Parsing inputs' batches in worker processes while the main process stores them.

The columnar parsers (a source's ``columns``) are pure Python and the slower half of an NDJSON
ingest; :func:`parse_pool` starts worker processes for them. :func:`parsed_batches` hands them
one input's batches a few at a time, yielding each parsed batch, as the Arrow table the store
inserts, in input order (without a pool the batches are parsed in process, the same way);
:func:`parsed_inputs` does the same for several inputs in turn, the workers running ahead
across the end of one input into the next, so that they parse while the main process stores
an input's last batches (one insert at its end, most of the time, for an input of a few
batches).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from correlator._schema import events_table
from correlator.model import Reject

if TYPE_CHECKING:
    from correlator.sources import Columns

__all__ = [
    "BATCH_BYTES",
    "MAX_WORKERS",
    "InputEnd",
    "Parsed",
    "parse_pool",
    "parsed_batches",
    "parsed_inputs",
    "until_input_end",
]

#: Worker processes at most (the main process stores; DuckDB has threads of its own).
MAX_WORKERS: Final = 4
#: A batch of lines ends at this many bytes even when it has fewer lines than asked for: 50,000
#: lines of ~350 bytes are ~17 MB, but 50,000 lines near the 1 MiB line limit would be 50 GB
#: (and :data:`MAX_WORKERS` + 1 batches are in flight).
BATCH_BYTES: Final = 32 * 1024 * 1024

#: One parsed batch: the table the store inserts, and the batch's rejects.
Parsed = tuple[pa.Table, list[Reject]]


class InputEnd:
    """The end of an input in :func:`parsed_inputs`' stream: every batch of that input came
    before it."""


_INPUT_END: Final = InputEnd()


def parse_pool(workers: int | None = None) -> Executor:
    """Worker processes for :func:`ingest_lines`.

    They are ``spawn``ed, not forked: the parent's DuckDB and Arrow threads may hold locks a
    forked child would inherit. ``spawn`` re-imports the parent's ``__main__``, which must
    therefore guard its entry point with ``if __name__ == "__main__":``.

    Args:
        workers: how many; by default one per core, at most :data:`MAX_WORKERS`.

    Returns:
        An executor to shut down (use it as a context manager).
    """
    count = min(workers or os.cpu_count() or 1, MAX_WORKERS)
    return ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"))


def _parse_chunk(columns: Columns, chunk: list[bytes], origin: str, start_line: int) -> Parsed:
    """One batch through the columnar parser, as the table the store inserts (in a worker:
    building the Arrow table there too leaves the main process only the insert)."""
    parsed, rejects = columns(chunk, origin, start_line=start_line)
    return events_table(parsed), rejects


def parsed_batches(
    columns: Columns,
    lines: Iterable[bytes],
    origin: str,
    batch_events: int,
    pool: Executor | None,
) -> Iterator[Parsed]:
    """Parsed batches of ``batch_events`` lines (fewer past :data:`BATCH_BYTES`) in input
    order, from ``pool`` when given (a few batches ahead: one input of :func:`parsed_inputs`)."""
    if pool is not None:
        yield from until_input_end(parsed_inputs(columns, [(origin, lines)], batch_events, pool))
        return
    offset = 0
    for chunk in _chunks(lines, batch_events):
        # Chunks continue the file's line numbering.
        yield _parse_chunk(columns, chunk, origin, offset + 1)
        offset += len(chunk)


def parsed_inputs(
    columns: Columns,
    inputs: Iterable[tuple[str, Iterable[bytes]]],
    batch_events: int,
    pool: Executor,
) -> Iterator[Parsed | InputEnd]:
    """Each input's parsed batches in order, then an :class:`InputEnd`, input after input.

    ``inputs`` yields ``(origin, lines)``; the lines of one are read before the next is asked
    for. The workers run a few batches ahead, past the end of an input into the next. An
    input that fails to open (``inputs`` raises) raises here only once every input before it
    has been handed over, ended: what came before can be stored first.
    """
    depth = MAX_WORKERS + 1  # batches in flight: enough to keep the workers busy, and bounded
    pending: deque[Future[Parsed] | InputEnd | BaseException] = deque()
    in_flight = 0
    try:
        for origin, lines in _deferring_errors(inputs, pending):
            offset = 0
            for chunk in _chunks(lines, batch_events):
                pending.append(pool.submit(_parse_chunk, columns, chunk, origin, offset + 1))
                offset += len(chunk)
                in_flight += 1
                while in_flight >= depth:
                    item = pending.popleft()
                    in_flight -= isinstance(item, Future)
                    yield _taken(item)
            pending.append(_INPUT_END)
        while pending:
            yield _taken(pending.popleft())
    finally:
        for item in pending:  # an insert failed: nothing more to parse
            if isinstance(item, Future):
                item.cancel()


def until_input_end(stream: Iterator[Parsed | InputEnd]) -> Iterator[Parsed]:
    """The parsed batches of the input :func:`parsed_inputs`' ``stream`` is at, up to its end
    (not past it: the next input's stay in the stream)."""
    for item in stream:
        if isinstance(item, InputEnd):
            return
        yield item


def _deferring_errors(
    inputs: Iterable[tuple[str, Iterable[bytes]]],
    pending: deque[Future[Parsed] | InputEnd | BaseException],
) -> Iterator[tuple[str, Iterable[bytes]]]:
    """``inputs``, an exception it raises queued in ``pending`` (in its place) and ending it."""
    iterator = iter(inputs)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - raised again, in order, by _taken
            pending.append(exc)
            return
        yield item


def _taken(item: Future[Parsed] | InputEnd | BaseException) -> Parsed | InputEnd:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, InputEnd):
        return item
    return item.result()


def _chunks(lines: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    """``lines`` in lists of ``size``, or fewer when they reach :data:`BATCH_BYTES` (the
    last one shorter)."""
    chunk: list[bytes] = []
    total = 0
    for line in lines:
        chunk.append(line)
        total += len(line)
        if len(chunk) >= size or total >= BATCH_BYTES:
            yield chunk
            chunk = []
            total = 0
    if chunk:
        yield chunk
