"""Findings, latency and time parsing for the edges (CLI, HTTP)."""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from correlator import _environ
from correlator._collector import collector_paused
from correlator.errors import QueryError
from correlator.model import hash_text
from correlator.store import Store

if TYPE_CHECKING:
    from correlator.findings import FindingsConfig

#: The most events a timeline may be asked for: the bound on ``GET /v1/timeline?limit=`` and
#: ``correlator timeline --limit``.
MAX_LIMIT: Final = 100_000

__all__ = [
    "MAX_LIMIT",
    "findings",
    "findings_config",
    "latency",
    "log_findings",
    "number_setting",
    "parse_duration_s",
    "parse_time_ns",
]

# Prometheus duration syntax (common/model.ParseDuration), which Loki's APIs and logcli's
# --since accept: units largest first, each at most once, integers only.
_DURATION: Final = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?", re.ASCII
)
_UNIT_S: Final = (365 * 86400.0, 7 * 86400.0, 86400.0, 3600.0, 60.0, 1.0, 0.001)
# A window longer than int64 nanoseconds cannot be asked of Loki or stored (~292 years).
_MAX_DURATION_S: Final = (2**63 - 1) / 1e9


def parse_duration_s(text: str) -> float:
    """Parse a duration in Prometheus/Loki syntax (``--since``, ``now-15m``).

    Args:
        text: e.g. ``15m``, ``2h``, ``1d``, ``90s``, ``1h30m``, ``500ms``, ``1w``, ``1y``
            (units ``y w d h m s ms``, largest first, each at most once, integers only).

    Returns:
        The duration in seconds.

    Raises:
        QueryError: the text is not such a duration, or is zero, or longer than int64
            nanoseconds can express.
    """
    match = _DURATION.fullmatch(text) if isinstance(text, str) and text else None
    if match is None or not any(match.groups()):
        raise QueryError(
            f"{text!r} is not a duration: use integers with units y, w, d, h, m, s, ms, "
            "largest first, e.g. 15m, 2h, 1d or 1h30m"
        )
    seconds = sum(
        int(amount) * unit for amount, unit in zip(match.groups(), _UNIT_S, strict=True) if amount
    )
    if seconds <= 0:
        raise QueryError(f"duration {text!r} is zero; the window would hold nothing")
    if seconds > _MAX_DURATION_S:
        raise QueryError(f"duration {text!r} is longer than Loki can express (about 292 years)")
    return seconds


def parse_time_ns(text: str) -> int:
    """An RFC 3339 time, integer nanoseconds since the epoch, or ``now-DURATION``.

    Raises:
        QueryError: naming the value.
    """
    from correlator.sources._time import MAX_NS, parse_rfc3339_ns

    text = text.strip()
    if text.isascii() and text.isdigit():  # str.isdigit() alone takes "²" and "٣"
        ts_ns = int(text)
        if ts_ns > MAX_NS:
            raise QueryError(
                f"{text[:40]!r} is not a time: nanoseconds since 1970 end at 2**63 - 1 (2262)"
            )
        return ts_ns
    if text.startswith("now"):
        rest = text[3:].strip()
        if not rest:
            return time.time_ns()
        if rest.startswith("-"):
            return time.time_ns() - int(parse_duration_s(rest[1:]) * 1e9)
    try:
        return parse_rfc3339_ns(text)
    except ValueError as exc:
        raise QueryError(f"{text!r} is not a time: use RFC 3339, nanoseconds, or now-1h") from exc


def findings(store: Store, now_ns: int, config: FindingsConfig | None = None) -> dict[str, Any]:
    """Stuck lifecycles, drift and orphans, most severe first: ``GET /v1/findings``.

    Args:
        store: the evidence.
        now_ns: the clock ages are measured against.
        config: deadlines and thresholds (default: :func:`findings_config` of the
            environment, read on each call: the ``CORRELATOR_FINDINGS_*`` variables).

    Returns:
        ``{"findings": [...], "truncated": bool}``: truncated when the store holds more
        lifecycle events that findings depend on than are read (``store.LIFECYCLE_LIMIT``,
        the oldest kept), so that findings about the newest may be missing.

    Raises:
        QueryError: ``config`` is None and a ``CORRELATOR_FINDINGS_*`` variable is malformed.
    """
    from correlator import findings as rules

    # Read before the store: a malformed setting fails without the cost of a read.
    if config is None:
        config = findings_config(os.environ)
    with collector_paused():
        events, truncated = store.finding_events()
        found = rules.find(events, now_ns=now_ns, config=config)
    shown = []
    for finding in found:
        data = finding.as_dict()
        data["evidence"] = [hash_text(h) for h in data.get("evidence", [])]  # as the timeline
        shown.append(data)
    return {"findings": shown, "truncated": truncated}


def findings_config(
    environ: Mapping[str, str], overrides: Mapping[str, float] | None = None
) -> FindingsConfig:
    """The findings' deadlines and thresholds an operator set, the defaults for the rest.

    Each field of :class:`~correlator.findings.FindingsConfig` is read from its variable,
    ``CORRELATOR_FINDINGS_<FIELD>`` (``_environ.FINDINGS_THRESHOLDS``); ``overrides`` win
    over the environment (``correlator findings --threshold NAME=SECONDS``): an overridden
    variable is not read at all.

    Args:
        environ: the environment (``os.environ``); a variable unset or empty keeps the
            default.
        overrides: values by field name, e.g. ``{"drift_threshold_s": 60.0}``.

    Returns:
        The configuration.

    Raises:
        QueryError: a value is not a finite number of at least 0 (``critical_factor``: at
            least 1), the message naming the variable (or the field, for an override) and
            the value; an override names no field.
    """
    from correlator.findings import FindingsConfig

    overrides = overrides or {}
    given: list[tuple[str, str, str | float]] = []  # (what the message names, field, value)
    for name, seconds in overrides.items():
        if name not in _environ.FINDINGS_THRESHOLDS:
            known = ", ".join(_environ.FINDINGS_THRESHOLDS)
            raise QueryError(f"unknown threshold {name!r}; use one of {known}")
        given.append((name, name, seconds))
    for name, variable in _environ.FINDINGS_THRESHOLDS.items():
        text = environ.get(variable, "").strip()
        if text and name not in overrides:  # an override replaces the variable, read or not
            given.append((variable, name, text))
    values = {
        name: number_setting(label, value, least=1.0 if name == "critical_factor" else 0.0)
        for label, name, value in given
    }
    return FindingsConfig(**values)


def number_setting(name: str, value: str | float, *, least: float, whole: bool = False) -> float:
    """A setting's number (an environment variable's text, an option's value), checked.

    Args:
        name: what the message names (the variable or the option).
        value: the text as given, or a number.
        least: the smallest value accepted.
        whole: only whole numbers (the value is then an ``int``).

    Returns:
        The number.

    Raises:
        QueryError: not a (whole) finite number of at least ``least``; the message names
            ``name`` and the value.
    """
    number: float | None
    try:
        number = None if isinstance(value, bool) else (int if whole else float)(value)
    except (TypeError, ValueError):
        number = None
    # float() also reads "nan" and "inf": neither is a size, an interval or a deadline.
    if number is None or not math.isfinite(number) or number < least:
        noun = "a whole number" if whole else "a number"
        raise QueryError(f"{name} must be {noun} of at least {least:g}, not {value!r}")
    return number


def latency(store: Store) -> dict[str, Any]:
    """Per-phase durations by provider: ``GET /v1/latency``.

    Returns:
        ``{"phases": [...], "truncated": false}``: every allocation transition counts (the
        samples are computed in SQL, not read as events), so nothing is ever cut; the key is
        kept for the answer's shape.
    """
    from correlator import latency as phases

    with collector_paused():
        samples, incomplete = store.latency_samples(phases.DEFAULT_PHASES)
        measured = phases.statistics(samples, incomplete, phases.DEFAULT_PHASES)
    return {"phases": [p.as_dict() for p in measured], "truncated": False}


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
