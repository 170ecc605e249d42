"""The HTTP service: JSON endpoints over the store, OpenAPI at ``/docs``, the page at ``/``.

Every error answers the ``{"error", "detail"}`` shape (:class:`ErrorBody`), as JSON. Domain
errors are mapped to HTTP statuses in one place (:data:`STATUS`); a request FastAPI cannot
validate (``limit=0``) takes the same road, as a 400. The HTTP layer's own refusals (a path
or method the service does not have, a ``Host`` it does not answer to, a body that does not
arrive in time, a failure of its own) carry the name of the refusal instead of a class
(:data:`REFUSALS`). Every route refuses a query parameter it does not declare, or one given
twice (``_parameters``); what the schema says beyond FastAPI's inference is in ``_openapi``.
Writes need the bearer token ``CORRELATOR_TOKEN`` (compared in constant time); reads need
``CORRELATOR_READ_TOKEN`` when it is set.

Concurrency follows datasette's model: one writer, serialised, and readers on cursors of their
own (``Store``). Reads are answered by a bounded set of threads (``read_threads``) and rendered
to JSON there, so that the event loop only moves bytes: a burst of reads waits its turn on the
loop, without a thread each, and ``/healthz`` (answered on the loop), the writes (a thread of
their own) and the checks of every request (token, query, ``Host``: coroutines) never wait
behind it: a burst begins a few requests a turn of the loop (:class:`Turns`), and an answer
is rendered, kept and sent in pieces (:func:`_render`, :class:`_Answer`), so that no single
step of a burst, in a read thread or on the loop, holds the interpreter long.
Identical reads in flight share one answer, and an answer is kept and given again until the
next write (:class:`_Answers`); the store keeps the reads answers are built from likewise
(``Store.cache``), so that timelines of one incident share them. A request's body is
streamed into the ingest in the chunks it arrives in, under a size cap and a deadline: never
held whole, nor as a list of its lines. A service started with a Loki pulls a timeline's
incident from it first, as a write (``_pulls``).
"""

from __future__ import annotations

import asyncio
import hmac
import io
import ipaddress
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from agent_logging.owner import DEFAULT_RULES, OwnerRule
from agent_logging.schema import rfc3339_ns
from correlator import _environ, incident, queries, sources
from correlator._openapi import (
    EVIDENCE_BODY,
    READ_BEARER,
    WRITE_BEARER,
    Credentials,
    ErrorBody,
    Service,
    errors,
    invalid,
)
from correlator._parameters import TIME, Posted, check_query, seed, source_parameters
from correlator._pulls import Pulls, since_parameter
from correlator._read_cache import DEFAULT_MAX_BYTES, ReadCache
from correlator.errors import (
    AuthError,
    CorrelatorError,
    InputError,
    NotFoundError,
    QueryError,
    SourceError,
    TooLargeError,
)
from correlator.ingest import ingest_lines, read_lines
from correlator.store import IngestResult, Store

__all__ = [
    "BEGUN_PER_TURN",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_READ_THREADS",
    "HOST_REFUSAL",
    "LOOPBACK_NAMES",
    "REFUSALS",
    "STATUS",
    "ErrorBody",
    "Failures",
    "HostCheck",
    "Turns",
    "create_app",
]

#: The one place domain errors become HTTP statuses (most specific class first).
STATUS: Final[tuple[tuple[type[CorrelatorError], int], ...]] = (
    (TooLargeError, 413),
    (InputError, 400),
    (QueryError, 400),
    (NotFoundError, 404),
    (AuthError, 401),
    (SourceError, 502),
    (CorrelatorError, 500),
)
#: The ``error`` of the HTTP layer's own refusals, by status: no domain class names them.
REFUSALS: Final = {
    404: "NoSuchPath",
    405: "MethodNotAllowed",
    408: "BodyTimeout",
    500: "InternalError",
}
#: What ``error`` says when a request's ``Host`` is not one the service answers to (a 400).
HOST_REFUSAL: Final = "HostNotAllowed"
DEFAULT_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
#: Reads answered at once. A read is Python holding the GIL between DuckDB queries that let
#: go of it (DuckDB runs each query on both cores), and every thread more is one more waiting
#: for the GIL beside the event loop, which /healthz needs. Since the store keeps its reads
#: until the next write, most of a burst's work is Python: with 200 distinct timelines of the
#: 10^6 store, 2 threads answered 39 requests/s with /healthz p95 39 ms (max 108), 4 35/s
#: and 73 ms (287), 8 33/s and 169 ms (344), in the same minutes (3 rounds each, load average
#: 5-6 on 2 cores); on the small store 2 and 8 answered alike (141 and 144/s). Before the
#: store kept its reads, 8 had kept both cores busier than 4; 16 doubled /healthz's p95, and
#: 32-40 made it 0.3-1.3 s. A busy node's answer is 100-200 MB while it is built
#: (benchmarks/RESULTS.md, issue 21; Starlette's shared pool ran 40).
DEFAULT_READ_THREADS: Final = 2
DEFAULT_BODY_TIMEOUT_S: Final = 60.0
#: Requests begun in one turn of the event loop at most (:class:`Turns`).
BEGUN_PER_TURN: Final = 8
#: What the answers kept until the next write may take (rendered JSON), and likewise the
#: store's reads they were built from (``Store.cache``): each, an estimate.
DEFAULT_CACHE_BYTES: Final = DEFAULT_MAX_BYTES
#: Names a client on the machine itself reaches the service by; answered on a loopback
#: connection only.
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
_WEB: Final = Path(__file__).with_name("web")
_PAGE: Final = _WEB / "index.html"
#: The buffer between a body's chunks and ``read_lines``: what one read of the chunks takes.
_BODY_BUFFER_BYTES: Final = 64 * 1024
_log = agent_logging.get_logger("correlator.api")


def _given(credentials: Credentials) -> str | None:
    return credentials.credentials if credentials is not None else None


def _matches(given: str | None, *expected: str | None) -> bool:
    return given is not None and any(
        e is not None and hmac.compare_digest(given.encode(), e.encode()) for e in expected
    )


def _error(
    status: int, error: str, detail: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An :class:`ErrorBody` answer: every error the service gives goes through here."""
    return JSONResponse({"error": error, "detail": detail}, status, headers)


#: An answer in pieces of its JSON, in order (:func:`_render`): what is kept and sent.
_Pieces = tuple[bytes, ...]
#: About how much of an answer's JSON one piece holds: one message to the connection on the
#: event loop. A busy node's 10,000 events are 8 MB of JSON: rendered by one orjson call it
#: held the interpreter for 11 ms of CPU (the event loop, and /healthz, waiting the while),
#: and sent at once it was copied on the loop three times (the stamp, h11's framing, the
#: transport's buffer), 12-15 ms of the loop's CPU.
_PIECE_BYTES: Final = 256 * 1024
#: Items of a long list rendered by one orjson call (an event is 0.3-2 KB of JSON).
_SLICE_ITEMS: Final = 256


def _render(
    data: Any, *, slice_items: int = _SLICE_ITEMS, piece_bytes: int = _PIECE_BYTES
) -> _Pieces:
    """An answer rendered to JSON once, as the CLI's ``--json`` renders it (``orjson``; what
    it cannot render, as text), without FastAPI's validation and re-encoding of every
    value: that costs more than the query for a busy node's 10,000 events.

    The pieces joined are ``orjson.dumps(data, default=str)`` byte for byte; each is about
    ``piece_bytes`` (the last may be less; an answer under it is one piece). A long list at
    the top, or as the value of a key of the top object (a timeline's ``events``), is
    rendered ``slice_items`` items at a time, so that no orjson call holds the interpreter
    long (it does not let go of it while it works).
    """
    pieces: list[bytes] = []
    pending: list[bytes | memoryview] = []
    size = 0
    for part in _parts(data, slice_items):
        pending.append(part)
        size += len(part)
        if size >= piece_bytes:
            pieces.append(b"".join(pending))
            pending, size = [], 0
    if pending or not pieces:
        pieces.append(b"".join(pending))
    return tuple(pieces)


def _parts(data: Any, slice_items: int) -> Iterator[bytes | memoryview]:
    """The JSON of ``data`` (orjson's, exactly) in consecutive parts (:func:`_render`)."""
    dumps = orjson.dumps
    if isinstance(data, list):
        yield from _list_parts(data, slice_items)
    elif isinstance(data, dict) and all(type(key) is str for key in data):
        # orjson writes an object as {"key":value,...}, in insertion order, no spaces.
        yield b"{"
        for index, (key, value) in enumerate(data.items()):
            yield b"".join((b"," if index else b"", dumps(key), b":"))
            if isinstance(value, list):
                yield from _list_parts(value, slice_items)
            else:
                yield dumps(value, default=str)
        yield b"}"
    else:
        yield dumps(data, default=str)


def _list_parts(items: list[Any], slice_items: int) -> Iterator[bytes | memoryview]:
    """A list's JSON, ``slice_items`` items a part: ``[`` + each slice's items + ``]``."""
    if len(items) <= slice_items:
        yield orjson.dumps(items, default=str)
        return
    yield b"["
    for start in range(0, len(items), slice_items):
        if start:
            yield b","
        rendered = orjson.dumps(items[start : start + slice_items], default=str)
        yield memoryview(rendered)[1:-1]  # without its brackets, not copied
    yield b"]"


class _Answer(Response):
    """A rendered answer (:data:`_Pieces`), sent a piece at a time with its whole length
    declared, as ``application/json``: the event loop never copies more than a piece at
    once, and between two pieces of a big answer to a slow reader it answers others
    (uvicorn waits for the connection's buffer to drain before it takes the next)."""

    media_type = "application/json"

    def __init__(self, pieces: _Pieces) -> None:
        self.pieces = pieces
        super().__init__(headers={"content-length": str(sum(map(len, pieces)))})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        last = len(self.pieces) - 1
        for index, piece in enumerate(self.pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": index < last})


def _json(data: Any) -> Response:
    """A small answer (the ingest's counts, /healthz), rendered on the event loop."""
    return Response(orjson.dumps(data, default=str), media_type="application/json")


def _unstamped(answer: dict[str, Any]) -> dict[str, Any]:
    """A timeline without its ``generated_at`` (its last key), to be kept: :func:`_stamped`
    gives it the time of each request it answers."""
    answer.pop("generated_at", None)
    return answer


def _stamped(rendered: _Pieces, **added: Any) -> _Pieces:
    """A rendered :func:`_unstamped` answer (a JSON object, not empty) with ``added`` keys
    (what this request did besides reading: its pull from Loki) and ``generated_at`` the time
    it is given, as its last key: an answer kept since an earlier request shows the evidence
    as it is now (no write came since), so it says now. Only the last piece is copied."""
    stamp = orjson.dumps(rfc3339_ns(time.time_ns()))
    keys = [
        b"".join((b",", orjson.dumps(k), b":", orjson.dumps(v, default=str)))
        for k, v in added.items()
    ]
    *head, last = rendered
    return (*head, b"".join((memoryview(last)[:-1], *keys, b',"generated_at":', stamp, b"}")))


# -- Host ----------------------------------------------------------------------------------


def _host_name(value: str) -> str:
    """The name of a ``Host`` header, without its port: ``[::1]:8080`` → ``[::1]``."""
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end > 0 else value
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def _as_host(name: str) -> str:
    """A host name as a ``Host`` header writes it, without a port: lower case, an IPv6
    address in brackets (``::1`` → ``[::1]``, ``Example.ORG:443`` → ``example.org``)."""
    name = name.strip().lower()
    try:
        return f"[{ipaddress.IPv6Address(name)}]"
    except ValueError:
        return _host_name(name)


def _own_names(server: tuple[str, int | None] | None) -> set[str]:
    """The names of the address a connection arrived on (``scope["server"]``), and the
    loopback names when that address is a loopback one."""
    if server is None:
        return set()
    address = server[0].lower()
    names = {_as_host(address)}
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return names
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    if ip.is_loopback or (mapped is not None and mapped.is_loopback):
        names |= LOOPBACK_NAMES
    return names


class HostCheck:
    """ASGI middleware: a request whose ``Host`` the service does not answer to is a 400.

    A web page cannot read another origin's answers, unless its own name resolves to the
    service (DNS rebinding: ``evil.example`` first resolves to the attacker, then to
    127.0.0.1): its requests then carry ``Host: evil.example``. So the ``Host`` must name the
    address the connection arrived on (the IP of ``--host``, or the one of the interface for
    ``0.0.0.0``), one of :data:`LOOPBACK_NAMES` on a loopback connection, or one of
    ``allowed`` (the name given to ``--host``, those of ``CORRELATOR_ALLOWED_HOSTS``). The
    port is not compared: a page cannot choose the port its browser writes, only the name
    that resolves. ``*`` in ``allowed`` turns the check off.

    Args:
        app: the application.
        allowed: host names answered besides the connection's own address.
    """

    def __init__(self, app: ASGIApp, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = frozenset(_as_host(name) for name in allowed if name.strip())
        self.everything = "*" in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.everything:
            refusal = self.refusal(scope)
            if refusal is not None:
                await _error(400, HOST_REFUSAL, refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> str | None:
        """Why the request's ``Host`` is refused, or None when it is answered."""
        hosts = [value for name, value in scope["headers"] if name == b"host"]
        if len(hosts) != 1:
            return "a request must carry one Host header"
        value = hosts[0].decode("latin-1").strip().lower()
        name = _host_name(value)
        own = _own_names(scope.get("server"))
        if name in own or name in self.allowed:
            return None
        known = ", ".join(sorted(own | self.allowed)) or "none"
        return (
            f"Host {value[:100]!r} is not a name of this service (it answers {known}); "
            f"if it is one, add it to {_environ.ALLOWED_HOSTS}"
        )


class Failures:
    """ASGI middleware: an exception no handler took is logged, with its traceback and the
    request's identifiers, and answered as a 500 :class:`ErrorBody` that tells the client
    nothing of it but where to look (its ``X-Correlation-ID``).

    Args:
        app: the application.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            _log.error("request failed", exc_info=exc, path=scope.get("path", ""))
            if started:  # half an answer is out: only closing the connection tells the client
                raise
            detail = (
                "the service failed to answer; its log says why, under this answer's "
                "X-Correlation-ID"
            )
            await _error(500, REFUSALS[500], detail)(scope, receive, send)


class Turns:
    """ASGI middleware: at most ``per_turn`` requests begin in one turn of the event loop;
    the others wait for the next turns, in the order they came. ``/healthz`` never waits.

    A turn of asyncio's loop runs every callback that was ready when it began, then looks at
    the sockets again. 200 requests arriving together each ran their whole work in the same
    turn (FastAPI's dependencies, an answer kept since the last write, its access record:
    about 0.9 ms of CPU each here), and a /healthz sent just after them waited 60-210 ms for
    that turn to end (benchmarks/RESULTS.md, issue 21, fourteenth session). With the burst
    begun a few requests a turn, each turn is short, and /healthz is read and answered
    between two of them.

    Args:
        app: the application.
        per_turn: requests begun in one turn at most.
        exempt: paths that never wait.
    """

    def __init__(
        self, app: ASGIApp, per_turn: int, exempt: frozenset[str] = frozenset({"/healthz"})
    ) -> None:
        self.app = app
        self.per_turn = per_turn
        self.exempt = exempt
        self._begun = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._turning = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.exempt:
            await self._begin()
        await self.app(scope, receive, send)

    async def _begin(self) -> None:
        """Return in this turn when it has room and nobody waits before; else in a later one."""
        self._next_turn()
        if self._begun < self.per_turn and not self._waiting:
            self._begun += 1
            return
        waiting = asyncio.get_running_loop().create_future()
        self._waiting.append(waiting)
        await waiting  # counted as begun when it was let go

    def _next_turn(self) -> None:
        if not self._turning:
            self._turning = True
            asyncio.get_running_loop().call_soon(self._turned)

    def _turned(self) -> None:
        """At the next turn: let go of the next ``per_turn`` that wait (they begin in the one
        after), and come again while some are left."""
        self._turning = False
        self._begun = 0
        while self._waiting and self._begun < self.per_turn:
            waiting = self._waiting.popleft()
            if not waiting.done():  # not a request cancelled while it waited
                waiting.set_result(None)
                self._begun += 1
        if self._waiting or self._begun:
            self._next_turn()


# -- reads ---------------------------------------------------------------------------------


class _Answers:
    """Identical reads in flight share one answer (Go's ``singleflight``), and an answer is
    kept and given again until the next write.

    When 30 people open the timeline an incident channel links to, or a page is reloaded
    while its first load is still being answered, the first request computes the answer and
    those that arrive while it does wait for the same bytes: one computation instead of 30,
    and nothing older than what a request queued behind the first would get. Those that come
    later get the kept bytes (the least recently used dropped past ``max_bytes``), until the
    store's write generation (``generation()``, ``Store.generation``) moves: a request that
    comes after a write has committed never joins a computation that began before it, nor
    gets an answer kept from before it. A failure is shared by the requests in flight, not
    kept.

    Args:
        generation: the store's write generation now.
        max_bytes: what the kept answers may take in all; 0 keeps none.
    """

    def __init__(self, generation: Callable[[], int], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._generation = generation
        self._kept = ReadCache(max_bytes)
        self._flying: dict[tuple[Any, ...], asyncio.Future[_Pieces]] = {}

    async def answer(
        self,
        key: tuple[Any, ...],
        compute: Callable[[], Coroutine[Any, Any, _Pieces]],
        *,
        keep: bool = True,
    ) -> _Pieces:
        """The answer of ``compute()`` for ``key``: kept, in flight, or a new one.

        Args:
            key: what identifies the answer (the route and its parameters).
            compute: computes it.
            keep: keep it once computed (False for answers that depend on the time).

        Raises:
            Whatever ``compute`` raised, to every request that shared it.
        """
        generation = self._generation()
        kept: _Pieces | None = self._kept.get(generation, key) if keep else None
        if kept is not None:
            return kept
        flown = (generation, keep, *key)
        flight = self._flying.get(flown)
        if flight is None:
            # A task of its own: a client that leaves does not cancel the others' answer.
            flight = asyncio.ensure_future(compute())
            self._flying[flown] = flight
            flight.add_done_callback(partial(self._landed, flown))
        return await asyncio.shield(flight)

    def _landed(self, flown: tuple[Any, ...], flight: asyncio.Future[_Pieces]) -> None:
        self._flying.pop(flown, None)
        if flight.cancelled() or flight.exception() is not None:
            return  # the exception retrieved here: every waiter may have gone
        generation, keep, *key = flown
        if keep:
            answer = flight.result()
            self._kept.put(generation, tuple(key), answer, sum(map(len, answer)))


# -- request bodies ------------------------------------------------------------------------


class _BodyTimeout(Exception):
    """The body did not arrive within the deadline."""


class _BodyStream(io.RawIOBase):
    """A request body as a blocking binary stream, for the ingest's worker thread.

    Each read takes the next chunk from the event loop (``anyio.from_thread``), where
    ``next_chunk`` awaits it, so that no more than a chunk or two is held at once, whatever
    the body's size or shape: a 64 MiB body of newlines is read as 64 MiB of chunks by
    ``read_lines``, not split into 64 million ``bytes`` first.
    """

    def __init__(self, next_chunk: Callable[[], Coroutine[Any, Any, bytes]]) -> None:
        super().__init__()
        self._next_chunk = next_chunk
        self._chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._chunk:
            self._chunk = memoryview(anyio.from_thread.run(self._next_chunk))
        size = min(len(buffer), len(self._chunk))
        buffer[:size] = self._chunk[:size]
        self._chunk = self._chunk[size:]
        return size


def _chunks(
    request: Request, limit: int, timeout_s: float
) -> Callable[[], Coroutine[Any, Any, bytes]]:
    """``next_chunk()`` of ``request``'s body: the next non-empty chunk, ``b""`` at its end.

    Raises (from ``next_chunk``):
        TooLargeError: the body grew over ``limit`` bytes.
        _BodyTimeout: waiting for the body took more than ``timeout_s`` in all (the time
            the ingest spends between chunks not counted: a slow store is not the client's).
        ClientDisconnect: the client went away before the body ended.
    """
    receive = request.receive
    received = 0
    waited_s = 0.0
    ended = False

    async def next_chunk() -> bytes:
        nonlocal received, waited_s, ended
        while not ended:
            started = time.monotonic()
            with anyio.move_on_after(max(timeout_s - waited_s, 0.0)) as waiting:
                message = await receive()
            waited_s += time.monotonic() - started
            if waiting.cancelled_caught:
                raise _BodyTimeout(
                    f"the request body did not arrive within {timeout_s:g} s "
                    f"({received:,} bytes came); send it at once"
                )
            if message["type"] == "http.disconnect":
                raise ClientDisconnect
            chunk: bytes = message.get("body", b"")
            ended = not message.get("more_body", False)
            received += len(chunk)
            if received > limit:
                raise TooLargeError(f"request body is over {limit} bytes; split the evidence")
            if chunk:
                return chunk
        return b""

    return next_chunk


def _declared_length(request: Request) -> int | None:
    text = request.headers.get("content-length", "")
    return int(text) if text.isdigit() else None


# -- the application -----------------------------------------------------------------------


def create_app(
    store: Store,
    *,
    token: str | None,
    read_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    read_threads: int = DEFAULT_READ_THREADS,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    allowed_hosts: Sequence[str] = (),
    now_ns: Callable[[], int] = time.time_ns,
    source_options: Mapping[str, Mapping[str, Any]] | None = None,
    owner_rules: Sequence[OwnerRule] = DEFAULT_RULES,
    loki: Pulls | None = None,
) -> FastAPI:
    """The FastAPI application over ``store``.

    Args:
        store: the evidence store (the app never closes it).
        token: bearer token for writes; None refuses every write.
        read_token: bearer token for reads; None leaves reads open.
        max_body_bytes: cap on ``POST /v1/evidence`` bodies.
        body_timeout_s: how long ``POST /v1/evidence`` waits for its body in all.
        read_threads: reads answered at once; the others wait their turn.
        cache_bytes: what answers kept until the next write may take (:class:`_Answers`),
            and likewise the store's reads they are built from (``Store.cache``, set here);
            0 keeps none.
        allowed_hosts: host names answered besides the address each connection arrives on
            (and the loopback names on a loopback connection): ``HostCheck``; ``"*"``
            answers any.
        now_ns: the clock findings measure ages against.
        source_options: the values of sources' options a post does not give, by source
            and option name (``sources.environ_values()``: nginx's zone from
            ``CORRELATOR_NGINX_TZ``); otherwise each option's default.
        owner_rules: the owner table the timeline's verdict applies.
        loki: the pulls from Loki each ``GET /v1/timeline`` makes first (``_pulls``); None
            (no Loki) leaves the route, and its schema, as they are without.

    Returns:
        The application; its schema (``/openapi.json``, ``/docs``) lists the read token only
        when ``read_token`` is set.

    Raises:
        ValueError: ``read_threads`` is under 1.
    """
    if read_threads < 1:
        raise ValueError(f"read_threads must be at least 1, not {read_threads}")
    app = Service(
        # /docs with the assets served here (_docs_routes), not from a CDN: the API's own
        # documentation must render on an operator's machine without internet.
        docs_url=None,
        redoc_url=None,
        title="evidence-pipeline correlator",
        version="0.1.0",
        description="One incident timeline across node, ingress, API, workflow and DB evidence."
        '\n\nEvery error answers `{"error", "detail"}` as JSON. A request\'s `Host` must '
        "name the service (its address, `localhost` on a loopback connection, or a name in "
        f"{_environ.ALLOWED_HOSTS}), else it is a 400 `HostNotAllowed`: a web page cannot "
        "read the service through DNS rebinding.",
    )
    # The first added is the innermost: a failure is answered inside the access log's
    # middleware, which adds the X-Correlation-ID its record is found by; refused hosts are
    # logged too, and so is the time a request waited for its turn.
    app.add_middleware(Failures)
    app.add_middleware(HostCheck, allowed=allowed_hosts)
    app.add_middleware(Turns, per_turn=BEGUN_PER_TURN)
    app.add_middleware(AgentLoggingMiddleware)
    readers = anyio.CapacityLimiter(read_threads)
    # The store's one writer is serialised by its lock: a thread more would only wait there.
    writer = anyio.CapacityLimiter(1)
    answers = _Answers(lambda: store.generation, cache_bytes)
    store.cache.max_bytes = cache_bytes
    # What /healthz says the store holds: counted at start and after each write, on the
    # writer's thread, so that answering it needs no thread and no query.
    held = {"events": store.count()}

    async def read(
        key: tuple[Any, ...], answer: Callable[[], Any], *, keep: bool = True
    ) -> _Pieces:
        """``answer()`` on a read thread, rendered there (a big answer's JSON is built off
        the event loop), shared with the identical reads (``key``) that arrive meanwhile and
        (``keep``) kept for those after, until the next write."""

        async def compute() -> _Pieces:
            return await anyio.to_thread.run_sync(lambda: _render(answer()), limiter=readers)

        return await answers.answer(key, compute, keep=keep)

    @app.exception_handler(CorrelatorError)
    async def domain_error(request: Request, exc: CorrelatorError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status == 413:  # the rest of the body is not read: the connection cannot go on
            headers = {"Connection": "close"}
        return _error(status, type(exc).__name__, str(exc), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # A bad parameter is a QueryError like those the routes raise: same status, same shape.
        return await domain_error(request, QueryError(invalid(exc)))

    @app.exception_handler(HTTPException)
    async def refused(request: Request, exc: HTTPException) -> JSONResponse:
        # Starlette's own: a path (or static file) the service does not have, a method a
        # path does not take (with its Allow header).
        name = REFUSALS.get(exc.status_code) or HTTPStatus(exc.status_code).phrase.replace(" ", "")
        detail = {
            404: f"no such path: {request.url.path[:200]!r}; the API is described at /docs",
            405: f"{request.url.path[:200]!r} does not take {request.method}",
        }.get(exc.status_code, str(exc.detail))
        return _error(exc.status_code, name, detail, dict(exc.headers or {}))

    @app.exception_handler(_BodyTimeout)
    async def body_timeout(request: Request, exc: _BodyTimeout) -> JSONResponse:
        return _error(408, REFUSALS[408], str(exc), {"Connection": "close"})

    @app.exception_handler(ClientDisconnect)
    async def gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # Nobody reads this answer; it keeps the log free of a traceback for a client's exit.
        return _error(400, "ClientDisconnect", "the client went away before its body ended")

    async def require_write(credentials: Annotated[Credentials, Depends(WRITE_BEARER)]) -> None:
        if token is None:
            raise AuthError("writes are disabled: start the service with CORRELATOR_TOKEN set")
        if not _matches(_given(credentials), token):
            raise AuthError("POST /v1/evidence needs 'Authorization: Bearer <CORRELATOR_TOKEN>'")

    async def require_read(credentials: Annotated[Credentials, Depends(READ_BEARER)]) -> None:
        if not _matches(_given(credentials), read_token, token):
            raise AuthError("reads need 'Authorization: Bearer <CORRELATOR_READ_TOKEN>'")

    # The sources' options a post does not give, from the environment when the service
    # started; the kinds and parameters it takes are the registry's when the app is made.
    defaults = source_options or {}

    # Reads are guarded (and the schema says so) only when a read token is set.
    reads = [Depends(require_read)] if read_token is not None else []
    read_refusals = (401,) if read_token is not None else ()

    async def post_evidence(request: Request, posted: Posted) -> Response:
        """Ingest an NDJSON (or native log) body; returns accepted/duplicate/rejected counts."""
        source, texts = posted
        options = sources.query_values(sources.SOURCES[source], texts, defaults.get(source, {}))
        declared = _declared_length(request)
        if declared is not None and declared > max_body_bytes:
            raise TooLargeError(f"request body is over {max_body_bytes} bytes; split the evidence")
        body = io.BufferedReader(
            _BodyStream(_chunks(request, max_body_bytes, body_timeout_s)), _BODY_BUFFER_BYTES
        )
        # The body is read as the ingest asks for it, on the writer's thread: one
        # transaction, so a body refused half-way (too large, too slow) leaves nothing.

        def ingest() -> IngestResult:
            try:
                return ingest_lines(store, source, read_lines(body), "http", options=options)
            finally:
                held["events"] = store.count()

        # Committed, the store's generation has moved: reads from now on compute afresh.
        result = await anyio.to_thread.run_sync(ingest, limiter=writer)
        _log.info("evidence ingested", source=source, **result.as_dict())
        return _json(result.as_dict())

    # The kinds and parameters are the registry's when the app is made: a real annotation,
    # not the text FastAPI would look up among this module's names.
    post_evidence.__annotations__["posted"] = Annotated[Posted, Depends(source_parameters())]
    app.post(
        "/v1/evidence",
        dependencies=[Depends(require_write), Depends(check_query)],
        responses=errors(400, 401, 408, 413),
        openapi_extra={"requestBody": EVIDENCE_BODY},
        response_model=dict[str, Any],
    )(post_evidence)

    async def write(job: Callable[[], Any]) -> Any:
        """``job()`` where the writes run (a pull from Loki), then the count /healthz says."""

        def written() -> Any:
            try:
                return job()
            finally:
                held["events"] = store.count()

        return await anyio.to_thread.run_sync(written, limiter=writer)

    async def get_timeline(
        seed: Annotated[tuple[str, str], Depends(seed)],
        since: str | None,
        from_: Annotated[str | None, Query(alias="from", description=TIME)] = None,
        to: Annotated[str | None, Query(description=TIME)] = None,
        limit: Annotated[
            int, Query(ge=1, le=queries.MAX_LIMIT, description="At most this many events.")
        ] = incident.DEFAULT_LIMIT,
    ) -> Response:
        """The incident timeline for one identifier (``?allocation_id=a-9``); from a service
        started with a Loki, pulled from it first (``since``, ``from`` and ``to`` the window
        asked), with what was asked under ``loki``."""
        key, value = seed
        lo = queries.parse_time_ns(from_) if from_ else None
        hi = queries.parse_time_ns(to) if to else None
        added: dict[str, Any] = {}
        if loki is not None:
            pulled = await loki.pull(
                store, key, value, since=since, start=from_, end=to, write=write
            )
            added["loki"] = pulled.as_dict()
        kept = await read(
            ("timeline", key, value, lo, hi, limit),
            lambda: _unstamped(
                incident.timeline_for(
                    store, key, value, from_ns=lo, to_ns=hi, limit=limit, rules=owner_rules
                )
            ),
        )
        return _Answer(_stamped(kept, **added))

    # ``since`` is declared only when the service pulls from Loki (``_pulls``): a real
    # annotation, made when the app is, as the evidence route's parameters are.
    get_timeline.__annotations__["since"] = Annotated[
        str | None, Depends(since_parameter(loki is not None))
    ]
    app.get(
        "/v1/timeline",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals, 404, *((502,) if loki is not None else ())),
        response_model=dict[str, Any],
    )(get_timeline)

    @app.get(
        "/v1/graph",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals, 404),
        response_model=dict[str, Any],
    )
    async def get_graph(seed: Annotated[tuple[str, str], Depends(seed)]) -> Response:
        """The identifier graph from one identifier: followed and refused links."""
        key, value = seed
        return _Answer(
            await read(("graph", key, value), partial(incident.graph_for, store, key, value))
        )

    @app.get(
        "/v1/findings",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals),
        response_model=dict[str, Any],
    )
    async def get_findings() -> Response:
        """Stuck lifecycles, drift and orphans."""
        # Ages are measured against the time: shared in flight (as old as the computation's
        # start), never kept.
        return _Answer(
            await read(("findings",), lambda: queries.findings(store, now_ns()), keep=False)
        )

    @app.get(
        "/v1/latency",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals),
        response_model=dict[str, Any],
    )
    async def get_latency() -> Response:
        """Per-phase workflow durations by provider: count, p50, p95."""
        return _Answer(await read(("latency",), partial(queries.latency, store)))

    @app.get(
        "/healthz",
        dependencies=[Depends(check_query)],
        responses=errors(400),
        response_model=dict[str, Any],
    )
    async def healthz() -> Response:
        """Liveness: the service answers. Answered on the event loop from what it knows, with
        no thread and no query, so that neither a burst of reads nor a long ingest delays it
        (a probe that failed under load would have the service restarted when it is needed
        most). ``events``: what the store held at the last write, or at start. It takes no
        token (probes have none), so when reads need one it says no more than ``ok``."""
        return _json({"status": "ok"} if read_token is not None else {"status": "ok", **held})

    if _WEB.is_dir():  # the page's script and style; an install without package data has none
        app.mount("/static", StaticFiles(directory=_WEB), name="static")
    _docs_routes(app)

    # No check_query here: the page's own script reads its query (?allocation_id=...).
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(_PAGE.read_text("utf-8") if _PAGE.exists() else _FALLBACK_PAGE)

    return app


#: Where Swagger UI is served from: the files the ``fastapi-offline`` package ships.
DOCS_ASSETS: Final = "/docs-assets"


def _docs_routes(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) with its script and style served by the service itself, from the
    ``fastapi-offline`` package (maintained; it ships current Swagger UI builds), instead of
    FastAPI's default CDN links. ReDoc is not served: its page loads a logo from its CDN."""
    from importlib.resources import files

    from fastapi.openapi.docs import get_swagger_ui_html

    assets = Path(str(files("fastapi_offline") / "static"))
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")
    title = f"{app.title} — API"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            # Its default sends the schema's address to validator.swagger.io for a badge.
            swagger_ui_parameters={"validatorUrl": None},
        )


_FALLBACK_PAGE: Final = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>correlator</title></head><body><h1>correlator</h1>
<p>JSON API: <a href="/docs">/docs</a>. Try <code>/v1/findings</code> or
<code>/v1/timeline?allocation_id=...</code>.</p></body></html>"""
