"""``correlator demo``: a realistic multi-layer incident, built from native evidence files.

The demo writes what each layer would really have written — agent JSON lines, nginx JSON
access and error logs, PostgreSQL ``jsonlog``, workflow transitions, a ``kubectl get -o json``
snapshot and AAP/EDA job objects — then ingests them through the same adapters as any other
input, prints the failing allocation's timeline and the findings, and serves the result.

The story (seeded, relative to now):

- eight allocations provision normally through AAP or EDA (the latency table compares them);
- ``a-7f3c`` fails: the workflow worker calls the node agent through the ingress, whose TLS
  handshake to the upstream fails because the certificate expired; the API logs only a
  wrapped "provisioning failed", the workflow moves to ``provision_failed``. Owner: ``cert``.
  The node ``n-17`` it ran on was reimaged shortly before (``ni-3`` → ``ni-4``), and the API's
  clock runs 1.2 s ahead of the ingress;
- ``a-51d2`` failed to release two hours ago and is still ``release_failed`` with
  ``occupancy=cleanup``: its node stays fenced (a stuck finding);
- ``a-9e01``'s AAP job was canceled 40 minutes ago but its custom resource still says
  ``Running`` (a drift finding).

This module holds the command: :func:`write_evidence` sets when each allocation's part happens
and writes the files, :func:`build` ingests them, :func:`run` prints and serves. Each
allocation's evidence comes from :mod:`correlator._demo_story`, in the shapes of
:mod:`correlator._demo_evidence`.

The demo builds a fresh database, ``./correlator-demo.duckdb`` unless ``--db`` names another
(``$CORRELATOR_DB`` is not read: it names the evidence). It never replaces a file that holds
anything but a previous demo (:func:`foreign_origin`) unless given ``--force``: a demo's every
event and reject came from one of its evidence files in its own folder beside the database
(``correlator-demo.duckdb.evidence/agent.ndjson``...; demos before that folder existed wrote a
temporary ``.../correlator-demo-*/`` one), and no other evidence does. The folder stays, so
that the timeline's ``origin`` names files that exist, and an operator can ingest them again
by hand to learn the commands.

The same seed tells the same story every time: the story is anchored on a whole second of
"now" (nginx error-log times carry no fraction, so an anchor with one would move their lines
before or after their neighbours from one run to the next).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from correlator._demo_evidence import Writer
from correlator._demo_story import FAILING_ALLOCATION, drifting, failing, healthy, stuck
from correlator.errors import QueryError

__all__ = ["build", "evidence_folder", "foreign_origin", "run", "write_evidence"]

_S: Final = 1_000_000_000
#: The evidence files the demo writes, and the source kind of each.
_FILES: Final = {
    "agent.ndjson": "agent",
    "nginx-access.log": "nginx",
    "nginx-error.log": "nginx",
    "postgres.json": "postgres",
    "workflow.ndjson": "workflow",
    "k8s-provisionrequests.json": "k8s",
    "jobs.ndjson": "aap",
}
#: The suffix of :func:`evidence_folder`'s name.
_FOLDER_SUFFIX: Final = ".evidence"
#: The prefix of the temporary directory demos before :func:`evidence_folder` wrote into.
_DIRECTORY_PREFIX: Final = "correlator-demo-"


def write_evidence(directory: Path, *, now_ns: int, seed: int = 7) -> list[tuple[str, Path]]:
    """Write the demo's evidence files into ``directory``; returns (source kind, path) pairs."""
    rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
    now_ns -= now_ns % _S  # a whole second: the same story whatever the fraction of now
    w = Writer()
    base = now_ns - 3 * 3600 * _S
    for n in range(8):
        provider = "aap" if n % 2 == 0 else "eda"
        healthy(
            w,
            rng,
            base + n * 600 * _S,
            f"a-{100 + n}",
            f"n-{20 + n % 3}",
            f"ni-{n % 3 + 1}",
            provider,
            4600 + n,
        )
    failing(w, rng, now_ns - 50 * 60 * _S)
    stuck(w, rng, now_ns - 2 * 3600 * _S)
    drifting(w, rng, now_ns - 70 * 60 * _S, now_ns)
    written = []
    for name, kind in _FILES.items():
        path = directory / name
        path.write_text("\n".join(w.files.get(name, [])) + "\n", "utf-8")
        written.append((kind, path))
    return written


def build(db_path: Path, *, now_ns: int, seed: int = 7) -> dict[str, Any]:
    """Write the evidence and ingest it into a fresh database at ``db_path``."""
    from correlator.ingest import ingest_paths
    from correlator.store import IngestResult, Store

    total = IngestResult()
    folder = evidence_folder(db_path)
    if folder.exists():
        # Only a previous demo's: files the demo writes, nothing else (never a folder of yours
        # that happens to have the name).
        if not folder.is_dir() or any(p.name not in _FILES for p in folder.iterdir()):
            raise QueryError(
                f"{folder} exists and holds more than a previous demo's evidence: move it, or "
                "give the demo another database (--db)"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with Store(db_path) as store:
        for kind, path in write_evidence(folder, now_ns=now_ns, seed=seed):
            total.add(ingest_paths(store, kind, [path]))
    return total.as_dict()


def evidence_folder(db_path: Path) -> Path:
    """Where the demo writes its evidence files: beside its database, named after it."""
    return db_path.with_name(f"{db_path.name}{_FOLDER_SUFFIX}")


def foreign_origin(db_path: Path) -> str | None:
    """What in ``db_path`` a demo did not write, in words; None when it holds a previous demo,
    nothing, or does not exist (the demo may replace it). A demo of an earlier version (a store
    this version refuses to open) is recognised too: only the origins are read.

    Args:
        db_path: a database file.

    Returns:
        None, or e.g. ``"evidence from '/var/log/nginx/error.log'"`` or ``"a file the
        correlator cannot read as its database (...)"``.
    """
    import duckdb

    if not db_path.exists():
        return None
    try:
        with duckdb.connect(str(db_path), read_only=True) as connection:
            # A previous demo has seven origins at most: an eighth is not the demo's.
            rows = connection.execute(
                "SELECT DISTINCT origin FROM events "
                "UNION SELECT DISTINCT origin FROM rejects LIMIT ?",
                [len(_FILES) + 1],
            ).fetchall()
    except duckdb.Error as exc:  # not DuckDB, locked, or not the correlator's
        return f"a file the correlator cannot read as its database ({exc})"
    for (origin,) in rows:
        path = Path(str(origin))
        folder = path.parent.name
        # A demo's folder beside its database (a copied demo keeps its first folder's name).
        if path.name not in _FILES or not (
            folder.endswith(_FOLDER_SUFFIX) or folder.startswith(_DIRECTORY_PREFIX)
        ):
            return f"evidence from {str(origin)[:80]!r}"
    return None


def _activate_line() -> str:
    """The line that puts ``correlator`` on the reader's PATH, when this runs in a virtualenv.

    ``scripts/demo.sh`` activates the project's ``.venv`` in its own process only: the shell
    that started it has no ``correlator`` command until it activates it too.
    """
    if sys.prefix == sys.base_prefix:
        return ""
    venv = Path(sys.prefix)
    if venv.is_relative_to(Path.cwd()):
        venv = venv.relative_to(Path.cwd())
    return f"  source {venv}/bin/activate\n"


def run(args: argparse.Namespace, serve: Callable[[list[str]], int]) -> int:
    """The ``correlator demo`` command; ``serve`` runs ``correlator`` with the arguments it is
    given (the CLI's own entry point), to serve the demo unless ``--no-serve``.

    Raises:
        QueryError: the database file holds something other than a previous demo and
            ``--force`` was not given, or it cannot be removed; the message names it.
    """
    from correlator import incident, queries, render
    from correlator.store import Store

    db_path = Path(args.db)
    foreign = None if args.force else foreign_origin(db_path)
    if foreign is not None:
        raise QueryError(
            f"{db_path} holds {foreign}, not a previous demo: the demo builds a database of "
            "its own; give it another file (--db), or add --force to replace this one"
        )
    # The file's write-ahead log goes with it: it belongs to the database it replaces.
    for leftover in (db_path, db_path.with_name(db_path.name + ".wal")):
        try:
            leftover.unlink(missing_ok=True)
        except OSError as exc:
            raise QueryError(f"cannot replace {leftover}: {exc.strerror or exc}") from exc
    now_ns = time.time_ns()
    summary = build(db_path, now_ns=now_ns, seed=args.seed)
    print(
        f"demo: ingested {summary['accepted']} events into {db_path} "
        f"({summary['rejected']} rejected)\n",
        file=sys.stderr,
    )
    with Store(db_path) as store:
        data = incident.timeline_for(store, "allocation_id", FAILING_ALLOCATION)
        render.print_timeline(data)
        print()
        render.print_findings(queries.findings(store, now_ns)["findings"])
        print()
        render.print_latency(queries.latency(store)["phases"])
    print(
        f"\nthe demo's evidence files are in {evidence_folder(db_path)}/; next, try:\n"
        f"{_activate_line()}"
        f"  correlator --db {db_path} timeline --id {FAILING_ALLOCATION}\n"
        f"  correlator --db {db_path} findings\n"
        f"  correlator --db {db_path} serve",
        file=sys.stderr,
    )
    if args.no_serve:
        return 0
    print(
        f"\nopen http://{args.host}:{args.port}/ (timeline JSON: "
        f"/v1/timeline?allocation_id={FAILING_ALLOCATION}); Ctrl-C stops",
        file=sys.stderr,
    )
    return serve(["--db", str(db_path), "serve", "--host", args.host, "--port", str(args.port)])
