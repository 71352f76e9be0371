"""What ``vigil jobs list`` and ``vigil tasks summary`` share: their filters and paging flags,
and the line under a page that says how to read the next one (``vigil.listing`` pages them)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import Any

from vigil.listing import DEFAULT_LIMIT, MAX_LIMIT, Page


def add_list_arguments(parser: Any, states: Sequence[str]) -> None:
    parser.add_argument(
        "--status",
        action="append",
        metavar="STATE[,STATE]",
        help=f"only these states (any case; repeat or comma-separate): {', '.join(states)}",
    )
    parser.add_argument("--prefix", help="only names that start with this")
    parser.add_argument("--limit", type=_page_size, default=DEFAULT_LIMIT, help="entries per page")
    parser.add_argument("--next", help="the page token a previous page printed")


def footer(command: str, args: argparse.Namespace, page: Page[Any]) -> str:
    """``N matching``, and the command for the next page (the same filters, its token)."""
    shown = len(page.entries)
    line = f"{shown} of {page.matching} matching"
    if page.next is None:
        return line
    again = [f"--status={','.join(args.status)}"] if args.status else []
    again += [f"--prefix={args.prefix}"] if args.prefix else []
    again += [f"--limit={args.limit}"] if args.limit != DEFAULT_LIMIT else []
    flags = " ".join(shlex.quote(flag) for flag in again)
    return f"{line}; more: vigil {command} {flags + ' ' if flags else ''}--next {page.next}"


def _page_size(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {raw!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_LIMIT}")
    return value
