"""The consumer's side of fenced sends (issue 33, item 8): ``vigil.effects.dedup`` reads what
``run.fenced`` puts on every send and handles each run's effect once, whichever run sent it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.effects.test_fenced_writes import effects, grants
from tests.effects.test_takeover import create
from vigil.clock import ManualClock
from vigil.effects import Effects, RunFence
from vigil.effects.dedup import EXPIRES, KEY, Deduplicator, NotASend, Sent
from vigil_tools.sqs_event import sqs_records

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def world() -> Iterator[dict[str, str]]:
    with mock_aws():
        create(boto3.client("dynamodb"), "processed", KEY)
        sqs = boto3.client("sqs")
        yield {
            "Mail": sqs.create_queue(QueueName="mail")["QueueUrl"],
            "MailFifo": sqs.create_queue(QueueName="mail.fifo", Attributes={"FifoQueue": "true"})[
                "QueueUrl"
            ],
            "Items": "unused",
            "Reports": "unused",
            "Bus": "default",
        }


def received(url: str) -> list[dict[str, Any]]:
    answer = boto3.client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    return list(answer.get("Messages", []))


def consumer(dedup: Deduplicator, delivered: list[str], fail: set[str] | None = None) -> Any:
    """The guide's example consumer: a Lambda handler of a standard queue."""

    def handler(event: dict[str, Any], context: Any) -> None:
        for record in event["Records"]:
            sent = Sent.of(record)
            if sent is not None and not dedup.first(sent):
                continue
            try:
                if record["body"] in (fail or set()):
                    raise RuntimeError("the mail service is down")
                delivered.append(record["body"])
            except Exception:
                if sent is not None:
                    dedup.forget(sent)
                raise

    return handler


def test_a_takeovers_resend_on_a_standard_queue_is_handled_once(world: dict[str, str]) -> None:
    """The first run of a tick and its takeover both send the tick's welcome email (SQS
    standard keeps both); the consumer handles it once, and another effect as its own."""
    first, takeover = effects(world, 100), effects(world, 200)
    first.sqs.send_message(QueueUrl="Mail", MessageBody="welcome ann", effect="welcome:ann")
    takeover.sqs.send_message(QueueUrl="Mail", MessageBody="welcome ann", effect="welcome:ann")
    takeover.sqs.send_message(QueueUrl="Mail", MessageBody="welcome bob", effect="welcome:bob")
    delivered: list[str] = []
    dedup = Deduplicator(boto3.client("dynamodb"), "processed", clock=ManualClock(NOW))

    consumer(dedup, delivered)({"Records": sqs_records(received(world["Mail"]))}, None)

    assert sorted(delivered) == ["welcome ann", "welcome bob"]
    item = boto3.client("dynamodb").get_item(
        TableName="processed", Key={KEY: {"S": "job:cleanup/t1|welcome:ann"}}
    )["Item"]
    assert item[EXPIRES] == {"N": str(int((NOW + timedelta(days=7)).timestamp()))}


def test_a_failed_delivery_is_forgotten_so_its_redelivery_is_handled(
    world: dict[str, str],
) -> None:
    run = effects(world, 100)
    run.sqs.send_message(QueueUrl="Mail", MessageBody="welcome ann", effect="welcome:ann")
    batch = {"Records": sqs_records(received(world["Mail"]))}
    delivered: list[str] = []
    dedup = Deduplicator(boto3.client("dynamodb"), "processed")

    with pytest.raises(RuntimeError):
        consumer(dedup, delivered, fail={"welcome ann"})(batch, None)
    consumer(dedup, delivered)(batch, None)  # SQS delivers it again
    consumer(dedup, delivered)(batch, None)  # and once more: a repeat now

    assert delivered == ["welcome ann"]


def test_forget_leaves_another_runs_record_alone(world: dict[str, str]) -> None:
    dedup = Deduplicator(boto3.client("dynamodb"), "processed")
    first = Sent("job:cleanup/t1", "welcome:ann", RunFence.of_job("cleanup", "t1", 100).value)
    takeover = Sent(first.run, first.effect, RunFence.of_job("cleanup", "t1", 200).value)
    assert dedup.first(first) and not dedup.first(takeover)
    dedup.forget(takeover)  # the takeover's copy was never the one recorded
    assert not dedup.first(first)


def test_the_identity_reads_alike_from_a_lambda_record_a_message_and_an_event(
    world: dict[str, str],
) -> None:
    run = effects(world, 100)
    run.sqs.send_message(QueueUrl="MailFifo", MessageBody="x", effect="report")
    (message,) = received(world["MailFifo"])
    entries: list[dict[str, Any]] = []

    class Bus:
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            entries.extend(Entries)
            return {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]}

    bus_run = Effects(run.fence, grants(world), lambda service: Bus())
    bus_run.events.put_event(
        EventBusName="Bus", Source="app", DetailType="Report", Detail={"n": 1}, effect="report"
    )
    event = {
        "detail-type": entries[0]["DetailType"],
        "source": entries[0]["Source"],
        "detail": json.loads(entries[0]["Detail"]),
    }
    expected = Sent("job:cleanup/t1", "report", run.fence.value)
    assert Sent.of(message) == Sent.of(sqs_records([message])[0]) == Sent.of(event) == expected


def test_a_plain_message_has_no_identity_and_a_partial_one_is_refused_clearly() -> None:
    assert Sent.of({"MessageId": "m", "Body": "{}"}) is None
    assert Sent.of({"detail-type": "x", "detail": {"n": 1}}) is None
    with pytest.raises(NotASend, match=r"\['vigil-effect', 'vigil-fence'\]"):
        Sent.of({"MessageAttributes": {"vigil-run": {"StringValue": "job:a/t"}}})
    with pytest.raises(NotASend, match="vigil-fence"):
        Sent.of({"detail-type": "x", "detail": {"vigil": {"run": "r", "effect": "e", "fence": 7}}})
    with pytest.raises(NotASend, match="not a message"):
        Sent.of("vigil-run")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep must be positive"):
        Deduplicator(None, "processed", keep=timedelta(0))


@pytest.mark.parametrize(
    "delivered",
    [
        {"messageAttributes": {"vigil-run": "job:a/t", "vigil-effect": {"stringValue": "e"}}},
        {"MessageAttributes": {"vigil-run": ["job:a/t"], "vigil-effect": None}},
        {"messageAttributes": {"vigil-fence": 7}},
    ],
    ids=["a-string", "a-list", "a-number"],
)
def test_an_attribute_that_is_not_an_attribute_map_is_refused_as_malformed(
    delivered: dict[str, Any],
) -> None:
    """A message attribute whose value is not SQS's ``{DataType, StringValue}`` map is a
    malformed message, refused with :class:`NotASend` (found in review: an AttributeError)."""
    with pytest.raises(NotASend, match="not text"):
        Sent.of(delivered)
