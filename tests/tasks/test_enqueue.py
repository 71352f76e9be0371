"""``enqueue`` and ``cancel``: every bad input refused with nothing sent or written; the message
first, then the record; delays through SQS, later starts through a one-time schedule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack
from vigil.contract.tasks import ENVELOPE_KEY, TaskStatus
from vigil.tasks import InvalidTask, NotCancellable, UnknownTask
from vigil.tasks.envelope import deduplication_id, parse, schedule_name

BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown task", {"task": "send-reciept"}, "the tasks are: provision-tenant, send-receipt"),
    ("payload not JSON", {"payload": {"when": datetime(2026, 1, 1)}}, "not JSON-serializable"),
    ("payload NaN", {"payload": {"x": float("nan")}}, "not JSON-serializable"),
    ("payload not an object", {"payload": ["a"]}, "must be a JSON object"),
    ("payload over 256 KiB", {"payload": {"blob": "x" * 262_144}}, "of SQS's 256 KiB"),
    ("key with a space", {"key": "order 1"}, "invalid key"),
    ("key too long", {"key": "k" * 129}, "invalid key"),
    ("key empty", {"key": ""}, "invalid key"),
    # A task's id is one segment of its API path (GET /tasks/{task}/{id}): no '/'.
    ("key with a slash", {"key": "tenant/1"}, "no '/'"),
    ("negative delay", {"delay": -1}, "must not be negative"),
    ("negative timedelta", {"delay": timedelta(seconds=-5)}, "must not be negative"),
    ("delay as text", {"delay": "60"}, "timedelta or seconds"),
    ("delay as bool", {"delay": True}, "timedelta or seconds"),
    ("at in the past", {"at": datetime(2026, 11, 22, 11, 59, tzinfo=UTC)}, "in the past"),
    ("at without zone", {"at": datetime(2026, 11, 22, 13, 0)}, "time zone"),
    ("delay and at", {"delay": 5, "at": datetime(2026, 11, 23, tzinfo=UTC)}, "not both"),
    ("group on a plain task", {"group": "tenant-1"}, "not ordered"),
    ("delay on an ordered task", {"task": ORDERED, "delay": 60}, "no per-message delay"),
    (
        "at on an ordered task",
        {"task": ORDERED, "at": datetime(2026, 11, 23, tzinfo=UTC)},
        "no per-message delay",
    ),
    ("invalid group", {"task": ORDERED, "group": "tenant 1"}, "invalid group"),
]


@pytest.mark.parametrize(
    ("case", "arguments", "message"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_is_refused_with_nothing_sent_or_written(
    stack: Stack, case: str, arguments: dict[str, Any], message: str
) -> None:
    sqs, dynamodb, scheduler = (
        Counting(stack.sqs),
        Counting(stack.dynamodb),
        Counting(stack.scheduler),
    )
    client = stack.client(sqs=sqs, dynamodb=dynamodb, scheduler=scheduler)
    call = {"task": PLAIN, "payload": {"order": "o-1"}} | arguments
    with pytest.raises(InvalidTask, match=message):
        client.enqueue(call.pop("task"), call.pop("payload"), **call)
    assert (sqs.calls, dynamodb.calls, scheduler.calls) == ([], [], [])
    assert stack.items() == []


def test_an_unknown_task_is_its_own_error_naming_the_known_ones(stack: Stack) -> None:
    with pytest.raises(UnknownTask) as raised:
        stack.client().enqueue("nope", {})
    assert raised.value.field == "task"
    assert "provision-tenant, send-receipt" in str(raised.value)


def test_enqueue_sends_the_message_then_writes_the_queued_record(stack: Stack) -> None:
    sqs, dynamodb = Counting(stack.sqs), Counting(stack.dynamodb)
    task_id = stack.client(sqs=sqs, dynamodb=dynamodb).enqueue(PLAIN, {"order": "o-1"}, key="o-1")

    assert task_id == "o-1"
    assert [name for name, _ in sqs.calls] == ["send_message"]
    # the key's record read (one key, one request), then the record written after the message
    assert [name for name, _ in dynamodb.calls] == ["get_item", "put_item"]
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.attempts, record.enqueued_at) == (
        TaskStatus.QUEUED,
        0,
        "2026-11-22T12:00:00.000Z",
    )
    envelope = parse(stack.messages(stack.catalog.spec(PLAIN).queue_url)[0]["Body"], PLAIN)
    assert (envelope.id, envelope.payload, envelope.due_at) == ("o-1", {"order": "o-1"}, None)


def test_without_a_key_each_enqueue_is_a_new_task(stack: Stack) -> None:
    client = stack.client()
    first, second = client.enqueue(PLAIN, {}), client.enqueue(PLAIN, {})
    assert first != second and len(first) == 32
    assert len(stack.items()) == 2


def test_the_same_key_again_leaves_the_record_as_it_is(stack: Stack) -> None:
    client = stack.client()
    client.enqueue(PLAIN, {"n": 1}, key="o-1")
    client.cancel(PLAIN, "o-1")
    assert client.enqueue(PLAIN, {"n": 1}, key="o-1") == "o-1"
    assert client.get(PLAIN, "o-1").status is TaskStatus.CANCELLED


def test_a_delay_within_15_minutes_is_the_queues_delay(stack: Stack) -> None:
    sqs = Counting(stack.sqs)
    stack.client(sqs=sqs).enqueue(PLAIN, {}, key="later", delay=timedelta(minutes=5))
    (sent,) = sqs.of("send_message")
    assert sent["DelaySeconds"] == 300
    assert stack.client().get(PLAIN, "later").due_at == "2026-11-22T12:05:00.000Z"


def test_a_start_beyond_15_minutes_is_a_one_time_schedule_that_deletes_itself(
    stack: Stack,
) -> None:
    sqs, scheduler = Counting(stack.sqs), Counting(stack.scheduler)
    client = stack.client(sqs=sqs, scheduler=scheduler)
    at = datetime(2026, 11, 22, 15, 30, tzinfo=UTC)
    client.enqueue(PLAIN, {"order": "o-9"}, key="o-9", at=at)
    client.enqueue(PLAIN, {"order": "o-9"}, key="o-9", at=at)  # the same request: its record
    client.send(client.plan(PLAIN, {"order": "o-9"}, key="o-9", at=at))  # racing: Conflict

    assert sqs.calls == []
    name = schedule_name(PLAIN, "o-9")
    assert len(name) <= 64
    schedule = stack.scheduler.get_schedule(Name=name, GroupName="vigil-tasks")
    assert schedule["ScheduleExpression"] == "at(2026-11-22T15:30:00)"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == "arn:aws:sqs:us-east-1:123456789012:vigil-send-receipt"
    assert json.loads(schedule["Target"]["Input"])[ENVELOPE_KEY]["id"] == "o-9"
    # A schedule that cannot send (the queue gone, the role broken) keeps retrying for a day,
    # then leaves the task in its dead-letter queue (alarmed, redrivable), never silently QUEUED.
    dead_letters = "arn:aws:sqs:us-east-1:123456789012:vigil-send-receipt-dlq"
    assert schedule["Target"]["DeadLetterConfig"] == {"Arn": dead_letters}
    assert schedule["Target"]["RetryPolicy"] == {
        "MaximumEventAgeInSeconds": 86_400,
        "MaximumRetryAttempts": 185,
    }
    assert len(scheduler.of("create_schedule")) == 2

    client.cancel(PLAIN, "o-9")  # a cancelled task's schedule goes too
    with pytest.raises(stack.scheduler.exceptions.ResourceNotFoundException):
        stack.scheduler.get_schedule(Name=name, GroupName="vigil-tasks")


def test_an_ordered_task_goes_to_its_group_with_a_deduplication_id(stack: Stack) -> None:
    sqs = Counting(stack.sqs)
    client = stack.client(sqs=sqs)
    client.enqueue(ORDERED, {"tenant": "t-1"}, key="t-1-create", group="t-1")
    client.enqueue(ORDERED, {"tenant": "t-2"}, key="t-2-create")
    first, second = sqs.of("send_message")
    assert (first["MessageGroupId"], second["MessageGroupId"]) == ("t-1", ORDERED)
    assert first["MessageDeduplicationId"] == deduplication_id(ORDERED, "t-1-create")
    assert "DelaySeconds" not in first
    assert client.get(ORDERED, "t-1-create").group == "t-1"


def test_cancel_refuses_a_task_that_started_or_ended_naming_its_status(stack: Stack) -> None:
    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-1")
    client.cancel(PLAIN, "o-1")
    with pytest.raises(NotCancellable, match="is CANCELLED"):
        client.cancel(PLAIN, "o-1")
    with pytest.raises(InvalidTask, match="invalid task id"):
        client.cancel(PLAIN, "not an id")


def test_cancel_of_a_task_without_a_record_yet_records_it_cancelled(stack: Stack) -> None:
    """A message whose record write failed after the send: cancelling it still wins."""
    record = stack.client().cancel(PLAIN, "in-flight")
    assert (record.status, record.attempts) == (TaskStatus.CANCELLED, 0)


def test_list_pages_through_a_tasks_records_and_filters_by_status(stack: Stack) -> None:
    client = stack.client()
    for n in range(5):
        client.enqueue(PLAIN, {}, key=f"o-{n}")
    client.cancel(PLAIN, "o-3")
    page, token = client.list(PLAIN, limit=2)
    assert [r.id for r in page] == ["o-0", "o-1"] and token
    rest, end = client.list(PLAIN, limit=10, page=token)
    assert [r.id for r in rest] == ["o-2", "o-3", "o-4"] and end is None
    cancelled, _ = client.list(PLAIN, status="CANCELLED")
    assert [r.id for r in cancelled] == ["o-3"]
    with pytest.raises(InvalidTask, match="unknown status"):
        client.list(PLAIN, status="DONE")
    with pytest.raises(InvalidTask, match="invalid page token"):
        client.list(ORDERED, page=token)
