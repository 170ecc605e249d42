"""The compiled mappings (``correlator/sources/native/``, built into ``_record_native`` by
``pip install -e .``), configured, and their column buffers as an Arrow table.

Two mappings use it: ``_record_batch`` (the ``ndjson``/``agent`` record lines) and
``_nginx_batch`` (nginx's ``combined`` access lines). Each maps the lines it can map with
certainty, without the GIL, and declines the others to the Python parser, the reference. The
tables the module checks against (layers, owner layers, level words, the identifier length,
the line limit) are handed over here, from ``agent_logging.schema``, ``model`` and
``_fields``, so they have one home. Without the compiled module (a checkout used without
installing it) :data:`NATIVE` is false and the Python parsers map every line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from agent_logging.schema import MAX_ID_LENGTH
from correlator._schema import EVENTS_SCHEMA, events_table
from correlator.model import EVENT_COLUMNS, LAYERS, LEVELS, MAX_LINE_BYTES, OWNER_LAYERS, Reject
from correlator.sources._fields import LEVEL_WORDS
from correlator.sources._row_columns import items_columns
from correlator.sources._source import Parser

if TYPE_CHECKING:
    from correlator.sources._record_native import Buffers

__all__ = ["NATIVE", "mappable", "native", "native_table", "runs", "with_declined"]

native: ModuleType | None
try:
    from correlator.sources import _record_native as native
except ImportError:  # pragma: no cover - CI builds it; a bare checkout may not have
    native = None

#: Whether the compiled mappings are there (``pip install -e .`` builds them).
NATIVE: Final = native is not None

if native is not None:
    _LEVEL_NAMES = list(LEVELS)
    native.configure(
        LAYERS,
        OWNER_LAYERS,
        _LEVEL_NAMES,
        {word: _LEVEL_NAMES.index(level) for word, level in LEVEL_WORDS.items()},
        MAX_ID_LENGTH,
        MAX_LINE_BYTES,
    )


def mappable(*texts: str | None) -> bool:
    """Whether the texts a native mapping takes (an origin, a service) are UTF-8: a path with
    undecodable bytes (``str(path)`` keeps them as surrogates) is the parser's, which rejects
    what it cannot store."""
    try:
        for text in texts:
            if text is not None:
                text.encode()
    except UnicodeEncodeError:
        return False
    return True


def native_table(rows: int, buffers: dict[str, Buffers]) -> pa.Table:
    """The ``events`` table of a native mapping's column buffers (no copy: Arrow takes the
    bytes)."""
    arrays = []
    for name in EVENT_COLUMNS:
        validity, offsets, values, nulls = buffers[name]
        kind = EVENTS_SCHEMA.field(name).type
        parts = [None if validity is None else pa.py_buffer(validity)]
        if offsets is not None:
            parts.append(pa.py_buffer(offsets))
        parts.append(pa.py_buffer(values))
        arrays.append(pa.Array.from_buffers(kind, rows, parts, null_count=nulls))
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def runs(indexes: Sequence[int]) -> Iterator[tuple[int, int]]:
    """Ascending ``indexes`` (the lines a mapping declined) as runs of consecutive ones,
    ``(first, past the last)``: the parser reads each run from its first line."""
    first = previous = indexes[0]
    for index in indexes[1:]:
        if index != previous + 1:
            yield first, previous + 1
            first = index
        previous = index
    yield first, previous + 1


def with_declined(
    table: pa.Table,
    declined: Sequence[int],
    parse: Parser,
    lines: Sequence[bytes],
    origin: str,
    start_line: int,
    values: Mapping[str, Any],
) -> tuple[pa.Table, list[Reject]]:
    """A native mapping's rows and the parser's reading of the lines it declined, run by run
    (each run from its first line's number: a mapped line starts a record, so the runs read
    as the whole batch would), and the parser's rejects, in line order."""
    if not declined:
        return table, []
    columns, rejects = items_columns(
        chain.from_iterable(
            parse(lines[first:end], origin, start_line=start_line + first, **values)
            for first, end in runs(declined)
        )
    )
    return pa.concat_tables([table, events_table(columns)]), rejects
