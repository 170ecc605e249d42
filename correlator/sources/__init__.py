"""The sources of evidence: one module per kind, each declaring its
:class:`~correlator.sources._source.Source` beside its parser, and the registry that lists
them (:data:`SOURCES`).

Everything that names the kinds reads them here: ``ingest``'s ``--source``, its options and
its ``--help``, the CLI's choice between files and a reader (Loki's query, workflow's audit
table), the API's accepted kinds and query parameters and their description in ``/docs``,
the guess of the kind some rejected lines look like, the evaluation's file kinds. A new
source is one module declaring its ``Source`` and one line below.

A parser, ``parse(lines, origin, **options)``, reads raw lines without their trailing ``\\n``
(a ``\\r`` may remain), numbered from 1. It never raises on bad input: it yields a
:class:`~correlator.model.Reject` naming the line and what is wrong, and goes on with the next
line. Document sources (k8s, aap) accept a whole JSON document spread over the lines, or one
JSON object per line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from correlator.errors import QueryError
from correlator.sources import aap, k8s, loki, ndjson, nginx, postgres, text, workflow
from correlator.sources._source import (
    SETTLE_LINES,
    AfterCommit,
    Columns,
    Cuts,
    Option,
    Parser,
    Reader,
    Settle,
    Source,
    Table,
)

__all__ = [
    "SETTLE_LINES",
    "SOURCES",
    "AfterCommit",
    "Columns",
    "Cuts",
    "Option",
    "Parser",
    "Reader",
    "Settle",
    "Source",
    "Table",
    "environ_values",
    "file_kinds",
    "flag_values",
    "options",
    "query_values",
    "source",
]

#: Every source, by kind, in the order ``ingest --help`` lists them. A test may add one (and
#: take it away again): everything reads this mapping when it is used, none copies it.
SOURCES: Final[dict[str, Source]] = {
    declared.name: declared
    for declared in (
        ndjson.NDJSON,
        ndjson.AGENT,
        nginx.NGINX,
        text.TEXT,
        postgres.POSTGRES,
        workflow.WORKFLOW,
        k8s.K8S,
        aap.AAP,
        loki.LOKI,
    )
}


def file_kinds() -> tuple[str, ...]:
    """The kinds read from lines (files, standard input, request bodies)."""
    return tuple(name for name, declared in SOURCES.items() if declared.parse is not None)


def source(kind: str) -> Source:
    """The source of a kind.

    Raises:
        QueryError: no source is of that kind; the message lists those that are.
    """
    declared = SOURCES.get(kind)
    if declared is None:
        files = file_kinds()
        others = [name for name in SOURCES if name not in files]
        rest = f" (or {', '.join(others)})" if others else ""
        raise QueryError(f"unknown source kind {kind!r}; use one of {', '.join(files)}{rest}")
    return declared


def options() -> Iterator[tuple[Source, Option]]:
    """Every source's options, its parser's and then its reader's, each with its source; an
    option two sources declare alike comes once (the first)."""
    seen: set[str] = set()
    for declared in SOURCES.values():
        for option in (*declared.options, *declared.reader_options):
            if option.flag not in seen:
                seen.add(option.flag)
                yield declared, option


def flag_values(
    declared: Source, given: Mapping[str, str | None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of an ``ingest`` of ``declared``: its parser's and its reader's, by name.

    An option not given takes its variables' value (:attr:`Option.environ`), else its
    default.

    Args:
        declared: the source ingested.
        given: the text of each option given on the command line, by flag.

    Returns:
        The parser's values, and the reader's.

    Raises:
        QueryError: an option of another source is given (naming it and its source), or a
            value is refused (naming the option or the variable).
    """
    _refuse_others(declared, given, lambda option: option.flag, "--source ")
    return (
        {option.name: _value(option, given.get(option.flag)) for option in declared.options},
        {option.name: _value(option, given.get(option.flag)) for option in declared.reader_options},
    )


def query_values(
    declared: Source, given: Mapping[str, str | None], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """The parser's values of a ``POST /v1/evidence`` of ``declared``, by name.

    Args:
        declared: the source posted.
        given: the query parameters of the sources' options, by parameter.
        defaults: the values of options the request does not give, by name (the service's
            :func:`environ_values`, read when it started); else their default.

    Raises:
        QueryError: a parameter of another source is given, or a value is refused (naming
            the parameter).
    """
    _refuse_others(declared, given, lambda option: option.query, "source=")
    values = {}
    for option in declared.options:
        text = given.get(option.query) if option.query is not None else None
        if text is not None:
            values[option.name] = option.read(f"query parameter {option.query!r}", text)
        else:
            values[option.name] = defaults.get(option.name, option.default)
    return values


def environ_values() -> dict[str, dict[str, Any]]:
    """What the environment sets of each source's parser options, by source and name (the
    service reads it once, when it starts: a malformed variable stops it there).

    Raises:
        QueryError: a variable's value is refused (naming the variable).
    """
    found: dict[str, dict[str, Any]] = {}
    for declared in SOURCES.values():
        for option in declared.options:
            value = _environ(option)
            if value is not None:
                found.setdefault(declared.name, {})[option.name] = value
    return found


def _refuse_others(
    declared: Source,
    given: Mapping[str, str | None],
    key: Callable[[Option], str | None],
    use: str,
) -> None:
    """Refuse a value given for an option ``declared`` does not take, naming whose it is."""
    own = {key(option) for option in (*declared.options, *declared.reader_options)}
    for other, option in options():
        name = key(option)
        if name is not None and name not in own and given.get(name) is not None:
            label = option.flag if use.startswith("-") else f"query parameter {name!r}"
            raise QueryError(f"{label} {option.what}: use it with {use}{other.name}")


def _value(option: Option, text: str | None) -> Any:
    """An ``ingest`` option's value: as given, else from its variables, else its default."""
    if text is not None:
        return option.read(option.flag, text)
    value = _environ(option)
    return option.default if value is None else value


def _environ(option: Option) -> Any:
    """The value of the first of the option's variables that is set and not blank."""
    for variable in option.environ:
        text = os.environ.get(variable, "").strip()
        if text:
            return option.read(variable, text)
    return None
