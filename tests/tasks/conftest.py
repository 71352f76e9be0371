"""Tasks fixtures: a tasks table, two tasks' queues and dead-letter queues, on moto."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from tests.conftest import REGION
from tests.helpers.tables import create_tasks_table
from tests.helpers.tasks import Counting, Stack, build_stack
from vigil.clock import ManualClock
from vigil.tasks import task
from vigil.tasks.guard import Body


@pytest.fixture
def stack(dynamodb: Any, clock: ManualClock) -> Stack:
    sqs = boto3.client("sqs", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    scheduler = boto3.client("scheduler", region_name=REGION)
    scheduler.create_schedule_group(Name="vigil-tasks")
    table = create_tasks_table(dynamodb)
    built = build_stack(dynamodb, sqs, events, scheduler, clock, table)
    built.s3 = boto3.client("s3", region_name=REGION)
    built.results_bucket = (
        built.s3.create_bucket(Bucket="vigil-task-results") and "vigil-task-results"
    )
    return built


HandlerFactory = Callable[..., Any]


@pytest.fixture
def make_handler(stack: Stack) -> HandlerFactory:
    """A task's handler as one container runs it: its own guard, the test's clock (its sleeps
    advance the clock), and counting clients the test can read back."""

    def make(body: Body, task_name: str = "send-receipt", **overrides: Any) -> Any:
        dynamodb = overrides.pop("dynamodb", None) or Counting(stack.dynamodb)
        sqs = overrides.pop("sqs", None) or Counting(stack.sqs)
        events = overrides.pop("events", None) or Counting(stack.events)
        s3 = overrides.pop("s3", None) or stack.s3
        scheduler = overrides.pop("scheduler", None) or stack.scheduler
        children = overrides.pop("children", None)
        handler = task(
            body,
            settings=stack.settings(task_name, **overrides),
            dynamodb=dynamodb,
            sqs=sqs,
            events=events,
            s3=s3,
            scheduler=scheduler,
            children=children,
            clock=stack.clock,
            sleep=lambda seconds: stack.clock.advance(seconds),
        )
        handler.dynamodb, handler.sqs, handler.events = dynamodb, sqs, events
        return handler

    return make
