"""A ``requests`` transport adapter that adds the current identifiers to outbound requests,
to allowed hosts only::

    session = instrument(requests.Session())
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

import agent_logging
from agent_logging.context._propagation import host_allowed
from agent_logging.integrations import allowed_hosts

__all__ = ["PropagatingAdapter", "instrument"]


class PropagatingAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` that injects ``traceparent``, ``baggage`` and ``X-Correlation-ID``."""

    def __init__(self, allow_hosts: Iterable[str] | None = None, **kwargs: Any) -> None:
        self._allow_hosts = None if allow_hosts is None else tuple(allow_hosts)
        super().__init__(**kwargs)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        parts = urlsplit(request.url or "")
        if parts.hostname and host_allowed(
            parts.hostname, parts.port, allowed_hosts(self._allow_hosts)
        ):
            for name, value in agent_logging.headers().items():
                request.headers.setdefault(name, value)
        return super().send(request, **kwargs)


def instrument(
    session: requests.Session, allow_hosts: Iterable[str] | None = None
) -> requests.Session:
    """Mount :class:`PropagatingAdapter` for ``http://`` and ``https://``; returns the session."""
    adapter = PropagatingAdapter(allow_hosts)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
