"""The bridge from stdlib ``logging`` into the pipeline.

Third-party libraries log with ``logging.getLogger(__name__)``; their records must carry the
same fields as ours. One handler on the root logger turns each ``LogRecord`` into an event dict
(message, logger name, ``extra=`` fields, exception) and hands it to the same pipeline.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from agent_logging import _state

__all__ = ["StdlibBridge"]

#: Set on a record once a bridge has handed it to the pipeline: a record reaching a second
#: bridge (a ``compat.LokiHandler`` on a logger that propagates to the root logger's capture
#: handler) is the same record, and is not shipped twice.
_HANDLED: Final = "_agent_logging_handled"
#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRS: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()
    | {"message", "asctime", _HANDLED}
    # uvicorn's ``extra=``: its message again, with terminal colour escapes (ANSI) in it
    | {"color_message"}
)


#: Threads the library (or the OpenTelemetry SDK it drives) ships records from.
_OWN_THREADS: Final = ("agent-logging", "OtelBatch")
#: The HTTP stacks those threads use: what they log about our own shipping would need shipping
#: again, a loop (at debug level: one record per request, for ever).
_HTTP_LOGGERS: Final = frozenset({"httpx", "httpcore", "urllib3", "requests", "opentelemetry"})


def _ours(record: logging.LogRecord) -> bool:
    return record.name.partition(".")[0] in _HTTP_LOGGERS and (
        threading.current_thread().name.startswith(_OWN_THREADS)
    )


class StdlibBridge(logging.Handler):
    """A handler that sends stdlib records through the active pipeline."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == _state.internal_logger.name or _ours(record):
            return
        pipeline = _state.pipeline
        if pipeline is None or getattr(record, _HANDLED, False):
            return
        setattr(record, _HANDLED, True)
        try:
            event_dict = {
                key: value for key, value in vars(record).items() if key not in _RECORD_ATTRS
            }
            event_dict["event"] = record.getMessage()
            event_dict["logger"] = record.name
            if record.exc_info and record.exc_info[1] is not None:
                event_dict["exc_info"] = record.exc_info[1]
            if record.stack_info:
                event_dict["stack"] = record.stack_info
        except Exception:  # noqa: BLE001 - a bad %-format in a library must not raise
            event_dict = {
                "event": f"unformattable log message: {record.msg!r} % {record.args!r}",
                "logger": record.name,
            }
        # LogRecord.created is a float; the bridge runs right after creation, so the record
        # is stamped by the pipeline's own nanosecond clock instead.
        pipeline.handle(record.levelname.lower(), event_dict)
