"""Redriving a task's dead letters: envelopes go back to the queue marked ``redriven``, anything
else stays; FIFO copies get a deduplication id of their own (SQS would drop a redrive within 5
minutes of the enqueue otherwise)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from vigil.contract.tasks import ENVELOPE_KEY
from vigil_tools.emulator.queues import peek
from vigil_tools.tasks_redrive import redrive_tasks


def _envelope(task: str, task_id: str, **extra: Any) -> str:
    return json.dumps({ENVELOPE_KEY: {"v": 1, "task": task, "id": task_id, "payload": {}, **extra}})


@pytest.mark.parametrize("fifo", [False, True])
def test_envelopes_go_back_marked_redriven_and_the_rest_stays(aws: None, fifo: bool) -> None:
    session: Any = boto3.session.Session(region_name="us-east-1")
    sqs = session.client("sqs")
    suffix, attributes = (".fifo", {"FifoQueue": "true"}) if fifo else ("", {})
    queue = sqs.create_queue(QueueName=f"q{suffix}", Attributes=attributes)["QueueUrl"]
    dead = sqs.create_queue(QueueName=f"dlq{suffix}", Attributes=attributes)["QueueUrl"]
    fifo_args: dict[str, Any] = {}
    for body in (_envelope("t", "a", group="g1"), "not json", _envelope("t", "b")):
        if fifo:
            fifo_args = {"MessageGroupId": "x", "MessageDeduplicationId": str(hash(body))}
        sqs.send_message(QueueUrl=dead, MessageBody=body, **fifo_args)

    done = redrive_tasks(sqs, dead, queue)

    assert [(r.task, r.id) for r in done] == [("t", "a"), ("t", "b")]
    back = [json.loads(m["Body"])[ENVELOPE_KEY] for m in peek(session, queue)]
    assert [(e["id"], e["redriven"]) for e in back] == [("a", True), ("b", True)]
    assert [m["Body"] for m in peek(session, dead)] == ["not json"]
    if fifo:
        groups = [m["MessageGroupId"] for m in peek(session, queue)]
        assert groups == ["g1", "t"]  # the envelope's group, else the task's name
    assert redrive_tasks(sqs, dead, queue) == []  # nothing more to move
