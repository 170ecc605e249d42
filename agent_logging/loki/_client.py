"""The HTTP edge to Loki: push entries, query them back.

:meth:`LokiClient.push` never raises for anything the network or Loki does: it answers with a
:class:`~agent_logging.loki._answers.PushResult` whose ``outcome`` (``ok``, ``retry``,
``reject``) tells the shipper what to do next; ``_answers`` says how an answer is read,
and why a refusal of the request is never taken for a refusal of its entries.

Queries (:meth:`LokiClient.query_range`, :meth:`LokiClient.iter_query_range`) serve
``agent-logging drain``, the shipper's reconcile after a crash (``shipping._reconcile``) and the
correlator; they raise :class:`LokiQueryError` on failure. They ask Loki to keep structured
metadata apart from the stream labels (``X-Loki-Response-Encoding-Flags: categorize-labels``),
so an entry's stream is known (:attr:`QueriedEntry.stream`). Two facts of a stock Loki shape
the paging: a querier's answer larger than gRPC's 4 MiB never reaches the frontend (the query
times out a minute later, 504), so pages are sized to about :data:`PAGE_BYTES` from the size
of the entries seen; and Loki shards a fast stream (``__stream_shard__``) and de-duplicates
within one shard only, so an entry resent into another shard comes back twice:
:meth:`LokiClient.iter_query_range` yields it once.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import cramjam
import httpx
import orjson

from agent_logging.errors import AgentLoggingError, ConfigurationError
from agent_logging.loki._answers import (
    PushResult,
    classify_response,
    clip_reason,
    is_entry_refusal,
    parse_retry_after,
)
from agent_logging.loki._entries import PushEntry, RecordLike, entries_from_records
from agent_logging.loki._push import PROTOBUF_CONTENT_TYPE, PushBody, encode_body
from agent_logging.loki._record_encoder import encode_records
from agent_logging.loki._time_shards import TIME_SHARD_LABEL

__all__ = [
    "DEFAULT_QUERY_LIMIT",
    "PAGE_BYTES",
    "PUSH_PATH",
    "QUERY_RANGE_PATH",
    "SHARD_LABEL",
    "LokiClient",
    "LokiQueryError",
    "PushResult",
    "QueriedEntry",
    "classify_response",
    "is_entry_refusal",
    "parse_retry_after",
]

PUSH_PATH: Final = "/loki/api/v1/push"
QUERY_RANGE_PATH: Final = "/loki/api/v1/query_range"

#: Loki's default ``max_entries_limit_per_query``: a larger ``limit`` is refused with a 400.
DEFAULT_QUERY_LIMIT: Final = 5000
#: About how large a page of :meth:`LokiClient.iter_query_range` may be: a quarter of gRPC's
#: default 4 MiB message limit, which a querier's answer must pass to reach Loki's frontend
#: (5,000 entries of 2 KB, 10 MB, never arrive: the query times out after a minute, 504).
PAGE_BYTES: Final = 1 << 20
#: The first page of :meth:`LokiClient.iter_query_range` asks for at most this many entries,
#: before their size is known (100 lines of up to 40 KB stay under gRPC's limit).
_FIRST_PAGE_ENTRIES: Final = 100
#: The label Loki adds to the copies of a stream it shards (``pkg/ingester/instance.go``).
SHARD_LABEL: Final = "__stream_shard__"
#: Labels that put one stream's entries into several (Loki's rate sharding, and the time
#: sharding of old entries that the shipper does as Loki would, ``_time_shards``).
_SHARD_LABELS: Final = frozenset({SHARD_LABEL, TIME_SHARD_LABEL})
#: Failures before any byte of a request was sent: Loki stored nothing of it.
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Asks Loki 3 to keep structured metadata and parsed labels apart from the stream's labels.
_CATEGORIZE: Final = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}


class LokiQueryError(AgentLoggingError):
    """A query to Loki failed: unreachable, refused (non-2xx), or answered with a bad body.

    Attributes:
        status: Loki's HTTP status when it answered non-2xx, else None.
        unreachable: no connection to Loki could be made (refused, DNS, connect timeout).
    """

    def __init__(
        self, message: str, *, status: int | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable


@dataclass(frozen=True, slots=True)
class QueriedEntry:
    """One entry returned by a query.

    Attributes:
        labels: stream labels merged with the entry's structured metadata (and parsed labels).
        ts_ns: the entry's timestamp, nanoseconds since the UNIX epoch.
        line: the log line.
        stream: the stream's own labels (``__stream_shard__`` included when Loki sharded it),
            or None when Loki did not say them apart (before Loki 3).
    """

    labels: dict[str, str] = field(hash=False)
    ts_ns: int
    line: str
    stream: dict[str, str] | None = field(default=None, hash=False, compare=False)


def _base_url(url: str) -> str:
    base = url.rstrip("/")
    if base.endswith(PUSH_PATH):  # accept the push URL as promtail-style configs spell it
        base = base[: -len(PUSH_PATH)]
    try:
        parsed = httpx.URL(base)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"Loki URL {url!r} is not a URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(f"Loki URL {url!r} must be http:// or https:// with a host")
    return base


def _tls_verify(ca_bundle: str | None, verify_tls: bool) -> ssl.SSLContext | bool:
    if ca_bundle is None:
        return verify_tls
    if not verify_tls:
        raise ConfigurationError("ca_bundle is set but verify_tls is False: choose one")
    try:
        return ssl.create_default_context(cafile=ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"cannot load Loki CA bundle {ca_bundle!r}: {exc}") from exc


class LokiClient:
    """Push to and query one Loki (or a gateway in front of it).

    Args:
        url: Loki's base URL, e.g. ``https://loki.example:3100`` (a URL ending in
            ``/loki/api/v1/push`` is accepted too).
        tenant: sent as ``X-Scope-OrgID`` (multi-tenant Loki).
        basic_auth: ``(user, password)`` for HTTP basic authentication.
        bearer_token: sent as ``Authorization: Bearer ...``; exclusive with ``basic_auth``.
        ca_bundle: path of a PEM bundle of CAs to trust for Loki's certificate.
        verify_tls: verify Loki's certificate (against the system CAs unless ``ca_bundle``).
        timeout_s: connect, read, write and pool timeout of each request.
        encoding: push body encoding: ``protobuf`` (snappy-compressed, Loki's native) or
            ``json``.
        transport: an httpx transport to use instead of the network (tests).
        extra_headers: headers added to every request.
        json_gzip: with ``encoding="json"``, gzip the body.

    Raises:
        ConfigurationError: a setting is malformed or contradicts another.
    """

    def __init__(
        self,
        url: str,
        *,
        tenant: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        bearer_token: str | None = None,
        ca_bundle: str | None = None,
        verify_tls: bool = True,
        timeout_s: float = 10.0,
        encoding: Literal["protobuf", "json"] = "protobuf",
        transport: httpx.BaseTransport | None = None,
        extra_headers: Mapping[str, str] | None = None,
        json_gzip: bool = False,
    ) -> None:
        if encoding not in ("protobuf", "json"):
            raise ConfigurationError(
                f"Loki encoding must be 'protobuf' or 'json', not {encoding!r}"
            )
        if not timeout_s > 0:
            raise ConfigurationError(f"timeout_s must be positive, not {timeout_s!r}")
        if basic_auth is not None and bearer_token is not None:
            raise ConfigurationError("set basic_auth or bearer_token for Loki, not both")
        if tenant is not None and not tenant:
            raise ConfigurationError("the Loki tenant must not be empty (None for no tenant)")
        self.url = _base_url(url)
        self.encoding: Literal["protobuf", "json"] = encoding
        self._json_gzip = json_gzip
        headers = {"User-Agent": "agent-logging"}
        if tenant is not None:
            headers["X-Scope-OrgID"] = tenant
        if bearer_token is not None:
            headers["Authorization"] = f"Bearer {bearer_token}"
        headers.update(extra_headers or {})
        self._client_args: dict[str, Any] = {
            "base_url": self.url,
            "headers": headers,
            "auth": httpx.BasicAuth(*basic_auth) if basic_auth is not None else None,
            "verify": _tls_verify(ca_bundle, verify_tls),
            "timeout": httpx.Timeout(timeout_s),
            "transport": transport,
            "follow_redirects": False,
        }
        self._http = httpx.Client(**self._client_args)

    def push(self, entries: Sequence[PushEntry]) -> PushResult:
        """Send entries in one request. Never raises for network or server faults.

        Args:
            entries: the entries; an empty sequence sends nothing.

        Returns:
            The outcome, see :class:`PushResult`.
        """
        if not entries:
            return PushResult("ok", None, None, "nothing to push")
        return self._post(encode_body(entries, self.encoding, gzip_json=self._json_gzip))

    def push_records(
        self,
        records: Sequence[RecordLike],
        *,
        node_id_label: bool,
        default_labels: Mapping[str, str],
    ) -> PushResult:
        """Send spooled records in one request, mapped as ``_entries.entries_from_records`` does.

        The shipper's path: with protobuf, the body is encoded straight from the records
        (``_record_encoder.encode_records``), which skips parsing records whose stream key it
        knows.

        Args:
            records: the records; an empty sequence sends nothing.
            node_id_label: make ``node_id`` a stream label.
            default_labels: label values for records that lack them.

        Returns:
            The outcome, see :class:`PushResult`.
        """
        if not records:
            return PushResult("ok", None, None, "nothing to push")
        if self.encoding == "protobuf":
            message = encode_records(
                records, node_id_label=node_id_label, default_labels=default_labels
            )
            content = bytes(cramjam.snappy.compress_raw(message))
            return self._post(PushBody(content, {"Content-Type": PROTOBUF_CONTENT_TYPE}))
        entries = entries_from_records(
            records, node_id_label=node_id_label, default_labels=default_labels
        )
        return self.push(entries)

    def _post(self, body: PushBody) -> PushResult:
        try:
            response = self._http.post(PUSH_PATH, content=body.content, headers=body.headers)
        except httpx.TimeoutException as exc:
            return PushResult(
                "retry",
                None,
                None,
                f"timeout: {type(exc).__name__}: {exc}",
                nothing_stored=isinstance(exc, _NOT_SENT),
            )
        except httpx.RequestError as exc:
            # Refused, reset, DNS, TLS handshake, protocol errors: the network's, so retried.
            # Only a connection never made proves that Loki stored nothing.
            return PushResult(
                "retry",
                None,
                None,
                f"{type(exc).__name__}: {exc}",
                nothing_stored=isinstance(exc, _NOT_SENT),
            )
        return classify_response(
            response.status_code,
            response.text,
            response.headers.get("Retry-After"),
            now_unix_s=time.time(),
        )

    def query_range(
        self,
        query: str,
        *,
        start_ns: int,
        end_ns: int,
        limit: int = DEFAULT_QUERY_LIMIT,
        direction: Literal["forward", "backward"] = "forward",
    ) -> list[QueriedEntry]:
        """Run a LogQL log query over ``[start_ns, end_ns)`` (Loki's start is inclusive).

        Args:
            query: a LogQL log query, e.g. ``{service_name="api"} | allocation_id="a-9"``.
            start_ns: window start, nanoseconds since the epoch, inclusive.
            end_ns: window end, exclusive.
            limit: most entries to return (Loki caps it at ``max_entries_limit_per_query``).
            direction: ``forward`` (oldest first) or ``backward`` (newest first).

        Returns:
            At most ``limit`` entries across all streams, ordered by timestamp in
            ``direction``.

        Raises:
            LokiQueryError: Loki is unreachable, answers non-2xx, or with an unexpected body.
        """
        return self._query_page(query, start_ns, end_ns, limit, direction)[0]

    def _query_page(
        self,
        query: str,
        start_ns: int,
        end_ns: int,
        limit: int,
        direction: Literal["forward", "backward"],
    ) -> tuple[list[QueriedEntry], int]:
        """:meth:`query_range`, and the size of Loki's answer in bytes."""
        params = {
            "query": query,
            "start": str(start_ns),
            "end": str(end_ns),
            "limit": str(limit),
            "direction": direction,
        }
        try:
            response = self._http.get(QUERY_RANGE_PATH, params=params, headers=_CATEGORIZE)
        except httpx.RequestError as exc:
            raise LokiQueryError(
                f"Loki query failed: {type(exc).__name__}: {exc}",
                unreachable=isinstance(exc, _NOT_SENT),
            ) from exc
        if not 200 <= response.status_code < 300:
            raise LokiQueryError(
                f"Loki query failed: HTTP {response.status_code}: {clip_reason(response.text)}",
                status=response.status_code,
            )
        entries = _parse_streams(response.content)
        entries.sort(key=_ts_key, reverse=direction == "backward")
        return entries, len(response.content)

    def iter_query_range(
        self,
        query: str,
        *,
        start_ns: int,
        end_ns: int,
        page_limit: int = DEFAULT_QUERY_LIMIT,
        page_bytes: int = PAGE_BYTES,
    ) -> Iterator[QueriedEntry]:
        """Yield every entry of a window, oldest first, fetching it page by page.

        Each next page starts at the last timestamp seen (inclusive, since more entries may
        share it) and entries already yielded at that timestamp are skipped, so every entry is
        yielded once. Identical entries (same stream, timestamp and line) are one entry to
        Loki, which de-duplicates them at ingestion, within one stream; an entry stored in two
        shards of a stream (streams that differ only by ``__stream_shard__`` or
        ``__time_shard__``: an entry resent after Loki sharded its stream, or after it grew
        old enough for its time shard) is yielded once too.

        The first page asks for at most 100 entries; later ones for as many as should come to
        about ``page_bytes`` of answer, judging by the entries seen so far (see
        :data:`PAGE_BYTES`), never more than ``page_limit``.

        Args:
            query: a LogQL log query.
            start_ns: window start, inclusive.
            end_ns: window end, exclusive.
            page_limit: most entries per request.
            page_bytes: about how large an answer to ask for.

        Yields:
            The entries in timestamp order.

        Raises:
            LokiQueryError: a page failed, or ``page_limit`` entries share one timestamp
                (paging by time cannot get past them; raise ``page_limit``).
        """
        cursor = start_ns
        limit = min(page_limit, _FIRST_PAGE_ENTRIES)
        seen_ts: int | None = None
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()  # yielded at seen_ts
        while True:
            page, size = self._query_page(query, cursor, end_ns, limit, "forward")
            fresh = False
            for entry in page:
                if entry.ts_ns != seen_ts:
                    seen_ts, seen = entry.ts_ns, set()
                key = (entry.line, _unsharded(entry.labels))
                if key in seen:
                    continue
                seen.add(key)
                fresh = True
                yield entry
            if len(page) < limit:
                return
            last_ts = page[-1].ts_ns
            if last_ts == cursor and not fresh:
                if limit < page_limit:
                    limit = min(page_limit, limit * 4)  # a crowd at one timestamp: wider
                    continue
                raise LokiQueryError(
                    f"{page_limit} or more entries share timestamp {cursor}; "
                    "paging by time cannot pass them: raise page_limit"
                )
            cursor = last_ts
            limit = max(1, min(page_limit, page_bytes * len(page) // max(1, size)))

    def after_fork_in_child(self) -> None:
        """In a forked child: start a fresh connection pool, abandoning the parent's.

        The inherited pool's sockets are shared with the parent; closing them here could
        end the parent's connections (a TLS close_notify on its stream), so they are left
        for the garbage collector, which only closes the child's descriptors.
        """
        self._http = httpx.Client(**self._client_args)

    def close(self) -> None:
        """Close the connection pool. Pushing after this is a programming error."""
        self._http.close()

    def __enter__(self) -> LokiClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _ts_key(entry: QueriedEntry) -> int:
    return entry.ts_ns


def _unsharded(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Labels as a key that is the same in every shard of a stream, by rate or by time."""
    return tuple(sorted((k, v) for k, v in labels.items() if k not in _SHARD_LABELS))


def _parse_streams(content: bytes) -> list[QueriedEntry]:
    """The entries of a ``query_range`` streams response.

    Loki 3 puts structured metadata into the stream labels unless asked to categorize
    labels; then each value carries a third element ``{"structuredMetadata": {...},
    "parsed": {...}}``, and ``encodingFlags`` says so. Both forms give the same merged
    labels here; only the second tells the stream's own labels.
    """
    try:
        document = orjson.loads(content)
        data = document["data"]
        if data["resultType"] != "streams":
            raise LokiQueryError(
                f"Loki answered a {data['resultType']!r} result; use a log query, not a metric one"
            )
        categorized = "categorize-labels" in (data.get("encodingFlags") or ())
        entries = []
        for stream in data["result"]:
            labels = dict(stream["stream"])
            own = labels if categorized else None
            for value in stream["values"]:
                merged = dict(labels)
                if len(value) > 2 and value[2]:
                    for category in ("structuredMetadata", "parsed"):
                        merged.update(value[2].get(category) or {})
                entries.append(QueriedEntry(merged, int(value[0]), value[1], own))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise LokiQueryError(f"Loki answered a query with an unexpected body: {exc!r}") from exc
    return entries
