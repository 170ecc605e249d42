"""Which options of a command say nothing about themselves in ``--help``."""

from __future__ import annotations

import argparse

__all__ = ["options_without_help"]


def options_without_help(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """``"COMMAND SUBCOMMAND --option"`` for every argument of ``parser`` and its subcommands
    that has no help text (``-h`` aside)."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += options_without_help(sub, f"{command} {name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    return missing
