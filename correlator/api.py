"""The HTTP service: JSON endpoints over the store, OpenAPI at ``/docs``, the page at ``/``.

Domain errors are mapped to HTTP statuses in one place (:data:`STATUS`); a request FastAPI
cannot validate (``limit=0``) takes the same road, as a 400 in the same ``{"error", "detail"}``
shape (:class:`ErrorBody`). Every route refuses a query parameter it does not declare, or one
given twice (``_parameters``); what the schema says beyond FastAPI's inference is in
``_openapi``. Writes need the bearer token ``CORRELATOR_TOKEN`` (compared in constant time);
reads need ``CORRELATOR_READ_TOKEN`` when it is set. Request bodies are read with a size cap,
and ingest runs in a worker thread so the event loop keeps answering reads.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from datetime import tzinfo
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from agent_logging.owner import DEFAULT_RULES, OwnerRule
from correlator import _environ, incident, queries
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
from correlator._parameters import TIME, check_query, seed, zone
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
from correlator.sources._lines import without_bom
from correlator.store import Store

__all__ = ["STATUS", "ErrorBody", "create_app"]

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


def _given(credentials: Credentials) -> str | None:
    return credentials.credentials if credentials is not None else None


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
    nginx_zone: tzinfo | None = None,
    owner_rules: Sequence[OwnerRule] = DEFAULT_RULES,
) -> FastAPI:
    """The FastAPI application over ``store``.

    Args:
        store: the evidence store (the app never closes it).
        token: bearer token for writes; None refuses every write.
        read_token: bearer token for reads; None leaves reads open.
        max_body_bytes: cap on ``POST /v1/evidence`` bodies.
        now_ns: the clock findings measure ages against.
        nginx_zone: the zone of nginx error-log times when a post names none (``?tz=``);
            None: UTC.
        owner_rules: the owner table the timeline's verdict applies.

    Returns:
        The application; its schema (``/openapi.json``, ``/docs``) lists the read token only
        when ``read_token`` is set.
    """
    app = Service(
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

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # A bad parameter is a QueryError like those the routes raise: same status, same shape.
        return await domain_error(request, QueryError(invalid(exc)))

    def require_write(credentials: Annotated[Credentials, Depends(WRITE_BEARER)]) -> None:
        if token is None:
            raise AuthError("writes are disabled: start the service with CORRELATOR_TOKEN set")
        if not _matches(_given(credentials), token):
            raise AuthError("POST /v1/evidence needs 'Authorization: Bearer <CORRELATOR_TOKEN>'")

    def require_read(credentials: Annotated[Credentials, Depends(READ_BEARER)]) -> None:
        if not _matches(_given(credentials), read_token, token):
            raise AuthError("reads need 'Authorization: Bearer <CORRELATOR_READ_TOKEN>'")

    # Reads are guarded (and the schema says so) only when a read token is set.
    reads = [Depends(require_read)] if read_token is not None else []
    read_refusals = (401,) if read_token is not None else ()

    @app.post(
        "/v1/evidence",
        dependencies=[Depends(require_write), Depends(check_query)],
        responses=errors(400, 401, 413),
        openapi_extra={"requestBody": EVIDENCE_BODY},
    )
    async def post_evidence(
        request: Request,
        source: Annotated[
            str,
            Query(
                description=f"one of {', '.join(FILE_KINDS)}",
                json_schema_extra={"enum": list(FILE_KINDS)},
            ),
        ],
        tz: Annotated[
            str | None,
            Query(
                description="With `source=nginx`: the time zone of the error log's times, which "
                "carry none (`UTC`, `+01:00`, `Europe/Berlin`); default the service's "
                f"{_environ.NGINX_TZ}, else UTC."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Ingest an NDJSON (or native log) body; returns accepted/duplicate/rejected counts."""
        if source not in FILE_KINDS:
            raise QueryError(f"unknown source kind {source!r}; use one of {', '.join(FILE_KINDS)}")
        nginx = zone(source, tz, nginx_zone)
        lines = await _body_lines(request, max_body_bytes)
        result = await run_in_threadpool(
            partial(ingest_lines, store, source, lines, "http", nginx_zone=nginx)
        )
        _log.info("evidence ingested", source=source, **result.as_dict())
        return result.as_dict()

    @app.get(
        "/v1/timeline",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals, 404),
    )
    async def get_timeline(
        seed: Annotated[tuple[str, str], Depends(seed)],
        from_: Annotated[str | None, Query(alias="from", description=TIME)] = None,
        to: Annotated[str | None, Query(description=TIME)] = None,
        limit: Annotated[
            int, Query(ge=1, le=queries.MAX_LIMIT, description="At most this many events.")
        ] = incident.DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        """The incident timeline for one identifier (``?allocation_id=a-9``)."""
        key, value = seed
        lo = queries.parse_time_ns(from_) if from_ else None
        hi = queries.parse_time_ns(to) if to else None
        return await run_in_threadpool(
            incident.timeline_for,
            store,
            key,
            value,
            from_ns=lo,
            to_ns=hi,
            limit=limit,
            rules=owner_rules,
        )

    @app.get(
        "/v1/graph",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals, 404),
    )
    async def get_graph(seed: Annotated[tuple[str, str], Depends(seed)]) -> dict[str, Any]:
        """The identifier graph from one identifier: followed and refused links."""
        key, value = seed
        return await run_in_threadpool(incident.graph_for, store, key, value)

    @app.get(
        "/v1/findings",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals),
    )
    async def get_findings() -> dict[str, Any]:
        """Stuck lifecycles, drift and orphans."""
        return await run_in_threadpool(queries.findings, store, now_ns())

    @app.get(
        "/v1/latency",
        dependencies=[*reads, Depends(check_query)],
        responses=errors(400, *read_refusals),
    )
    async def get_latency() -> dict[str, Any]:
        """Per-phase workflow durations by provider: count, p50, p95."""
        return await run_in_threadpool(queries.latency, store)

    @app.get("/healthz", dependencies=[Depends(check_query)], responses=errors(400))
    async def healthz() -> dict[str, Any]:
        """Liveness: the store answers. It takes no token (probes have none), so when reads
        need one it does not say how many events the store holds."""
        events = await run_in_threadpool(store.count)
        return {"status": "ok"} if read_token is not None else {"status": "ok", "events": events}

    if _WEB.is_dir():  # the page's script and style; an install without package data has none
        app.mount("/static", StaticFiles(directory=_WEB), name="static")

    # No check_query here: the page's own script reads its query (?allocation_id=...).
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(_PAGE.read_text("utf-8") if _PAGE.exists() else _FALLBACK_PAGE)

    return app


_FALLBACK_PAGE: Final = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>correlator</title></head><body><h1>correlator</h1>
<p>JSON API: <a href="/docs">/docs</a>. Try <code>/v1/findings</code> or
<code>/v1/timeline?allocation_id=...</code>.</p></body></html>"""
