"""Redaction of secrets in messages, field values and exception text, before rendering.

DESIGN §4: authorization headers, passwords, tokens, private keys and cookies never leave the
process. Two mechanisms, both conservative about what they keep:

- by key: a field, dict key or ``key=value``/``key: value``/``"key": "value"`` pair in text
  whose key names a secret (:func:`is_sensitive_key`, from ``_sensitive_keys``) loses its
  whole value;
- by shape: PEM private keys, credentials in URLs, JWTs, AWS access key ids, GitHub, GitLab,
  Slack and Stripe tokens, and ``Bearer <token>`` are recognised wherever they appear
  (:func:`redact_text`, from ``_secrets``, which also lists the known limits).

What is kept is what makes the line useful: the key, the auth scheme, the URL's user and host.
This module applies both mechanisms to values and records; the public names of the other two
are re-exported here.

It runs on every log call (the whole call has ~5 µs), so it is built around a prefilter: a
string is scanned only if it contains a trigger (``:``, ``=`` or one of a few token prefixes),
clean strings up to 256 characters are remembered, which fields to look at is worked out once
per record shape, and the identifier fields, validated when they were bound, are skipped.
Measured with ``python -m timeit`` on the 2-core development VM (noisy; best of 9), for a
record of a 60-character event, five identifiers and four small extra fields: 1.1 µs when its
strings were seen before, 2.7 µs when the event and a path are new on every call, against
0.56-1.3 µs for ``orjson.dumps`` of the same record in the same runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from agent_logging._secrets import (
    CLEAN_MAX_CHARS,
    REDACTED,
    clean_texts,
    redact_text,
    remember_clean,
    scan,
    scan_unfiltered,
)
from agent_logging._sensitive_keys import is_sensitive_key
from agent_logging._types import CONTEXT_KEYS, EventDict

__all__ = ["REDACTED", "is_sensitive_key", "redact", "redact_text", "redact_value"]

#: Keys whose values are never looked at: set by the library, or identifiers validated when
#: bound (DESIGN §3). ``event`` is deliberately absent: it is the caller's free text.
_SKIP_KEYS: Final = frozenset({"ts", "level", "service", "layer", "env", *CONTEXT_KEYS})

#: Value types that cannot hold text.
_SCALARS: Final = frozenset({int, float, bool})

#: Deeper containers are replaced whole: fail closed, and cycles end.
_MAX_DEPTH: Final = 32

_PLANS: dict[tuple[Any, ...], tuple[tuple[Any, bool], ...]] = {}
_PLANS_SIZE: Final = 1024

#: The scanners under the names they had here before ``_secrets`` was split off; the tests of
#: the prefilter use them.
_scan, _scan_unfiltered = scan, scan_unfiltered


def redact_value(value: object) -> object:
    """``value`` with secrets redacted, recursively through dicts, lists and tuples.

    Under a sensitive key (:func:`is_sensitive_key`) the whole value becomes
    :data:`REDACTED`, whatever it is; strings (and UTF-8 bytes) go through
    :func:`redact_text`; other objects are returned as they are. Containers nested deeper
    than 32 levels are replaced whole (this also ends cycles).

    Args:
        value: any object; it is never mutated.

    Returns:
        ``value`` itself when nothing changed, else a copy (a plain dict, list or tuple;
        namedtuples keep their type).
    """
    return _redact_value(value, 0)


def _redacted(value: object) -> object:
    """:data:`REDACTED`, or ``value`` itself when it already is that text (idempotence)."""
    return value if type(value) is str and value == REDACTED else REDACTED


def _redact_value(value: object, depth: int) -> object:
    if type(value) is str:
        return redact_text(value)
    if value is None or type(value) in _SCALARS:
        return value
    if depth >= _MAX_DEPTH and isinstance(value, dict | list | tuple):
        return REDACTED
    if isinstance(value, dict):
        return _redact_dict(value, depth)
    if isinstance(value, list | tuple):
        return _redact_sequence(value, depth)
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "surrogateescape")
        redacted = redact_text(text)
        return value if redacted is text else redacted.encode("utf-8", "surrogateescape")
    return value


def _redact_dict(value: dict[Any, Any], depth: int) -> object:
    copy: dict[Any, Any] | None = None
    for key, item in value.items():
        if isinstance(key, str) and is_sensitive_key(key):
            new = _redacted(item)
        else:
            new = _redact_value(item, depth + 1)
        if new is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = new
    return value if copy is None else copy


def _redact_sequence(value: list[Any] | tuple[Any, ...], depth: int) -> object:
    items: list[Any] | None = None
    for index, item in enumerate(value):
        new = _redact_value(item, depth + 1)
        if new is not item:
            if items is None:
                items = list(value)
            items[index] = new
    if items is None:
        return value
    if isinstance(value, list):
        return items
    make: Callable[[list[Any]], object] | None = getattr(type(value), "_make", None)
    return make(items) if make is not None else tuple(items)


def _plan(keys: tuple[Any, ...]) -> tuple[tuple[Any, bool], ...]:
    """The fields of a record shape to look at, and whether each is a secret's."""
    plan = tuple(
        (key, isinstance(key, str) and is_sensitive_key(key))
        for key in keys
        if key not in _SKIP_KEYS
    )
    if len(_PLANS) >= _PLANS_SIZE:
        _PLANS.clear()
    _PLANS[keys] = plan
    return plan


def redact(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact the record in place; it must run last before rendering.

    Looks at every field except ``ts``, ``level``, ``service``, ``layer``, ``env`` and the
    identifiers, including ``event``, the nested ``error`` dict (message, chain, stack) and a
    pre-formatted ``exception``/``stack`` string.

    Args:
        logger: unused (structlog's processor signature).
        method_name: unused.
        event_dict: the record; it belongs to the pipeline, so it is edited in place.

    Returns:
        ``event_dict``.
    """
    # A call site logs the same keys every time: which fields to look at, and which are
    # secrets, is worked out once per record shape rather than once per field per call.
    keys = tuple(event_dict)
    plan = _PLANS.get(keys)
    if plan is None:
        plan = _plan(keys)
    for key, sensitive in plan:
        value = event_dict[key]
        if sensitive:
            if not (type(value) is str and value == REDACTED):
                event_dict[key] = REDACTED
        elif type(value) is str:
            # redact_text(), inlined: this is the common case on the hot path.
            size = len(value)
            if size < 5 or (size <= CLEAN_MAX_CHARS and value in clean_texts):
                continue
            text = scan(value)
            if text is not value:
                event_dict[key] = text
            elif size <= CLEAN_MAX_CHARS:
                remember_clean(value)
        elif value is not None and type(value) not in _SCALARS:
            new = _redact_value(value, 0)
            if new is not value:
                event_dict[key] = new
    return event_dict
