"""Redaction of secrets in messages, field values and exception text, before rendering.

DESIGN §4: authorization headers, passwords, tokens, private keys and cookies never leave the
process. Two mechanisms, both conservative about what they keep:

- by key: a field, dict key, namedtuple field, the first item of a two-item tuple or list
  (``(b"authorization", b"Basic ...")``: ASGI's and httpx's raw headers) or a
  ``key=value``/``key: value``/``"key": "value"`` pair in text whose key names a secret
  (:func:`is_sensitive_key`, from ``_sensitive_keys``) loses its whole value;
- by shape: PEM private keys, credentials in URLs, passwords on command lines and in SQL,
  AWS access keys, ``Bearer <token>`` and the tokens of some twenty vendors are recognised
  wherever they appear, percent-encoded too (:func:`redact_text`, from ``_secrets``, which
  lists them and the known limits).

Both apply to keys as well as values: a field name or dict key that holds a secret
(``**{"password=hunter2": 2}``) is redacted like any text. What is kept is what makes the
line useful: the key, the auth scheme, the URL's user and host.
This module applies both mechanisms to values and records; the public names of the other two
are re-exported here. No value is left for a renderer to turn into text unseen: any mapping
and a dataclass become plain dicts, redacted as such, and any other object its redacted
``str()`` (see :func:`redact_value`).

It runs on every log call (the whole call has ~5 µs), so it is built around a prefilter: a
string is scanned only if it contains a trigger (``:``, ``=`` or one of a few token prefixes),
clean strings up to 256 characters are remembered, which fields to look at is worked out once
per record shape, and the identifier and trace id fields, validated when they were bound or
given (the pipeline checks those a call site or a processor put in the record before it
redacts it, ``pipeline._processors``), are skipped. Redaction depends on nothing of the
library but the schema, so that the identifiers' and the pipeline's modules can use it to
quote what they refuse. Measured with ``python -m timeit`` on the 2-core development VM (noisy;
best of 9), for a record of a 60-character event, five identifiers and four small extra
fields: 1.1 µs when its strings were seen before, 2.7 µs when the event and a path are new on
every call, against 0.56-1.3 µs for ``orjson.dumps`` of the same record in the same runs.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from datetime import date, time
from enum import Enum
from typing import Any, Final
from urllib.parse import ParseResult, ParseResultBytes, SplitResult, SplitResultBytes
from uuid import UUID

from agent_logging._types import EventDict
from agent_logging.redaction._secrets import (
    CLEAN_MAX_CHARS,
    REDACTED,
    clean_texts,
    redact_text,
    remember_clean,
    scan,
    scan_unfiltered,
)
from agent_logging.redaction._sensitive_keys import is_sensitive_key
from agent_logging.schema import CONTEXT_KEYS

__all__ = ["REDACTED", "is_sensitive_key", "redact", "redact_text", "redact_value"]

#: Keys whose values are never looked at: set by the library, or identifiers and trace ids
#: validated when bound or given (DESIGN §3; the pipeline checks a trace id a call site or a
#: processor of the service's put in the record before it reaches redaction). ``event`` is
#: deliberately absent: it is the caller's free text.
_SKIP_KEYS: Final = frozenset({"ts", "level", "service", "layer", "env", *CONTEXT_KEYS})

# What a record shape's plan says of each field it looks at.
_PLAIN: Final = 0  # redacted as text or value
_SECRET: Final = 1  # under a sensitive key: redacted whole
_RENAME: Final = 3  # last, once per shape that has them: keys that hold a secret are renamed

#: Value types that cannot hold text.
_SCALARS: Final = frozenset({int, float, bool})

#: Types that cannot hold a secret, which orjson encodes by content or ``str()`` shows as a
#: number (subclasses of int and float, IntEnum among them): kept as they are.
_KEPT: Final = (int, float, complex, date, time, UUID)

#: Key types orjson encodes (``OPT_NON_STR_KEYS``); others are turned into text.
_NATIVE_KEYS: Final = (int, float, bool, type(None), date, time, UUID, Enum)

#: ``urlsplit``/``urlparse`` results, whose netloc may hold a password.
_URL_PARTS: Final = (SplitResult, ParseResult, SplitResultBytes, ParseResultBytes)

#: Deeper containers are replaced whole: fail closed, and cycles end.
_MAX_DEPTH: Final = 32

_PLANS: dict[tuple[Any, ...], tuple[tuple[Any, int], ...]] = {}
_PLANS_SIZE: Final = 1024
#: For the record shapes whose plan ends with a rename: each key that holds a secret and the
#: redacted key it becomes.
_RENAMES: dict[tuple[Any, ...], dict[str, str]] = {}

#: The scanners under the names they had here before ``_secrets`` was split off; the tests of
#: the prefilter use them.
_scan, _scan_unfiltered = scan, scan_unfiltered


def redact_value(value: object) -> object:
    """``value`` with secrets redacted, recursively through mappings, lists, tuples and sets.

    Under a sensitive key (:func:`is_sensitive_key`: a mapping's key, a namedtuple's field,
    the first item, str or bytes, of a two-item tuple or list such as ``("password", "x")``
    or ASGI's ``(b"authorization", b"Basic ...")``) the whole value becomes :data:`REDACTED`,
    whatever it is; strings (and UTF-8 bytes) go through :func:`redact_text`, and so do
    string keys. Any other mapping (requests'
    ``CaseInsensitiveDict``, ``MappingProxyType``) and a dataclass instance become a plain
    dict, redacted the same way; a ``urlsplit``/``urlparse`` result loses the password of its
    netloc; an exception becomes the text ``traceback`` ends with (``RuntimeError: message``)
    and any other object its ``str()``, both redacted. Numbers, ``None``, dates, times and UUIDs
    are kept. Containers nested deeper than 32 levels are replaced whole (this also ends
    cycles).

    Args:
        value: any object; it is never mutated.

    Returns:
        ``value`` itself when nothing changed (a ``dict`` subclass, list, tuple or set), else
        a copy (a plain dict, list or tuple; namedtuples keep their type; a set becomes a list
        in ``repr`` order, as it is rendered) or the redacted text.
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
    if depth >= _MAX_DEPTH:
        return REDACTED
    if isinstance(value, dict):
        return _redact_mapping(value, depth)
    if isinstance(value, list | tuple):
        return _redact_sequence(value, depth)
    if isinstance(value, str):
        return redact_text(value)
    return _redact_other(value, depth)


def _redact_other(value: object, depth: int) -> object:
    """The types not on the fast path: off it, so plain str and int fields pay nothing."""
    # An object is turned into redacted text (or a plain dict) here rather than redacted by
    # the JSON renderer's str() fallback: the console sink shows the record's objects through
    # structlog's renderer, and orjson encodes dataclasses itself without any fallback, so only
    # here does nothing escape. It costs no more: the renderer would call str() on it anyway,
    # and now finds text instead. What is kept here each renderer shows by its content.
    if isinstance(value, _KEPT):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("utf-8", "surrogateescape")
        redacted = redact_text(text)
        return value if redacted is text else redacted.encode("utf-8", "surrogateescape")
    if isinstance(value, Mapping):
        return _redact_mapping(value, depth)
    if isinstance(value, set | frozenset):
        items = [_redact_value(item, depth + 1) for item in value]
        if all(new is item for new, item in zip(items, value, strict=True)):
            return value
        return sorted(items, key=repr)
    if isinstance(value, BaseException):
        # As a traceback ends with it: the type says more than the message alone.
        return redact_text("".join(traceback.format_exception_only(value)).rstrip("\n"))
    if isinstance(value, Enum):  # orjson encodes its value
        inner = _redact_value(value.value, depth + 1)
        return value if inner is value.value else inner
    if is_dataclass(value) and not isinstance(value, type):  # orjson encodes its fields
        return _redact_mapping(_fields(value), depth)
    return redact_text(_text(value))


def _redact_mapping(value: Mapping[Any, Any], depth: int) -> object:
    """A dict comes back as itself when nothing changed; any other mapping as a plain dict,
    which orjson encodes as an object (it would ``str()`` the mapping, unredacted)."""
    if not isinstance(value, dict):
        return _rebuilt(value, depth)
    copy: dict[Any, Any] | None = None
    for key, item in value.items():
        if type(key) is str or isinstance(key, str):
            if key not in clean_texts and redact_text(key) is not key:
                return _rebuilt(value, depth)  # a DSN or a URL as a key: rare
            new = _redacted(item) if is_sensitive_key(key) else _redact_value(item, depth + 1)
        elif isinstance(key, _NATIVE_KEYS):
            new = _redact_value(item, depth + 1)
        else:
            return _rebuilt(value, depth)
        if new is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = new
    return value if copy is None else copy


def _rebuilt(value: Mapping[Any, Any], depth: int) -> dict[Any, Any]:
    """A plain dict of ``value`` redacted, its keys too: a key orjson refuses (a tuple, an
    object) would lose the whole record, so it becomes text."""
    copy: dict[Any, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) and not isinstance(key, _NATIVE_KEYS):
            key = _text(key)
        if isinstance(key, str):
            new = _redacted(item) if is_sensitive_key(key) else _redact_value(item, depth + 1)
            copy[redact_text(key)] = new
        else:
            copy[key] = _redact_value(item, depth + 1)
    return copy


def _redact_sequence(value: list[Any] | tuple[Any, ...], depth: int) -> object:
    names: tuple[str, ...] = ()
    if type(value) is not list and type(value) is not tuple:
        if isinstance(value, _URL_PARTS):
            value = _without_password(value)
        # A namedtuple's fields are keys: Credentials(user="bob", password="hunter2").
        names = _field_names(value)
    # A (name, value) pair is a mapping's item: ASGI's scope["headers"] and httpx's
    # Headers.raw are lists of them, (b"authorization", b"Basic ..."), as is dict.items().
    pair = len(value) == 2 and _names_a_secret(value[0])
    items: list[Any] | None = None
    for index, item in enumerate(value):
        if (index == 1 and pair) or (index < len(names) and is_sensitive_key(names[index])):
            new = _redacted(item)
        else:
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


def _names_a_secret(name: object) -> bool:
    """Whether the first item of a pair is a sensitive key, as text or as (ASCII) bytes."""
    if isinstance(name, str):
        return is_sensitive_key(name)
    if isinstance(name, bytes | bytearray):
        return is_sensitive_key(bytes(name).decode("latin-1"))
    return False


def _field_names(value: object) -> tuple[str, ...]:
    names = getattr(type(value), "_fields", ())
    if isinstance(names, tuple) and all(isinstance(name, str) for name in names):
        return names
    return ()


def _without_password(value: Any) -> Any:
    """A ``urlsplit``/``urlparse`` result with the password of its netloc redacted: its parts
    hold no ``scheme://``, so the URL pattern of :func:`redact_text` cannot see it."""
    if isinstance(value, SplitResultBytes | ParseResultBytes):
        text = value.decode("utf-8", "surrogateescape")
        redacted = _without_password(text)
        return value if redacted is text else redacted.encode("utf-8", "surrogateescape")
    userinfo, at, host = value.netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not (at and colon) or password == REDACTED:
        return value
    return value._replace(netloc=f"{user}:{REDACTED}@{host}")


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass instance's fields, as orjson would encode them; one unset is left out."""
    missing = object()
    fields = {field.name: getattr(value, field.name, missing) for field in dataclass_fields(value)}
    return {name: item for name, item in fields.items() if item is not missing}


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - like traceback: a broken __str__ must not lose the record
        return f"<unprintable {type(value).__name__} object>"


def _plan(keys: tuple[Any, ...]) -> tuple[tuple[Any, int], ...]:
    """The fields of a record shape to look at and what each is, a secret's or plain; last, if
    a key holds a secret itself (``**{"password=hunter2": 1}``), the renaming of such keys."""
    plan = tuple(
        (key, _SECRET if isinstance(key, str) and is_sensitive_key(key) else _PLAIN)
        for key in keys
        if key not in _SKIP_KEYS
    )
    renames = _renames(keys)
    if len(_PLANS) >= _PLANS_SIZE:
        _PLANS.clear()
        _RENAMES.clear()
    if renames:
        # Any key of the record will do as the entry's key: the loop reads its value first.
        plan += ((next(iter(renames)), _RENAME),)
        _RENAMES[keys] = renames
    _PLANS[keys] = plan
    return plan


def _renames(keys: tuple[Any, ...]) -> dict[str, str]:
    """Each key of a record shape that holds a secret and the redacted key it becomes; one
    that would take the name of another key gets a suffix (``_2``) instead."""
    taken = set(keys)
    renames: dict[str, str] = {}
    for key in keys:
        if isinstance(key, str) and (new := redact_text(key)) is not key:
            name = new
            copy = 1
            while name in taken:
                copy += 1
                name = f"{new}_{copy}"
            taken.add(name)
            renames[key] = name
    return renames


def _rename(event_dict: EventDict, keys: tuple[Any, ...]) -> None:
    """Rename, in place and in order, the keys of ``event_dict`` that hold a secret."""
    renames = _RENAMES.get(keys)
    if renames is None:  # the table was emptied by another thread since the plan was made
        renames = _renames(keys)
    items = list(event_dict.items())
    event_dict.clear()
    event_dict.update((renames.get(key, key), value) for key, value in items)


def redact(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact the record in place; it must run last before rendering.

    Looks at every field except ``ts``, ``level``, ``service``, ``layer``, ``env`` and the
    five identifiers, including ``event``, the nested ``error`` dict (message, chain, stack)
    and a pre-formatted ``exception``/``stack`` string. A ``trace_id``/``span_id`` that is not
    W3C-shaped is moved to ``rejected_ids`` (the bound one, if any, takes its place). A
    field's name that holds a secret is redacted too, the field keeping its place:
    ``**{"password=hunter2": 2}`` becomes ``"password=[REDACTED]": "[REDACTED]"``.

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
    for key, kind in plan:
        value = event_dict[key]
        if kind:
            if kind == _SECRET:
                if not (type(value) is str and value == REDACTED):
                    event_dict[key] = REDACTED
            else:  # _RENAME, last: every value was redacted under its key as given
                _rename(event_dict, keys)
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
