"""The ``settle`` command's arguments, alike for ``vigil jobs``, ``vigil tasks`` and
``vigil observers``: the three words of :class:`~vigil.contract.journal.Verdict`."""

from __future__ import annotations

import argparse
from typing import Any

from vigil.contract.journal import Verdict

FLAGS = {verdict: f"--{verdict.value.replace('_', '-')}" for verdict in Verdict}
"""``--done``, ``--done-rerun``, ``--not-done``."""


def add_settle(
    commands: Any,
    owner: str,
    id_name: str | None,
    *,
    done: str,
    done_rerun: str,
    not_done: str,
) -> None:
    """``settle OWNER [ID] --effect NAME --done|--done-rerun|--not-done``: a person's word on an
    UNCERTAIN record's effect (``owner`` "job" and ``id_name`` "tick", "task" and "id", or
    "observer" and None: an observer's record is the observer's own, across its generations)."""
    what = id_name or owner
    settle = commands.add_parser(
        "settle", help=f"say whether an UNCERTAIN {what}'s effect happened"
    )
    settle.add_argument(owner, help=f"the {owner}'s name")
    if id_name is not None:
        settle.add_argument(id_name, help=f"the UNCERTAIN {id_name}, as its record names it")
    settle.add_argument("--effect", required=True, help="the effect its record names")
    choice = settle.add_mutually_exclusive_group(required=True)
    helps = {Verdict.DONE: done, Verdict.DONE_RERUN: done_rerun, Verdict.NOT_DONE: not_done}
    for verdict, flag in FLAGS.items():
        choice.add_argument(
            flag,
            dest="verdict",
            action="store_const",
            const=verdict,
            help=helps[verdict],
        )


def flags() -> str:
    """The verdicts as a command line writes them: ``--done|--done-rerun|--not-done``."""
    return "|".join(FLAGS.values())


def verdict_of(args: argparse.Namespace) -> Verdict:
    return Verdict(args.verdict)
