"""The evidence-pipeline Grafana dashboards, built from code (DESIGN §7).

``python -m dashboards`` writes them to ``dashboards/json/``; ``--check`` fails when the
committed files differ from a fresh build. Four dashboards, all over one Loki datasource
variable (``$loki``) and the library's vocabulary (labels ``service_name``, ``layer``, ``env``;
structured metadata for the five identifiers and ``level``; the JSON record as the line):

- incident timeline: one logs panel per layer, failures by owner layer, lifecycle states;
- node evidence: one node across reimages, its node agent's task records;
- lifecycle findings: the correlator's ``event="finding"`` records, ``release_failed`` counts;
- shipping health: the library's ``event="shipping health"`` self-records per service.

How identifiers typed into the dashboards reach LogQL safely is in ``dashboards.boards``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from dashboards.boards import (
    ANY_WHEN_EMPTY,
    LAYER_ORDER,
    identifier_filter,
    incident_timeline,
    lifecycle_findings,
    node_evidence,
    shipping_health,
)
from dashboards.build import Dashboard, render

__all__ = [
    "ANY_WHEN_EMPTY",
    "JSON_DIR",
    "LAYER_ORDER",
    "all_dashboards",
    "identifier_filter",
    "incident_timeline",
    "lifecycle_findings",
    "node_evidence",
    "render_all",
    "shipping_health",
    "stale_files",
    "write_all",
]

#: Where the generated JSON is committed (and where Grafana's file provider reads it).
JSON_DIR: Final = Path(__file__).resolve().parent / "json"


def all_dashboards() -> dict[str, Dashboard]:
    """Every dashboard by the file name it is committed under."""
    return {
        "incident-timeline.json": incident_timeline(),
        "node-evidence.json": node_evidence(),
        "lifecycle-findings.json": lifecycle_findings(),
        "shipping-health.json": shipping_health(),
    }


def render_all() -> dict[str, str]:
    """Every dashboard's JSON text by file name (see :func:`dashboards.build.render`)."""
    return {name: render(dashboard) for name, dashboard in all_dashboards().items()}


def write_all(directory: Path = JSON_DIR) -> list[Path]:
    """Write every dashboard into ``directory`` (created if missing).

    Args:
        directory: where to write; default :data:`JSON_DIR`.

    Returns:
        The files written, sorted.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = directory / name
        path.write_bytes(text.encode())
        written.append(path)
    return sorted(written)


def stale_files(directory: Path = JSON_DIR) -> list[str]:
    """File names in ``directory`` that differ from a fresh build, are missing, or are JSON
    files no dashboard produces any more.

    Args:
        directory: the directory to compare; default :data:`JSON_DIR`.

    Returns:
        Sorted file names; empty when the directory is up to date.
    """
    rendered = render_all()
    stale = {
        name
        for name, text in rendered.items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != text.encode()
    }
    if directory.is_dir():
        stale.update(p.name for p in directory.glob("*.json") if p.name not in rendered)
    return sorted(stale)
