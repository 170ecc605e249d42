"""The collector-config files, loaded once, and helpers the tests share.

Environment references are expanded to their defaults (``${env:NAME:-default}`` in the
collector config, ``${NAME:-default}`` in Loki's), i.e. what the configs mean with nothing set.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

from agent_logging.schema import IDENTIFIER_KEYS, SERVICE_LABEL, STREAM_LABELS, TRACE_KEYS
from tests.collector_config import alloy_syntax
from tests.collector_config.alloy_syntax import Block
from tests.collector_config.simulate import run_alloy, run_filelog

__all__ = [
    "ALLOY",
    "ID_ALPHABET",
    "LABELS",
    "LIFTED",
    "LOKI",
    "NO_ENV",
    "OTELCOL",
    "OTEL_ENV_REFERENCE",
    "README",
    "RESOURCE_LABELS",
    "ROOT",
    "alloy",
    "alloy_ids",
    "components",
    "loki",
    "nginx_access_line",
    "operators",
    "otel_ids",
    "otelcol",
    "postgres_line",
]

ROOT: Final = Path(__file__).resolve().parents[2] / "collector-config"
OTELCOL: Final = ROOT / "otelcol" / "agent-logs.yaml"
ALLOY: Final = ROOT / "alloy" / "agent-logs.alloy"
LOKI: Final = ROOT / "loki" / "loki-local.yaml"
README: Final = ROOT / "README.md"

#: The stream schema the collectors must produce (agent_logging.schema).
LABELS: Final = frozenset(STREAM_LABELS)
#: The same as OpenTelemetry resource attributes: Loki reads ``service.name`` as ``service_name``.
RESOURCE_LABELS: Final = frozenset(
    "service.name" if label == SERVICE_LABEL else label for label in STREAM_LABELS
)
LIFTED: Final = frozenset(IDENTIFIER_KEYS + TRACE_KEYS)
#: What a library identifier may be (agent_logging.schema.id_problem): these characters, 1 to
#: 256 of them.
ID_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+~-"
NO_ENV: Final[dict[str, str]] = {}

OTEL_ENV_REFERENCE: Final = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_LOKI_ENV: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_defaults(text: str, pattern: re.Pattern[str]) -> str:
    """What the config becomes with none of its environment variables set."""
    return pattern.sub(lambda m: m.group(2) if m.group(2) is not None else "", text)


@functools.cache
def otelcol() -> dict[str, Any]:
    """otelcol/agent-logs.yaml with every ``${env:...}`` at its default."""
    loaded = yaml.safe_load(_expand_defaults(OTELCOL.read_text(), OTEL_ENV_REFERENCE))
    assert isinstance(loaded, dict)
    return loaded


@functools.cache
def alloy() -> Block:
    """alloy/agent-logs.alloy, parsed (calls such as ``sys.env`` left unevaluated)."""
    return alloy_syntax.parse(ALLOY.read_text())


@functools.cache
def loki() -> dict[str, Any]:
    """loki/loki-local.yaml as ``-config.expand-env=true`` reads it with nothing set."""
    loaded = yaml.safe_load(_expand_defaults(LOKI.read_text(), _LOKI_ENV))
    assert isinstance(loaded, dict)
    return loaded


def components(kind: str) -> dict[str, Block]:
    """Alloy components of one kind, by label."""
    found = {block.label: block for block in alloy().children(kind)}
    assert None not in found, f"{kind} without a label"
    return {str(label): block for label, block in found.items()}


def operators(receiver: str) -> list[dict[str, Any]]:
    """The stanza operators of one ``filelog`` receiver."""
    ops = otelcol()["receivers"][receiver]["operators"]
    assert isinstance(ops, list)
    return ops


def nginx_access_line(**fields: str) -> str:
    """An access line in the README's JSON ``log_format``, with ``fields`` set."""
    record = {"msec": "1795353079.123", "status": "502", "request_uri": "/v1/allocations"}
    record.update(fields)
    return orjson.dumps(record).decode()


def postgres_line(statement: str | None, message: str = "canceling statement") -> str:
    """A PostgreSQL ``jsonlog`` line for an ERROR with ``statement`` and ``message``."""
    record: dict[str, Any] = {
        "timestamp": "2026-11-22 13:11:19.123 UTC",
        "error_severity": "ERROR",
        "state_code": "55P03",
        "message": message,
    }
    if statement is not None:
        record["statement"] = statement
    return orjson.dumps(record).decode()


def otel_ids(receiver: str, line: str) -> dict[str, str]:
    """The identifiers and trace context a receiver hands to Loki for ``line``."""
    entry = run_filelog(otelcol()["receivers"][receiver], line)
    lifted = {k: v for k, v in entry.attributes.items() if k in IDENTIFIER_KEYS}
    return lifted | entry.trace


def alloy_ids(process: str, line: str) -> dict[str, str]:
    """The identifiers and trace context an Alloy pipeline puts in structured metadata."""
    entry = run_alloy(components("loki.process")[process], line, {"filename": "/x"}, NO_ENV)
    return {k: v for k, v in entry.structured_metadata.items() if k in LIFTED}
