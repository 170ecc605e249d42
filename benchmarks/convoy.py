"""Log call latency beside a CPU-bound thread (CPython's GIL convoy).

CPython hands the GIL to a waiting thread whenever the holder makes a blocking system call,
and the caller gets it back only when that thread blocks in turn or its switch interval
(``sys.getswitchinterval()``, 5 ms) runs out. A log call that makes one ``write`` system call
per record therefore waits up to 5 ms on every call as soon as another thread of the service
is busy in Python. agent_logging's durable path copies the framed record into a shared
mapping of the spool's segment instead (``agent_logging.spool._spool``): no system call, so the GIL
stays with the caller.

Each scenario runs in a fresh process: one thread spinning in pure Python (a loop of additions
and small allocations) beside the logging thread, or no such thread (the reference). The
logging thread makes ``--calls`` calls of ``log.info("task claimed", task=..., attempt=i)``
with five identifiers bound and times each:

- ``agent_logging, durable spool``: ``configure(loki_url=..., spool_dir=...)`` with Loki down
  (a closed port: the shipper only retries, at backoff pace, and ships nothing);
- ``agent_logging, file_path=...``: its rotating JSON-lines file sink (one ``os.write`` per
  record, so that collectors tailing the file never see half a line);
- ``stdlib FileHandler``: ``logging.FileHandler`` with a JSON formatter (a ``write`` and a
  ``flush`` per record), what a service logging to a file does without us.

Run: ``python -m benchmarks.convoy [--calls N]``. Prints mean, p50 and p99 µs per call, beside
the busy thread and alone, and each scenario's mean against the durable spool's.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from benchmarks._common import IDS, REPO_ROOT, JsonFormatter, closed_port_url, machine_note

SCENARIOS: Final = ("durable", "file", "stdlib")
LABELS: Final = {
    "durable": "agent_logging, durable spool",
    "file": "agent_logging, file_path=...",
    "stdlib": "stdlib FileHandler (JSON)",
}


def _spin(stop: threading.Event) -> None:
    """A thread busy in Python: additions and short-lived allocations, never blocking."""
    total = 0
    while not stop.is_set():
        for i in range(1000):
            total += i
        _ = [total] * 64


def _logger(scenario: str, directory: str) -> Callable[[int], None]:
    if scenario == "stdlib":
        handler = logging.FileHandler(os.path.join(directory, "stdlib.log"))
        handler.setFormatter(JsonFormatter())
        logger = logging.getLogger("bench.convoy")
        logger.propagate = False
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

        def call(i: int) -> None:
            logger.info("task claimed", extra={**IDS, "task": "reimage", "attempt": i})

        return call
    import agent_logging

    options: dict[str, Any] = {"output": "none"}
    if scenario == "durable":
        options.update(loki_url=closed_port_url(), spool_dir=os.path.join(directory, "spool"))
    else:
        options.update(file_path=os.path.join(directory, "records.ndjson"))
    agent_logging.configure(
        "bench-svc", "node", "bench", capture_stdlib=False, health_interval_s=0, **options
    )
    agent_logging.bind(**IDS)
    info = agent_logging.get_logger("bench").info

    def call_ours(i: int) -> None:
        info("task claimed", task="reimage", attempt=i)

    return call_ours


def child(scenario: str, calls: int, busy: bool) -> None:
    """Time ``calls`` log calls, one by one; print their statistics as one JSON line."""
    directory = tempfile.mkdtemp(prefix="bench-convoy-")
    stop = threading.Event()
    try:
        call = _logger(scenario, directory)
        for i in range(200):  # caches filled before the clock starts
            call(i)
        if busy:
            threading.Thread(target=_spin, args=(stop,), daemon=True).start()
            time.sleep(0.05)  # the spinning thread is running
        clock = time.perf_counter
        took: list[float] = []
        for i in range(calls):
            started = clock()
            call(i)
            took.append(clock() - started)
    finally:
        stop.set()
        shutil.rmtree(directory, ignore_errors=True)
    took_us = sorted(t * 1e6 for t in took)
    print(
        json.dumps(
            {
                "mean_us": statistics.fmean(took_us),
                "p50_us": took_us[len(took_us) // 2],
                "p99_us": took_us[min(len(took_us) - 1, int(len(took_us) * 0.99))],
            }
        ),
        flush=True,
    )
    os._exit(0)  # no shutdown: the durable path would retry the closed port until its deadline


def _run(scenario: str, calls: int, busy: bool) -> dict[str, float]:
    command = [sys.executable, "-m", "benchmarks.convoy", "--child", scenario]
    command += ["--calls", str(calls)] + (["--busy"] if busy else [])
    output = subprocess.run(
        command, cwd=REPO_ROOT, check=True, capture_output=True, text=True, timeout=600
    ).stdout
    result: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="log calls per scenario")
    parser.add_argument("--child", choices=SCENARIOS, help=argparse.SUPPRESS)
    parser.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.busy)
        return
    print(machine_note())
    print(f"log call latency, {args.calls:,} calls per scenario, each in a fresh process")
    results = {(s, busy): _run(s, args.calls, busy) for busy in (True, False) for s in SCENARIOS}
    for busy in (True, False):
        print("beside a CPU-bound thread:" if busy else "alone (reference):")
        ours = results[("durable", busy)]["mean_us"]
        for scenario in SCENARIOS:
            r = results[(scenario, busy)]
            print(
                f"  {LABELS[scenario]:<30} mean {r['mean_us']:8.1f}  p50 {r['p50_us']:8.1f}  "
                f"p99 {r['p99_us']:8.1f} µs/call   this / durable spool = "
                f"{r['mean_us'] / ours:.1f}"
            )


if __name__ == "__main__":
    main()
