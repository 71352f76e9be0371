"""The ``settle`` command's arguments, alike for ``vigil jobs``, ``vigil tasks`` and
``vigil observers``."""

from __future__ import annotations

from typing import Any


def add_settle(commands: Any, owner: str, id_name: str | None, *, done: str, not_done: str) -> None:
    """``settle OWNER [ID] --effect NAME --done|--not-done``: a person's word on an UNCERTAIN
    record's effect (``owner`` "job" and ``id_name`` "tick", "task" and "id", or "observer" and
    None: an observer's record is the observer's own, across its generations)."""
    what = id_name or owner
    settle = commands.add_parser(
        "settle", help=f"say whether an UNCERTAIN {what}'s effect happened"
    )
    settle.add_argument(owner, help=f"the {owner}'s name")
    if id_name is not None:
        settle.add_argument(id_name, help=f"the UNCERTAIN {id_name}, as its record names it")
    settle.add_argument("--effect", required=True, help="the effect its record names")
    verdict = settle.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--done", action="store_true", help=done)
    verdict.add_argument("--not-done", action="store_true", help=not_done)
