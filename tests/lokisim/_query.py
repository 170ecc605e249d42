"""``query_range`` and the label endpoints: parameters, ordering and JSON shape.

Parameters follow ``pkg/loghttp/params.go``: ``start``/``end`` are ns integers (10
digits or fewer read as seconds), decimal seconds or RFC 3339; ``end`` defaults to
now and ``start`` to ``end - since`` (``since`` defaults to 1 h); ``limit`` defaults to
100; ``direction`` defaults to ``backward``. The range is ``[start, end)``.

Results follow ``pkg/logql/engine.go`` (``readStreams``) and
``pkg/util/marshal/query.go``: the ``limit`` first entries in direction order (ties
broken by the stream's hash, then its labels), grouped into streams sorted by their
label text. An answer over gRPC's 4 MiB (between Loki's querier and frontend) is a 504
after Loki's query timeout; the test server answers it at once. By default
structured metadata and parsed labels are merged into each result stream's labels,
so one pushed stream can come back as several; with the request header
``X-Loki-Response-Encoding-Flags: categorize-labels`` streams keep their own labels
and each value carries ``{"structuredMetadata": {...}, "parsed": {...}}``.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tests.lokisim._labels import format_labels
from tests.lokisim._limits import QUERY_TIMED_OUT, Limits
from tests.lokisim._logql import LogQLParseError, parse_query
from tests.lokisim._store import Hit, Store

__all__ = ["QueryError", "QueryTimedOut", "labels_response", "query_range_response"]

_NS_PER_S = 1_000_000_000
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d\d):(\d\d))"
)
_DURATION = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?"
)
_DURATION_UNITS_S = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
_CATEGORIZE = "categorize-labels"


class QueryError(ValueError):
    """A bad query request; str() is Loki's message, answered with 400."""


class QueryTimedOut(Exception):
    """The answer is over the gRPC message limit between querier and frontend (4 MiB): Loki's
    frontend waits out its query timeout (1 min) and answers 504 with this text; the test
    server answers at once."""

    def __init__(self) -> None:
        super().__init__(QUERY_TIMED_OUT)


# What an entry adds to a querier's answer besides its line and metadata (timestamp, field
# headers): about, as the limit is decided on it.
_ENTRY_OVERHEAD_BYTES = 20


@dataclass(frozen=True)
class _Range:
    start_ns: int
    end_ns: int


def _parse_time(value: str, default_ns: int, name: str) -> int:
    if not value:
        return default_ns
    if "." in value:
        try:
            seconds = float(value)
        except ValueError:
            pass
        else:
            fraction, whole = math.modf(seconds)
            return int(whole) * _NS_PER_S + int(round(fraction * 1000) / 1000 * _NS_PER_S)
    if re.fullmatch(r"[+-]?[0-9]+", value):
        number = int(value)
        return number * _NS_PER_S if len(value) <= 10 else number
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise QueryError(
            f"could not parse '{name}' parameter: "
            f'strconv.ParseInt: parsing "{value}": invalid syntax'
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    nanos = int((match.group(7) or "").ljust(9, "0"))
    offset_s = 0
    if match.group(9):
        sign = 1 if match.group(9) == "+" else -1
        offset_s = sign * (int(match.group(10)) * 3600 + int(match.group(11)) * 60)
    seconds_since = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - offset_s
    return seconds_since * _NS_PER_S + nanos


def _parse_duration_ns(value: str) -> int:
    match = _DURATION.fullmatch(value)
    if not value or match is None:
        raise QueryError(
            f"could not parse 'since' parameter: not a valid duration string: \"{value}\""
        )
    seconds = sum(
        int(g) * unit for g, unit in zip(match.groups(), _DURATION_UNITS_S, strict=True) if g
    )
    return int(seconds * _NS_PER_S)


def _bounds(params: Mapping[str, str], now_ns: int) -> _Range:
    since_ns = _parse_duration_ns(params["since"]) if params.get("since") else 3600 * _NS_PER_S
    end_ns = _parse_time(params.get("end", ""), now_ns, "end")
    start_ns = _parse_time(params.get("start", ""), min(end_ns, now_ns) - since_ns, "start")
    if end_ns < start_ns:
        raise QueryError("end timestamp must not be before or equal to start time")
    return _Range(start_ns, end_ns)


def _limit(params: Mapping[str, str]) -> int:
    raw = params.get("limit", "")
    if not raw:
        return 100
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise QueryError(f'strconv.Atoi: parsing "{raw}": invalid syntax')
    limit = int(raw)
    if limit <= 0:
        raise QueryError("limit must be a positive value")
    return limit


def query_range_response(
    store: Store, tenant: str, params: Mapping[str, str], headers: Mapping[str, str], limits: Limits
) -> bytes:
    """Answer ``GET /loki/api/v1/query_range``.

    Args:
        store: the data.
        tenant: the tenant ID.
        params: query parameters (first value of each).
        headers: request headers with lower-case names.
        limits: the tenant's limits (query cap and clock).

    Returns:
        The JSON body of a 200.

    Raises:
        QueryError: a parameter or the query is invalid (Loki answers 400).
        QueryTimedOut: the answer is too large for Loki to send (504).
    """
    span = _bounds(params, limits.now())
    limit = _limit(params)
    direction = params.get("direction", "") or "backward"
    if direction.lower() not in ("forward", "backward"):
        raise QueryError(f"invalid direction '{direction}'")
    try:
        query = parse_query(params.get("query", ""))
    except LogQLParseError as exc:
        raise QueryError(str(exc)) from exc
    cap = limits.max_entries_limit_per_query
    if cap and limit > cap:
        raise QueryError(
            "max entries limit per query exceeded, limit > max_entries_limit_per_query "
            f"({limit} > {cap})"
        )
    forward = direction.lower() == "forward"
    hits = store.select(tenant, query, span.start_ns, span.end_ns)
    # pkg/iter/entry_iterator.go lessAscending/lessDescending: ties on the timestamp go by
    # the stream's hash (ascending in both directions), then by the labels printed; within
    # one stream, entries keep their order (reversed, backward).
    if forward:
        hits.sort(key=lambda hit: (hit.entry.ts_ns, hit.stream_hash, hit.stream, hit.seq))
    else:
        hits.sort(key=lambda hit: (-hit.entry.ts_ns, hit.stream_hash, hit.stream, -hit.seq))
    hits = hits[:limit]
    answer_bytes = sum(
        len(hit.entry.line.encode())
        + _ENTRY_OVERHEAD_BYTES
        + sum(len(n) + len(v) + 6 for n, v in hit.entry.metadata.items())
        for hit in hits
    )
    if answer_bytes > limits.grpc_max_message_bytes:
        raise QueryTimedOut
    flags = [f.strip() for f in headers.get("x-loki-response-encoding-flags", "").split(",")]
    categorize = _CATEGORIZE in flags
    data: dict[str, object] = {"resultType": "streams"}
    if categorize:
        data["encodingFlags"] = [_CATEGORIZE]
    data["result"] = _group(hits, categorize=categorize)
    data["stats"] = _stats(hits)
    return json.dumps({"status": "success", "data": data}, ensure_ascii=False).encode()


def _group(hits: list[Hit], *, categorize: bool) -> list[dict[str, object]]:
    streams: dict[str, tuple[dict[str, str], list[list[object]]]] = {}
    for hit in hits:
        entry = hit.entry
        if categorize:
            labels = dict(entry.labels)
            value: list[object] = [str(entry.ts_ns), entry.line, _categories(hit)]
        else:
            labels = {**entry.labels, **entry.metadata, **hit.parsed}
            value = [str(entry.ts_ns), entry.line]
        key = format_labels(labels)
        streams.setdefault(key, (labels, []))[1].append(value)
    return [
        {"stream": dict(sorted(labels.items())), "values": values}
        for _, (labels, values) in sorted(streams.items(), key=lambda item: item[0])
    ]


def _categories(hit: Hit) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if hit.entry.metadata:
        out["structuredMetadata"] = dict(sorted(hit.entry.metadata.items()))
    if hit.parsed:
        out["parsed"] = dict(sorted(hit.parsed.items()))
    return out


def _stats(hits: list[Hit]) -> dict[str, object]:
    lines_bytes = sum(len(hit.entry.line.encode()) for hit in hits)
    return {
        "summary": {
            "bytesProcessedPerSecond": 0,
            "linesProcessedPerSecond": 0,
            "totalBytesProcessed": lines_bytes,
            "totalLinesProcessed": len(hits),
            "execTime": 0.0,
            "queueTime": 0.0,
            "subqueries": 0,
            "totalEntriesReturned": len(hits),
            "splits": 0,
            "shards": 0,
            "totalPostFilterLines": len(hits),
        }
    }


def labels_response(
    store: Store, tenant: str, name: str | None, params: Mapping[str, str], limits: Limits
) -> bytes:
    """Answer ``/loki/api/v1/labels`` (name None) or ``/loki/api/v1/label/<name>/values``.

    Args:
        store: the data.
        tenant: the tenant ID.
        name: the label whose values are asked, or None for the names.
        params: query parameters (``start``, ``end``, ``since``).
        limits: the tenant's limits (for the clock).

    Returns:
        The JSON body of a 200.

    Raises:
        QueryError: a time parameter is invalid.
    """
    span = _bounds(params, limits.now())
    if name is None:
        values = store.label_names(tenant, span.start_ns, span.end_ns)
    else:
        values = store.label_values(tenant, name, span.start_ns, span.end_ns)
    return json.dumps({"status": "success", "data": values}).encode()
