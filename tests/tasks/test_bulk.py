"""``enqueue_many``: batches of SendMessageBatch and conditional record writes, each item's
outcome reported, no item lost when a batch partly fails, bad items refused before anything is
sent. Each test about 0.3 s on moto (the size test about 1 s)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.clients import Delegating
from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack
from vigil.contract.tasks import TaskStatus
from vigil.persist import OutOfTime
from vigil.tasks import InvalidTask, ItemStatus, KeyReused
from vigil.tasks.envelope import parse
from vigil.tasks.queues import MAX_TASK_MESSAGE_BYTES


def sent_ids(stack: Stack, task: str = PLAIN) -> list[str]:
    url = stack.catalog.spec(task).queue_url
    ids: list[str] = []
    while batch := stack.messages(url, visibility=300):
        ids += [parse(m["Body"], task).id for m in batch]
    return ids


def test_each_item_is_reported_and_sent_in_batches_of_ten_with_one_read_of_the_keys(
    stack: Stack,
) -> None:
    sqs, dynamodb = Counting(stack.sqs), Counting(stack.dynamodb)
    client = stack.client(sqs=sqs, dynamodb=dynamodb)
    first = client.enqueue_many(PLAIN, [({"n": 0}, "k-0"), ({"n": 1}, "k-1")])
    assert [o.status for o in first] == [ItemStatus.ENQUEUED] * 2
    sqs.reset(), dynamodb.reset()

    items: list[tuple[Any, str | None]] = [({"n": 0}, "k-0"), ({"n": 99}, "k-1")]
    items += [({"n": n}, f"k-{n}") for n in range(2, 24)]
    items += [({"n": 2}, "k-2"), ({"n": 100}, None)]
    outcomes = client.enqueue_many(PLAIN, items)

    assert [o.index for o in outcomes] == list(range(len(items)))
    assert outcomes[0].status is ItemStatus.DUPLICATE
    assert outcomes[1].status is ItemStatus.REFUSED
    assert outcomes[1].reason.startswith("idempotency_key_reused")
    assert outcomes[24].status is ItemStatus.DUPLICATE and "item 2" in outcomes[24].reason
    new = outcomes[2:24] + outcomes[25:]
    assert {o.status for o in new} == {ItemStatus.ENQUEUED} and len(new) == 23
    # 23 messages in 3 batches, 1 read of the 24 keys, 23 conditional puts.
    assert sqs.counts == {"send_message_batch": 3}
    assert dynamodb.counts == {"batch_get_item": 1, "put_item": 23}
    assert sorted(sent_ids(stack)) == sorted(["k-0", "k-1"] + [o.id for o in new])
    assert client.get(PLAIN, "k-1").status is TaskStatus.QUEUED
    assert all(client.get(PLAIN, o.id).status is TaskStatus.QUEUED for o in new)


class PartlyFailing(Delegating):
    """SendMessageBatch that fails the entries named: SQS's own fault (``transient``, once) or
    the sender's (``refused``, always)."""

    def __init__(self, client: Any, transient: set[str], refused: set[str]) -> None:
        super().__init__(client)
        self.transient, self.refused = set(transient), refused
        self.calls = 0

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        self.calls += 1
        failed, passed = [], []
        for entry in Entries:
            if entry["Id"] in self.transient:
                self.transient.discard(entry["Id"])
                failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
            elif entry["Id"] in self.refused:
                failed.append(
                    {"Id": entry["Id"], "SenderFault": True, "Code": "InvalidParameterValue"}
                )
            else:
                passed.append(entry)
        answer = self._client.send_message_batch(QueueUrl=QueueUrl, Entries=passed)
        return {"Successful": answer.get("Successful", []), "Failed": failed}


def test_a_batch_that_partly_fails_loses_no_item(stack: Stack) -> None:
    sqs = PartlyFailing(stack.sqs, transient={"1", "12"}, refused={"5"})
    client = stack.client(sqs=sqs)
    outcomes = client.enqueue_many(PLAIN, [({"n": n}, f"k-{n}") for n in range(15)])

    refused = [o for o in outcomes if o.status is ItemStatus.REFUSED]
    assert [(o.index, o.id) for o in refused] == [(5, "k-5")]
    assert "InvalidParameterValue" in refused[0].reason and "nothing sent" in refused[0].reason
    enqueued = {o.id for o in outcomes if o.status is ItemStatus.ENQUEUED}
    assert len(enqueued) == 14
    # Every enqueued item has its message and its record; the refused one has neither.
    assert sorted(sent_ids(stack)) == sorted(enqueued)
    assert all(client.get(PLAIN, key).status is TaskStatus.QUEUED for key in enqueued)
    with pytest.raises(LookupError):
        client.get(PLAIN, "k-5")
    assert sqs.calls == 4  # two batches, each sent again once for SQS's own failure


@pytest.mark.parametrize(
    ("items", "field", "words"),
    [
        ([({}, "a"), ({}, "b"), ("not an object", "c")], "items[2].payload", "item 2 (key 'c')"),
        ([({}, "a"), ({}, "no spaces")], "items[1].key", "invalid key"),
        ([({}, "a"), ("just a payload",)], "items[1]", "(payload, key) pair"),
        ([], "items", "no items"),
    ],
)
def test_a_bad_item_is_refused_by_name_and_nothing_is_sent(
    stack: Stack, items: list[Any], field: str, words: str
) -> None:
    sqs, dynamodb = Counting(stack.sqs), Counting(stack.dynamodb)
    with pytest.raises(InvalidTask) as refused:
        stack.client(sqs=sqs, dynamodb=dynamodb).enqueue_many(PLAIN, items)
    assert refused.value.field == field and words in str(refused.value)
    assert sqs.calls == [] and dynamodb.calls == []


def test_batches_stay_within_sqs_bytes_and_an_item_too_big_is_named(stack: Stack) -> None:
    sqs = Counting(stack.sqs)
    client = stack.client(sqs=sqs)
    big = "x" * 100_000  # two fit in a batch's 256 KiB, three do not
    outcomes = client.enqueue_many(PLAIN, [({"blob": big}, f"b-{n}") for n in range(5)])
    assert {o.status for o in outcomes} == {ItemStatus.ENQUEUED}
    assert [len(call["Entries"]) for call in sqs.of("send_message_batch")] == [2, 2, 1]

    sqs.reset()
    too_big = "x" * MAX_TASK_MESSAGE_BYTES
    with pytest.raises(InvalidTask) as refused:
        client.enqueue_many(PLAIN, [({"blob": "small"}, "s-1"), ({"blob": too_big}, "s-2")])
    assert refused.value.field == "items[1].payload" and "key 's-2'" in str(refused.value)
    assert sqs.calls == []


def test_an_ordered_task_keeps_its_group_and_deduplication(stack: Stack) -> None:
    client = stack.client()
    items = [({"step": n}, f"t-1-{n}") for n in range(3)]
    outcomes = client.enqueue_many(ORDERED, items, group="t-1")
    assert {o.status for o in outcomes} == {ItemStatus.ENQUEUED}
    assert all(client.get(ORDERED, f"t-1-{n}").group == "t-1" for n in range(3))
    assert sent_ids(stack, ORDERED) == ["t-1-0", "t-1-1", "t-1-2"]


def test_one_key_is_one_request_whether_it_came_in_bulk_or_alone(stack: Stack) -> None:
    """enqueue_many keeps the digest enqueue compares (merged from two branches that spelled it
    differently: a bulk item with a delay of 5 was then refused when enqueued alone)."""
    client = stack.client()
    (bulk,) = client.enqueue_many(PLAIN, [({"n": 1}, "k-1")], delay=5)
    assert bulk.status is ItemStatus.ENQUEUED

    assert client.enqueue(PLAIN, {"n": 1}, key="k-1", delay=5) == "k-1"
    with pytest.raises(KeyReused):
        client.enqueue(PLAIN, {"n": 2}, key="k-1", delay=5)


class SecondBatchDenied(Delegating):
    """SendMessageBatch: the first request goes through, every later one is refused whole with
    an error that is no throttle (the queue's KMS key's grant revoked meanwhile)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.calls = 0

    def send_message_batch(self, **request: Any) -> Any:
        self.calls += 1
        if self.calls > 1:
            error = {"Code": "KMS.AccessDeniedException", "Message": "denied"}
            raise ClientError({"Error": error}, "SendMessageBatch")
        return self._client.send_message_batch(**request)


class RecordDenied(Delegating):
    """PutItem refused with an error that is no throttle after the messages were sent."""

    def put_item(self, **request: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "PutItem")


def test_an_error_after_some_messages_went_out_still_reports_every_item(stack: Stack) -> None:
    """The 2nd batch refused whole: the 10 items the 1st sent are ENQUEUED (they will run),
    the rest REFUSED with SQS's code and nothing sent. It raised instead, and the caller, told
    nothing of what was sent, enqueues again: a second run of each item without a key."""
    sqs = SecondBatchDenied(stack.sqs)
    outcomes = stack.client(sqs=sqs).enqueue_many(PLAIN, [({"n": n}, None) for n in range(15)])
    assert [o.status for o in outcomes] == [ItemStatus.ENQUEUED] * 10 + [ItemStatus.REFUSED] * 5
    assert all("KMS.AccessDeniedException" in o.reason for o in outcomes[10:])
    assert sorted(sent_ids(stack)) == sorted(o.id for o in outcomes[:10])


def test_a_record_write_refused_after_its_message_went_out_is_reported_enqueued(
    stack: Stack,
) -> None:
    client = stack.client(dynamodb=RecordDenied(stack.dynamodb))
    outcomes = client.enqueue_many(PLAIN, [({"n": n}, f"k-{n}") for n in range(3)])
    assert [o.status for o in outcomes] == [ItemStatus.ENQUEUED] * 3
    assert all("AccessDeniedException" in o.reason for o in outcomes)
    assert all("record was not written" in o.reason for o in outcomes)
    assert sorted(sent_ids(stack)) == ["k-0", "k-1", "k-2"]


class ReadsNeverProcessed(Delegating):
    """BatchGetItem that leaves every key unprocessed (a throttled table), counting requests."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.reads = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:
        self.reads += 1
        if self.reads > 100:
            raise AssertionError("asked again at once, forever")
        return {"Responses": {}, "UnprocessedKeys": RequestItems}


def test_keys_left_unprocessed_are_asked_again_with_backoff_then_nothing_is_sent(
    stack: Stack,
) -> None:
    """The read asked again at once, without end, while the table throttled it."""
    dynamodb = ReadsNeverProcessed(stack.dynamodb)
    with pytest.raises(OutOfTime, match="unprocessed"):
        stack.client(dynamodb=dynamodb).enqueue_many(PLAIN, [({"n": 1}, "k-1")])
    assert 1 < dynamodb.reads < 30
    assert sent_ids(stack) == []
