"""Findings, latency and time parsing for the edges (CLI, HTTP)."""

from __future__ import annotations

import re
import time
from typing import Any, Final

from correlator.errors import QueryError
from correlator.store import Store

__all__ = ["findings", "latency", "log_findings", "parse_duration_s", "parse_time_ns"]

_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration_s(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1h30m``, ``7d`` to seconds (Prometheus/Loki syntax).

    Raises:
        QueryError: not a duration.
    """
    text = text.strip()
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not text or position != len(text):
        raise QueryError(f"{text!r} is not a duration: use e.g. 90s, 15m, 2h, 1h30m, 7d")
    return total


def parse_time_ns(text: str) -> int:
    """An RFC 3339 time, integer nanoseconds since the epoch, or ``now-DURATION``.

    Raises:
        QueryError: naming the value.
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text.startswith("now"):
        rest = text[3:].strip()
        if not rest:
            return time.time_ns()
        if rest.startswith("-"):
            return time.time_ns() - int(parse_duration_s(rest[1:]) * 1e9)
    from correlator.sources._time import parse_rfc3339_ns

    try:
        return parse_rfc3339_ns(text)
    except ValueError as exc:
        raise QueryError(f"{text!r} is not a time: use RFC 3339, nanoseconds, or now-1h") from exc


def findings(store: Store, now_ns: int) -> list[dict[str, Any]]:
    """Stuck lifecycles, drift and orphans, most severe first."""
    from correlator import findings as rules

    shown = []
    for finding in rules.find(store.lifecycle_events(), now_ns=now_ns):
        data = finding.as_dict()
        # Hashes as the timeline shows them: 16 hex digits (JSON numbers lose bits past 2**53).
        data["evidence"] = [f"{h & 0xFFFFFFFFFFFFFFFF:016x}" for h in data.get("evidence", [])]
        shown.append(data)
    return shown


def latency(store: Store) -> list[dict[str, Any]]:
    """Per-phase durations by provider."""
    from correlator import latency as phases

    return [p.as_dict() for p in phases.latency(store.lifecycle_events())]


def log_findings(found: list[dict[str, Any]]) -> None:
    """Log each finding as an ``event="finding"`` record through agent_logging, so findings
    reach Loki with the rest of the evidence (the lifecycle dashboard reads them)."""
    import agent_logging

    log = agent_logging.get_logger("correlator.findings")
    for finding in found:
        fields = {k: v for k, v in finding.items() if k not in ("ids", "evidence")}
        fields.update(finding.get("ids") or {})
        level = "error" if finding.get("severity") == "critical" else "warning"
        getattr(log, level)("finding", **fields)
