"""Records exported over OTLP/HTTP to an OpenTelemetry Collector, beside the Loki path.

Each record becomes an OpenTelemetry log record: the body is the ``event`` message, the
timestamp the record's own ``ts``, severity from ``level``, and every other field an attribute
(identifiers included, under the same names, so the collector can lift them into Loki
structured metadata). The SDK's ``BatchLogRecordProcessor`` does the batching on its own thread
with a bounded queue: ``write`` never blocks on the network. Needs the ``otel`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource

from agent_logging._types import EventDict

if TYPE_CHECKING:
    from agent_logging._settings import Settings

__all__ = ["OtlpSink"]

_SEVERITY: Final = {
    "debug": SeverityNumber.DEBUG,
    "info": SeverityNumber.INFO,
    "warning": SeverityNumber.WARN,
    "error": SeverityNumber.ERROR,
    "critical": SeverityNumber.FATAL,
}
_SKIP: Final = frozenset({"ts", "level", "event"})


def _attribute(value: Any) -> Any:
    if isinstance(value, str | bool | int | float):
        return value
    import orjson

    return orjson.dumps(value, default=str).decode()


class OtlpSink:
    """A pipeline sink exporting records as OpenTelemetry logs."""

    def __init__(self, settings: Settings, exporter: LogRecordExporter | None = None) -> None:
        resource = Resource.create(
            {
                "service.name": settings.service,
                "deployment.environment.name": settings.env,
                "layer": settings.layer,
            }
        )
        self._provider = LoggerProvider(resource=resource)
        self._provider.add_log_record_processor(
            BatchLogRecordProcessor(exporter or OTLPLogExporter(endpoint=settings.otlp_endpoint))
        )
        self._logger = self._provider.get_logger("agent_logging")

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        level = str(record.get("level", "info"))
        self._logger.emit(
            LogRecord(
                timestamp=ts_ns,
                severity_text=level,
                severity_number=_SEVERITY.get(level, SeverityNumber.INFO),
                body=str(record.get("event", "")),
                attributes={k: _attribute(v) for k, v in record.items() if k not in _SKIP},
            )
        )

    def close(self, timeout_s: float) -> None:
        self._provider.force_flush(int(timeout_s * 1000))
        self._provider.shutdown()

    def after_fork_in_child(self) -> None:
        return  # the SDK's batch processor re-creates its worker thread after fork itself
