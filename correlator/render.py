"""Showing answers to people: rich tables in a terminal, a self-contained HTML page."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Final

import orjson

__all__ = ["html_page", "print_findings", "print_latency", "print_timeline"]

_LEVEL_STYLE: Final = {"error": "bold red", "critical": "bold white on red", "warning": "yellow"}
_IDS: Final = ("node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id")
_SHORT: Final = {
    "node_id": "node",
    "node_instance_id": "instance",
    "correlation_id": "corr",
    "allocation_id": "alloc",
    "workflow_id": "wf",
}


def _console() -> Any:
    import shutil

    from rich.console import Console

    # Wide enough to read a timeline when piped; a real terminal's width wins.
    width = shutil.get_terminal_size((160, 40)).columns
    return Console(highlight=False, width=max(width, 120))


def print_timeline(data: dict[str, Any]) -> None:
    """The timeline as a table, verdict first, with gaps and reimages marked."""
    from rich.table import Table

    console = _console()
    verdict = data["verdict"]
    console.print(
        f"[bold]verdict:[/bold] owner layer [bold magenta]{verdict['owner_layer']}[/] "
        f"(confidence {verdict['confidence']}) — {verdict.get('reason', '')}"
    )
    console.print("identifiers: " + ", ".join(f"{k}={','.join(v)}" for k, v in data["ids"].items()))
    if data["clock_offsets"]:
        offsets = ", ".join(
            f"{k} {v['offset_s']:+.3f}s ({v['pairs']} pairs)"
            for k, v in data["clock_offsets"].items()
        )
        console.print(f"clock offsets vs ingress: {offsets}")
    table = Table(show_lines=False, expand=True)
    for column in ("time (UTC)", "layer", "service", "level", "message", "ids"):
        table.add_column(column, overflow="fold")
    reimages = {r["first_seen_new_ns"]: r for r in data.get("reimages", [])}
    gaps = {g["to_ns"]: g for g in data.get("gaps", [])}
    for event in data["events"]:
        when = event.get("corrected_ts_ns", event["ts_ns"])
        # Each marker once, before the first event at its time (several events may share it).
        gap = gaps.pop(when, None)
        if gap is not None:
            table.add_row("", "", "", "", f"[dim]… gap of {gap['seconds']} s …[/dim]", "")
        r = reimages.pop(when, None)
        if r is not None:
            table.add_row(
                "",
                "node",
                "",
                "",
                f"[bold cyan]reimage: {r['node_id']} {r['from_instance']} → {r['to_instance']}[/]",
                "",
            )
        marker = (
            "⟶ FIRST FAILURE "
            if event.get("first_failure")
            else ("symptom: " if event.get("symptom") else "")
        )
        ids = " ".join(f"{_SHORT[k]}={event[k]}" for k in _IDS if k in event)
        style = (
            "reverse bold red"
            if event.get("first_failure")
            else _LEVEL_STYLE.get(event.get("level", ""), "")
        )
        table.add_row(
            event["ts"][11:],
            event["layer"],
            event.get("service", ""),
            event.get("level", ""),
            marker + event.get("message", ""),
            ids,
            style=style,
        )
    console.print(table)
    if data.get("truncated"):
        console.print(
            "[yellow]truncated: more evidence matched than shown "
            "(raise --limit or narrow --from/--to)[/]"
        )


def print_findings(findings: Sequence[dict[str, Any]]) -> None:
    """Findings, most severe first."""
    console = _console()
    if not findings:
        console.print("no findings: no stuck lifecycle, drift or orphan")
        return
    from rich.table import Table

    table = Table(expand=True)
    for column in ("severity", "rule", "entity", "age", "summary"):
        table.add_column(column, overflow="fold")
    for f in findings:
        style = "bold red" if f.get("severity") == "critical" else "yellow"
        table.add_row(
            f.get("severity", ""),
            f.get("rule", ""),
            f"{f.get('entity_kind')} {f.get('entity_id')}",
            f"{f.get('age_s', 0) / 60:.0f} min",
            f.get("summary", ""),
            style=style,
        )
    console.print(table)


def print_latency(phases: Sequence[dict[str, Any]]) -> None:
    """Per-phase durations by provider, side by side."""
    from rich.table import Table

    table = Table()
    for column in ("phase", "provider", "count", "incomplete", "p50 s", "p95 s", "max s"):
        table.add_column(column, justify="right" if column not in ("phase", "provider") else "left")

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.1f}"

    for p in phases:
        table.add_row(
            p["phase"],
            p["provider"],
            str(p["count"]),
            str(p.get("incomplete", 0)),
            fmt(p.get("p50_s")),
            fmt(p.get("p95_s")),
            fmt(p.get("max_s")),
        )
    _console().print(table)


_CSS: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
.verdict { padding: .8rem 1rem; border-radius: 6px; background: #fde8e8;
           border: 1px solid #e0a0a0; }
.verdict.none { background: #e8f7ea; border-color: #9fd3a8; }
table { border-collapse: collapse; width: 100%; margin-top: 1rem; }
td, th { border-bottom: 1px solid #ddd; padding: .25rem .5rem; text-align: left;
         vertical-align: top; }
tr.level-error td, tr.level-critical td { color: #a40000; }
tr.level-warning td { color: #8a5a00; }
tr.first-failure td { background: #ffd7d7; font-weight: bold; }
tr.symptom td { background: #fff3f3; }
code { font-size: 12px; }
"""
_HEAD: Final = (
    "<tr>"
    + "".join(
        f"<th>{name}</th>"
        for name in ("time (UTC)", "layer", "service", "level", "message", "identifiers")
    )
    + "</tr>"
)


def _row(event: dict[str, Any]) -> str:
    classes = [f"level-{event.get('level', 'info')}"]
    if event.get("first_failure"):
        classes.append("first-failure")
    elif event.get("symptom"):
        classes.append("symptom")
    ids = " ".join(f"{k}={html.escape(str(event[k]))}" for k in _IDS if k in event)
    cells = [
        event["ts"],
        event["layer"],
        event.get("service", ""),
        event.get("level", ""),
        event.get("message", ""),
    ]
    shown = "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
    return f"<tr class='{' '.join(classes)}'>{shown}<td><code>{ids}</code></td></tr>"


# Script content is raw text: entities are not decoded in it, and the first "</script" ends
# it whatever the JSON around it says (HTML Living Standard, "script data state"). JSON's own
# \uXXXX escapes keep "<", ">" and "&" out of the text while JSON.parse still reads the same
# strings. U+2028/U+2029 are escaped too: they are valid in JSON but end a line in JavaScript
# before ES2019, so the payload stays safe to paste into a script as a literal.
_SCRIPT_ESCAPES: Final = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def _script_json(data: Any) -> str:
    """``data`` as JSON that can sit inside a ``<script>`` element unchanged.

    Args:
        data: anything ``orjson`` serialises (other values are written as ``str()``).

    Returns:
        JSON text without ``<``, ``>``, ``&``, U+2028 or U+2029: those characters only occur
        inside JSON strings, where they are written as ``\\uXXXX`` escapes.
    """
    return orjson.dumps(data, default=str).decode().translate(_SCRIPT_ESCAPES)


def html_page(data: dict[str, Any]) -> str:
    """A self-contained page (no external assets) showing one timeline.

    Args:
        data: a timeline as ``incident.timeline_for`` returns it.

    Returns:
        The HTML document: the verdict and a table of the events, and the whole timeline as
        JSON in ``<script type="application/json" id="timeline-data">`` for tools that read
        the page (``JSON.parse`` of the element's text gives ``data`` back).
    """
    verdict = data["verdict"]
    rows = "".join(_row(event) for event in data["events"])
    payload = _script_json(data)
    seed = html.escape(", ".join(f"{k}={v}" for k, v in data["seed"].items()))
    banner = "verdict none" if verdict["owner_layer"] == "none" else "verdict"
    return (
        f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>timeline {seed}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>Timeline for {seed}</h1>\n<div class='{banner}'><strong>Owner layer: "
        f"{html.escape(verdict['owner_layer'])}</strong> (confidence {verdict['confidence']})"
        f"<br>{html.escape(verdict.get('reason', ''))}</div>\n"
        f"<table><thead>{_HEAD}</thead><tbody>{rows}</tbody></table>\n"
        f"<script type='application/json' id='timeline-data'>{payload}</script>\n"
        "</body></html>\n"
    )
