"""The grants an application's role is given (``BackgroundTask.grant_enqueue``, ``grant_read``)
cover every request the library makes for ``enqueue``, ``enqueue_many``, ``get`` and ``wait``: the
requests are counted on moto and compared with the synthesized policy (about 3 s; failed first:
``enqueue_many``'s BatchGetItem was not granted)."""

from __future__ import annotations

from datetime import timedelta

from tests.helpers.tasks import PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_runs import url

IAM_ACTION = {
    # boto3's operation -> the IAM action that authorizes it (SendMessageBatch is authorized as
    # sqs:SendMessage, one action for both).
    "get_item": "dynamodb:GetItem",
    "batch_get_item": "dynamodb:BatchGetItem",
    "put_item": "dynamodb:PutItem",
    "query": "dynamodb:Query",  # get: a flow's step timeline from its journal
    "send_message": "sqs:SendMessage",
    "send_message_batch": "sqs:SendMessage",
    "create_schedule": "scheduler:CreateSchedule",
    "get_object": "s3:GetObject",
}


def _granted(grant: str) -> set[str]:
    """The actions ``BackgroundTask.grant_<grant>`` gives an application's role (synthesized)."""
    from aws_cdk import App
    from aws_cdk import Stack as CdkStack
    from aws_cdk import aws_iam as iam

    from infra.background_task import BackgroundTask
    from tests.helpers.templates import actions

    stack = CdkStack(App(), "App")
    task = BackgroundTask(stack, "SendReceipt", handler="tasks.send_receipt.handler")
    role = iam.Role(stack, "Web", assumed_by=iam.AccountRootPrincipal())
    getattr(task, f"grant_{grant}")(role)
    policy = role.node.find_child("DefaultPolicy")
    assert isinstance(policy, iam.Policy)
    return {a for s in stack.resolve(policy.document.to_json())["Statement"] for a in actions(s)}


def test_every_call_enqueue_get_and_wait_make_is_in_their_grants(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The web app's role has grant_enqueue and grant_read: every request the library makes for
    enqueue, enqueue_many (keyed), get and wait (a result stored in S3 too) must be allowed by
    them, or the guide's example fails in AWS with AccessDenied."""
    sqs, dynamodb, scheduler, s3 = (
        Counting(stack.sqs),
        Counting(stack.dynamodb),
        Counting(stack.scheduler),
        Counting(stack.s3),
    )
    client = stack.client(sqs=sqs, dynamodb=dynamodb, scheduler=scheduler, s3=s3)
    enqueuing = [sqs, dynamodb, scheduler]
    client.enqueue(PLAIN, {"n": 1}, key="o-1")
    client.enqueue(PLAIN, {"n": 1}, key="o-1")  # the same request again: read, nothing sent
    client.enqueue(PLAIN, {}, at=stack.clock() + timedelta(days=1))  # a one-time schedule
    client.enqueue_many(PLAIN, [({"n": 2}, "o-2"), ({"n": 3}, None)])
    enqueue_calls = {IAM_ACTION[name] for c in enqueuing for name, _ in c.calls}
    for counting in (sqs, dynamodb, scheduler):
        counting.reset()

    big = make_handler(
        lambda run, payload: {"rows": ["x" * 100] * 60}, results_bucket=stack.results_bucket
    )
    invoke(big, records(stack.messages(url(stack))))
    dynamodb.reset()
    assert client.wait(PLAIN, "o-1", timeout=0)["rows"]  # read back from the results bucket
    client.get(PLAIN, "o-2")
    read_calls = {IAM_ACTION[name] for c in (dynamodb, s3) for name, _ in c.calls}

    assert {
        "s3:GetObject",
        "dynamodb:Query",
    } <= read_calls and "dynamodb:BatchGetItem" in enqueue_calls
    assert enqueue_calls <= _granted("enqueue")
    assert read_calls <= _granted("read")
