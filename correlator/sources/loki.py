"""The ``loki`` source: pull a bounded window of entries from Loki with a LogQL query.

:func:`fetch` pages through ``query_range`` by time with
:meth:`agent_logging.loki.LokiClient.iter_query_range`: each page starts at the last
timestamp seen (Loki's ``start`` is inclusive, ``end`` exclusive), entries already yielded at
that boundary are skipped, and no page asks for more than Loki's default
``max_entries_limit_per_query`` of 5,000 entries (a larger ``limit`` is refused with a 400).
Authentication, tenant and TLS are the client's (``LokiClient(url, tenant=..., bearer_token=...,
basic_auth=..., ca_bundle=...)``).

Each entry whose line is a record of DESIGN §4 is read as the ``ndjson`` adapter reads it
(its own ``ts`` wins; layer and service fall back to the stream's ``layer`` and
``service_name`` labels). Any other line (an nginx line shipped by a collector, plain text)
becomes an event built from the entry: Loki's timestamp, the ``layer`` and ``service_name``
labels, ``level`` (or ``detected_level``), the identifiers found among the labels and
structured metadata (validated like every identifier), the line as the message, the other
labels in ``attrs["labels"]``. An entry with no layer at all (not in the record, not a label,
no ``default_layer``) is a :class:`~correlator.model.Reject`.

An entry's hash covers its timestamp and line, which is what makes it one entry to Loki
within a stream; the labels are left out because which of them come back depends on the
query (``| json`` adds parsed ones). Loki shards a fast stream (``__stream_shard__``) and
de-duplicates within one shard only, so a resent entry can be stored in two shards: the client
yields the same timestamp and line in two shards of one stream once, and it is one event.
Pages are sized to about 1 MiB of answer from the entries seen (``loki._client.PAGE_BYTES``):
``page_limit`` caps them, since Loki cannot send an answer over gRPC's 4 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson

from agent_logging.loki import DEFAULT_QUERY_LIMIT, LokiClient, LokiQueryError
from agent_logging.schema import CONTEXT_KEYS, LAYER_LABEL, METADATA_KEYS, SERVICE_LABEL
from correlator.errors import QueryError, SourceError
from correlator.model import LAYERS, MAX_LINE_BYTES, Event, Reject
from correlator.sources._fields import normalise_level, take_id
from correlator.sources._lines import hasher
from correlator.sources._record import record_row

__all__ = ["MAX_PAGE_LIMIT", "fetch"]

_SOURCE: Final = "loki"

#: Loki's default ``max_entries_limit_per_query``.
MAX_PAGE_LIMIT: Final = DEFAULT_QUERY_LIMIT

_MAX_MESSAGE_CHARS: Final = 1000
# What an entry's stream and structured metadata say that the event takes as a field of its
# own (the stream schema's labels and metadata keys, and the level Loki detects).
_LABELS_TAKEN: Final = frozenset({LAYER_LABEL, SERVICE_LABEL, *METADATA_KEYS, "detected_level"})
_ID_LABELS: Final = CONTEXT_KEYS


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

    if line.startswith("{"):
        try:
            record = orjson.loads(data)
        except orjson.JSONDecodeError:
            record = None
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
                return Event(*row)
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
