"""The emulator's FIFO queues as SQS keeps them: a group handed out in order after its batch timed
out, and a deduplication id remembered five minutes after its message was deleted
(``vigil_tools.emulator.moto_sqs_fifo``). Each runs on the clock moto reads (freezegun's, as the
kit's), and the first two also show what moto 5.2.1 does without the fix: they fail the day a
moto upgrade fixes it (then drop the fix)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from freezegun import freeze_time

from tests.conftest import REGION
from vigil_tools.emulator import moto_sqs_fifo

START = datetime(2026, 11, 22, 12, tzinfo=UTC)


@pytest.fixture
def frozen() -> Iterator[Any]:
    with freeze_time(START) as frozen:
        yield frozen


@pytest.fixture
def fifo(aws: None, frozen: Any) -> tuple[Any, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(
        QueueName="ordered.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"}
    )["QueueUrl"]
    return sqs, url


@pytest.fixture
def as_is() -> Iterator[None]:
    was = moto_sqs_fifo.installed()
    moto_sqs_fifo.uninstall()
    yield
    if was:
        moto_sqs_fifo.install()


@pytest.fixture
def fixed() -> Iterator[None]:
    was = moto_sqs_fifo.installed()
    moto_sqs_fifo.install()
    yield
    if not was:
        moto_sqs_fifo.uninstall()


def _send(sqs: Any, url: str, body: str, dedup: str | None = None) -> None:
    sqs.send_message(
        QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=dedup or body
    )


def _receive(sqs: Any, url: str, limit: int = 10) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=limit).get("Messages", []))


def _first_after_a_timed_out_batch(sqs: Any, url: str, clock: Any) -> str:
    for body in ("first", "second", "third"):
        _send(sqs, url, body)
    assert [m["Body"] for m in _receive(sqs, url)] == ["first", "second", "third"]
    clock.tick(timedelta(seconds=31))  # the batch's visibility runs out: nobody deleted it
    (message,) = _receive(sqs, url, limit=1)
    return str(message["Body"])


def test_moto_hands_a_timed_out_groups_last_message_first(
    fifo: tuple[Any, str], frozen: Any, as_is: None
) -> None:
    assert _first_after_a_timed_out_batch(*fifo, frozen) == "third"


def test_a_timed_out_group_comes_back_in_order(
    fifo: tuple[Any, str], frozen: Any, fixed: None
) -> None:
    sqs, url = fifo
    assert _first_after_a_timed_out_batch(sqs, url, frozen) == "first"
    # and the group stays held while its head is in flight
    assert _receive(sqs, url) == []


def _sent_again_a_minute_after_its_delete(sqs: Any, url: str, clock: Any) -> list[str]:
    _send(sqs, url, "task", dedup="key-1")
    (message,) = _receive(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    clock.tick(timedelta(minutes=1))
    _send(sqs, url, "task again", dedup="key-1")
    return [m["Body"] for m in _receive(sqs, url)]


def test_moto_forgets_a_deleted_messages_deduplication_id(
    fifo: tuple[Any, str], frozen: Any, as_is: None
) -> None:
    assert _sent_again_a_minute_after_its_delete(*fifo, frozen) == ["task again"]


def test_a_deduplication_id_is_kept_five_minutes_from_its_send(
    fifo: tuple[Any, str], frozen: Any, fixed: None
) -> None:
    sqs, url = fifo
    assert _sent_again_a_minute_after_its_delete(sqs, url, frozen) == []  # dropped, as SQS does
    frozen.tick(timedelta(minutes=3, seconds=59))  # 4:59 after the first send: still dropped
    _send(sqs, url, "still within", dedup="key-1")
    assert _receive(sqs, url) == []
    frozen.tick(timedelta(seconds=1))  # five minutes: a new message
    _send(sqs, url, "a new one", dedup="key-1")
    assert [m["Body"] for m in _receive(sqs, url)] == ["a new one"]


def test_content_based_deduplication_is_remembered_too(aws: None, frozen: Any, fixed: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(
        QueueName="content.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    (message,) = _receive(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    answer = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert answer["MessageId"]  # accepted, as SQS answers a duplicate
    assert _receive(sqs, url) == []
    sqs.send_message(QueueUrl=url, MessageBody="other", MessageGroupId="g")
    assert [m["Body"] for m in _receive(sqs, url)] == ["other"]


def test_standard_queues_are_left_as_they_are(aws: None, frozen: Any, fixed: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=url, MessageBody="same")
    assert len(_receive(sqs, url)) == 2
