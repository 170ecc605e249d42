"""Pieces the benchmarks share: a test Loki in its own process, RSS sampling, machine notes.

:class:`LokiProcess` runs ``tests.lokisim.LokiServer`` in a child process (so the server's
CPU does not share the measured process's GIL; it still shares the machine's cores) and
drives it over the child's stdin/stdout, one command per line::

    count                  -> "count N"
    wait N TIMEOUT_S       -> "reached T N" or "timeout T N"  (T: time.monotonic() in the child)
    down / up              -> "ok"                            (LokiServer.go_down / come_up)

``time.monotonic()`` is CLOCK_MONOTONIC on Linux, one clock for every process of the
machine, so the child's ``T`` can be compared with the parent's own readings.

``LokiProcess(sink=True)`` runs a counting sink instead: it accepts any protobuf push with a
204 and only counts the entries (snappy + the protobuf runtime, a few µs per entry), so a
benchmark can see what the client sustains when the server is not the bottleneck.

Run the server side alone with ``python -m benchmarks._common [--sink]`` (it prints
``listening on URL`` first, like ``python -m tests.lokisim``).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

__all__ = [
    "IDS",
    "REPO_ROOT",
    "JsonFormatter",
    "LokiProcess",
    "RssSampler",
    "closed_port_url",
    "machine_note",
    "rss_kib",
]

#: The five identifiers every log-call benchmark binds.
IDS: Final = {
    "node_id": "n-17",
    "node_instance_id": "ni-3",
    "correlation_id": "5f0c6f5e-8f8e-4a3b-9a53-1f2d3c4b5a69",
    "allocation_id": "a-9",
    "workflow_id": "wf-2",
}


class JsonFormatter(logging.Formatter):
    """The stdlib baselines' JSON line: the fields agent_logging renders for the benchmarks'
    log call (``ts``, ``level``, ``event``, ``static`` labels, ``logger``, the identifiers,
    ``task`` and ``attempt``), with ``json.dumps``."""

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._static = dict(static or {})

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": self.formatTime(record),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            **self._static,
            "logger": record.name,
        }
        fields.update(
            {k: v for k, v in vars(record).items() if k in IDS or k in ("task", "attempt")}
        )
        return json.dumps(fields)


#: The repository root: children run from here so ``tests.lokisim`` is importable.
REPO_ROOT: Final = Path(__file__).resolve().parent.parent


class LokiProcess:
    """The test Loki server in a child process, controlled line by line.

    Example::

        with LokiProcess() as loki:
            push(loki.url)
            reached_at = loki.wait_for(1000, timeout_s=30.0)
    """

    def __init__(self, *, sink: bool = False) -> None:
        self._sink = sink
        self._process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> LokiProcess:
        """Start the child and wait for its ``listening on URL`` line.

        Returns:
            The started process handle, for chaining.

        Raises:
            RuntimeError: the child did not come up.
        """
        self._process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._common", *(["--sink"] if self._sink else [])],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        line = self._stdout.readline().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the Loki test server did not start: {line!r}")
        self.url = line.removeprefix("listening on ")
        return self

    @property
    def _stdout(self) -> IO[str]:
        if self._process is None or self._process.stdout is None:
            raise RuntimeError("the Loki test server is not running")
        return self._process.stdout

    def _ask(self, command: str) -> list[str]:
        process = self._process
        if process is None or process.stdin is None:
            raise RuntimeError("the Loki test server is not running")
        process.stdin.write(command + "\n")
        process.stdin.flush()
        return self._stdout.readline().split()

    def count(self) -> int:
        """How many entries the server has stored."""
        return int(self._ask("count")[1])

    def wait_for(self, n: int, timeout_s: float) -> float | None:
        """Wait until the server holds ``n`` entries.

        Returns:
            The child's ``time.monotonic()`` when it saw the count reached, or None on timeout.
        """
        word, when, _ = self._ask(f"wait {n} {timeout_s}")
        return float(when) if word == "reached" else None

    def go_down(self) -> None:
        """Refuse connections (``LokiServer.go_down``); stored entries are kept."""
        self._ask("down")

    def come_up(self) -> None:
        """Listen again on the same port."""
        self._ask("up")

    def stop(self) -> None:
        """End the child (closing its stdin ends it); safe to call twice."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> LokiProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _CountingSink:
    """A push endpoint that stores nothing: 204 for every push, entries counted."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import cramjam

        from tests.lokisim import push_request_class

        request_class = push_request_class()
        self._count = 0
        self._changed = threading.Condition()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = request_class.FromString(bytes(cramjam.snappy.decompress_raw(body)))
                sink.add(sum(len(stream.entries) for stream in request.streams))
                self.send_response(204)
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def add(self, n: int) -> None:
        with self._changed:
            self._count += n
            self._changed.notify_all()

    def count(self) -> int:
        return self._count

    def wait_for_entries(self, n: int, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= n, timeout_s)

    def stop(self) -> None:
        self._httpd.shutdown()


def _serve(argv: list[str]) -> int:
    """The child side of :class:`LokiProcess`: serve and answer commands until stdin ends."""
    from tests.lokisim import Limits, LokiServer

    # The test server's throughput is measured, not a stock Loki's tenant: its ingestion rate
    # limit (4 MiB/s, like Loki's default) is lifted. Streams are still sharded.
    unlimited = Limits(ingestion_rate_mb=1e6, ingestion_burst_size_mb=1e6)
    server: Any = _CountingSink() if "--sink" in argv else LokiServer(limits=unlimited).start()
    # As ``python -m tests.lokisim`` does: what start-up allocated never needs a GC pass.
    gc.freeze()
    print(f"listening on {server.url}", flush=True)
    try:
        for line in sys.stdin:
            word, *args = line.split()
            if word == "count":
                print(f"count {server.count()}", flush=True)
            elif word == "wait":
                reached = server.wait_for_entries(int(args[0]), float(args[1]))
                # Read the clock first: the answer's own latency is not the server's.
                now = time.monotonic()
                print(f"{'reached' if reached else 'timeout'} {now} {server.count()}", flush=True)
            elif word == "down" and hasattr(server, "go_down"):
                server.go_down()
                print("ok", flush=True)
            elif word == "up" and hasattr(server, "come_up"):
                server.come_up()
                print("ok", flush=True)
            else:
                print(f"error unknown command {word!r}", flush=True)
    finally:
        server.stop()
    return 0


def rss_kib() -> int:
    """The resident set size of this process now, in KiB (``VmRSS`` of /proc/self/status)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    # Not Linux: the peak so far is the best there is (KiB on Linux, bytes on macOS).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class RssSampler:
    """Samples this process's RSS from a daemon thread; keeps the first, peak and last.

    Args:
        interval_s: time between samples (a sample costs some tens of µs of GIL time).
    """

    def __init__(self, interval_s: float = 0.05) -> None:
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.start_kib = self.peak_kib = self.end_kib = rss_kib()
        self.samples = 0

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def _sample(self) -> None:
        now = rss_kib()
        self.peak_kib = max(self.peak_kib, now)
        self.end_kib = now
        self.samples += 1

    def figures(self) -> dict[str, int]:
        """``start_kib``, ``peak_kib``, ``end_kib`` and ``samples``, for a report."""
        return {
            "start_kib": self.start_kib,
            "peak_kib": self.peak_kib,
            "end_kib": self.end_kib,
            "samples": self.samples,
        }

    def __enter__(self) -> RssSampler:
        self.start_kib = self.peak_kib = self.end_kib = rss_kib()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def closed_port_url() -> str:
    """``http://127.0.0.1:PORT`` for a port nothing listens on (bound, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def cpu_ticks() -> tuple[int, int] | None:
    """The machine's CPU time so far, in clock ticks: (stolen by the hypervisor, all), from
    ``/proc/stat``; None where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


def steal_share(since: tuple[int, int] | None) -> float | None:
    """The share of the CPU time since ``since`` (a :func:`cpu_ticks`) that the hypervisor
    gave to other guests: on a shared host, what makes one run slower than the next."""
    now = cpu_ticks()
    if since is None or now is None or now[1] <= since[1]:
        return None
    return (now[0] - since[0]) / (now[1] - since[1])


def machine_note() -> str:
    """CPU model, core count, Python and the load average, for the results file."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({model}), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.release()}, "
        f"load average {load} at start"
    )


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
