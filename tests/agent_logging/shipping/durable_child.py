"""A service for ``test_crash.py`` to kill: logs through the durable path and reports progress.

Usage::

    python durable_child.py SPOOL_DIR LOKI_URL SERVICE RUN [COUNT] [--fast BYTES_PER_S]
        [--tenant TENANT]

Configures ``agent_logging`` with ``loki_url=LOKI_URL`` and ``spool_dir=SPOOL_DIR`` (batches
every 20 ms, of at most ``BATCH_MAX_BYTES``), then logs ``{"event": "tick", "run": RUN,
"seq": N}`` for N = 0, 1, 2 ... and, after each logging call has returned, writes ``N`` and a
newline to stdout with one ``os.write``. A number on stdout is therefore a record the library
had accepted. With COUNT, it stops after COUNT records and waits for stdin to close (its
parent kills it first).

``--fast`` makes it a node agent replaying a backlog: records of ``FAST_RECORD_BYTES`` (a
``pad`` field), logged at BYTES_PER_S, in 1 MiB batches (the default), so that Loki's stream
sharding (``shard_streams.desired_rate``, 1.5 MB/s) cuts the stream into shards. Above the
tenant's 4 MiB/s ingestion limit, logging faster would only build a backlog that ships at
4 MiB/s.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import agent_logging

# Between records: enough to keep a run at a few hundred records, so that kills land at
# every stage (start-up, replay, logging, a push in flight, an ack) rather than mostly in
# the logging loop.
_PACE_S = 0.0005
# Small batches (some 50 records): a kill resends at most the batch in flight, and the crash
# test bounds the resends by this size.
BATCH_MAX_BYTES = 8192
#: The size of a ``--fast`` record's line, about.
FAST_RECORD_BYTES = 2048
# A --fast record without its pad, about: the rest of the line.
_FAST_OVERHEAD = 190


def _option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    index = argv.index(name)
    value = argv[index + 1]
    del argv[index : index + 2]
    return value


def main(argv: list[str]) -> int:
    argv = list(argv)
    fast = _option(argv, "--fast")
    tenant = _option(argv, "--tenant")
    spool_dir, loki_url, service, run = argv[:4]
    count = int(argv[4]) if len(argv) > 4 else None
    agent_logging.configure(
        service=service,
        layer="node",
        env="test",
        loki_url=loki_url,
        loki_tenant=tenant,
        spool_dir=spool_dir,
        output="none",
        batch_interval_s=0.02 if fast is None else 0.2,
        batch_max_bytes=BATCH_MAX_BYTES if fast is None else 1 << 20,
        health_interval_s=0,
    )
    log = agent_logging.get_logger("tests.crash")
    if fast is not None:
        return _log_fast(log, int(run), float(fast))
    seq = 0
    while count is None or seq < count:
        log.info("tick", run=int(run), seq=seq)
        os.write(1, b"%d\n" % seq)
        seq += 1
        time.sleep(_PACE_S)
    sys.stdin.read()
    return 0


def _log_fast(log: Any, run: int, bytes_per_s: float) -> int:
    pad = "p" * (FAST_RECORD_BYTES - _FAST_OVERHEAD)
    per_record_s = FAST_RECORD_BYTES / bytes_per_s
    began = time.monotonic()
    seq = 0
    while True:
        log.info("tick", run=run, seq=seq, pad=pad)
        os.write(1, b"%d\n" % seq)
        seq += 1
        ahead_s = began + seq * per_record_s - time.monotonic()
        if ahead_s > 0.005:
            time.sleep(ahead_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
