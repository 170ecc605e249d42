"""The HTTP service: JSON endpoints over the store, OpenAPI at ``/docs``, the page at ``/``.

Domain errors are mapped to HTTP statuses in one place (:data:`STATUS`). Writes need the bearer
token ``CORRELATOR_TOKEN`` (compared in constant time); reads need ``CORRELATOR_READ_TOKEN``
when it is set. Request bodies are read with a size cap, and ingest runs in a worker thread so
the event loop keeps answering reads.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from correlator import incident, queries
from correlator.errors import (
    AuthError,
    CorrelatorError,
    InputError,
    NotFoundError,
    QueryError,
    SourceError,
    TooLargeError,
)
from correlator.ingest import FILE_KINDS, ingest_lines
from correlator.model import IDENTIFIER_KEYS
from correlator.sources._lines import without_bom
from correlator.store import Store

__all__ = ["STATUS", "create_app"]

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
DEFAULT_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
_WEB: Final = Path(__file__).with_name("web")
_PAGE: Final = _WEB / "index.html"
_log = agent_logging.get_logger("correlator.api")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials else None


def _matches(given: str | None, *expected: str | None) -> bool:
    return given is not None and any(
        e is not None and hmac.compare_digest(given.encode(), e.encode()) for e in expected
    )


async def _body_lines(request: Request, limit: int) -> list[bytes]:
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLargeError(f"request body is over {limit} bytes; split the evidence")
        chunks.append(chunk)
    return without_bom(b"".join(chunks)).split(b"\n")


def create_app(
    store: Store,
    *,
    token: str | None,
    read_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    now_ns: Callable[[], int] = time.time_ns,
) -> FastAPI:
    """The FastAPI application over ``store``.

    Args:
        store: the evidence store (the app never closes it).
        token: bearer token for writes; None refuses every write.
        read_token: bearer token for reads; None leaves reads open.
        max_body_bytes: cap on ``POST /v1/evidence`` bodies.
        now_ns: the clock findings measure ages against.
    """
    app = FastAPI(
        title="evidence-pipeline correlator",
        version="0.1.0",
        description="One incident timeline across node, ingress, API, workflow and DB evidence.",
    )
    app.add_middleware(AgentLoggingMiddleware)

    @app.exception_handler(CorrelatorError)
    async def domain_error(request: Request, exc: CorrelatorError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"error": type(exc).__name__, "detail": str(exc)}, status, headers)

    def require_write(request: Request) -> None:
        if token is None:
            raise AuthError("writes are disabled: start the service with CORRELATOR_TOKEN set")
        if not _matches(_bearer(request), token):
            raise AuthError("POST /v1/evidence needs 'Authorization: Bearer <CORRELATOR_TOKEN>'")

    def require_read(request: Request) -> None:
        if read_token is not None and not _matches(_bearer(request), read_token, token):
            raise AuthError("reads need 'Authorization: Bearer <CORRELATOR_READ_TOKEN>'")

    def seed_of(request: Request, options: frozenset[str] = frozenset()) -> tuple[str, str]:
        """The one identifier a query names; every other parameter must be one of
        ``options``, each at most once (a typo such as ``limt=5`` would otherwise be
        ignored without a word, and a repeated key would silently take its last value)."""
        items = request.query_params.multi_items()
        given = [(k, v) for k, v in items if k in IDENTIFIER_KEYS]
        if len(given) != 1:
            raise QueryError(
                "give exactly one identifier: ?KEY=VALUE with KEY one of "
                + ", ".join(IDENTIFIER_KEYS)
            )
        for name in dict.fromkeys(k for k, _ in items if k not in IDENTIFIER_KEYS):
            if name not in options:
                known = ", ".join([*IDENTIFIER_KEYS, *sorted(options)])
                raise QueryError(f"unknown query parameter {name!r}; known: {known}")
            if request.query_params.getlist(name)[1:]:
                raise QueryError(f"query parameter {name!r} is given more than once")
        return incident.check_seed(*given[0])

    @app.post("/v1/evidence", dependencies=[Depends(require_write)])
    async def post_evidence(
        request: Request,
        source: Annotated[str, Query(description=f"one of {', '.join(FILE_KINDS)}")],
    ) -> dict[str, Any]:
        """Ingest an NDJSON (or native log) body; returns accepted/duplicate/rejected counts."""
        if source not in FILE_KINDS:
            raise QueryError(f"unknown source kind {source!r}; use one of {', '.join(FILE_KINDS)}")
        lines = await _body_lines(request, max_body_bytes)
        result = await run_in_threadpool(ingest_lines, store, source, lines, "http")
        _log.info("evidence ingested", source=source, **result.as_dict())
        return result.as_dict()

    @app.get("/v1/timeline", dependencies=[Depends(require_read)])
    async def get_timeline(
        request: Request,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
        limit: Annotated[int, Query(ge=1, le=queries.MAX_LIMIT)] = incident.DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        """The incident timeline for one identifier (``?allocation_id=a-9``)."""
        key, value = seed_of(request, _TIMELINE_OPTIONS)
        lo = queries.parse_time_ns(from_) if from_ else None
        hi = queries.parse_time_ns(to) if to else None
        return await run_in_threadpool(
            incident.timeline_for, store, key, value, from_ns=lo, to_ns=hi, limit=limit
        )

    @app.get("/v1/graph", dependencies=[Depends(require_read)])
    async def get_graph(request: Request) -> dict[str, Any]:
        """The identifier graph from one identifier: followed and refused links."""
        key, value = seed_of(request)
        return await run_in_threadpool(incident.graph_for, store, key, value)

    @app.get("/v1/findings", dependencies=[Depends(require_read)])
    async def get_findings() -> dict[str, Any]:
        """Stuck lifecycles, drift and orphans."""
        return await run_in_threadpool(queries.findings, store, now_ns())

    @app.get("/v1/latency", dependencies=[Depends(require_read)])
    async def get_latency() -> dict[str, Any]:
        """Per-phase workflow durations by provider: count, p50, p95."""
        return await run_in_threadpool(queries.latency, store)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness: the store answers. It takes no token (probes have none), so when reads
        need one it does not say how many events the store holds."""
        events = await run_in_threadpool(store.count)
        return {"status": "ok"} if read_token is not None else {"status": "ok", "events": events}

    if _WEB.is_dir():  # the page's script and style; an install without package data has none
        app.mount("/static", StaticFiles(directory=_WEB), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(_PAGE.read_text("utf-8") if _PAGE.exists() else _FALLBACK_PAGE)

    return app


#: The query parameters of ``GET /v1/timeline`` besides its identifier.
_TIMELINE_OPTIONS: Final = frozenset({"from", "to", "limit"})

_FALLBACK_PAGE: Final = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>correlator</title></head><body><h1>correlator</h1>
<p>JSON API: <a href="/docs">/docs</a>. Try <code>/v1/findings</code> or
<code>/v1/timeline?allocation_id=...</code>.</p></body></html>"""
