"""Integrations with web frameworks and HTTP clients; each module imports its framework, so
``import agent_logging`` pays for none of them.

- :mod:`agent_logging.integrations.asgi`: middleware for FastAPI, Starlette and any ASGI app.
- :mod:`agent_logging.integrations.httpx`: request hooks for ``httpx`` clients.
- :mod:`agent_logging.integrations.requests`: a transport adapter for ``requests`` sessions.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_logging import _config

__all__ = ["allowed_hosts"]


def allowed_hosts(explicit: Iterable[str] | None) -> tuple[str, ...]:
    """The hosts outbound hooks may send identifiers to: ``explicit`` if given, else the
    configured ``propagate_hosts`` (``AGENT_LOGGING_PROPAGATE_HOSTS``)."""
    if explicit is not None:
        return tuple(explicit)
    settings = _config.settings
    return settings.propagate_hosts if settings is not None else ()
