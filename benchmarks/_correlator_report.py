"""The report of ``benchmarks.correlator``: its figures as Markdown tables, and its section of
``benchmarks/RESULTS.md`` (``--record``)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Final

from benchmarks._common import REPO_ROOT

__all__ = ["SECTION", "kinds_table", "load", "record", "section", "table"]

RESULTS: Final = REPO_ROOT / "benchmarks" / "RESULTS.md"
SECTION: Final = "## correlator: ingest and timeline at 10^5-10^7 events"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The figures as a Markdown table."""
    workers = rows[0]["workers"] if rows else 2
    clustered = bool(rows and rows[0]["cluster"])
    lines = [
        "| events | parse only ev/s | ingest 1 process ev/s "
        f"| ingest_paths, workers={workers}, ev/s | ingest s | DB MiB "
        "| DuckDB read_json alone ev/s | ingest / DuckDB "
        + ("| cluster s | DB MiB after " if clustered else "")
        + "| first query ms | cardinalities s | timeline p50 ms | p95 ms | max ms | CPU stolen |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|" if clustered else ""),
    ]
    for row in rows:
        t = row["timeline"]
        c = row["cluster"]
        lines.append(
            f"| {row['events']:,} | {row['parse']['events_per_s']:,.0f} "
            f"| {row['ingest_one']['events_per_s']:,.0f} "
            f"| {row['ingest']['events_per_s']:,.0f} | {row['ingest']['seconds']:.1f} "
            f"| {row['ingest']['db_mib']:,.0f} "
            + _floor_cells(row)
            + (f"| {c['seconds']:.0f} | {c['db_mib']:,.0f} " if c else "")
            + f"| {t['first_s'] * 1000:,.0f} "
            f"| {t['cardinalities_s']:.1f} "
            f"| {t['p50_s'] * 1000:,.0f} | {t['p95_s'] * 1000:,.0f} | {t['max_s'] * 1000:,.0f} "
            f"| {_share(t.get('steal'))} |"
        )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    """The host's steal during the timelines ("-" where unknown: another OS, an older run)."""
    return "-" if value is None else f"{value:.0%}"


def _floor_cells(row: dict[str, Any]) -> str:
    """DuckDB's own reader and the ingest's share of it ("-" for a store kept from a run
    before this figure existed)."""
    floor = row.get("duckdb_floor")
    if not floor:
        return "| - | - "
    ratio = row["ingest"]["events_per_s"] / floor["events_per_s"]
    return f"| {floor['events_per_s']:,.0f} | {ratio:.2f} "


def kinds_table(rows: Sequence[dict[str, Any]]) -> str:
    """Timeline latency by seed kind, with how many events the answers held."""
    lines = [
        "| events | seed kind | queries | p50 ms | p95 ms | max ms | events in answer p50 / max |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for kind, k in row["timeline"]["by_kind"].items():
            lines.append(
                f"| {row['events']:,} | {kind} | {k['queries']} | {k['p50_s'] * 1000:,.0f} "
                f"| {k['p95_s'] * 1000:,.0f} | {k['max_s'] * 1000:,.0f} "
                f"| {k['events_p50']:,} / {k['events_max']:,} |"
            )
    return "\n".join(lines)


def record(section: str) -> None:
    """Replace (or append) the ``## correlator`` section of RESULTS.md, nothing else: the
    file is read right before it is written, other sections are kept as they are."""
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == SECTION), None)
    if start is None:
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n", "utf-8")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    head, tail = "".join(lines[:start]), "".join(lines[end:])
    RESULTS.write_text(head + section.rstrip("\n") + "\n" + ("\n" + tail if tail else ""), "utf-8")


def load() -> str:
    """The load averages, for the report."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def section(command: str, note: str, rows: Sequence[dict[str, Any]], total_s: float) -> str:
    """The section ``--record`` writes: the command, the machine, both tables."""
    return "\n".join(
        [
            SECTION,
            "",
            f"`{command}` — {time.strftime('%Y-%m-%d')}, {note}; load average at the end "
            f"{load()}; {total_s:.0f} s in all.",
            "",
            table(rows),
            "",
            kinds_table(rows),
            "",
        ]
    )
