"""The timeline pulled from a real Loki at fleet scale, against ingesting the window first.

A real Loki (``../shared/loki/start-loki``: v3.7, stock limits) is given a day of fleet
evidence ending now (``benchmarks._day_fleet``: about 10^6 lines by default from 500 nodes and
17,600 allocations through the five layers, the busiest nodes running about 175 allocations a
day, several at once), as ``agent_logging`` ships records: stream labels ``service_name``,
``layer`` and ``env`` (the run's own), the identifiers as structured metadata. It is pushed
oldest first (each stream in time order), at the tenant's rate limit (4 MB/s, 6 MB burst: a
429 waits for the bucket to refill the push), then flushed (``POST /flush``: a query older
than ``query_ingesters_within``, 3 h, does not ask the ingester, where day-old entries pushed
a moment ago still are) and counted until every line is visible.

Then, for each incident (``--seeds``: a failing allocation whose own entries the generator
knows), in the window of ``--window`` (6 h) around its failure, whole processes as an
operator runs them, each into a fresh database:

- pull: ``python -m correlator --db FRESH timeline --id allocation_id=A --loki-url URL
  --loki-selector '{env="RUN"}' --from T0 --to T1 --json``: the time to its verdict (the
  process's wall time), the queries it sent and the entries it pulled (its ``loki`` key),
  against the incident's own entries;
- ingest then ask, today's path: ``python -m correlator --db FRESH ingest --source loki
  --query '{env="RUN"}' --from T0 --to T1 --loki-url URL`` (every line of the window), then
  ``python -m correlator --db FRESH timeline --id allocation_id=A --from T0 --to T1 --json``.

The two take turns going first, so that what the first leaves warm (Loki's caches, the page
cache) favours neither. Both must name the owner the generator failed the allocation with and
show the incident's own entries; any difference is reported. Then the pull's queries are asked
again for the statistics of Loki's answers (:func:`scanned`): what each cost Loki to read.

Goals (issue 25): the pull's p95 under 5 s, entries pulled at most twice the incident's own,
and the pull at least 20x faster than ingest-then-ask (the median of the seeds' ratios).

Run: ``python -m benchmarks.loki_timeline [--lines 1e6] [--seeds 20] [--window 6h] [--seed 1]
[--keep DIR] [--loki-url URL] [--tenant T] [--json]``. ``--keep DIR`` keeps the fleet's files,
Loki's data (``DIR/loki``) and what was pushed (``DIR/fleet.json``, ``DIR/pushed.json``); a
later run with the same ``--keep`` starts a Loki on that data and measures again without
generating or pushing.
``--loki-url`` uses a running Loki instead of starting one (with ``--keep DIR``: the one that
holds DIR's fleet). The default run takes about 20 minutes on 2 cores, 2 of them generating
and pushing, and about 0.5 GB in ``$TMPDIR`` (or DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import httpx
import orjson

from agent_logging.loki import LokiClient
from agent_logging.schema import rfc3339_ns
from benchmarks import _day_fleet
from benchmarks._common import REPO_ROOT, cpu_ticks, machine_note, steal_share
from benchmarks._day_fleet import DayFleet, Incident

_NS: Final = 1_000_000_000
START_LOKI: Final = REPO_ROOT.parent / "shared" / "loki" / "start-loki"
#: Lines per push, by their bytes: Loki counts a push's lines and structured metadata against
#: the tenant's 6 MB burst, and refuses outright a push larger than it.
PUSH_BYTES: Final = 1 << 20
#: How long the pushed lines may take to become countable.
VISIBLE_TIMEOUT_S: Final = 300.0
#: What the issue asks of the pull.
GOAL_P95_S: Final = 5.0
GOAL_PULLED_PER_OWN: Final = 2.0
GOAL_SPEEDUP: Final = 20.0
#: The correlator's own settings would change what the child processes do (a Loki URL in
#: the environment makes the ingest-then-ask timeline pull as well).
_CHILD_ENV: Final = {k: v for k, v in os.environ.items() if not k.startswith("CORRELATOR_")}


class _Line(NamedTuple):
    """A record as ``LokiClient.push_records`` takes it (a spooled record's two fields)."""

    ts_ns: int
    payload: bytes


# -- the Loki and what it holds --------------------------------------------------------------


@contextlib.contextmanager
def started_loki(data: Path) -> Iterator[str]:
    """A Loki of ``../shared`` on ``data`` (its chunks kept there), stopped on leaving."""
    done = subprocess.run(
        [str(START_LOKI), "", str(data)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"{START_LOKI} failed: {done.stderr[-2000:]}")
    said = dict(line.split("=", 1) for line in done.stdout.split())
    pid = int(said["LOKI_PID"])
    try:
        yield said["LOKI_URL"]
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        pause = threading.Event()
        while _alive(pid) and time.monotonic() < deadline:
            pause.wait(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def push(client: LokiClient, fleet: DayFleet) -> dict[str, float]:
    """Push every line of the fleet, oldest first, each push again after a 429 once the
    tenant's bucket holds it again.

    Returns:
        ``lines``, ``seconds``, ``lines_per_s`` and ``refusals`` (429s waited out).

    Raises:
        RuntimeError: Loki refused lines for another reason than its rate.
    """
    started = time.perf_counter()
    refusals = 0
    batch: list[_Line] = []
    size = lines = 0
    told = 0
    pause = threading.Event()
    for ts_ns, payload in _day_fleet.records(fleet.files):
        batch.append(_Line(ts_ns, payload))
        size += len(payload)
        if size < PUSH_BYTES:
            continue
        refusals += _send(client, batch, pause)
        lines += len(batch)
        batch, size = [], 0
        if lines - told >= 100_000:
            told = lines
            _say(f"pushed {lines:,} lines")
    refusals += _send(client, batch, pause)
    lines += len(batch)
    seconds = time.perf_counter() - started
    return {
        "lines": lines,
        "seconds": seconds,
        "lines_per_s": lines / seconds,
        "refusals": refusals,
    }


def _send(client: LokiClient, batch: list[_Line], pause: threading.Event) -> int:
    """Push one batch until Loki takes it; the 429s it answered before."""
    refusals = 0
    while True:
        result = client.push_records(batch, node_id_label=False, default_labels={})
        if result.outcome == "ok":
            return refusals
        if result.outcome != "retry":
            raise RuntimeError(f"Loki refused the fleet's lines: {result.reason}")
        refusals += result.status == 429
        pause.wait(result.refill_s or result.retry_after_s or 1.0)


def flush(url: str) -> None:
    """Ask the ingester to write every chunk it holds to the store (``POST /flush``): a
    query older than ``query_ingesters_within`` reads only the store. A Loki behind a
    gateway may not offer it; then the wait for visibility is all there is."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{url.rstrip('/')}/flush", timeout=60)


def visible(url: str, tenant: str | None, fleet: DayFleet) -> int:
    """How many of the fleet's lines Loki counts (one instant metric query over the day)."""
    hours = (fleet.end_ns - fleet.start_ns) // (3600 * _NS) + 1
    answer = httpx.get(
        f"{url.rstrip('/')}/loki/api/v1/query",
        params={
            "query": f'sum(count_over_time({{env="{fleet.env}"}}[{hours}h]))',
            "time": str(fleet.end_ns + _NS),
        },
        headers={"X-Scope-OrgID": tenant} if tenant else {},
        timeout=120,
    )
    answer.raise_for_status()
    result = answer.json()["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def wait_visible(url: str, tenant: str | None, fleet: DayFleet) -> float:
    """Wait until Loki counts every line; the seconds waited.

    Raises:
        RuntimeError: not within :data:`VISIBLE_TIMEOUT_S`.
    """
    started = time.perf_counter()
    pause = threading.Event()
    while (found := visible(url, tenant, fleet)) < fleet.lines:
        if time.perf_counter() - started > VISIBLE_TIMEOUT_S:
            raise RuntimeError(f"Loki counts {found:,} of the {fleet.lines:,} lines pushed")
        pause.wait(2.0)
    return time.perf_counter() - started


def fleet_in(
    args: argparse.Namespace, url: str, home: Path
) -> tuple[DayFleet, dict[str, float] | None]:
    """The fleet Loki holds and how it was pushed: the one ``home`` records (``fleet.json``,
    ``pushed.json``), or a new one generated into ``home/fleet`` and pushed."""
    manifest, pushed_file = home / "fleet.json", home / "pushed.json"
    if manifest.exists():
        fleet = _day_fleet.load(manifest)
        _say(f"reusing {fleet.lines:,} lines of env {fleet.env} ({manifest})")
        wait_visible(url, args.tenant, fleet)
        return fleet, orjson.loads(pushed_file.read_bytes()) if pushed_file.exists() else None
    directory = home / "fleet"
    directory.mkdir(exist_ok=True)
    started = time.perf_counter()
    fleet = _day_fleet.generate(
        directory,
        int(args.lines),
        args.seed,
        env=f"bench-{uuid.uuid4().hex[:8]}",
        # A minute in the past: Loki takes entries up to 10 min ahead of its clock only.
        end_ns=time.time_ns() - 60 * _NS,
        incidents=args.seeds,
        window_ns=int(args.window_h * 3600 * _NS),
    )
    _say(
        f"generated {fleet.lines:,} lines, {len(fleet.incidents)} incidents in "
        f"{time.perf_counter() - started:.0f} s; pushing"
    )
    with LokiClient(url, tenant=args.tenant, timeout_s=60) as client:
        pushed = push(client, fleet)
    flush(url)
    pushed["visible_after_s"] = wait_visible(url, args.tenant, fleet)
    _day_fleet.save(fleet, manifest)
    pushed_file.write_bytes(orjson.dumps(pushed))
    return fleet, pushed


# -- the two paths ---------------------------------------------------------------------------


def _correlator(db: Path, *args: str) -> tuple[float, str, str]:
    """Run ``python -m correlator --db DB ARGS``: its wall time, stdout and stderr.

    Raises:
        RuntimeError: it failed.
    """
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "correlator", "--db", str(db), *args],
        cwd=REPO_ROOT,
        env=_CHILD_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"correlator {' '.join(args[:3])} failed: {done.stderr[-2000:]}")
    return took, done.stdout, done.stderr


def measure(
    incident: Incident, number: int, fleet: DayFleet, url: str, tenant: str | None, work: Path
) -> dict[str, Any]:
    """Both paths for one incident, into fresh databases, taking turns going first."""
    selector = f'{{env="{fleet.env}"}}'
    window = ["--from", rfc3339_ns(incident.from_ns), "--to", rfc3339_ns(incident.to_ns)]
    loki = ["--loki-url", url, *(["--tenant", tenant] if tenant else [])]
    seed = f"allocation_id={incident.allocation_id}"
    row: dict[str, Any] = {
        "seed": seed,
        "node": incident.node_id,
        "busy": incident.busy,
        "owner": incident.owner,
        "own": incident.own,
        "window_lines": incident.window_lines,
        "pull_first": number % 2 == 0,
    }

    def pulled() -> None:
        took, out, _ = _correlator(
            work / f"pull-{number}.duckdb",
            "timeline",
            "--id",
            seed,
            *loki,
            "--loki-selector",
            selector,
            *window,
            "--json",
        )
        data = orjson.loads(out)
        row.update(
            pull_s=took,
            queries=data["loki"]["requests"],
            entries=data["loki"]["entries"],
            new=data["loki"]["new"],
            hops_s=[hop["took_s"] for hop in data["loki"]["hops"]],
            asked=[query for hop in data["loki"]["hops"] for query in hop["queries"]],
            stopped=data["loki"]["stopped"],
            pull_events=len(data["events"]),
            pull_owner=data["verdict"]["owner_layer"],
        )

    def ingested_then_asked() -> None:
        db = work / f"ingest-{number}.duckdb"
        ingest_s, _, _ = _correlator(
            db, "ingest", "--source", "loki", "--query", selector, *window, *loki, "--quiet"
        )
        ask_s, out, _ = _correlator(db, "timeline", "--id", seed, *window, "--json")
        data = orjson.loads(out)
        row.update(
            ingest_s=ingest_s,
            ask_s=ask_s,
            base_s=ingest_s + ask_s,
            base_events=len(data["events"]),
            base_owner=data["verdict"]["owner_layer"],
        )

    for run in (
        (pulled, ingested_then_asked) if row["pull_first"] else (ingested_then_asked, pulled)
    ):
        run()
    for db in work.glob(f"*-{number}.duckdb*"):
        db.unlink()
    row.update(scanned(url, tenant, row.pop("asked"), incident.from_ns, incident.to_ns))
    row["speedup"] = row["base_s"] / row["pull_s"]
    row["pulled_per_own"] = row["entries"] / max(1, incident.own)
    row["same"] = (
        row["pull_owner"] == row["base_owner"] == incident.owner
        and row["pull_events"] == row["base_events"] == incident.own
    )
    return row


def scanned(
    url: str, tenant: str | None, queries: Sequence[str], start_ns: int, end_ns: int
) -> dict[str, float]:
    """What the pull's queries cost Loki, asked again (after both paths) over the window
    for the statistics of Loki's answer: lines and bytes it read, and its execution time.

    Every hop of these pulls asks over the operator's window (the incident's, 6 h either side
    of the seed's evidence, holds it), so the window is each query's own.
    """
    lines = size = exec_s = 0.0
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    for query in queries:
        answer = httpx.get(
            f"{url.rstrip('/')}/loki/api/v1/query_range",
            params={"query": query, "start": str(start_ns), "end": str(end_ns), "limit": "5000"},
            headers=headers,
            timeout=120,
        )
        answer.raise_for_status()
        stats = answer.json()["data"]["stats"]["summary"]
        lines += stats["totalLinesProcessed"]
        size += stats["totalBytesProcessed"]
        exec_s += stats["execTime"]
    return {"scanned_lines": lines, "scanned_bytes": size, "loki_exec_s": exec_s}


# -- the report ------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures the goals are read against."""
    pull = [r["pull_s"] for r in rows]
    base = [r["base_s"] for r in rows]
    ratios = [r["pulled_per_own"] for r in rows]
    speedups = [r["speedup"] for r in rows]
    shown: dict[str, Any] = {
        "seeds": len(rows),
        "pull_p50_s": _percentile(pull, 0.5),
        "pull_p95_s": _percentile(pull, 0.95),
        "pull_max_s": max(pull),
        "base_p50_s": _percentile(base, 0.5),
        "base_p95_s": _percentile(base, 0.95),
        "ingest_p50_s": _percentile([r["ingest_s"] for r in rows], 0.5),
        "ask_p50_s": _percentile([r["ask_s"] for r in rows], 0.5),
        "queries_median": statistics.median(r["queries"] for r in rows),
        "queries_max": max(r["queries"] for r in rows),
        "pulled_per_own_median": statistics.median(ratios),
        "pulled_per_own_max": max(ratios),
        "speedup_median": statistics.median(speedups),
        "speedup_min": min(speedups),
        "speedup_p50_over_p50": _percentile(base, 0.5) / _percentile(pull, 0.5),
        "hops_median_s": statistics.median(sum(r["hops_s"]) for r in rows),
        "outside_hops_median_s": statistics.median(r["pull_s"] - sum(r["hops_s"]) for r in rows),
        "loki_exec_median_s": statistics.median(r["loki_exec_s"] for r in rows),
        "scanned_lines_per_query": statistics.median(
            r["scanned_lines"] / r["queries"] for r in rows
        ),
        "scanned_mb_per_query": statistics.median(
            r["scanned_bytes"] / r["queries"] / 1e6 for r in rows
        ),
        "different": [r["seed"] for r in rows if not r["same"]],
    }
    shown["goals"] = {
        "p95 under 5 s": shown["pull_p95_s"] < GOAL_P95_S,
        "pulled at most 2x own": shown["pulled_per_own_max"] <= GOAL_PULLED_PER_OWN,
        "20x faster than ingest-then-ask": shown["speedup_median"] >= GOAL_SPEEDUP,
    }
    return shown


def report(fleet: DayFleet, pushed: dict[str, float] | None, rows: list[dict[str, Any]]) -> str:
    """The figures as Markdown: the fleet, a row per seed, the summary and the goals."""
    total = summary(rows)
    layers = ", ".join(f"{layer} {n:,}" for layer, n in sorted(fleet.layers.items()))
    window_h = (fleet.incidents[0].to_ns - fleet.incidents[0].from_ns) / 3600 / _NS
    lines = [
        f"Fleet: {fleet.lines:,} lines over 24 h ({layers}), "
        f"{fleet.nodes} nodes, {fleet.allocations:,} allocations, {len(fleet.busy_nodes)} busy "
        f"nodes with {fleet.allocations_per_busy_node:.0f} allocations each; env {fleet.env}.",
    ]
    if pushed:
        lines.append(
            f"Pushed in {pushed['seconds']:.0f} s ({pushed['lines_per_s']:,.0f} lines/s, "
            f"{pushed['refusals']:.0f} 429s waited out), all visible "
            f"{pushed['visible_after_s']:.0f} s later."
        )
    lines += [
        "",
        "| seed | node | owner | window lines | own | pulled | pulled/own | queries "
        "| Loki read (lines) | hops (s) | pull s | ingest s | ask s | ingest+ask s | speedup "
        "| same |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        hops = " ".join(f"{s:.2f}" for s in r["hops_s"])
        same = (
            "yes"
            if r["same"]
            else (
                f"no: owner {r['pull_owner']}/{r['base_owner']}/{r['owner']}, "
                f"events {r['pull_events']}/{r['base_events']}/{r['own']}"
            )
        )
        lines.append(
            f"| {r['seed'].split('=')[1]} | {r['node']}{' (busy)' if r['busy'] else ''} "
            f"| {r['owner']} | {r['window_lines']:,} | {r['own']} | {r['entries']} "
            f"| {r['pulled_per_own']:.2f} | {r['queries']} | {r['scanned_lines']:,.0f} "
            f"| {hops} | {r['pull_s']:.2f} "
            f"| {r['ingest_s']:.1f} | {r['ask_s']:.2f} | {r['base_s']:.1f} | {r['speedup']:.1f} "
            f"| {same} |"
        )
    lines += [
        "",
        "| path | p50 s | p95 s | max s |",
        "|---|---:|---:|---:|",
        f"| pull from Loki (time to verdict) | {total['pull_p50_s']:.2f} | "
        f"{total['pull_p95_s']:.2f} | {total['pull_max_s']:.2f} |",
        f"| ingest the window, then ask | {total['base_p50_s']:.1f} | "
        f"{total['base_p95_s']:.1f} | {max(r['base_s'] for r in rows):.1f} |",
        "",
        f"Queries per timeline: median {total['queries_median']:g}, max {total['queries_max']}. "
        f"Entries pulled / the incident's own: median {total['pulled_per_own_median']:.2f}, "
        f"max {total['pulled_per_own_max']:.2f}. Speedup (ingest+ask / pull, per seed): "
        f"median {total['speedup_median']:.1f}x, min {total['speedup_min']:.1f}x "
        f"(p50 / p50 {total['speedup_p50_over_p50']:.1f}x).",
        f"Of the pull's time (median), {total['hops_median_s']:.2f} s waiting for Loki's "
        f"answers (its own execution: {total['loki_exec_median_s']:.2f} s), "
        f"{total['outside_hops_median_s']:.2f} s the rest of the process (start, store, "
        f"timeline). Each query has Loki read {total['scanned_lines_per_query']:,.0f} lines "
        f"({total['scanned_mb_per_query']:.0f} MB, median): every line of the selector's "
        "streams in the window, whatever the structured-metadata filter keeps.",
        "Both paths name the generator's owner and show the incident's own entries: "
        + (
            "every seed." if not total["different"] else f"not for {', '.join(total['different'])}."
        ),
        "",
        "| goal | target | measured | |",
        "|---|---|---|---|",
        f"| time to verdict p95 | < {GOAL_P95_S:g} s | {total['pull_p95_s']:.2f} s | "
        f"{_met(total['goals']['p95 under 5 s'])} |",
        f"| entries pulled / own | ≤ {GOAL_PULLED_PER_OWN:g}x | "
        f"max {total['pulled_per_own_max']:.2f}x | "
        f"{_met(total['goals']['pulled at most 2x own'])} |",
        f"| faster than ingest-then-ask ({window_h:g} h window) "
        f"| ≥ {GOAL_SPEEDUP:g}x | median {total['speedup_median']:.1f}x | "
        f"{_met(total['goals']['20x faster than ingest-then-ask'])} |",
    ]
    return "\n".join(lines)


def _met(ok: bool) -> str:
    return "met" if ok else "missed"


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=float, default=1e6, help="lines in the day (about)")
    parser.add_argument("--seeds", type=int, default=20, help="incidents to ask for")
    parser.add_argument(
        "--window",
        dest="window_h",
        type=lambda t: float(t.removesuffix("h")),
        default=6.0,
        help="hours around each incident's failure (default 6h)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the fleet's random seed")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the fleet and Loki's data in DIR; reuse them when there",
    )
    parser.add_argument("--loki-url", help="a running Loki to use (default: start one)")
    parser.add_argument("--tenant", help="its X-Scope-OrgID, if multi-tenant")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    shown = " ".join(
        ["python -m benchmarks.loki_timeline", *(argv if argv is not None else sys.argv[1:])]
    )
    note = machine_note()
    with contextlib.ExitStack() as stack:
        home = args.keep or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="loki-timeline-"))
        )
        home.mkdir(parents=True, exist_ok=True)
        url = args.loki_url or stack.enter_context(started_loki(home / "loki"))
        fleet, pushed = fleet_in(args, url, home)
        if not fleet.incidents:
            raise SystemExit("the day holds no incident whose window fits: ask for more --lines")
        load_before = _load()
        ticks = cpu_ticks()
        rows = []
        work = home / "dbs"
        work.mkdir(exist_ok=True)
        for number, incident in enumerate(fleet.incidents[: args.seeds]):
            rows.append(measure(incident, number, fleet, url, args.tenant, work))
            r = rows[-1]
            _say(
                f"{number + 1}/{len(fleet.incidents)} {r['seed']}: pull {r['pull_s']:.2f} s "
                f"({r['queries']} queries, {r['entries']} entries, own {r['own']}), ingest+ask "
                f"{r['base_s']:.1f} s"
            )
        stolen = steal_share(ticks)
    if args.json:
        print(
            json.dumps(
                {
                    "command": shown,
                    "machine": note,
                    "pushed": pushed,
                    "rows": rows,
                    "summary": summary(rows),
                },
                indent=2,
            )
        )
        return 0
    print(report(fleet, pushed, rows))
    print(
        f"\n`{shown}`; {note}; load average {load_before} before the seeds, {_load()} after; "
        + (
            f"{stolen:.0%} of the CPU stolen by the host while they ran."
            if stolen is not None
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
