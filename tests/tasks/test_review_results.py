"""Review of issue 34's tasks: a result object the bucket no longer holds, a record whose result
location points outside its own task's results, a cancel during a retry's backoff (each failed
first)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import patch

from tests.helpers.tasks import ORDERED, PLAIN, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_api import Api
from tests.tasks.test_runs import Body, url
from vigil.contract.tasks import RETRIES_INDEX, TaskStatus
from vigil.tasks.envelope import parse
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive
from vigil.tasks.results import parse_ref, result_key

BLOB = {"rows": ["x" * 100] * 60}


def _big(stack: Stack, make_handler: HandlerFactory, key: str = "big") -> str:
    stack.client().enqueue(PLAIN, {}, key=key)
    handler = make_handler(lambda run, payload: BLOB, results_bucket=stack.results_bucket)
    assert invoke(handler, records(stack.messages(url(stack)))) == []
    item = stack.dynamodb.get_item(
        TableName=stack.table, Key={"pk": {"S": f"TASK#{PLAIN}"}, "sk": {"S": key}}
    )["Item"]
    return str(item["result_ref"]["S"])


def test_a_result_the_bucket_expired_is_said_plainly_not_a_500(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The lifecycle rule counts from the object's creation and DynamoDB's TTL deletes a record
    up to days after its ``expires_at``: GET answered 500 (NoSuchKey escaped). The record is
    still answered, its result named unavailable and why."""
    ref = _big(stack, make_handler)
    bucket, key = parse_ref(ref)
    stack.s3.delete_object(Bucket=bucket, Key=key)
    status, body = Api(stack)("GET", f"/tasks/{PLAIN}/big")
    assert (status, body["status"], body["result"], body["result_ref"]) == (
        200,
        "SUCCEEDED",
        None,
        ref,
    )
    assert "no longer in the results bucket" in body["result_unavailable"]
    assert "no longer" in (stack.client().get(PLAIN, "big").result_unavailable or "")


def test_a_record_pointing_at_another_tasks_result_is_not_read(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Whoever may write a task's records (its function, its enqueuers) could set its
    ``result_ref`` to another task's object, and the API, which reads every declared task's
    results, served it under the wrong task. Only the task's own id's prefix is read."""
    secret = result_key(ORDERED, "t-1", 1)
    stack.s3.put_object(Bucket=stack.results_bucket, Key=secret, Body=b'{"secret": 1}')
    stack.client().enqueue(PLAIN, {}, key="thief")
    stack.dynamodb.update_item(
        TableName=stack.table,
        Key={"pk": {"S": f"TASK#{PLAIN}"}, "sk": {"S": "thief"}},
        UpdateExpression="SET result_ref = :r",
        ExpressionAttributeValues={":r": {"S": f"s3://{stack.results_bucket}/{secret}"}},
    )
    status, body = Api(stack)("GET", f"/tasks/{PLAIN}/thief")
    assert status == 200 and body["result"] is None
    assert "not this task's" in body["result_unavailable"]


def test_a_task_cancelled_during_its_retrys_backoff_leaves_the_retries_index(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """``cancel`` takes a QUEUED record, a retry's waiting one too, but kept its ``retry_at``:
    the CANCELLED record stayed in the sparse ``retries`` index until its TTL, and every audit
    pass (every 5 minutes) read it back again, one GetItem each, for days."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    handler = make_handler(Body(fail=1), retries=2, backoff=timedelta(minutes=10))
    assert invoke(handler, batch) == [batch[0]["messageId"]]  # failed: a retry waits
    assert [i["sk"]["S"] for i in _retries(stack)] == ["o-1"]

    assert stack.client().cancel(PLAIN, "o-1").status is TaskStatus.CANCELLED
    assert _retries(stack) == []


def _retries(stack: Stack) -> list[dict[str, Any]]:
    return list(stack.dynamodb.scan(TableName=stack.table, IndexName=RETRIES_INDEX)["Items"])


def test_a_redrive_moves_every_dead_letter_of_a_fifo_group_not_the_first_ten(
    stack: Stack,
) -> None:
    """A FIFO queue hands out no message of a group while another of it is in flight: the
    redrive took the first receive's 10, its next receive found the group held by them and
    stopped, and it reported 10 moved of 12 as if the dead-letter queue were empty. It moves
    what it took, then takes again; what its own operation sends back (a redriven task that failed
    again at once) waits for the next redrive."""
    spec = stack.catalog.spec(ORDERED)
    queue = TaskQueue(stack.sqs, spec.queue_url, spec.dead_letter_url)
    for i in range(12):
        stack.client().enqueue(ORDERED, {}, key=f"k{i}", group="t-1")
    for message in _drain(stack, spec.queue_url):
        queue.dead_letter(message["Body"], "failed", message_id=message["MessageId"], group="t-1")

    moved = redrive(stack.sqs, queue, task=ORDERED)
    assert moved.moved == [f"k{i}" for i in range(12)]
    assert stack.dead_letters(ORDERED) == []
    sent = [parse(m["Body"], ORDERED) for m in _drain(stack, spec.queue_url)]
    assert len(sent) == 12 and {e.redrive_id for e in sent} == {moved.operation}


def test_a_redrive_leaves_what_its_own_operation_dead_lettered_again_for_the_next(
    stack: Stack,
) -> None:
    spec = stack.catalog.spec(PLAIN)
    queue = TaskQueue(stack.sqs, spec.queue_url, spec.dead_letter_url)
    stack.client().enqueue(PLAIN, {}, key="o-1")
    (message,) = stack.messages(spec.queue_url)
    queue.dead_letter(message["Body"], "failed", message_id=message["MessageId"])
    again = parse(message["Body"], PLAIN).redrive("this-operation").body()
    queue.dead_letter(again, "failed again", message_id="m-2")

    with patch("vigil.tasks.redrive.new_redrive_id", return_value="this-operation"):
        moved = redrive(stack.sqs, queue, task=PLAIN)
    assert moved.moved == ["o-1"]
    (left,) = stack.dead_letters(PLAIN)
    assert parse(left["Body"], PLAIN).redrive_id == "this-operation"


def _drain(stack: Stack, queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, received and deleted (a FIFO group comes 10 at a time)."""
    drained: list[dict[str, Any]] = []
    while batch := stack.messages(queue_url, visibility=30):
        for message in batch:
            stack.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        drained += batch
    return drained
