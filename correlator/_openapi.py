"""What the service's OpenAPI schema says beyond what FastAPI infers from the routes.

The error body every refusal carries (:class:`ErrorBody`), the two bearer tokens as security
schemes (:data:`WRITE_BEARER`, :data:`READ_BEARER`), the raw body of ``POST /v1/evidence``
(:data:`EVIDENCE_BODY`) and its ``source`` kinds (:func:`source_description`, from the
registry's declarations), the error answers of a route (:func:`errors`), and FastAPI's own 422
left out of the schema (:class:`Service`): a request FastAPI cannot validate is a 400 here,
its message from :func:`invalid`. ``correlator.api`` uses them; ``/docs`` shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from correlator import _environ

__all__ = [
    "EVIDENCE_BODY",
    "READ_BEARER",
    "WRITE_BEARER",
    "Credentials",
    "ErrorBody",
    "Service",
    "errors",
    "invalid",
    "source_description",
]


class ErrorBody(BaseModel):
    """The body of every error the API answers; ``correlator.api.STATUS`` picks its status."""

    error: str = Field(
        description="The error's class: QueryError, InputError, TooLargeError, NotFoundError, "
        "AuthError, ...; or, for a refusal of the HTTP layer itself, its name: HostNotAllowed, "
        "NoSuchPath, MethodNotAllowed, BodyTimeout, BadRequest, InternalError.",
        examples=["QueryError"],
    )
    detail: str = Field(
        description="What was wrong, naming the parameter, field or line.",
        examples=["query parameter 'limit' is '0': Input should be greater than or equal to 1"],
    )


#: RFC 9110 §11.1: an authentication scheme's name is case-insensitive.
_SCHEME: Final = "The scheme's name is case-insensitive (`bearer` is taken too); the token is not."

# auto_error=False: a missing or wrong token is an AuthError, answered in the API's own shape
# by correlator.api.STATUS, not FastAPI's; these two only read the header and document it in /docs.
WRITE_BEARER: Final = HTTPBearer(
    scheme_name=_environ.TOKEN,
    description="`POST /v1/evidence` needs `Authorization: Bearer <CORRELATOR_TOKEN>`. "
    "A service started without CORRELATOR_TOKEN refuses every write. " + _SCHEME,
    auto_error=False,
)
READ_BEARER: Final = HTTPBearer(
    scheme_name=_environ.READ_TOKEN,
    description="When the service is started with CORRELATOR_READ_TOKEN, every read needs "
    "`Authorization: Bearer <CORRELATOR_READ_TOKEN>` (CORRELATOR_TOKEN is taken too). "
    "Without it reads are open, and the schema lists no security on them. " + _SCHEME,
    auto_error=False,
)
Credentials = HTTPAuthorizationCredentials | None

#: What each error status means, for the schema (the body is always an :class:`ErrorBody`).
_MEANINGS: Final = {
    400: "A query parameter unknown, repeated, missing or with a bad value; the detail names it. "
    "Or a `Host` header that names no address of the service (`HostNotAllowed`: see "
    f"{_environ.ALLOWED_HOSTS}).",
    401: "No or wrong bearer token (the answer carries `WWW-Authenticate: Bearer`).",
    404: "No evidence mentions the identifier.",
    408: f"The body did not arrive within the deadline ({_environ.BODY_TIMEOUT_S}); nothing of "
    "it is stored.",
    413: f"The body is over the size cap ({_environ.MAX_BODY_BYTES}); split the evidence.",
    502: "The service, started with a Loki, could not pull the incident from it (unreachable, "
    "or it refused a query); the detail names the setting to look at.",
}

#: ``POST /v1/evidence`` reads its body raw (streamed, line by line, under a size cap and a
#: deadline), so FastAPI cannot describe it; the Content-Type is not checked, and a body sent
#: without one is read the same.
EVIDENCE_BODY: Final = {
    "description": "One record per line, as the `source` kind writes them (its description "
    "says how: NDJSON for `ndjson`/`agent`, the native log lines for most others). A UTF-8 "
    "byte order mark at the start is dropped.",
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


def source_description(looks_like: Mapping[str, str]) -> str:
    """The ``source`` parameter's description: each kind a body may be of, with what its
    lines look like (``Source.looks_like``, which ``ingest --help`` shows too)."""
    kinds = "\n".join(f"- `{kind}`: {text}" for kind, text in looks_like.items())
    return f"The kind of evidence the body holds, one of:\n\n{kinds}"


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses``: each of ``statuses`` with its meaning and :class:`ErrorBody`."""
    return {status: {"model": ErrorBody, "description": _MEANINGS[status]} for status in statuses}


class Service(FastAPI):
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


def invalid(exc: RequestValidationError) -> str:
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
