"""Showing answers to people: tables in a terminal, a self-contained HTML page."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson

from agent_logging.schema import rfc3339_ns

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

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 when the reader goes away (``timeline | head``); the CLI ends
            # quietly with 0 instead (correlator.cli.main), so the pipe is handed back to it.
            self.quiet = True
            raise BrokenPipeError

    # Wide enough to read a timeline when piped; a real terminal's width wins.
    width = shutil.get_terminal_size((160, 40)).columns
    return _Console(highlight=False, width=max(width, 120))


def print_timeline(data: dict[str, Any]) -> None:
    """The timeline as a table, verdict first, with each new day, gap and reimage marked.

    The rows are laid out here (columns fitted to the terminal, long cells folded at word
    boundaries) and written at once, styled by rich's ``Style``: rich's ``Table`` measured
    and wrapped every cell, 13.8 s for a busy node's 10,000 events. Evidence is shown as
    text, never read as markup, and control characters in it are shown escaped (``\\x1b``)
    rather than sent to the terminal.
    """
    from rich.markup import escape

    console = _console()
    verdict = data["verdict"]
    console.print(
        f"[bold]verdict:[/bold] owner layer [bold magenta]{escape(str(verdict['owner_layer']))}[/] "
        f"(confidence {verdict['confidence']}) — {escape(_visible(verdict.get('reason', '')))}"
    )
    shown_ids = ", ".join(f"{k}={','.join(v)}" for k, v in data["ids"].items())
    console.print("identifiers: " + escape(_visible(shown_ids)))
    if data["clock_offsets"]:
        offsets = ", ".join(
            f"{k} {v['offset_s']:+.3f}s ({v['pairs']} pairs)"
            for k, v in data["clock_offsets"].items()
        )
        console.print(f"clock offsets vs ingress: {escape(_visible(offsets))}")
    events = data["events"]
    if any("corrected_ts_ns" in event for event in events):
        console.print(
            "times ending in * are corrected by their source's offset (rows in that order)"
        )
    # The seed is in every row it could be in: said once, above, not on each row.
    seed = next(iter(data.get("seed", {}).items()), None)
    columns = _Columns.fit(events, console.width)
    paint = _Painter(console)
    lines = [paint(columns.line(_HEADINGS), "bold"), columns.rule()]
    reimages = {r["first_seen_new_ns"]: r for r in data.get("reimages", [])}
    gaps = {g["to_ns"]: g for g in data.get("gaps", [])}
    day = ""
    for event in events:
        when = event.get("corrected_ts_ns", event["ts_ns"])
        # Each marker once, before the first event at its time (several events may share it).
        gap = gaps.pop(when, None)
        if gap is not None:
            lines.append(paint(f"… gap of {gap['seconds']} s …", "dim"))
        stamp = event["ts"]
        if "corrected_ts_ns" in event:
            stamp = rfc3339_ns(event["corrected_ts_ns"])[:-1] + "*"
        if stamp[:10] != day:
            day = stamp[:10]
            lines.append(paint(f"── {day} ──", "bold"))
        r = reimages.pop(when, None)
        if r is not None:
            change = f"reimage: {r['node_id']} {r['from_instance']} → {r['to_instance']}"
            lines.append(paint(_visible(change), "bold cyan"))
        first = event.get("first_failure")
        marker = "⟶ FIRST FAILURE " if first else ("symptom: " if event.get("symptom") else "")
        cells = (
            stamp[11:],
            event["layer"],
            event.get("service", ""),
            event.get("level", ""),
            marker + event.get("message", ""),
            " ".join(
                f"{_SHORT[k]}={event[k]}" for k in _IDS if k in event and (k, event[k]) != seed
            ),
        )
        style = "reverse bold red" if first else _LEVEL_STYLE.get(event.get("level", ""), "")
        lines.extend(paint(line, style) for line in columns.row(cells))
    console.file.write("\n".join(lines) + "\n")
    console.file.flush()
    if data.get("truncated"):
        console.print(
            "[yellow]truncated: more evidence matched than shown "
            "(raise --limit or narrow --from/--to)[/]"
        )


_HEADINGS: Final = ("time (UTC)", "layer", "service", "level", "message", "ids")
_SEPARATOR: Final = "  "
#: Control characters (C0, DEL, C1) as the escapes that name them: evidence must not move the
#: cursor, clear the screen or retitle the operator's terminal.
_VISIBLE: Final = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def _visible(text: str) -> str:
    return text.translate(_VISIBLE)


class _Columns:
    """The widths of a timeline's columns, and rows laid out in them."""

    def __init__(self, widths: Sequence[int]) -> None:
        self.widths = tuple(widths)

    @classmethod
    def fit(cls, events: Sequence[dict[str, Any]], total: int) -> _Columns:
        """Widths for ``events`` on a terminal ``total`` cells wide: the short columns as wide
        as their longest value (up to a cap), the message and the identifiers sharing the
        rest (the message a little more)."""

        def widest(field: str, cap: int) -> int:
            longest = max((len(str(e.get(field, ""))) for e in events), default=0)
            return max(len(field), min(longest, cap))

        fixed = [len("HH:MM:SS.123456789Z"), widest("layer", 10), widest("service", 32)]
        fixed.append(widest("level", 8))
        rest = total - sum(fixed) - len(_SEPARATOR) * 5
        message = max(24, rest * 11 // 20)
        return cls([*fixed, message, max(16, rest - message)])

    def row(self, cells: Sequence[str]) -> list[str]:
        """One row's lines: each cell folded to its column's width."""
        folded = [
            _fold(_visible(cell), width) for cell, width in zip(cells, self.widths, strict=True)
        ]
        height = max(map(len, folded))
        if height == 1:
            return [self.line(cell[0] for cell in folded)]
        return [
            self.line(cell[i] if i < len(cell) else "" for cell in folded) for i in range(height)
        ]

    def line(self, cells: Iterable[str]) -> str:
        """Cells side by side, each padded to its column's width."""
        padded = (_pad(cell, width) for cell, width in zip(cells, self.widths, strict=True))
        return _SEPARATOR.join(padded).rstrip()

    def rule(self) -> str:
        return _SEPARATOR.join("─" * width for width in self.widths)


def _pad(text: str, width: int) -> str:
    if text.isascii():
        return text.ljust(width)
    from rich.cells import set_cell_size

    return set_cell_size(text, max(width, _cell_len(text)))


def _fold(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken between words where it can be."""
    plain = text.isascii()
    size = len if plain else _cell_len
    if size(text) <= width:
        return [text]
    lines: list[str] = []
    line, used = "", 0
    for word in text.split(" "):
        length = size(word)
        while length > width:  # longer than a line: cut, after what is already on it
            if line:
                lines.append(line)
                line, used = "", 0
            head = word[:width] if plain else _head(word, width)
            lines.append(head)
            word = word[len(head) :]
            length = size(word)
        if not line:
            line, used = word, length
        elif used + 1 + length <= width:
            line, used = f"{line} {word}", used + 1 + length
        else:
            lines.append(line)
            line, used = word, length
    lines.append(line)
    return lines


def _head(word: str, width: int) -> str:
    """The start of ``word`` that fits ``width`` cells (at least one character)."""
    from rich.cells import chop_cells

    return chop_cells(word, width)[0] or word[0]


def _cell_len(text: str) -> int:
    """How many terminal cells ``text`` takes (wide characters take two)."""
    from rich.cells import cell_len as cells

    return cells(text)


class _Painter:
    """Lines in a style, as ANSI escapes for the console's colours (none off a terminal)."""

    def __init__(self, console: Any) -> None:
        from rich.console import COLOR_SYSTEMS

        self._system = COLOR_SYSTEMS.get(console.color_system) if console.color_system else None
        self._styles: dict[str, Any] = {}

    def __call__(self, line: str, style: str) -> str:
        if self._system is None or not style:
            return line
        parsed = self._styles.get(style)
        if parsed is None:
            from rich.style import Style

            parsed = self._styles[style] = Style.parse(style)
        return str(parsed.render(line, color_system=self._system))


def _lifecycle_cut() -> str:
    """What findings and latency say when they read only the oldest lifecycle events."""
    from correlator.store import LIFECYCLE_LIMIT

    return (
        "[yellow]truncated: the store holds more lifecycle events than are read "
        f"(the oldest {LIFECYCLE_LIMIT:,}); what the newest show is missing[/]"
    )


def print_findings(findings: Sequence[dict[str, Any]], *, truncated: bool = False) -> None:
    """Findings, most severe first; ``truncated``: not every lifecycle event was read."""
    console = _console()
    if truncated:
        console.print(_lifecycle_cut())
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
            *_texts(
                f.get("severity", ""),
                f.get("rule", ""),
                f"{f.get('entity_kind')} {f.get('entity_id')}",
                f"{f.get('age_s', 0) / 60:.0f} min",
                f.get("summary", ""),
            ),
            style=style,
        )
    console.print(table)


def print_latency(phases: Sequence[dict[str, Any]], *, truncated: bool = False) -> None:
    """Per-phase durations by provider, side by side; ``truncated`` as in print_findings."""
    from rich.table import Table

    if truncated:
        _console().print(_lifecycle_cut())

    table = Table()
    for column in ("phase", "provider", "count", "incomplete", "p50 s", "p95 s", "max s"):
        table.add_column(column, justify="right" if column not in ("phase", "provider") else "left")

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.1f}"

    for p in phases:
        table.add_row(
            *_texts(
                p["phase"],
                p["provider"],
                str(p["count"]),
                str(p.get("incomplete", 0)),
                fmt(p.get("p50_s")),
                fmt(p.get("p95_s")),
                fmt(p.get("max_s")),
            )
        )
    _console().print(table)


def print_rejects(rows: Sequence[dict[str, Any]]) -> None:
    """The refused lines, newest first: where each was (file and line) and why."""
    console = _console()
    if not rows:
        console.print("no rejected lines: every line ingested was read")
        return
    from rich.table import Table

    table = Table(expand=True)
    for column in ("source", "where", "reason", "the line (first 200 characters)"):
        table.add_column(column, overflow="fold")
    for row in rows:
        where = f"{row['origin']}:{row['line_no']}" if row.get("line_no") else str(row["origin"])
        table.add_row(*_texts(row["source"], where, row["reason"], row.get("excerpt") or ""))
    console.print(table)


def print_evaluation(report: Any) -> None:
    """``correlator eval``'s report: a row per case (right or wrong, and why), the accuracy,
    and the confusion matrix of owner layers (expected by row, named by column)."""
    from rich.table import Table

    console = _console()
    table = Table(expand=True)
    for column in ("case", "expected", "got", "conf.", "", "why / verdict", "s"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        mark = "[green]right[/]" if r.right else "[bold red]WRONG[/]"
        said = r.reason if r.right else f"{r.why} — {r.reason}"
        row = _texts(r.case, r.expected, r.got, f"{r.confidence:.2f}", "", said, f"{r.seconds:.1f}")
        row[4] = mark
        table.add_row(*row)
    console.print(table)
    right = sum(r.right for r in report.results)
    console.print(
        f"accuracy {report.accuracy:.1%} ({right} of {len(report.results)} right); "
        f"false alarms on healthy cases: {len(report.false_alarms)}"
    )
    matrix = report.confusion()
    columns = sorted({got for row in matrix.values() for got in row})
    confusion = Table(title="expected (rows) against named (columns)")
    confusion.add_column("")
    for column in columns:
        confusion.add_column(column, justify="right")
    for expected in sorted(matrix):
        counts = matrix[expected]
        confusion.add_row(*_texts(expected, *(str(counts.get(c, "")) for c in columns)))
    console.print(confusion)


def _texts(*cells: Any) -> list[Any]:
    """Cells as rich ``Text``: what evidence says (a summary, a provider's name) is shown as
    written, not read as markup, its control characters escaped."""
    from rich.text import Text

    return [Text(_visible(str(cell))) for cell in cells]


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
