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
from types import MappingProxyType
from typing import Any, Final, Protocol, cast

from agent_logging import _state
from agent_logging._types import EventDict
from agent_logging.context import _context, _otel
from agent_logging.loki._record_encoder import STREAM_KEY_FIELDS, stream_key
from agent_logging.pipeline._direct import NOT_PLAIN, DirectLines, Envelope
from agent_logging.pipeline._processors import (
    add_error,
    add_span_ids,
    check_call_site_ids,
    check_late_trace_ids,
)
from agent_logging.pipeline._render import render
from agent_logging.redaction._redact import redact
from agent_logging.schema import CONTEXT_KEYS, rfc3339_ns

__all__ = ["ENVELOPE_FIELDS", "LEVELS", "Pipeline", "Processor", "Sink"]

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


# Call-site fields that send a record through a processor; nearly every call has none, so the
# hot path tests for them in one C-level set operation instead of calling the processor.
# Call-site fields checked before the record is built: the identifiers and the trace ids.
_ID_FIELDS: Final = frozenset(CONTEXT_KEYS)
_ERROR_FIELDS: Final = frozenset({"exc_info", "owner_layer"})
_KEY_FIELDS: Final = frozenset(STREAM_KEY_FIELDS)
#: The record's envelope: when it was, how severe, and who said it (the stream's labels). The
#: pipeline and the configuration set these; a call-site field of the same name (``service=``
#: for the service a call concerns, ``env=`` of a job) is kept as ``<name>_field`` rather
#: than moving the record to another stream or giving it another time or level.
ENVELOPE_FIELDS: Final = frozenset({"ts", "level", "service", "layer", "env"})


# What the sinks get as the record when the line was rendered without one (no sink reads it).
_NO_RECORD: Final = cast(EventDict, MappingProxyType({}))


def _keep_envelope(fields: EventDict) -> None:
    """Rename call-site fields named like the envelope to ``<name>_field`` (in place)."""
    for key in ENVELOPE_FIELDS.intersection(fields):
        fields[f"{key}_field"] = fields.pop(key)


class Sink(Protocol):
    """Where rendered records go. ``write`` is on the hot path and must not block on I/O
    other than a local write."""

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None: ...

    # Optional: ``write_keyed(ts_ns, line, record, key)``, the same with the record's stream
    # key (``loki._record_encoder.stream_key``) worked out by the pipeline, which can do it cheaply.
    # Optional: ``needs_record = False``, for a sink that reads only the line (and the key):
    # when every sink says so, plain records are rendered without building their dict
    # (``_direct``), and such a sink gets an empty read-only mapping as ``record``.

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
        # Both spread into every record, in this order: merged once here (a key of both keeps
        # its place and takes the identifier's value, as two spreads would do).
        self._fixed: Final = {**self.static, **self.base_ids}
        self.min_level = min_level
        self.sinks: Final = tuple(sinks)
        # add_span_ids, then add_error (both applied inline by handle(), which calls each
        # only when its case applies), then the user's processors, then redaction.
        self._spans = _otel.AVAILABLE
        chain: list[Processor] = list(processors)
        if processors:  # a trace id they put in the record is checked as a call site's
            chain.append(check_late_trace_ids)
        chain.append(redact)  # last: nothing added after it escapes redaction
        self._chain: Final = tuple(chain)
        self._lock = threading.Lock()
        self.records = 0
        self.failures = 0
        # Plain records' lines from cached pieces, when no user processor needs the record.
        self._direct: Final = (
            DirectLines(self._fixed, spans=self._spans)
            if not processors and NOT_PLAIN.issuperset(self._fixed)
            else None
        )
        # For the sinks tuple they were worked out for (see _plan_sinks): which sinks take
        # the stream key, and the tuple again if none of them needs the record as a dict.
        self._keyed_for: tuple[Sink, ...] | None = None
        self._keyed: tuple[bool, ...] = ()
        self._direct_for: tuple[Sink, ...] | None = None
        self._plan_sinks()
        # The last record's stream key and what it depended on (see _stream_key).
        self._last_key: tuple[object, ...] = (None, None, None, None, 0)

    def _plan_sinks(self) -> None:
        sinks = self.sinks
        self._keyed = tuple(hasattr(sink, "write_keyed") for sink in sinks)
        lines_only = not any(getattr(sink, "needs_record", True) for sink in sinks)
        self._direct_for = sinks if lines_only and self._direct is not None else None
        self._keyed_for = sinks

    def handle(self, method_name: str, event_dict: EventDict, ts_ns: int | None = None) -> None:
        """Process one record; never raises.

        Args:
            method_name: the structlog method or lower-cased stdlib level name.
            event_dict: the call's fields; ``event`` is the message. Consumed.
            ts_ns: creation time if already known, else now.
        """
        # The hot path of every log call: each step is skipped unless its case applies.
        try:
            levelno, level = LEVELS.get(method_name) or (20, method_name)
            if levelno < self.min_level:
                return
            if ts_ns is None:
                ts_ns = time.time_ns()
            if self._direct_for is self.sinks and NOT_PLAIN.isdisjoint(event_dict):
                done = self._direct.line(level, ts_ns, event_dict)  # type: ignore[union-attr]
                if done is not None:
                    self.records += 1
                    self._deliver(ts_ns, done[0], _NO_RECORD, event_dict, done[1])
                    return
            if not _ID_FIELDS.isdisjoint(event_dict):
                check_call_site_ids(None, method_name, event_dict)
            if not ENVELOPE_FIELDS.isdisjoint(event_dict):
                _keep_envelope(event_dict)
            record: EventDict = {
                "ts": rfc3339_ns(ts_ns),
                "level": level,
                "event": event_dict.pop("event", None),
                **self._fixed,
                **_context.current(),
                **event_dict,
            }
            if self._spans:
                record = add_span_ids(None, method_name, record)
            if not _ERROR_FIELDS.isdisjoint(event_dict):
                record = add_error(None, method_name, record)
            for processor in self._chain:
                record = processor(None, method_name, record)
            line = render(record)
        except Exception as exc:  # noqa: BLE001 - logging must never raise into the service
            self._fail("process", exc)
            return
        self.records += 1
        self._deliver(ts_ns, line, record, event_dict, None)

    def _deliver(
        self,
        ts_ns: int,
        line: bytes,
        record: EventDict,
        call_fields: EventDict,
        envelope: Envelope | None,
    ) -> None:
        """Hand a rendered record to every sink. Its stream key, if a sink takes it, is the
        direct path's ``envelope.key()``, else worked out from ``record``."""
        sinks = self.sinks
        if sinks is not self._keyed_for:
            self._plan_sinks()
        key = -1
        for sink, keyed in zip(sinks, self._keyed, strict=True):
            try:
                if keyed:
                    if key < 0:
                        key = (
                            envelope.key()
                            if envelope is not None
                            else self._stream_key(record, call_fields)
                        )
                    sink.write_keyed(ts_ns, line, record, key)  # type: ignore[attr-defined]
                else:
                    sink.write(ts_ns, line, record)
            except Exception as exc:  # noqa: BLE001 - one broken sink must not starve the others
                self._fail(type(sink).__name__, exc)

    def _stream_key(self, record: EventDict, call_fields: EventDict) -> int:
        """``stream_key(record)``, from the last record's when it must be the same.

        The key depends on the values of ``STREAM_KEY_FIELDS`` only. Without call-site fields
        among them and without user processors (which could change anything), those values
        come from the fixed fields, the bound identifiers (an immutable mapping, replaced on
        every bind), the level, and the span ids: when the mapping is the same object, the
        level the same and the trace and span ids the same objects as last time, so is the
        key. Four identity checks instead of eleven lookups, a tuple and its hash.
        """
        if len(self._chain) > 1 or not _KEY_FIELDS.isdisjoint(call_fields):
            return stream_key(record)
        bound = _context.current()
        trace_id = record.get("trace_id")
        span_id = record.get("span_id")
        level = record.get("level")
        last = self._last_key
        if bound is last[0] and level is last[1] and trace_id is last[2] and span_id is last[3]:
            return last[4]  # type: ignore[return-value]
        key = stream_key(record)
        self._last_key = (bound, level, trace_id, span_id, key)  # one tuple: thread-safe
        return key

    def count_failure(self) -> None:
        """Count one failure that was caught and reported elsewhere (a message its arguments
        could not format), with the pipeline's own in ``health()["failures"]``."""
        with self._lock:
            self.failures += 1

    def _fail(self, where: str, exc: BaseException) -> None:
        self.count_failure()
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

    def flush(self, timeout_s: float) -> bool:
        """Ship what every shipping sink holds, within ``timeout_s`` in total.

        Returns:
            True when every such sink emptied in time (or there is none).
        """
        deadline = time.monotonic() + timeout_s
        emptied = True
        for sink in self.sinks:
            flush = getattr(sink, "flush", None)
            if flush is None:
                continue
            try:
                emptied = bool(flush(max(0.0, deadline - time.monotonic()))) and emptied
            except Exception as exc:  # noqa: BLE001 - flushing continues with the next sink
                self._fail(type(sink).__name__, exc)
                emptied = False
        return emptied

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
