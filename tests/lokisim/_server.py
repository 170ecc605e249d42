"""``LokiServer``: an in-process, strict Loki stand-in with fault injection.

It serves Loki's push, ``query_range``, label and readiness endpoints on 127.0.0.1
from a daemon thread (HTTP/1.1, keep-alive) and keeps everything in memory. Faults
are queued and consumed, oldest first, by the next push requests only; queries are
never affected. Stored data survives :meth:`LokiServer.go_down` (Loki keeps a WAL).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from tests.lokisim._http import Backend, Fault, LokiHTTPServer, RequestRecord
from tests.lokisim._limits import Limits
from tests.lokisim._store import Store, StoredEntry

__all__ = ["LokiServer"]


class LokiServer:
    """A Loki 3.x test server.

    Example::

        with LokiServer() as loki:
            httpx.post(f"{loki.url}/loki/api/v1/push", ...)
            assert loki.wait_for_entries(1, timeout_s=5.0)
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        auth_enabled: bool = False,
        require_auth: tuple[str, str] | str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """Configure the server; nothing listens until :meth:`start`.

        Args:
            limits: Loki's limits; the Loki 3 defaults when None.
            auth_enabled: Loki's ``auth_enabled``: require ``X-Scope-OrgID`` (else
                401 ``no org id``); when False every request is tenant ``fake``.
            require_auth: what a fronting proxy demands: ``(user, password)`` for
                Basic auth or a bearer token string; missing or wrong gives 401.
                ``/ready`` is exempt, for health checks.
            host: the address to bind.
            port: the port; 0 picks a free one (kept across :meth:`go_down`).
        """
        limits = limits or Limits()
        self._backend = Backend(Store(limits), limits, auth_enabled, require_auth)
        self._host = host
        self._port = port
        self._httpd: LokiHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lifecycle = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:43210`` (the port is known after start)."""
        return f"http://{self._host}:{self._port}"

    @property
    def limits(self) -> Limits:
        """The limits the server enforces."""
        return self._backend.limits

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of every request received so far, in arrival order."""
        return self._backend.records()

    def start(self) -> LokiServer:
        """Bind and serve in a daemon thread.

        Returns:
            The server itself, for chaining.

        Raises:
            OSError: the port cannot be bound.
        """
        with self._lifecycle:
            if self._httpd is None:
                self._backend.interrupt.clear()
                self._serve()
        return self

    def _serve(self) -> None:
        httpd = LokiHTTPServer((self._host, self._port), self._backend)
        self._port = httpd.server_address[1]
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="lokisim", daemon=True
        )
        thread.start()
        self._httpd, self._thread = httpd, thread

    def _halt(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        # Wake stalled or delayed handlers first: they drop their connection unanswered.
        self._backend.interrupt.set()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()
        self._backend.close_connections()

    def stop(self) -> None:
        """Stop serving and close every connection; safe to call twice."""
        with self._lifecycle:
            self._halt()

    def __enter__(self) -> LokiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def entries(self, tenant: str = "fake") -> list[StoredEntry]:
        """Return the tenant's stored entries in arrival order."""
        return self._backend.store.entries(tenant)

    def count(self, tenant: str = "fake") -> int:
        """Return how many entries the tenant has stored."""
        return self._backend.store.count(tenant)

    def wait_for_entries(self, n: int, timeout_s: float, tenant: str = "fake") -> bool:
        """Block until the tenant holds at least ``n`` entries.

        Args:
            n: the count to reach.
            timeout_s: how long to wait at most.
            tenant: the tenant ID.

        Returns:
            True when reached, False on timeout.
        """
        return self._backend.store.wait_for(n, timeout_s, tenant)

    def fail_next(
        self, n: int, status: int, *, retry_after_s: float | None = None, body: str = ""
    ) -> None:
        """Answer the next ``n`` pushes with ``status`` without storing anything.

        Args:
            n: how many pushes.
            status: e.g. 429, 500, 503.
            retry_after_s: send ``Retry-After`` (whole seconds as an integer, else a
                decimal such as ``0.5``).
            body: the response body.
        """
        self._backend.add_faults(Fault("fail", status, retry_after_s, body), n)

    def stall_next(self, n: int, seconds: float) -> None:
        """Hold each of the next ``n`` pushes for ``seconds``, then handle it normally.

        The push is stored after the stall even if the client gave up meanwhile, as a
        real server would; :meth:`stop` or :meth:`go_down` cut the stall short and drop
        the connection unanswered.
        """
        self._backend.add_faults(Fault("stall", seconds=seconds), n)

    def reset_next(self, n: int) -> None:
        """Read each of the next ``n`` pushes, then reset the connection with no response."""
        self._backend.add_faults(Fault("reset"), n)

    @property
    def pending_faults(self) -> int:
        """How many queued faults (from ``fail_next``, ``stall_next``, ``reset_next``) remain."""
        return self._backend.pending_faults()

    def set_delay(self, seconds: float) -> None:
        """Delay every push response by ``seconds`` (0 turns the delay off)."""
        self._backend.delay_s = seconds

    def go_down(self) -> None:
        """Simulate an outage: close the listening socket and every open connection.

        New connections are refused until :meth:`come_up`; stored data is kept.
        """
        with self._lifecycle:
            self._halt()

    def come_up(self) -> None:
        """End an outage: listen again on the same port."""
        self.start()

    def drop_stored(self, predicate: Callable[[StoredEntry], bool]) -> int:
        """Forget stored entries (of every tenant), simulating data loss in Loki.

        Args:
            predicate: returns True for each entry to drop.

        Returns:
            How many entries were dropped.
        """
        return self._backend.store.drop(predicate)
