"""Shipping to Loki: sustained lines/s, caller cost with Loki up and down, RSS in an outage.

Every figure comes from the same run, against the strict test server (``tests.lokisim``) running
in a process of its own (its CPU does not share the measured process's GIL, but it does share
the machine's cores). Each scenario runs in a fresh child process, with a fresh server:

- ``agent_logging``: ``configure(loki_url=..., spool_dir=..., spool_fsync="batch")``, five
  identifiers bound, one thread logging ``--records`` records as fast as it can.
- ``LokiHandler`` (python-logging-loki 0.3.1): one blocking POST per record, same JSON lines
  (a stdlib JSON formatter with the same fields).
- ``LokiQueueHandler``: the same handler behind a ``QueueListener`` thread.

lines/s = records / (time from the first log call until the server holds the last record).
Caller cost = the logging loop's time / records. The outage scenarios point at a closed
port: agent_logging spools everything (``--outage-records``) while its RSS is sampled every
50 ms; the baselines are measured with fewer records (a blocking handler pays a refused
connection per record).

A per-record cost breakdown (pipeline, spool append, peek, entry mapping, protobuf, snappy,
and the test server's own decode + store) explains the throughput figure.

Run: ``python -m benchmarks.ship [--records N] [--baseline-records N] [--outage-records N]
[--quick] [--skip-baselines] [--skip-breakdown]``. Default runtime is about 1-2 minutes on 2
cores; ``--quick`` cuts every count by 10.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Final

from benchmarks._common import (
    REPO_ROOT,
    LokiProcess,
    RssSampler,
    closed_port_url,
    machine_note,
    rss_kib,
)

IDS: Final = {
    "node_id": "n-17",
    "node_instance_id": "ni-3",
    "correlation_id": "5f0c6f5e-8f8e-4a3b-9a53-1f2d3c4b5a69",
    "allocation_id": "a-9",
    "workflow_id": "wf-2",
}
LABELS: Final = {"service": "bench", "layer": "node", "env": "prod"}
PUSH_PATH: Final = "/loki/api/v1/push"

# -- the measured children -------------------------------------------------------------------


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _await_finish() -> None:
    # The parent says "finish" once the server holds every record (or gave up waiting).
    sys.stdin.readline()


def _configure_durable(url: str, spool_dir: str) -> Any:
    import agent_logging

    agent_logging.configure(
        **LABELS,
        output="none",
        capture_stdlib=False,
        loki_url=url,
        spool_dir=spool_dir,
        spool_fsync="batch",
        health_interval_s=0,  # no self-records: the server must hold exactly our records
    )
    agent_logging.bind(**IDS)
    return agent_logging.get_logger("bench")


def _timed_chunks(call: Callable[[int], None], records: int, chunks: int) -> list[float]:
    """Run ``call(i)`` for every i, returning the µs/call of each of ``chunks`` slices."""
    size = max(1, records // chunks)
    costs = []
    for start in range(0, records, size):
        stop = min(records, start + size)
        began = time.perf_counter()
        for i in range(start, stop):
            call(i)
        costs.append((time.perf_counter() - began) / (stop - start) * 1e6)
    return costs


def child_durable(url: str, records: int) -> None:
    """Log ``records`` through the durable path; report timings, then wait and shut down."""
    import agent_logging

    spool_dir = tempfile.mkdtemp(prefix="bench-ship-")
    try:
        log = _configure_durable(url, spool_dir)
        info = log.info
        with RssSampler() as rss:
            t0 = time.monotonic()
            chunks = _timed_chunks(
                lambda i: info("task claimed", task="reimage", attempt=i), records, 10
            )
            t1 = time.monotonic()
            _emit(phase="logged", t0=t0, t1=t1, chunk_us=chunks)
            _await_finish()
        health = agent_logging.health()
        agent_logging.shutdown(timeout_s=5.0)
        _emit(
            phase="done",
            rss_start_kib=rss.start_kib,
            rss_peak_kib=rss.peak_kib,
            rss_end_kib=rss.end_kib,
            health={k: v for k, v in health.items() if isinstance(v, int | float | str)},
        )
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)


def child_reference(records: int) -> None:
    """The same log call with no sink at all: the pipeline's own cost, for reference."""
    import agent_logging

    agent_logging.configure(**LABELS, output="none", capture_stdlib=False)
    agent_logging.bind(**IDS)
    info = agent_logging.get_logger("bench").info
    t0 = time.monotonic()
    chunks = _timed_chunks(lambda i: info("task claimed", task="reimage", attempt=i), records, 10)
    _emit(phase="logged", t0=t0, t1=time.monotonic(), chunk_us=chunks)
    _emit(phase="done")


class _JsonFormatter(logging.Formatter):
    """The same fields agent_logging renders, for a like-for-like line."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": self.formatTime(record),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            **LABELS,
            "logger": record.name,
        }
        fields.update(
            {k: v for k, v in vars(record).items() if k in IDS or k in ("task", "attempt")}
        )
        return json.dumps(fields)


def child_handler(url: str, records: int, queued: bool) -> None:
    """Log through python-logging-loki's LokiHandler (or LokiQueueHandler)."""
    from queue import Queue

    import logging_loki

    # A refused connection would print a traceback per record: measure the handler, not that.
    logging.raiseExceptions = False
    logger = logging.getLogger("bench")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    kwargs: dict[str, Any] = {
        "url": url + PUSH_PATH,
        "tags": {"service_name": LABELS["service"], "layer": "node", "env": "prod"},
        "version": "1",
    }
    handler: logging.Handler
    if queued:
        handler = logging_loki.LokiQueueHandler(Queue(-1), **kwargs)
        inner = handler.handler  # type: ignore[attr-defined]
        inner.setFormatter(_JsonFormatter())
    else:
        handler = logging_loki.LokiHandler(**kwargs)
        handler.setFormatter(_JsonFormatter())
    logger.addHandler(handler)
    info = logger.info
    with RssSampler() as rss:
        t0 = time.monotonic()
        chunks = _timed_chunks(
            lambda i: info("task claimed", extra={**IDS, "task": "reimage", "attempt": i}),
            records,
            10,
        )
        t1 = time.monotonic()
        _emit(phase="logged", t0=t0, t1=t1, chunk_us=chunks)
        _await_finish()
    _emit(
        phase="done", rss_start_kib=rss.start_kib, rss_peak_kib=rss.peak_kib, rss_end_kib=rss.end_kib
    )
    # A queue listener may still be failing its way through an outage's backlog: leave it.
    os._exit(0)


def child_breakdown(records: int) -> None:
    """Per-record cost of each stage, timed one stage at a time in this process."""
    import cramjam

    import agent_logging
    from agent_logging._push import encode_protobuf, entry_from_record
    from agent_logging._spool import Spool
    from tests.lokisim._http import _count_entries
    from tests.lokisim._limits import Limits
    from tests.lokisim._push import decode_push_body
    from tests.lokisim._store import Store

    lines: list[tuple[int, bytes]] = []

    class Capture:
        def write(self, ts_ns: int, line: bytes, record: object) -> None:
            lines.append((ts_ns, line))

        def close(self, timeout_s: float) -> None:
            return None

        def after_fork_in_child(self) -> None:
            return None

    agent_logging.configure(**LABELS, output="none", capture_stdlib=False)
    agent_logging.bind(**IDS)
    info = agent_logging.get_logger("bench").info
    stages: dict[str, float] = {}

    def timed(name: str, run: Callable[[], object], count: int) -> None:
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - began)
        stages[name] = best / count * 1e6

    def log_all() -> None:
        for i in range(records):
            info("task claimed", task="reimage", attempt=i)

    timed("log call, no sink (pipeline + render)", log_all, records)
    from agent_logging import _state

    pipeline = _state.pipeline
    if pipeline is None:
        raise RuntimeError("configure() left no pipeline")
    object.__setattr__(pipeline, "sinks", (Capture(),))  # capture the rendered lines once
    for i in range(records):
        info("task claimed", task="reimage", attempt=i)
    agent_logging.shutdown()

    spool_dir = tempfile.mkdtemp(prefix="bench-breakdown-")
    try:
        counter = iter(range(1 << 30))

        def append_all() -> None:
            spool = Spool.open(os.path.join(spool_dir, str(next(counter))), fsync="batch")
            append = spool.append
            for ts_ns, line in lines:
                append(ts_ns, line)
            spool.close()

        timed("spool append", append_all, len(lines))
        spool = Spool.open(os.path.join(spool_dir, "read"), fsync="batch")
        for ts_ns, line in lines:
            spool.append(ts_ns, line)

        def peek_all() -> None:
            position = None
            while True:
                batch = spool.peek_batch(max_records=10_000, max_bytes=1 << 20)
                if batch is None or batch.start == position:
                    break
                position = batch.start
                spool.ack(batch)

        # Peek + ack until empty; the spool must be refilled for every repeat.
        def refill_and_peek() -> None:
            peek_all()

        began = time.perf_counter()
        peek_all()
        stages["spool peek_batch + ack (batch fsync)"] = (
            (time.perf_counter() - began) / len(lines) * 1e6
        )
        spool.close()
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)

    defaults = {"service_name": "bench", "layer": "node", "env": "prod"}
    batch_lines = lines[:3000]  # about one 1 MiB batch

    def map_all() -> list[Any]:
        return [
            entry_from_record(ts, line, node_id_label=False, default_labels=defaults)
            for ts, line in batch_lines
        ]

    timed("entry_from_record", map_all, len(batch_lines))
    entries = map_all()
    timed("encode_protobuf", lambda: encode_protobuf(entries), len(entries))
    message = encode_protobuf(entries)
    timed("snappy compress", lambda: cramjam.snappy.compress_raw(message), len(entries))
    body = bytes(cramjam.snappy.compress_raw(message))
    headers = {"content-type": "application/x-protobuf"}

    def server_store() -> None:
        Store(Limits()).push("fake", decode_push_body(headers, body))

    timed("test server: decode + validate + store", server_store, len(entries))
    timed(
        "test server: second decode (request record)",
        lambda: _count_entries(headers, body),
        len(entries),
    )
    _emit(phase="logged", stages=stages, line_bytes=len(lines[0][1]))
    _emit(phase="done")


# -- the orchestrator --------------------------------------------------------------------------


def _run_child(
    scenario: str, records: int, *, url: str = "", loki: LokiProcess | None = None
) -> dict[str, Any]:
    """Run one scenario in a fresh process; with ``loki``, wait for every record to arrive."""
    command = [sys.executable, "-m", "benchmarks.ship", "--child", scenario]
    command += ["--records", str(records), "--url", url]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if process.stdin is None or process.stdout is None:
        raise RuntimeError("no pipes to the child")
    logged = json.loads(process.stdout.readline())
    result: dict[str, Any] = {"records": records, **logged}
    if loki is not None:
        # Generous but bounded: 60 s plus 1 ms per record (the slowest baseline's pace).
        reached = loki.wait_for(records, timeout_s=60.0 + records / 1000)
        result["stored_at"] = reached
        result["stored"] = loki.count()
    process.stdin.write("finish\n")
    process.stdin.flush()
    result.update(json.loads(process.stdout.readline()))
    process.wait(timeout=60)
    return result


def _rate(result: dict[str, Any]) -> float | None:
    stored_at = result.get("stored_at")
    if stored_at is None:
        return None
    return float(result["records"] / (stored_at - result["t0"]))


def _caller_us(result: dict[str, Any]) -> float:
    return float((result["t1"] - result["t0"]) / result["records"] * 1e6)


def _fmt_rate(value: float | None) -> str:
    return "not all stored" if value is None else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="agent_logging, Loki up")
    parser.add_argument("--baseline-records", type=int, default=3_000)
    parser.add_argument("--outage-records", type=int, default=500_000)
    parser.add_argument("--outage-baseline-records", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="every count divided by 10")
    parser.add_argument("--skip-baselines", action="store_true")
    parser.add_argument("--skip-breakdown", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.url, args.records)
        return
    if args.quick:
        for name in ("records", "baseline_records", "outage_records", "outage_baseline_records"):
            setattr(args, name, max(10, getattr(args, name) // 10))

    print(f"shipping benchmark: {machine_note()}")
    began = time.monotonic()
    runs: dict[str, dict[str, Any]] = {}
    with LokiProcess() as loki:
        runs["ours"] = _run_child("durable", args.records, url=loki.url, loki=loki)
    runs["reference"] = _run_child("reference", min(args.records, 100_000))
    runs["ours_down"] = _run_child("durable", args.outage_records, url=closed_port_url())
    if not args.skip_baselines:
        for name, scenario in (("handler", "handler"), ("queue", "queue-handler")):
            with LokiProcess() as loki:
                runs[name] = _run_child(scenario, args.baseline_records, url=loki.url, loki=loki)
            runs[f"{name}_down"] = _run_child(
                scenario, args.outage_baseline_records, url=closed_port_url()
            )
    if not args.skip_breakdown:
        runs["breakdown"] = _run_child("breakdown", min(args.records, 20_000))
    _report(runs, time.monotonic() - began)


def _child(scenario: str, url: str, records: int) -> None:
    if scenario == "durable":
        child_durable(url, records)
    elif scenario == "reference":
        child_reference(records)
    elif scenario in ("handler", "queue-handler"):
        child_handler(url, records, queued=scenario == "queue-handler")
    elif scenario == "breakdown":
        child_breakdown(records)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def _report(runs: dict[str, dict[str, Any]], elapsed_s: float) -> None:
    ours = runs["ours"]
    ours_rate = _rate(ours)
    print(f"\nsustained lines/s into the test server (separate process), {elapsed_s:.0f} s run")
    print(f"  {'':<34} {'records':>8} {'lines/s':>14} {'ours/this':>10}")
    rows = [("agent_logging (spool, fsync=batch)", ours)]
    rows += [(label, runs[key]) for key, label in _BASELINES if key in runs]
    for label, run in rows:
        rate = _rate(run)
        ratio = f"{ours_rate / rate:.1f}x" if ours_rate and rate else "-"
        print(f"  {label:<34} {run['records']:>8,} {_fmt_rate(rate):>14} {ratio:>10}")
    lag = (ours["stored_at"] - ours["t1"]) if ours.get("stored_at") else None
    if lag is not None:
        print(f"  agent_logging: last record stored {lag:.2f} s after the last log call")

    print("\ncaller cost per log call (µs; loop time / records)")
    print(f"  {'':<34} {'Loki up':>10} {'Loki down':>10} {'down/up':>8}")
    reference = runs["reference"]
    print(f"  {'agent_logging, no sink (reference)':<34} {_caller_us(reference):>10.1f}")
    pairs = [("agent_logging (spool)", "ours", "ours_down")]
    pairs += [(label, key, f"{key}_down") for key, label in _BASELINES if key in runs]
    for label, up_key, down_key in pairs:
        up, down = _caller_us(runs[up_key]), _caller_us(runs[down_key])
        print(f"  {label:<34} {up:>10.1f} {down:>10.1f} {down / up:>8.2f}")
    chunks = runs["ours_down"]["chunk_us"]
    print(
        "  agent_logging, Loki down, per tenth of the run: "
        + " ".join(f"{c:.1f}" for c in chunks)
    )

    down = runs["ours_down"]
    print(f"\nRSS while Loki is down ({down['records']:,} records logged, KiB)")
    print(f"  {'':<34} {'start':>9} {'peak':>9} {'end':>9} {'peak-start':>11}")
    rss_rows = [("agent_logging (spool)", down)]
    rss_rows += [(label, runs[f"{key}_down"]) for key, label in _BASELINES if key in runs]
    for label, run in rss_rows:
        grow = run["rss_peak_kib"] - run["rss_start_kib"]
        print(
            f"  {label + ' (' + format(run['records'], ',') + ')':<34} {run['rss_start_kib']:>9,}"
            f" {run['rss_peak_kib']:>9,} {run['rss_end_kib']:>9,} {grow:>11,}"
        )
    health = down.get("health", {})
    print(
        f"  agent_logging spool at the end: {health.get('spool_records', '?'):,} records, "
        f"{health.get('spool_bytes', 0) / 2**20:.0f} MiB, dropped {health.get('dropped', '?')}"
    )

    if "breakdown" in runs:
        breakdown = runs["breakdown"]
        print(f"\nper-record cost by stage (µs, {breakdown['line_bytes']}-byte lines, best of 3)")
        for stage, cost in breakdown["stages"].items():
            print(f"  {stage:<44} {cost:>7.2f}")
    print()
    print(json.dumps({k: v for k, v in runs.items()}, default=str))


_BASELINES: Final = (("handler", "LokiHandler (0.3.1)"), ("queue", "LokiQueueHandler (0.3.1)"))


if __name__ == "__main__":
    _ = rss_kib  # re-exported for interactive use
    main()
