"""The ``devstack`` command (``python -m devstack``).

::

    python -m devstack up                    start a stack in $DEVSTACK_DIR (default
                                             /tmp/devstack-<uid>); prints its addresses
    python -m devstack status                each process: running or not
    python -m devstack down                  stop everything, delete $DEVSTACK_DIR
    python -m devstack scenarios             the scenarios and their true owner layers
    python -m devstack scenario NAME [--json]
                                             run one (on the running stack, else on a stack
                                             brought up and down for it)
    python -m devstack run ROLE --dir DIR    internal: one role process (api, provider,
                                             worker, projector, node NODE_ID)

Exit status: 0 success (for ``scenario``: the verdict named the true owner layer), 1 a
scenario's verdict was wrong or the stack failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from devstack.config import DEFAULT_DIR, DEVSTACK_DIR_ENV, load

__all__ = ["main"]


def _directory(args: argparse.Namespace) -> Path:
    if getattr(args, "dir", None):
        return Path(args.dir)
    return Path(os.environ.get(DEVSTACK_DIR_ENV) or DEFAULT_DIR)


def _run_role(args: argparse.Namespace) -> int:
    config = load(Path(args.dir))
    if args.role == "api":
        from devstack import api

        api.serve(config)
    elif args.role == "provider":
        from devstack import provider

        provider.serve(config)
    elif args.role == "worker":
        from devstack import worker

        worker.run(config)
    elif args.role == "projector":
        from devstack import projector

        projector.run(config)
    elif args.role == "node":
        from devstack import node_agent

        if not args.node_id:
            print("devstack: run node needs NODE_ID", file=sys.stderr)
            return 2
        node_agent.run(config, args.node_id)
    return 0


def _up(directory: Path) -> int:
    from devstack.supervisor import Stack, StackError

    try:
        stack = Stack.up(directory)
    except StackError as exc:
        print(f"devstack: {exc}", file=sys.stderr)
        return 1
    config = stack.config
    print(f"devstack: up in {config.dir}")
    print(f"  ingress   {config.ingress_url} (CA: {config.ca_dir / 'ca.pem'})")
    print(f"  api       {config.api_url}")
    print(f"  provider  {config.provider_url}")
    print(f"  postgres  {config.dsn}")
    print(f"  loki      {config.loki_url}")
    print(f"  tenant token in {config.tokens_file}")
    return 0


def _down(directory: Path) -> int:
    from devstack.supervisor import Stack

    if not (directory / "stack.json").exists():
        print(f"devstack: no stack in {directory}", file=sys.stderr)
        return 0
    Stack.attach(directory).down()
    print(f"devstack: down; removed {directory}")
    return 0


def _status(directory: Path) -> int:
    from devstack.supervisor import Stack

    if not (directory / "stack.json").exists():
        print(f"devstack: no stack in {directory}")
        return 1
    stack = Stack.attach(directory)
    states = stack.status()
    for name, alive in states.items():
        print(f"  {name:<18} {'running' if alive else 'STOPPED'} (pid {stack.config.pids[name]})")
    return 0 if all(states.values()) else 1


def _scenarios() -> int:
    from devstack.scenarios import SCENARIOS

    for scenario in SCENARIOS.values():
        print(f"  {scenario.name:<26} {scenario.expected_owner_layer:<15} {scenario.summary}")
    return 0


def _scenario(directory: Path, name: str, as_json: bool) -> int:
    from devstack.harness import ScenarioError
    from devstack.scenarios import SCENARIOS, render, run_scenario
    from devstack.supervisor import Stack, StackError

    if name not in SCENARIOS:
        print(
            f"devstack: unknown scenario {name!r}; one of {', '.join(SCENARIOS)}", file=sys.stderr
        )
        return 2
    owned = not (directory / "stack.json").exists()
    try:
        stack = Stack.up(directory) if owned else Stack.attach(directory)
    except StackError as exc:
        print(f"devstack: {exc}", file=sys.stderr)
        return 1
    try:
        result = run_scenario(stack, SCENARIOS[name])
    except (ScenarioError, StackError) as exc:
        print(f"devstack: scenario {name} could not run: {exc}", file=sys.stderr)
        return 1
    finally:
        if owned:
            stack.down()
    if as_json:
        sys.stdout.write(orjson.dumps(result.as_json(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        render(result)
        if owned:
            print("  (the stack was brought up for this run and is gone with its evidence: run")
            print("   `python -m devstack up` first to keep both)")
    return 0 if result.correct else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devstack", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "down", "status"):
        command = sub.add_parser(name)
        command.add_argument("--dir", help=f"default ${DEVSTACK_DIR_ENV} or {DEFAULT_DIR}")
    sub.add_parser("scenarios", help="list the scenarios")
    scenario = sub.add_parser("scenario", help="run one scenario")
    scenario.add_argument("name")
    scenario.add_argument("--json", action="store_true", help="print the stable JSON result")
    scenario.add_argument("--dir")
    run = sub.add_parser("run", help="internal: run one role process")
    run.add_argument("role", choices=("api", "provider", "worker", "projector", "node"))
    run.add_argument("node_id", nargs="?")
    run.add_argument("--dir", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devstack``."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run_role(args)
    directory = _directory(args)
    if args.command == "up":
        return _up(directory)
    if args.command == "down":
        return _down(directory)
    if args.command == "status":
        return _status(directory)
    if args.command == "scenarios":
        return _scenarios()
    return _scenario(directory, args.name, args.json)
