"""Loki's limits: one test per refusal, with Loki's exact message; batch-mates are stored.

These drive the store directly (no sockets); ``test_push.py`` checks the HTTP framing.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from tests.lokisim._levels import detect_level
from tests.lokisim._limits import Limits
from tests.lokisim._proto import PushEntry, PushStream
from tests.lokisim._store import PushResult, Store

NOW = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
HOUR = 3_600_000_000_000
LABELS = '{service_name="api", layer="node"}'
SHOWN = '{layer="node", service_name="api"}'


def make_store(**overrides: object) -> Store:
    return Store(Limits(**{"now": lambda: NOW, **overrides}))  # type: ignore[arg-type]


def push(store: Store, *streams: tuple[str, list[PushEntry]]) -> PushResult:
    return store.push("fake", [PushStream(labels, tuple(entries)) for labels, entries in streams])


def lines(store: Store) -> list[str]:
    return [entry.line for entry in store.entries("fake")]


def test_defaults_are_loki_3_defaults() -> None:
    defaults = {f.name: f.default for f in fields(Limits) if f.name not in ("now", "clock")}
    assert defaults == {
        "max_label_names_per_series": 15,
        "max_label_name_length": 1024,
        "max_label_value_length": 2048,
        "max_line_size": 262144,
        "allow_structured_metadata": True,
        "max_structured_metadata_size": 65536,
        "max_structured_metadata_entries_count": 128,
        "reject_old_samples": True,
        "reject_old_samples_max_age_s": 604800.0,
        "creation_grace_period_s": 600.0,
        "max_chunk_age_s": 7200.0,
        "max_returned_stream_errors": 10,
        "max_entries_limit_per_query": 5000,
        "discover_service_name": (
            "service",
            "app",
            "application",
            "app_name",
            "name",
            "app_kubernetes_io_name",
            "container",
            "container_name",
            "k8s_container_name",
            "component",
            "workload",
            "job",
            "k8s_job_name",
        ),
        "discover_log_levels": True,
        "ingestion_rate_mb": 4.0,
        "ingestion_burst_size_mb": 6.0,
        "shard_streams_enabled": True,
        "shard_streams_desired_rate": 1536 * 1024,
        "grpc_max_message_bytes": 4 * 1024 * 1024,
        "query_ingesters_within_s": 3 * 3600.0,
        "chunk_idle_period_s": 1800.0,
    }


def test_line_too_long_counts_utf8_bytes_of_the_line_only() -> None:
    store = make_store(max_line_size=10)
    result = push(
        store,
        (
            LABELS,
            [
                PushEntry(NOW, "0123456789", (("big", "x" * 100),)),
                PushEntry(NOW + 1, "ééééé!"),
                PushEntry(NOW + 2, "ok"),
            ],
        ),
    )
    assert result == PushResult(
        400,
        f"max entry size '10' bytes exceeded for stream '{SHOWN}' while adding an entry with "
        "length '11' bytes",
    )
    assert lines(store) == ["0123456789", "ok"]


def test_too_many_label_names_does_not_count_service_name() -> None:
    store = make_store(max_label_names_per_series=2)
    result = push(
        store,
        ('{service_name="api", a="1", b="2"}', [PushEntry(NOW, "kept")]),
        ('{a="1", b="2", c="3"}', [PushEntry(NOW, "refused"), PushEntry(NOW + 1, "refused")]),
    )
    assert result == PushResult(
        400,
        'entry for stream \'{a="1", b="2", c="3", service_name="unknown_service"}\' '
        "has 3 label names; limit 2",
    )
    assert lines(store) == ["kept"]


def test_label_name_too_long() -> None:
    store = make_store(max_label_name_length=12)
    result = push(
        store,
        ('{thirteen_char="v"}', [PushEntry(NOW, "x")]),
        ('{service_name="twelve_chars"}', [PushEntry(NOW, "ok")]),
    )
    assert result == PushResult(
        400,
        'stream \'{service_name="unknown_service", thirteen_char="v"}\' has label name too '
        "long: 'thirteen_char'",
    )
    assert lines(store) == ["ok"]


def test_label_value_too_long() -> None:
    store = make_store(max_label_value_length=3)
    result = push(store, ('{service_name="api", layer="nodes"}', [PushEntry(NOW, "x")]))
    assert result == PushResult(
        400, "stream '{layer=\"nodes\", service_name=\"api\"}' has label value too long: 'nodes'"
    )
    assert lines(store) == []


def test_duplicate_label_name() -> None:
    store = make_store()
    result = push(
        store,
        ('{service_name="api", a="1", a="2"}', [PushEntry(NOW, "x")]),
        (LABELS, [PushEntry(NOW, "ok")]),
    )
    assert result == PushResult(
        400,
        'stream \'{a="1", a="2", service_name="api"}\' has duplicate label name: \'a\'',
    )
    assert lines(store) == ["ok"]


@pytest.mark.parametrize("labels", ["{}", '{a=""}'])
def test_missing_labels_when_service_name_discovery_is_off(labels: str) -> None:
    store = make_store(discover_service_name=())
    result = push(store, (labels, [PushEntry(NOW, "x")]))
    assert result == PushResult(400, "error at least one label pair is required per stream")


def test_unparseable_labels_refuse_the_whole_push() -> None:
    store = make_store()
    result = push(store, (LABELS, [PushEntry(NOW, "good")]), ('{a-b="c"}', [PushEntry(NOW, "bad")]))
    assert result == PushResult(
        400,
        "couldn't parse labels: 1:3: parse error: unexpected character '-' in label set, "
        'expected "="',
    )
    assert lines(store) == []


def test_too_old_uses_rfc3339_times() -> None:
    store = make_store()
    week = 7 * 24 * HOUR
    result = push(
        store,
        (LABELS, [PushEntry(NOW - week - 1, "old"), PushEntry(NOW - week, "oldest accepted")]),
    )
    assert result == PushResult(
        400,
        f"entry for stream '{SHOWN}' has timestamp too old: 2023-11-07T22:13:19Z, "
        "oldest acceptable timestamp is: 2023-11-07T22:13:20Z",
    )
    assert lines(store) == ["oldest accepted"]


def test_old_samples_accepted_when_rejection_is_off() -> None:
    store = make_store(reject_old_samples=False)
    assert push(store, (LABELS, [PushEntry(0, "1970")])) == PushResult(204)


def test_too_new() -> None:
    store = make_store()
    grace = HOUR // 6
    result = push(
        store, (LABELS, [PushEntry(NOW + grace + 1, "new"), PushEntry(NOW + grace, "newest")])
    )
    assert result == PushResult(
        400, f"entry for stream '{SHOWN}' has timestamp too new: 2023-11-14T22:23:20Z"
    )
    assert lines(store) == ["newest"]


def test_structured_metadata_disallowed() -> None:
    store = make_store(allow_structured_metadata=False)
    result = push(store, (LABELS, [PushEntry(NOW, "meta", (("k", "v"),)), PushEntry(NOW, "plain")]))
    assert result == PushResult(
        400,
        f"stream '{SHOWN}' includes structured metadata, but this feature is disallowed. "
        "Please see `limits_config.allow_structured_metadata` or contact your Loki "
        "administrator to enable it",
    )
    assert lines(store) == ["plain"]
    assert store.entries("fake")[0].metadata == {}


def test_structured_metadata_too_large_counts_names_and_values() -> None:
    store = make_store(max_structured_metadata_size=10)
    result = push(
        store,
        (
            LABELS,
            [
                PushEntry(NOW, "at limit", (("abcd", "efghij"),)),
                PushEntry(NOW, "over", (("abcd", "efghijk"),)),
                PushEntry(NOW, "level excluded", (("abcd", "efghij"), ("detected_level", "info"))),
            ],
        ),
    )
    assert result == PushResult(
        400,
        f"stream '{SHOWN}' has structured metadata too large: '11' bytes, limit: '10' bytes. "
        "Please see `limits_config.max_structured_metadata_size` or contact your Loki "
        "administrator to increase it",
    )
    assert lines(store) == ["at limit", "level excluded"]


def test_too_many_structured_metadata_entries() -> None:
    store = make_store(max_structured_metadata_entries_count=2)
    result = push(
        store,
        (
            LABELS,
            [
                PushEntry(NOW, "two", (("a", "1"), ("b", "2"))),
                PushEntry(NOW, "three", (("a", "1"), ("b", "2"), ("c", "3"))),
            ],
        ),
    )
    assert result == PushResult(
        400,
        f"stream '{SHOWN}' has too many structured metadata labels: '3', limit: '2'. Please "
        "see `limits_config.max_structured_metadata_entries_count` or contact your Loki "
        "administrator to increase it",
    )
    assert lines(store) == ["two"]


def test_identical_errors_are_grouped_and_different_ones_counted() -> None:
    store = make_store(max_line_size=1)
    same = push(store, (LABELS, [PushEntry(NOW, "aa"), PushEntry(NOW + 1, "aa")]))
    line_error = (
        f"max entry size '1' bytes exceeded for stream '{SHOWN}' while adding an entry with "
        "length '2' bytes"
    )
    assert same == PushResult(400, f"2 errors like: {line_error}")
    mixed = push(store, (LABELS, [PushEntry(NOW, "aa"), PushEntry(NOW + HOUR, "b")]))
    new_error = f"entry for stream '{SHOWN}' has timestamp too new: 2023-11-14T23:13:20Z"
    assert mixed == PushResult(400, f"1 errors like: {line_error}; 1 errors like: {new_error}")


def test_empty_request_and_empty_streams() -> None:
    store = make_store()
    assert store.push("fake", []) == PushResult(
        422, "error at least one valid stream is required for ingestion"
    )
    assert push(store, ('{a-b="c"}', [])) == PushResult(
        400,
        "couldn't parse labels: 1:3: parse error: unexpected character '-' in label set, "
        'expected "="',
    )
    assert push(store, (LABELS, [])) == PushResult(204)


def test_too_far_behind_the_streams_newest_entry() -> None:
    store = make_store()
    assert push(store, (LABELS, [PushEntry(NOW, "newest")])) == PushResult(204)
    result = push(
        store,
        (
            LABELS,
            [
                PushEntry(NOW - HOUR, "exactly one hour behind"),
                PushEntry(NOW - HOUR - 1, "too far behind"),
                PushEntry(NOW - 2 * HOUR - 500_000_000, "way behind"),
            ],
        ),
    )
    assert result == PushResult(
        400,
        "entry with timestamp 2023-11-14 21:13:19.999999999 +0000 UTC ignored, reason: "
        "'entry too far behind, entry timestamp is: 2023-11-14T21:13:19Z, oldest acceptable "
        "timestamp is: 2023-11-14T21:13:20Z',\n"
        "entry with timestamp 2023-11-14 20:13:19.5 +0000 UTC ignored, reason: 'entry too far "
        "behind, entry timestamp is: 2023-11-14T20:13:19Z, oldest acceptable timestamp is: "
        "2023-11-14T21:13:20Z',\n"
        f"user 'fake', total ignored: 2 out of 3 for stream: {SHOWN}",
    )
    assert lines(store) == ["newest", "exactly one hour behind"]


def test_window_moves_within_one_push_and_is_per_stream() -> None:
    store = make_store()
    result = push(
        store,
        (LABELS, [PushEntry(NOW - 3 * HOUR, "first"), PushEntry(NOW, "jump")]),
        ('{service_name="other"}', [PushEntry(NOW - 3 * HOUR, "other stream")]),
        (LABELS, [PushEntry(NOW - 3 * HOUR + 1, "behind now")]),
    )
    assert result.status == 400
    assert result.message.endswith(f"total ignored: 1 out of 1 for stream: {SHOWN}")
    assert lines(store) == ["first", "jump", "other stream"]


def test_ingester_lists_at_most_max_returned_stream_errors() -> None:
    store = make_store(max_returned_stream_errors=2)
    push(store, (LABELS, [PushEntry(NOW, "newest")]))
    result = push(store, (LABELS, [PushEntry(NOW - 2 * HOUR - i, f"old {i}") for i in range(5)]))
    assert result.message.count("ignored, reason:") == 2
    assert result.message.endswith(f"user 'fake', total ignored: 5 out of 5 for stream: {SHOWN}")


def test_resending_an_old_stored_entry_is_refused_as_too_far_behind() -> None:
    # Loki checks the window before de-duplicating: a late resend of a stored entry
    # is refused even though the entry is in the store (callers must tolerate this).
    store = make_store()
    push(store, (LABELS, [PushEntry(NOW - 2 * HOUR, "early"), PushEntry(NOW, "late")]))
    result = push(store, (LABELS, [PushEntry(NOW - 2 * HOUR, "early")]))
    assert result.status == 400
    assert lines(store) == ["early", "late"]


def test_only_the_last_streams_ingester_error_is_reported() -> None:
    # Loki's instance.Push overwrites its error per stream: a refused entry in an
    # earlier stream goes unreported when the last stream is fine.
    store = make_store()
    push(store, (LABELS, [PushEntry(NOW, "newest")]))
    result = push(
        store,
        (LABELS, [PushEntry(NOW - 2 * HOUR, "silently refused")]),
        ('{service_name="other"}', [PushEntry(NOW, "fine")]),
    )
    assert result == PushResult(204)
    assert lines(store) == ["newest", "fine"]


def test_an_ingester_error_replaces_the_validation_errors() -> None:
    store = make_store(max_line_size=3)
    push(store, (LABELS, [PushEntry(NOW, "new")]))
    result = push(store, (LABELS, [PushEntry(NOW, "long line"), PushEntry(NOW - 2 * HOUR, "old")]))
    assert result.status == 400
    assert result.message.startswith("entry with timestamp 2023-11-14 20:13:20 +0000 UTC ignored")


def test_duplicates_are_ignored_but_differences_are_stored() -> None:
    store = make_store()
    entries = [PushEntry(NOW, "same", (("k", "v"),)), PushEntry(NOW, "same", (("k", "v"),))]
    assert push(store, (LABELS, entries)) == PushResult(204)
    assert push(store, (LABELS, entries[:1])) == PushResult(204)
    assert push(store, (LABELS, [PushEntry(NOW, "same", (("k", "w"),))])) == PushResult(204)
    assert push(store, (LABELS, [PushEntry(NOW, "other line")])) == PushResult(204)
    assert push(store, (LABELS, [PushEntry(NOW + 1, "same", (("k", "v"),))])) == PushResult(204)
    assert push(store, ('{service_name="b"}', entries[:1])) == PushResult(204)
    assert [(e.ts_ns - NOW, e.line, e.metadata.get("k")) for e in store.entries("fake")] == [
        (0, "same", "v"),
        (0, "same", "w"),
        (0, "other line", None),
        (1, "same", "v"),
        (0, "same", "v"),
    ]


def test_stored_labels_and_metadata_are_normalised() -> None:
    store = make_store()
    push(
        store,
        ('{app="shop", empty=""}', [PushEntry(NOW, "x", (("http.method", "GET"), ("1st", "y")))]),
    )
    (entry,) = store.entries("fake")
    assert entry.labels == {"app": "shop", "service_name": "shop"}
    assert entry.metadata == {"detected_level": "unknown", "http_method": "GET", "key_1st": "y"}


def test_an_empty_metadata_name_is_a_server_error() -> None:
    store = make_store()
    result = push(store, (LABELS, [PushEntry(NOW, "x", (("", "v"),))]))
    assert result == PushResult(500, "label name is empty")
    assert lines(store) == []


def test_level_discovery_can_be_turned_off() -> None:
    store = make_store(discover_log_levels=False, discover_service_name=())
    push(store, ('{layer="node"}', [PushEntry(NOW, "error!", (("k", "v"),))]))
    (entry,) = store.entries("fake")
    assert (entry.labels, entry.metadata) == ({"layer": "node"}, {"k": "v"})


@pytest.mark.parametrize(
    ("labels", "metadata", "line", "level"),
    [
        ({"level": "WARNING"}, {}, "error", "warn"),
        ({}, {"severity": "Err"}, "info", "error"),
        ({}, {"level": "custom"}, "", "custom"),
        ({}, {}, '{"level": "debug", "msg": "error"}', "debug"),
        ({}, {}, '{"log": {"lvl": "INF"}}', "info"),
        ({}, {}, '{"msg": "fatal", "a": {"b": {"level": "debug"}}}', "fatal"),
        ({}, {}, "ts=1 level=trace msg=x", "trace"),
        ({}, {}, "ts=1 LVL=crit msg=x error", "error"),
        ({}, {}, "connection refused: error dialing", "error"),
        ({}, {}, "[WARN] disk almost full", "warn"),
        ({}, {}, "misc:error terror", "unknown"),
        ({}, {}, "all good", "unknown"),
        ({}, {}, "info then critical", "info"),
    ],
)
def test_detected_level(
    labels: dict[str, str], metadata: dict[str, str], line: str, level: str
) -> None:
    assert detect_level(labels, metadata, line) == level
