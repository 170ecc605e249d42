"""How ``correlator serve`` meets the network: uvicorn, with every wait on a client bounded.

uvicorn bounds an idle connection between two requests (``timeout_keep_alive``) and the size
of a request's line and headers (h11's 16 KiB), but not the time they take to arrive, nor how
many connections it holds: 1,100 clients sending a byte a second were all held, for as long
as they liked. :func:`serve` adds the two (:func:`bounded_h11`): a request's line and headers
must arrive within ``header_timeout_s`` of the connection's start or of the previous answer,
and a connection past ``max_connections`` is closed as it opens. The evidence route bounds
the time its body takes itself (``correlator.api``); no other route reads a body, and what a
client still sends after an answer gets the same deadline as a next request's headers.
A request h11 cannot read answers the API's error shape, as JSON, like every other. While it
serves, threads hand each other the interpreter more often than Python's default
(:data:`SWITCH_INTERVAL_S`), so that the event loop, which answers every connection, does
not wait long for it behind the read threads.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Final

import h11
import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_BYTES", "KEEP_ALIVE_S", "SWITCH_INTERVAL_S", "bounded_h11", "serve", "settings"]

#: The most a request's line and headers may take (h11's own default, said out loud).
HEAD_BYTES: Final = 16 * 1024
#: How long an idle connection is kept between two requests (uvicorn's default).
KEEP_ALIVE_S: Final = 5
#: How long a thread may hold the interpreter while another waits for it (Python's default:
#: 5 ms). The event loop lets go of it at every socket call, and each time waits for a read
#: thread running Python to be told to hand it back: a /healthz during a burst of 200
#: distinct timelines of the 10^6 store took up to 67-102 ms with 5 ms, 38-56 ms with 1 ms,
#: for the same throughput (benchmarks/RESULTS.md, issue 21, fourteenth session).
SWITCH_INTERVAL_S: Final = 0.001


class _BoundedH11(H11Protocol):
    """uvicorn's h11 protocol, with a deadline on the client's sending and a connection cap
    (the class attributes, set by :func:`bounded_h11`)."""

    header_timeout_s: float = 10.0
    max_connections: int = 512

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self.logger.warning("Connection refused: %d connections open", self.max_connections)
            transport.close()  # connection_lost follows, and forgets it
            return
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's line and headers, or the rest of this one's body

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expired)

    def _expired(self) -> None:
        """Close the connection when the client is still sending while nothing answers it:
        a request's line and headers not yet whole, or a body no route is reading."""
        answering = self.cycle is not None and not self.cycle.response_complete
        sending = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if sending and not answering and not self.transport.is_closing():
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # What uvicorn answers to a request h11 cannot read (malformed, or headers over
        # HEAD_BYTES), in the API's error shape instead of plain text.
        body = orjson.dumps({"error": "BadRequest", "detail": msg})
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


def bounded_h11(*, header_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline and a connection cap of these values.

    Args:
        header_timeout_s: seconds a client has for a request's line and headers, from the
            connection's start or the end of the previous answer.
        max_connections: connections held at once; one more is closed as it opens.

    Returns:
        The protocol class, for uvicorn's ``http`` setting.
    """
    return type(
        "BoundedH11",
        (_BoundedH11,),
        {"header_timeout_s": header_timeout_s, "max_connections": max_connections},
    )


def settings(
    *, host: str, port: int, header_timeout_s: float, max_connections: int
) -> dict[str, Any]:
    """uvicorn's settings for the service: every wait on a client bounded.

    Args:
        host: the address to listen on.
        port: the port.
        header_timeout_s: see :func:`bounded_h11`.
        max_connections: see :func:`bounded_h11`.

    Returns:
        Keyword arguments of ``uvicorn.run`` and ``uvicorn.Config`` (after the app).
    """
    return {
        "host": host,
        "port": port,
        "log_config": None,
        "access_log": False,  # the app logs its own access records (AgentLoggingMiddleware)
        "http": bounded_h11(header_timeout_s=header_timeout_s, max_connections=max_connections),
        "timeout_keep_alive": KEEP_ALIVE_S,
        "h11_max_incomplete_event_size": HEAD_BYTES,
    }


def serve(app: Any, *, host: str, port: int, header_timeout_s: float, max_connections: int) -> None:
    """Serve ``app`` (``correlator.api.create_app``) with uvicorn until interrupted, with
    :func:`settings` of these values and the interpreter handed between threads every
    :data:`SWITCH_INTERVAL_S` meanwhile."""
    import uvicorn

    given = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        uvicorn.run(
            app,
            **settings(
                host=host,
                port=port,
                header_timeout_s=header_timeout_s,
                max_connections=max_connections,
            ),
        )
    finally:
        sys.setswitchinterval(given)
