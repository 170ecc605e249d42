"""Integers past 64 bits in JSON evidence: kept to the last digit, as their decimal text.

orjson reads an integer literal outside the 64-bit range it holds (below
-9,223,372,036,854,775,808, the least signed 64-bit integer, or above
18,446,744,073,709,551,615, the greatest unsigned one) as a float, which keeps 17 significant
digits, and cannot write a Python integer that large at all (``orjson.dumps`` raises). So a
JSON adapter keeps such an integer as its decimal text, the JSON string
``"123456789012345678901234567890"``: orjson, DuckDB's JSON functions and the timeline then
carry it unchanged. Integers within 64 bits stay JSON numbers, floats stay floats.

Finding the lines that hold one costs next to nothing on the others: orjson writes every float
of magnitude 10^16 or more with an exponent (``1.2345678901234568e+29``), and an integer past
64 bits is read as a float of magnitude 9.2 * 10^18 or more; so JSON text that orjson wrote
without a ``+`` (one ``memchr``) holds none, and one without a digit, ``e+`` and a digit
(:func:`exponent_in`, :func:`may_hold_wide`) holds none either. Such a line is read again by
the stdlib parser (:func:`reread`), which gives every integer exactly; a line whose exponent
belongs to a genuine float, or to text, reads the same the second time. The stdlib parser is
only ever given text that orjson accepted, so strict JSON in valid UTF-8, and agrees with
orjson on everything else: the same floats (both round correctly), and the last of duplicate
keys wins in both.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, TypeVar

import orjson

__all__ = [
    "INT64_MIN",
    "UINT64_MAX",
    "exact",
    "exponent_in",
    "may_hold_wide",
    "reread",
    "wide_as_text",
]

#: The least integer orjson reads as an integer (the least signed 64-bit one).
INT64_MIN: Final = -(2**63)
#: The greatest integer orjson reads as an integer (the greatest unsigned 64-bit one).
UINT64_MAX: Final = 2**64 - 1

# How orjson writes a float of magnitude 10^16 or more: a digit, "e+", a digit.
_EXPONENT: Final = re.compile(r"[0-9]e\+[0-9]")
_PLUS: Final = ord("+")  # `int in bytes` is a memchr; `bytes in bytes` costs ten times more

_T = TypeVar("_T")


def _int_or_text(literal: str) -> int | str:
    """An integer literal as orjson would hold it, or its text when orjson cannot.

    JSON writes an integer without ``+`` or leading zeros, so the literal is already the
    integer's decimal text (``-0``, the one other spelling, is within range).
    """
    value = int(literal)
    return value if INT64_MIN <= value <= UINT64_MAX else literal


def exponent_in(text: str) -> bool:
    """Whether JSON text orjson wrote holds a float of magnitude 10^16 or more.

    An integer past 64 bits read by orjson is such a float. Test ``"+" in text`` first: it
    clears nearly every line for a fraction of the cost.

    Args:
        text: JSON text written by ``orjson.dumps``.

    Returns:
        True when it may hold an integer that orjson read as a float.
    """
    # "e+" first: a search for two characters is cheaper than the regex, and clears text
    # whose "+" is a UTC offset's (2026-11-22T14:11:19+01:00).
    return "e+" in text and _EXPONENT.search(text) is not None


def may_hold_wide(rendered: bytes) -> bool:
    """Whether JSON that orjson wrote may hold an integer past 64 bits (read as a float).

    Args:
        rendered: what ``orjson.dumps`` returned.

    Returns:
        True when it holds a float of magnitude 10^16 or more.
    """
    return _PLUS in rendered and exponent_in(rendered.decode())


def reread(text: str | bytes, fallback: _T) -> Any | _T:
    """Read JSON text that orjson accepted again, integers past 64 bits as their decimal text.

    Args:
        text: the JSON text (a line as read).
        fallback: what to return when the text nests too deep for the stdlib parser.

    Returns:
        The value, every integer exact: within 64 bits an ``int``, past them the ``str`` of
        its digits. ``fallback`` when the text nests deeper than Python's recursion limit
        lets the stdlib parser go (about 1,000 levels; orjson reads 1,024), where orjson's
        reading has to stand.
    """
    try:
        return json.loads(text, parse_int=_int_or_text)
    except RecursionError:
        return fallback


def exact(value: Any, text: str | bytes) -> Any:
    """orjson's reading of ``text``, or ``text`` read again when that lost an integer's digits.

    For the adapters whose records are not otherwise written as JSON text: it renders
    ``value`` once to look (about 0.3 µs for a short record), which also proves that the
    value can be written, and so stored.

    Args:
        value: ``orjson.loads(text)``.
        text: the JSON text orjson read.

    Returns:
        ``value``, or the same with every integer past 64 bits as its decimal text.

    Raises:
        orjson.JSONEncodeError: ``value`` nests deeper than the 254 levels orjson writes
            (it reads 1,024): nothing could store it.
    """
    rendered = orjson.dumps(value)
    return reread(text, value) if may_hold_wide(rendered) else value


def wide_as_text(value: Any) -> Any:
    """A parsed JSON value with every integer past 64 bits replaced by its decimal text.

    For values read by a parser that keeps such integers (psycopg reads ``jsonb`` with the
    stdlib's), so that orjson can write them and they read as :func:`reread` reads them.

    Args:
        value: a value of dicts, lists and scalars.

    Returns:
        The value so rewritten (its dicts and lists copied; scalars as they are).
    """
    if type(value) is int:
        return value if INT64_MIN <= value <= UINT64_MAX else str(value)
    if type(value) is dict:
        return {key: wide_as_text(item) for key, item in value.items()}
    if type(value) is list:
        return [wide_as_text(item) for item in value]
    return value
