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

from types import ModuleType
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from agent_logging.schema import MAX_ID_LENGTH
from correlator._schema import EVENTS_SCHEMA
from correlator.model import EVENT_COLUMNS, LAYERS, LEVELS, MAX_LINE_BYTES, OWNER_LAYERS
from correlator.sources._fields import LEVEL_WORDS

if TYPE_CHECKING:
    from correlator.sources._record_native import Buffers

__all__ = ["NATIVE", "native", "native_table"]

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
