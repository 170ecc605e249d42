"""Local sinks: a stream (stderr/stdout/any file), a console renderer, a rotating file.

The durable sinks (spool, OTLP) live beside the shipper; these only write locally.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import IO, Any, Final

from agent_logging._types import EventDict

__all__ = ["ConsoleSink", "RotatingFileSink", "StreamSink"]


class StreamSink:
    """JSON lines to a stream: a binary or text file object."""

    needs_record: Final = False  # the line is all it writes

    def __init__(self, stream: IO[Any]) -> None:
        # Text streams (sys.stderr, StringIO) get str; a text stream with a byte buffer
        # underneath is written through the buffer, saving a decode per record.
        buffer = getattr(stream, "buffer", None)
        self._is_bytes = buffer is not None or not isinstance(stream, io.TextIOBase)
        self._binary = buffer if buffer is not None else stream
        self._stream = stream

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        if self._is_bytes:
            self._binary.write(line + b"\n")
            self._binary.flush()
        else:
            self._stream.write(line.decode("utf-8") + "\n")
            self._stream.flush()

    def close(self, timeout_s: float) -> None:
        try:
            self._binary.flush()
        except ValueError:  # already closed by its owner
            return

    def after_fork_in_child(self) -> None:
        return


class ConsoleSink:
    """Readable, coloured lines for a person at a terminal (structlog's ConsoleRenderer)."""

    def __init__(self, stream: IO[str], *, colors: bool) -> None:
        import structlog

        self._stream = stream
        self._render = structlog.dev.ConsoleRenderer(colors=colors, timestamp_key="ts")

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        shown = dict(record)
        self._stream.write(str(self._render(None, str(shown.get("level", "info")), shown)) + "\n")
        self._stream.flush()

    def close(self, timeout_s: float) -> None:
        self._stream.flush()

    def after_fork_in_child(self) -> None:
        return


class RotatingFileSink:
    """JSON lines appended to a file that a collector tails, rotated by size.

    Rotation renames ``app.jsonl`` to ``app.jsonl.1`` (shifting older ones up to ``backups``)
    and opens a fresh file, which is what the OpenTelemetry Collector's ``filelog`` receiver and
    Alloy's ``loki.source.file`` follow without loss. Each line is one ``os.write`` on an
    ``O_APPEND`` descriptor, so a killed process leaves whole lines behind.
    """

    needs_record: Final = False  # the line is all it writes

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int, backups: int) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._max_bytes = max_bytes
        self._backups = backups
        self._lock = threading.Lock()
        self._fd = self._open()
        self._size = os.fstat(self._fd).st_size

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        data = line + b"\n"
        with self._lock:
            if self._size + len(data) > self._max_bytes and self._size > 0:
                self._rotate()
            os.write(self._fd, data)
            self._size += len(data)

    def _rotate(self) -> None:
        os.close(self._fd)
        for index in range(self._backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self._backups > 0:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._fd = self._open()
        self._size = 0

    def close(self, timeout_s: float) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def after_fork_in_child(self) -> None:
        # The child appends to the same file with its own lock: O_APPEND keeps lines whole.
        self._lock = threading.Lock()
