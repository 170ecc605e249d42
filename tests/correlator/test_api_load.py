"""The HTTP API under load and abuse, in process (issue 21): reads answered side by side and
bounded, identical reads sharing an answer and answers kept until the next write, /healthz
never waiting behind reads, answers rendered and sent in pieces, the Host check, every error
in the documented shape, and request bodies streamed under a size cap and a deadline with
bounded memory."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from anyio import to_thread
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import Message, Receive, Scope, Send

from correlator import incident
from correlator._demo_story import FAILING_ALLOCATION
from correlator.api import HostCheck, Turns, _Answer, _Answers, _Pieces, _render, create_app
from correlator.errors import NotFoundError
from correlator.store import IngestResult, Store
from tests.asgi_client import AsgiClient

TOKEN = "s3cret-write-token"
RECORD = orjson.dumps(
    {
        "ts": "2026-11-22T13:11:19.123456789Z",
        "level": "error",
        "event": "release failed",
        "layer": "workflow",
        "allocation_id": "a-9",
    }
)
WAIT_S = 10.0  # how long a test waits for something that happens at once when all is well


def _auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _client(app: Any, base_url: str = "http://testserver") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=base_url, timeout=WAIT_S)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "load.duckdb") as opened:
        yield opened


class BlockedReads:
    """A stand-in for ``incident.timeline_for`` that holds each read until released, and
    counts how many run at once."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def __call__(self, store: Store, key: str, value: str, **kwargs: Any) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        self.entered.release()
        try:
            if not self.release.wait(WAIT_S):
                raise TimeoutError("the test never released the read")
            return {"seed": {key: value}}
        finally:
            with self.lock:
                self.running -= 1

    async def wait_entered(self, count: int) -> None:
        """Wait until ``count`` more reads are running (each acquire with a timeout)."""
        for _ in range(count):
            got = await to_thread.run_sync(lambda: self.entered.acquire(timeout=WAIT_S))
            assert got, "a read did not start"


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch) -> BlockedReads:
    reads = BlockedReads()
    monkeypatch.setattr("correlator.incident.timeline_for", reads)
    return reads


# -- concurrency ---------------------------------------------------------------------------


def test_reads_run_side_by_side_bounded_and_healthz_answers_meanwhile(
    store: Store, blocked: BlockedReads
) -> None:
    # Issue 21: 200 concurrent timelines were answered at 13-20/s, /healthz took 3.3 s.
    app = create_app(store, token=None, read_threads=4)

    async def scenario() -> list[httpx.Response]:
        async with _client(app) as client:
            burst = [
                asyncio.create_task(client.get(f"/v1/timeline?allocation_id=a-{i}"))
                for i in range(50)
            ]
            await blocked.wait_entered(4)  # four reads at once: they overlap
            # Every read thread is held: /healthz answers all the same.
            health = await asyncio.wait_for(client.get("/healthz"), WAIT_S)
            assert (health.status_code, health.json()) == (200, {"status": "ok", "events": 0})
            assert blocked.running == 4  # and no fifth read started beside them
            blocked.release.set()
            return await asyncio.wait_for(asyncio.gather(*burst), WAIT_S)

    answers = asyncio.run(scenario())
    assert [a.status_code for a in answers] == [200] * 50
    assert [a.json()["seed"] for a in answers] == [{"allocation_id": f"a-{i}"} for i in range(50)]
    assert (blocked.most, blocked.calls) == (4, 50)


def test_no_request_waits_on_starlettes_shared_thread_pool(
    store: Store, blocked: BlockedReads
) -> None:
    # Its 40 threads ran every check of every request (FastAPI runs a plain function
    # dependency there), so /healthz waited behind a burst of reads. With the pool given no
    # thread at all, every route still answers.
    app = create_app(store, token=TOKEN)
    blocked.release.set()

    async def scenario() -> list[int]:
        to_thread.current_default_thread_limiter().total_tokens = 0
        async with _client(app) as client:
            answers = [
                await asyncio.wait_for(client.get(url, headers=_auth()), WAIT_S)
                for url in ("/healthz", "/v1/timeline?allocation_id=a-1", "/v1/findings?x=1")
            ]
            posted = client.post("/v1/evidence?source=ndjson", content=RECORD, headers=_auth())
            answers.append(await asyncio.wait_for(posted, WAIT_S))
        return [a.status_code for a in answers]

    assert asyncio.run(scenario()) == [200, 200, 400, 200]


def test_identical_reads_in_flight_share_one_answer(
    store: Store, blocked: BlockedReads, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = threading.Semaphore(0)
    answer = _Answers.answer

    async def counted(self: _Answers, *args: Any, **kwargs: Any) -> _Pieces:
        asked.release()
        return await answer(self, *args, **kwargs)

    monkeypatch.setattr(_Answers, "answer", counted)
    app = create_app(store, token=None)

    async def scenario() -> list[httpx.Response]:
        async with _client(app) as client:
            url = f"/v1/timeline?allocation_id={FAILING_ALLOCATION}"
            burst = [asyncio.create_task(client.get(url)) for _ in range(20)]
            for _ in range(20):  # every request has asked before the one read may end
                assert await to_thread.run_sync(lambda: asked.acquire(timeout=WAIT_S))
            blocked.release.set()
            return await asyncio.wait_for(asyncio.gather(*burst), WAIT_S)

    answers = asyncio.run(scenario())
    assert [a.json()["seed"] for a in answers] == [{"allocation_id": FAILING_ALLOCATION}] * 20
    assert blocked.calls == 1


def test_an_answer_is_kept_until_the_next_write_and_stamped_when_given(
    store: Store, blocked: BlockedReads
) -> None:
    blocked.release.set()
    with AsgiClient(create_app(store, token=TOKEN)) as client:
        url = "/v1/timeline?allocation_id=a-9"
        first = client.get(url).json()
        again = client.get(url).json()
        assert blocked.calls == 1  # the second was given the kept answer
        # generated_at says when each was given, still the last key
        assert list(first) == list(again) == ["seed", "generated_at"]
        assert again["generated_at"] > first["generated_at"]
        client.get(f"{url}&limit=5")  # another question: an answer of its own
        assert blocked.calls == 2
        posted = client.post("/v1/evidence?source=ndjson", content=RECORD, headers=_auth())
        assert posted.json()["accepted"] == 1
        client.get(url)  # after a write: computed afresh
        assert blocked.calls == 3


def test_findings_are_never_kept(store: Store) -> None:
    clock = iter(range(1_000, 10_000))  # ages are measured against the time: a new one each
    with AsgiClient(create_app(store, token=None, now_ns=lambda: next(clock))) as client:
        client.get("/v1/findings")
        client.get("/v1/findings")
    assert next(clock) == 1_002


def test_a_shared_answer_is_never_older_than_the_last_write() -> None:
    async def scenario() -> tuple[list[_Pieces], int]:
        generation = [0]
        flights = _Answers(lambda: generation[0])
        started: list[int] = []
        gate = asyncio.Event()

        async def compute() -> _Pieces:
            started.append(len(started))
            await gate.wait()
            return (b"answer ", str(len(started)).encode())

        first = [asyncio.create_task(flights.answer(("k",), compute)) for _ in range(3)]
        await asyncio.sleep(0)  # each task runs up to its wait: one computation
        generation[0] += 1  # a write committed
        later = asyncio.create_task(flights.answer(("k",), compute))
        await asyncio.sleep(0)  # after the write: a computation of its own
        gate.set()
        answers = await asyncio.gather(*first, later)
        # What the computation from before the write answered is not kept for after it.
        return [*answers, await flights.answer(("k",), compute)], len(started)

    answers, computations = asyncio.run(scenario())
    assert computations == 2
    assert answers == [(b"answer ", b"2")] * 5  # both see the gate after the second started


def test_a_failure_is_shared_too_and_not_kept() -> None:
    async def scenario() -> list[BaseException | _Pieces]:
        flights = _Answers(lambda: 0)
        calls = 0

        async def compute() -> _Pieces:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0)
            if calls == 1:
                raise NotFoundError("no evidence mentions allocation_id=a-1")
            return (b"found",)

        failed = await asyncio.gather(
            *(flights.answer(("k",), compute) for _ in range(3)), return_exceptions=True
        )
        return [*failed, await flights.answer(("k",), compute)]

    *failed, then = asyncio.run(scenario())
    assert [str(f) for f in failed] == ["no evidence mentions allocation_id=a-1"] * 3
    assert then == (b"found",)


def test_a_write_is_seen_by_the_next_read_and_by_healthz(store: Store) -> None:
    with AsgiClient(create_app(store, token=TOKEN)) as client:
        assert client.get("/v1/timeline?allocation_id=a-9").status_code == 404
        assert client.get("/healthz").json() == {"status": "ok", "events": 0}
        posted = client.post("/v1/evidence?source=ndjson", content=RECORD, headers=_auth())
        assert posted.json()["accepted"] == 1
        assert len(client.get("/v1/timeline?allocation_id=a-9").json()["events"]) == 1
        assert client.get("/healthz").json() == {"status": "ok", "events": 1}


def test_a_burst_begins_a_few_requests_a_turn_and_healthz_at_once() -> None:
    # Issue 21: 200 requests arriving together ran their work in one turn of the event loop,
    # 140-300 ms, and a /healthz that came meanwhile was read only at its end.
    begun: list[tuple[str, int]] = []
    turn = 0

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        begun.append((scope["path"] + scope["query_string"].decode(), turn))

    def request(path: str, query: str = "") -> Scope:
        return {"type": "http", "path": path, "query_string": query.encode()}

    async def scenario() -> None:
        nonlocal turn
        turns = Turns(app, per_turn=2)
        burst = [request("/v1/timeline", f"?allocation_id=a-{i}") for i in range(7)]
        waiting = [
            asyncio.create_task(turns(scope, _no_body, _no_answer))
            for scope in [*burst[:5], request("/healthz"), *burst[5:]]
        ]
        while not all(task.done() for task in waiting):
            await asyncio.sleep(0)  # one turn of the loop
            turn += 1
        await asyncio.gather(*waiting)

    asyncio.run(scenario())
    timelines = [f"/v1/timeline?allocation_id=a-{i}" for i in range(7)]
    # Two at once, /healthz at once though five came before it, then the rest in order.
    assert [path for path, _ in begun] == [*timelines[:2], "/healthz", *timelines[2:]]
    in_turn = Counter(at for path, at in begun if path != "/healthz")
    assert sorted(in_turn.values()) == [1, 2, 2, 2]  # seven requests, two a turn at most
    assert begun[2][1] == begun[0][1]  # /healthz in the first turn


async def _no_body() -> Message:
    raise AssertionError("the request's body was not asked for")


async def _no_answer(message: Message) -> None:
    raise AssertionError("nothing was answered")


def test_read_threads_must_be_at_least_one(store: Store) -> None:
    with pytest.raises(ValueError, match="read_threads must be at least 1, not 0"):
        create_app(store, token=None, read_threads=0)


# -- answers in pieces ---------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()  # NaN and infinities too: orjson writes null
    | st.text()
    | st.decimals(allow_nan=False, places=2)  # not JSON: written as its text (default=str)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
_ANSWERS = (
    st.dictionaries(st.text(), _VALUES | st.lists(_VALUES, max_size=30), max_size=6)
    | st.lists(_VALUES, max_size=30)
    | _VALUES
)


@given(answer=_ANSWERS, slice_items=st.integers(1, 5), piece_bytes=st.integers(1, 300))
def test_an_answer_in_pieces_is_orjsons_rendering_byte_for_byte(
    answer: Any, slice_items: int, piece_bytes: int
) -> None:
    pieces = _render(answer, slice_items=slice_items, piece_bytes=piece_bytes)
    assert b"".join(pieces) == orjson.dumps(answer, default=str)
    assert all(len(piece) >= piece_bytes for piece in pieces[:-1])


def test_an_answer_orjson_refuses_is_refused_alike() -> None:
    with pytest.raises(orjson.JSONEncodeError, match="str"):
        _render({1: [Decimal(1)] * 600})


def test_a_long_list_is_rendered_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A busy node's 10,000 events rendered by one orjson call held the interpreter 15-25 ms,
    # the event loop (and /healthz) waiting the while.
    rendered: list[int] = []
    dumps = orjson.dumps

    def counted(value: Any, **kwargs: Any) -> bytes:
        rendered.append(len(value) if isinstance(value, list) else 1)
        return dumps(value, **kwargs)

    monkeypatch.setattr(orjson, "dumps", counted)
    events = [{"ts_ns": n, "message": "x" * 1000} for n in range(2_000)]
    pieces = _render({"seed": {"node_id": "n-1"}, "events": events, "truncated": False})
    assert max(rendered) == 256
    assert sum(n for n in rendered if n > 1) == 2_000
    assert len(pieces) == 8  # ~2 MB of JSON in pieces of about 256 KiB


def test_an_answer_is_sent_a_piece_at_a_time_with_its_whole_length() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        raise AssertionError("an answer reads nothing")

    asyncio.run(_Answer((b'{"a":', b"[1,2]", b"}"))({"type": "http"}, receive, send))
    assert sent == [
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"11"), (b"content-type", b"application/json")],
        },
        {"type": "http.response.body", "body": b'{"a":', "more_body": True},
        {"type": "http.response.body", "body": b"[1,2]", "more_body": True},
        {"type": "http.response.body", "body": b"}", "more_body": False},
    ]


def test_a_timeline_in_pieces_is_the_same_bytes_and_stamped_each_time(
    demo_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo's 14 events in pieces of about 512 bytes, two events a slice.
    monkeypatch.setattr("correlator.api._render", partial(_render, slice_items=2, piece_bytes=512))
    with AsgiClient(create_app(demo_store, token=None)) as client:
        url = f"/v1/timeline?allocation_id={FAILING_ALLOCATION}"
        first, again = client.get(url), client.get(url)  # computed, then kept
    timeline = incident.timeline_for(demo_store, "allocation_id", FAILING_ALLOCATION)
    for answer in (first, again):
        assert answer.headers["content-length"] == str(len(answer.content))
        stamp = answer.json()["generated_at"]
        assert answer.content == orjson.dumps({**timeline, "generated_at": stamp})
    assert again.json()["generated_at"] > first.json()["generated_at"]


# -- Host ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "allowed", "host", "answered"),
    [
        # The connection's own address, however it is written.
        ("http://127.0.0.1:8080", (), "127.0.0.1:8080", True),
        ("http://127.0.0.1:8080", (), "localhost:8080", True),
        ("http://127.0.0.1:8080", (), "LOCALHOST", True),
        ("http://127.0.0.1:8080", (), "[::1]:8080", True),
        ("http://[::1]:8080", (), "[::1]:8080", True),
        ("http://[::1]:8080", (), "localhost:8080", True),
        ("http://10.0.0.5:8080", (), "10.0.0.5:8080", True),
        # DNS rebinding: a name that resolved to the service, in the page's requests.
        ("http://127.0.0.1:8080", (), "evil.example:8080", False),
        ("http://127.0.0.1:8080", (), "evil.example", False),
        ("http://127.0.0.1:8080", (), "127.0.0.1.evil.example", False),
        ("http://127.0.0.1:8080", (), "localhost.evil.example:8080", False),
        # localhost is answered on a loopback connection only.
        ("http://10.0.0.5:8080", (), "localhost:8080", False),
        ("http://10.0.0.5:8080", (), "127.0.0.1:8080", False),
        # Names the operator lists (CORRELATOR_ALLOWED_HOSTS, --host): any port, any case.
        ("http://10.0.0.5:8080", ("correlator.example",), "correlator.example", True),
        ("http://10.0.0.5:8080", ("correlator.example",), "Correlator.Example:443", True),
        ("http://10.0.0.5:8080", ("correlator.example",), "other.example", False),
        ("http://10.0.0.5:8080", ("::1",), "[::1]:8080", True),
        # "*": no check.
        ("http://127.0.0.1:8080", ("*",), "evil.example:8080", True),
    ],
)
def test_a_request_must_name_the_service_in_its_host(
    demo_store: Store, base_url: str, allowed: tuple[str, ...], host: str, answered: bool
) -> None:
    app = create_app(demo_store, token=None, allowed_hosts=allowed)

    async def ask() -> list[httpx.Response]:
        async with _client(app, base_url) as client:
            return [
                await client.get(path, headers={"Host": host})
                for path in (f"/v1/timeline?allocation_id={FAILING_ALLOCATION}", "/healthz", "/no")
            ]

    timeline, health, missing = asyncio.run(ask())
    if answered:
        assert (timeline.status_code, health.status_code, missing.status_code) == (200, 200, 404)
        return
    for refused in (timeline, health, missing):
        assert refused.status_code == 400
        assert refused.headers["content-type"] == "application/json"
        assert refused.json()["error"] == "HostNotAllowed"
        assert refused.json()["detail"].startswith(f"Host {host.lower()!r} is not a name of")
        assert refused.json()["detail"].endswith("add it to CORRELATOR_ALLOWED_HOSTS")
        assert "x-correlation-id" in refused.headers  # logged like any request


@pytest.mark.parametrize(
    ("headers", "server", "refusal"),
    [
        ([], ("127.0.0.1", 8080), "a request must carry one Host header"),
        (
            [(b"host", b"localhost"), (b"host", b"evil.example")],
            ("127.0.0.1", 8080),
            "a request must carry one Host header",
        ),
        ([(b"host", b"localhost")], None, "Host 'localhost' is not a name of this service"),
        ([(b"host", b"localhost")], ("127.0.0.1", 8080), None),
        ([(b"host", b"127.0.0.2:80")], ("127.0.0.2", 80), None),
        ([(b"host", b"localhost:8080")], ("::ffff:127.0.0.1", 8080), None),
    ],
)
def test_what_the_host_check_refuses(
    headers: list[tuple[bytes, bytes]], server: tuple[str, int] | None, refusal: str | None
) -> None:
    check = HostCheck(lambda *_: None, allowed=())  # type: ignore[arg-type, return-value]
    found = check.refusal({"type": "http", "headers": headers, "server": server})
    if refusal is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(refusal)


# -- every error in one shape --------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url", "status", "error", "detail"),
    [
        (
            "GET",
            "/v1/nothing",
            404,
            "NoSuchPath",
            "no such path: '/v1/nothing'; the API is described at /docs",
        ),
        (
            "GET",
            "/static/nothing.js",
            404,
            "NoSuchPath",
            "no such path: '/static/nothing.js'; the API is described at /docs",
        ),
        ("POST", "/v1/timeline", 405, "MethodNotAllowed", "'/v1/timeline' does not take POST"),
        ("DELETE", "/healthz", 405, "MethodNotAllowed", "'/healthz' does not take DELETE"),
        ("PUT", "/v1/evidence", 405, "MethodNotAllowed", "'/v1/evidence' does not take PUT"),
    ],
)
def test_starlettes_own_refusals_answer_the_error_shape(
    store: Store, method: str, url: str, status: int, error: str, detail: str
) -> None:
    with AsgiClient(create_app(store, token=TOKEN)) as client:
        response = client.request(method, url)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": error, "detail": detail}
    if status == 405:
        assert response.headers["allow"] in ("GET", "POST")


def test_an_unexpected_failure_is_a_500_in_the_error_shape_that_tells_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(store: Store) -> dict[str, Any]:
        raise RuntimeError("the secret at /etc/correlator/key is unreadable")

    monkeypatch.setattr("correlator.queries.latency", broken)
    with AsgiClient(create_app(store, token=None)) as client:
        response = client.get("/v1/latency")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "error": "InternalError",
        "detail": "the service failed to answer; its log says why, under this answer's "
        "X-Correlation-ID",
    }
    assert response.headers["x-correlation-id"]


def test_a_lower_case_bearer_scheme_is_taken_and_the_schema_says_so(demo_store: Store) -> None:
    app = create_app(demo_store, token=None, read_token="reader")
    with AsgiClient(app) as client:
        url = f"/v1/timeline?allocation_id={FAILING_ALLOCATION}"
        assert client.get(url, headers={"Authorization": "bearer reader"}).status_code == 200
        assert client.get(url, headers={"Authorization": "bearer READER"}).status_code == 401
    schemes = app.openapi()["components"]["securitySchemes"]
    for scheme in schemes.values():
        assert "case-insensitive (`bearer` is taken too); the token is not" in scheme["description"]


# -- request bodies ------------------------------------------------------------------------


async def _trickle(first: bytes, then_wait: asyncio.Event) -> AsyncIterator[bytes]:
    """A body that sends ``first`` and then nothing until ``then_wait`` is set."""
    yield first
    await asyncio.wait_for(then_wait.wait(), WAIT_S)
    yield RECORD


def test_a_body_that_does_not_arrive_in_time_is_a_408_and_nothing_is_stored(
    store: Store,
) -> None:
    # Issue 21: slow clients were held without end. The first chunk holds a whole record:
    # it is not stored either (the ingest is one transaction).
    app = create_app(store, token=TOKEN, body_timeout_s=0.2)

    async def post() -> httpx.Response:
        never = asyncio.Event()
        async with _client(app) as client:
            return await client.post(
                "/v1/evidence?source=ndjson",
                content=_trickle(RECORD + b"\n", never),
                headers=_auth(),
            )

    response = asyncio.run(post())
    assert response.status_code == 408
    assert response.headers["connection"] == "close"
    assert response.json() == {
        "error": "BodyTimeout",
        "detail": f"the request body did not arrive within 0.2 s ({len(RECORD) + 1:,} bytes "
        "came); send it at once",
    }
    assert store.count() == 0


def test_a_streamed_body_over_the_cap_is_a_413_and_nothing_is_stored(store: Store) -> None:
    # No Content-Length to refuse it by: the cap is found while the body streams in.
    app = create_app(store, token=TOKEN, max_body_bytes=4096)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield RECORD + b"\n" + b" " * 500 + b"\n"

    async def post() -> httpx.Response:
        async with _client(app) as client:
            return await client.post(
                "/v1/evidence?source=ndjson", content=chunks(), headers=_auth()
            )

    response = asyncio.run(post())
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    assert response.json() == {
        "error": "TooLargeError",
        "detail": "request body is over 4096 bytes; split the evidence",
    }
    assert store.count() == 0


def test_a_body_in_many_chunks_keeps_every_line_and_its_number(store: Store) -> None:
    # Lines cut across chunks, blank lines, a bad line: numbered as in the body.
    body = b"\xef\xbb\xbf" + RECORD + b"\n\n\n{not json\n" + RECORD.replace(b"a-9", b"a-10")
    app = create_app(store, token=TOKEN)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 7):
            yield body[start : start + 7]

    async def post() -> httpx.Response:
        async with _client(app) as client:
            return await client.post(
                "/v1/evidence?source=ndjson", content=chunks(), headers=_auth()
            )

    response = asyncio.run(post())
    assert (response.json()["accepted"], response.json()["rejected"]) == (2, 1)
    [reject] = store.rejects()
    assert (reject["origin"], reject["line_no"]) == ("http", 4)


def test_a_body_of_newlines_is_read_with_bounded_memory(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 21: the body was joined and split whole: 64 MiB of newlines became a list of 64
    # million lines (512 MiB of pointers) before the first was parsed. The ingest here only
    # counts what it is given, so that the figure is the body's reading alone (the parse of
    # 8 million blank lines is the ingest's own business, and takes a while).
    seen: dict[str, Any] = {}

    def counting(store: Store, kind: str, lines: Any, origin: str, **_: Any) -> Any:
        seen["type"] = "lazy" if isinstance(lines, Iterator) else type(lines).__name__
        seen["lines"] = sum(1 for _ in lines)
        seen["peak"] = tracemalloc.get_traced_memory()[1]
        return IngestResult()

    monkeypatch.setattr("correlator.api.ingest_lines", counting)
    body = b"\n" * (8 << 20)
    app = create_app(store, token=TOKEN, max_body_bytes=len(body))

    async def post() -> httpx.Response:
        async with _client(app) as client:
            return await client.post("/v1/evidence?source=ndjson", content=body, headers=_auth())

    tracemalloc.start()
    try:
        response = asyncio.run(post())
    finally:
        tracemalloc.stop()
    assert response.status_code == 200, response.text
    assert (seen["type"], seen["lines"]) == ("lazy", 8 << 20)
    # A block's lines at most (read_line_blocks: 128 KiB of newlines are 1 MiB of pointers);
    # the whole body, joined, would be 8 MiB, its lines 64 MiB.
    assert seen["peak"] < 4 << 20
