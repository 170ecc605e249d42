"""The ``correlator`` command.

::

    correlator [--db PATH] ingest --source KIND PATH...
    correlator [--db PATH] ingest --source nginx [--nginx-tz ZONE] PATH...
    correlator [--db PATH] ingest --source loki --query LOGQL --since 1h
    correlator [--db PATH] ingest --source workflow --dsn DSN [--table allocation_audit]

(each source's options are its declaration's, in ``correlator.sources``)
    correlator [--db PATH] timeline --id KEY=VALUE [--json | --html FILE]
    correlator [--db PATH] timeline --id KEY=VALUE --loki-url URL [--since 1h | --from T --to T]
    correlator [--db PATH] graph --id KEY=VALUE
    correlator [--db PATH] findings [--json] [--threshold NAME=SECONDS]...
    correlator [--db PATH] latency [--json]
    correlator [--db PATH] serve [--host 127.0.0.1] [--port 8080] [--loki-url URL]
    correlator [--db PATH] demo [--no-serve] [--force]

Exit status: 0 success, 1 nothing found / a source failed, 2 bad arguments or input
(a missing database for a command that only reads it, an unwritable ``--html`` file, a
malformed ``CORRELATOR_*`` or Loki setting, a demo database that holds other evidence
included).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from correlator import _environ
from correlator._arguments import DEFAULT_DEMO_DB, database, owner_rules, parser
from correlator.errors import CorrelatorError, InputError, NotFoundError, QueryError, SourceError
from correlator.store import IngestResult, Store

if TYPE_CHECKING:
    from rich.console import Console

    from correlator._pulls import Pulls
    from correlator.loki_pull import Pull

__all__ = ["main"]

_READ_COMMANDS = frozenset({"timeline", "graph", "findings", "latency", "rejects"})

_Number = TypeVar("_Number", int, float)

#: Files that add up to this much get a progress bar (when standard error is a terminal):
#: smaller ones are ingested in about a second.
PROGRESS_MIN_BYTES: Final = 8 * 1024 * 1024


def _print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


def _summary(result: IngestResult, took_s: float) -> str:
    data = result.as_dict()
    line = (
        f"accepted {data['accepted']}, duplicate {data['duplicate']}, "
        f"rejected {data['rejected']} in {took_s:.2f} s"
    )
    for reason, count in data["rejected_by_reason"].items():
        line += f"\n  rejected {count}: {reason}"
    for note in data["notes"]:
        line += f"\n  {note}"
    return line


def _progress_factory(enabled: bool, console: Console | None = None) -> Any:
    """A progress bar per file for ``ingest_paths(progress=...)``, or None when not ``enabled``.

    Args:
        enabled: whether to show one.
        console: where to draw (default: standard error, where the summary goes too:
            standard output stays free for what is piped).

    Returns:
        ``for_file(path, size_bytes)``, which returns the callback taking the bytes read, with
        a ``stop()`` attribute that ends the display (the bar is transient: it leaves no line
        behind); or None.
    """
    if not enabled:
        return None
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    progress = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console if console is not None else Console(stderr=True),
        transient=True,
    )

    def for_file(path: Path, size: int) -> Any:
        if not progress.live.is_started:
            progress.start()
        task = progress.add_task(escape(path.name), total=size)  # a name, not markup
        return lambda n: progress.advance(task, n)

    for_file.stop = progress.stop  # type: ignore[attr-defined]
    return for_file


def _ingest(args: argparse.Namespace, store: Store) -> int:
    from correlator import sources

    started = time.perf_counter()
    declared = sources.source(args.source)
    given = {option.flag: getattr(args, option.dest) for _, option in sources.options()}
    values, reader_values = sources.flag_values(declared, given)
    reader = declared.reader_for(reader_values)
    if reader is not None:
        from correlator.ingest import ingest_items

        result = ingest_items(store, reader.read(**reader_values))
    else:
        from correlator.ingest import ingest_lines, ingest_paths, read_lines

        if not args.paths:
            raise QueryError("give the files to ingest (or - for standard input)")
        paths = [Path(p) for p in args.paths if p != "-"]
        large = sum(p.stat().st_size for p in paths if p.exists()) > PROGRESS_MIN_BYTES
        progress = _progress_factory(sys.stderr.isatty() and large and not args.quiet)
        try:
            result = ingest_paths(
                store,
                args.source,
                paths,
                progress=progress,
                workers=_workers(args.workers),
                options=values,
            )
        finally:
            if progress is not None:
                progress.stop()
        if "-" in args.paths:
            stdin = read_lines(sys.stdin.buffer)
            result.add(ingest_lines(store, args.source, stdin, "stdin", options=values))
    print(_summary(result, time.perf_counter() - started), file=sys.stderr)
    return _ingest_verdict(args, store, result)


def _ingest_verdict(args: argparse.Namespace, store: Store, result: IngestResult) -> int:
    """After the summary: say loudly what can never join a timeline, and fail an ingest
    that read nothing, naming the kind the lines look like."""
    data = result.as_dict()
    paths = [p for p in (args.paths or ()) if p != "-"]
    if data["accepted"] == 0 and data["duplicate"] == 0 and data["rejected"] > 0:
        hint = ""
        if paths and Path(paths[0]).is_file():
            from correlator.ingest import read_lines
            from correlator.sources._guess import guess_kinds

            with Path(paths[0]).open("rb") as handle:
                guesses = guess_kinds(read_lines(handle))
            better = [kind for kind, _ in guesses if kind != args.source]
            if better:
                hint = f"; the lines look like --source {better[0]}"
        print(f"correlator: no line was read as --source {args.source}{hint}", file=sys.stderr)
        return 1
    if data["accepted"] and paths:
        from correlator.sources import SOURCES

        lonely = store.events_without_identifiers([str(p) for p in paths])
        if lonely:
            advice = (
                SOURCES[args.source].join_advice
                or "give each record one of the five identifiers (README: the record)"
            )
            print(
                f"correlator: WARNING: {lonely} of the {data['accepted']} lines accepted carry "
                "no identifier (node_id, node_instance_id, correlation_id, allocation_id, "
                "workflow_id, trace_id): they will never join a timeline. To fix: "
                f"{advice}",
                file=sys.stderr,
            )
    return 0


def _workers(requested: int | None) -> int:
    from correlator._parse_workers import MAX_WORKERS

    if requested is None:
        return min(os.cpu_count() or 1, MAX_WORKERS)
    if requested < 1:
        raise QueryError(f"--workers must be 1 or more, not {requested}")
    return requested


def _timeline(args: argparse.Namespace, store: Store) -> int:
    from correlator import incident, render
    from correlator.queries import parse_time_ns

    pulled = _pull(args, store, args.loki) if args.loki is not None else None
    key, value = pulled.seed if pulled else incident.resolve_seed(store, args.id)
    data = incident.timeline_for(
        store,
        key,
        value,
        from_ns=parse_time_ns(args.from_) if args.from_ else None,
        to_ns=parse_time_ns(args.to) if args.to else None,
        limit=args.limit,
        rules=owner_rules(args),
    )
    if args.json:
        if pulled is not None:
            data["loki"] = pulled.as_dict()  # what was asked of Loki, hop by hop
        _print_json(data)
    elif args.html:
        page = render.html_page(data)
        try:
            Path(args.html).write_text(page, "utf-8")
        except OSError as exc:
            raise QueryError(f"cannot write {args.html}: {exc.strerror or exc}") from exc
        print(f"wrote {args.html}", file=sys.stderr)
    else:
        render.print_timeline(data)
    return 0


#: The options that only mean something with a Loki to pull from (``serve`` has no
#: ``--since``: its window is each request's).
_LOKI_ONLY = ("--since", "--tenant", "--username", "--ca-bundle", "--loki-selector")
#: The commands that pull from a Loki when given one.
_PULLING = frozenset({"timeline", "serve"})


def _loki_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``loki`` source's settings a timeline, or the service's timelines, pull with
    (``sources.flag_values``: the options, then ``CORRELATOR_LOKI_*``), or None without
    ``--loki-url`` or ``CORRELATOR_LOKI_URL``: then the timelines read the database alone, as
    they always did.

    Raises:
        QueryError: an option of the pull given without a Loki, or a setting refused.
    """
    from correlator import sources

    if args.command not in _PULLING:
        return None
    if not (args.loki_url or os.environ.get(_environ.LOKI_URL, "").strip()):
        stray = [flag for flag in _LOKI_ONLY if getattr(args, flag[2:].replace("-", "_"), None)]
        if stray:
            raise QueryError(
                f"{stray[0]} is a setting of the pull from Loki: give --loki-url or set "
                f"{_environ.LOKI_URL}"
            )
        return None
    given = {
        "--loki-url": args.loki_url,
        "--tenant": args.tenant,
        "--username": args.username,
        "--ca-bundle": args.ca_bundle,
    }
    return sources.flag_values(sources.source("loki"), given)[1]


def _pull(args: argparse.Namespace, store: Store, settings: dict[str, Any]) -> Pull:
    """Pull the incident of ``--id`` from Loki into ``store`` first, saying each hop on
    stderr."""
    from correlator import loki_pull
    from correlator.logql import DEFAULT_BASE_SELECTOR
    from correlator.sources import loki

    start_ns, end_ns = loki_pull.window(args.since, args.from_, args.to)
    with loki.client(
        settings.get("url"), settings.get("tenant"), settings.get("username"),
        settings.get("ca_bundle"),
    ) as client:  # fmt: skip
        return loki_pull.pull(
            store,
            loki_pull.client_fetch(client),
            args.id,
            start_ns=start_ns,
            end_ns=end_ns,
            base_selector=args.loki_selector or DEFAULT_BASE_SELECTOR,
            progress=lambda line: print(f"correlator: {line}", file=sys.stderr),
        )


def _graph(args: argparse.Namespace, store: Store) -> int:
    from correlator import incident

    key, value = incident.resolve_seed(store, args.id)
    _print_json(incident.graph_for(store, key, value))
    return 0


def _findings(args: argparse.Namespace, store: Store) -> int:
    from correlator import queries, render

    now = queries.parse_time_ns(args.now) if args.now else time.time_ns()
    config = queries.findings_config(os.environ, dict(args.threshold or ()))
    answer = queries.findings(store, now, config)
    if args.log:
        queries.log_findings(answer["findings"])
    if args.json:
        _print_json(answer)
    else:
        render.print_findings(answer["findings"], truncated=answer["truncated"])
    return 0


def _rejects(args: argparse.Namespace, store: Store) -> int:
    from correlator import render

    rows = store.rejects(args.limit)
    if args.json:
        _print_json({"rejects": rows})
    else:
        render.print_rejects(rows)
    return 0


def _latency(args: argparse.Namespace, store: Store) -> int:
    from correlator import queries, render

    answer = queries.latency(store)
    if args.json:
        _print_json(answer)
    else:
        render.print_latency(answer["phases"], truncated=answer["truncated"])
    return 0


def _serve(args: argparse.Namespace, store: Store) -> int:
    import agent_logging
    from correlator import sources
    from correlator._server import serve
    from correlator.api import (
        DEFAULT_BODY_TIMEOUT_S,
        DEFAULT_CACHE_BYTES,
        DEFAULT_MAX_BODY_BYTES,
        DEFAULT_READ_THREADS,
        create_app,
    )
    from correlator.queries import findings_config

    # Settings first: a malformed one is reported before logging is configured or a thread
    # started. The findings' thresholds are read again on each use (queries.findings), so
    # that the HTTP route and the findings logger see the same ones.
    max_body_bytes = _env_number(_environ.MAX_BODY_BYTES, int, DEFAULT_MAX_BODY_BYTES, least=1)
    body_timeout_s = _env_number(
        _environ.BODY_TIMEOUT_S, float, DEFAULT_BODY_TIMEOUT_S, least=0.001
    )
    header_timeout_s = _env_number(_environ.HEADER_TIMEOUT_S, float, 10.0, least=0.001)
    read_threads = _env_number(_environ.READ_THREADS, int, DEFAULT_READ_THREADS, least=1)
    cache_mb = _env_number(_environ.READ_CACHE_MB, float, DEFAULT_CACHE_BYTES / 2**20, least=0.0)
    max_connections = _env_number(_environ.MAX_CONNECTIONS, int, 512, least=1)
    interval_s = _env_number(_environ.FINDINGS_INTERVAL_S, float, 300.0, least=0.0)
    findings_config(os.environ)
    source_options = sources.environ_values()
    rules = owner_rules(args)
    # The Host header must name the service: its address (answered on every connection to
    # it), the name given as --host, or one the operator lists (correlator.api.HostCheck).
    # A wildcard address (0.0.0.0, ::) is no name: connections to it arrive on an interface's.
    own = [] if args.host in ("0.0.0.0", "::", "") else [args.host]  # noqa: S104 - compared
    allowed = [*own, *os.environ.get(_environ.ALLOWED_HOSTS, "").split(",")]
    with ExitStack() as held:
        # One Loki client for the service's life (its connections kept), closed at shutdown.
        pulls = _service_pulls(args, held) if args.loki is not None else None
        agent_logging.configure(service="correlator", layer="api")
        app = create_app(
            store,
            token=os.environ.get(_environ.TOKEN) or None,
            read_token=os.environ.get(_environ.READ_TOKEN) or None,
            max_body_bytes=max_body_bytes,
            body_timeout_s=body_timeout_s,
            read_threads=read_threads,
            cache_bytes=int(cache_mb * 2**20),
            allowed_hosts=[name.strip() for name in allowed if name.strip()],
            source_options=source_options,
            owner_rules=rules,
            loki=pulls,
        )
        if interval_s > 0:
            _start_findings_logger(store, interval_s)
        pulling = f"; timelines pulled from the Loki at {pulls.url} first" if pulls else ""
        print(
            f"correlator: serving {store.path} on http://{args.host}:{args.port}/ (API docs at "
            f"/docs){pulling}",
            file=sys.stderr,
        )
        serve(
            app,
            host=args.host,
            port=args.port,
            header_timeout_s=header_timeout_s,
            max_connections=max_connections,
        )
    return 0


def _service_pulls(args: argparse.Namespace, held: ExitStack) -> Pulls:
    """The service's pulls from the Loki of ``args.loki`` (``_loki_settings``), through one
    client that ``held`` closes."""
    from correlator._pulls import Pulls
    from correlator.logql import DEFAULT_BASE_SELECTOR
    from correlator.sources import loki

    settings = args.loki
    client = held.enter_context(
        loki.client(
            settings.get("url"), settings.get("tenant"), settings.get("username"),
            settings.get("ca_bundle"),
        )
    )  # fmt: skip
    return Pulls(client, base_selector=args.loki_selector or DEFAULT_BASE_SELECTOR)


def _env_number(name: str, kind: type[_Number], default: _Number, *, least: _Number) -> _Number:
    """The number in environment variable ``name``, or ``default`` when it is unset or empty.

    Args:
        name: the variable, one of ``correlator._environ``.
        kind: ``int`` or ``float``.
        default: the value when the variable is unset or empty.
        least: the smallest value accepted.

    Returns:
        The value.

    Raises:
        QueryError: the variable is set to something that is not a ``kind`` of at least
            ``least``; the message names the variable and its value.
    """
    from correlator.queries import number_setting

    text = os.environ.get(name, "").strip()
    if not text:
        return default
    return kind(number_setting(name, text, least=least, whole=kind is int))


def _start_findings_logger(store: Store, interval_s: float) -> None:
    """Log the open findings now and every ``interval_s`` from a daemon thread."""
    import threading

    from correlator import queries

    def loop() -> None:
        while True:
            try:
                queries.log_findings(queries.findings(store, time.time_ns())["findings"])
            except CorrelatorError as exc:
                print(f"correlator: findings could not be computed: {exc}", file=sys.stderr)
            time.sleep(interval_s)

    threading.Thread(target=loop, name="correlator-findings", daemon=True).start()


def _eval(args: argparse.Namespace) -> int:
    from correlator import evaluation, render

    live = not args.json and sys.stderr.isatty()

    def progress(result: evaluation.CaseResult) -> None:
        mark = "ok " if result.right else "BAD"
        print(f"  {mark} {result.case} ({result.seconds:.1f} s)", file=sys.stderr)

    report = evaluation.evaluate(
        [Path(d) for d in args.dirs], owner_rules(args), on_case=progress if live else None
    )
    if args.json:
        _print_json(report.as_dict())
    else:
        render.print_evaluation(report)
    unreadable = [r.case for r in report.results if r.got == "error"]
    if unreadable:
        print(f"correlator: cases that could not be read: {', '.join(unreadable)}", file=sys.stderr)
        return 2
    if report.false_alarms:
        names = ", ".join(r.case for r in report.false_alarms)
        print(f"correlator: an owner was named in a healthy case: {names}", file=sys.stderr)
        return 1
    if report.accuracy < args.fail_under:
        print(
            f"correlator: accuracy {report.accuracy:.1%} is under --fail-under "
            f"{args.fail_under:.1%}",
            file=sys.stderr,
        )
        return 1
    return 0


_COMMANDS = {
    "ingest": _ingest,
    "timeline": _timeline,
    "graph": _graph,
    "findings": _findings,
    "latency": _latency,
    "rejects": _rejects,
    "serve": _serve,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``correlator`` command.

    Args:
        argv: the arguments after the program name (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 nothing found or a source failed, 2 bad arguments or
        input (argparse's own errors exit with 2 as well, through ``SystemExit``).
    """
    args = parser().parse_args(argv)
    args.db = database(args)
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader went away (``correlator timeline | head``): what it read was what it
        # wanted. Python would report the pipe again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _port_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, in words, or None when it can."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"cannot listen on {host}: {exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} is in use on {host}; try --port {_free_port(host)}"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as probe:
        probe.bind((host if host not in ("", "0.0.0.0") else "127.0.0.1", 0))  # noqa: S104
        return int(probe.getsockname()[1])


def _run(args: argparse.Namespace) -> int:
    if args.command in ("serve", "demo") and not getattr(args, "no_serve", False):
        # Before anything is built or opened: uvicorn would say it in a JSON log line and exit
        # 3, with the store still open under it.
        busy = _port_in_use(args.host, args.port)
        if busy is not None:
            print(f"correlator: {busy}", file=sys.stderr)
            return 2
    try:
        args.loki = _loki_settings(args)
    except QueryError as exc:
        print(f"correlator: {exc}", file=sys.stderr)
        return 2
    # A timeline that pulls from Loki writes what it pulls, into a new database if need be.
    read_only = args.command in _READ_COMMANDS and args.loki is None
    # DuckDB creates a missing file on a read-write open: a mistyped --db would leave an
    # empty database behind and answer "no evidence". ingest, demo and serve (which takes
    # POST /v1/evidence) start from an empty database on purpose; the others only read.
    if read_only and not Path(args.db).exists():
        demo_db = Path(DEFAULT_DEMO_DB)
        hint = (
            f"; the demo's is {demo_db} (correlator --db {demo_db} {args.command} ...)"
            if demo_db.exists() and Path(args.db) != demo_db
            else ""
        )
        print(
            f"correlator: no database at {args.db}: ingest evidence first (correlator ingest)"
            f" or point --db / {_environ.DB} at one{hint}",
            file=sys.stderr,
        )
        return 2
    try:
        if args.command == "demo":
            from correlator import demo

            return demo.run(args, serve=main)
        if args.command == "eval":
            return _eval(args)
        if args.command == "ingest" and not Path(args.db).exists():
            # An ingest that can read none of its files must not leave an empty database
            # behind either: the next read would answer "no evidence" instead of "no database".
            from correlator.ingest import check_readable

            check_readable(Path(p) for p in args.paths or () if p != "-")
        with Store(args.db, read_only=read_only) as store:
            return _COMMANDS[args.command](args, store)
    except (QueryError, InputError) as exc:
        print(f"correlator: {exc}", file=sys.stderr)
        return 2
    except (NotFoundError, SourceError, CorrelatorError) as exc:
        print(f"correlator: {exc}", file=sys.stderr)
        return 1
