"""ASGI middleware: identifiers from incoming headers, bound for the whole request.

For every HTTP request it reads ``traceparent``, ``baggage`` and ``X-Correlation-ID``, mints a
``correlation_id`` (and a trace) when none arrives, binds them for the request, echoes
``X-Correlation-ID`` on the response, and logs one access record (method, path, status,
duration). Works with FastAPI, Starlette or any ASGI 3 application::

    app.add_middleware(AgentLoggingMiddleware)

The middleware sends the identifiers nowhere itself: the library's outbound hooks
(:mod:`agent_logging.integrations.httpx`, :mod:`agent_logging.integrations.requests`) add them
to requests for the hosts in ``propagate_hosts`` only (DESIGN §3: baggage leaks to third
parties). They are not copied into OpenTelemetry baggage unless ``otel_baggage=True``:
OpenTelemetry's propagator would send them with every request of every instrumented client,
to any host.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from agent_logging._config import get_logger
from agent_logging.context import _context, _otel
from agent_logging.context._ids import new_correlation_id, new_span_id, new_trace_id
from agent_logging.context._propagation import CORRELATION_HEADER, parse_headers
from agent_logging.schema import IDENTIFIER_KEYS

__all__ = ["AgentLoggingMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_access_log = get_logger("agent_logging.access")
_ECHO_HEADER = CORRELATION_HEADER.lower().encode("latin-1")


class AgentLoggingMiddleware:
    """Bind request identifiers, echo ``X-Correlation-ID``, log one access record.

    Args:
        app: the ASGI application.
        access_log: log one record per request (``event="request"``).
        quiet_paths: paths whose successful requests are not logged (health probes).
        otel_baggage: also put the identifiers into OpenTelemetry baggage for the request.
            OpenTelemetry's propagator then sends them wherever it propagates: with every
            request of every OpenTelemetry-instrumented client, to any host, whatever
            ``propagate_hosts`` says. Off by default; turn it on only if every host the
            service calls through such clients may see them.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        access_log: bool = True,
        quiet_paths: frozenset[str] | set[str] | tuple[str, ...] = ("/healthz", "/readyz"),
        otel_baggage: bool = False,
    ) -> None:
        self.app = app
        self.access_log = access_log
        self.quiet_paths = frozenset(quiet_paths)
        self.otel_baggage = otel_baggage

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        incoming, problems = parse_headers(scope.get("headers") or ())
        parent_span_id = incoming.pop("span_id", None)
        ids = dict(incoming)
        if "correlation_id" not in ids:
            ids["correlation_id"] = new_correlation_id()
        if "trace_id" not in ids:
            ids["trace_id"] = new_trace_id()
        ids["span_id"] = new_span_id()
        token = _context.set_ids({**_context.current(), **ids})
        baggage_token = (
            _otel.attach_baggage({k: ids[k] for k in IDENTIFIER_KEYS if k in ids})
            if self.otel_baggage
            else None
        )
        echo = ids["correlation_id"].encode("latin-1")
        status = 500
        response_started = False
        failure: BaseException | None = None
        started = time.perf_counter()

        async def send_with_echo(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = [h for h in message.get("headers", ()) if h[0].lower() != _ECHO_HEADER]
                headers.append((_ECHO_HEADER, echo))
                message = {**message, "headers": headers}
            await send(message)

        try:
            for problem in problems:
                _access_log.warning("incoming identifier ignored", problem=problem)
            await self.app(scope, receive, send_with_echo)
        except Exception as exc:
            failure = exc
            if scope["type"] == "http" and not response_started:
                # Answer here so the 500 still echoes the correlation id the caller needs to
                # find this failure; the framework sees the exception after that.
                await send_with_echo(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send({"type": "http.response.body", "body": b"Internal Server Error"})
            raise
        finally:
            if self.access_log and (status >= 400 or scope.get("path") not in self.quiet_paths):
                fields: dict[str, Any] = {
                    "method": scope.get("method", "GET"),
                    "path": scope.get("path", ""),
                    "status": status,
                    "duration_s": round(time.perf_counter() - started, 6),
                }
                if parent_span_id is not None:
                    fields["parent_span_id"] = parent_span_id
                client = scope.get("client")
                if client:
                    fields["client"] = client[0]
                if failure is not None:
                    _access_log.error("request", exc_info=failure, **fields)
                elif status >= 500:
                    _access_log.error("request", **fields)
                else:
                    _access_log.info("request", **fields)
            _otel.detach(baggage_token)
            _context.reset(token)
