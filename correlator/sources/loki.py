"""The ``loki`` source: pull a bounded window of entries from Loki with a LogQL query.

:func:`fetch` pages through ``query_range`` by time with
:meth:`agent_logging.loki.LokiClient.iter_query_range`: each page starts at the last
timestamp seen (Loki's ``start`` is inclusive, ``end`` exclusive), entries already yielded at
that boundary are skipped, and no page asks for more than Loki's default
``max_entries_limit_per_query`` of 5,000 entries (a larger ``limit`` is refused with a 400).
Authentication, tenant and TLS are the client's (``LokiClient(url, tenant=..., bearer_token=...,
basic_auth=..., ca_bundle=...)``).

Each entry whose line is a record of DESIGN §4 (a JSON object with a ``ts``, an ``event`` or
a ``layer``) is read as the ``ndjson`` adapter reads it (its own ``ts`` wins; layer and
service fall back to the stream's ``layer`` and ``service_name`` labels). A line a collector
shipped as its program wrote it (an nginx access or error line, a PostgreSQL jsonlog or
csvlog line: collector-config/) is read by that program's source, as its file would be: the
same event, HTTP fields, severity and SQLSTATE, owner evidence and hash, the query as its
origin. Either takes the identifiers it lacks from the entry's structured metadata and
labels, where collectors put what they extract (nginx's ``$request_id``, the sqlcommenter
comment's identifiers), each validated. Any other line (plain text, JSON the record mapping
refuses) becomes an event built from the entry: Loki's timestamp, the ``layer`` and
``service_name`` labels, ``level`` (or ``detected_level``), the identifiers found among the
labels and structured metadata (validated like every identifier), the line as the message, the other
labels in ``attrs["labels"]``. An entry with no layer at all (not in the record, not a label,
no ``default_layer``) is a :class:`~correlator.model.Reject`.

An entry's hash covers its timestamp and line, which is what makes it one entry to Loki
within a stream; the labels are left out because which of them come back depends on the
query (``| json`` adds parsed ones). Loki shards a fast stream (``__stream_shard__``) and
de-duplicates within one shard only, so a resent entry can be stored in two shards: the client
yields the same timestamp and line in two shards of one stream once, and it is one event.
Pages are sized to about 1 MiB of answer from the entries seen (``loki._client.PAGE_BYTES``):
``page_limit`` caps them, since Loki cannot send an answer over gRPC's 4 MiB.

:data:`LOKI` declares the source: no file, a reader (:func:`read_query`) and its options,
``ingest --source loki --query LOGQL --since 1h --loki-url URL``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Final

import orjson

from agent_logging.errors import ConfigurationError
from agent_logging.loki import DEFAULT_QUERY_LIMIT, LokiClient, LokiQueryError
from agent_logging.schema import CONTEXT_KEYS, LAYER_LABEL, METADATA_KEYS, SERVICE_LABEL
from correlator import _environ
from correlator.errors import QueryError, SourceError
from correlator.model import LAYERS, MAX_LINE_BYTES, Event, Reject
from correlator.sources import nginx, postgres
from correlator.sources._fields import normalise_level, take_id
from correlator.sources._lines import hasher
from correlator.sources._record import record_row
from correlator.sources._source import Option, Reader, Source

__all__ = ["LOKI", "MAX_PAGE_LIMIT", "fetch", "read_query"]

_SOURCE: Final = "loki"

#: Loki's default ``max_entries_limit_per_query``.
MAX_PAGE_LIMIT: Final = DEFAULT_QUERY_LIMIT

_MAX_MESSAGE_CHARS: Final = 1000
# What an entry's stream and structured metadata say that the event takes as a field of its
# own (the stream schema's labels and metadata keys, and the level Loki detects).
_LABELS_TAKEN: Final = frozenset({LAYER_LABEL, SERVICE_LABEL, *METADATA_KEYS, "detected_level"})
_ID_LABELS: Final = CONTEXT_KEYS
#: Keys of which a JSON line needs one to be read as a record of DESIGN §4 (an nginx access
#: line or a PostgreSQL jsonlog line has none: its own source reads it).
_RECORD_KEYS: Final = frozenset({"ts", "event", LAYER_LABEL})
#: The parsers of the sources whose lines collectors ship to Loki as they are
#: (collector-config/: nginx, PostgreSQL): an entry that is not a record is read by the first
#: of them that reads it, as its file would be.
_SHIPPED_PARSERS: Final = (nginx.parse, postgres.parse)


def _shipped_event(data: bytes, labels: dict[str, str], query: str) -> Event | None:
    """An entry's line read by the source that writes such lines (an nginx access or error
    line, a PostgreSQL log line), with the identifiers its structured metadata adds; None
    when none of them reads it.

    The event is that source's, as a file of the line gives it (its kind, time, hash: the
    same line pulled from Loki and ingested from its file is one event); its origin is the
    query.
    """
    for parse in _SHIPPED_PARSERS:
        for item in parse([data], query):
            if isinstance(item, Event):
                return _with_labelled_ids(item, labels)
            break
    return None


def _with_labelled_ids(event: Event, labels: dict[str, str]) -> Event:
    """``event`` with the identifiers it lacks taken from the entry's stream labels and
    structured metadata (where collectors and agent_logging put them), each validated."""
    missing = {
        key: labels[key] for key in _ID_LABELS if labels.get(key) and getattr(event, key) is None
    }
    if not missing:
        return event
    rejected: dict[str, str] = {}
    taken = {key: take_id(key, value, rejected) for key, value in missing.items()}
    found: dict[str, Any] = {key: value for key, value in taken.items() if value is not None}
    if rejected:
        attrs = dict(event.attrs)
        attrs["rejected_ids"] = {**attrs.get("rejected_ids", {}), **rejected}
        return replace(event, attrs=attrs, **found)
    return replace(event, **found) if found else event


def fetch(
    client: LokiClient,
    query: str,
    *,
    start_ns: int,
    end_ns: int,
    page_limit: int = MAX_PAGE_LIMIT,
    default_layer: str | None = None,
) -> Iterator[Event | Reject]:
    """Fetch a window of entries from Loki as events, oldest first.

    Args:
        client: a Loki client (URL, tenant, auth and TLS are its configuration).
        query: a LogQL log query, e.g. from :func:`correlator.logql.query_for`.
        start_ns: window start, nanoseconds since the epoch, inclusive.
        end_ns: window end, exclusive.
        page_limit: entries per request, at most 5,000 (Loki's default cap).
        default_layer: the layer of entries that name none in their line or labels.

    Returns:
        An iterator of events (source ``loki``, origin the query) and rejects for entries
        that cannot be read.

    Raises:
        QueryError: a bad window, page limit or default layer (at once, before any request).
        SourceError: Loki cannot be reached or refuses the query (while iterating).
    """
    for name, value in (("start_ns", start_ns), ("end_ns", end_ns), ("page_limit", page_limit)):
        if type(value) is not int:
            raise QueryError(f"{name} must be an integer, not {value!r}")
    if start_ns >= end_ns:
        raise QueryError(f"the window is empty: start_ns {start_ns} is not before end_ns {end_ns}")
    if not 1 <= page_limit <= MAX_PAGE_LIMIT:
        raise QueryError(
            f"page_limit {page_limit} is outside 1 to {MAX_PAGE_LIMIT:,} "
            "(Loki's max_entries_limit_per_query)"
        )
    if default_layer is not None and default_layer not in LAYERS:
        raise QueryError(f"unknown default layer {default_layer!r}; one of {', '.join(LAYERS)}")
    return _fetch(client, query, start_ns, end_ns, page_limit, default_layer)


def _fetch(
    client: LokiClient,
    query: str,
    start_ns: int,
    end_ns: int,
    page_limit: int,
    default_layer: str | None,
) -> Iterator[Event | Reject]:
    base = hasher(_SOURCE)
    entries = client.iter_query_range(
        query, start_ns=start_ns, end_ns=end_ns, page_limit=page_limit
    )
    number = 0
    try:
        for entry in entries:
            number += 1
            yield _entry_event(
                entry.labels, entry.ts_ns, entry.line, number, query, base, default_layer
            )
    except LokiQueryError as exc:
        raise SourceError(f"Loki query {query!r} failed after {number} entries: {exc}") from exc


def _entry_event(
    labels: dict[str, str],
    ts_ns: int,
    line: str,
    number: int,
    query: str,
    base: Any,
    default_layer: str | None,
) -> Event | Reject:
    # The client decoded Loki's answer with orjson, which refuses lone surrogates: the line
    # is valid UTF-8 text.
    data = line.encode()
    if len(data) > MAX_LINE_BYTES:
        reason = f"entry {number} is {len(data):,} bytes; the limit is {MAX_LINE_BYTES:,}"
        return Reject(_SOURCE, query, number, reason, line[:200])
    state = base.copy()
    state.update(b"%d\n" % ts_ns)
    state.update(data)
    digest = int.from_bytes(state.digest(), "big", signed=True)
    label_layer = labels.get("layer")
    layer = label_layer if label_layer in LAYERS else default_layer
    service = labels.get("service_name") or None

    record = None
    if line.startswith("{"):
        try:
            record = orjson.loads(data)
        except orjson.JSONDecodeError:
            record = None
    if not (isinstance(record, dict) and record.keys() & _RECORD_KEYS):
        shipped = _shipped_event(data, labels, query)
        if shipped is not None:
            return shipped
    if isinstance(record, dict):
        row = record_row(
            record,
            line,
            digest,
            source=_SOURCE,
            origin=query,
            line_no=number,
            default_layer=layer,
            default_service=service,
            default_ts_ns=ts_ns,
        )
        if not isinstance(row, str):
            return _with_labelled_ids(Event(*row), labels)
    if layer is None:
        reason = (
            f"entry {number} names no layer: the line is not a record with one and the stream "
            f"has no 'layer' label of a known layer ({', '.join(LAYERS)})"
        )
        return Reject(_SOURCE, query, number, reason, line[:200])
    rejected: dict[str, str] = {}
    ids = {key: take_id(key, labels.get(key) or None, rejected) for key in _ID_LABELS}
    attrs: dict[str, Any] = {}
    others = {k: v for k, v in labels.items() if k not in _LABELS_TAKEN}
    if others:
        attrs["labels"] = others
    if rejected:
        attrs["rejected_ids"] = rejected
    level_text = labels.get("level") or labels.get("detected_level")
    level = normalise_level(level_text)
    if level is None:
        level = "info"
        if level_text:
            attrs["level"] = level_text
    return Event(
        ts_ns=ts_ns,
        layer=layer,
        source=_SOURCE,
        origin=query,
        message=line[:_MAX_MESSAGE_CHARS],
        raw=line,
        hash=digest,
        service=service,
        level=level,
        attrs=attrs,
        node_id=ids["node_id"],
        node_instance_id=ids["node_instance_id"],
        correlation_id=ids["correlation_id"],
        allocation_id=ids["allocation_id"],
        workflow_id=ids["workflow_id"],
        trace_id=ids["trace_id"],
        span_id=ids["span_id"],
    )


def read_query(
    *,
    url: str | None,
    query: str | None,
    since: str | None,
    start: str | None,
    end: str | None,
    tenant: str | None,
    username: str | None,
    ca_bundle: str | None,
) -> Iterator[Event | Reject]:
    """``ingest --source loki``: ``query`` over the window, from the Loki at ``url``.

    The password is only read from ``CORRELATOR_LOKI_PASSWORD`` and a bearer token from
    ``CORRELATOR_LOKI_BEARER_TOKEN``, never from an option (a command line is visible to every
    user of the machine).

    Args:
        url: Loki's base URL.
        query: the LogQL log query.
        since: how far back from ``end`` the window starts (default 1h), unless ``start``.
        start: the window's start (``queries.parse_time_ns``), else ``end`` less ``since``.
        end: the window's end, default now.
        tenant: ``X-Scope-OrgID`` of a multi-tenant Loki.
        username: the user of basic auth.
        ca_bundle: CA certificates for Loki's TLS.

    Returns:
        The entries as events and rejects; the client is closed once they are read.

    Raises:
        QueryError: a missing or contradictory setting, or one the Loki client refuses (a
            URL that is not http(s), a CA bundle that cannot be loaded); the message names it.
        SourceError: Loki failed (raised while fetching; what came before is kept).
    """
    # Here, not at the top: the sources are imported by parse workers, which need no store.
    from correlator.queries import parse_duration_s, parse_time_ns

    if not url:
        raise QueryError(f"give --loki-url or set {_environ.LOKI_URL}")
    if not query:
        raise QueryError("--source loki needs --query LOGQL")
    end_ns = parse_time_ns(end) if end else time.time_ns()
    if start:
        start_ns = parse_time_ns(start)
    else:
        start_ns = end_ns - int(parse_duration_s(since or "1h") * 1e9)
    return _closing(client(url, tenant, username, ca_bundle), query, start_ns, end_ns)


def client(
    url: str | None, tenant: str | None, username: str | None, ca_bundle: str | None
) -> LokiClient:
    """A client of the Loki at ``url``, as ``--source loki`` and a timeline from Loki make
    it: the password only from ``CORRELATOR_LOKI_PASSWORD``, a bearer token only from
    ``CORRELATOR_LOKI_BEARER_TOKEN`` (a command line is visible to every user of the machine).

    Raises:
        QueryError: no URL, basic auth and a token both, or a setting the client refuses (a
            URL that is not http(s), a CA bundle that cannot be loaded); the message names it.
    """
    if not url:
        raise QueryError(f"give --loki-url or set {_environ.LOKI_URL}")
    # An empty variable counts as unset: a blank line in an env file must not send an empty
    # password or token.
    password = os.environ.get(_environ.LOKI_PASSWORD, "")
    token = os.environ.get(_environ.LOKI_BEARER_TOKEN) or None
    if username is not None and token is not None:
        raise QueryError(
            f"Loki takes basic auth (--username or {_environ.LOKI_USERNAME}) or a bearer "
            f"token ({_environ.LOKI_BEARER_TOKEN}), not both"
        )
    try:
        return LokiClient(
            url,
            tenant=tenant,
            basic_auth=(username, password) if username is not None else None,
            bearer_token=token,
            ca_bundle=ca_bundle,
        )
    except ConfigurationError as exc:  # agent_logging's error, in the correlator's terms
        raise QueryError(str(exc)) from exc


def _closing(
    client: LokiClient, query: str, start_ns: int, end_ns: int
) -> Iterator[Event | Reject]:
    with client:
        yield from fetch(client, query, start_ns=start_ns, end_ns=end_ns)


_TIMES: Final = "RFC 3339, nanoseconds since 1970, or now-1h"

LOKI: Final = Source(
    _SOURCE,
    "no file: --query LOGQL --since 1h --loki-url URL asks a Loki for records",
    reader=Reader(
        read_query,
        (
            Option("query", "--query", "LogQL (with --source loki)", "is a LogQL query of Loki"),
            Option(
                "since",
                "--since",
                "how far back from --to (with --source loki), e.g. 1h (default 1h)",
                "is the window of a Loki query",
            ),
            Option(
                "start",
                "--from",
                f"window start: {_TIMES}",
                "is the window of a Loki query",
                metavar="TIME",
            ),
            Option(
                "end",
                "--to",
                f"window end (default: now): {_TIMES}",
                "is the window of a Loki query",
                metavar="TIME",
            ),
            Option(
                "url",
                "--loki-url",
                f"Loki's base URL (default ${_environ.LOKI_URL})",
                "is the URL of a Loki",
                environ=(_environ.LOKI_URL, "AGENT_LOGGING_LOKI_URL"),
            ),
            Option(
                "tenant",
                "--tenant",
                f"X-Scope-OrgID of a multi-tenant Loki (default ${_environ.LOKI_TENANT})",
                "is the tenant of a Loki",
                environ=(_environ.LOKI_TENANT,),
            ),
            Option(
                "username",
                "--username",
                f"basic auth user (default ${_environ.LOKI_USERNAME}); the password only from "
                f"${_environ.LOKI_PASSWORD}, a bearer token from ${_environ.LOKI_BEARER_TOKEN}",
                "is the user of a Loki",
                environ=(_environ.LOKI_USERNAME,),
            ),
            Option(
                "ca_bundle",
                "--ca-bundle",
                f"CA certificates for Loki's TLS (default ${_environ.LOKI_CA_BUNDLE})",
                "verifies a Loki's TLS",
                metavar="FILE",
                environ=(_environ.LOKI_CA_BUNDLE,),
            ),
        ),
    ),
)
