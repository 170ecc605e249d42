"""Who issued a PostgreSQL log line: the identifiers its statement and ``application_name``
carry (``correlator.sources.postgres`` reads the lines).

Identifiers come from the last sqlcommenter comment (https://google.github.io/sqlcommenter/spec/)
in the statement (jsonlog ``statement``, csvlog ``query``) or else the message (``log_statement``
lines carry the statement there): ``/*allocation_id='a-9',correlation_id='c-1',
traceparent='00-<trace_id>-<span_id>-01'*/``; ``span_id`` is the span that issued the
statement. ``application_name`` adds what the comment lacks, by this convention:

- ``SERVICE`` (letters, digits, ``. _ -``): the client service, e.g. ``api``;
- ``SERVICE/KEY=VALUE[,KEY=VALUE...]`` with KEY one of the five identifiers, e.g.
  ``api/correlation_id=c-1``. PostgreSQL keeps 63 bytes of it: when it is exactly that long its
  last value may have been cut, so that value is refused.

Values failing :func:`agent_logging.schema.id_problem` are refused and named with the reason
(:attr:`Identified.rejected`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from agent_logging.context import parse_headers
from agent_logging.schema import id_problem
from correlator.model import IDENTIFIER_KEYS

__all__ = ["Identified", "identifiers", "sqlcommenter_tags"]

_TAG = re.compile(r"\s*([^\s=,']+)\s*=\s*'((?:[^'\\]|\\.)*)'\s*(?:,|$)")
_BACKSLASH = re.compile(r"\\(.)")
_APPLICATION = re.compile(r"([A-Za-z0-9._-]{1,63})(?:/(.*))?", re.DOTALL)
#: PostgreSQL stores NAMEDATALEN - 1 bytes of application_name.
_APPLICATION_NAME_MAX: Final = 63


def sqlcommenter_tags(text: str) -> dict[str, str]:
    """The key/value pairs of the last sqlcommenter comment in ``text``.

    Follows https://google.github.io/sqlcommenter/spec/: ``/*key='value',...*/`` with keys and
    values URL-encoded and ``'`` escaped as ``\\'``. A comment that is not wholly such pairs is
    not a sqlcommenter comment and is skipped. A value whose %-escapes do not decode to UTF-8 is
    kept as written (identifier checks then refuse it by its ``%``).

    Args:
        text: a statement or message.

    Returns:
        Decoded keys to decoded values; empty when there is no such comment.
    """
    if "/*" not in text:
        return {}
    for comment in reversed(_comments(text)):
        tags = _tags(comment)
        if tags:
            return tags
    return {}


def _comments(text: str) -> list[str]:
    """The bodies of the ``/* ... */`` comments of ``text``, in order (not nested).

    What ``re.findall(r"/\\*(.*?)\\*/", text, re.DOTALL)`` finds, in one pass: that pattern
    tries every ``/*`` against the rest of the text when no ``*/`` closes them, so a 60 KB
    statement of ``/* /* /* ...`` took 13 s and a 1 MiB one would take most of an hour.
    """
    bodies = []
    start = text.find("/*")
    while start != -1:
        end = text.find("*/", start + 2)
        if end == -1:  # no later "/*" can close either
            break
        bodies.append(text[start + 2 : end])
        start = text.find("/*", end + 2)
    return bodies


def _tags(body: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    position = 0
    while position < len(body):
        pair = _TAG.match(body, position)
        if pair is None or pair.end() == position:
            return {}
        position = pair.end()
        key = _decode(pair[1])
        tags[key] = _decode(_BACKSLASH.sub(r"\1", pair[2]))
    return tags


def _decode(value: str) -> str:
    if "%" not in value:
        return value
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        return value


@dataclass(frozen=True, slots=True)
class Identified:
    """What a log line's statement and ``application_name`` say about who issued it.

    Attributes:
        ids: identifier (and ``trace_id``/``span_id``) values that passed their checks.
        service: the client service named by ``application_name``, else ``postgres``.
        tags: the comment's other pairs (framework tags: route, controller, ...), in order.
        rejected: what was refused and why, by key (``application_name.KEY`` for the name's).
    """

    ids: dict[str, str]
    service: str
    tags: list[tuple[str, str]]
    rejected: dict[str, str]


def identifiers(fields: Mapping[str, str]) -> Identified:
    """Identifiers from the statement's comment (or else the message's), then
    ``application_name``; and the service.

    Args:
        fields: the log record's fields as the adapter names them (``statement``,
            ``message``, ``application_name``).
    """
    ids: dict[str, str] = {}
    rejected: dict[str, str] = {}
    statement = fields.get("statement", "")
    tags = sqlcommenter_tags(statement) or sqlcommenter_tags(fields.get("message", ""))
    for key, value in tags.items():
        if key in IDENTIFIER_KEYS:
            reason = id_problem(key, value)
            if reason is None:
                ids[key] = value
            else:
                rejected[key] = reason
        elif key == "traceparent":
            found, problems = parse_headers({"traceparent": value})
            ids.update(found)
            if problems:
                rejected["traceparent"] = "; ".join(problems)
    others = [(k, v) for k, v in tags.items() if k not in IDENTIFIER_KEYS and k != "traceparent"]
    service = "postgres"
    application = _APPLICATION.fullmatch(fields.get("application_name", ""))
    if application is not None:
        pairs = _application_pairs(application[2], fields["application_name"], rejected)
        if pairs is not None:
            service = application[1]
            for key, value in pairs.items():
                ids.setdefault(key, value)
    return Identified(ids, service, others, rejected)


def _application_pairs(
    text: str | None, application_name: str, rejected: dict[str, str]
) -> dict[str, str] | None:
    """``KEY=VALUE,...`` after ``SERVICE/``; None when the name does not follow the convention."""
    if text is None:
        return {}
    pairs: dict[str, str] = {}
    parts = text.split(",")
    for index, part in enumerate(parts):
        key, sep, value = part.partition("=")
        if not sep or key not in IDENTIFIER_KEYS:
            return None
        if index == len(parts) - 1 and len(application_name.encode()) >= _APPLICATION_NAME_MAX:
            rejected[f"application_name.{key}"] = (
                f"may be cut: application_name is {_APPLICATION_NAME_MAX} bytes, the most "
                "PostgreSQL keeps"
            )
            continue
        reason = id_problem(key, value)
        if reason is None:
            pairs[key] = value
        else:
            rejected[f"application_name.{key}"] = reason
    return pairs
