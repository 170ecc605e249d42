"""Public calls documented as never raising, fed what a careless caller passes them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agent_logging
from agent_logging.schema import CONTEXT_KEYS, IDENTIFIER_KEYS, id_problem
from tests.conftest import Captured

Capture = Callable[..., Captured]


class Unprintable:
    """An argument whose text cannot be had: ``%s`` and ``%r`` of it raise."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


class Mentions(str):
    """Equal to any text that holds ``self``: what redaction makes of an unprintable object is
    its business, as long as the record names the object's type."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and str(self) in other

    __hash__ = str.__hash__


# (message, positional args, the args as the record holds them, the error's type)
_BAD_FORMATS = [
    ("%d items", ("x",), ["x"], "TypeError"),  # wrong type
    ("%s of %s", (1,), [1], "TypeError"),  # an argument missing
    ("%s done", (1, 2), [1, 2], "TypeError"),  # one left over
    ("done", (1,), [1], "TypeError"),  # no placeholder at all
    ("%(n)s left", ({"m": 2},), [{"m": 2}], "KeyError"),  # a mapping without the key
    ("%(n)d left", ({"n": "x"},), [{"n": "x"}], "TypeError"),  # a mapping, wrong type
    ("%(n)s and %s", ({"n": 1}, 2), [{"n": 1}, 2], "TypeError"),  # both styles
    ("at 50%", (1,), [1], "ValueError"),  # an incomplete format
    ("%y", (1,), [1], "ValueError"),  # an unknown conversion
    ("%s", (Unprintable(),), [Mentions("Unprintable")], "RuntimeError"),  # __str__ raises
    ("%r", (Unprintable(),), [Mentions("Unprintable")], "RuntimeError"),  # __repr__ raises
    (None, (1,), [1], "TypeError"),  # no message
    (17, ("x",), ["x"], "TypeError"),  # not a string
]


@pytest.mark.parametrize(("event", "args", "kept", "error"), _BAD_FORMATS)
def test_a_message_its_arguments_cannot_format_is_logged_as_written(
    captured: Capture, event: Any, args: tuple[Any, ...], kept: list[Any], error: str
) -> None:
    sink = captured()
    agent_logging.get_logger("t").warning(event, *args, task="reimage")
    (record,) = sink.records
    assert (record["level"], record.get("event"), record["task"]) == ("warning", event, "reimage")
    assert record["positional_args"] == kept
    assert record["format_error"].startswith(f"{error}: ")
    assert agent_logging.health()["failures"] == 1


@pytest.mark.parametrize(("event", "args", "kept", "error"), _BAD_FORMATS)
def test_the_async_twins_log_it_as_written_too(
    captured: Capture, event: Any, args: tuple[Any, ...], kept: list[Any], error: str
) -> None:
    sink = captured()
    log = agent_logging.get_logger("t")

    async def main() -> None:
        await log.ainfo(event, *args)
        await log.alog(25, event, *args)  # between INFO and WARNING: logged at INFO

    asyncio.run(main())
    assert [(r["level"], r.get("event"), r["positional_args"]) for r in sink.records] == [
        ("info", event, kept),
        ("info", event, kept),
    ]
    assert all(r["format_error"].startswith(f"{error}: ") for r in sink.records)
    assert agent_logging.health()["failures"] == 2


def test_a_format_failure_is_counted_each_time_and_reported_once(
    captured: Capture, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = captured()
    log = agent_logging.get_logger("t")
    log.info("%d items", "x")
    log.error("%d nodes", "y")
    log.log(logging.WARNING, "%s of %s", 1)
    try:
        raise OSError("disk full")
    except OSError:
        log.exception("%d writes failed", "z")
    log.info("%s of %d", "3", 5)  # a good one: formatted as ever
    assert [r["event"] for r in sink.records] == [
        "%d items",
        "%d nodes",
        "%s of %s",
        "%d writes failed",
        "3 of 5",
    ]
    assert sink.records[3]["error"]["type"] == "OSError"
    assert "positional_args" not in sink.records[4]
    assert agent_logging.health()["failures"] == 4
    reports = [line for line in capsys.readouterr().err.splitlines() if "formatted" in line]
    assert len(reports) == 1
    assert "TypeError" in reports[0] and "positional_args" in reports[0]


def test_aexception_records_the_error_being_handled_not_the_format_error(
    captured: Capture,
) -> None:
    sink = captured()
    log = agent_logging.get_logger()

    async def main() -> None:
        try:
            raise OSError("disk full")
        except OSError:
            await log.aexception("%d writes failed", "z")

    asyncio.run(main())
    record = sink.last()
    assert (record["event"], record["positional_args"]) == ("%d writes failed", ["z"])
    assert record["error"]["type"] == "OSError"


def test_a_call_site_field_named_like_ours_is_kept(captured: Capture) -> None:
    sink = captured()
    agent_logging.get_logger().info("%d", "x", positional_args="mine", format_error="mine too")
    assert {k: sink.last()[k] for k in ("event", "positional_args", "format_error")} == {
        "event": "%d",
        "positional_args": "mine",
        "format_error": "mine too",
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, {}),
        ("node_id=n-17", {}),
        (b"node_id", {}),
        (17, {}),
        ([("node_id", "n-17")], {}),
        ({"node_id": 17}, {"node_id": "17"}),  # inventories number their nodes; bind takes it
        ({"node_id": -3, "allocation_id": 0}, {"node_id": "-3", "allocation_id": "0"}),
        ({"node_id": True}, {}),  # a bool is not a number here
        ({"node_id": 17.0}, {}),
        ({"node_id": 10**5000}, {}),  # too long as text (and past int's str() limit)
        ({"trace_id": 17}, {}),  # trace ids are hex text only
        ({"node_id": ["n-17"], "workflow_id": {"id": 1}}, {}),
        ({"node_id": "n 17", "workflow_id": "wf-2"}, {"workflow_id": "wf-2"}),
        ({"node_id": "n-17", "other": object()}, {"node_id": "n-17"}),
    ],
)
def test_ids_from_payload_takes_only_identifiers(data: Any, expected: dict[str, str]) -> None:
    assert agent_logging.ids_from_payload(data) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (None, {}),
        (17, {}),
        ("x-correlation-id: c-1", {}),
        (b"x-correlation-id", {}),
        (["abc"], {}),
        ([("x-correlation-id",)], {}),
        ([("x-correlation-id", "c-1", "extra")], {}),
        ({"X-Correlation-ID": None}, {}),  # a header without a value is absent, not "None"
        ([None, 5, ("X-Correlation-ID", "c-1"), "junk"], {"correlation_id": "c-1"}),
        ([["baggage", b"allocation_id=a-9"]], {"allocation_id": "a-9"}),  # pairs from JSON
    ],
)
def test_ids_from_headers_takes_only_headers(headers: Any, expected: dict[str, str]) -> None:
    assert agent_logging.ids_from_headers(headers) == expected


def _valid(ids: object) -> bool:
    return isinstance(ids, dict) and all(
        key in CONTEXT_KEYS and id_problem(key, value) is None for key, value in ids.items()
    )


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.from_regex(r"[A-Za-z0-9._:/@+~-]{1,20}", fullmatch=True),
)
# JSON-ish values, plus bytes and tuples: what a decoded payload or a careless caller holds.
_JUNK = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=10), inner, max_size=4),
    ),
    max_leaves=12,
)
_PAYLOADS = st.one_of(
    _JUNK,
    st.dictionaries(st.sampled_from(CONTEXT_KEYS) | st.text(max_size=10), _JUNK, max_size=8),
)
_NAMES = st.sampled_from(["traceparent", "baggage", "X-Correlation-ID", "x-correlation-id"])
_HEADER_NAMES = st.one_of(_NAMES, _NAMES.map(str.encode), _JUNK)
_BAGGAGE = st.lists(
    st.tuples(st.sampled_from(IDENTIFIER_KEYS), _SCALARS).map(lambda kv: f"{kv[0]}={kv[1]}"),
    max_size=4,
).map(",".join)
_HEADER_VALUES = st.one_of(_JUNK, _BAGGAGE, _BAGGAGE.map(str.encode))
_HEADERS = st.one_of(
    _JUNK,
    st.dictionaries(_NAMES, _HEADER_VALUES, max_size=3),
    st.lists(st.one_of(st.tuples(_HEADER_NAMES, _HEADER_VALUES), _JUNK), max_size=5),
)


@given(_PAYLOADS)
def test_ids_from_payload_never_raises(data: object) -> None:
    assert _valid(agent_logging.ids_from_payload(data))


@given(_HEADERS)
def test_ids_from_headers_never_raises(headers: object) -> None:
    assert _valid(agent_logging.ids_from_headers(headers))
