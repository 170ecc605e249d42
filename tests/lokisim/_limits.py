"""Loki's per-tenant limits and the distributor's validation, with Loki's exact messages.

Defaults are Loki 3's (``pkg/validation/limits.go``); the checks and their order
follow ``pkg/distributor/validator.go``; message templates are copied from
``pkg/validation/validate.go`` (Loki 3.7: no closing full stops) so callers can match on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tests.lokisim._labels import LabelParseError, format_labels, parse_label_set
from tests.lokisim._levels import DEFAULT_SERVICE_NAME_LABELS, LEVEL_LABEL, service_name_for
from tests.lokisim._proto import PushEntry

__all__ = [
    "MIB",
    "Limits",
    "go_rfc3339",
    "go_time_string",
    "group_errors",
    "metadata_size",
    "parse_stream_labels",
    "validate_entry",
    "validate_labels",
]

_NS_PER_S = 1_000_000_000
#: Loki's MB in its limits: ``bytesInMB`` in ``pkg/validation/limits.go``.
MIB = 1 << 20

MISSING_STREAMS = "error at least one valid stream is required for ingestion"
MISSING_LABELS = "error at least one label pair is required per stream"
_TOO_MANY_LABELS = "entry for stream '{}' has {} label names; limit {}"
_NAME_TOO_LONG = "stream '{}' has label name too long: '{}'"
_VALUE_TOO_LONG = "stream '{}' has label value too long: '{}'"
_DUPLICATE_NAME = "stream '{}' has duplicate label name: '{}'"
_TOO_OLD = "entry for stream '{}' has timestamp too old: {}, oldest acceptable timestamp is: {}"
_TOO_NEW = "entry for stream '{}' has timestamp too new: {}"
_LINE_TOO_LONG = (
    "max entry size '{}' bytes exceeded for stream '{}' while adding an entry with length '{}' "
    "bytes"
)
#: ``validation.RateLimitedErrorMsg``: the tenant's ingestion rate limit refused a whole push (429).
RATE_LIMITED = (
    "ingestion rate limit exceeded for user {} (limit: {} bytes/sec) while attempting to ingest "
    "'{}' lines totaling '{}' bytes, reduce log volume or contact your Loki administrator to see "
    "if the limit can be increased"
)
#: gRPC's refusal of a message over ``grpc_server_max_recv_msg_size`` (4 MiB): a push that large
#: cannot reach the ingester (500), a query answer that large cannot reach the frontend.
GRPC_TOO_LARGE = (
    "rpc error: code = ResourceExhausted desc = grpc: received message larger than max ({} vs. {})"
)
#: What the query frontend answers, after its query timeout (1 min), when the querier's answer
#: was over the gRPC message limit (504).
QUERY_TIMED_OUT = (
    "request timed out, decrease the duration of the request or add more label matchers "
    "(prefer exact match over regex match) to reduce the amount of data processed"
)
_METADATA_DISALLOWED = (
    "stream '{}' includes structured metadata, but this feature is disallowed. Please see "
    "`limits_config.allow_structured_metadata` or contact your Loki administrator to enable it"
)
_METADATA_TOO_LARGE = (
    "stream '{}' has structured metadata too large: '{}' bytes, limit: '{}' bytes. Please see "
    "`limits_config.max_structured_metadata_size` or contact your Loki administrator to "
    "increase it"
)
_METADATA_TOO_MANY = (
    "stream '{}' has too many structured metadata labels: '{}', limit: '{}'. Please see "
    "`limits_config.max_structured_metadata_entries_count` or contact your Loki administrator "
    "to increase it"
)


@dataclass(frozen=True)
class Limits:
    """Loki 3 limits that the test server enforces; shrink them in tests.

    Attributes:
        max_label_names_per_series: ``service_name`` does not count (Loki adds it).
        max_label_name_length: bytes.
        max_label_value_length: bytes.
        max_line_size: bytes of the line alone (256 KB); metadata is not counted.
        allow_structured_metadata: refuse entries carrying metadata when False.
        max_structured_metadata_size: bytes of names + values, ``detected_level`` excluded.
        max_structured_metadata_entries_count: metadata pairs per entry.
        reject_old_samples: refuse entries older than ``reject_old_samples_max_age_s``.
        reject_old_samples_max_age_s: one week.
        creation_grace_period_s: how far in the future an entry may be (10 min).
        max_chunk_age_s: the ingester refuses an entry older than the stream's newest
            minus half of this (the 1 h "validity window" for unordered writes).
        max_returned_stream_errors: refused entries listed per stream in a 400.
        max_entries_limit_per_query: the largest ``limit`` a query may ask for.
        discover_service_name: labels copied into ``service_name``; () disables it.
        discover_log_levels: add ``detected_level`` structured metadata.
        ingestion_rate_mb: the tenant's ingestion rate limit, MiB per second (4); pushes
            beyond it are refused whole with 429 (``_rates``).
        ingestion_burst_size_mb: the most the tenant may push at once, MiB (6).
        shard_streams_enabled: shard a stream whose rate passes ``shard_streams_desired_rate``
            (``_rates``).
        shard_streams_desired_rate: bytes per second (1536 KB).
        grpc_max_message_bytes: ``grpc_server_max_recv_msg_size`` (4 MiB): a push whose
            entries come to more (their protobuf size, roughly) is answered 500, and a query
            whose answer does, 504 (after a minute, in Loki).
        query_ingesters_within_s: queries do not ask the ingesters about time older than this
            (3 h): an entry that old stays invisible until its chunk is flushed, modelled as
            its stream taking no entry for ``chunk_idle_period_s``.
        chunk_idle_period_s: 30 min.
        now: the clock, in ns since the epoch, for deterministic age checks.
        clock: a monotonic clock in seconds, for rates (the limiter, sharding).
    """

    max_label_names_per_series: int = 15
    max_label_name_length: int = 1024
    max_label_value_length: int = 2048
    max_line_size: int = 256 * 1024
    allow_structured_metadata: bool = True
    max_structured_metadata_size: int = 64 * 1024
    max_structured_metadata_entries_count: int = 128
    reject_old_samples: bool = True
    reject_old_samples_max_age_s: float = 7 * 24 * 3600.0
    creation_grace_period_s: float = 600.0
    max_chunk_age_s: float = 2 * 3600.0
    max_returned_stream_errors: int = 10
    max_entries_limit_per_query: int = 5000
    discover_service_name: tuple[str, ...] = DEFAULT_SERVICE_NAME_LABELS
    discover_log_levels: bool = True
    ingestion_rate_mb: float = 4.0
    ingestion_burst_size_mb: float = 6.0
    shard_streams_enabled: bool = True
    shard_streams_desired_rate: int = 1536 * 1024
    grpc_max_message_bytes: int = 4 * MIB
    query_ingesters_within_s: float = 3 * 3600.0
    chunk_idle_period_s: float = 1800.0
    now: Callable[[], int] = time.time_ns
    clock: Callable[[], float] = time.monotonic


def _utc(ts_ns: int) -> datetime:
    return datetime.fromtimestamp(ts_ns // _NS_PER_S, tz=UTC)


def go_rfc3339(ts_ns: int) -> str:
    """Format like Go's ``t.Format(time.RFC3339)`` in UTC: whole seconds, ``Z``."""
    return _utc(ts_ns).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_time_string(ts_ns: int) -> str:
    """Format like Go's ``time.Time.String()`` in UTC, e.g. ``2024-01-02 03:04:05.5 +0000 UTC``."""
    fraction = f"{ts_ns % _NS_PER_S:09d}".rstrip("0")
    dot = f".{fraction}" if fraction else ""
    return _utc(ts_ns).strftime("%Y-%m-%d %H:%M:%S") + dot + " +0000 UTC"


def parse_stream_labels(text: str, limits: Limits) -> list[tuple[str, str]]:
    """Parse and normalise a stream's labels as Loki's push parser does.

    Empty values are dropped, pairs are sorted by name (duplicates kept for
    :func:`validate_labels`), and ``service_name`` is added per
    ``limits.discover_service_name``.

    Args:
        text: the label set as pushed.
        limits: the tenant's limits.

    Returns:
        The normalised pairs.

    Raises:
        ValueError: ``couldn't parse labels: ...``; Loki refuses the whole push (400).
    """
    try:
        pairs = parse_label_set(text)
    except LabelParseError as exc:
        raise ValueError(
            f"couldn't parse labels: 1:{exc.offset + 1}: parse error: {exc.detail}"
        ) from exc
    pairs = sorted((pair for pair in pairs if pair[1]), key=lambda pair: pair[0])
    service = service_name_for(dict(pairs), limits.discover_service_name)
    if service is not None:
        pairs = sorted([*pairs, ("service_name", service)], key=lambda pair: pair[0])
    return pairs


def validate_labels(limits: Limits, pairs: Sequence[tuple[str, str]]) -> str | None:
    """Check a stream's label set; a failure refuses all of the stream's entries.

    Args:
        limits: the tenant's limits.
        pairs: output of :func:`parse_stream_labels`.

    Returns:
        Loki's error message, or None when the labels are acceptable.
    """
    if not pairs:
        return MISSING_LABELS
    shown = format_labels(pairs)
    count = sum(1 for name, _ in pairs if name != "service_name")
    if count > limits.max_label_names_per_series:
        return _TOO_MANY_LABELS.format(shown, count, limits.max_label_names_per_series)
    previous = ""
    for name, value in pairs:
        if len(name.encode()) > limits.max_label_name_length:
            return _NAME_TOO_LONG.format(shown, name)
        if len(value.encode()) > limits.max_label_value_length:
            return _VALUE_TOO_LONG.format(shown, value)
        if name == previous:
            return _DUPLICATE_NAME.format(shown, name)
        previous = name
    return None


def metadata_size(metadata: Sequence[tuple[str, str]]) -> int:
    """Bytes of structured metadata as Loki counts them (``detected_level`` excluded)."""
    return sum(len(n.encode()) + len(v.encode()) for n, v in metadata if n != LEVEL_LABEL)


def validate_entry(limits: Limits, shown: str, entry: PushEntry, now_ns: int) -> str | None:
    """Check one entry; a failure refuses that entry only.

    Args:
        limits: the tenant's limits.
        shown: the stream's labels as Loki prints them.
        entry: the entry.
        now_ns: the distributor's clock for this push.

    Returns:
        Loki's error message, or None when the entry is acceptable.
    """
    oldest_ns = now_ns - int(limits.reject_old_samples_max_age_s * _NS_PER_S)
    if limits.reject_old_samples and entry.ts_ns < oldest_ns:
        return _TOO_OLD.format(shown, go_rfc3339(entry.ts_ns), go_rfc3339(oldest_ns))
    if entry.ts_ns > now_ns + int(limits.creation_grace_period_s * _NS_PER_S):
        return _TOO_NEW.format(shown, go_rfc3339(entry.ts_ns))
    line_bytes = len(entry.line.encode())
    if limits.max_line_size and line_bytes > limits.max_line_size:
        return _LINE_TOO_LONG.format(limits.max_line_size, shown, line_bytes)
    if entry.metadata:
        if not limits.allow_structured_metadata:
            return _METADATA_DISALLOWED.format(shown)
        size = metadata_size(entry.metadata)
        if limits.max_structured_metadata_size and size > limits.max_structured_metadata_size:
            return _METADATA_TOO_LARGE.format(shown, size, limits.max_structured_metadata_size)
        count = len(entry.metadata)
        if (
            limits.max_structured_metadata_entries_count
            and count > limits.max_structured_metadata_entries_count
        ):
            return _METADATA_TOO_MANY.format(
                shown, count, limits.max_structured_metadata_entries_count
            )
    return None


def group_errors(messages: Sequence[str]) -> str:
    """Join validation errors as Loki's ``GroupedErrors.Error()`` does.

    Identical messages are counted (``3 errors like: ...``) and groups are joined with
    ``"; "``. Loki iterates a Go map, so its group order is random; this keeps first
    occurrence order.

    Args:
        messages: the messages in the order the entries were checked.

    Returns:
        The response body text.
    """
    counts: dict[str, int] = {}
    for message in messages:
        counts[message] = counts.get(message, 0) + 1
    prefix = len(counts) > 1
    return "; ".join(
        f"{n} errors like: {message}" if prefix or n > 1 else message
        for message, n in counts.items()
    )
