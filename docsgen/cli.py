"""``reference/cli.md``: every ``vigil`` command, argument and help text, walked from the argparse
parser ``vigil_tools.cli.build_parser`` builds (the one ``vigil`` runs)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from docsgen.markdown import anchor, code, heading, page, table


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    """``("jobs", "history")`` for ``vigil jobs history``."""
    help: str
    parser: argparse.ArgumentParser


def parser() -> argparse.ArgumentParser:
    from vigil_tools.cli import build_parser

    return build_parser()


def commands(root: argparse.ArgumentParser | None = None) -> list[Command]:
    """Every command, the root's first, depth first in the parser's own order."""
    top = root or parser()
    return [Command((), top.description or "", top), *_below(top, ())]


def _below(node: argparse.ArgumentParser, words: tuple[str, ...]) -> Iterator[Command]:
    for action in node._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, child in action.choices.items():
            path = (*words, name)
            yield Command(path, helps.get(name, ""), child)
            yield from _below(child, path)


def arguments(command: Command) -> list[argparse.Action]:
    """What one types after the command's words (``-h`` and the subcommand choice aside)."""
    return [
        action
        for action in command.parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def render() -> str:
    found = commands()
    return page(
        "CLI",
        "`vigil` operates a deployed stack's jobs, tasks and observers (and the local stack). "
        "Options of `vigil` itself (`--stage`, `--endpoint`, `--region`, `--json`) go before the "
        "command: `vigil --stage dev jobs list`. Generated from its argparse parser.",
        *(_command(command) for command in found),
    )


def _command(command: Command) -> str:
    name = " ".join(("vigil", *command.words))
    text = heading(2, code(name), anchor("vigil", *command.words)) + "\n"
    if command.help:
        text += f"{command.help}\n\n"
    subcommands = [
        choice
        for action in command.parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action.choices
    ]
    if subcommands:
        text += "Commands: " + ", ".join(code(f"{name} {sub}") for sub in subcommands) + "\n\n"
    rows = [_row(action) for action in arguments(command)]
    if rows:
        text += table(("Argument", "Meaning", "Default", "Required"), rows)
    return text


def _row(action: argparse.Action) -> tuple[str, str, str, str]:
    if action.option_strings:
        flag = ", ".join(action.option_strings)
        takes = action.nargs != 0
        shown = f"{flag} {action.metavar or action.dest.upper()}" if takes else flag
    else:
        shown = action.metavar if isinstance(action.metavar, str) else action.dest
    meaning = action.help or ""
    if action.choices is not None:
        meaning += (
            (" " if meaning else "")
            + "One of "
            + ", ".join(code(str(choice)) for choice in action.choices)
        )
    default = action.default
    shown_default = "" if default in (None, False, argparse.SUPPRESS) else code(str(default))
    required = "yes" if action.required else "no"
    return code(shown), meaning, shown_default, required
