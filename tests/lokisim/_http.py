"""The HTTP side of the test server: routes, auth, tenants, faults and request records.

Response shapes follow Loki: push errors are written with Go's ``http.Error`` (plain
text plus a newline), query errors with ``server.WriteError`` (plain text, no
newline), a missing ``X-Scope-OrgID`` under ``auth_enabled`` is dskit's 401
``no org id``, and with auth disabled every request belongs to tenant ``fake``,
whatever header it carries.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from tests.lokisim._limits import Limits
from tests.lokisim._proto import DecodedPush
from tests.lokisim._push import decode_push
from tests.lokisim._query import (
    QueryError,
    QueryTimedOut,
    labels_response,
    query_range_response,
)
from tests.lokisim._store import Store

__all__ = ["Backend", "Fault", "LokiHTTPServer", "RequestRecord"]

PUSH_PATH = "/loki/api/v1/push"
_TEXT = "text/plain; charset=utf-8"
_TENANT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!-_.*'()")


@dataclass(frozen=True)
class RequestRecord:
    """One request the server received.

    Attributes:
        method: ``GET``, ``POST``...
        path: the path without the query string.
        status: the status answered; 0 when the connection was reset without one.
        headers: request headers, names lower-cased.
        content_type: the ``Content-Type`` header, ``""`` when absent.
        body_bytes: size of the body as received (still compressed).
        entries_in_body: entries a push body decodes to (0 if it does not decode).
        body: the body as received.
    """

    method: str
    path: str
    status: int
    headers: dict[str, str]
    content_type: str
    body_bytes: int
    entries_in_body: int
    body: bytes = b""


@dataclass(frozen=True)
class Fault:
    """A queued fault for one push request: ``fail``, ``stall`` or ``reset``."""

    kind: str
    status: int = 0
    retry_after_s: float | None = None
    body: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", _TEXT),)


@dataclass
class Backend:
    """State the request handlers share; every method is thread-safe."""

    store: Store
    limits: Limits
    auth_enabled: bool
    require_auth: tuple[str, str] | str | None
    delay_s: float = 0.0
    interrupt: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _faults: deque[Fault] = field(default_factory=deque)
    _records: list[RequestRecord] = field(default_factory=list)
    _connections: set[socket.socket] = field(default_factory=set)

    def add_faults(self, fault: Fault, n: int) -> None:
        """Queue ``n`` copies of a fault behind those already queued."""
        with self._lock:
            self._faults.extend([fault] * n)

    def pending_faults(self) -> int:
        """Count the queued faults not yet consumed."""
        with self._lock:
            return len(self._faults)

    def next_fault(self) -> Fault | None:
        """Take the oldest queued fault, if any."""
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def pause(self, seconds: float) -> bool:
        """Wait, unless the server stops or goes down first; True when interrupted."""
        return self.interrupt.wait(seconds)

    def record(self, record: RequestRecord) -> None:
        """Append a request record."""
        with self._lock:
            self._records.append(record)

    def records(self) -> list[RequestRecord]:
        """Return a snapshot of the request records."""
        with self._lock:
            return list(self._records)

    def track(self, connection: socket.socket, *, add: bool) -> None:
        """Remember (or forget) an open client connection."""
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        """Shut every open client connection, as a crashed process would."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class LokiHTTPServer(ThreadingHTTPServer):
    """A threading HTTP/1.1 server whose handlers reach the shared :class:`Backend`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], backend: Backend) -> None:
        """Bind (and listen on) ``address``."""
        self.backend = backend
        super().__init__(address, _Handler)


def _decode(headers: dict[str, str], body: bytes) -> DecodedPush | ValueError:
    try:
        return decode_push(headers, body)
    except ValueError as exc:
        return exc


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LokiHTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.backend.track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.backend.track(self.connection, add=False)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _dispatch(self) -> None:
        body = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        url = urlsplit(self.path)
        # Decoded once, for the request record and for the push itself.
        decoded = _decode(headers, body) if url.path == PUSH_PATH else None
        reply = self._answer(url.path, url.query, headers, body, decoded)
        # Record before answering, so a client that has its answer sees the record.
        self.server.backend.record(
            RequestRecord(
                method=self.command,
                path=url.path,
                status=0 if reply is None else reply.status,
                headers=headers,
                content_type=headers.get("content-type", ""),
                body_bytes=len(body),
                entries_in_body=decoded.entry_count() if isinstance(decoded, DecodedPush) else 0,
                body=body,
            )
        )
        if reply is None:
            self._reset()
        else:
            self._send(reply)

    def _answer(
        self,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        decoded: DecodedPush | ValueError | None,
    ) -> _Reply | None:
        backend = self.server.backend
        if path == PUSH_PATH and self.command == "POST":
            fault = backend.next_fault()
            if fault is not None and fault.kind == "fail":
                return _failure(fault)
            if fault is not None and (fault.kind == "reset" or backend.pause(fault.seconds)):
                return None
            if backend.delay_s and backend.pause(backend.delay_s):
                return None
        if path == "/ready":
            return _Reply(200, b"ready\n")
        denied = _check_auth(backend.require_auth, headers)
        if denied is not None:
            return denied
        if not path.startswith("/loki/api/v1/"):
            return _Reply(404, b"404 page not found\n")
        tenant = _tenant(backend.auth_enabled, headers)
        if isinstance(tenant, _Reply):
            return tenant
        if path == PUSH_PATH:
            if self.command != "POST" or decoded is None:
                return _Reply(405)
            return self._push(tenant, decoded)
        params = {key: values[0] for key, values in parse_qs(query).items()}
        if self.command == "POST" and headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            params.update({key: values[0] for key, values in parse_qs(body.decode()).items()})
        try:
            return _query(backend, tenant, path, params, headers)
        except QueryError as exc:
            return _Reply(400, str(exc).encode())
        except QueryTimedOut as exc:
            return _Reply(504, str(exc).encode())

    def _push(self, tenant: str, decoded: DecodedPush | ValueError) -> _Reply:
        if isinstance(decoded, ValueError):
            return _Reply(400, f"{decoded}\n".encode())
        result = self.server.backend.store.push(tenant, decoded)
        if result.status == 204:
            return _Reply(204, b"", ())
        return _Reply(
            result.status,
            f"{result.message}\n".encode(),
            (("Content-Type", _TEXT), ("X-Content-Type-Options", "nosniff")),
        )

    def _send(self, reply: _Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.status != 204:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if reply.status != 204:
            self.wfile.write(reply.body)
        self.wfile.flush()

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send a TCP RST: the client sees the connection
        # reset with no response at all.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()


def _failure(fault: Fault) -> _Reply:
    headers: tuple[tuple[str, str], ...] = (("Content-Type", _TEXT),)
    if fault.retry_after_s is not None:
        seconds = fault.retry_after_s
        # Retry-After is whole seconds (RFC 9110); fractions are only for fast tests.
        shown = str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"
        headers = (*headers, ("Retry-After", shown))
    return _Reply(fault.status, fault.body.encode(), headers)


def _check_auth(required: tuple[str, str] | str | None, headers: dict[str, str]) -> _Reply | None:
    if required is None:
        return None
    if isinstance(required, tuple):
        token = base64.b64encode(f"{required[0]}:{required[1]}".encode()).decode()
        scheme, expected, challenge = "basic", token, 'Basic realm="loki"'
    else:
        scheme, expected, challenge = "bearer", required, "Bearer"
    given_scheme, _, given = headers.get("authorization", "").partition(" ")
    if given_scheme.lower() == scheme and hmac.compare_digest(
        given.strip().encode(), expected.encode()
    ):
        return None
    return _Reply(
        401, b"unauthorized\n", (("Content-Type", _TEXT), ("WWW-Authenticate", challenge))
    )


def _tenant(auth_enabled: bool, headers: dict[str, str]) -> str | _Reply:
    if not auth_enabled:
        return "fake"
    org = headers.get("x-scope-orgid", "")
    if not org:
        return _Reply(401, b"no org id\n")
    if "|" in org:
        return _Reply(400, b"multiple org IDs present\n")
    bad = next((ch for ch in org if ch not in _TENANT_CHARS), None)
    if bad is not None:
        return _Reply(400, f"tenant ID '{org}' contains unsupported character '{bad}'\n".encode())
    if len(org) > 150:
        return _Reply(400, b"tenant ID is too long: max 150 characters\n")
    if org in (".", ".."):
        return _Reply(400, b"tenant ID is '.' or '..'\n")
    return org


def _query(
    backend: Backend, tenant: str, path: str, params: dict[str, str], headers: dict[str, str]
) -> _Reply:
    json_type = (("Content-Type", "application/json; charset=UTF-8"),)
    if path == "/loki/api/v1/query_range":
        return _Reply(
            200,
            query_range_response(backend.store, tenant, params, headers, backend.limits),
            json_type,
        )
    if path == "/loki/api/v1/labels":
        return _Reply(
            200, labels_response(backend.store, tenant, None, params, backend.limits), json_type
        )
    parts = path.split("/")
    if len(parts) == 7 and parts[4] == "label" and parts[6] == "values":
        name = unquote(parts[5])
        return _Reply(
            200, labels_response(backend.store, tenant, name, params, backend.limits), json_type
        )
    return _Reply(404, b"404 page not found\n")
