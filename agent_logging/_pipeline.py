"""One pipeline for structlog and stdlib records: stamp, enrich, redact, render, fan out.

The pipeline is the only thing the hot path touches. For each record it reads the clock once
(``ts`` is stamped here and never again), merges the static fields and the identifiers bound
in this context, runs the processors, renders one JSON line and hands it to each sink. It
never raises: a failure is counted and reported once on the internal logger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from agent_logging import _context, _otel, _state
from agent_logging._processors import add_error, add_span_ids, check_call_site_ids
from agent_logging._redact import redact
from agent_logging._render import render, rfc3339_ns
from agent_logging._types import EventDict

__all__ = ["LEVELS", "Pipeline", "Processor", "Sink"]

Processor = Callable[[Any, str, EventDict], EventDict]

#: structlog method names and stdlib level names to (number, rendered name).
LEVELS: Final[Mapping[str, tuple[int, str]]] = {
    "debug": (10, "debug"),
    "info": (20, "info"),
    "msg": (20, "info"),
    "warning": (30, "warning"),
    "warn": (30, "warning"),
    "error": (40, "error"),
    "exception": (40, "error"),
    "critical": (50, "critical"),
    "fatal": (50, "critical"),
}


class Sink(Protocol):
    """Where rendered records go. ``write`` is on the hot path and must not block on I/O
    other than a local write."""

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None: ...

    def close(self, timeout_s: float) -> None: ...

    def after_fork_in_child(self) -> None: ...


class Pipeline:
    """Stamps, enriches, redacts and renders records, then hands them to the sinks.

    Args:
        static: fields every record carries (``service``, ``layer``, ``env``).
        min_level: records below this stdlib level number are skipped.
        sinks: where each rendered line goes, in order.
        processors: extra processors run after the built-in ones and before redaction.
        base_ids: process-wide identifiers (from ``configure(ids=...)`` or inherited from a
            parent process); identifiers bound in a context win over them.
    """

    def __init__(
        self,
        *,
        static: Mapping[str, str],
        min_level: int,
        sinks: Sequence[Sink],
        processors: Sequence[Processor] = (),
        base_ids: Mapping[str, str] | None = None,
    ) -> None:
        self.static: Final = dict(static)
        self.base_ids: Final = dict(base_ids or {})
        self.min_level = min_level
        self.sinks: Final = tuple(sinks)
        chain: list[Processor] = []
        if _otel.AVAILABLE:
            chain.append(add_span_ids)
        chain.append(add_error)
        chain.extend(processors)
        chain.append(redact)  # last: nothing added after it escapes redaction
        self._chain: Final = tuple(chain)
        self._lock = threading.Lock()
        self.records = 0
        self.failures = 0

    def handle(self, method_name: str, event_dict: EventDict, ts_ns: int | None = None) -> None:
        """Process one record; never raises.

        Args:
            method_name: the structlog method or lower-cased stdlib level name.
            event_dict: the call's fields; ``event`` is the message. Consumed.
            ts_ns: creation time if already known, else now.
        """
        try:
            levelno, level = LEVELS.get(method_name, (20, method_name))
            if levelno < self.min_level:
                return
            if ts_ns is None:
                ts_ns = time.time_ns()
            check_call_site_ids(None, method_name, event_dict)
            record: EventDict = {
                "ts": rfc3339_ns(ts_ns),
                "level": level,
                "event": event_dict.pop("event", None),
                **self.static,
                **self.base_ids,
                **_context.current(),
                **event_dict,
            }
            for processor in self._chain:
                record = processor(None, method_name, record)
            line = render(record)
        except Exception as exc:  # noqa: BLE001 - logging must never raise into the service
            self._fail("process", exc)
            return
        self.records += 1
        for sink in self.sinks:
            try:
                sink.write(ts_ns, line, record)
            except Exception as exc:  # noqa: BLE001 - one broken sink must not starve the others
                self._fail(type(sink).__name__, exc)

    def _fail(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
        _state.report_once(
            f"pipeline:{where}:{type(exc).__name__}",
            f"a log record could not be {'processed' if where == 'process' else 'written'} "
            f"({where}): {type(exc).__name__}: {exc}; further failures of this kind are "
            "counted in health() without being reported again",
        )

    def health(self) -> dict[str, Any]:
        """Counters of the pipeline and of every sink that keeps some (the durable path)."""
        report: dict[str, Any] = {
            "configured": True,
            "records": self.records,
            "failures": self.failures,
        }
        for sink in self.sinks:
            sink_health = getattr(sink, "health", None)
            if sink_health is not None:
                report.update(sink_health())
        return report

    def close(self, timeout_s: float) -> None:
        """Close every sink within ``timeout_s`` in total."""
        deadline = time.monotonic() + timeout_s
        for sink in self.sinks:
            try:
                sink.close(max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - shutdown continues with the next sink
                self._fail(type(sink).__name__, exc)

    def after_fork_in_child(self) -> None:
        """Drop what the parent process owns (threads, locks, spool) in a forked child."""
        self._lock = threading.Lock()
        for sink in self.sinks:
            sink.after_fork_in_child()
