"""An adversarial pass over the tasks' promises (docs/guides/tasks.md "Guarantees"): each test is
a way a promise could break, reproduced on moto (with SQS's real limits where moto does not keep
them)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from tests.helpers.clients import Delegating
from tests.helpers.tasks import PLAIN, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_runs import Body, url
from vigil.clock import ManualClock
from vigil.contract.tasks import MAX_MESSAGE_BYTES, TaskStatus, max_receive_count
from vigil.tasks.envelope import parse
from vigil.tasks.errors import InvalidTask
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive


def test_a_redriven_task_gets_its_retries_afresh(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """docs/guides/tasks.md: a redrive "gets its retries afresh". The crash budget was counted
    afresh (by the new message's receives) but a body that raised was judged on the record's
    attempts, so a redriven task that failed once more went straight back to FAILED without a
    retry."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body(fail=4)  # fails its three runs, then once more after the redrive
    handler = make_handler(body, retries=2)
    for _ in range(3):
        invoke(handler, batch)
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.FAILED

    (dead,) = stack.dead_letters()
    redriven = parse(dead["Body"]).redrive().body()

    def delivery(receive_count: int) -> list[dict[str, Any]]:
        record = record_of(redriven, "m-r1")
        record["attributes"] = {"ApproximateReceiveCount": str(receive_count)}
        return [record]

    assert invoke(handler, delivery(1)) == ["m-r1"]  # failed again: a retry, not FAILED
    retrying = stack.client().get(PLAIN, "o-1")
    assert (retrying.status, retrying.attempts) == (TaskStatus.QUEUED, 4)
    stack.clock.advance(timedelta(seconds=10))
    assert invoke(handler, delivery(2)) == []
    done = stack.client().get(PLAIN, "o-1")
    assert (done.status, done.attempts) == (TaskStatus.SUCCEEDED, 5)
    assert len(body.runs) == 5


class TwelveHoursFromReceipt(Delegating):
    """SQS's rule that moto does not keep: a message's visibility may reach at most 12 hours
    from the moment it was received, so ChangeMessageVisibility(43200) after any time in
    flight is refused."""

    def __init__(self, client: Any, clock: ManualClock, received_at: datetime) -> None:
        super().__init__(client)
        self.clock, self.received_at = clock, received_at
        self.accepted: list[int] = []

    def change_message_visibility(self, **kwargs: Any) -> Any:
        in_flight = (self.clock() - self.received_at).total_seconds()
        if in_flight + kwargs["VisibilityTimeout"] > 43_200:
            raise ClientError(
                {"Error": {"Code": "InvalidParameterValue", "Message": "beyond the limit"}},
                "ChangeMessageVisibility",
            )
        self.accepted.append(kwargs["VisibilityTimeout"])
        return self._client.change_message_visibility(**kwargs)


def test_a_long_backoff_is_a_visibility_sqs_accepts(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The backoff was capped at exactly 12 hours, which SQS refuses once the message has been
    in flight at all; the refusal was only logged, so the retry came back after the queue's
    visibility timeout (minutes) instead of the backoff (hours)."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    sqs = TwelveHoursFromReceipt(stack.sqs, stack.clock, stack.clock())

    def work(run: Any) -> None:
        stack.clock.advance(timedelta(seconds=5))

    handler = make_handler(
        Body(fail=1, during=work), retries=1, backoff=timedelta(hours=12), sqs=sqs
    )
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    (delay,) = sqs.accepted
    assert 11 * 3600 < delay < 43_200


class SizeLimited(Delegating):
    """SQS's size rule that moto does not keep: the body *and* the message attributes (names,
    types, values) count toward the 256 KiB."""

    def send_message(self, **kwargs: Any) -> Any:
        size = len(kwargs["MessageBody"].encode())
        for name, value in (kwargs.get("MessageAttributes") or {}).items():
            size += len(name) + len(value["DataType"]) + len(value["StringValue"].encode())
        if size > MAX_MESSAGE_BYTES:
            raise ClientError(
                {"Error": {"Code": "InvalidParameterValue", "Message": "message too long"}},
                "SendMessage",
            )
        return self._client.send_message(**kwargs)


def largest_payload(stack: Stack) -> dict[str, Any]:
    """The biggest ``{"data": "xxx..."}`` that ``enqueue`` accepts."""
    low, high = 0, MAX_MESSAGE_BYTES
    while low < high:
        middle = (low + high + 1) // 2
        try:
            stack.client().plan(PLAIN, {"data": "x" * middle}, key="o-1")
            low = middle
        except InvalidTask:
            high = middle - 1
    return {"data": "x" * low}


def test_any_task_enqueue_accepts_can_be_dead_lettered_with_its_reason_and_redriven(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """``enqueue`` let the envelope use all of SQS's 256 KiB; the dead letter adds its reason
    attribute and a redrive its ``redriven`` flag, so a large task that failed could not be
    dead-lettered (the record stayed RUNNING and the message went round until SQS's redrive
    policy dropped it there without a reason) nor redriven."""
    sqs = SizeLimited(stack.sqs)
    stack.client(sqs=sqs).enqueue(PLAIN, largest_payload(stack), key="o-1")
    batch = records(stack.messages(url(stack)))
    handler = make_handler(Body(fail=1), retries=0, sqs=sqs)

    assert invoke(handler, batch) == []  # FAILED and dead-lettered, not kept
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.FAILED
    spec = stack.catalog.spec(PLAIN)
    moved = redrive(sqs, TaskQueue(sqs, spec.queue_url, spec.dead_letter_url), task=PLAIN)
    assert moved.moved == ["o-1"]


def test_a_key_enqueued_again_while_its_redrive_retries_is_not_called_crashed(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A plain copy of the key met during a redrive's retries was judged on the record's
    attempts (4 > 1 + 1 retries), so taken as a run that crashed past its retries: FAILED
    RunCrashed, a failure event and a second dead letter, for a task still retrying. The
    record now says the budget's base (``budget_from``), so every message is judged alike."""
    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-1")
    (first,) = records(stack.messages(url(stack)))
    stack.sqs.delete_message(QueueUrl=url(stack), ReceiptHandle=first["receiptHandle"])
    handler = make_handler(Body(fail=3), retries=1)
    invoke(handler, [first])
    invoke(handler, [first])  # FAILED after its retry, dead-lettered
    (dead,) = stack.dead_letters()
    stack.sqs.delete_message(
        QueueUrl=stack.catalog.spec(PLAIN).dead_letter_url, ReceiptHandle=dead["ReceiptHandle"]
    )
    redriven = record_of(parse(dead["Body"]).redrive().body(), "m-r1")
    assert invoke(handler, [redriven]) == ["m-r1"]  # the redrive's first run fails: a retry

    stack.clock.advance(timedelta(seconds=11))  # past the backoff: the copy may run the retry
    stack.send_copy(PLAIN, {}, key="o-1")  # a copy of the key's message
    assert invoke(handler, records(stack.messages(url(stack)))) == []
    done = stack.client().get(PLAIN, "o-1")
    assert (done.status, done.attempts) == (TaskStatus.SUCCEEDED, 4)  # the redrive's 2nd run
    assert stack.dead_letters() == []


def test_deferrals_near_the_deadline_spend_no_attempts_and_come_back_at_once(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A message not claimed because the batch was near its deadline was reported failed and
    waited the whole visibility timeout, and each deferral used up a receive of the redrive
    policy's ``retries + 3``: with ``retries=0``, three deferrals dead-lettered a task that had
    never run. A deferral is now visible again at once, and the redrive policy leaves room for
    receives that run nothing (the attempt budget is the record's, not the receive count)."""
    spec = stack.catalog.spec(PLAIN)
    dead_letter_arn = stack.sqs.get_queue_attributes(
        QueueUrl=spec.dead_letter_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    policy = {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receive_count(0)}
    stack.sqs.set_queue_attributes(
        QueueUrl=spec.queue_url, Attributes={"RedrivePolicy": json.dumps(policy)}
    )
    stack.client().enqueue(PLAIN, {}, key="o-1")
    body = Body()
    handler = make_handler(body, retries=0)
    for _ in range(3):  # received with a 5-minute visibility, deferred: 1 s left, 30 s margin
        batch = records(stack.messages(url(stack), visibility=300))
        assert len(batch) == 1, "the deferred message did not come back at once"
        assert invoke(handler, batch, remaining=lambda: 1_000) == [batch[0]["messageId"]]

    batch = records(stack.messages(url(stack), visibility=300))  # back at once, still queued
    assert len(batch) == 1, "the redrive policy dead-lettered a task that never ran"
    assert invoke(handler, batch) == []
    assert body.ids == ["o-1"]
    done = stack.client().get(PLAIN, "o-1")
    assert (done.status, done.attempts) == (TaskStatus.SUCCEEDED, 1)
    assert stack.dead_letters() == []
