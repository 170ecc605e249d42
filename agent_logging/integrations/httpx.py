"""httpx hooks that add the current identifiers to outbound requests, to allowed hosts only.

::

    client = httpx.Client(event_hooks=event_hooks())
    client = httpx.AsyncClient(event_hooks=async_event_hooks())
    instrument(existing_client)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx

import agent_logging
from agent_logging.context._propagation import host_allowed
from agent_logging.integrations import allowed_hosts

__all__ = ["async_event_hooks", "event_hooks", "inject", "instrument"]


def inject(request: httpx.Request, allow_hosts: Iterable[str] | None = None) -> None:
    """Add ``traceparent``, ``baggage`` and ``X-Correlation-ID`` to ``request`` when its host is
    allowed (``allow_hosts``, else the configured ``propagate_hosts``)."""
    url = request.url
    if host_allowed(url.host, url.port, allowed_hosts(allow_hosts)):
        for name, value in agent_logging.headers().items():
            request.headers.setdefault(name, value)


def event_hooks(allow_hosts: Iterable[str] | None = None) -> dict[str, list[Callable[..., Any]]]:
    """``event_hooks`` for ``httpx.Client``."""
    hosts = None if allow_hosts is None else tuple(allow_hosts)

    def on_request(request: httpx.Request) -> None:
        inject(request, hosts)

    return {"request": [on_request]}


def async_event_hooks(
    allow_hosts: Iterable[str] | None = None,
) -> dict[str, list[Callable[..., Awaitable[None]]]]:
    """``event_hooks`` for ``httpx.AsyncClient``."""
    hosts = None if allow_hosts is None else tuple(allow_hosts)

    async def on_request(request: httpx.Request) -> None:
        inject(request, hosts)

    return {"request": [on_request]}


def instrument(
    client: httpx.Client | httpx.AsyncClient, allow_hosts: Iterable[str] | None = None
) -> httpx.Client | httpx.AsyncClient:
    """Add the request hook to an existing client; returns the client."""
    hooks = (
        async_event_hooks(allow_hosts)
        if isinstance(client, httpx.AsyncClient)
        else event_hooks(allow_hosts)
    )
    current = client.event_hooks
    current["request"] = [*current.get("request", []), *hooks["request"]]
    client.event_hooks = current
    return client
