"""Redrive a job's dead-lettered events: hand each destination record back to the job's function.

The whole record goes back (the guard reads the original event from ``requestPayload``), so the
guard knows it is a deliberate redrive and runs it even past the job's lateness limit. Safe to
repeat: the guard keys every run on the tick's scheduled time, so an event that already ran is a
suppressed duplicate, and a redrive that fails lands in the dead-letter queue again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Redriven:
    message_id: str
    event: Any
    result: Any


def redrive(
    sqs: Any,
    queue_url: str,
    invoke: Callable[[Any], Any],
    *,
    limit: int = 100,
) -> list[Redriven]:
    """Take up to ``limit`` messages, invoke with each destination record, delete it.

    The messages are taken first and invoked after, so an event that fails again and returns to
    the queue waits for the next redrive instead of looping. A message whose body is not a Lambda
    destination record is left in the queue, untouched.
    """
    taken: list[tuple[dict[str, Any], Any]] = []
    while len(taken) < limit:
        response = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, limit - len(taken)),
            WaitTimeSeconds=0,
            VisibilityTimeout=300,
        )
        messages = response.get("Messages", [])
        if not messages:
            break
        for message in messages:
            try:
                record = json.loads(message["Body"])
                record["requestPayload"]
                taken.append((message, record))
            except (ValueError, KeyError, TypeError):
                continue
    done: list[Redriven] = []
    for message, event in taken:
        result = invoke(event)
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        done.append(Redriven(message["MessageId"], event, result))
    return done
