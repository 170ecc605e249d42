"""Cost of one log call: agent_logging against bare structlog and stdlib logging.

All three in the same run, same machine state, each writing JSON lines to /dev/null, with five
identifiers bound and an OpenTelemetry span active:

- ``agent_logging``: ``configure()`` + ``get_logger()``; identifiers via ``bind``; the record
  also gets the span's ids, redaction, call-site checks, nanosecond ``ts``.
- ``structlog``: structlog's own recipe: ``merge_contextvars``, ``add_log_level``,
  ``TimeStamper(fmt="iso", utc=True)``, ``JSONRenderer()``, ``WriteLogger`` on the file, cached
  ``make_filtering_bound_logger``; identifiers via ``bind_contextvars``.
- ``stdlib``: a ``logging.Logger`` with a ``StreamHandler`` and a JSON formatter (``json.dumps``
  of the record's fields and the identifiers from ``extra=``).

Run: ``python -m benchmarks.log_call [--calls N] [--repeats R]``. Prints µs per call (best of
the repeats, to shed scheduler noise) and the ratios; the goal is ratio ≤ 1.0 against structlog.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import structlog
from opentelemetry.sdk.trace import TracerProvider

import agent_logging
from benchmarks._common import IDS, JsonFormatter


def _ours(sink: Any) -> Callable[[int], None]:
    agent_logging.configure(service="node-agent", layer="node", env="prod", output=sink)
    agent_logging.bind(**IDS)
    log = agent_logging.get_logger("bench")

    def run(n: int) -> None:
        for i in range(n):
            log.info("task claimed", task="reimage", attempt=i)

    return run


def _structlog(sink: Any) -> Callable[[int], None]:
    structlog.contextvars.bind_contextvars(**IDS)
    log = structlog.wrap_logger(
        structlog.WriteLogger(sink),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )

    def run(n: int) -> None:
        for i in range(n):
            log.info("task claimed", task="reimage", attempt=i)

    return run


def _stdlib(sink: Any) -> Callable[[int], None]:
    logger = logging.getLogger("bench.stdlib")
    logger.propagate = False
    handler = logging.StreamHandler(sink)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def run(n: int) -> None:
        for i in range(n):
            logger.info("task claimed", extra={**IDS, "task": "reimage", "attempt": i})

    return run


def _time(run: Callable[[int], None], calls: int, repeats: int) -> float:
    run(min(calls, 2000))  # warm caches
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(calls)
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tracer = TracerProvider().get_tracer("bench")
    results: dict[str, float] = {}
    with (
        open(os.devnull, "wb") as binary_sink,
        open(os.devnull, "w") as text_sink,
        tracer.start_as_current_span("task"),
    ):
        runs = {
            "agent_logging": _ours(binary_sink),
            "structlog (JSONRenderer)": _structlog(text_sink),
            "stdlib (JSON formatter)": _stdlib(text_sink),
        }
        # Interleave the repeats so drift in machine speed hits all three alike.
        for _ in range(args.repeats):
            for name, run in runs.items():
                cost = _time(run, args.calls, 1)
                results[name] = min(results.get(name, float("inf")), cost)
    agent_logging.shutdown()
    ours = results["agent_logging"]
    print(f"log call cost, {args.calls} calls x {args.repeats} repeats (best), 5 ids + active span")
    for name, cost in results.items():
        print(f"  {name:<26} {cost:6.2f} µs/call   agent_logging/this = {ours / cost:.2f}")


if __name__ == "__main__":
    main()
