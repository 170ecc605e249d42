"""A scenario's evidence: marks where it starts, drains, collects, correlates, counts.

The five layers reach the correlator as they would in production:

- node, api, workflow: the processes' records, in Loki, after ``agent-logging drain``
  confirmed every spool is visible there. The correlator pulls the incident's own records
  from it, hop by hop from the scenario's seed, inside the scenario's window: ``correlator
  timeline --id KEY=VALUE --loki-url URL --from START --to END`` (:func:`timeline`), as an
  operator asks at incident time, with no window of the whole stack to ingest first;
- ingress: nginx's access and error logs; db: PostgreSQL's ``jsonlog``; both as the slices
  written since the scenario started (byte offsets taken at its start), ingested locally
  (:func:`ingest`) before the timeline is asked for, which joins them;
- plus the workflow audit table (``allocation_audit`` rows since the start), the custom
  resources' watch stream and a final ``kubectl get -o json``-style snapshot, and the
  provider's job objects (``GET /api/v2/jobs/``, ``/activation-instances/``), the last two
  scoped to the scenario's allocations (they are state, not logs with a time).

What the processes logged is counted from their ledgers (``ledger/*.jsonl``: the same lines
they spooled for Loki, written beside the spool). The pull brings only the incident's
records, so delivery is checked apart from it, over the whole window: :func:`count_delivered`
counts the ledger lines that Loki holds exactly once (``records_logged == records_seen``:
nothing lost, nothing doubled on the way), and :func:`count_pulled` those the pull brought
into the correlator's store: every record naming the seed (:func:`naming`) among them.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from agent_logging.loki import LokiClient
from agent_logging.schema import rfc3339_ns
from correlator.model import Event, Reject
from devstack.config import ENV, StackConfig
from devstack.projector import snapshot
from devstack.supervisor import REPO_ROOT, Stack, StackError

__all__ = [
    "Marks",
    "collect",
    "count_delivered",
    "count_pulled",
    "drain_all",
    "ingest",
    "ledger_lines",
    "naming",
    "timeline",
]


@dataclass
class Marks:
    """Where a scenario's evidence starts: a time and the files' sizes then."""

    start_ns: int
    offsets: dict[str, int] = field(default_factory=dict)

    @classmethod
    def take(cls, config: StackConfig) -> Marks:
        marks = cls(time.time_ns())
        for name, path in _logs(config).items():
            marks.offsets[name] = path.stat().st_size if path.exists() else 0
        return marks


def _logs(config: StackConfig) -> dict[str, Path]:
    return {
        "nginx-access.log": config.access_log,
        "nginx-error.log": config.error_log,
        "postgresql.json": config.pg_log,
        "k8s-watch.ndjson": config.watch_log,
    }


def _slice(path: Path, offset: int) -> bytes:
    """The whole lines written to ``path`` since ``offset``."""
    if not path.exists():
        return b""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


def drain_all(stack: Stack) -> None:
    """``agent-logging drain`` every spool (services and nodes) at once.

    Raises:
        StackError: a drain exited non-zero (records are not all visible in Loki).
    """
    config = stack.config
    spools = [config.spool_dir, *(config.node_spool(n) for n in config.node_ids)]
    commands = [
        [
            sys.executable,
            *("-m", "agent_logging._cli", "drain", "--spool-dir", str(spool)),
            *("--loki-url", config.loki_url, "--timeout-s", "30"),
            *(("--tenant", config.loki_tenant) if config.loki_tenant else ()),
        ]
        for spool in spools
        if spool.exists()
    ]
    running = [
        subprocess.Popen(  # noqa: S603 - our interpreter, the library's own CLI
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    problems = []
    for command, process in zip(commands, running, strict=True):
        _, stderr = process.communicate(timeout=90)
        if process.returncode != 0:
            problems.append(f"{command[6]}: {stderr.strip()}")
    if problems:
        raise StackError("drain failed: " + "; ".join(problems))


def _jobs(config: StackConfig, allocations: set[str]) -> list[dict[str, Any]]:
    """The provider's job objects of ``allocations`` (AAP jobs and EDA instances)."""
    found = []
    with httpx.Client(base_url=config.provider_url, timeout=10.0) as client:
        for path in ("/api/v2/jobs/", "/api/eda/v1/activation-instances/"):
            page = client.get(path).raise_for_status().json()
            for job in page["results"]:
                raw = job.get("extra_vars", job.get("extra_var")) or "{}"
                variables = orjson.loads(raw) if isinstance(raw, str) else raw
                if variables.get("allocation_id") in allocations:
                    found.append(job)
    return found


def collect(
    config: StackConfig, marks: Marks, directory: Path, allocations: set[str]
) -> list[tuple[str, list[Path]]]:
    """Write the scenario's evidence files into ``directory``; (source kind, paths) pairs."""
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, path in _logs(config).items():
        target = directory / name
        target.write_bytes(_slice(path, marks.offsets.get(name, 0)))
        written[name] = target
    resources = snapshot(config)
    resources["items"] = [
        item
        for item in resources["items"]
        if item["metadata"].get("labels", {}).get("provisioning.example.com/allocation-id")
        in allocations
    ]
    (directory / "k8s-snapshot.json").write_bytes(orjson.dumps(resources))
    (directory / "provider-jobs.json").write_bytes(
        orjson.dumps({"results": _jobs(config, allocations)})
    )
    return [
        ("nginx", [written["nginx-access.log"], written["nginx-error.log"]]),
        ("postgres", [written["postgresql.json"]]),
        ("k8s", [written["k8s-watch.ndjson"], directory / "k8s-snapshot.json"]),
        ("aap", [directory / "provider-jobs.json"]),
    ]


def ingest(db_path: Path, files: list[tuple[str, list[Path]]], audit: list[Event | Reject]) -> str:
    """Ingest the collected files into a fresh DuckDB at ``db_path`` with the correlator's own
    CLI, and ``audit``, what the correlator's audit-table reader read when the evidence was
    collected. Returns the summaries.

    Raises:
        StackError: an ingest failed.
    """
    from correlator import cli
    from correlator.ingest import ingest_items
    from correlator.store import Store

    summaries = io.StringIO()
    for kind, paths in files:
        arguments = ["ingest", "--source", kind, "--quiet", *map(str, paths)]
        with contextlib.redirect_stderr(summaries):
            status = cli.main(["--db", str(db_path), *arguments])
        if status != 0:
            raise StackError(f"correlator ingest --source {kind} failed: {summaries.getvalue()}")
    with Store(db_path) as store:
        result = ingest_items(store, audit)
    summaries.write(f"workflow audit table: {result.as_dict()}\n")
    return summaries.getvalue()


def timeline(
    db_path: Path, config: StackConfig, marks: Marks, end_ns: int, seed: dict[str, str]
) -> tuple[dict[str, Any], str]:
    """The seed's timeline (verdict included), its records pulled from Loki into ``db_path``
    by ``correlator timeline --id KEY=VALUE --loki-url URL --from START --to END --json``:
    the stack's streams (``{env="devstack"}``), the scenario's window. Returns the timeline
    and what the pull said on stderr (its hops, queries and entries).

    Raises:
        StackError: the command failed (Loki refused a query, the seed is malformed).
    """
    from correlator import cli

    [(key, value)] = seed.items()
    arguments = [
        *("timeline", "--id", f"{key}={value}", "--json"),
        *("--loki-url", config.loki_url, "--loki-selector", f'{{env="{ENV}"}}'),
        *("--from", str(marks.start_ns), "--to", str(end_ns)),
        *(("--tenant", config.loki_tenant) if config.loki_tenant else ()),
    ]
    out, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(said):
        status = cli.main(["--db", str(db_path), *arguments])
    if status != 0:
        raise StackError(f"correlator timeline --loki-url failed: {said.getvalue()}")
    answer: dict[str, Any] = orjson.loads(out.getvalue())
    return answer, said.getvalue()


def ledger_lines(config: StackConfig, start_ns: int, end_ns: int) -> list[str]:
    """Every record the stack's processes logged in ``[start_ns, end_ns)``, as written."""
    low, high = rfc3339_ns(start_ns), rfc3339_ns(end_ns)
    lines = []
    for path in sorted(config.ledger_dir.glob("*.jsonl*")):
        for raw in path.read_bytes().splitlines():
            try:
                stamp = orjson.loads(raw).get("ts")
            except orjson.JSONDecodeError:
                continue  # a line cut by a kill mid-write was never a whole record
            # The library's timestamps have one fixed width (RFC 3339, 9 fraction digits,
            # Z): as text they sort as they happened.
            if isinstance(stamp, str) and low <= stamp < high:
                lines.append(raw.decode())
    return lines


def naming(lines: list[str], seed: dict[str, str]) -> list[str]:
    """The ledger ``lines`` whose record names the seed (its ``KEY`` field is ``VALUE``)."""
    [(key, value)] = seed.items()
    return [line for line in lines if orjson.loads(line).get(key) == value]


def count_delivered(config: StackConfig, start_ns: int, end_ns: int, logged: list[str]) -> int:
    """How many of the ``logged`` lines Loki holds exactly once among the stack's entries of
    ``[start_ns, end_ns)``: the delivery check, over the whole window, apart from the pull.
    """
    with LokiClient(config.loki_url, tenant=config.loki_tenant) as client:
        held = Counter(
            entry.line
            for entry in client.iter_query_range(
                f'{{env="{ENV}"}}', start_ns=start_ns, end_ns=end_ns
            )
        )
    return sum(1 for line in logged if held[line] == 1)


def count_pulled(db_path: Path, logged: list[str]) -> int:
    """How many of the ``logged`` lines the pull brought into the correlator's store."""
    from correlator.store import Store

    with Store(db_path, read_only=True) as store:
        seen = set(store.raw_texts("loki"))
    return sum(1 for line in logged if line in seen)
