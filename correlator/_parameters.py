"""How the service reads its query parameters: each route's own, and none else.

:func:`check_query` refuses a parameter a route does not declare, or one given twice (a
typo such as ``limt=5`` would otherwise be ignored without a word); :func:`seed` declares the
five identifiers, so that ``/docs`` can ask for them, and takes the one given;
:func:`source_parameters` declares the query parameters of the sources' options (nginx's
``?tz=``), as the registry (``correlator.sources``) lists them. Each raises
:class:`~correlator.errors.QueryError` naming the parameter, which ``correlator.api`` answers
with a 400.

The two dependencies are coroutines although they never wait: FastAPI runs a plain function
dependency on a worker thread of Starlette's shared pool, and a request would then queue
there, behind a burst of others, for microseconds of work (``/healthz`` took seconds).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Final

from fastapi import Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from correlator import incident, sources
from correlator._openapi import source_description
from correlator.errors import QueryError
from correlator.model import IDENTIFIER_KEYS

__all__ = ["TIME", "Posted", "check_query", "seed", "source_parameters"]

_KEYS: Final = ", ".join(IDENTIFIER_KEYS)
_ONE_IDENTIFIER: Final = f"give exactly one identifier: ?KEY=VALUE with KEY one of {_KEYS}"
_Identifier = Annotated[
    str | None,
    Query(description=f"The identifier to start from; give exactly one of {_KEYS}."),
]
#: What :func:`source_parameters`' dependency gives: the kind, and each option's text by
#: parameter (None where not given).
Posted = tuple[str, dict[str, str | None]]
TIME: Final = "RFC 3339, integer nanoseconds since the epoch, or now-DURATION (now-2h)."


def _declared_query(dependant: Dependant) -> list[str]:
    """The query parameter names a route and its dependencies declare (aliases: ``from``)."""
    names = [field.alias for field in dependant.query_params]
    for dependency in dependant.dependencies:
        names += _declared_query(dependency)
    return names


async def check_query(request: Request) -> None:
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
        # Name what was given instead (``?alloc=a-1``): the likely typo is the thing to fix.
        unknown = [name for name in dict.fromkeys(n for n, _ in items) if name not in declared]
        given = f"; unknown query parameter {', '.join(map(repr, unknown))}" if unknown else ""
        raise QueryError(_ONE_IDENTIFIER + given)
    for name in dict.fromkeys(name for name, _ in items):
        if name not in declared:
            known: list[str] = [key for key in IDENTIFIER_KEYS if key in declared]
            known += sorted(set(declared).difference(IDENTIFIER_KEYS))
            raise QueryError(
                f"unknown query parameter {name!r}; known: {', '.join(known) or 'none'}"
            )
        if request.query_params.getlist(name)[1:]:
            raise QueryError(f"query parameter {name!r} is given more than once")


async def seed(
    node_id: _Identifier = None,
    node_instance_id: _Identifier = None,
    correlation_id: _Identifier = None,
    allocation_id: _Identifier = None,
    workflow_id: _Identifier = None,
) -> tuple[str, str]:
    """The identifier a query names, as ``(key, value)``.

    Declared one parameter per key so that ``/docs`` can ask for them; :func:`check_query`,
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


def source_parameters() -> Callable[..., Coroutine[Any, Any, Posted]]:
    """A dependency declaring ``source`` (one of the kinds read from lines) and one optional
    query parameter per source option that has one (``Option.query``: nginx's ``tz``), as
    the registry holds them when it is called (when the app is made).

    Declared, they are in ``/docs`` and :func:`check_query` takes them; which source may be
    given which, and what their text means, is ``sources.query_values``'. The signature is
    built here rather than written: the parameters are the registry's.

    Returns:
        The dependency; it returns the kind, and the text of each option parameter by name
        (None where not given).

    Raises:
        QueryError: (the dependency) the kind is none a body can be of.
    """
    kinds = sources.file_kinds()
    described = {kind: sources.SOURCES[kind].looks_like for kind in kinds}
    declared = {
        "source": inspect.Parameter(
            "source",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[
                str,
                Query(
                    description=source_description(described),
                    json_schema_extra={"enum": list(kinds)},
                ),
            ],
        )
    }
    # A parameter two sources take (nginx's and text's ``tz``) is declared once, described
    # by both.
    helps: dict[str, list[str]] = {}
    for _, option in sources.options():
        if option.query is not None and option.query_help not in helps.setdefault(option.query, []):
            helps[option.query].append(option.query_help)
    for name, texts in helps.items():
        declared[name] = inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[str | None, Query(description=" ".join(texts))],
        )

    async def given(source: str, **texts: str | None) -> Posted:
        if source not in kinds:
            raise QueryError(f"unknown source kind {source!r}; use one of {', '.join(kinds)}")
        return source, texts

    # FastAPI reads a dependency's parameters from its signature.
    given.__signature__ = inspect.Signature(list(declared.values()))  # type: ignore[attr-defined]
    return given
