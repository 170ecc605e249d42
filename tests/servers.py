"""Real servers on 127.0.0.1 for integration tests."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def uvicorn_server(app: Any, *, timeout_s: float = 15.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread; yields its base URL; stops it on exit."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), log_config=None, access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(int(timeout_s / 0.01)):
            if server.started:
                break
            thread.join(0.01)
        else:
            raise TimeoutError(f"uvicorn did not start within {timeout_s} s")
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
