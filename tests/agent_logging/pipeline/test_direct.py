"""Plain records rendered from cached pieces (``_direct``): the full path's line and key."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import datetime
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from agent_logging._types import EventDict
from agent_logging.context import _context
from agent_logging.pipeline._direct import NOT_PLAIN, DirectLines
from agent_logging.pipeline._pipeline import Pipeline
from agent_logging.pipeline._render import MAX_LINE_BYTES
from agent_logging.schema import IDENTIFIER_KEYS

_TRACER = TracerProvider().get_tracer("test_direct")


class _Sink:
    """Keeps what the pipeline hands over: the line, the stream key, and whether the record
    came as a dict (full path) or as the empty stand-in (direct path)."""

    def __init__(self) -> None:
        self.got: list[tuple[int, bytes, int, bool]] = []

    def write(self, ts_ns: int, line: bytes, record: EventDict) -> None:
        raise AssertionError("a keyed sink gets write_keyed")

    def write_keyed(self, ts_ns: int, line: bytes, record: EventDict, key: int) -> None:
        self.got.append((ts_ns, line, key, len(record) == 0))

    def close(self, timeout_s: float) -> None:
        return None

    def after_fork_in_child(self) -> None:
        return None


class _LineSink(_Sink):
    needs_record = False


def _pipeline(sink: _Sink, **options: Any) -> Pipeline:
    return Pipeline(
        static={"service": "svc", "layer": "node", "env": "test"},
        min_level=10,
        sinks=(sink,),
        base_ids={"node_id": "n-1"},
        **options,
    )


class _Shown:
    def __str__(self) -> str:
        return "shown password=hunter2"

    def __repr__(self) -> str:  # the same for each copy the test makes
        return "_Shown(password=hunter2)"


_SECRETS = st.sampled_from(
    [
        "password=hunter2",
        "Authorization: Bearer abcdefghijklmnop",
        "https://bob:pw@example.com/x",
        "ghp_" + "a" * 36,
        "AKIAABCDEFGHIJKLMNOP",
        'say "hi"\n\tand \u2028 \x00 \udcff',
    ]
)
_PLAIN_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=40),
        _SECRETS,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
_OTHER_VALUES = st.one_of(
    st.integers(min_value=2**64),  # orjson refuses: the stdlib encoder renders the record
    st.binary(max_size=20),
    st.frozensets(st.integers(0, 9), max_size=3),
    st.just(uuid.UUID(int=7)),
    st.just(datetime.datetime(2026, 11, 23, 1, 2, 3, tzinfo=datetime.UTC)),
    st.just(_Shown()),
    st.just("x" * (MAX_LINE_BYTES + 10)),  # over Loki's line limit: shrunk
)
_KEYS = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from(["password", "token", "Authorization", "cookie", "url", "error"]),
    st.sampled_from(sorted(NOT_PLAIN)),
).filter(lambda key: key != "event")
_IDS = st.dictionaries(
    st.sampled_from(IDENTIFIER_KEYS), st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True)
)
_TRACE = st.none() | st.just({"trace_id": "ab" * 16, "span_id": "cd" * 8})
_LEVELS = st.sampled_from(["debug", "info", "msg", "warning", "warn", "error", "fatal", "notice"])
# From the epoch's first second to the year 9999.
_TIMES = st.integers(0, 253_402_300_799 * 10**9) | st.integers(0, 10**9)


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(_KEYS, _PLAIN_VALUES | _OTHER_VALUES, max_size=5),
    event=st.none() | st.text(max_size=60) | _SECRETS | st.integers(),
    level=_LEVELS,
    ts_ns=_TIMES,
    ids=_IDS,
    trace=_TRACE,
    in_span=st.booleans(),
)
def test_the_direct_line_is_the_full_paths_line(
    fields: dict[str, Any],
    event: Any,
    level: str,
    ts_ns: int,
    ids: dict[str, str],
    trace: dict[str, str] | None,
    in_span: bool,
) -> None:
    direct, full = _LineSink(), _Sink()
    pipelines = (_pipeline(direct), _pipeline(full))
    token = _context.set_ids({**ids, **(trace or {})})
    try:
        with _TRACER.start_as_current_span("s") if in_span else contextlib.nullcontext():
            # Twice: the second record reuses the envelope the first one rendered.
            for _ in range(2):
                for pipeline in pipelines:
                    pipeline.handle(level, {"event": event, **copy.deepcopy(fields)}, ts_ns)
    finally:
        _context.reset(token)
    assert [got[:3] for got in direct.got] == [got[:3] for got in full.got]
    assert len(full.got) == 2
    assert not any(got[3] for got in full.got)  # a sink that needs the record gets it
    plain = NOT_PLAIN.isdisjoint(fields) and all(map(_simple, (event, *fields.values())))
    if plain:
        assert direct.got[0][3] and direct.got[1][3], "a plain record went the full path"
    elif not NOT_PLAIN.isdisjoint(fields):
        assert not direct.got[0][3], "a record naming an envelope field went the direct path"


def _simple(value: object) -> bool:
    if value is None or isinstance(value, bool | float):
        return True
    if isinstance(value, str):
        return len(value) < 1000 and not any(0xD800 <= ord(char) <= 0xDFFF for char in value)
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, list):
        return all(_simple(item) for item in value)
    if isinstance(value, dict):
        return all(_simple(key) and _simple(item) for key, item in value.items())
    return False


@pytest.mark.parametrize(
    "fields",
    [
        {"allocation_id": "a-1"},  # a call-site identifier is checked on the full path
        {"exc_info": True},
        {"owner_layer": "db"},
        {"service": "other"},  # kept as service_field
        {"trace_id": "ab" * 16},
        {"rejected_ids": {}},
    ],
)
def test_records_naming_the_envelope_take_the_full_path(fields: dict[str, Any]) -> None:
    sink = _LineSink()
    pipeline = _pipeline(sink)
    for _ in range(2):
        pipeline.handle("info", {"event": "e", **copy.deepcopy(fields)}, 1_700_000_000_000_000_000)
    assert not any(direct for *_, direct in sink.got)


def test_a_user_processor_or_a_sink_that_reads_the_record_turns_the_direct_path_off() -> None:
    with_processor, mixed_line, mixed_record, plain = _LineSink(), _LineSink(), _Sink(), _LineSink()
    pipelines = (
        _pipeline(with_processor, processors=(lambda _l, _m, record: record,)),
        Pipeline(
            static={"service": "svc", "layer": "node", "env": "test"},
            min_level=10,
            sinks=(mixed_line, mixed_record),
        ),
        _pipeline(plain),
    )
    for pipeline in pipelines:
        pipeline.handle("info", {"event": "e"})
        pipeline.handle("info", {"event": "e"})
    assert [direct for *_, direct in with_processor.got] == [False, False]
    assert [direct for *_, direct in mixed_line.got] == [False, False]
    assert [direct for *_, direct in plain.got] == [True, True]


def test_concurrent_requests_taking_turns_keep_their_envelopes() -> None:
    sink = _LineSink()
    pipeline = _pipeline(sink)
    requests = [contextvars.copy_context() for _ in range(3)]
    for n, request in enumerate(requests):
        request.run(_context.bind, correlation_id=f"c-{n}")
    for _ in range(4):
        for request in requests:
            request.run(pipeline.handle, "info", {"event": "step"})
    assert all(direct for *_, direct in sink.got)
    got = [orjson.loads(line)["correlation_id"] for _, line, _, _ in sink.got]
    assert got == ["c-0", "c-1", "c-2"] * 4
    # Rendered once each, in the first round: later rounds find them among the recent ones.
    recent = pipeline._direct._recent  # type: ignore[union-attr]
    assert [envelope.bound["correlation_id"] for envelope in recent] == ["c-2", "c-1", "c-0"]


def test_the_envelope_is_rendered_again_when_what_it_comes_from_changes() -> None:
    sink = _LineSink()
    pipeline = _pipeline(sink)

    def handle(level: str, event: str) -> None:
        pipeline.handle(level, {"event": event}, 1_700_000_000_000_000_000)
        pipeline.handle(level, {"event": event}, 1_700_000_000_000_000_000)  # reused

    handle("info", "before")
    with _context.bound(allocation_id="a-1"):
        handle("info", "bound")
        with _TRACER.start_as_current_span("s"):
            handle("info", "in span")
            handle("error", "in span, error")
        handle("info", "after span")
    handle("info", "after")
    assert all(direct for *_, direct in sink.got)
    assert [got[1] for got in sink.got[::2]] == [got[1] for got in sink.got[1::2]]
    del sink.got[::2]
    records = [orjson.loads(line) for _, line, _, _ in sink.got]
    assert [record.get("allocation_id") for record in records] == [None] + ["a-1"] * 4 + [None]
    assert [record["level"] for record in records] == ["info"] * 3 + ["error"] + ["info"] * 2
    assert ["span_id" in record for record in records] == [False, False, True, True, False, False]
    keys = [key for _, _, key, _ in sink.got]
    assert keys[0] == keys[5] != keys[1] == keys[4]
    assert len({keys[1], keys[2], keys[3]}) == 3


def test_fixed_fields_outside_the_envelope_are_refused() -> None:
    with pytest.raises(ValueError, match="not envelope fields"):
        DirectLines({"service": "svc", "region": "eu"}, spans=False)
