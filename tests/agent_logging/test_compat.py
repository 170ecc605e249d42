from __future__ import annotations

import inspect
import logging
from pathlib import Path

import logging_loki
import orjson
import pytest

from agent_logging import compat
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
        tags={"application": "legacy-app", "team": "infra"},
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
    assert first.labels["service_name"] == "legacy-app"
    record = orjson.loads(first.line)
    assert (record["event"], record["team"], record["host"]) == (
        "disk /var is full",
        "infra",
        "n-17",
    )
    assert orjson.loads(second.line)["team"] == "infra"
    assert "host" not in orjson.loads(second.line)
    assert list((tmp_path / "spool").iterdir()) == [tmp_path / "spool" / "legacy-app"]
