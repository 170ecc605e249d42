"""The HTTP service under a burst: 200 concurrent timeline requests, before and after, one run.

``correlator serve`` (uvicorn, on 127.0.0.1 only) is started over each store in turn, as an
operator starts it, and sent a burst of ``--requests`` concurrent ``GET /v1/timeline`` (httpx,
one connection per request, as many clients would), while ``/healthz`` is asked every 50 ms
by a process of its own, on a new connection each time, as Kubernetes' probes ask it. Three
services take turns on each store, in the same run:

- **before**: the code of ``--before`` (default :data:`BEFORE_REV`, the last commit whose
  service answered reads on Starlette's shared pool of 40 threads), extracted with
  ``git archive`` into a temporary directory and run from there;
- **after**: the code of this checkout, as it is served;
- **uncached**: the same with ``CORRELATOR_READ_CACHE_MB=0``: no answer kept until the next
  write, no read of the store kept for the next timeline (identical reads in flight still
  share one answer). What each request costs when nothing is kept.

The requests are sent with httpx (``--client httpx``), as a client library sends them, whose
own work on the cores the service shares is most of a small store's burst; ``--client raw``
opens every connection first, then writes every request at once: what the service alone
takes, and the harshest arrival for ``/healthz``, answered on the same event loop.

Workloads, per store:

- ``same``: every request asks the same timeline (what the issue measured);
- ``distinct``: every request is a query of its own, so that no two share an answer. On the
  small store the same seed with 200 different ``limit`` values above its timeline's size
  (the same work 200 times, where nothing is kept; with the store's reads kept, the reads
  of the first serve the others); on the 10^6 store, seeds drawn from the fleet
  (allocation, correlation, workflow and busy-node ids in turn).

Stores: ``small``, the demo incident (the failing allocation's timeline is 14 events), and
``1e6``, a generated fleet (``benchmarks.fleet``) ingested with two parse workers. ``--keep
DIR`` keeps the fleet and its store in ``DIR/n1000000`` (the layout of ``benchmarks.correlator
--keep``, whose stores it reuses) and reuses them on the next run.

Figures per (store, workload, service): latency p50/p95/max of the burst's requests (sent to
answered, body read), requests/s (the burst's size over its wall time), ``/healthz`` latency
p50/p95/max during the burst, the most ``/healthz`` took when asked from the burst's own event
loop (as it was measured until issue 21's fourteenth session: that loop, busy with the burst's
requests and answers, delays it too, by up to 200 ms on the small store), the service's
CPU time per request (``/proc/PID/stat``: the most stable figure on a shared host), and the
share of the burst the service's event loop spent waiting for a core while it could run
(``/proc/PID/task/PID/schedstat``): the host's part in a slow ``/healthz``. Then
the ratios of each service against before. Every request has a timeout (``--timeout-s``) and
the burst a deadline; a request that fails is counted, not retried. ``--rounds N`` runs the
services N times, in turns (each first in turn), and pools the figures. The load generator
shares the machine's cores with the service. Every service is started afresh for each burst:
nothing is kept from one burst to the next.

Run: ``python -m benchmarks.api [--sizes small,1e6] [--requests 200] [--rounds 1]
[--before REV] [--read-threads N] [--client httpx|raw] [--keep DIR] [--json] [--record]``;
``--record`` rewrites the section of ``benchmarks/RESULTS.md`` titled :data:`SECTION`. A
default run takes about 7 minutes on 2 cores once the 10^6 store exists (generating and
ingesting it, about 2 more).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import io
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from benchmarks._common import REPO_ROOT, machine_note

__all__ = ["BEFORE_REV", "SECTION", "SERVICES", "main"]

#: The last commit whose service answered every read, and every check of a request, on
#: Starlette's shared pool of 40 threads (issue 21).
BEFORE_REV: Final = "77e00f5"
SECTION: Final = "## api: concurrent timeline requests, before and after (issue 21)"
RESULTS: Final = REPO_ROOT / "benchmarks" / "RESULTS.md"
HOST: Final = "127.0.0.1"
HEALTH_EVERY_S: Final = 0.05
START_TIMEOUT_S: Final = 120.0
SMALL_SEED: Final = ("allocation_id", "a-7f3c")  # correlator._demo_story.FAILING_ALLOCATION
#: The small store's timeline asked before each burst: another incident's (STUCK_ALLOCATION,
#: on another node), so that what a service keeps of it does not answer the burst.
SMALL_WARM_UP: Final = "/v1/timeline?allocation_id=a-51d2"
DEMO_NOW_NS: Final = 1_795_000_000_000_000_000
FLEET_EVENTS: Final = 1_000_000
#: The services measured, in the order of the first round (module docstring).
SERVICES: Final = ("before", "after", "uncached")
#: The settings of ``uncached`` besides those of ``after``.
UNCACHED: Final = {"CORRELATOR_READ_CACHE_MB": "0"}


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- the two services ------------------------------------------------------------------------


def checkout(rev: str, directory: Path) -> Path:
    """The ``correlator`` and ``agent_logging`` packages of ``rev``, extracted into
    ``directory`` (``git archive``), to run the service of that commit from."""
    archive = subprocess.run(
        [
            "git",
            "-C",
            str(REPO_ROOT),
            "archive",
            "--format=tar",
            rev,
            "correlator",
            "agent_logging",
        ],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    return directory


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class Service:
    """A running ``correlator serve``: its URL and process."""

    url: str
    process: subprocess.Popen[bytes]
    code: str

    def cpu_s(self) -> float:
        """The process's CPU time so far (user + system), from ``/proc``."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def loop_waited_s(self) -> float:
        """How long the service's main thread, its event loop, has waited so far for a core
        while it could run (the run delay of ``/proc/PID/task/PID/schedstat``): what a busy
        host, not the service, added to its answers."""
        pid = self.process.pid
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


@contextmanager
def serving(
    code: Path | None, db: Path, log: Path, settings: dict[str, str] | None = None
) -> Iterator[Service]:
    """``python -m correlator --db DB serve`` on a free loopback port, from ``code`` (a
    :func:`checkout`) or this checkout, with ``CORRELATOR_*`` ``settings``; stopped at the
    end."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORRELATOR_")}
    env["CORRELATOR_FINDINGS_INTERVAL_S"] = "0"  # no findings logger beside the burst
    env.update(settings or {})
    cwd = code or REPO_ROOT
    env["PYTHONPATH"] = str(cwd)
    where = subprocess.run(
        [sys.executable, "-c", "import correlator; print(correlator.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not where.startswith(str(cwd)):
        raise RuntimeError(f"the service would run {where}, not the code in {cwd}")
    argv = ["--db", str(db), "serve", "--host", HOST, "--port", str(port)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "correlator", *argv],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"correlator serve exited; its log: {log}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"correlator serve did not answer in {START_TIMEOUT_S} s")
            time.sleep(0.1)  # polling a port that is not open yet: nothing to wait on
        yield Service(url, process, str(Path(where).parent))
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


# -- the burst -------------------------------------------------------------------------------


def _probe_healthz(url: str, probing: Any, stopped: Any, answers: Connection) -> None:
    """Ask ``url``'s /healthz every :data:`HEALTH_EVERY_S` while ``probing`` is set, until
    ``stopped``, on a new connection each time (as Kubernetes' probes do: no keep-alive), then
    send ``answers`` the latencies (seconds) and the failures. Run in a process of its own
    (:func:`measure`)."""
    parsed = urlsplit(url)
    latencies: list[float] = []
    failures: list[str] = []
    answers.send("ready")
    while not stopped.is_set():
        if not probing.wait(0.01):
            continue
        started = time.perf_counter()
        connection = http.client.HTTPConnection(parsed.hostname or HOST, parsed.port, timeout=10.0)
        try:
            connection.request("GET", "/healthz")
            status = connection.getresponse().status
        except OSError as exc:
            failures.append(f"healthz {type(exc).__name__}")
        else:
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                failures.append(f"healthz {status}")
        finally:
            connection.close()
        stopped.wait(HEALTH_EVERY_S)
    answers.send((latencies, failures))


async def _raw_connections(url: str, count: int) -> list[tuple[Any, Any]]:
    """``count`` connections to ``url``, opened (``asyncio`` streams) before a ``raw`` burst."""
    parsed = urlsplit(url)
    return list(
        await asyncio.gather(
            *(asyncio.open_connection(parsed.hostname, parsed.port) for _ in range(count))
        )
    )


async def _raw_burst(
    url: str, connections: list[tuple[Any, Any]], paths: Sequence[str], timeout_s: float
) -> tuple[list[float], list[str]]:
    """Every path on a connection of its own, all written at once (``Connection: close``),
    then each answer read to its end: latencies (from the writes) and failures."""
    host = urlsplit(url).netloc
    latencies: list[float] = []
    failures: list[str] = []

    async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            answer = await asyncio.wait_for(reader.read(), timeout_s)  # to the end
        except (OSError, TimeoutError) as exc:
            failures.append(type(exc).__name__)
            return
        finally:
            writer.close()
        status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.1 ") else b"none"
        if status == b"200":
            latencies.append(time.perf_counter() - started)
        else:
            failures.append(status.decode("latin-1"))

    started = time.perf_counter()
    for (_, writer), path in zip(connections, paths, strict=True):
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    await asyncio.gather(*(answered(reader, writer) for reader, writer in connections))
    return latencies, failures


async def _burst(
    url: str,
    paths: Sequence[str],
    warm_up: str,
    timeout_s: float,
    probing: Any,
    kind: str = "httpx",
) -> dict[str, Any]:
    """Ask ``warm_up``, then send every path at once (one connection each), with ``probing``
    set meanwhile (the probe process asks /healthz) and /healthz asked every 50 ms from this
    loop too. ``kind``: ``httpx`` sends each request as a client library does; ``raw``
    opens every connection first, then writes every request at once (:func:`_raw_burst`)."""
    latencies: list[float] = []
    health: list[float] = []
    failures: list[str] = []
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=len(paths), max_keepalive_connections=len(paths))
    timeout = httpx.Timeout(timeout_s)
    async with (
        httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client,
        # keep-alive shorter than the service's (5 s): no request on a connection it closes
        httpx.AsyncClient(
            base_url=url, timeout=timeout, limits=httpx.Limits(keepalive_expiry=1)
        ) as probe,
    ):
        # The first timeline of a process reads the link cardinalities: not in the burst.
        await client.get(warm_up)

        async def one(path: str) -> None:
            started = time.perf_counter()
            try:
                response = await client.get(path)
            except httpx.HTTPError as exc:
                failures.append(type(exc).__name__)
                return
            if response.status_code != 200:
                failures.append(str(response.status_code))
                return
            latencies.append(time.perf_counter() - started)

        async def healthz() -> None:
            while not done.is_set():
                started = time.perf_counter()
                try:
                    response = await probe.get("/healthz")
                    if response.status_code == 200:
                        health.append(time.perf_counter() - started)
                    else:
                        failures.append(f"healthz {response.status_code}")
                except httpx.HTTPError as exc:
                    failures.append(f"healthz {type(exc).__name__}")
                await asyncio.sleep(HEALTH_EVERY_S)

        connections = await _raw_connections(url, len(paths)) if kind == "raw" else []
        watcher = asyncio.create_task(healthz())
        probing.set()
        started = time.perf_counter()
        try:
            if kind == "raw":
                raw = _raw_burst(url, connections, paths, timeout_s)
                got, lost = await asyncio.wait_for(raw, timeout_s * 2)
                latencies += got
                failures += lost
            else:
                await asyncio.wait_for(asyncio.gather(*(one(p) for p in paths)), timeout_s * 2)
        except TimeoutError:
            failures.append("burst deadline")  # the unanswered requests count as failed
        finally:
            wall_s = time.perf_counter() - started
            probing.clear()
            done.set()
            await watcher
    return {"latencies": latencies, "in_loop": health, "failures": failures, "wall_s": wall_s}


def measure(
    service: Service, paths: Sequence[str], warm_up: str, timeout_s: float, kind: str = "httpx"
) -> dict[str, Any]:
    """One burst against ``service``, with the service's CPU time it cost, and /healthz asked
    meanwhile from a process of its own, as a probe asks it (``health``), and from the
    burst's own loop (``in_loop``). The burst's loop is busy with 200 requests and their
    answers on one core of two: a /healthz asked there waits for it as well as for the
    service (on the small store 90-240 ms, where a process of its own waited 10-20 ms).
    ``kind``: how the burst is sent (:func:`_burst`)."""
    context = multiprocessing.get_context("spawn")
    probing, stopped = context.Event(), context.Event()
    ours, theirs = context.Pipe(duplex=False)
    prober = context.Process(
        target=_probe_healthz, args=(service.url, probing, stopped, theirs), daemon=True
    )
    prober.start()
    try:
        if not ours.poll(START_TIMEOUT_S) or ours.recv() != "ready":
            raise RuntimeError("the /healthz probe process did not start")
        cpu_before, waited_before = service.cpu_s(), service.loop_waited_s()
        figures = asyncio.run(_burst(service.url, paths, warm_up, timeout_s, probing, kind))
        figures["cpu_s"] = service.cpu_s() - cpu_before
        figures["loop_waited_s"] = service.loop_waited_s() - waited_before
        stopped.set()
        figures["health"], probe_failures = ours.recv()
        figures["failures"] += probe_failures
    finally:
        stopped.set()
        prober.join(timeout=20)
        if prober.is_alive():
            prober.kill()
    figures["requests"] = len(paths)
    return figures


def summary(bursts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one (store, workload, service) over its bursts, pooled."""
    latencies = [x for b in bursts for x in b["latencies"]]
    health = [x for b in bursts for x in b["health"]]
    in_loop = [x for b in bursts for x in b["in_loop"]]
    requests = sum(b["requests"] for b in bursts)
    nan = float("nan")
    return {
        "requests": requests,
        "failed": requests - len(latencies),
        "failures": sorted({f for b in bursts for f in b["failures"]}),
        "p50_s": _percentile(latencies, 0.5) if latencies else nan,
        "p95_s": _percentile(latencies, 0.95) if latencies else nan,
        "max_s": max(latencies, default=nan),
        "per_s": statistics.mean(b["requests"] / b["wall_s"] for b in bursts),
        "health_n": len(health),
        "health_p50_s": _percentile(health, 0.5) if health else nan,
        "health_p95_s": _percentile(health, 0.95) if health else nan,
        "health_max_s": max(health, default=nan),
        "in_loop_max_s": max(in_loop, default=nan),
        "cpu_ms_per_request": 1000 * sum(b["cpu_s"] for b in bursts) / requests,
        "loop_waited_share": sum(b["loop_waited_s"] for b in bursts)
        / sum(b["wall_s"] for b in bursts),
    }


# -- the stores ------------------------------------------------------------------------------


def small_store(directory: Path) -> Path:
    """The demo incident's store (its failing allocation's timeline: 14 events)."""
    from correlator import demo

    db = directory / "demo.duckdb"
    demo.build(db, now_ns=DEMO_NOW_NS, seed=7)
    return db


def fleet_store(directory: Path, keep: bool) -> tuple[Path, list[tuple[str, str]]]:
    """The 10^6-event fleet's store (kept, or generated and ingested), and seeds from it."""
    from benchmarks.fleet import SEED_KINDS, generate, load_fleet, save_fleet
    from correlator.ingest import ingest_paths
    from correlator.store import Store

    directory.mkdir(parents=True, exist_ok=True)
    db, saved = directory / "evidence.duckdb", directory / "fleet.json"
    if keep and db.exists() and saved.exists():
        _say(f"1e6: reusing the store in {directory}")
        fleet = load_fleet(saved)
    else:
        for stale in (db, directory / "evidence.duckdb.wal"):
            stale.unlink(missing_ok=True)
        _say("1e6: generating the fleet")
        fleet = generate(directory, FLEET_EVENTS, 1)
        _say(f"1e6: ingesting {fleet.events:,} events")
        with Store(db) as store:
            ingest_paths(store, "agent", list(fleet.files), workers=2)
        save_fleet(fleet, saved)
        if not keep:
            for path in fleet.files:
                path.unlink()
    seeds = []
    for i in range(1000):  # the kinds in turn, each kind's values in order
        kind = SEED_KINDS[i % len(SEED_KINDS)]
        values = fleet.samples[kind]
        seeds.append((kind, values[i // len(SEED_KINDS) % len(values)]))
    return db, list(dict.fromkeys(seeds))


def workloads(store: str, requests: int, seeds: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """The burst's paths of each workload (module docstring)."""
    if store == "small":
        key, value = SMALL_SEED
        same = f"/v1/timeline?{key}={value}"
        # Every limit above the timeline's 14 events: the same work, no answer shared.
        return {
            "same": [same] * requests,
            "distinct": [f"{same}&limit={1000 + i}" for i in range(requests)],
        }
    key, value = seeds[0]
    distinct = [
        f"/v1/timeline?{k}={v}&limit={10_000 + i}"  # the default limit, and no answer shared
        for i, (k, v) in enumerate(seeds[i % len(seeds)] for i in range(requests))
    ]
    return {"same": [f"/v1/timeline?{key}={value}"] * requests, "distinct": distinct}


def warm_up(store: str, seeds: Sequence[tuple[str, str]]) -> str:
    """The timeline asked before each burst: one no burst asks (the fleet's seeds are drawn
    in order, the last of its up to 1,000 after the burst's 200)."""
    if store == "small":
        return SMALL_WARM_UP
    key, value = seeds[-1]
    return f"/v1/timeline?{key}={value}"


# -- the report ------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:,.0f}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The figures of every (store, workload, service), then the ratios, as Markdown."""
    lines = [
        "| store | workload | service | requests | failed | p50 ms | p95 ms | max ms | requests/s "
        "| /healthz p50 ms | p95 ms | max ms | in the burst's loop: max ms | CPU ms/request "
        "| loop waiting for a core |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        s = row["summary"]
        lines.append(
            f"| {row['store']} | {row['workload']} | {row['service']} | {s['requests']} "
            f"| {s['failed']} | {_ms(s['p50_s'])} | {_ms(s['p95_s'])} | {_ms(s['max_s'])} "
            f"| {s['per_s']:,.1f} | {_ms(s['health_p50_s'])} | {_ms(s['health_p95_s'])} "
            f"| {_ms(s['health_max_s'])} | {_ms(s['in_loop_max_s'])} "
            f"| {s['cpu_ms_per_request']:,.1f} | {s['loop_waited_share']:.0%} |"
        )
    lines += [
        "",
        "| store | workload | service | p50 before/it | p95 before/it | requests/s it/before "
        "| /healthz p95 before/it | CPU/request before/it |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    by_key = {(r["store"], r["workload"], r["service"]): r["summary"] for r in rows}
    for store, workload in dict.fromkeys((r["store"], r["workload"]) for r in rows):
        before = by_key.get((store, workload, "before"))
        for service in SERVICES[1:]:
            it = by_key.get((store, workload, service))
            if before is None or it is None:
                continue
            lines.append(
                f"| {store} | {workload} | {service} | {_ratio(before['p50_s'], it['p50_s'])} "
                f"| {_ratio(before['p95_s'], it['p95_s'])} "
                f"| {_ratio(it['per_s'], before['per_s'])} "
                f"| {_ratio(before['health_p95_s'], it['health_p95_s'])} "
                f"| {_ratio(before['cpu_ms_per_request'], it['cpu_ms_per_request'])} |"
            )
    return "\n".join(lines)


def _ratio(numerator: float, denominator: float) -> str:
    if numerator != numerator or denominator != denominator or denominator == 0:
        return "-"
    return f"{numerator / denominator:.1f}x"


def record(section: str) -> None:
    """Replace (or append) this benchmark's section of RESULTS.md, nothing else."""
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == SECTION), None)
    if start is None:
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n", "utf-8")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    head, tail = "".join(lines[:start]), "".join(lines[end:])
    RESULTS.write_text(head + section.rstrip("\n") + "\n" + ("\n" + tail if tail else ""), "utf-8")


# -- the run ---------------------------------------------------------------------------------


def run(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """Every store, workload and round: the services in turns."""
    before_code = checkout(args.before, workdir / "before")
    after = {} if args.read_threads is None else {"CORRELATOR_READ_THREADS": str(args.read_threads)}
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        seeds: list[tuple[str, str]] = []
        if size == "small":
            db = small_store(workdir)
        else:
            keep = args.keep is not None
            db, seeds = fleet_store((args.keep or workdir) / f"n{FLEET_EVENTS}", keep)
        paths = workloads(size, args.requests, seeds)
        first = warm_up(size, seeds)
        for workload, burst_paths in paths.items():
            bursts: dict[str, list[dict[str, Any]]] = {name: [] for name in SERVICES}
            for round_no in range(args.rounds):
                shift = round_no % len(SERVICES)  # each service first in turn
                for name in SERVICES[shift:] + SERVICES[:shift]:
                    code, settings = {
                        "before": (before_code, {}),
                        "after": (None, after),
                        "uncached": (None, after | UNCACHED),
                    }[name]
                    with serving(code, db, workdir / f"{name}.log", settings) as service:
                        figures = measure(service, burst_paths, first, args.timeout_s, args.client)
                    bursts[name].append(figures)
                    s = summary([figures])
                    _say(
                        f"{size} {workload} {name}: p50 {_ms(s['p50_s'])} ms, p95 "
                        f"{_ms(s['p95_s'])} ms, {s['per_s']:.1f} requests/s, /healthz p95 "
                        f"{_ms(s['health_p95_s'])} ms (max {_ms(s['health_max_s'])}), "
                        f"{s['cpu_ms_per_request']:.1f} CPU ms/request, loop waiting for a "
                        f"core {s['loop_waited_share']:.0%}, {s['failed']} failed "
                        f"{s['failures'] or ''}; load average {_load()}"
                    )
            for name in SERVICES:
                rows.append(
                    {
                        "store": size,
                        "workload": workload,
                        "service": name,
                        "summary": summary(bursts[name]),
                    }
                )
    return rows


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="small,1e6", help="stores: small and/or 1e6, comma-separated"
    )
    parser.add_argument("--requests", type=int, default=200, help="requests per burst")
    parser.add_argument("--rounds", type=int, default=1, help="bursts per service and workload")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="each request's timeout")
    parser.add_argument("--before", default=BEFORE_REV, help="the commit measured as before")
    parser.add_argument(
        "--read-threads", type=int, help="CORRELATOR_READ_THREADS of after (default its own)"
    )
    parser.add_argument(
        "--client",
        choices=("httpx", "raw"),
        default="httpx",
        help="httpx: requests as a client library sends them; raw: every connection opened "
        "first, then every request written at once (what the service alone takes)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--record", action="store_true", help="write the section of RESULTS.md")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the 10^6 store in DIR; reuse it when present"
    )
    args = parser.parse_args(argv)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = set(args.sizes) - {"small", "1e6"}
    if unknown or args.requests < 1 or args.rounds < 1:
        parser.error(
            f"--sizes takes small and 1e6 (not {', '.join(sorted(unknown))}); "
            "--requests and --rounds at least 1"
        )
    note = machine_note()
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--record"]
    command = " ".join(["python -m benchmarks.api", *shown])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="api-bench-") as workdir:
        rows = run(args, Path(workdir))
        if args.keep is None:
            shutil.rmtree(Path(workdir) / f"n{FLEET_EVENTS}", ignore_errors=True)
    total_s = time.perf_counter() - started
    report = table(rows)
    if args.json:
        print(json.dumps({"machine": note, "total_s": total_s, "rows": rows}, indent=2))
    else:
        print(report)
        print(f"\n{note}; load average at the end {_load()}; {total_s:.0f} s in all")
    if args.record:
        record(
            "\n".join(
                [
                    SECTION,
                    "",
                    f"`{command}` — {time.strftime('%Y-%m-%d')}, {note}; load average at the "
                    f"end {_load()}; {total_s:.0f} s in all. before: `{args.before}`; after: "
                    "this checkout; uncached: this checkout with `CORRELATOR_READ_CACHE_MB=0`.",
                    "",
                    report,
                    "",
                ]
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
