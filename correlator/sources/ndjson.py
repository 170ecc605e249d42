"""The ``ndjson`` and ``agent`` adapters: JSON lines in the record schema of DESIGN §4.

One JSON object per line, as ``agent_logging`` writes them::

    {"ts": "2024-05-01T12:00:00.123456789Z", "level": "error", "event": "provisioning failed",
     "service": "api", "layer": "api", "env": "prod", "allocation_id": "a-9",
     "correlation_id": "c-1", "trace_id": "4bf9...", "span_id": "00f0...",
     "error": {"type": "ProvisionError", "message": "...", "owner_layer": "cert",
               "chain": [{"type": "SSLError", "message": "..."}], "stack": "..."}}

Each record becomes a row of the ``events`` table as
:func:`~correlator.sources._record.record_row` maps it (DESIGN §4's fields to columns, the
rest to ``attrs``; the ``loki`` adapter shares the mapping); a line that is not a JSON object,
or a record the mapping refuses, is a :class:`~correlator.model.Reject` naming the line. A
trailing ``\\r`` is dropped before anything else, so CRLF files hash like LF files.

Two entry points share one mapping: :func:`parse` yields :class:`~correlator.model.Event`
objects; :func:`parse_columns` fills one list per column of the ``events`` table (the store's
bulk path) without building them. ``benchmarks/RESULTS.md`` has the ingest figures: about
30,000 events/s on 2 cores, short of the issue's 200,000, and where the time goes.
The line checks and the content hash come from ``_lines``, the identifier checks and level
normalisation from ``_fields``: the other adapters share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

import orjson

from correlator.model import EVENT_COLUMNS, MAX_LINE_BYTES, Event, Reject
from correlator.sources._lines import excerpt, hasher, unreadable
from correlator.sources._record import JSON_TYPES, Row, record_row_positional
from correlator.sources._source import Source

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["AGENT", "NDJSON", "parse", "parse_agent", "parse_columns", "parse_table"]

_CHUNK_ROWS: Final = 1024


def _rows(
    numbered: Iterable[tuple[int, bytes]],
    origin: str,
    default_layer: str | None,
    source: str,
    attrs_json: bool,
) -> Iterator[Row | Reject]:
    """The shared loop of :func:`parse` and :func:`parse_columns`: rows or rejects, of lines
    given with their numbers."""
    base = hasher(source)
    loads = orjson.loads
    from_bytes = int.from_bytes
    for line_no, line in numbered:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > MAX_LINE_BYTES:
            yield Reject(source, origin, line_no, unreadable(line_no, line) or "", excerpt(line))
            continue
        try:
            record = loads(line)
        except orjson.JSONDecodeError as exc:
            if line.isspace() or not line:
                continue
            reason = unreadable(line_no, line) or f"line {line_no} is not valid JSON: {exc}"
            yield Reject(source, origin, line_no, reason, excerpt(line))
            continue
        if type(record) is not dict:
            yield Reject(
                source,
                origin,
                line_no,
                f"line {line_no} is a JSON {JSON_TYPES.get(type(record), 'value')}, not an object",
                excerpt(line),
            )
            continue
        state = base.copy()
        state.update(line)
        row = record_row_positional(
            record,
            line.decode(),  # orjson accepted it, so it is valid UTF-8
            from_bytes(state.digest(), "big", signed=True),
            source,
            origin,
            line_no,
            default_layer,
            None,
            None,
            attrs_json,
        )
        if isinstance(row, str):
            yield Reject(source, origin, line_no, row, excerpt(line))
        else:
            yield row


def parse(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    source: str = "ndjson",
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """Read record-schema JSON lines into events.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``) they come from.
        default_layer: the layer of records that name none (otherwise they are rejected).
        source: the source kind to stamp: ``ndjson`` or ``agent``.
        start_line: the number of the first line (a batch of a longer file starts later).

    Yields:
        An :class:`Event` per record, a :class:`Reject` per unreadable line; blank lines are
        skipped. An integer past 64 bits is in the event's ``attrs`` as its decimal text
        (:mod:`~correlator.sources._record` says why and how).
    """
    for item in _rows(enumerate(lines, start_line), origin, default_layer, source, False):
        if type(item) is tuple:
            yield Event(*item)
        else:
            yield item  # type: ignore[misc]  # a Reject


def parse_agent(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """:func:`parse` for the ``agent`` source kind (agent_logging's own JSON-lines files).

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path.
        default_layer: the layer of records that name none.
        start_line: the number of the first line.

    Yields:
        Events and rejects, as :func:`parse`.
    """
    return parse(lines, origin, default_layer=default_layer, source="agent", start_line=start_line)


def parse_columns(
    lines: Iterable[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    source: str = "ndjson",
    start_line: int = 1,
) -> tuple[dict[str, list[Any]], list[Reject]]:
    """Read record-schema JSON lines straight into columns, for the store's bulk insert.

    The same mapping as :func:`parse`, without building an :class:`Event` per line. ``attrs``
    is rendered as JSON text (None when empty), as the ``events`` table stores it, an integer
    past 64 bits as a JSON string of its digits. Everything is held in memory: call it per
    batch of lines.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).
        default_layer: the layer of records that name none.
        source: ``ndjson`` or ``agent``.
        start_line: the number of the first line (a batch of a longer file starts later).

    Returns:
        One list per name of :data:`~correlator.model.EVENT_COLUMNS`, and the rejects.
    """
    return _columns(enumerate(lines, start_line), origin, default_layer, source)


def _columns(
    numbered: Iterable[tuple[int, bytes]], origin: str, default_layer: str | None, source: str
) -> tuple[dict[str, list[Any]], list[Reject]]:
    """:func:`parse_columns` of lines given with their numbers."""
    columns: list[list[Any]] = [[] for _ in EVENT_COLUMNS]
    extends = [column.extend for column in columns]
    rejects: list[Reject] = []
    items = _rows(numbered, origin, default_layer, source, True)
    # Rows are transposed a chunk at a time: one pass over a million rows per column would
    # walk memory 27 times; a chunk stays in the CPU cache.
    while chunk := list(islice(items, _CHUNK_ROWS)):
        rows = [item for item in chunk if type(item) is tuple]
        if len(rows) < len(chunk):
            rejects.extend(item for item in chunk if type(item) is not tuple)  # type: ignore[misc]
        if rows:
            for extend, values in zip(extends, zip(*rows, strict=True), strict=True):
                extend(values)
    return dict(zip(EVENT_COLUMNS, columns, strict=True)), rejects


def parse_table(
    lines: Sequence[bytes],
    origin: str,
    *,
    default_layer: str | None = None,
    source: str = "ndjson",
    start_line: int = 1,
) -> tuple[pa.Table, list[Reject]]:
    """Read record-schema JSON lines straight into the ``events`` table's Arrow table.

    The same rows as :func:`parse_columns`, mapped natively where the compiled mapping is
    certain and by the same Python mapping elsewhere (``_record_batch``); the native part
    runs without the GIL, so ingest maps batches in threads while it stores. Its arguments
    are :func:`parse_columns`'.

    Returns:
        The table (rows in no particular order) and the rejects.
    """
    # Imported here: pyarrow costs every CLI command's start ~0.1 s, and only ingest needs it.
    from correlator.sources._record_batch import record_table

    return record_table(_columns, lines, origin, default_layer, source, start_line)


AGENT: Final = Source(
    "agent",
    'JSON lines written by agent_logging: {"ts":"2026-11-22T13:11:19.123456789Z",'
    '"level":"info","event":"task claimed","service":"node-agent","layer":"node",'
    '"node_id":"n-17",...}',
    parse=parse_agent,
    columns=partial(parse_columns, source="agent"),
    table=partial(parse_table, source="agent"),
    guessed=False,  # ndjson reads the same lines: the guess names the general kind
)
NDJSON: Final = Source(
    "ndjson",
    "JSON lines in the same record schema (ts, level, event, service, layer, the five "
    "identifiers, error={type,message,chain}) from any program; one parser with agent",
    parse=parse,
    columns=parse_columns,
    table=parse_table,
)
