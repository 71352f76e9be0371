"""The emulator's SQS event source poller, on moto's queues and a stepped (frozen) clock.

The function is a small one of the test's own (what it answers per message body), so these
tests pin the poller and moto's queue behaviour it relies on: partial batch failures, visibility
expiry, delay, FIFO order within a group, the redrive policy's move to the dead-letter queue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from freezegun import freeze_time
from moto import mock_aws

from vigil_tools.emulator.lambda_runtime import Invocation
from vigil_tools.emulator.queue_mappings import (
    REPORT_BATCH_ITEM_FAILURES,
    QueueMapping,
    batch_item_failures,
    by_function,
    deliver_together,
)
from vigil_tools.emulator.queues import peek

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
VISIBILITY = 30
TIMEOUT = 5
REGION = "us-east-1"


class Fn:
    """The function: fails the bodies in ``failing`` (reported per item), raises on ``raise``."""

    def __init__(self) -> None:
        self.failing: set[str] = set()
        self.raising = False
        self.seen: list[tuple[str, int]] = []
        """(body, ApproximateReceiveCount) per record delivered."""
        self.events: list[dict[str, Any]] = []

    def __call__(self, function: str, event: dict[str, Any]) -> Invocation:
        self.events.append(event)
        records = event["Records"]
        self.seen += [(r["body"], int(r["attributes"]["ApproximateReceiveCount"])) for r in records]
        if self.raising:
            return Invocation(ok=False, error_type="Boom", error_message="the whole batch")
        failures = [
            {"itemIdentifier": r["messageId"]} for r in records if r["body"] in self.failing
        ]
        return Invocation(ok=True, payload={"batchItemFailures": failures})

    def bodies(self) -> list[str]:
        return [body for body, _ in self.seen]


class World:
    def __init__(self, frozen: Any) -> None:
        self.frozen = frozen
        self.session = boto3.session.Session(region_name=REGION)
        self.sqs = self.session.client("sqs")
        self.fn = Fn()
        iam = self.session.client("iam")
        role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.session.client("lambda").create_function(  # its settings only: Fn runs instead
            FunctionName="fn",
            Runtime="python3.12",
            Role=role,
            Handler="x.handler",
            Timeout=TIMEOUT,
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        )

    def now(self) -> datetime:
        return datetime.now(UTC)

    def queue(
        self, name: str, *, fifo: bool = False, max_receive: int | None = None
    ) -> tuple[str, str | None]:
        dlq_url = None
        attributes: dict[str, str] = {"VisibilityTimeout": str(VISIBILITY)}
        suffix = ".fifo" if fifo else ""
        if fifo:
            attributes["FifoQueue"] = "true"
        if max_receive is not None:
            dlq_attributes = {"FifoQueue": "true"} if fifo else {}
            dlq_url = self.sqs.create_queue(
                QueueName=f"{name}-dlq{suffix}", Attributes=dlq_attributes
            )["QueueUrl"]
            dlq_arn = self._arn(dlq_url)
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive}
            )
        url = self.sqs.create_queue(QueueName=f"{name}{suffix}", Attributes=attributes)["QueueUrl"]
        return url, dlq_url

    def _arn(self, url: str) -> str:
        return str(
            self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
        )

    def mapping(
        self,
        url: str,
        *,
        batch_size: int = 10,
        reports: bool = True,
        concurrency: int | None = None,
    ) -> QueueMapping:
        spec: dict[str, Any] = {
            "EventSourceArn": self._arn(url),
            "FunctionArn": f"arn:aws:lambda:{REGION}:123456789012:function:fn",
            "BatchSize": batch_size,
            "FunctionResponseTypes": [REPORT_BATCH_ITEM_FAILURES] if reports else [],
        }
        if concurrency is not None:
            spec["ScalingConfig"] = {"MaximumConcurrency": concurrency}
        return QueueMapping(self.session, spec, url, self.sqs)

    def run(self, mapping: QueueMapping, seconds: float) -> None:
        """Step the clock to ``seconds`` from now, stopping wherever the queue is due."""
        end = self.now() + timedelta(seconds=seconds)
        for _ in range(1000):
            due = mapping.next_due(self.now())
            if due is None or due > end:
                break
            if due > self.now():
                self.frozen.move_to(due)
            mapping.deliver(self.fn, self.now)
        else:
            raise AssertionError("the poller did not settle")
        self.frozen.move_to(end)


@pytest.fixture
def world() -> Iterator[World]:
    with freeze_time(START) as frozen, mock_aws():
        yield World(frozen)


def test_partial_failure_deletes_the_rest_and_redelivers_the_failed_after_visibility(
    world: World,
) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    for body in ("a", "b", "c"):
        world.sqs.send_message(QueueUrl=url, MessageBody=body)
    world.fn.failing = {"b"}

    world.run(mapping, 0)
    assert world.fn.seen == [("a", 1), ("b", 1), ("c", 1)]
    assert [m["Body"] for m in peek(world.session, url)] == ["b"]

    world.run(mapping, VISIBILITY - 1)  # still in flight
    assert len(world.fn.seen) == 3
    world.fn.failing = set()
    world.run(mapping, 2)  # its visibility has run out: back, second receive
    assert world.fn.seen[3:] == [("b", 2)]
    assert peek(world.session, url) == []


def test_an_invocation_error_fails_the_whole_batch(world: World) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    for body in ("a", "b"):
        world.sqs.send_message(QueueUrl=url, MessageBody=body)
    world.fn.raising = True
    world.run(mapping, 0)
    assert len(peek(world.session, url)) == 2
    world.fn.raising = False
    world.run(mapping, VISIBILITY + 1)
    assert sorted(world.fn.seen[2:]) == [("a", 2), ("b", 2)]
    assert peek(world.session, url) == []


def test_the_visibility_the_function_set_decides_when_a_failed_message_returns(
    world: World,
) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    world.sqs.send_message(QueueUrl=url, MessageBody="a")
    world.fn.failing = {"a"}
    original = world.fn.__call__

    def backing_off(function: str, event: dict[str, Any]) -> Invocation:
        for record in event["Records"]:
            world.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=300
            )
        return original(function, event)

    mapping.deliver(backing_off, world.now)
    world.run(mapping, 299)
    assert len(world.fn.seen) == 1
    world.run(mapping, 2)
    assert world.fn.seen[1:] == [("a", 2)]


def test_a_delayed_message_waits_for_its_delay(world: World) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    world.sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=120)
    world.run(mapping, 119)
    assert world.fn.seen == []
    world.run(mapping, 2)
    assert world.fn.seen == [("later", 1)]
    assert world.fn.events[0]["Records"][0]["attributes"]["SentTimestamp"] == str(
        int(START.timestamp() * 1000)
    )


def test_the_event_is_shaped_as_lambda_sends_it(world: World) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    world.sqs.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes={"vigil_reason": {"DataType": "String", "StringValue": "why"}},
    )
    world.run(mapping, 0)
    (record,) = world.fn.events[0]["Records"]
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(":q")
    assert record["awsRegion"] == REGION
    assert {"messageId", "receiptHandle", "body", "md5OfBody"} <= set(record)
    assert {"ApproximateReceiveCount", "SentTimestamp", "ApproximateFirstReceiveTimestamp"} <= set(
        record["attributes"]
    )
    assert record["messageAttributes"]["vigil_reason"] == {
        "stringValue": "why",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }


def test_batch_size_splits_the_batches(world: World) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url, batch_size=2)
    for body in "abcde":
        world.sqs.send_message(QueueUrl=url, MessageBody=body)
    world.run(mapping, 0)
    assert [len(e["Records"]) for e in world.fn.events] == [2, 2, 1]
    assert sorted(world.fn.bodies()) == list("abcde")


def test_fifo_keeps_a_group_in_order_and_waits_behind_a_failed_message(world: World) -> None:
    url, _ = world.queue("q", fifo=True)
    mapping = world.mapping(url, batch_size=1)
    for body, group in (("t1-a", "t1"), ("t2-a", "t2"), ("t1-b", "t1"), ("t1-c", "t1")):
        world.sqs.send_message(
            QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=body
        )
    world.fn.failing = {"t1-a"}
    world.run(mapping, 0)
    # t1 stops behind its failed first message; t2 goes on
    assert world.fn.bodies() == ["t1-a", "t2-a"]
    assert world.fn.events[0]["Records"][0]["attributes"]["MessageGroupId"] == "t1"
    world.fn.failing = set()
    world.run(mapping, VISIBILITY + 1)
    assert world.fn.bodies()[2:] == ["t1-a", "t1-b", "t1-c"]


def test_max_receive_count_moves_the_message_to_the_dead_letter_queue(world: World) -> None:
    url, dlq = world.queue("q", max_receive=3)
    assert dlq is not None
    mapping = world.mapping(url)
    world.sqs.send_message(QueueUrl=url, MessageBody="poison")
    world.fn.failing = {"poison"}
    world.run(mapping, 10 * VISIBILITY)
    assert world.fn.seen == [("poison", 1), ("poison", 2), ("poison", 3)]
    assert peek(world.session, url) == []
    assert [m["Body"] for m in peek(world.session, dlq)] == ["poison"]
    assert mapping.next_due(world.now()) is None


def test_without_report_batch_item_failures_success_deletes_the_whole_batch(
    world: World,
) -> None:
    url, _ = world.queue("q")
    mapping = world.mapping(url, reports=False)
    world.sqs.send_message(QueueUrl=url, MessageBody="a")
    world.fn.failing = {"a"}  # reported, but the mapping does not read it
    world.run(mapping, 0)
    assert peek(world.session, url) == []


@pytest.mark.parametrize(
    ("answer", "failed", "malformed"),
    [
        (None, (), False),
        ({}, (), False),
        ({"batchItemFailures": []}, (), False),
        ({"batchItemFailures": [{"itemIdentifier": "m2"}]}, ("m2",), False),
        (json.dumps({"batchItemFailures": [{"itemIdentifier": "m1"}]}), ("m1",), False),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, ("m1", "m2"), True),
        ({"batchItemFailures": [{"itemIdentifier": "other"}]}, ("m1", "m2"), True),
        ({"batchItemFailures": [{}]}, ("m1", "m2"), True),
        ({"batchItemFailures": "m1"}, ("m1", "m2"), True),
        ("not json", ("m1", "m2"), True),
        ([1], ("m1", "m2"), True),
    ],
)
def test_a_malformed_partial_response_fails_the_whole_batch(
    answer: Any, failed: tuple[str, ...], malformed: bool
) -> None:
    got, reason = batch_item_failures(answer, ("m1", "m2"))
    assert got == failed
    assert (reason is not None) is malformed


def test_all_of_finds_the_mappings_and_stops_moto_delivering_through_docker(world: World) -> None:
    url, _ = world.queue("q")
    lam = world.session.client("lambda")
    lam.create_event_source_mapping(
        EventSourceArn=world._arn(url),
        FunctionName="fn",
        BatchSize=5,
        FunctionResponseTypes=[REPORT_BATCH_ITEM_FAILURES],
        ScalingConfig={"MaximumConcurrency": 2},
    )
    (mapping,) = QueueMapping.all_of(world.session)
    assert (mapping.function, mapping.batch_size, mapping.max_batches) == ("fn", 5, 2)
    assert mapping.reports_failures
    world.sqs.send_message(QueueUrl=url, MessageBody="a")
    # moto did not receive it on the send (its Docker delivery would have)
    world.run(mapping, 0)
    assert world.fn.seen == [("a", 1)]


def test_an_invocation_past_the_timeout_loses_its_answer_and_the_whole_batch_comes_back(
    world: World,
) -> None:
    """A Lambda timeout mid-batch: what the function finished comes back with the rest."""
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    for body in ("done", "not-reached"):
        world.sqs.send_message(QueueUrl=url, MessageBody=body)

    def slow(function: str, event: dict[str, Any]) -> Invocation:
        world.frozen.tick(timedelta(seconds=TIMEOUT + 1))  # the body outlives the timeout
        return Invocation(ok=True, payload={"batchItemFailures": []})

    (batch,) = mapping.deliver(slow, world.now)
    assert batch.reason == f"Sandbox.Timedout: Task timed out after {TIMEOUT} seconds"
    assert len(peek(world.session, url)) == 2
    world.run(mapping, VISIBILITY)
    assert sorted(world.fn.bodies()) == ["done", "not-reached"]
    assert peek(world.session, url) == []


def test_polls_reuse_one_lambda_client(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each poll asks the function's timeout: it made a client each time (``vigil local up``
    polls every queue four times a second), costing more than the request."""
    url, _ = world.queue("q")
    mapping = world.mapping(url)
    made: list[str] = []
    client = world.session.client
    monkeypatch.setattr(world.session, "client", lambda name: made.append(name) or client(name))
    for _ in range(3):
        world.sqs.send_message(QueueUrl=url, MessageBody="a")
        mapping.deliver(world.fn, world.now)
    assert world.fn.bodies() == ["a"] * 3
    assert made == ["lambda"]


def test_a_functions_mappings_take_turns_so_a_level_never_waits_for_the_backlog(
    world: World,
) -> None:
    """A task's priority level is its own queue and mapping on the same function; Lambda polls
    each mapping on its own, so the level's message is not held until the normal queue drains:
    it waits for one poll of the normal queue (2 batches of 1 here), then runs."""
    normal_url, _ = world.queue("normal")
    high_url, _ = world.queue("high")
    normal = world.mapping(normal_url, batch_size=1, concurrency=2)
    high = world.mapping(high_url, batch_size=1, concurrency=2)
    for n in range(5):
        world.sqs.send_message(QueueUrl=normal_url, MessageBody=f"n{n}")
    world.sqs.send_message(QueueUrl=high_url, MessageBody="high")

    (group,) = by_function([normal, high])
    results = deliver_together(group, world.fn, world.now)

    assert world.fn.bodies() == ["n0", "n1", "high", "n2", "n3", "n4"]
    assert [r.queue for r in results].count(high_url) == 1
    assert peek(world.session, normal_url) == peek(world.session, high_url) == []


def test_by_function_groups_a_functions_mappings_in_first_seen_order(world: World) -> None:
    a, _ = world.queue("a")
    b, _ = world.queue("b")
    first, second = world.mapping(a), world.mapping(b)
    other = QueueMapping(
        world.session, {**second.mapping, "FunctionArn": "arn:x:function:g"}, b, world.sqs
    )

    assert by_function([first, other, second]) == [[first, second], [other]]
