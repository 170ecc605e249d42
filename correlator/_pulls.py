"""The service's pulls from Loki: what ``GET /v1/timeline`` does first when ``correlator
serve`` was started with a Loki (``--loki-url`` or ``CORRELATOR_LOKI_URL``).

A pull (``correlator.loki_pull``) asks Loki for the incident of one identifier, hop by hop,
and stores what comes back: it is a write, and runs where the service runs its writes (the
caller's ``write``: the writer's thread, one write at a time), so a pull and a posted body
never interleave, and each of its commits that stores a new line moves the store's
generation as an ingest's do: the answers kept from before it are not given again (a pull
that finds nothing new keeps them). A pull holds the writer while it waits
for Loki (each hop's expansion reads what the previous hop stored): a posted body waits
behind a pull, as behind another body. The 30 people who open the timeline an
incident channel links to ask for the same seed and window at once: the first request pulls,
and those that arrive while it does wait for that pull (:class:`Pulls`), instead of queueing
29 more behind it on the writer. One Loki client serves every pull of the service's life (its
connections kept), closed by whoever made it (``correlator serve``, at shutdown).

Without a Loki the route is as it always was: :func:`since_parameter` declares ``since`` only
when the service pulls, so that ``?since=`` is an unknown parameter otherwise, and the
schema (``/docs``) does not change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Annotated, Any, Final

from fastapi import Query

import agent_logging
from agent_logging.loki import LokiClient, LokiQueryError
from correlator import _environ, incident, loki_pull
from correlator.errors import QueryError, SourceError
from correlator.logql import DEFAULT_BASE_SELECTOR
from correlator.loki_pull import Pull
from correlator.store import Store

__all__ = ["SINCE", "Pulls", "since_parameter"]

SINCE: Final = (
    "How far back from `to` (default now) Loki is asked for the incident, e.g. 2h (default "
    f"{loki_pull.DEFAULT_SINCE}), unless `from` is given. Only when the service was started "
    "with a Loki."
)
#: The settings a Loki that cannot be reached, or refuses the service's credentials, points at.
_URL_SETTING: Final = f"--loki-url or {_environ.LOKI_URL}"
_AUTH_SETTINGS: Final = (
    f"--username or {_environ.LOKI_USERNAME} with {_environ.LOKI_PASSWORD}, or "
    f"{_environ.LOKI_BEARER_TOKEN}; --tenant or {_environ.LOKI_TENANT}"
)
_log = agent_logging.get_logger("correlator.pulls")

#: How the service runs a write: ``write(job)`` runs ``job`` on the writer's thread.
Write = Callable[[Callable[[], Pull]], Awaitable[Pull]]


class Pulls:
    """The pulls of one service: one Loki client, one pull per seed and window in flight.

    Args:
        client: the Loki client every pull asks through (the caller closes it).
        base_selector: the stream selector every query starts with (``--loki-selector``).
        window_s: how far around the seed's evidence the incident's window reaches.
    """

    def __init__(
        self,
        client: LokiClient,
        *,
        base_selector: str = DEFAULT_BASE_SELECTOR,
        window_s: float = incident.DEFAULT_WINDOW_S,
    ) -> None:
        self.url = client.url
        self._fetch = loki_pull.client_fetch(client)
        self._base_selector = base_selector
        self._window_s = window_s
        self._flying: dict[tuple[Any, ...], asyncio.Future[Pull]] = {}

    async def pull(
        self,
        store: Store,
        key: str,
        value: str,
        *,
        since: str | None,
        start: str | None,
        end: str | None,
        write: Write,
    ) -> Pull:
        """Pull the incident of ``key=value`` into ``store``, or wait for the identical pull
        in flight.

        Args:
            store: the service's store.
            key: the seed's kind (checked: ``_parameters.seed``).
            value: its value.
            since: how far back from ``end`` (default 1h), unless ``start``.
            start: the window's start, as the request gave it.
            end: its end, as given (default now).
            write: runs the pull where the service runs its writes.

        Returns:
            What was asked of Loki and pulled (shared by the requests that waited for it).

        Raises:
            QueryError: a window that cannot be read (before any wait or query).
            SourceError: Loki cannot be reached or refuses a query; the message names the
                setting to look at.
        """
        if since and start:  # loki_pull.window would name the command's options
            raise QueryError(
                "give since or from, not both: each says where the window asked of Loki starts"
            )
        start_ns, end_ns = loki_pull.window(since, start, end)
        # The window as asked, not as read: "the last hour" asked twice at once is one pull.
        flown = (key, value, since, start, end)
        flight = self._flying.get(flown)
        if flight is None:
            job = partial(self._pull, store, f"{key}={value}", start_ns, end_ns)
            # A task of its own: a client that leaves does not cancel the others' pull.
            flight = asyncio.ensure_future(write(job))
            self._flying[flown] = flight
            flight.add_done_callback(partial(self._landed, flown))
        return await asyncio.shield(flight)

    def _landed(self, flown: tuple[Any, ...], flight: asyncio.Future[Pull]) -> None:
        self._flying.pop(flown, None)
        if not flight.cancelled():
            flight.exception()  # retrieved here: every waiter may have gone

    def _pull(self, store: Store, seed: str, start_ns: int, end_ns: int) -> Pull:
        """One pull, on the writer's thread."""
        try:
            pulled = loki_pull.pull(
                store,
                self._fetch,
                seed,
                start_ns=start_ns,
                end_ns=end_ns,
                base_selector=self._base_selector,
                window_s=self._window_s,
            )
        except SourceError as exc:
            raise SourceError(f"{exc}; {self._setting(exc)}") from exc
        _log.info(
            "incident pulled from Loki",
            seed=seed,
            hops=len(pulled.hops),
            requests=pulled.requests,
            entries=pulled.entries,
            new=pulled.new,
            stopped=pulled.stopped,
        )
        return pulled

    def _setting(self, exc: BaseException) -> str:
        """The service's setting a failed pull points at."""
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, LokiQueryError):
            cause = cause.__cause__
        if isinstance(cause, LokiQueryError) and cause.status in (401, 403):
            return f"the Loki at {self.url} refused the service's credentials ({_AUTH_SETTINGS})"
        return f"the service pulls from the Loki at {self.url} ({_URL_SETTING})"


def since_parameter(pulling: bool) -> Callable[..., Coroutine[Any, Any, str | None]]:
    """The ``since`` query parameter of ``GET /v1/timeline``: declared when the service
    pulls from Loki (``pulling``), else a dependency with no parameter that gives None, so
    that ``?since=`` is refused as unknown (``_parameters.check_query``) as it always was.

    Returns:
        The dependency; it returns ``since`` as given, or None.
    """

    async def since(
        since: Annotated[str | None, Query(description=SINCE)] = None,
    ) -> str | None:
        return since

    async def no_since() -> None:
        return None

    return since if pulling else no_since
