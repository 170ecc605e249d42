"""``correlator serve``'s server over real sockets (issue 21): a client that sends slowly is cut
off, connections are capped, and what h11 cannot read is answered in the API's error shape."""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn

from correlator import api
from correlator._server import HEAD_BYTES, KEEP_ALIVE_S, SWITCH_INTERVAL_S, settings
from correlator.api import HostCheck, create_app
from correlator.cli import main
from correlator.store import Store
from tests.servers import free_port

pytestmark = pytest.mark.integration

TOKEN = "s3cret-write-token"
WAIT_S = 10.0  # how long a test waits for what happens at once when all is well
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@contextmanager
def served(
    app: Any, *, header_timeout_s: float = WAIT_S, max_connections: int = 512
) -> Iterator[int]:
    """``app`` served on a free loopback port with the service's uvicorn settings."""
    port = free_port()
    config = uvicorn.Config(
        app,
        lifespan="off",
        **settings(
            host="127.0.0.1",
            port=port,
            header_timeout_s=header_timeout_s,
            max_connections=max_connections,
        ),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            thread.join(0.01)
        yield port
    finally:
        server.should_exit = True
        thread.join(WAIT_S)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    with Store(tmp_path / "served.duckdb") as store:
        yield create_app(store, token=TOKEN, body_timeout_s=0.3)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing the connection within ``seconds``; None when it
    is still open then."""
    received = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One whole response (status, headers, body) read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "closed inside a response body"
        body += chunk
    return int(status_line.split()[1]), headers, body


def test_a_client_that_sends_its_headers_a_byte_at_a_time_is_cut_off(app: Any) -> None:
    # Issue 21: 1,100 connections sending a byte a second were all held.
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 200
    with served(app, header_timeout_s=0.5) as port, _connect(port) as sock:
        started = time.monotonic()
        for byte in request:
            sock.send(bytes([byte]))  # every 50 ms, each one resetting uvicorn's own timer
            if _closed_within(sock, 0.05) is not None:
                break
        else:
            pytest.fail("a request sent a byte at a time for 12 s was still being read")
        # Cut off by the deadline (armed as the server accepted), not at once.
        assert 0.25 <= time.monotonic() - started < WAIT_S


def test_a_connection_idle_after_its_answer_is_closed(app: Any) -> None:
    with served(app, header_timeout_s=0.5) as port, _connect(port) as sock:
        sock.sendall(HEALTHZ)
        assert _response(sock)[0] == 200
        sock.sendall(b"GET /heal")  # the next request, never finished
        assert _closed_within(sock, WAIT_S) == b""


def test_a_body_no_route_reads_is_cut_off_after_the_answer(app: Any) -> None:
    with served(app, header_timeout_s=0.5) as port, _connect(port) as sock:
        sock.sendall(HEALTHZ.replace(b"\r\n\r\n", b"\r\nContent-Length: 100\r\n\r\n") + b"x")
        assert _response(sock)[0] == 200
        assert _closed_within(sock, WAIT_S) == b""


def test_an_evidence_body_that_does_not_arrive_is_a_408_then_the_connection_closes(
    app: Any,
) -> None:
    head = (
        b"POST /v1/evidence?source=ndjson HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 1000\r\n\r\n"
    )
    with served(app) as port, _connect(port) as sock:
        sock.sendall(head + b'{"ts": ')
        status, headers, body = _response(sock)
        assert (status, headers["connection"]) == (408, "close")
        assert orjson.loads(body)["error"] == "BodyTimeout"
        assert _closed_within(sock, WAIT_S) == b""


def test_connections_past_the_cap_are_closed_as_they_open(app: Any) -> None:
    with served(app, max_connections=3) as port:
        held = [_connect(port) for _ in range(3)]
        try:
            # One at a time, so that the server has counted each before the next.
            for sock in held:
                sock.sendall(HEALTHZ)
                assert _response(sock)[0] == 200
            with _connect(port) as extra:
                assert _closed_within(extra, WAIT_S) == b""
            held[0].sendall(HEALTHZ)  # those held are served as before
            assert _response(held[0])[0] == 200
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        # Still incomplete past 16 KiB: no more is held (a whole head in one read is parsed).
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * HEAD_BYTES,
    ],
    ids=["malformed", "headers over 16 KiB"],
)
def test_a_request_h11_cannot_read_answers_the_error_shape(app: Any, request_bytes: bytes) -> None:
    with served(app) as port, _connect(port) as sock:
        sock.sendall(request_bytes)
        status, headers, body = _response(sock)
    assert (status, headers["content-type"]) == (400, "application/json")
    assert orjson.loads(body) == {"error": "BadRequest", "detail": "Invalid HTTP request received."}


# -- correlator serve: what it passes to uvicorn and the app -------------------------------


def _serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, environ: dict[str, str]
) -> tuple[Any, dict[str, Any]]:
    """What ``correlator serve --host HOST`` hands uvicorn.run, with ``environ`` set."""
    for name, value in {"CORRELATOR_FINDINGS_INTERVAL_S": "0", **environ}.items():
        monkeypatch.setenv(name, value)
    given: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kwargs: given.append((app, kwargs)))
    assert main(["--db", str(tmp_path / "c.duckdb"), "serve", "--host", host, "--port", "0"]) == 0
    [(app, kwargs)] = given
    return app, kwargs


def _allowed(app: Any) -> frozenset[str]:
    [options] = [m.kwargs for m in app.user_middleware if m.cls is HostCheck]
    checked = HostCheck(app, **options)
    return checked.allowed


def test_serve_bounds_every_wait_and_checks_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {
        "CORRELATOR_ALLOWED_HOSTS": " correlator.example, ,Grafana.Example:3000",
        "CORRELATOR_HEADER_TIMEOUT_S": "2.5",
        "CORRELATOR_MAX_CONNECTIONS": "64",
    }
    app, kwargs = _serve(tmp_path, monkeypatch, "localhost", environ)
    assert _allowed(app) == {"localhost", "correlator.example", "grafana.example"}
    protocol = kwargs.pop("http")
    assert (protocol.header_timeout_s, protocol.max_connections) == (2.5, 64)
    assert kwargs == {
        "host": "localhost",
        "port": 0,
        "log_config": None,
        "access_log": False,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "h11_max_incomplete_event_size": HEAD_BYTES,
    }


def test_serve_hands_the_interpreter_round_more_often_while_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRELATOR_FINDINGS_INTERVAL_S", "0")
    serving: list[float] = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: serving.append(sys.getswitchinterval()))
    given = sys.getswitchinterval()
    assert main(["--db", str(tmp_path / "c.duckdb"), "serve", "--port", "0"]) == 0
    assert serving == [pytest.approx(SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == given  # and as it was once it stops


@pytest.mark.parametrize(
    ("environ", "cache_bytes"),
    [({}, 64 * 1024 * 1024), ({"CORRELATOR_READ_CACHE_MB": "0.5"}, 512 * 1024)],
)
def test_serve_keeps_answers_in_the_memory_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], cache_bytes: int
) -> None:
    given: dict[str, Any] = {}
    create_app = api.create_app

    def recorded(store: Store, **kwargs: Any) -> Any:
        given.update(kwargs)
        return create_app(store, **kwargs)

    monkeypatch.setattr("correlator.api.create_app", recorded)
    _serve(tmp_path, monkeypatch, "127.0.0.1", environ)
    assert given["cache_bytes"] == cache_bytes


def test_a_wildcard_address_is_no_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = _serve(tmp_path, monkeypatch, "0.0.0.0", {})  # not bound: uvicorn.run is faked
    assert _allowed(app) == frozenset()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CORRELATOR_READ_THREADS", "0"),
        ("CORRELATOR_READ_CACHE_MB", "-1"),
        ("CORRELATOR_MAX_CONNECTIONS", "many"),
        ("CORRELATOR_HEADER_TIMEOUT_S", "-1"),
        ("CORRELATOR_BODY_TIMEOUT_S", "0"),
    ],
)
def test_serve_refuses_a_malformed_limit_before_serving(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv("CORRELATOR_FINDINGS_INTERVAL_S", "0")
    monkeypatch.setenv(name, value)
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("serve started"))
    assert main(["--db", str(tmp_path / "c.duckdb"), "serve", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith(f"correlator: {name}")
