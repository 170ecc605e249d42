"""The identifiers bound now, held in one ``contextvars.ContextVar``.

asyncio tasks inherit the context they were created in; threads and executors do not, which is
what ``_threads`` is for. The variable holds an immutable snapshot (a dict that
is never mutated after it is set), so reading it on every log call costs one ``ContextVar.get``
and no copy, and concurrent requests can never see each other's values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import Final

from agent_logging.schema import check_id

__all__ = ["bind", "bound", "current", "set_ids", "unbind"]

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})

_ids: ContextVar[Mapping[str, str]] = ContextVar("agent_logging_ids", default=_EMPTY)


def current() -> Mapping[str, str]:
    """The identifiers bound in this context (read-only; do not keep it across binds)."""
    return _ids.get()


def _merged(ids: Mapping[str, object]) -> dict[str, str]:
    merged = dict(_ids.get())
    for key, value in ids.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = check_id(key, value)
    return merged


def bind(**ids: object) -> None:
    """Bind identifiers for the rest of the current context.

    ``None`` unbinds a key. Every value is checked first, so on error nothing is bound.

    Raises:
        InvalidIdentifierError: a key is unknown or a value is unsafe (see ``schema.id_problem``).
    """
    _ids.set(_merged(ids))


def unbind(*keys: str) -> None:
    """Remove identifiers from the current context; unknown keys are ignored."""
    snapshot = _ids.get()
    if any(key in snapshot for key in keys):
        _ids.set({k: v for k, v in snapshot.items() if k not in keys})


@contextlib.contextmanager
def bound(**ids: object) -> Iterator[Mapping[str, str]]:
    """Bind identifiers inside a ``with`` block; the previous ones come back on exit.

    Yields:
        The identifiers bound inside the block.

    Raises:
        InvalidIdentifierError: a key is unknown or a value is unsafe; nothing is bound.
    """
    token = _ids.set(_merged(ids))
    try:
        yield _ids.get()
    finally:
        _ids.reset(token)


def set_ids(ids: Mapping[str, str]) -> Token[Mapping[str, str]]:
    """Replace the bound identifiers with already-checked ones; returns the token to reset.

    For middleware that has validated incoming values itself.
    """
    return _ids.set(dict(ids))


def reset(token: Token[Mapping[str, str]]) -> None:
    """Undo a :func:`set_ids`."""
    _ids.reset(token)
