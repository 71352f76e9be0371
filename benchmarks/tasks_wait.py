"""Requests and dollars per ``vigil.tasks.wait``: the polls a waiter makes for a task that ends
after a given time, counted on moto from botocore's own ``before-call`` events, with the read
units its records cost and how late the answer comes after the task ended (the backoff's price).

Each row enqueues tasks with ``vigil.tasks``, runs them through the real consumer (``@task``)
when the waiter's simulated clock reaches their end, and waits with the default
:class:`~vigil.tasks.PollBackoff`; the counted polls are checked against
``PollBackoff.polls`` (what the docs promise).

    python -m benchmarks.tasks_wait
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.offline import REGION, create_tasks_table, offline_aws
from benchmarks.tasks_requests import PRICE, item_size
from vigil.clock import ManualClock
from vigil.dynamo import to_wire as wire
from vigil.tasks import PollBackoff, enqueue
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.decorator import task
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import task_key
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.sqs_event import sqs_records

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TASK = "send-receipt"
WAITS = 20
ROWS: tuple[tuple[str, float, float], ...] = (
    ("done before the wait", 0.0, 60.0),
    ("done after 1 s", 1.0, 60.0),
    ("done after 5 s", 5.0, 60.0),
    ("done after 30 s", 30.0, 60.0),
    ("done after 2 min", 120.0, 300.0),
    ("never done (timeout 60 s)", math.inf, 60.0),
)
RESULT = {"receipt": "R-0123456789", "order": "o-0", "email": "buyer@example.com", "total": 4200}


def _world() -> tuple[Any, Any, str, Catalog]:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    table = "vigil-tasks"
    create_tasks_table(dynamodb, table)
    queue = sqs.create_queue(QueueName=TASK)["QueueUrl"]
    dead = sqs.create_queue(QueueName=f"{TASK}-dlq")["QueueUrl"]
    spec = TaskSpec(name=TASK, queue_url=queue, dead_letter_url=dead, table=table)
    return dynamodb, sqs, table, Catalog({TASK: spec})


def measure_row(done_after_s: float, timeout_s: float, waits: int = WAITS) -> dict[str, float]:
    """Mean polls, read units and lateness per wait for tasks ending ``done_after_s`` after the
    wait begins (or never)."""
    dynamodb, sqs, table, catalog = _world()
    spec = catalog.spec(TASK)
    clock = ManualClock(START)
    calls: Counter[str] = Counter()
    dynamodb.meta.events.register(
        "before-call.dynamodb.GetItem", lambda **_: calls.update(["GetItem"])
    )

    def step(seconds: float) -> None:
        clock.advance(seconds)

    handler = task(
        lambda run, payload: RESULT,
        settings=TaskSettings(
            task=TASK, table=table, queue_url=spec.queue_url, dead_letter_url=spec.dead_letter_url
        ),
        dynamodb=dynamodb,
        sqs=sqs,
        events=boto3.client("events", region_name=REGION),
        clock=clock,
        sleep=step,
    )
    pending: list[datetime] = []

    def deliver() -> None:
        if pending and clock() >= pending[0]:
            pending.clear()
            answer = sqs.receive_message(QueueUrl=spec.queue_url, MaxNumberOfMessages=10)
            batch = sqs_records(answer.get("Messages", []))
            if batch:
                handler({"Records": batch}, LambdaContext())

    def sleep(seconds: float) -> None:
        clock.advance(seconds)
        deliver()

    client = TaskClient(catalog, sqs=sqs, dynamodb=dynamodb, clock=clock, sleep=sleep)
    polls = late = units = 0.0
    for i in range(waits):
        handle = enqueue(TASK, {"order": f"o-{i}"}, key=f"o-{i}", client=client)
        begun = clock()
        if math.isfinite(done_after_s):
            pending.append(begun + timedelta(seconds=done_after_s))
            deliver()
        before = calls["GetItem"]
        with contextlib.suppress(TimeoutError):
            handle.wait(timeout=timeout_s)
        made = calls["GetItem"] - before
        expected = PollBackoff().polls(done_after_s, timeout_s)
        if made != expected:
            raise AssertionError(f"{made} polls, the docs promise {expected}")
        polls += made
        if math.isfinite(done_after_s):
            late += (clock() - begun).total_seconds() - done_after_s
        item = dynamodb.get_item(TableName=table, Key=wire(task_key(TASK, f"o-{i}"))).get("Item")
        units += made * max(1, math.ceil(item_size(item) / 4096))  # strongly consistent
        clock.advance(3600)  # the next wait on its own
    return {"polls": polls / waits, "rru": units / waits, "late_s": late / waits}


def run() -> str:
    offline_aws()
    lines = [
        f"| a wait (`wait(task, id, timeout)`, default backoff; mean of {WAITS}) | GetItem "
        "requests | read units | $ per million waits | answered after the task ended |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, done_after_s, timeout_s in ROWS:
        with mock_aws():
            row = measure_row(done_after_s, timeout_s)
        dollars = row["rru"] * PRICE["rru"]
        late = f"{row['late_s']:.2f} s" if math.isfinite(done_after_s) else "n/a"
        lines.append(f"| {name} | {row['polls']:g} | {row['rru']:g} | {dollars:.2f} | {late} |")
    lines += [
        "",
        f"Priced at ${PRICE['rru']} per million read units (DynamoDB on-demand, us-east-1, "
        f"{datetime.now(UTC):%Y-%m-%d}; approximate): a poll is one strongly consistent GetItem "
        "of a record under 4 KB, one read unit (a result stored in S3 adds one GET, $0.40 per "
        "million, when the wait answers). The backoff starts at 0.25 s and doubles to 5 s apart, "
        f"so a wait of a minute makes at most {PollBackoff().polls(math.inf, 60)} polls and "
        "answers at most 5 s after the task ended. Beside it, a completion event is $1.00 per million tasks whatever the number of "
        'waiters (`completion_events="all"`): for waits of minutes, or many waiters, subscribe.',
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
