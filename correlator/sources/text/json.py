"""JSON lines as the common logging libraries write them, one object per line, as :data:`JSON`.

Go's zap (production: ``ts`` in epoch seconds; development: ``T``, ``L``, ``M``), zerolog and
logrus's JSON formatter (``time``, ``level``, ``message`` or ``msg``), Elastic's ECS
(``@timestamp``, ``log.level``), Node's pino and bunyan (numeric levels), python-json-logger
(``asctime``, ``levelname``), Google Cloud's structured logging (``severity``) and structlog
(``event``, ``timestamp``)::

    {"level":"info","ts":1795936013.1716418,"caller":"main.go:31","msg":"service started"}

The time is the first of :data:`TIME_KEYS` present, the level the first of
:data:`LEVEL_KEYS`, the message the first of :data:`MESSAGE_KEYS` (none: the message is empty).
A time is either

- a string: RFC 3339 (zap's ISO 8601 ``+0100`` and a space for the ``T`` included); one
  without a UTC offset (python-json-logger's ``asctime``, ``2026-11-29 08:07:04,288``) is read
  in the zone given;
- a number of seconds, milliseconds, microseconds or nanoseconds since 1970, told apart by
  magnitude: below 10¹¹ seconds, below 10¹⁴ milliseconds, below 10¹⁷ microseconds, else
  nanoseconds. Each bound is the year 5138 read in the larger of its two units and
  1973-03-03 in the smaller, so every time from 1973 to 2262 (the last year the store holds)
  is read in the unit it was written in. A fraction is kept as written, to the nanosecond
  (zap's ``1795936013.1716418``); a negative number is refused.

A string level is kept as written; pino's and bunyan's numbers 10, 20, 30, 40, 50 and 60 are
read as ``trace``, ``debug``, ``info``, ``warn``, ``error`` and ``fatal``; any other level or
message that is not a string is its JSON text, as a field's is.

Every other key is a field, by its name. A nested object is flattened with dots
(``{"trace":{"id":"x"}}`` is the field ``trace.id``, as ECS spells it either way; when a
dotted key and a nested one name the same field, the later in the line wins, as JSON's
duplicate keys do); a string is kept as it is, any other value (number, ``true``, ``null``,
array, ``{}``) as its JSON text. A line nested deeper than the store can hold
(:data:`~correlator.sources._record.MAX_DEPTH` levels of objects and arrays) is refused.

JSON lines hold no raw newline (strings escape it), so every line starts a record. Not read:
Cloud Logging's ``timestamp`` written as an object of ``seconds`` and ``nanos`` (its two
parts become fields; a line with no other time is refused).
"""

from __future__ import annotations

from datetime import tzinfo
from decimal import Decimal
from typing import Any, Final

import orjson

from correlator.sources._record import MAX_DEPTH
from correlator.sources.text._civil import epoch_ns, iso_ns
from correlator.sources.text._format import Parsed, TextFormat, first_present

__all__ = ["JSON", "LEVEL_KEYS", "MESSAGE_KEYS", "NUMBERED_LEVELS", "TIME_KEYS", "read", "starts"]

#: The keys that may hold the time, the level and the message, first present first (after
#: flattening: ECS's ``{"log":{"level":..}}`` is ``log.level``). An aware ``timestamp`` comes
#: before python-json-logger's local ``asctime``, which a line may also carry.
TIME_KEYS: Final = ("time", "ts", "@timestamp", "timestamp", "asctime", "T")
LEVEL_KEYS: Final = ("level", "log.level", "severity", "levelname", "L")
MESSAGE_KEYS: Final = ("msg", "message", "M", "event")

#: pino's and bunyan's numeric levels, by the names those libraries give them.
NUMBERED_LEVELS: Final = {
    10: "trace",
    20: "debug",
    30: "info",
    40: "warn",
    50: "error",
    60: "fatal",
}

#: What a JSON value that is not an object is called in a reason.
_KINDS: Final[dict[type, str]] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def starts(_line: str) -> bool:
    """Every line starts a JSON record: strings escape their newlines."""
    return True


def _nests_within(value: list[Any] | dict[str, Any], levels: int) -> bool:
    """Whether ``value`` (itself one level) and what it holds nest at most ``levels`` deep."""
    if levels < 1:
        return False
    for item in value.values() if type(value) is dict else value:
        if (type(item) is list or type(item) is dict) and not _nests_within(item, levels - 1):
            return False
    return True


def _flatten(entry: dict[str, Any], prefix: str, depth: int, leaves: dict[str, Any]) -> str | None:
    """Put ``entry``'s values in ``leaves`` by dotted name, nested objects flattened.

    Args:
        entry: an object of the line, ``depth`` levels deep (the line itself is level 1).
        prefix: its name and a dot (the line's: empty).

    Returns:
        None, or the name of a value that nests past :data:`MAX_DEPTH` (``leaves`` is then
        incomplete).
    """
    for name, value in entry.items():
        key = prefix + name
        if type(value) is dict:
            if depth == MAX_DEPTH:
                return key
            if value:
                deeper = _flatten(value, key + ".", depth + 1, leaves)
                if deeper is not None:
                    return deeper
                continue
        elif type(value) is list and not _nests_within(value, MAX_DEPTH - depth):
            return key
        leaves[key] = value
    return None


def _text(value: Any) -> str:
    """A value as a field holds it: a string as it is, anything else as its JSON text."""
    return value if type(value) is str else orjson.dumps(value).decode()


def _epoch_ns(number: int | float) -> int:
    """Nanoseconds of a number since 1970 (``_civil.epoch_ns`` says in which unit).

    Raises:
        ValueError: negative, or after 2262.
    """
    # A float's shortest repr is the text the writer printed (Go and Python both print the
    # shortest that reads back), so Decimal keeps its digits where float arithmetic would not.
    return epoch_ns(number if type(number) is int else Decimal(repr(number)))


def _time_ns(value: Any, zone: tzinfo) -> int:
    """A time key's value read: a string as RFC 3339 or local, a number by magnitude.

    Raises:
        ValueError: neither, or not a time.
    """
    if type(value) is str:
        return iso_ns(value, zone)
    if type(value) is int or type(value) is float:
        return _epoch_ns(value)
    raise ValueError(f"{_text(value)[:40]} is neither a time string nor a number since 1970")


def read(text: str, zone: tzinfo) -> Parsed | str:
    """Read one JSON line; the module says which keys it reads and how.

    Returns:
        The record, or why it is not one.
    """
    if not text.strip():
        return "a blank line is not a JSON record"
    try:
        entry = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {str(exc)[:80]}"
    if type(entry) is not dict:
        return f"not a JSON object: {_KINDS[type(entry)]}"
    leaves: dict[str, Any] = {}
    too_deep = _flatten(entry, "", 1, leaves)
    if too_deep is not None:
        return (
            f"JSON field {too_deep[:60]!r} is nested deeper than the {MAX_DEPTH} levels of "
            "objects and arrays a record may have"
        )
    time_key = first_present(leaves, TIME_KEYS)
    if time_key is None:
        return f"JSON line without a time (expected one of the keys {', '.join(TIME_KEYS)})"
    try:
        ts_ns = _time_ns(leaves.pop(time_key), zone)
    except ValueError as exc:
        return f"JSON {time_key}: {exc}"
    level_key = first_present(leaves, LEVEL_KEYS)
    level = None
    if level_key is not None:
        value = leaves.pop(level_key)
        numbered = type(value) is int and value in NUMBERED_LEVELS
        level = NUMBERED_LEVELS[value] if numbered else _text(value)
    message_key = first_present(leaves, MESSAGE_KEYS)
    message = _text(leaves.pop(message_key)) if message_key is not None else ""
    return Parsed(
        ts_ns=ts_ns,
        level=level,
        message=message,
        fields={name: _text(value) for name, value in leaves.items()},
    )


#: The ``json`` format.
JSON: Final = TextFormat(
    name="json",
    looks_like='{"level":"info","ts":1795936013.17,"msg":"request handled","request_id":"r-1"}',
    starts=starts,
    read=read,
)
