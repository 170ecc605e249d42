"""What naming an owner costs per failure record, against what a timeline already pays.

Failure records as unstamped services write them (the texts of real programs: Python, Go,
Java, curl, Ansible, PostgreSQL; wrappers; words no rule knows; a Python traceback; a 64 KiB
message), each an ``Event`` as the ndjson adapter makes it. Measured in one run, interleaved:

1. ``correlator.ownership.owner_of(event)``: the evidence read off the event and the owner
   table applied (RE2 prefilter, then the one rule that can match), as a timeline's verdict
   runs it once per failure;
2. the same with the prefilter off (the table as a list): every rule's patterns searched;
3. ``agent_logging.owner.classify(exc)`` of comparable exceptions: what the library pays at
   log time for a record with an exception;
4. ``correlator.incident.event_json(event)``: what a timeline already pays for every event it
   returns (the baseline the ratio is taken against).

Run: ``python -m benchmarks.owner [--records N] [--repeats R]``. Prints µs per record (best of
the repeats) by kind and overall, and the ratios against ``event_json``.
"""

from __future__ import annotations

import argparse
import errno
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from agent_logging.owner import DEFAULT_RULES, classify
from correlator.incident import event_json
from correlator.model import Event, content_hash
from correlator.ownership import owner_of

_STACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/api/reserve.py", line 41, in reserve\n'
    "    cur.execute(RESERVE, params)\n"
    "psycopg.errors.LockNotAvailable: canceling statement due to lock timeout\n"
)

#: (kind, record's event, error type, error message, extra fields)
_RECORDS: tuple[tuple[str, str, str | None, str | None, dict[str, Any]], ...] = (
    (
        "python ssl",
        "claim failed",
        "ssl.SSLCertVerificationError",
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired "
        "(_ssl.c:1006)",
        {},
    ),
    (
        "go dial",
        'claim failed: Post "https://api:8443/v1/claim": dial tcp 10.0.0.7:8443: connect: '
        "connection refused",
        None,
        None,
        {},
    ),
    ("go x509", "x509: certificate signed by unknown authority", None, None, {}),
    (
        "java pkix",
        "provisioning failed",
        "javax.net.ssl.SSLHandshakeException",
        "PKIX path building failed: unable to find valid certification path to requested target",
        {},
    ),
    (
        "ansible rc",
        "TASK [power on] FAILED! rc=127: /bin/sh: 1: ipmitool: not found",
        None,
        None,
        {},
    ),
    (
        "postgres",
        "reserve failed",
        "psycopg.errors.LockNotAvailable",
        "canceling statement due to lock timeout",
        {},
    ),
    ("wrapper", "provision failed", None, None, {}),
    (
        "unknown words",
        "quota exceeded for tenant t-41 in region r-2 while allocating",
        None,
        "allocation quota table has no row for the tenant",
        {},
    ),
    ("traceback", "reserve failed", "RuntimeError", None, {"stack": _STACK}),
    ("64 KiB message", "upload failed", "RuntimeError", "x" * 65536, {}),
)


def _event(
    kind: str,
    message: str,
    error_type: str | None,
    error_message: str | None,
    extra: dict[str, Any],
    index: int,
) -> Event:
    record: dict[str, Any] = {
        "ts": "2026-11-29T01:00:00Z",
        "level": "error",
        "event": message,
        "service": "svc",
        "layer": "node",
        "allocation_id": f"a-{index}",
    }
    error: dict[str, Any] = {}
    if error_type:
        error["type"] = error_type
    if error_message:
        error["message"] = error_message
    if "stack" in extra:
        error["stack"] = extra["stack"]
    if error:
        record["error"] = error
    raw = orjson.dumps(record).decode()
    attrs = {"error": {k: v for k, v in error.items() if k not in ("type", "stack")}}
    return Event(
        ts_ns=1_795_900_000_000_000_000 + index,
        layer="node",
        source="ndjson",
        origin="bench",
        message=message,
        raw=raw,
        hash=content_hash("ndjson", raw),
        service="svc",
        level="error",
        allocation_id=f"a-{index}",
        error_type=error_type,
        attrs=attrs if error else {},
    )


def _exceptions() -> list[BaseException]:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    wrapped = RuntimeError("provisioning failed")
    wrapped.__cause__ = refused
    try:
        subprocess.run(["/nonexistent/ipmitool"], check=False)
    except FileNotFoundError as exc:
        missing = exc
    return [
        ssl.SSLCertVerificationError(1, "certificate verify failed: certificate has expired"),
        wrapped,
        missing,
        ValueError("quota exceeded for tenant t-41"),
    ]


def _best(run: Callable[[], None], count: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best / count * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000, help="records per kind")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    unfiltered = list(DEFAULT_RULES)
    rows = []
    totals = {"owner_of": 0.0, "no prefilter": 0.0, "event_json": 0.0}
    for kind, *fields in _RECORDS:
        events = [_event(kind, *fields, index=i) for i in range(args.records)]  # type: ignore[misc]
        owner_of(events[0])  # builds the prefilter once

        def table(events: list[Event] = events) -> None:
            for event in events:
                owner_of(event)

        def every_rule(events: list[Event] = events) -> None:
            for event in events:
                owner_of(event, unfiltered)

        def rendered(events: list[Event] = events) -> None:
            for event in events:
                event_json(event)

        figures = {
            "owner_of": _best(table, len(events), args.repeats),
            "no prefilter": _best(every_rule, len(events), args.repeats),
            "event_json": _best(rendered, len(events), args.repeats),
        }
        for name, value in figures.items():
            totals[name] += value / len(_RECORDS)
        found = owner_of(events[0])
        rows.append((kind, figures, found.owner_layer if found else "-"))
    exceptions = _exceptions()

    def at_log_time() -> None:
        for _ in range(args.records):
            for exc in exceptions:
                classify(exc)

    log_time = _best(at_log_time, args.records * len(exceptions), args.repeats)
    print(
        f"{'record':<16} {'owner':<10} {'owner_of µs':>12} {'no prefilter µs':>16} "
        f"{'event_json µs':>14} {'owner_of/event_json':>20}"
    )
    for kind, figures, owner in rows:
        print(
            f"{kind:<16} {owner:<10} {figures['owner_of']:>12.1f} {figures['no prefilter']:>16.1f} "
            f"{figures['event_json']:>14.1f} {figures['owner_of'] / figures['event_json']:>20.2f}"
        )
    print(
        f"{'mean of kinds':<27} {totals['owner_of']:>12.1f} {totals['no prefilter']:>16.1f} "
        f"{totals['event_json']:>14.1f} {totals['owner_of'] / totals['event_json']:>20.2f}"
    )
    print(f"library, classify(exc) at log time: {log_time:.1f} µs per exception")
    print(
        f"prefilter speed-up: {totals['no prefilter'] / totals['owner_of']:.1f}x; a timeline "
        f"with 500 failures pays {totals['owner_of'] * 500 / 1000:.1f} ms for their owners"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
