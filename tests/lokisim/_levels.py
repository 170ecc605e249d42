"""What Loki 3 adds to a pushed entry: ``service_name``, ``detected_level``, clean metadata names.

- ``service_name`` (``pkg/loghttp/push/push.go``): a stream without it gets the value
  of the first label of ``discover_service_name`` it has, else ``unknown_service``.
- ``detected_level`` (``pkg/distributor/field_detection.go``, ``discover_log_levels``,
  on by default): structured metadata naming the entry's level, taken from a level
  label, level metadata, the JSON or logfmt line, or words in the line; ``unknown``
  when nothing says. The test server follows those rules in a simpler form.
- Metadata names are normalised like the OTLP label namer Loki uses: runs of
  characters outside ``[a-zA-Z0-9]`` become one ``_``, a leading digit gets ``key_``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_LEVEL_FIELDS",
    "DEFAULT_SERVICE_NAME_LABELS",
    "LEVEL_LABEL",
    "detect_level",
    "level_from_fields",
    "normalize_level",
    "normalize_metadata_name",
    "service_name_for",
]

# Loki's default `discover_service_name` (pkg/validation/limits.go).
DEFAULT_SERVICE_NAME_LABELS = (
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
)
# Loki's DefaultAllowedLevelFields (pkg/validation/limits.go).
DEFAULT_LEVEL_FIELDS = (
    "level",
    "LEVEL",
    "Level",
    "log.level",
    "severity",
    "SEVERITY",
    "Severity",
    "SeverityText",
    "lvl",
    "LVL",
    "Lvl",
)
LEVEL_LABEL = "detected_level"
_UNKNOWN_SERVICE = "unknown_service"
_SYNONYMS = {
    "trace": "trace",
    "trc": "trace",
    "debug": "debug",
    "dbg": "debug",
    "info": "info",
    "inf": "info",
    "information": "info",
    "warn": "warn",
    "wrn": "warn",
    "warning": "warn",
    "error": "error",
    "err": "error",
    "critical": "critical",
    "fatal": "fatal",
}
# Word search order of detectLevelFromLogLine: the earliest match in the line wins.
_WORDS = ("trace", "debug", "fatal", "critical", "error", "err", "warning", "warn", "info")
_LEFT = " \t\n[({\"'=|"
_RIGHT = " \t\n[](){}:,!\"'=|"


def service_name_for(labels: Mapping[str, str], discover: Sequence[str]) -> str | None:
    """Return the ``service_name`` Loki would add, or None when it adds none.

    Args:
        labels: the stream's labels (empty values already dropped).
        discover: ``Limits.discover_service_name``; empty disables the feature.

    Returns:
        The value to set, or None.
    """
    if not discover or "service_name" in labels:
        return None
    return next((labels[name] for name in discover if labels.get(name)), _UNKNOWN_SERVICE)


def normalize_metadata_name(name: str) -> str:
    """Normalise a structured-metadata name as Loki's distributor does.

    Args:
        name: the name as pushed.

    Returns:
        The stored name.

    Raises:
        ValueError: the name is empty or only underscores (Loki answers 500).
    """
    if not name:
        raise ValueError("label name is empty")
    reserved = len(name) > 4 and name.startswith("__") and name.endswith("__")
    core = re.sub(r"[^a-zA-Z0-9]+", "_", name[2:-2] if reserved else name)
    normalized = f"__{core}__" if reserved else core
    if normalized[0].isdigit():
        normalized = "key_" + normalized
    if set(normalized) == {"_"}:
        raise ValueError(
            f'normalization for label name "{name}" resulted in invalid name "{normalized}"'
        )
    return normalized


def normalize_level(level: str) -> str:
    """Map a level spelling to Loki's canonical one (``WARNING`` -> ``warn``); unknown ones stay."""
    return _SYNONYMS.get(level.lower(), level)


def level_from_fields(labels: Mapping[str, str], metadata: Mapping[str, str]) -> str | None:
    """Return the level a level label or metadata field names, before the line is read.

    The first step of :func:`detect_level`; the store caches it per label set and
    metadata, so only entries without such a field pay for reading their line.

    Args:
        labels: the stream's labels.
        metadata: the entry's structured metadata.

    Returns:
        The normalised level, or None when neither names one.
    """
    for source in (labels, metadata):
        for field in DEFAULT_LEVEL_FIELDS:
            if field in source:
                return normalize_level(source[field])
    return None


def detect_level(labels: Mapping[str, str], metadata: Mapping[str, str], line: str) -> str:
    """Return the ``detected_level`` Loki stores for an entry lacking one.

    Args:
        labels: the stream's labels.
        metadata: the entry's structured metadata.
        line: the log line.

    Returns:
        One of trace, debug, info, warn, error, critical, fatal, unknown, or the level
        label's own value when it is none of those.
    """
    from_fields = level_from_fields(labels, metadata)
    if from_fields is not None:
        return from_fields
    stripped = line.strip()
    value: str | None = None
    if stripped.startswith("{") and stripped.endswith("}"):
        value = _json_level(stripped)
    elif "=" in line:
        value = _logfmt_level(line)
    else:
        return _word_level(line)
    if value is not None and value.lower() in _SYNONYMS:
        return _SYNONYMS[value.lower()]
    return _word_level(line)


def _json_level(line: str) -> str | None:
    try:
        document = json.loads(line)
    except ValueError:
        return None
    return _find_level(document, 0) if isinstance(document, dict) else None


def _find_level(node: dict[str, object], depth: int) -> str | None:
    # Loki walks the object depth first, to log_level_from_json_max_depth (default 2).
    for key, value in node.items():
        if isinstance(value, str) and key in DEFAULT_LEVEL_FIELDS:
            return value
        if isinstance(value, dict) and depth + 1 < 2:
            found = _find_level(value, depth + 1)
            if found is not None:
                return found
    return None


def _logfmt_level(line: str) -> str | None:
    best: tuple[int, str] | None = None
    for match in re.finditer(r'([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)', line):
        key, value = match.group(1), match.group(2).strip('"')
        for rank, field in enumerate(DEFAULT_LEVEL_FIELDS):
            if key.lower() == field.lower() and (best is None or rank < best[0]):
                best = (rank, value)
    return None if best is None else best[1]


def _word_level(line: str) -> str:
    lower = line.lower()
    found_at, level = len(lower), "unknown"
    for word in _WORDS:
        start = 0
        while (pos := lower.find(word, start)) != -1:
            end = pos + len(word)
            left_ok = pos == 0 or lower[pos - 1] in _LEFT
            right_ok = end >= len(lower) or lower[end] in _RIGHT
            if left_ok and right_ok:
                break
            start = pos + 1
        if pos != -1 and pos < found_at:
            found_at, level = pos, _SYNONYMS[word]
    return level
