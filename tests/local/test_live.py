"""``vigil local up``'s deliveries: Ctrl-C ends a pending retry delay at once (every delay waits on
the one stop event), so stopping never waits one out and the retry never runs."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.helpers.lambdas import deploy_function
from vigil_tools.emulator.lambda_runtime import AsyncInvocation
from vigil_tools.local.live import Deliveries, SerialLambda, TaskQueues, ttl_sweep_interval

HANDLER = "down_for_now"
DEADLINE = 30.0
"""Seconds a step may take before the test calls it stuck (the retry delay is 60 s)."""


class WatchedStop(threading.Event):
    """The stop event, telling the test when a delivery has started waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waited_on = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waited_on.set()
        return super().wait(timeout)


@pytest.fixture
def failing_function(aws: None, tmp_path: Path) -> Iterator[Any]:
    """A deployed function that fails every attempt (Lambda retries it twice, a minute apart)."""
    session = boto3.session.Session(region_name="us-east-1")
    deploy_function(
        session,
        tmp_path,
        HANDLER,
        "ATTEMPTS = []\ndef handler(event, context):\n"
        "    ATTEMPTS.append(event)\n    raise RuntimeError('down')\n",
    )
    yield session
    sys.path.remove(str(tmp_path))
    sys.modules.pop(HANDLER, None)


def test_stopping_ends_a_pending_retry_delay_at_once(failing_function: Any, tmp_path: Path) -> None:
    stop = WatchedStop()
    deliveries = Deliveries(stop, speed=1.0)
    runtime = SerialLambda(
        failing_function,
        now=lambda: datetime.now(UTC),
        advance=deliveries.delay,
        functions_dir=tmp_path,
    )
    delivered: list[AsyncInvocation] = []
    deliveries.submit(lambda: delivered.append(runtime.invoke_async("f", {"n": 1})))
    assert stop.waited_on.wait(DEADLINE), "the first attempt never failed"

    closing = threading.Thread(target=deliveries.close)
    closing.start()
    closing.join(DEADLINE)  # the delay is 60 s: only an interrupted wait ends before the deadline

    assert not closing.is_alive(), "close() waited out the retry delay"
    # nothing left for the interpreter to join at exit (it would wait the delay out)
    assert [t for t in threading.enumerate() if t.name.startswith("delivery")] == []
    assert sys.modules[HANDLER].ATTEMPTS == [{"n": 1}]  # the retry never ran
    assert delivered == []  # abandoned: no on-failure record either


def test_the_live_loop_delivers_the_tasks_queues_and_their_one_time_schedules(
    aws: None, tmp_path: Path
) -> None:
    """``vigil local up`` serves the queues: what an application sends is delivered to the
    mapped function, and a one-time schedule that is due sends its input, then deletes itself."""
    session = boto3.session.Session(region_name="us-east-1")
    module = "takes_tasks"
    client = deploy_function(
        session,
        tmp_path,
        module,
        "BODIES = []\ndef handler(event, context):\n"
        "    BODIES.extend(r['body'] for r in event['Records'])\n"
        "    return {'batchItemFailures': []}\n",
    )
    sqs = session.client("sqs")
    url = sqs.create_queue(QueueName="tasks")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    client.create_event_source_mapping(
        EventSourceArn=arn, FunctionName="f", FunctionResponseTypes=["ReportBatchItemFailures"]
    )
    scheduler = session.client("scheduler")
    scheduler.create_schedule_group(Name="vigil-tasks")
    now = datetime.now(UTC)
    for name, when in (("due", now - timedelta(seconds=1)), ("later", now + timedelta(hours=1))):
        scheduler.create_schedule(
            Name=name,
            GroupName="vigil-tasks",
            ScheduleExpression=f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})",
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Target={"Arn": arn, "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": name},
        )
    runtime = SerialLambda(
        session, now=lambda: datetime.now(UTC), advance=lambda _: None, functions_dir=tmp_path
    )
    queues = TaskQueues.of(session, runtime.invoke, {})
    sqs.send_message(QueueUrl=url, MessageBody="sent")
    try:
        batches = queues.due(lambda: now)
        assert sorted(sys.modules[module].BODIES) == ["due", "sent"]
        assert all(not b.failed for b in batches)
        assert queues.last == {"f": "ok"}
        left = scheduler.list_schedules()["Schedules"]
        assert [s["Name"] for s in left] == ["later"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)


@pytest.mark.parametrize(
    ("speed", "simulated"),
    [(1, timedelta(minutes=1)), (12, timedelta(minutes=1)), (120, timedelta(minutes=10))],
)
def test_expired_items_are_swept_once_a_simulated_minute_but_never_more_than_every_5_s(
    speed: float, simulated: timedelta
) -> None:
    """At ``--speed 120`` a sweep per simulated minute scanned every table twice a real second."""
    assert ttl_sweep_interval(speed) == simulated
    assert ttl_sweep_interval(speed).total_seconds() / speed >= 5
