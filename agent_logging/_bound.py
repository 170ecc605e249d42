"""The structlog bound logger that ``get_logger()`` returns, with a short way to the pipeline.

structlog's own filtering bound logger sends every call through ``_proxy_to_logger`` and
``_process_event``: a copy of the bound context, a loop over the configured processors (ours
is the one trampoline, :func:`agent_logging._config.dispatch`), then a call of the wrapped
logger's method with what the processors returned. That costs about a quarter of a whole log
call here (14.1 against 10.3 µs in an A/B run). :class:`BoundLogger` keeps structlog's
interface (``bind``, ``unbind``, ``new``, ``try_unbind``, every level method and its ``a``
async twin, ``log``, ``exception``, ``is_enabled_for``) and hands the merged fields to the
pipeline in force directly, as the trampoline would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import structlog

from agent_logging import _state
from agent_logging._types import EventDict

__all__ = ["BoundLogger"]

# structlog's level names, by method (``warn`` and ``fatal`` are aliases, ``msg`` is info).
_METHOD_LEVELS: Final = {
    "debug": "debug",
    "info": "info",
    "msg": "info",
    "warning": "warning",
    "warn": "warning",
    "error": "error",
    "critical": "critical",
    "fatal": "critical",
}
_LEVEL_NAMES: Final = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


def _emit(level: str, event_dict: EventDict) -> None:
    pipeline = _state.pipeline
    if pipeline is None:
        # Before configure() (or after shutdown): the trampoline configures from the
        # environment once, or drops the record.
        from agent_logging._config import dispatch

        dispatch(None, level, event_dict)
        return
    pipeline.handle(level, event_dict)


def _interpolate(event: Any, args: tuple[Any, ...]) -> Any:
    """``log.info("%s done", x)``, as structlog and stdlib logging format positional args."""
    if len(args) == 1 and isinstance(args[0], dict) and args[0]:
        return event % args[0]
    return event % args


def _level_method(level: str) -> Callable[..., None]:
    def method(self: BoundLogger, event: Any = None, *args: Any, **kw: Any) -> None:
        if args:
            event = _interpolate(event, args)
        if event is not None:
            kw["event"] = event
        context = self._context
        _emit(level, {**context, **kw} if context else kw)

    return method


class BoundLogger(structlog.make_filtering_bound_logger(logging.DEBUG)):  # type: ignore[misc]
    """structlog's filtering bound logger (every level; the pipeline filters by
    ``AGENT_LOGGING_LEVEL``), without structlog's processor loop."""

    debug = _level_method("debug")
    info = msg = _level_method("info")
    warning = warn = _level_method("warning")
    error = _level_method("error")
    critical = fatal = _level_method("critical")

    def exception(self, event: Any = None, *args: Any, **kw: Any) -> None:
        """``error`` with the exception being handled (``exc_info=True`` unless given)."""
        kw.setdefault("exc_info", True)
        self.error(event, *args, **kw)

    def log(self, level: int, event: Any = None, *args: Any, **kw: Any) -> None:
        """Log at a numeric stdlib level (``logging.INFO``, ...)."""
        if level < logging.DEBUG:
            return  # below every level, as structlog's filtering logger drops it
        name = _LEVEL_NAMES.get(level) or _LEVEL_NAMES[min(level // 10 * 10, logging.CRITICAL)]
        getattr(self, name)(event, *args, **kw)

    def _proxy_to_logger(self, method_name: str, event: Any = None, **event_kw: Any) -> None:
        # The async twins (``ainfo``, ...) of the base class end here, on an executor thread
        # in the caller's context.
        if event is not None:
            event_kw["event"] = event
        _emit(_METHOD_LEVELS.get(method_name, method_name), {**self._context, **event_kw})
