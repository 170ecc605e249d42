from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import logging_loki
import orjson
import pytest

import agent_logging
from agent_logging import compat
from agent_logging.errors import ConfigurationError
from tests.lokisim import LokiServer


def test_constructors_match_python_logging_loki() -> None:
    ours = list(inspect.signature(compat.LokiHandler.__init__).parameters)
    theirs = list(inspect.signature(logging_loki.LokiHandler.__init__).parameters)
    assert ours == theirs
    assert list(inspect.signature(compat.LokiQueueHandler.__init__).parameters)[:2] == [
        "self",
        "queue",
    ]


@pytest.mark.integration
def test_a_one_import_migration_ships_durably(
    loki: LokiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_LOGGING_SPOOL_DIR", str(tmp_path / "spool"))
    handler = compat.LokiHandler(
        url=f"{loki.url}/loki/api/v1/push",
        tags={"application": "legacy-app", "team": "infra", "env": "staging"},
        version="1",
    )
    logger = logging.getLogger("legacy")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.warning("disk %s is full", "/var", extra={"tags": {"host": "n-17"}})
        logger.info("second")
        handler.flush()
        assert loki.wait_for_entries(2, timeout_s=10)
    finally:
        logger.removeHandler(handler)
    first, second = loki.entries()
    assert (first.labels["service_name"], first.labels["env"]) == ("legacy-app", "staging")
    record = orjson.loads(first.line)
    assert (record["env"], "env_field" in record) == ("staging", False)
    assert (record["event"], record["team"], record["host"]) == (
        "disk /var is full",
        "infra",
        "n-17",
    )
    assert orjson.loads(second.line)["team"] == "infra"
    assert "host" not in orjson.loads(second.line)
    assert list((tmp_path / "spool").iterdir()) == [tmp_path / "spool" / "legacy-app"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("handler_level", "variable", "shipped"),
    [
        (logging.DEBUG, None, ["debug", "info", "warning"]),
        (logging.INFO, None, ["info", "warning"]),
        (logging.DEBUG, "warning", ["warning"]),  # AGENT_LOGGING_LEVEL sets a floor
    ],
)
def test_the_handlers_level_decides_what_ships(
    loki: LokiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    handler_level: int,
    variable: str | None,
    shipped: list[str],
) -> None:
    # python-logging-loki ships whatever the handler lets through, DEBUG included.
    monkeypatch.setenv("AGENT_LOGGING_SPOOL_DIR", str(tmp_path / "spool"))
    if variable is not None:
        monkeypatch.setenv("AGENT_LOGGING_LEVEL", variable)
    handler = compat.LokiHandler(url=loki.url, tags={"application": "legacy-app"})
    handler.setLevel(handler_level)
    logger = logging.getLogger("legacy.levels")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("debug")
        logger.info("info")
        logger.warning("warning")
        assert agent_logging.flush(timeout_s=10.0)
    finally:
        logger.removeHandler(handler)
    records = [orjson.loads(entry.line) for entry in loki.entries()]
    assert [(r["event"], r["level"]) for r in records] == [(name, name) for name in shipped]


def test_a_handler_does_not_replace_a_configuration_without_loki(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, captured: Callable[..., Any]
) -> None:
    local = captured()  # the application's own output, and stdlib capture (the default)
    monkeypatch.setenv("AGENT_LOGGING_SPOOL_DIR", str(tmp_path / "spool"))
    with pytest.raises(ConfigurationError) as refused:
        compat.LokiHandler(url="http://127.0.0.1:9", tags={"application": "legacy-app"})
    assert str(refused.value) == (
        "agent_logging is already configured in this process without Loki (by "
        "agent_logging.configure(), or by a record logged before it); a LokiHandler would "
        "replace that configuration: give loki_url= and spool_dir= to that configure() call "
        "(or set AGENT_LOGGING_LOKI_URL and AGENT_LOGGING_SPOOL_DIR) instead of adding a "
        "LokiHandler"
    )
    logging.getLogger("app.module").warning("still captured")
    assert [(r["event"], r["service"]) for r in local.records] == [("still captured", "svc")]
    assert not (tmp_path / "spool").exists()


@pytest.mark.integration
def test_a_record_that_also_reaches_the_stdlib_capture_ships_once(
    loki: LokiServer, tmp_path: Path
) -> None:
    # Configured with Loki and stdlib capture (the default), and a LokiHandler on a logger
    # that propagates to the root logger's capture handler: one record, two bridges.
    agent_logging.configure(
        "svc", "api", "test", loki_url=loki.url, spool_dir=tmp_path / "spool", output="none"
    )
    handler = compat.LokiHandler(url=f"{loki.url}/loki/api/v1/push", tags={"team": "infra"})
    logger = logging.getLogger("legacy.propagating")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.warning("once")
        assert agent_logging.flush(timeout_s=10.0)
    finally:
        logger.removeHandler(handler)
    assert [orjson.loads(entry.line)["event"] for entry in loki.entries()] == ["once"]
