"""What ``vigil jobs`` and ``vigil tasks`` share: the command groups that talk to a deployed
stack's resources directly (its outputs, tables and queues) instead of through the API.

Each group is ``vigil GROUP [--stack NAME] COMMAND ...``, has a ``redrive`` command for its
dead letters and counts with ``positive`` numbers; ``vigil_tools.cli`` runs both the same way
(one session, one error report). The group's module keeps only its own commands.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_group(groups: Any, name: str, help: str) -> Any:
    """``vigil NAME [--stack S] COMMAND``: the group's parser; returns its commands, to add to."""
    group = groups.add_parser(name, help=help)
    group.add_argument("--stack", help="the deployed stack's name (default: the --stage's)")
    return group.add_subparsers(dest="command", required=True)


def add_redrive(commands: Any, owner: str, *, help: str, limit: str) -> None:
    """``redrive OWNER [--limit 100]``: an owner's dead letters back (``limit``: its help)."""
    again = commands.add_parser("redrive", help=help)
    again.add_argument(owner, help=f"the {owner}'s name")
    again.add_argument("--limit", type=positive, default=100, help=limit)


def positive(raw: str) -> int:
    """A count on the command line (``--limit``, ``-n``, ``--timeout``): one or more."""
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
