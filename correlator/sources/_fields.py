"""Identifier checks and level normalisation, shared by the source adapters.

:func:`take_id` validates one of the five identifiers (or ``trace_id``/``span_id``) as
``agent_logging`` validates them: a value that fails is dropped and its problem noted, so
hostile text never reaches an identifier column. Values already proven acceptable are kept in
:data:`good_ids` (bounded), so that the common case is one set test; :func:`check_ids` checks
the five of a record against it one by one. :func:`normalise_level` maps the severity words of
:data:`LEVEL_WORDS` to the model's five levels. The record mapping (``_record``) inlines the
common cases with these tables and patterns.
"""

from __future__ import annotations

import re
from typing import Any, Final

from agent_logging.schema import MAX_ID_LENGTH, id_problem
from correlator.model import IDENTIFIER_KEYS

__all__ = [
    "HEX16",
    "HEX32",
    "LEVEL_WORDS",
    "ZERO_SPAN",
    "ZERO_TRACE",
    "check_ids",
    "good_ids",
    "normalise_level",
    "take_id",
]

# agent_logging.schema's rule for the five identifiers, as one regex so that the common case is
# a single C call; tests/correlator/sources/test_ndjson.py proves it agrees with id_problem().
_SAFE_ID: Final = re.compile(rf"[A-Za-z0-9._:/@+~-]{{1,{MAX_ID_LENGTH}}}")
HEX32: Final = re.compile(r"[0-9a-f]{32}")
HEX16: Final = re.compile(r"[0-9a-f]{16}")
ZERO_TRACE: Final = "0" * 32
ZERO_SPAN: Final = "0" * 16

# Identifier values already proven acceptable, plus None (absent is fine). A log repeats its
# node, allocation, workflow and (within a request) correlation ids many times; one set test
# for all five costs a fraction of five regex calls. Bounded: emptied when full, like the
# timestamp caches of _time.
_CACHE_LIMIT: Final = 65_536
good_ids: set[str | None] = {None}

# Severity words seen in the wild (structlog, stdlib logging, syslog, Go's slog/zap, Java) to
# the five levels of the model.
LEVEL_WORDS: Final = {
    "trace": "debug",
    "debug": "debug",
    "info": "info",
    "information": "info",
    "informational": "info",
    "notice": "info",
    "log": "info",
    "warn": "warning",
    "warning": "warning",
    "err": "error",
    "error": "error",
    "exception": "error",
    "crit": "critical",
    "critical": "critical",
    "fatal": "critical",
    "panic": "critical",
    "dpanic": "critical",
    "alert": "critical",
    "emerg": "critical",
    "emergency": "critical",
}


def normalise_level(value: object) -> str | None:
    """Map a severity word (any case) to one of the model's levels.

    Args:
        value: e.g. ``WARN``, ``err``, ``fatal``.

    Returns:
        ``debug``, ``info``, ``warning``, ``error`` or ``critical``; None when unknown.
    """
    if type(value) is not str:
        return None
    return LEVEL_WORDS.get(value) or LEVEL_WORDS.get(value.strip().lower())


def take_id(key: str, value: object, rejected: dict[str, str]) -> str | None:
    """Validate one identifier (or ``trace_id``/``span_id``) value.

    Integers are accepted for the five identifiers (inventories number their nodes).

    Args:
        key: the identifier key.
        value: the candidate; None means absent.
        rejected: where a refused value's problem is noted, by key.

    Returns:
        The value as text, or None when absent or refused.
    """
    if value is None:
        return None
    if type(value) is str:
        if key in IDENTIFIER_KEYS:
            if _SAFE_ID.fullmatch(value):
                return _remember(good_ids, value)
        elif key == "trace_id":
            if HEX32.fullmatch(value) and value != ZERO_TRACE:
                return value
        elif key == "span_id" and HEX16.fullmatch(value) and value != ZERO_SPAN:
            return value
    elif type(value) is int and key in IDENTIFIER_KEYS:
        return take_id(key, str(value), rejected)
    rejected[key] = id_problem(key, value) or "is not acceptable"
    return None


def check_ids(values: tuple[Any, ...], rejected: dict[str, str]) -> tuple[str | None, ...]:
    """The five identifiers checked one by one: only values not already known cost a regex."""
    checked = []
    for key, value in zip(IDENTIFIER_KEYS, values, strict=True):
        try:
            known = value in good_ids
        except TypeError:  # unhashable
            known = False
        checked.append(value if known else take_id(key, value, rejected))
    return tuple(checked)


def _remember(cache: set[str | None], value: str) -> str:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
        cache.add(None)
    cache.add(value)
    return value
