"""The HTTP service: JSON endpoints over the store, OpenAPI at ``/docs``, the page at ``/``.

Domain errors are mapped to HTTP statuses in one place (:data:`STATUS`); a request FastAPI
cannot validate (``limit=0``) takes the same road, as a 400 in the same ``{"error", "detail"}``
shape (:class:`ErrorBody`). Every route refuses a query parameter it does not declare, or one
given twice. Writes need the bearer token ``CORRELATOR_TOKEN`` (compared in constant time);
reads need ``CORRELATOR_READ_TOKEN`` when it is set. Request bodies are read with a size cap,
and ingest runs in a worker thread so the event loop keeps answering reads.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from datetime import tzinfo
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

import agent_logging
from agent_logging.integrations.asgi import AgentLoggingMiddleware
from correlator import _environ, incident, queries
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
from correlator.sources._time import parse_zone
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


class ErrorBody(BaseModel):
    """The body of every error the API answers; :data:`STATUS` picks its status."""

    error: str = Field(
        description="The error's class: QueryError, InputError, NotFoundError, AuthError, ...",
        examples=["QueryError"],
    )
    detail: str = Field(
        description="What was wrong, naming the parameter, field or line.",
        examples=["query parameter 'limit' is '0': Input should be greater than or equal to 1"],
    )


# auto_error=False: a missing or wrong token is an AuthError, answered in the API's own shape
# by STATUS, not FastAPI's; these two only read the header and document it in /docs.
_WRITE_BEARER: Final = HTTPBearer(
    scheme_name=_environ.TOKEN,
    description="`POST /v1/evidence` needs `Authorization: Bearer <CORRELATOR_TOKEN>`. "
    "A service started without CORRELATOR_TOKEN refuses every write.",
    auto_error=False,
)
_READ_BEARER: Final = HTTPBearer(
    scheme_name=_environ.READ_TOKEN,
    description="When the service is started with CORRELATOR_READ_TOKEN, every read needs "
    "`Authorization: Bearer <CORRELATOR_READ_TOKEN>` (CORRELATOR_TOKEN is taken too). "
    "Without it reads are open, and the schema lists no security on them.",
    auto_error=False,
)
_Credentials = HTTPAuthorizationCredentials | None

#: What each error status means, for the schema (the body is always an :class:`ErrorBody`).
_MEANINGS: Final = {
    400: "A query parameter unknown, repeated, missing or with a bad value; the detail names it.",
    401: "No or wrong bearer token (the answer carries `WWW-Authenticate: Bearer`).",
    404: "No evidence mentions the identifier.",
    413: f"The body is over the size cap ({_environ.MAX_BODY_BYTES}); split the evidence.",
}

#: ``POST /v1/evidence`` reads its body raw (line by line, under a size cap), so FastAPI cannot
#: describe it; the Content-Type is not checked, and a body sent without one is read the same.
_EVIDENCE_BODY: Final = {
    "description": "One record per line: NDJSON for `ndjson`/`agent`, the native log lines "
    "for the other kinds. A UTF-8 byte order mark at the start is dropped.",
    "content": {
        "application/x-ndjson": {
            "schema": {"type": "string"},
            "example": '{"ts": "2026-11-22T13:11:19.123456789Z", "level": "error", '
            '"event": "release failed", "layer": "workflow", "allocation_id": "a-9"}\n',
        },
        "text/plain": {"schema": {"type": "string"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    },
}

_KEYS: Final = ", ".join(IDENTIFIER_KEYS)
_ONE_IDENTIFIER: Final = f"give exactly one identifier: ?KEY=VALUE with KEY one of {_KEYS}"
_Identifier = Annotated[
    str | None,
    Query(description=f"The identifier to start from; give exactly one of {_KEYS}."),
]
_TIME: Final = "RFC 3339, integer nanoseconds since the epoch, or now-DURATION (now-2h)."


def _given(credentials: _Credentials) -> str | None:
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


def _declared_query(dependant: Dependant) -> list[str]:
    """The query parameter names a route and its dependencies declare (aliases: ``from``)."""
    names = [field.alias for field in dependant.query_params]
    for dependency in dependant.dependencies:
        names += _declared_query(dependency)
    return names


def _check_query(request: Request) -> None:
    """Refuse a query the route would otherwise misread: a typo such as ``limt=5`` would be
    ignored without a word, and a repeated key would silently take its last value.

    On a route that takes the identifiers, exactly one of them must be given, once (checked
    first, so two identifiers, or one given twice, say so). Run it after the token check, so
    that a caller without a token learns nothing of the parameters.

    Args:
        request: the request; its route (``scope["route"]``) declares the parameters.

    Raises:
        QueryError: naming the parameter unknown or repeated, or the identifiers.
    """
    route: APIRoute = request.scope["route"]  # APIRoute.matches put the matched route there
    declared = _declared_query(route.dependant)
    items = request.query_params.multi_items()
    if any(name in IDENTIFIER_KEYS for name in declared) and (
        sum(name in IDENTIFIER_KEYS for name, _ in items) != 1
    ):
        raise QueryError(_ONE_IDENTIFIER)
    for name in dict.fromkeys(name for name, _ in items):
        if name not in declared:
            known: list[str] = [key for key in IDENTIFIER_KEYS if key in declared]
            known += sorted(set(declared).difference(IDENTIFIER_KEYS))
            raise QueryError(
                f"unknown query parameter {name!r}; known: {', '.join(known) or 'none'}"
            )
        if request.query_params.getlist(name)[1:]:
            raise QueryError(f"query parameter {name!r} is given more than once")


def _seed(
    node_id: _Identifier = None,
    node_instance_id: _Identifier = None,
    correlation_id: _Identifier = None,
    allocation_id: _Identifier = None,
    workflow_id: _Identifier = None,
) -> tuple[str, str]:
    """The identifier a query names, as ``(key, value)``.

    Declared one parameter per key so that ``/docs`` can ask for them; :func:`_check_query`,
    which FastAPI runs first (a route's ``dependencies`` come before its parameters), has made
    sure exactly one is given.

    Raises:
        QueryError: the value cannot be an identifier (a quote, a control character, ...).
    """
    values = {
        "node_id": node_id,
        "node_instance_id": node_instance_id,
        "correlation_id": correlation_id,
        "allocation_id": allocation_id,
        "workflow_id": workflow_id,
    }
    [(key, value)] = [(key, value) for key, value in values.items() if value is not None]
    return incident.check_seed(key, value)


def _invalid(exc: RequestValidationError) -> str:
    """What FastAPI refused, one clause per parameter (the only inputs it validates here are
    query parameters: the evidence body is read raw)."""
    problems = []
    for error in exc.errors():
        where, *path = error["loc"]
        name = ".".join(str(part) for part in path)
        if error["type"] == "missing":
            problems.append(f"{where} parameter {name!r} is required")
        else:
            problems.append(f"{where} parameter {name!r} is {error['input']!r}: {error['msg']}")
    return "; ".join(problems)


def _zone(source: str, tz: str | None, default: tzinfo | None) -> tzinfo | None:
    """The zone of an nginx body's error-log times: ``tz``, else the service's default.

    Raises:
        QueryError: ``tz`` with another source, or a zone that is not one (naming it).
    """
    if tz is None:
        return default if source == "nginx" else None
    if source != "nginx":
        raise QueryError(
            "query parameter 'tz' is the zone of nginx error logs: use it with source=nginx"
        )
    try:
        return parse_zone(tz)
    except ValueError as exc:
        raise QueryError(f"query parameter 'tz': {exc}") from exc


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": _MEANINGS[status]} for status in statuses}


class _Service(FastAPI):
    """FastAPI whose schema says what the service answers: a request FastAPI cannot validate
    is a 400 :class:`ErrorBody` here, so FastAPI's own 422 and its body are left out."""

    def openapi(self) -> dict[str, Any]:
        schema = super().openapi()
        for operations in schema["paths"].values():
            for operation in operations.values():
                operation["responses"].pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema


def create_app(
    store: Store,
    *,
    token: str | None,
    read_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    now_ns: Callable[[], int] = time.time_ns,
    nginx_zone: tzinfo | None = None,
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

    Returns:
        The application; its schema (``/openapi.json``, ``/docs``) lists the read token only
        when ``read_token`` is set.
    """
    app = _Service(
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
        return await domain_error(request, QueryError(_invalid(exc)))

    def require_write(credentials: Annotated[_Credentials, Depends(_WRITE_BEARER)]) -> None:
        if token is None:
            raise AuthError("writes are disabled: start the service with CORRELATOR_TOKEN set")
        if not _matches(_given(credentials), token):
            raise AuthError("POST /v1/evidence needs 'Authorization: Bearer <CORRELATOR_TOKEN>'")

    def require_read(credentials: Annotated[_Credentials, Depends(_READ_BEARER)]) -> None:
        if not _matches(_given(credentials), read_token, token):
            raise AuthError("reads need 'Authorization: Bearer <CORRELATOR_READ_TOKEN>'")

    # Reads are guarded (and the schema says so) only when a read token is set.
    reads = [Depends(require_read)] if read_token is not None else []
    read_refusals = (401,) if read_token is not None else ()

    @app.post(
        "/v1/evidence",
        dependencies=[Depends(require_write), Depends(_check_query)],
        responses=_errors(400, 401, 413),
        openapi_extra={"requestBody": _EVIDENCE_BODY},
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
        zone = _zone(source, tz, nginx_zone)
        lines = await _body_lines(request, max_body_bytes)
        result = await run_in_threadpool(
            partial(ingest_lines, store, source, lines, "http", nginx_zone=zone)
        )
        _log.info("evidence ingested", source=source, **result.as_dict())
        return result.as_dict()

    @app.get(
        "/v1/timeline",
        dependencies=[*reads, Depends(_check_query)],
        responses=_errors(400, *read_refusals, 404),
    )
    async def get_timeline(
        seed: Annotated[tuple[str, str], Depends(_seed)],
        from_: Annotated[str | None, Query(alias="from", description=_TIME)] = None,
        to: Annotated[str | None, Query(description=_TIME)] = None,
        limit: Annotated[
            int, Query(ge=1, le=queries.MAX_LIMIT, description="At most this many events.")
        ] = incident.DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        """The incident timeline for one identifier (``?allocation_id=a-9``)."""
        key, value = seed
        lo = queries.parse_time_ns(from_) if from_ else None
        hi = queries.parse_time_ns(to) if to else None
        return await run_in_threadpool(
            incident.timeline_for, store, key, value, from_ns=lo, to_ns=hi, limit=limit
        )

    @app.get(
        "/v1/graph",
        dependencies=[*reads, Depends(_check_query)],
        responses=_errors(400, *read_refusals, 404),
    )
    async def get_graph(seed: Annotated[tuple[str, str], Depends(_seed)]) -> dict[str, Any]:
        """The identifier graph from one identifier: followed and refused links."""
        key, value = seed
        return await run_in_threadpool(incident.graph_for, store, key, value)

    @app.get(
        "/v1/findings",
        dependencies=[*reads, Depends(_check_query)],
        responses=_errors(400, *read_refusals),
    )
    async def get_findings() -> dict[str, Any]:
        """Stuck lifecycles, drift and orphans."""
        return await run_in_threadpool(queries.findings, store, now_ns())

    @app.get(
        "/v1/latency",
        dependencies=[*reads, Depends(_check_query)],
        responses=_errors(400, *read_refusals),
    )
    async def get_latency() -> dict[str, Any]:
        """Per-phase workflow durations by provider: count, p50, p95."""
        return await run_in_threadpool(queries.latency, store)

    @app.get("/healthz", dependencies=[Depends(_check_query)], responses=_errors(400))
    async def healthz() -> dict[str, Any]:
        """Liveness: the store answers. It takes no token (probes have none), so when reads
        need one it does not say how many events the store holds."""
        events = await run_in_threadpool(store.count)
        return {"status": "ok"} if read_token is not None else {"status": "ok", "events": events}

    if _WEB.is_dir():  # the page's script and style; an install without package data has none
        app.mount("/static", StaticFiles(directory=_WEB), name="static")

    # No _check_query here: the page's own script reads its query (?allocation_id=...).
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(_PAGE.read_text("utf-8") if _PAGE.exists() else _FALLBACK_PAGE)

    return app


_FALLBACK_PAGE: Final = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>correlator</title></head><body><h1>correlator</h1>
<p>JSON API: <a href="/docs">/docs</a>. Try <code>/v1/findings</code> or
<code>/v1/timeline?allocation_id=...</code>.</p></body></html>"""
