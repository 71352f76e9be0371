"""The priorities benchmark's queue model against moto: the normal queue it plays in memory
(``benchmarks/sqs_model.py``, what lets the benchmark drain 10,000) hands out what moto's queue
would, so the figures written in docs/benchmarks.md are moto's, only faster."""

from __future__ import annotations

import pytest

from benchmarks.sqs_model import StandardQueue
from benchmarks.tasks_control import measure_priority

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"


def test_the_model_finds_what_moto_finds_with_the_high_task_enqueued_mid_drain() -> None:
    # Given a backlog of 120 (100 handed out at once, the rest two seconds later), and the
    # high task (and its twin on the one queue) enqueued half a second in, 20 still queued
    played = {
        modelled: measure_priority(120, modelled=modelled, at_s=0.5, count_resources=False)
        for modelled in (True, False)
    }
    # Then the modelled queue and moto's give the same waits, receives and queue
    assert played[True] == played[False]
    result = played[True]
    # And the level waits for its poller's lag alone (under 1 s), its twin behind the 20
    assert result.normal_waiting_then == 20
    assert result.level_wait_s < 1.0 < result.one_queue_wait_s == 1.5


def test_the_model_hands_out_in_sent_order_and_keeps_in_flight_messages_out() -> None:
    queue = StandardQueue()
    queue.send_message_batch(
        QueueUrl=URL, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(5)]
    )
    first = queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=3)["Messages"]
    second = queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=3)["Messages"]
    assert [m["Body"] for m in first + second] == ["m0", "m1", "m2", "m3", "m4"]
    assert queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=3) == {}
    queue.delete_message_batch(
        QueueUrl=URL, Entries=[{"Id": "0", "ReceiptHandle": first[0]["ReceiptHandle"]}]
    )
    assert queue.receive_message(QueueUrl=URL) == {}


def test_the_model_refuses_what_it_does_not_model() -> None:
    with pytest.raises(NotImplementedError, match="DelaySeconds"):
        StandardQueue().send_message(QueueUrl=URL, MessageBody="m", DelaySeconds=5)
