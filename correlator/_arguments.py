"""The ``correlator`` command's arguments: the subcommands, their options and their help.

``correlator.cli`` runs what they ask for. ``ingest``'s source kinds, their options and what
their lines look like are the registry's (``correlator.sources``): each source's options are
added here as it declares them. Defaults that come from the environment (``CORRELATOR_DB``,
the ``CORRELATOR_LOKI_*`` settings, ``CORRELATOR_NGINX_TZ``, the ``CORRELATOR_FINDINGS_*``
thresholds) are named in the help, declared in ``_environ``, and read when the command runs
(:func:`database` for ``--db``, ``sources.flag_values`` for the sources' options).
"""

from __future__ import annotations

import argparse
import os
import textwrap
from typing import TYPE_CHECKING

from correlator import _environ, sources
from correlator.errors import InputError, QueryError
from correlator.logql import DEFAULT_BASE_SELECTOR
from correlator.queries import MAX_LIMIT, findings_config

if TYPE_CHECKING:
    from agent_logging.owner import OwnerRule

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_DEMO_DB",
    "database",
    "owner_rules",
    "parser",
]

DEFAULT_DB = "correlator.duckdb"
#: ``correlator demo``'s database unless ``--db`` names one: never ``$CORRELATOR_DB``, which
#: holds the evidence the demo must not replace.
DEFAULT_DEMO_DB = "correlator-demo.duckdb"


def database(args: argparse.Namespace) -> str:
    """The database a parsed command works on: ``--db``, else ``$CORRELATOR_DB`` (not for
    ``demo``), else the command's default file.

    Args:
        args: what :func:`parser` parsed.

    Returns:
        The path.
    """
    if args.db:
        return str(args.db)
    if args.command == "demo":
        return DEFAULT_DEMO_DB
    return os.environ.get(_environ.DB) or DEFAULT_DB


def owner_rules(args: argparse.Namespace) -> tuple[OwnerRule, ...]:
    """The owner table a command's verdicts apply: the rules file of ``--owner-rules``, else
    of ``$CORRELATOR_OWNER_RULES``, ahead of the built-in table.

    Args:
        args: what :func:`parser` parsed.

    Returns:
        The rules, in the order they are tried.

    Raises:
        InputError: the file is refused; the message names the file, the rule and the field.
    """
    from agent_logging.errors import ConfigurationError
    from agent_logging.owner import rules_with_defaults

    path = getattr(args, "owner_rules", None) or os.environ.get(_environ.OWNER_RULES) or None
    try:
        return rules_with_defaults(path)
    except ConfigurationError as exc:
        raise InputError(str(exc)) from exc


def _limit(text: str) -> int:
    """``--limit``: an integer from 1 to ``MAX_LIMIT``.

    Args:
        text: the argument as given.

    Returns:
        The limit.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not such an integer (argparse reports it and
            exits with status 2).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_LIMIT}, not {value}")
    return value


def _threshold(text: str) -> tuple[str, float]:
    """``--threshold``: ``NAME=SECONDS``, NAME a field of ``correlator.findings.FindingsConfig``.

    Args:
        text: the argument as given.

    Returns:
        ``(name, seconds)``.

    Raises:
        argparse.ArgumentTypeError: no ``=``, an unknown name, or a value that is not a
            number in the field's range (argparse reports it and exits with status 2).
    """
    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals:
        raise argparse.ArgumentTypeError(f"expected NAME=SECONDS, not {text!r}")
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{name}: expected a number of seconds, not {value!r}"
        ) from None
    try:
        findings_config({}, {name: seconds})  # the name and the range, checked in one place
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name, seconds


def _window(command: argparse.ArgumentParser, start: str, end: str) -> None:
    """``--from`` and ``--to``, each a time as ``queries.parse_time_ns`` reads it."""
    forms = "RFC 3339, nanoseconds since 1970, or now-1h"
    command.add_argument("--from", dest="from_", metavar="TIME", help=f"{start}: {forms}")
    command.add_argument("--to", metavar="TIME", help=f"{end}: {forms}")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


#: The ``loki`` source's reader options a timeline (and the service) takes to pull from Loki
#: first (its query is the pull's; its window is the timeline's ``--from`` and ``--to``, and
#: ``--since``: the service's timeline takes them as query parameters).
_TIMELINE_LOKI_OPTIONS = ("url", "tenant", "username", "ca_bundle")


def _loki_options(command: argparse.ArgumentParser, *, serve: bool = False) -> None:
    """The options for pulling an incident from a Loki (``correlator.loki_pull``): the ``loki``
    source's own settings and the stream selector; a timeline's window too (``--since``).

    Args:
        command: ``timeline``, or ``serve`` (``serve``: True), whose ``GET /v1/timeline``
            pulls before it answers and takes its window as query parameters.
    """
    pulls = (
        "GET /v1/timeline (and the web page) asks Loki for the identifier and, hop by hop, "
        "for the identifiers found with it, before it answers"
        if serve
        else "Loki is asked for the identifier and, hop by hop, for the identifiers found with it"
    )
    group = command.add_argument_group(
        "pulling the incident from Loki first",
        f"with --loki-url or ${_environ.LOKI_URL}, {pulls}; what comes back joins the database",
    )
    for option in sources.SOURCES["loki"].reader_options:
        if option.name in _TIMELINE_LOKI_OPTIONS:
            group.add_argument(
                option.flag, dest=option.dest, metavar=option.metavar, help=option.help
            )
    if not serve:
        group.add_argument(
            "--since",
            help="how far back from --to Loki is asked, e.g. 2h (default 1h), unless --from",
        )
    group.add_argument(
        "--loki-selector",
        metavar="LOGQL",
        help=f"the stream selector every query to Loki starts with (default "
        f'{DEFAULT_BASE_SELECTOR}); a narrower one, e.g. {{env="prod"}}, makes Loki read less',
    )


def _rules_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--owner-rules",
        metavar="FILE",
        help="a TOML file of owner rules tried before the built-in owner table (default "
        f"${_environ.OWNER_RULES})",
    )


def parser() -> argparse.ArgumentParser:
    """The ``correlator`` command's parser: every subcommand, each option with its help."""
    parser = argparse.ArgumentParser(
        prog="correlator", description="One incident timeline across five layers."
    )
    db_help = (
        f"DuckDB file (default ${_environ.DB} or ./{DEFAULT_DB}; for demo ./{DEFAULT_DEMO_DB}); "
        "before or after the subcommand"
    )
    parser.add_argument("--db", help=db_help)
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser(
        "ingest",
        help="read evidence into the database",
        description="Reads evidence files (or standard input) of one source kind into the "
        "database; re-ingesting the same input adds nothing.",
        epilog="source kinds, and what their lines look like:\n"
        + "\n".join(
            textwrap.fill(
                declared.looks_like,
                96,
                initial_indent=f"  {kind:<9} ",
                subsequent_indent=" " * 12,
            )
            for kind, declared in sources.SOURCES.items()
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument(
        "--source",
        required=True,
        metavar="KIND",
        help=f"one of {', '.join(sources.SOURCES)} (see below)",
    )
    ingest.add_argument("paths", nargs="*", help="files (.gz too), or - for standard input")
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.add_argument(
        "--workers",
        type=int,
        default=None,
        help="workers that parse the files once they add up to 64 MiB: threads for ndjson and"
        " agent (their native mapping runs without the GIL), processes for the other kinds"
        " (default: one per core, at most 4; 1 parses in the main thread)",
    )
    for _, option in sources.options():
        ingest.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)

    timeline = sub.add_parser("timeline", help="everything about one identifier, in order")
    timeline.add_argument(
        "--id",
        required=True,
        help="KEY=VALUE, e.g. allocation_id=a-9, or a bare value (a-9), tried as each "
        "identifier kind in turn as the web page does",
    )
    output = timeline.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the answer as JSON")
    output.add_argument("--html", metavar="FILE", help="write a self-contained page to FILE")
    _window(
        timeline,
        "only events at or after TIME (with a Loki, where the window asked starts)",
        "only events before TIME (with a Loki, where the window asked ends; default now)",
    )
    timeline.add_argument(
        "--limit",
        type=_limit,
        default=10_000,
        help=f"at most this many events, 1 to {MAX_LIMIT} (default 10000)",
    )
    _rules_option(timeline)
    _loki_options(timeline)

    graph = sub.add_parser("graph", help="identifier graph from one identifier (JSON)")
    graph.add_argument(
        "--id", required=True, help="KEY=VALUE, e.g. node_id=n-17, or a bare value (n-17)"
    )

    findings = sub.add_parser("findings", help="stuck lifecycles, drift and orphans")
    findings.add_argument("--json", action="store_true", help="print the findings as JSON")
    findings.add_argument("--now", help="reference time (default: now)")
    findings.add_argument(
        "--log", action="store_true", help="also log each finding through agent_logging"
    )
    findings.add_argument(
        "--threshold",
        type=_threshold,
        action="append",
        metavar="NAME=SECONDS",
        help="a deadline or threshold, overriding $CORRELATOR_FINDINGS_<NAME> (repeatable); "
        f"NAME one of {', '.join(_environ.FINDINGS_THRESHOLDS)} (critical_factor a multiple)",
    )

    rejects = sub.add_parser(
        "rejects",
        help="the lines ingest refused, newest first, with the file, line and reason",
    )
    rejects.add_argument("--json", action="store_true", help="print them as JSON")
    rejects.add_argument(
        "--limit", type=_limit, default=100, help=f"at most this many, 1 to {MAX_LIMIT} (100)"
    )

    latency = sub.add_parser("latency", help="per-phase durations by provider")
    latency.add_argument("--json", action="store_true", help="print the phases as JSON")

    serve = sub.add_parser("serve", help="the HTTP service and web page")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (8080)")
    _rules_option(serve)
    _loki_options(serve, serve=True)

    evaluate = sub.add_parser(
        "eval",
        help="replay incidents whose truth is known (a folder each, with truth.json) and score "
        "the verdicts",
        description="Replays each incident folder (evidence files named after their source "
        "kind, and a truth.json) into a scratch store, asks its seed's timeline and compares "
        "the verdict with the truth. Exits 1 when the accuracy is under --fail-under or a "
        "healthy case (truth none) was given an owner.",
    )
    evaluate.add_argument(
        "dirs", nargs="+", metavar="DIR", help="an incident folder, or a folder of them"
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument(
        "--fail-under",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="exit 1 when fewer than this share of the cases are right, 0 to 1 (default 0)",
    )
    _rules_option(evaluate)

    demo = sub.add_parser("demo", help="build a realistic incident, show it, serve it")
    demo.add_argument("--no-serve", action="store_true", help="print and exit")
    demo.add_argument(
        "--force",
        action="store_true",
        help="replace the database file even when it holds evidence that is not a demo's",
    )
    demo.add_argument("--host", default="127.0.0.1", help="address to serve on (127.0.0.1)")
    demo.add_argument("--port", type=int, default=8080, help="port to serve on (8080)")
    demo.add_argument("--seed", type=int, default=7, help="the incident's random seed (7)")
    # --db after the subcommand too (``correlator timeline --db X ...``): given there it wins,
    # absent there the one before the subcommand (or none) stands.
    for command in sub.choices.values():
        command.add_argument("--db", default=argparse.SUPPRESS, help=db_help)
    return parser
