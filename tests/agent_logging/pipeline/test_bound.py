"""get_logger()'s bound logger: structlog's interface, records as structlog's wrapper made them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
import structlog

import agent_logging
from agent_logging import _state
from agent_logging._config import _NULL_LOGGER, dispatch
from agent_logging.pipeline._bound import BoundLogger
from tests.conftest import Captured

Capture = Callable[..., Captured]


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("ts", "service", "layer", "env")}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda log: log.debug("d", n=1), {"level": "debug", "event": "d", "n": 1}),
        (lambda log: log.info("i"), {"level": "info", "event": "i"}),
        (lambda log: log.msg("m"), {"level": "info", "event": "m"}),
        (lambda log: log.warning("w"), {"level": "warning", "event": "w"}),
        (lambda log: log.warn("w"), {"level": "warning", "event": "w"}),  # noqa: G010 - the alias
        (lambda log: log.error("e"), {"level": "error", "event": "e"}),
        (lambda log: log.critical("c"), {"level": "critical", "event": "c"}),
        (lambda log: log.fatal("f"), {"level": "critical", "event": "f"}),
        (lambda log: log.log(logging.WARNING, "l"), {"level": "warning", "event": "l"}),
        (lambda log: log.info("%s of %d", "3", 5), {"level": "info", "event": "3 of 5"}),
        (lambda log: log.info("%(n)s left", {"n": 2}), {"level": "info", "event": "2 left"}),
    ],
)
def test_level_methods_write_what_structlog_s_wrapper_wrote(
    captured: Capture, call: Callable[[Any], None], expected: dict[str, Any]
) -> None:
    ours = captured(level="debug")
    call(agent_logging.get_logger())
    theirs = structlog.wrap_logger(
        _NULL_LOGGER,
        processors=[dispatch],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    )
    call(theirs)
    mine, reference = (_fields(record) for record in ours.records[-2:])
    assert mine == expected
    assert reference == expected


def test_what_structlog_s_wrapper_refused_is_logged_or_dropped_quietly(captured: Capture) -> None:
    sink = captured(level="debug")
    log = agent_logging.get_logger()
    log.log(5, "too fine")  # below DEBUG: dropped, as structlog drops it
    log.log(25, "between")  # structlog: KeyError; here the level below it
    log.log(99, "beyond")
    log.info(x=1)  # structlog: TypeError (no event)
    assert [_fields(r) for r in sink.records] == [
        {"level": "info", "event": "between"},
        {"level": "critical", "event": "beyond"},
        {"level": "info", "event": None, "x": 1},
    ]


def test_bound_fields_merge_and_call_fields_win(captured: Capture) -> None:
    sink = captured()
    log = agent_logging.get_logger("svc.tasks", task="reimage", attempt=1)
    assert isinstance(log, BoundLogger)
    later = log.bind(attempt=2).unbind("task")
    assert isinstance(later, BoundLogger)
    later.info("retry", attempt=3)
    log.try_unbind("missing").info("first")
    assert [_fields(r) for r in sink.records] == [
        {"level": "info", "event": "retry", "logger": "svc.tasks", "attempt": 3},
        {"level": "info", "event": "first", "logger": "svc.tasks", "task": "reimage", "attempt": 1},
    ]


def test_exception_records_the_error_being_handled(captured: Capture) -> None:
    sink = captured()
    try:
        raise FileNotFoundError("ansible-playbook")
    except FileNotFoundError:
        agent_logging.get_logger().exception("deploy failed")
    record = sink.last()
    assert (record["level"], record["error"]["type"]) == ("error", "FileNotFoundError")


def test_async_twins_reach_the_pipeline_in_the_caller_s_context(captured: Capture) -> None:
    sink = captured()
    log = agent_logging.get_logger()

    async def main() -> None:
        with agent_logging.bound(allocation_id="a-9"):
            await log.awarning("slow")
            await log.alog(logging.ERROR, "failed")

    asyncio.run(main())
    assert [(r["level"], r["event"], r["allocation_id"]) for r in sink.records] == [
        ("warning", "slow", "a-9"),
        ("error", "failed", "a-9"),
    ]


def test_a_record_before_configure_configures_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_logging.shutdown(timeout_s=1.0)
    monkeypatch.setattr(_state, "pipeline", None)
    monkeypatch.setattr(_state, "shut_down", False)
    monkeypatch.setenv("AGENT_LOGGING_SERVICE", "late")
    monkeypatch.setenv("AGENT_LOGGING_FORMAT", "json")
    agent_logging.get_logger().info("first record")
    assert '"event":"first record","service":"late"' in capsys.readouterr().err
