"""A batch of nginx lines as the ``events`` table's Arrow table: the ``combined`` access lines
mapped natively, every other line by the parser.

The ``nginx`` source's table path (``table=partial(nginx_table, parse)``). The compiled
mapping (``native/nginx_access.c``) maps each ``combined`` access line it can read with
certainty, without the GIL, as ``_nginx_access.access_combined`` does, and declines the
others: error-log lines, JSON access lines, the lines of a message spread over lines, lines
to reject, and access lines whose reading depends on more than it checks (headers that carry
identifiers, lists of upstreams, non-ASCII bytes, escapes...). Every line it maps starts a
record (it matches ``_nginx_error.COMBINED_BYTES``, which ends an error message open above
it), so the declined lines are parsed run by run, each run of consecutive lines from its first
line's number: together they give what the parser gives for the whole batch. The rows of the
declined lines come last (the store's insert keeps no order), their rejects in line order.
``tests/correlator/sources/test_nginx_native.py`` feeds both paths the same generated and
hostile lines. Without the compiled module the parser reads every line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from correlator._schema import events_table
from correlator.model import Reject
from correlator.sources._native import mappable, native, native_table, with_declined
from correlator.sources._row_columns import row_columns
from correlator.sources._source import Parser

__all__ = ["nginx_table"]


def nginx_table(
    parse: Parser,
    lines: Sequence[bytes],
    origin: str,
    *,
    start_line: int = 1,
    **values: Any,
) -> tuple[pa.Table, list[Reject]]:
    """One batch of nginx lines as a table of the ``events`` schema, and its rejects.

    Args:
        parse: ``nginx.parse``, for the lines the native mapping declines (all of them
            without it).
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).
        start_line: the number of the first line.
        values: the parser's options (the error log's ``zone``).

    Returns:
        The rows and the rejects (only the parser makes those).
    """
    if native is None or not mappable(origin):
        columns, refused = row_columns(parse, lines, origin, start_line=start_line, **values)
        return events_table(columns), refused
    rows, buffers, declined = native.map_nginx(lines, origin)
    table = native_table(rows, buffers)
    return with_declined(table, declined, parse, lines, origin, start_line, values)
