"""The direct line against the full path, by how many records each binding logs.

A plain record's line is joined from its envelope, rendered once per binding
(``agent_logging.pipeline._direct``); the full path builds and renders the whole record every time.
Rendering an envelope costs about what one record saves, so which path is cheaper depends on
how many records share a binding. Both paths in one process, the same records, repeats
interleaved (the path is switched on the pipeline in between):

- ``N/bind``: ``with bound(correlation_id=...)``, then N log calls (a request, a task);
- ``3 taking turns``: three bindings made once, their records interleaved (concurrent
  requests on threads or tasks);
- ``one binding``: every record under the same identifiers (a node agent's long task).

Output ``none`` (no sink), so the figures are the log call's own. CPU time per record (process
time, which the host's steal does not inflate), best of the repeats, and the ratio
direct / full. Run: ``python -m benchmarks.bindings [--records N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import contextvars
import time
from collections.abc import Callable

import agent_logging
from agent_logging import _state
from benchmarks._common import IDS


def _per_binding(per: int, records: int) -> Callable[[], None]:
    info = agent_logging.get_logger("bench").info

    def run() -> None:
        for n in range(records // per):
            with agent_logging.bound(correlation_id=f"req-{n}"):
                for _ in range(per):
                    info("request", status=200)

    return run


def _taking_turns(records: int) -> Callable[[], None]:
    info = agent_logging.get_logger("bench").info
    requests = [contextvars.copy_context() for _ in range(3)]
    for n, request in enumerate(requests):
        request.run(agent_logging.bind, correlation_id=f"req-{n}")

    def run() -> None:
        for n in range(records):
            requests[n % 3].run(info, "task step", attempt=n)

    return run


def _one_binding(records: int) -> Callable[[], None]:
    info = agent_logging.get_logger("bench").info
    context = contextvars.copy_context()
    context.run(agent_logging.bind, **IDS)

    def run() -> None:
        for n in range(records):
            context.run(info, "task claimed", task="reimage", attempt=n)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000, help="records per scenario run")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    agent_logging.configure("bench", "api", "prod", output="none", capture_stdlib=False)
    pipeline = _state.pipeline
    assert pipeline is not None
    sinks = pipeline.sinks
    scenarios = {
        "1/bind": _per_binding(1, args.records),
        "3/bind": _per_binding(3, args.records),
        "10/bind": _per_binding(10, args.records),
        "3 taking turns": _taking_turns(args.records),
        "one binding": _one_binding(args.records),
    }
    best: dict[tuple[str, str], float] = {}
    for repeat in range(args.repeats):
        for name, run in scenarios.items():
            order = ("direct", "full") if repeat % 2 else ("full", "direct")
            for path in order:
                # The pipeline takes the direct path only for the sinks tuple it planned it
                # for: None turns it off.
                object.__setattr__(pipeline, "_direct_for", sinks if path == "direct" else None)
                started = time.process_time()
                run()
                spent = (time.process_time() - started) / args.records * 1e6
                best[name, path] = min(best.get((name, path), float("inf")), spent)
    agent_logging.shutdown()
    print(f"CPU µs per record, {args.records} records x {args.repeats} repeats (best)")
    print(f"  {'records per binding':<20} {'full':>7} {'direct':>7}  direct/full")
    for name in scenarios:
        full, direct = best[name, "full"], best[name, "direct"]
        print(f"  {name:<20} {full:7.2f} {direct:7.2f}  {direct / full:.2f}")


if __name__ == "__main__":
    main()
