"""Review of results by reference (issue 34 item 8): a result object the bucket no longer holds,
and a record whose location points outside its own task's results (each failed first)."""

from __future__ import annotations

from tests.helpers.tasks import ORDERED, PLAIN, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_api import Api
from tests.tasks.test_runs import url
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
