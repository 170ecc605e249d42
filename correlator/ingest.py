"""Reading evidence into the store: files or request bodies, through one adapter, in batches.

Each batch goes into DuckDB in bulk; rejected lines are kept in the ``rejects`` table with
their file, line number and reason, and nothing else in the batch is lost. A file that cannot
be read to its end (a ``.gz`` cut short while log rotation still writes it, or damaged) keeps
the lines read before the damage and gets a reject of its own saying where reading stopped.
Memory follows a batch, never the input: a line is read up to the line limit at most (a longer
one, even a file without a newline, is cut there and rejected, and reading resumes after its
end: :func:`read_lines`), and a batch ends at :data:`BATCH_EVENTS` lines, events and rejects
alike, or at ``_parse_workers.BATCH_BYTES`` of them. Paths that are not regular files (a FIFO,
a directory, a device) are refused before anything is read.
A source's parser, its options and what follows a commit are its declaration's
(``correlator.sources``): a source with a table path or a columnar parser takes it (the
native mappings of NDJSON, nginx and the oslo and python text formats make no Event objects
for the lines they map; the other text formats give their row parser's events as columns,
batch by batch; nginx's and text's batches are cut only where a record starts), and on
request large files of those kinds are parsed by workers while the main thread stores what
they return (``_parse_workers``): threads for a table path that releases the GIL, processes
for one in pure Python (``Source.threads``); a
reading thread reads the files ahead of them, settling each one's ``--format auto`` (text)
from its first lines. A source with an ``after_commit`` (nginx's linking) has it called with
the time each input covers once that input is committed. A large load into an empty or
small store builds the identifier indexes once at its end rather than keeping them up row by
row (:func:`ingest_paths`).
"""

from __future__ import annotations

import gzip
import stat
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, Final, cast

import pyarrow as pa

from correlator._line_blocks import Progress, read_line_blocks, read_lines
from correlator._parse_workers import (
    BATCH_BYTES,
    Parsed,
    Reading,
    parse_pool,
    parsed_batches,
    parsed_inputs,
    reading,
    until_input_end,
)
from correlator._raw_blocks import Packed, concat
from correlator._schema import columns_from_events
from correlator.errors import InputError, QueryError
from correlator.model import MAX_REQUEST_S, MIN_NS, Event, Reject, request_start_ns
from correlator.sources import SETTLE_LINES, Parser, Source, source
from correlator.store import IngestResult, Store

__all__ = [
    "check_readable",
    "ingest_items",
    "ingest_lines",
    "ingest_paths",
    "parse_pool",
    "read_lines",
]

BATCH_EVENTS: Final = 50_000
#: Parsed batches are inserted this many events at a time: each insert joins its hashes
#: against every stored one (~0.2 s per insert at 10^7 stored events).
INSERT_EVENTS: Final = 200_000
#: Files are parsed by worker processes when they add up to at least this much: starting
#: them costs about a second, 64 MiB of NDJSON (~200,000 lines) take several seconds to parse
#: on one core.
PARALLEL_MIN_BYTES: Final = 64 * 1024 * 1024
#: Files of this many bytes or more, into a small store, are loaded with the identifier
#: indexes built after the load (:meth:`Store.indexes_after`): one pass per index instead of
#: keeping it up row by row, ~13 % of storing time (``benchmarks/RESULTS.md``).
INDEXES_AFTER_MIN_BYTES: Final = 64 * 1024 * 1024
#: ... when the store holds at most this share of the events the files hold: the indexes
#: are built over the stored events too.
INDEXES_AFTER_SHARE: Final = 0.25
#: What reading a file can fail with after it opened: ``gzip`` raises ``BadGzipFile`` (an
#: ``OSError``) for a bad header or checksum, ``EOFError`` for a stream cut short and
#: ``zlib.error`` for damaged compressed data; a plain file only ``OSError`` (EIO).
_READ_ERRORS: Final = (OSError, EOFError, zlib.error)


def _line_source(kind: str) -> tuple[Source, Parser]:
    """The source of a kind read from lines (files, standard input, request bodies), and its
    parser.

    Raises:
        QueryError: no source is of that kind, or that source reads no lines (``loki``).
    """
    declared = source(kind)
    if declared.parse is None:
        raise QueryError(f"source kind {kind!r} reads no lines ({declared.looks_like})")
    return declared, declared.parse


def _file_blocks(
    handle: IO[bytes], path: Path, kind: str, progress: Progress | None, damage: list[Reject]
) -> Iterator[list[bytes]]:
    """The lines of an open file, a block at a time, up to where it cannot be read further.

    Decompression fails only while reading (``gzip.open`` does not even look at the header),
    so a damaged ``.gz`` ends its lines there instead of raising through the ingest: what was
    read before stays, and the failure is appended to ``damage`` as a reject of the line where
    reading stopped. A partial line left by the failure is not yielded (its end is unknown).

    Args:
        handle: the file, opened by :func:`_open`.
        path: its path, for the reject.
        kind: the source kind, for the reject.
        progress: called with the bytes of each read.
        damage: receives the reject, if any.

    Yields:
        Lists of lines without their ``\\n``, as :func:`read_line_blocks`.
    """
    lines_read = 0
    try:
        for block in read_line_blocks(handle, progress):
            lines_read += len(block)
            yield block
    except _READ_ERRORS as exc:
        reason = _read_failure(path, lines_read, exc)
        damage.append(Reject(kind, str(path), lines_read + 1, reason, ""))


def _read_failure(path: Path, lines_read: int, exc: BaseException) -> str:
    """Why reading ``path`` stopped after ``lines_read`` lines, in words (the file named by its
    name: the ingest summary shows reasons, not origins)."""
    after = f"after line {lines_read}"
    if isinstance(exc, EOFError):
        return f"{path.name} ends inside a gzip stream (truncated) {after}"
    if isinstance(exc, gzip.BadGzipFile) and str(exc).startswith("Not a gzipped file"):
        if lines_read == 0:
            return f"{path.name} is not a gzip file"
        return f"{path.name} holds data that is not gzip {after}"
    if isinstance(exc, gzip.BadGzipFile | zlib.error):
        return f"{path.name} has damaged gzip data {after}: {exc}"
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return f"{path.name} cannot be read {after}: {detail}"


def _inputs(
    paths: Sequence[Path],
    sizes: Sequence[int],
    kind: str,
    progress: Callable[[Path, int], Progress] | None,
    damages: Sequence[list[Reject]],
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """Each file opened in turn, as ``(origin, lines)``: open while its lines are read, and
    closed when the next is asked for; a read failure goes to its list of ``damages``."""
    for path, size, damage in zip(paths, sizes, damages, strict=True):
        with _open(path) as handle:
            tick = progress(path, size) if progress is not None else None
            if tick is not None and isinstance(handle, gzip.GzipFile):
                tick = _compressed_progress(handle, tick)
            yield str(path), chain.from_iterable(_file_blocks(handle, path, kind, tick, damage))


def _compressed_progress(handle: gzip.GzipFile, tick: Progress) -> Progress:
    """``tick`` fed the compressed bytes read so far instead of each line's length: a
    ``.gz``'s size counts those, and its lines, decompressed, add up to several times more."""
    compressed = cast(IO[bytes], handle.fileobj)  # the file _open opened
    counted = 0

    def advance(_line_bytes: int) -> None:
        nonlocal counted
        # The decompressor reads ahead in chunks: the count moves a chunk at a time.
        position = compressed.tell()
        if position > counted:
            tick(position - counted)
            counted = position

    return advance


def _size(path: Path) -> int:
    """A file's size in bytes; 0 when it cannot be read (opening it then says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _open(path: Path) -> IO[bytes]:
    _refuse_irregular(path)
    try:
        if path.suffix == ".gz":
            return cast(IO[bytes], gzip.open(path, "rb"))
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


#: What a path that is not a regular file is, by the test of ``stat`` that says so.
_FILE_TYPES: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_readable(paths: Iterable[Path]) -> None:
    """Refuse, before anything is read or created, a path that cannot be read as a file of
    evidence (the messages :func:`ingest_paths` would give on reaching it).

    Raises:
        InputError: naming the first such path and why.
    """
    for path in paths:
        _open(path).close()


def _refuse_irregular(path: Path) -> None:
    """Refuse a path that is not a regular file (after symbolic links).

    Opening a FIFO blocks until something writes to it, a character device may never end,
    and a directory fails only once read: none is a file of evidence. A path that cannot be
    looked at passes, for opening it to say why.

    Raises:
        InputError: naming the path and what it is.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")
    raise InputError(
        f"cannot read {path}: it is {what}, not a regular file (give - to read standard input)"
    )


def ingest_lines(
    store: Store,
    kind: str,
    lines: Iterable[bytes],
    origin: str,
    *,
    batch_events: int = BATCH_EVENTS,
    pool: Executor | None = None,
    options: Mapping[str, Any] | None = None,
) -> IngestResult:
    """Parse lines with the parser of ``kind`` and store what it yields, batch by batch.

    The whole input is one transaction (:meth:`Store.bulk`): the fastest way into a DuckDB
    file, and an input that fails half-way (lines that raise, an insert that fails) leaves
    nothing behind, so ingesting it again once fixed is complete rather than topped up.
    (:func:`ingest_paths` ends a damaged file's lines where the damage starts instead: what
    was read before it is kept, and the damage is a reject.)

    Args:
        pool: worker processes (:func:`parse_pool`) to parse batches in, for kinds with a
            columnar parser; the results are stored in input order, as without them.
        options: the values of the source's options by name (nginx's ``zone``:
            ``sources.flag_values``, ``sources.query_values``); those not given take the
            parser's defaults.

    Raises:
        QueryError: ``kind`` is no source read from lines.
    """
    declared, parse = _line_source(kind)
    lines, values, note = _settled(declared, lines, origin, options or {})
    result = _ingest_settled(store, declared, parse, lines, origin, values, batch_events, pool)
    if note is not None:
        result.notes.insert(0, note)
    return result


def _settled(
    declared: Source, lines: Iterable[bytes], origin: str, values: Mapping[str, Any]
) -> tuple[Iterable[bytes], dict[str, Any], str | None]:
    """An input's lines and the source's values once it has settled what the input's first
    lines decide (the text source's ``--format auto``), and what it says of that, naming
    the input (None: nothing to say)."""
    if declared.settle is None:
        return lines, dict(values), None
    iterator = iter(lines)
    head = list(islice(iterator, SETTLE_LINES))
    settled, note = declared.settle(head, values)
    return chain(head, iterator), settled, None if note is None else f"{origin}: {note}"


def _ingest_settled(
    store: Store,
    declared: Source,
    parse: Parser,
    lines: Iterable[bytes],
    origin: str,
    values: dict[str, Any],
    batch_events: int,
    pool: Executor | None,
) -> IngestResult:
    """:func:`ingest_lines` once the source has settled what the input's first lines decide."""
    if declared.batched:
        read = reading(declared, values)
        span = _Span() if declared.after_commit is not None else None
        with store.bulk():
            result = _store_batches(
                store, parsed_batches(read, lines, origin, batch_events, pool), span
            )
        _after_commit(store, declared, span)
        return result
    items = parse(lines, origin, **values)
    span = _Span()
    if declared.after_commit is not None:
        items = span.watch(items)
    with store.bulk():
        result = ingest_items(store, items, batch_events=batch_events)
    _after_commit(store, declared, span)
    return result


def _after_commit(store: Store, declared: Source, span: _Span | None) -> None:
    """The source's ``after_commit``, with the time the committed input's events cover."""
    if (
        declared.after_commit is not None
        and span is not None
        and span.start_ns is not None
        and span.end_ns is not None
    ):
        # After the commit: it reads what was stored, from other cursors.
        declared.after_commit(store, span.start_ns, span.end_ns)


def _store_batches(
    store: Store, batches: Iterable[Parsed], span: _Span | None = None
) -> IngestResult:
    """Store parsed batches, their rejects at once, their tables a few at a time (``span``
    widened by each table's events)."""
    result = IngestResult()
    staged: list[Packed] = []
    for batch, rejects in batches:
        result.add(store.insert_rejects(rejects))
        if span is not None:
            span.widen(batch.table)
        staged.append(batch)
        # Each insert checks the batch against every stored hash: fewer, larger ones.
        if sum(t.num_rows for t in staged) >= INSERT_EVENTS:
            result.add(store.insert_table(concat(staged)))
            staged = []
    if staged:
        result.add(store.insert_table(concat(staged)))
    return result


class _Span:
    """The time the events an adapter yielded cover: earliest request start, latest time."""

    def __init__(self) -> None:
        self.start_ns: int | None = None
        self.end_ns: int | None = None

    def widen(self, table: pa.Table) -> None:
        """Widen the span by the events of a table of the ``events`` columns (as
        :meth:`watch` by each event)."""
        if table.num_rows == 0:
            return
        # Imported here: 60 ms of the start-up of whatever imports this module (the API, a
        # pull from Loki), and only a batch of nginx's needs it.
        import pyarrow.compute as pc

        ts_ns = table.column("ts_ns")
        duration_ns = pc.round(
            pc.multiply(
                pc.min_element_wise(table.column("duration_s").fill_null(0.0), MAX_REQUEST_S),
                1_000_000_000,
            ),
            round_mode="half_to_even",  # as round() rounds
        ).cast(pa.int64())
        starts = pc.subtract(ts_ns, duration_ns)  # wraps below the range: clamped, as
        starts = pc.if_else(pc.greater(starts, ts_ns), MIN_NS, starts)  # request_start_ns
        start_ns = pc.min(starts).as_py()
        end_ns = pc.max(ts_ns).as_py()
        if self.start_ns is None or start_ns < self.start_ns:
            self.start_ns = start_ns
        if self.end_ns is None or end_ns > self.end_ns:
            self.end_ns = end_ns

    def watch(self, items: Iterable[Event | Reject]) -> Iterator[Event | Reject]:
        """Pass ``items`` through, widening the span by each event's request interval."""
        for item in items:
            if isinstance(item, Event):
                # An access line is written when its request ends; the request began
                # duration_s earlier, and an error line of it may be from any time in between.
                start_ns = request_start_ns(item.ts_ns, item.duration_s)
                if self.start_ns is None or start_ns < self.start_ns:
                    self.start_ns = start_ns
                if self.end_ns is None or item.ts_ns > self.end_ns:
                    self.end_ns = item.ts_ns
            yield item


def ingest_items(
    store: Store,
    items: Iterable[Event | Reject],
    *,
    link: Callable[[Sequence[Event]], list[Event]] | None = None,
    batch_events: int = BATCH_EVENTS,
) -> IngestResult:
    """Store what an adapter yielded, in batches; ``link`` post-processes each batch.

    Each batch is committed on its own: a source that fails half-way (Loki going away on
    page 50) keeps what it delivered. Callers with a local input wrap this in
    :meth:`Store.bulk` for speed.
    """
    result = IngestResult()
    events: list[Event] = []
    rejects: list[Reject] = []
    held = 0  # characters of raw evidence in the batch
    for item in items:
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            events.append(item)
            held += len(item.raw)
        # A batch ends at so many items, rejects counted (a file of nothing but bad lines
        # would otherwise hold them all), or at so much raw evidence (lines near the limit).
        if len(events) + len(rejects) >= batch_events or held >= BATCH_BYTES:
            result.add(_flush(store, events, rejects, link))
            events, rejects, held = [], [], 0
    result.add(_flush(store, events, rejects, link))
    return result


def _flush(
    store: Store,
    events: Sequence[Event],
    rejects: Sequence[Reject],
    link: Callable[[Sequence[Event]], list[Event]] | None,
) -> IngestResult:
    result = IngestResult()
    if events:
        batch = link(events) if link is not None else list(events)
        result.add(store.insert_columns(columns_from_events(batch)))
    result.add(store.insert_rejects(rejects))
    return result


def _readings(
    declared: Source,
    inputs: Iterable[tuple[str, Iterable[bytes]]],
    values: Mapping[str, Any],
    notes: dict[int, str],
) -> Iterator[tuple[str, Iterable[bytes], Reading]]:
    """Each input with how its batches are read: settled from its first lines first, for a
    source that settles something there (the text source's ``--format auto``), what the
    settling says going into ``notes`` by the input's index.

    Raises:
        QueryError: an input cannot be read with ``values`` (its settling says why).
    """
    for index, (origin, lines) in enumerate(inputs):
        settled_lines, settled, note = _settled(declared, lines, origin, values)
        if note is not None:
            notes[index] = note
        yield origin, settled_lines, reading(declared, settled)


def _bulk_load(store: Store, input_bytes: int) -> bool:
    """Whether files of ``input_bytes`` are loaded with the identifier indexes built after
    (:meth:`Store.indexes_after`): a large load into a store holding far fewer events than
    the files (at ~350 bytes a line, :data:`INDEXES_AFTER_SHARE` of their lines or fewer)."""
    return (
        input_bytes >= INDEXES_AFTER_MIN_BYTES
        and store.count() * 350 <= input_bytes * INDEXES_AFTER_SHARE
    )


def ingest_paths(
    store: Store,
    kind: str,
    paths: Sequence[Path],
    *,
    progress: Callable[[Path, int], Progress] | None = None,
    workers: int = 1,
    options: Mapping[str, Any] | None = None,
) -> IngestResult:
    """Ingest files (``-`` is not a path here: the CLI passes stdin itself).

    With ``workers`` > 1, files of a kind with a table path or a columnar parser are parsed
    by that many workers (:func:`parse_pool`) when they add up to :data:`PARALLEL_MIN_BYTES`
    or more: started once for all of them, and running ahead from one file into the next
    (``_parse_workers.parsed_inputs``), so they parse while a file's last batches are stored;
    what a source settles from a file's first lines (text's format) is settled per file.
    A table path (ndjson, agent, nginx, and text in the formats the compiled module maps)
    runs in threads; the first file's reading chooses for all. Otherwise worker processes
    parse (text in the other formats),
    which are ``spawn``ed: that re-imports the caller's ``__main__`` module, so the program
    must guard its entry point with ``if __name__ == "__main__":`` (as ``multiprocessing``
    requires). Each file is still its own transaction.

    A file that cannot be read to its end (a truncated or damaged ``.gz``) keeps the lines
    read before the damage and adds a reject saying where reading stopped and why (counted in
    the result's ``rejected``); the other files are ingested as usual.

    Files of :data:`INDEXES_AFTER_MIN_BYTES` or more into a store that holds far fewer
    events are loaded without the identifier indexes, which are built once at the end
    (:meth:`Store.indexes_after`); smaller loads keep them up as they insert.

    Args:
        progress: ``progress(path, size_bytes)`` returns a callback taking bytes read.
        workers: parse the files in this many workers (when they are large enough).
        options: the values of the source's options by name, as in :func:`ingest_lines`
            (passed to worker processes too: they must be picklable).

    Raises:
        InputError: a path is not a regular file (a FIFO, a directory, a device: before any
            file is read), or a file cannot be opened (the files before it are stored).
    """
    declared, _ = _line_source(kind)  # an unknown kind fails before any file is opened
    for path in paths:  # and so does a FIFO, a directory or a device among the paths
        _refuse_irregular(path)
    values = dict(options or {})
    sizes = [_size(path) for path in paths]
    damages: list[list[Reject]] = [[] for _ in paths]
    inputs = _inputs(paths, sizes, kind, progress, damages)
    result = IngestResult()
    loading: AbstractContextManager[IngestResult] = (
        store.indexes_after() if _bulk_load(store, sum(sizes)) else nullcontext(IngestResult())
    )
    if declared.batched and workers > 1 and sum(sizes) >= PARALLEL_MIN_BYTES:
        notes: dict[int, str] = {}
        readings = _readings(declared, inputs, values, notes)
        # The first input says whether threads or processes parse (text: its format, settled).
        first = next(readings)
        threads = first[2].threads
        readings = chain([first], readings)
        with loading as repeats, parse_pool(workers, threads=threads) as pool:
            stream = parsed_inputs(readings, BATCH_EVENTS, pool)
            for index in range(len(paths)):
                span = _Span() if declared.after_commit is not None else None
                with store.bulk():
                    stored = _store_batches(store, until_input_end(stream), span)
                if index in notes:  # settled by the reading thread, before the input's end
                    result.notes.append(notes[index])
                result.add(stored)
                result.add(store.insert_rejects(damages[index]))
                _after_commit(store, declared, span)
    else:
        with loading as repeats:
            for index, (origin, lines) in enumerate(inputs):
                result.add(ingest_lines(store, kind, lines, origin, options=values))
                result.add(store.insert_rejects(damages[index]))
    result.add(repeats)
    # A load that at least doubles the store computes the link cardinalities now, once, so
    # that a query (the CLI's, read-only) does not rescan every event; after a smaller one
    # the first query does it (Store.cardinalities).
    if result.accepted and 2 * result.accepted >= store.count():
        store.cardinalities()
    return result
