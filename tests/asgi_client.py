"""A synchronous client for an ASGI app, in process (no sockets).

Starlette's TestClient now warns about httpx; this drives ``httpx.ASGITransport`` on an event
loop of its own instead, which is all the tests need.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


class AsgiClient:
    """``get``/``post`` against an ASGI app; close it (or use ``with``) when done."""

    def __init__(self, app: Any) -> None:
        self._loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://testserver")

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self._loop.run_until_complete(self._client.request(method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()

    def __enter__(self) -> AsgiClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
