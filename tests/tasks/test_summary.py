"""``vigil tasks summary``: every task's queue, those with dead letters first, filtered and paged.

The ranking and paging at 200 tasks are pure (depths given; milliseconds); the command itself
runs against the two tasks of ``tests.helpers.tasks`` on moto (about a second with the fixture).
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Stack
from tests.tasks.test_cli import Session, vigil
from vigil.listing import InvalidListing
from vigil.tasks.queues import QueueDepth
from vigil_tools.cli import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, main
from vigil_tools.tasks_summary import Queues, TaskState, state_of, summarize, summary_query

NAMES = [f"task-{i:03d}" for i in range(200)]


def depth(index: int) -> QueueDepth:
    """Every 10th task has dead letters (more the higher its index), every 4th a queue."""
    dead = index // 10 + 1 if index % 10 == 4 else 0
    waiting = index if index % 4 == 1 else 0
    return QueueDepth(waiting=waiting, delayed=0, in_flight=0, dead_letters=dead)


DEPTHS = {name: depth(i) for i, name in enumerate(NAMES)}


class Counted:
    """The two reads, from ``DEPTHS``, counting the queues each reads."""

    def __init__(self) -> None:
        self.reads: Counter[str] = Counter()
        self.queues = Queues(dead_letters=self.dead_letters, queued=self.queued)

    def dead_letters(self, names: Sequence[str]) -> dict[str, int]:
        self.reads["dead-letter queues"] += len(names)
        return {n: DEPTHS[n].dead_letters for n in names}

    def queued(self, names: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        self.reads["queues"] += len(names)
        return {n: (DEPTHS[n].waiting, DEPTHS[n].delayed, DEPTHS[n].in_flight) for n in names}


def walk(reads: Counted | None = None, **query: Any) -> list[list[str]]:
    reads = reads or Counted()
    pages, token = [], None
    while True:
        page = summarize(NAMES, reads.queues, summary_query(**query, token=token))
        for row in page.entries:
            assert row.depth == DEPTHS[row.task] and row.state is state_of(row.depth)
        pages.append([row.task for row in page.entries])
        token = page.next
        if token is None:
            return pages


def test_failing_first_most_dead_letters_first_then_by_name_each_task_once() -> None:
    reads = Counted()
    pages = walk(reads, limit=33)
    listed = [name for page in pages for name in page]
    assert sorted(listed) == NAMES and len(pages) == 7
    failing = sorted(
        (n for n in NAMES if DEPTHS[n].dead_letters), key=lambda n: -DEPTHS[n].dead_letters
    )
    assert listed[: len(failing)] == failing
    assert listed[len(failing) :] == [n for n in NAMES if n not in failing]
    # Every page ranks by every dead-letter queue; it reads the queues of its own tasks only.
    assert reads.reads == Counter({"dead-letter queues": 7 * 200, "queues": 200 - 20})


def test_filters_by_state_and_prefix_page_only_what_matches() -> None:
    reads = Counted()
    failing = [n for page in walk(reads, status="failing", limit=7) for n in page]
    assert len(failing) == 20 and all(DEPTHS[n].dead_letters for n in failing)
    assert reads.reads == Counter({"dead-letter queues": 3 * 200})  # no queue read
    busy = [n for page in walk(status="busy") for n in page]
    assert busy == [n for n in NAMES if DEPTHS[n].waiting and not DEPTHS[n].dead_letters]
    under = [n for page in walk(status="busy,IDLE", prefix="task-0") for n in page]
    assert len(under) == 90 and all(n.startswith("task-0") for n in under)
    with pytest.raises(InvalidListing, match="status: unknown LATE; one or more of FAILING"):
        summary_query(status="late")


def test_the_command_reads_each_queue_once_and_shows_dead_letters_first(stack: Stack) -> None:
    plain, ordered = stack.catalog.spec(PLAIN), stack.catalog.spec(ORDERED)
    stack.sqs.send_message(QueueUrl=plain.dead_letter_url, MessageBody="{}")
    stack.sqs.send_message(
        QueueUrl=ordered.queue_url,
        MessageBody="{}",
        MessageGroupId="g",
        MessageDeduplicationId="d",
    )
    requests: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        requests[model.name] += 1

    stack.sqs.meta.events.register("before-call.sqs.*", count)
    code, out, err = vigil(stack, "summary")
    assert (code, err) == (EXIT_OK, "")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["TASK", "STATE", "WAITING", "DELAYED", "RUNNING", "DEAD", "LETTERS"]
    assert rows[1] == [PLAIN, "FAILING", "0", "0", "0", "1"]
    assert rows[2] == [ORDERED, "BUSY", "1", "0", "0", "0"]
    assert rows[3] == ["2", "of", "2", "matching"]
    # Each dead-letter queue (the ranking), the queue of each task shown that has none.
    assert requests == Counter({"GetQueueAttributes": 3})

    listed = json_summary(stack, "--status", "busy")
    assert [t["task"] for t in listed["tasks"]] == [ORDERED]
    assert listed["tasks"][0]["state"] == TaskState.BUSY and listed["next"] is None


def json_summary(stack: Stack, *argv: str) -> Any:
    out = io.StringIO()
    assert main(["--json", "tasks", "summary", *argv], session=Session(stack), stdout=out) == 0
    return json.loads(out.getvalue())


def test_bad_filters_and_tokens_are_clear_errors(stack: Stack) -> None:
    code, _, err = vigil(stack, "summary", "--status", "late")
    assert code == EXIT_API_ERROR
    assert "tasks summary: --status: unknown LATE; one or more of FAILING, BUSY, IDLE" in err
    code, _, err = vigil(stack, "summary", "--next", "garbage")
    assert code == EXIT_API_ERROR and "--next: not a page token" in err
    code, _, err = vigil(stack, "summary", "--limit", "0")
    assert code == EXIT_USAGE and "must be from 1 to 500" in err
    code, _, err = vigil(stack, "summary", "--prefix", "Task")
    assert code == EXIT_API_ERROR and "'Task' starts no valid name" in err
