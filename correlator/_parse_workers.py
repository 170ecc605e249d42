"""Parsing inputs' batches in workers while the main process stores them.

A source's batches become tables as :func:`reading` says: its ``table`` path (ndjson's native
mapping), whose heavy part releases the GIL, runs in threads (``parse_pool(threads=True)``,
nothing crossing a process boundary); its ``columns`` path, pure Python, runs in worker
processes. Batches of a source whose records may span lines (nginx's error messages, text
tracebacks) are cut only before a line that starts a record (its ``cuts``), so that each
batch parsed alone gives what the whole input gives. :func:`parsed_batches` hands the
workers one input's batches a few at a time, yielding each parsed batch, as the Arrow table
the store inserts, in input order (without a pool the batches are parsed in process, the same
way); :func:`parsed_inputs` does the same for several inputs in turn, the workers running
ahead across the end of one input into the next, so that they parse while the main process
stores an input's last batches (one insert at its end, most of the time, for an input of a
few batches).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import islice
from queue import Full, Queue
from typing import TYPE_CHECKING, Any, Final, TypeVar

from correlator._line_blocks import LINE_READ_BYTES
from correlator._raw_blocks import Packed, pack
from correlator._schema import events_table
from correlator.model import MAX_LINE_BYTES, Reject

if TYPE_CHECKING:
    from correlator.sources import Columns, Source, Table

__all__ = [
    "BATCH_BYTES",
    "MAX_WORKERS",
    "BatchParser",
    "Cut",
    "InputEnd",
    "Parsed",
    "Reading",
    "chunks",
    "parse_pool",
    "parsed_batches",
    "parsed_inputs",
    "reading",
    "until_input_end",
]

_T = TypeVar("_T")

#: Batches of lines the reading thread holds ready beyond those in the workers' hands.
READ_AHEAD: Final = 2
#: Worker processes at most (the main process stores; DuckDB has threads of its own).
MAX_WORKERS: Final = 4
#: A batch of lines ends at this many bytes even when it has fewer lines than asked for: 50,000
#: lines of ~350 bytes are ~17 MB, but 50,000 lines near the 1 MiB line limit would be 50 GB
#: (and :data:`MAX_WORKERS` + 1 batches are in flight).
BATCH_BYTES: Final = 32 * 1024 * 1024

#: One parsed batch: what the store inserts (packed: its raw texts compressed in the worker),
#: and the batch's rejects.
Parsed = tuple[Packed, list[Reject]]

BatchParser = Callable[[list[bytes], str, int], Parsed]
"""``parse(lines, origin, start_line)``: one batch to the table the store inserts (picklable:
a ``partial`` of a module-level function, for worker processes)."""

Cut = Callable[[bytes], bool]
"""``cut(line)``: whether a batch may begin at ``line`` (it starts a record)."""

#: How far past its size a batch goes looking for a line to cut before, line ends counted: a
#: run of lines that start no record longer than this (lines of no format, a file in the
#: wrong one) is cut anyway. A record holds at most :data:`~correlator.model.MAX_LINE_BYTES`
#: of text, so the record such a run continued was full before the cut (nginx's ended there;
#: a text format's takes no more lines, which it rejects as continuing it, and which after the
#: cut are rejected as continuing no record: the reason is all that differs).
CUT_SEARCH_BYTES: Final = MAX_LINE_BYTES


@dataclass(frozen=True, slots=True)
class Reading:
    """How one input's lines become parsed batches.

    Attributes:
        parse: one batch to the table the store inserts.
        cut: where batches may be cut (None: anywhere; every line is read alone).
        threads: whether threads parse its batches in parallel (its heavy part releases the
            GIL), else worker processes.
    """

    parse: BatchParser
    cut: Cut | None = None
    threads: bool = False


class InputEnd:
    """The end of an input in :func:`parsed_inputs`' stream: every batch of that input came
    before it."""


_INPUT_END: Final = InputEnd()


def parse_pool(workers: int | None = None, *, threads: bool = False) -> Executor:
    """Workers for :func:`parsed_inputs`: processes, or threads for a path without the GIL.

    Processes are ``spawn``ed, not forked: the parent's DuckDB and Arrow threads may hold
    locks a forked child would inherit. ``spawn`` re-imports the parent's ``__main__``, which
    must therefore guard its entry point with ``if __name__ == "__main__":``.

    Args:
        workers: how many; by default one per core, at most :data:`MAX_WORKERS`.
        threads: threads rather than processes (a :data:`BatchParser` of a ``table`` path).

    Returns:
        An executor to shut down (use it as a context manager).
    """
    count = min(workers or os.cpu_count() or 1, MAX_WORKERS)
    if threads:
        return ThreadPoolExecutor(count, thread_name_prefix="parse")
    return ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"))


def reading(source: Source, values: Mapping[str, Any]) -> Reading:
    """How an input of a source that is :attr:`~correlator.sources.Source.batched` becomes
    parsed batches: its ``table`` path, else its ``columns`` one, cut where its ``cuts`` say;
    ``values`` are its options' values by name, settled for the input.

    Raises:
        ValueError: the source has neither path.
    """
    cut = source.cuts(values) if source.cuts is not None else None
    if source.table is not None:
        table = partial(source.table, **values) if values else source.table
        threads = source.threads is None or source.threads(values)
        return Reading(partial(_parse_table, table), cut, threads)
    if source.columns is not None:
        columns = partial(source.columns, **values) if values else source.columns
        return Reading(partial(_parse_chunk, columns), cut)
    raise ValueError(f"source {source.name!r} is not read in batches")


def _parse_table(table: Table, chunk: list[bytes], origin: str, start_line: int) -> Parsed:
    parsed, rejects = table(chunk, origin, start_line=start_line)
    return pack(parsed, ordered=True), rejects


def _parse_chunk(columns: Columns, chunk: list[bytes], origin: str, start_line: int) -> Parsed:
    """One batch through the columnar parser, as the table the store inserts (in a worker:
    building the Arrow table there too leaves the main process only the insert)."""
    parsed, rejects = columns(chunk, origin, start_line=start_line)
    return pack(events_table(parsed), ordered=True), rejects


def parsed_batches(
    read: Reading,
    lines: Iterable[bytes],
    origin: str,
    batch_events: int,
    pool: Executor | None,
) -> Iterator[Parsed]:
    """Parsed batches of about ``batch_events`` lines (fewer past :data:`BATCH_BYTES`, a few
    more to reach a cut) in input order, from ``pool`` when given (a few batches ahead: one
    input of :func:`parsed_inputs`)."""
    if pool is not None:
        yield from until_input_end(parsed_inputs([(origin, lines, read)], batch_events, pool))
        return
    for chunk, start_line in chunks(lines, batch_events, read.cut):
        yield read.parse(chunk, origin, start_line)


def parsed_inputs(
    inputs: Iterable[tuple[str, Iterable[bytes], Reading]],
    batch_events: int,
    pool: Executor,
) -> Iterator[Parsed | InputEnd]:
    """Each input's parsed batches in order, then an :class:`InputEnd`, input after input.

    ``inputs`` yields ``(origin, lines, reading)``; the lines of one are read before the next
    is asked for, by a thread of their own (:func:`_read_ahead`): reading a file and splitting its
    lines goes on while the caller stores. The workers run a few batches ahead, past the end of
    an input into the next. An input that fails to open (``inputs`` raises) raises here only
    once every input before it has been handed over, ended: what came before can be stored
    first.
    """
    depth = MAX_WORKERS + 1  # batches in flight: enough to keep the workers busy, and bounded
    pending: deque[Future[Parsed] | InputEnd | BaseException] = deque()
    in_flight = 0
    try:
        for batch in _read_ahead(_batches(inputs, batch_events), READ_AHEAD):
            if not isinstance(batch, tuple):
                pending.append(batch)  # an input's end, or its failure to open, in its place
                continue
            parse, origin, chunk, start_line = batch
            pending.append(pool.submit(parse, chunk, origin, start_line))
            in_flight += 1
            while in_flight >= depth:
                taken = pending.popleft()
                in_flight -= isinstance(taken, Future)
                yield _taken(taken)
        while pending:
            yield _taken(pending.popleft())
    finally:
        for item in pending:  # an insert failed: nothing more to parse
            if isinstance(item, Future):
                item.cancel()


_Batch = tuple[BatchParser, str, list[bytes], int]


def _batches(
    inputs: Iterable[tuple[str, Iterable[bytes], Reading]], batch_events: int
) -> Iterator[_Batch | InputEnd | BaseException]:
    """Each input's batches of lines as ``(parser, origin, lines, first line's number)``, then
    an :class:`InputEnd`; an input that fails to open ends the stream with its exception."""
    iterator = iter(inputs)
    while True:
        try:
            origin, lines, read = next(iterator)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - raised again, in order, by _taken
            yield exc
            return
        for chunk, start_line in chunks(lines, batch_events, read.cut):
            yield read.parse, origin, chunk, start_line
        yield _INPUT_END


def _read_ahead(items: Iterator[_T], depth: int) -> Iterator[_T]:
    """``items``, produced by a thread of their own up to ``depth`` ahead of the caller.

    Reading releases the GIL and splitting lines is one C call a block, so the thread reads
    while the caller inserts (DuckDB releases the GIL too). What ``items`` raises is raised
    here, in its place; when the caller stops early, the thread stops at its next item and
    closes ``items`` (closing the file being read).
    """
    queue: Queue[tuple[bool, _T | BaseException | None]] = Queue(depth)
    stopped = threading.Event()

    def hand(entry: tuple[bool, _T | BaseException | None]) -> bool:
        while not stopped.is_set():
            try:
                queue.put(entry, timeout=0.05)
            except Full:
                continue
            return True
        return False

    def produce() -> None:
        try:
            for item in items:
                if not hand((True, item)):
                    return
            hand((False, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            hand((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            more, value = queue.get()
            if more:
                yield value  # type: ignore[misc]  # an item
                continue
            if value is not None:
                raise value  # type: ignore[misc]  # what items raised
            return
    finally:
        stopped.set()
        thread.join()


def until_input_end(stream: Iterator[Parsed | InputEnd]) -> Iterator[Parsed]:
    """The parsed batches of the input :func:`parsed_inputs`' ``stream`` is at, up to its end
    (not past it: the next input's stay in the stream)."""
    for item in stream:
        if isinstance(item, InputEnd):
            return
        yield item


def _taken(item: Future[Parsed] | InputEnd | BaseException) -> Parsed | InputEnd:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, InputEnd):
        return item
    return item.result()


def chunks(
    lines: Iterable[bytes], size: int, cut: Cut | None = None
) -> Iterator[tuple[list[bytes], int]]:
    """``lines`` in lists of ``size``, or fewer when they reach :data:`BATCH_BYTES` (the
    last one shorter), each with the number of its first line (from 1: the chunks continue
    the input's line numbering). With ``cut``, a list goes on past that size up to a line
    ``cut`` accepts, which begins the next (up to :data:`CUT_SEARCH_BYTES` more).

    Lines are taken in slices (C loops, no bytecode per line): as many as could not pass
    :data:`BATCH_BYTES` were each of them as long as a line can be read, so that a batch ends
    within one line of the limit.
    """
    iterator = iter(lines)
    start_line = 1
    held: list[bytes] = []  # the line a cut was found before: the next chunk's first
    while True:
        chunk = held
        total = sum(map(len, held))
        held = []
        while len(chunk) < size and total < BATCH_BYTES:
            step = min(size - len(chunk), max(1, (BATCH_BYTES - total) // LINE_READ_BYTES))
            part = list(islice(iterator, step))
            if not part:
                break
            chunk += part
            total += sum(map(len, part))
        if cut is not None and chunk:
            held = _up_to_cut(iterator, chunk, cut)
        if not chunk:
            return
        yield chunk, start_line
        start_line += len(chunk)


def _up_to_cut(iterator: Iterator[bytes], chunk: list[bytes], cut: Cut) -> list[bytes]:
    """Append to ``chunk`` the lines up to one ``cut`` accepts, and return that line alone
    (none: the lines ended, or :data:`CUT_SEARCH_BYTES` of them passed without one)."""
    searched = 0
    for line in iterator:
        if cut(line):
            return [line]
        chunk.append(line)
        searched += len(line) + 1
        if searched > CUT_SEARCH_BYTES:
            break
    return []
