"""Reading evidence into the store: files or request bodies, through one adapter, in batches.

Each batch goes into DuckDB in bulk; rejected lines are kept in the ``rejects`` table with
their file, line number and reason, and nothing else in the batch is lost. NDJSON takes the
adapter's columnar fast path when it has one (no Event objects at all); on request, large
files of those kinds are parsed by worker processes while the main process stores what they
return (the parser is pure Python and the slower half of an NDJSON ingest).
"""

from __future__ import annotations

import gzip
import importlib
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any, Final, cast

import pyarrow as pa

from correlator._schema import columns_from_events, events_table
from correlator.errors import InputError, QueryError
from correlator.model import SOURCE_KINDS, Event, Reject
from correlator.sources import Parser
from correlator.store import IngestResult, Store

__all__ = [
    "FILE_KINDS",
    "ingest_items",
    "ingest_lines",
    "ingest_paths",
    "parse_pool",
    "parser_for",
    "read_lines",
]

#: Kinds read from files or request bodies, and the module that parses each.
FILE_KINDS: Final = {
    "ndjson": "correlator.sources.ndjson",
    "agent": "correlator.sources.ndjson",
    "nginx": "correlator.sources.nginx",
    "postgres": "correlator.sources.postgres",
    "workflow": "correlator.sources.workflow",
    "k8s": "correlator.sources.k8s",
    "aap": "correlator.sources.aap",
}
BATCH_EVENTS: Final = 50_000
#: Parsed batches are inserted this many events at a time: each insert joins its hashes
#: against every stored one (~0.2 s per insert at 10^7 stored events).
INSERT_EVENTS: Final = 200_000
#: Files at least this large are parsed by worker processes: starting them costs about a
#: second, a 64 MiB NDJSON file (~200,000 lines) takes several seconds to parse on one core.
PARALLEL_MIN_BYTES: Final = 64 * 1024 * 1024
#: Worker processes at most (the main process stores; DuckDB has threads of its own).
MAX_WORKERS: Final = 4

Progress = Callable[[int], None]


def _module(kind: str) -> Any:
    if kind not in FILE_KINDS:
        known = ", ".join(k for k in SOURCE_KINDS if k in FILE_KINDS)
        raise QueryError(f"unknown source kind {kind!r}; use one of {known} (or loki)")
    return importlib.import_module(FILE_KINDS[kind])


def parser_for(kind: str) -> Parser:
    """The ``parse(lines, origin)`` function of a source kind."""
    parse: Parser = _module(kind).parse
    return parse


def read_lines(handle: IO[bytes], progress: Progress | None = None) -> Iterator[bytes]:
    """Lines of a binary stream without their ``\\n`` (``.gz`` handled by the caller)."""
    for line in handle:
        if progress is not None:
            progress(len(line))
        yield line[:-1] if line.endswith(b"\n") else line


def _open(path: Path) -> IO[bytes]:
    try:
        if path.suffix == ".gz":
            return cast(IO[bytes], gzip.open(path, "rb"))
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def ingest_lines(
    store: Store,
    kind: str,
    lines: Iterable[bytes],
    origin: str,
    *,
    batch_events: int = BATCH_EVENTS,
    pool: Executor | None = None,
) -> IngestResult:
    """Parse lines with the adapter of ``kind`` and store what it yields, batch by batch.

    The whole input is one transaction (:meth:`Store.bulk`): the fastest way into a DuckDB
    file, and an input that fails half-way (an unreadable file) leaves nothing behind, so
    ingesting it again once fixed is complete rather than topped up.

    Args:
        pool: worker processes (:func:`parse_pool`) to parse batches in, for kinds with a
            columnar parser; the results are stored in input order, as without them.
    """
    module = _module(kind)
    result = IngestResult()
    if getattr(module, "parse_columns", None) is not None:
        staged: list[pa.Table] = []
        with store.bulk():
            for table, rejects in _parsed(module.__name__, kind, lines, origin, batch_events, pool):
                result.add(store.insert_rejects(rejects))
                staged.append(table)
                # Each insert checks the batch against every stored hash: fewer, larger ones.
                if sum(t.num_rows for t in staged) >= INSERT_EVENTS:
                    result.add(store.insert_table(pa.concat_tables(staged)))
                    staged = []
            if staged:
                result.add(store.insert_table(pa.concat_tables(staged)))
        return result
    parse = getattr(module, f"parse_{kind}", module.parse)
    with store.bulk():
        result = ingest_items(store, parse(lines, origin), batch_events=batch_events)
    if kind == "nginx":
        link_nginx(store)  # after the commit: it reads what was stored, from other cursors
    return result


def link_nginx(store: Store) -> int:
    """Link nginx error lines to the access line of the same request, across files and
    batches (an error log and an access log are separate files). Returns how many linked."""
    from correlator.sources.nginx import link_errors_to_access

    errors = store.nginx_events(unlinked_errors=True)
    if not errors:
        return 0
    margin = 60 * 1_000_000_000
    access = store.nginx_events(
        unlinked_errors=False, from_ns=errors[0].ts_ns - margin, to_ns=errors[-1].ts_ns + margin
    )
    linked = link_errors_to_access([*errors, *access])
    gained = [e for e in linked[: len(errors)] if e.correlation_id is not None]
    return store.set_links(gained)


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
    for item in items:
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            events.append(item)
        if len(events) >= batch_events:
            result.add(_flush(store, events, rejects, link))
            events, rejects = [], []
    result.add(_flush(store, events, rejects, link))
    return result


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


def _parse_chunk(
    module_name: str, kind: str, chunk: list[bytes], origin: str, start_line: int
) -> tuple[pa.Table, list[Reject]]:
    """One batch through the columnar parser, as the table the store inserts (in a worker:
    building the Arrow table there too leaves the main process only the insert)."""
    parse_columns = importlib.import_module(module_name).parse_columns
    columns, rejects = parse_columns(chunk, origin, source=kind, start_line=start_line)
    return events_table(columns), rejects


def _parsed(
    module_name: str,
    kind: str,
    lines: Iterable[bytes],
    origin: str,
    batch_events: int,
    pool: Executor | None,
) -> Iterator[tuple[pa.Table, list[Reject]]]:
    """Parsed batches in input order, from ``pool`` when given (a few batches ahead)."""
    offset = 0
    if pool is None:
        for chunk in _chunks(lines, batch_events):
            # Chunks continue the file's line numbering; the kind is the source recorded.
            yield _parse_chunk(module_name, kind, chunk, origin, offset + 1)
            offset += len(chunk)
        return
    depth = MAX_WORKERS + 1  # batches in flight: enough to keep the workers busy, and bounded
    pending: deque[Future[tuple[pa.Table, list[Reject]]]] = deque()
    try:
        for chunk in _chunks(lines, batch_events):
            pending.append(pool.submit(_parse_chunk, module_name, kind, chunk, origin, offset + 1))
            offset += len(chunk)
            if len(pending) >= depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # an insert failed: nothing more to parse
            future.cancel()


def _chunks(lines: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


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


def ingest_paths(
    store: Store,
    kind: str,
    paths: Sequence[Path],
    *,
    progress: Callable[[Path, int], Progress] | None = None,
    workers: int = 1,
) -> IngestResult:
    """Ingest files (``-`` is not a path here: the CLI passes stdin itself).

    With ``workers`` > 1, files of :data:`PARALLEL_MIN_BYTES` or more, of a kind with a
    columnar parser, are parsed by that many worker processes (:func:`parse_pool`), started
    once for all of them. Opt-in: they are ``spawn``ed, which re-imports the caller's
    ``__main__`` module, so the program must guard its entry point with
    ``if __name__ == "__main__":`` (as ``multiprocessing`` requires).

    Args:
        progress: ``progress(path, size_bytes)`` returns a callback taking bytes read.
        workers: parse large files in this many worker processes.

    Raises:
        InputError: a file cannot be opened.
    """
    module = _module(kind)  # an unknown kind fails before any file is opened
    columnar = getattr(module, "parse_columns", None) is not None and workers > 1
    result = IngestResult()
    with ExitStack() as stack:
        pool: Executor | None = None
        for path in paths:
            with _open(path) as handle:
                size = path.stat().st_size
                if pool is None and columnar and size >= PARALLEL_MIN_BYTES:
                    pool = stack.enter_context(parse_pool(workers))
                tick = progress(path, size) if progress is not None else None
                lines = read_lines(handle, tick)
                result.add(ingest_lines(store, kind, lines, str(path), pool=pool))
    # A load that at least doubles the store computes the link cardinalities now, once, so
    # that a query (the CLI's, read-only) does not rescan every event; after a smaller one
    # the first query does it (Store.cardinalities).
    if result.accepted and 2 * result.accepted >= store.count():
        store.cardinalities()
    return result
