"""The global state department: the one module that holds process-wide mutable state.

Everything else is pure or owns only its instance. Here live the active pipeline (swapped
atomically by ``configure``), the owner table it classifies exceptions with, and the internal
reporter: a logger named ``agent_logging.internal`` that does not propagate, so a failure
inside logging is said once on stderr and can never loop back into the pipeline it is about.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent_logging._types import EventDict
from agent_logging.owner import DEFAULT_RULES, OwnerRule

__all__ = [
    "ActivePipeline",
    "configure_lock",
    "internal_logger",
    "owner_rules",
    "pipeline",
    "report_once",
    "reset_reports",
    "shut_down",
    "unconfigured",
]


class ActivePipeline(Protocol):
    """What the library asks of the pipeline in force (``pipeline._pipeline.Pipeline``): a
    protocol here, so that this module, which every other imports, imports none of them."""

    @property
    def base_ids(self) -> Mapping[str, str]: ...

    @property
    def sinks(self) -> tuple[Any, ...]: ...

    def handle(self, method_name: str, event_dict: EventDict, ts_ns: int | None = None) -> None: ...

    def count_failure(self) -> None: ...

    def health(self) -> dict[str, Any]: ...

    def flush(self, timeout_s: float) -> bool: ...

    def close(self, timeout_s: float) -> None: ...

    def after_fork_in_child(self) -> None: ...


pipeline: ActivePipeline | None = None


def _dropped(method_name: str, event_dict: EventDict) -> None:
    return None


#: What a record does while no pipeline is in force: ``_config`` sets it to configure from
#: the environment once (or drop the record after ``shutdown()``). A hook, so that the
#: pipeline's modules never import the wiring above them.
unconfigured: Callable[[str, EventDict], None] = _dropped

#: The owner table records' exceptions are classified with: an operator's rules file
#: (``AGENT_LOGGING_OWNER_RULES``) ahead of the built-in table. Set by ``configure()``, put
#: back by ``shutdown()``; replaced whole, so a record's thread reads one table or the other.
owner_rules: tuple[OwnerRule, ...] = DEFAULT_RULES

#: True after ``shutdown()``: records are dropped rather than auto-configuring again.
shut_down = False

#: Serialises ``configure()`` with the auto-configuration of a first record.
configure_lock = threading.RLock()


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (test runners replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


internal_logger = logging.getLogger("agent_logging.internal")
internal_logger.propagate = False
if not internal_logger.handlers:
    _handler = _StderrHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("agent_logging: %(levelname)s: %(message)s"))
    internal_logger.addHandler(_handler)
    internal_logger.setLevel(logging.WARNING)

_reported: set[str] = set()
_reported_lock = threading.Lock()


def report_once(key: str, message: str) -> None:
    """Say ``message`` on the internal logger the first time ``key`` is reported."""
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    try:
        internal_logger.warning("%s", message)
    except Exception:  # noqa: BLE001 - the reporter of last resort must not raise either
        return


def reset_reports(key_prefix: str = "") -> None:
    """Forget reported keys (all, or those starting with ``key_prefix``) so they can recur."""
    with _reported_lock:
        for key in [k for k in _reported if k.startswith(key_prefix)]:
            _reported.discard(key)
