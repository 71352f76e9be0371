"""``vigil tasks summary``: every task's queue at a glance, the ones with dead letters first.

    vigil [--json] tasks summary [--status FAILING,BUSY,IDLE] [--prefix P] [--limit 50] [--next T]

A task is ``FAILING`` while its dead-letter queue holds messages (runs out of retries, or
messages that could not be tasks: ``vigil tasks redrive`` hands them back), ``BUSY`` while its
queue holds any (waiting, delayed or running), else ``IDLE``. Listed failing first (the most
dead letters first), then the rest by name; paged by ``vigil.listing``, so a walk through the
pages shows each task once.

Reads: the tasks catalog once, then one GetQueueAttributes per task the prefix selects (its
dead-letter queue: what ranks it) and one per task shown (its queue: what it holds), or per task
selected when the filter names ``BUSY`` or ``IDLE``. SQS has no batch read of attributes, so they
go ``READERS`` at a time. The counts are SQS's approximate ones, as they are now; the age of the
oldest message is a CloudWatch metric (the task's alarm and its row on its shard's dashboard),
not read here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, TextIO, TypeVar

from vigil.contract.tasks import TASK_NAME
from vigil.listing import Page, Query
from vigil.tasks.catalog import Catalog
from vigil.tasks.queues import QueueDepth, TaskQueue
from vigil_tools.listing import add_list_arguments, footer
from vigil_tools.tables import render_table

READERS = 16
"""Requests in flight at once (to AWS, 200 of them take about a sixteenth of their one-by-one
time; the in-process emulator serves them one at a time whatever this is)."""
T = TypeVar("T")


class TaskState(StrEnum):
    FAILING = "FAILING"
    BUSY = "BUSY"
    IDLE = "IDLE"


STATES = [state.value for state in TaskState]


@dataclass(frozen=True)
class TaskRow:
    task: str
    state: TaskState
    depth: QueueDepth

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "state": self.state.value, **asdict(self.depth)}


@dataclass(frozen=True)
class Queues:
    """The two reads a summary makes, each for many tasks at once."""

    dead_letters: Callable[[Sequence[str]], Mapping[str, int]]
    queued: Callable[[Sequence[str]], Mapping[str, tuple[int, int, int]]]
    """Waiting, delayed and in flight."""


def state_of(depth: QueueDepth) -> TaskState:
    if depth.dead_letters:
        return TaskState.FAILING
    if depth.waiting or depth.delayed or depth.in_flight:
        return TaskState.BUSY
    return TaskState.IDLE


def summary_query(
    status: Any = None,
    prefix: str | None = None,
    limit: int | None = None,
    token: str | None = None,
) -> Query:
    return Query.parse(STATES, TASK_NAME, status=status, prefix=prefix, limit=limit, token=token)


def summarize(names: Sequence[str], queues: Queues, query: Query) -> Page[TaskRow]:
    """One page: ranked by the dead letters of every task under the prefix; the queues read are
    those of the page's tasks, unless the filter needs every task's (``BUSY``, ``IDLE``)."""
    selected = [name for name in names if name.startswith(query.prefix)]
    dead = queues.dead_letters(selected)
    calm = [name for name in selected if not dead[name]]
    every = bool(query.statuses - {TaskState.FAILING})
    queued = dict(queues.queued(calm)) if every else {}

    def depth(name: str) -> QueueDepth | None:
        """What is known of the task: None while its queue is not read."""
        counts = (0, 0, 0) if dead[name] else queued.get(name)
        return QueueDepth(*counts, dead_letters=dead[name]) if counts is not None else None

    def wanted(name: str) -> bool:
        if dead[name]:
            return not query.statuses or TaskState.FAILING in query.statuses
        known = depth(name)  # read for every calm task when a filter names BUSY or IDLE
        return not query.statuses or (known is not None and state_of(known) in query.statuses)

    ranked = (
        ((0, -dead[name]) if dead[name] else (1, 0), name, name)
        for name in selected
        if wanted(name)
    )
    page = query.page(names, ranked)
    queued |= queues.queued(
        [name for name in page.entries if name not in queued and not dead[name]]
    )
    rows = [
        TaskRow(name, state_of(known), known) for name in page.entries if (known := depth(name))
    ]
    return Page(rows, page.next, page.matching)


def sqs_queues(sqs: Any, catalog: Catalog, readers: int = READERS) -> Queues:
    """:class:`Queues` through ``vigil.tasks.queues`` (one GetQueueAttributes a queue)."""

    def queue(name: str) -> TaskQueue:
        spec = catalog.spec(name)
        return TaskQueue(sqs, spec.queue_url, spec.dead_letter_url)

    return Queues(
        dead_letters=lambda names: _each(names, lambda n: queue(n).dead_letters(), readers),
        queued=lambda names: _each(names, lambda n: queue(n).queued(), readers),
    )


def _each(names: Sequence[str], read: Callable[[str], T], readers: int) -> dict[str, T]:
    if readers <= 1 or len(names) <= 1:
        return {name: read(name) for name in names}
    with ThreadPoolExecutor(max_workers=min(readers, len(names))) as pool:
        return dict(zip(names, pool.map(read, names), strict=True))


def add_parser(commands: Any) -> None:
    add_list_arguments(
        commands.add_parser("summary", help="every task's queue, those with dead letters first"),
        STATES,
    )


def run(
    args: argparse.Namespace, catalog: Catalog, sqs: Any, out: TextIO, *, as_json: bool
) -> Page[TaskRow]:
    query = summary_query(args.status, args.prefix, args.limit, args.next)
    page = summarize(sorted(catalog), sqs_queues(sqs, catalog), query)
    if as_json:
        listed = {"tasks": [r.to_json() for r in page.entries], "next": page.next}
        out.write(json.dumps({**listed, "matching": page.matching}, indent=2) + "\n")
        return page
    rows = [
        [
            r.task,
            r.state.value,
            str(r.depth.waiting),
            str(r.depth.delayed),
            str(r.depth.in_flight),
            str(r.depth.dead_letters),
        ]
        for r in page.entries
    ]
    header = ["TASK", "STATE", "WAITING", "DELAYED", "RUNNING", "DEAD LETTERS"]
    out.write(render_table(header, rows) + "\n")
    out.write(footer("tasks summary", args, page) + "\n")
    return page
