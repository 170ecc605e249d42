"""The pipeline's hot path: stream keys handed to keyed sinks, equal to stream_key(record)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import agent_logging
from agent_logging._types import EventDict
from agent_logging.loki._record_encoder import stream_key
from agent_logging.pipeline._pipeline import Pipeline
from agent_logging.schema import rfc3339_ns


class KeyedSink:
    """Records the key the pipeline hands over, and the key of the record it describes."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, dict[str, Any]]] = []

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        raise AssertionError("a keyed sink gets write_keyed")

    def write_keyed(self, ts_ns: int, line: bytes, record: EventDict, key: int) -> None:
        self.got.append((key, stream_key(record), orjson.loads(line)))

    def close(self, timeout_s: float) -> None:
        return None

    def after_fork_in_child(self) -> None:
        return None


class PlainSink:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        self.lines.append(line)

    def close(self, timeout_s: float) -> None:
        return None

    def after_fork_in_child(self) -> None:
        return None


def _pipeline(*sinks: Any, processors: tuple[Any, ...] = ()) -> Pipeline:
    return Pipeline(
        static={"service": "svc", "layer": "node", "env": "test"},
        min_level=10,
        sinks=sinks,
        processors=processors,
        base_ids={"node_id": "n-1"},
    )


def test_keys_match_the_records_through_binds_levels_and_call_site_ids() -> None:
    keyed, plain = KeyedSink(), PlainSink()
    pipeline = _pipeline(keyed, plain)
    pipeline.handle("info", {"event": "a"})
    pipeline.handle("info", {"event": "b", "n": 1})  # same key, from the shortcut
    pipeline.handle("error", {"event": "c"})  # the level changes the key
    with agent_logging.bound(allocation_id="a-9"):
        pipeline.handle("error", {"event": "d"})
        pipeline.handle("error", {"event": "e", "allocation_id": "a-10"})  # call site wins
        pipeline.handle("error", {"event": "f"})
    pipeline.handle("error", {"event": "g"})
    keys = [given for given, _, _ in keyed.got]
    assert keys == [expected for _, expected, _ in keyed.got]
    assert [record["event"] for _, _, record in keyed.got] == list("abcdefg")
    assert keys[0] == keys[1] != keys[2]
    assert keys[3] == keys[5] != keys[4]
    assert keys[6] == keys[2]
    assert len(plain.lines) == 7  # other sinks get the plain write, in order


def test_a_user_processor_that_edits_key_fields_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    def relabel(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
        event_dict["env"] = str(event_dict.get("n", "x"))
        return event_dict

    keyed = KeyedSink()
    pipeline = _pipeline(keyed, processors=(relabel,))
    for n in (1, 1, 2):
        pipeline.handle("info", {"event": "x", "n": n})
    assert [given for given, _, _ in keyed.got] == [expected for _, expected, _ in keyed.got]
    assert [record["env"] for _, _, record in keyed.got] == ["1", "1", "2"]
    assert keyed.got[0][0] == keyed.got[1][0] != keyed.got[2][0]


def test_span_ids_are_part_of_the_key() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    keyed = KeyedSink()
    pipeline = _pipeline(keyed)
    pipeline.handle("info", {"event": "before"})
    with tracer.start_as_current_span("one"):
        pipeline.handle("info", {"event": "in one"})
        with tracer.start_as_current_span("two"):
            pipeline.handle("info", {"event": "in two"})
        pipeline.handle("info", {"event": "in one again"})
    pipeline.handle("info", {"event": "after"})
    keys = [given for given, _, _ in keyed.got]
    assert keys == [expected for _, expected, _ in keyed.got]
    assert keys[0] == keys[4] != keys[1]
    assert keys[1] == keys[3] != keys[2]
    records = [record for _, _, record in keyed.got]
    assert records[1]["span_id"] == records[3]["span_id"] != records[2]["span_id"]
    assert "span_id" not in records[4]


def test_replaced_sinks_are_used() -> None:
    keyed, plain = KeyedSink(), PlainSink()
    pipeline = _pipeline(plain)
    pipeline.handle("info", {"event": "one"})
    object.__setattr__(pipeline, "sinks", (keyed,))
    pipeline.handle("info", {"event": "two"})
    assert len(plain.lines) == 1
    assert [record["event"] for _, _, record in keyed.got] == ["two"]


@pytest.mark.parametrize(
    ("ts_ns", "text"),
    [
        (0, "1970-01-01T00:00:00.000000000Z"),
        (999_999_999, "1970-01-01T00:00:00.999999999Z"),
        (1_000_000_000, "1970-01-01T00:00:01.000000000Z"),
        (1_700_000_000_123_456_789, "2023-11-14T22:13:20.123456789Z"),
        (1_700_000_000_000_000_001, "2023-11-14T22:13:20.000000001Z"),
        (1_700_000_001_000_000_000, "2023-11-14T22:13:21.000000000Z"),
        (-1, "1969-12-31T23:59:59.999999999Z"),
    ],
)
def test_rfc3339_ns(ts_ns: int, text: str) -> None:
    assert rfc3339_ns(ts_ns) == text
    assert rfc3339_ns(ts_ns) == text  # again, from the per-second cache
