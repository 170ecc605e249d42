"""Serve the Loki test server stand-alone until SIGTERM or SIGINT.

Usage::

    python -m tests.lokisim --host 127.0.0.1 --port 3100 [--auth-enabled]

The first line printed is ``listening on http://HOST:PORT`` (useful with ``--port 0``).
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from types import FrameType

from tests.lokisim._server import LokiServer


def main(argv: list[str] | None = None) -> int:
    """Run the server until a termination signal arrives.

    Args:
        argv: command-line arguments; ``sys.argv[1:]`` when None.

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m tests.lokisim",
        description="Serve the Loki test server stand-alone until SIGTERM or SIGINT. The first "
        "line printed is 'listening on http://HOST:PORT' (useful with --port 0).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=3100, help="port to listen on (0: any free)")
    parser.add_argument("--auth-enabled", action="store_true", help="require X-Scope-OrgID")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = LokiServer(host=args.host, port=args.port, auth_enabled=args.auth_enabled).start()
    # Everything alive now (modules, classes) lives as long as the process: keep it out
    # of the collector's full passes, which otherwise revisit it as the store grows.
    gc.freeze()
    print(f"listening on {server.url}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
