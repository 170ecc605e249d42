"""A service for ``test_crash.py`` to kill: logs through the durable path and reports progress.

Usage::

    python durable_child.py SPOOL_DIR LOKI_URL SERVICE RUN [COUNT]

Configures ``agent_logging`` with ``loki_url=LOKI_URL`` and ``spool_dir=SPOOL_DIR`` (batches
every 20 ms, of at most ``BATCH_MAX_BYTES``), then logs ``{"event": "tick", "run": RUN,
"seq": N}`` for N = 0, 1, 2 ... and, after each logging call has returned, writes ``N`` and a
newline to stdout with one ``os.write``. A number on stdout is therefore a record the library
had accepted. With COUNT, it stops after COUNT records and waits for stdin to close (its
parent kills it first).
"""

from __future__ import annotations

import os
import sys
import time

import agent_logging

# Between records: enough to keep a run at a few hundred records, so that kills land at
# every stage (start-up, replay, logging, a push in flight, an ack) rather than mostly in
# the logging loop.
_PACE_S = 0.0005
# Small batches (some 50 records): a kill resends at most the batch in flight, and the crash
# test bounds the resends by this size.
BATCH_MAX_BYTES = 8192


def main(argv: list[str]) -> int:
    spool_dir, loki_url, service, run = argv[:4]
    count = int(argv[4]) if len(argv) > 4 else None
    agent_logging.configure(
        service=service,
        layer="node",
        env="test",
        loki_url=loki_url,
        spool_dir=spool_dir,
        output="none",
        batch_interval_s=0.02,
        batch_max_bytes=BATCH_MAX_BYTES,
        health_interval_s=0,
    )
    log = agent_logging.get_logger("tests.crash")
    seq = 0
    while count is None or seq < count:
        log.info("tick", run=int(run), seq=seq)
        os.write(1, b"%d\n" % seq)
        seq += 1
        time.sleep(_PACE_S)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
