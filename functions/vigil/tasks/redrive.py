"""Redrive a task's dead letters: each message back on its queue, marked as an operator's redrive.

A redrive is an operation with an identity (``redrive_id``, one per call, on every message it
sends): its message may take a FAILED record once, giving the task its retries afresh; the
record keeps the operations spent on it, so a copy of the message that comes back after its run
(a Lambda timeout after the finish, a failed delete, an SQS duplicate) meets FAILED as a
DUPLICATE, never a second budget. Safe to repeat: a task that has since SUCCEEDED, was
CANCELLED or is RUNNING meets its record and is recorded DUPLICATE; a redrive run again finds
only what failed since (a new operation: one more budget for those, as the operator asked). A
message that is not a task envelope (it came with a ``vigil_reason`` saying why) stays where it is:
sending it back would only dead-letter it again; the report names it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from vigil.contract.tasks import REASON_ATTRIBUTE
from vigil.tasks.envelope import new_redrive_id, parse
from vigil.tasks.errors import MalformedTask
from vigil.tasks.queues import TaskQueue

TAKE_FOR_S = 300
"""How long the messages being redriven stay invisible in the dead-letter queue."""


@dataclass(frozen=True)
class Redrive:
    moved: list[str]
    """Task ids sent back to the queue."""
    kept: list[tuple[str, str]]
    """(message id, why) of dead letters that are not tasks: left in the dead-letter queue."""
    operation: str = ""
    """The redrive's id, on every message it sent (``redrive_id``)."""


def redrive(sqs: Any, queue: TaskQueue, *, task: str, limit: int = 100) -> Redrive:
    """Move up to ``limit`` dead-lettered messages of ``task`` back to its queue.

    All are taken first and moved after, so a redriven task that fails again and returns to the
    dead-letter queue waits for the next redrive instead of looping within this one."""
    operation = new_redrive_id()
    taken: list[dict[str, Any]] = []
    while len(taken) < limit:
        messages = sqs.receive_message(
            QueueUrl=queue.dead_letter_url,
            MaxNumberOfMessages=min(10, limit - len(taken)),
            WaitTimeSeconds=0,
            VisibilityTimeout=TAKE_FOR_S,
            MessageAttributeNames=[REASON_ATTRIBUTE],
        ).get("Messages", [])
        if not messages:
            break
        taken.extend(messages)
    moved: list[str] = []
    kept: list[tuple[str, str]] = []
    for message in taken:
        try:
            envelope = parse(message["Body"], expected_task=task)
        except MalformedTask as malformed:
            kept.append((message["MessageId"], malformed.reason))
            # Visible again at once, for whoever reads the dead-letter queue next.
            sqs.change_message_visibility(
                QueueUrl=queue.dead_letter_url,
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=0,
            )
            continue
        again = envelope.redrive(operation)
        body = again.body()
        fifo = queue.fifo
        queue.send(
            body,
            group=(again.group or task) if fifo else None,
            # A redrive is a new message to FIFO's five-minute deduplication: its own id.
            dedup=_redrive_dedup(message["MessageId"]) if fifo else None,
        )
        sqs.delete_message(QueueUrl=queue.dead_letter_url, ReceiptHandle=message["ReceiptHandle"])
        moved.append(again.id)
    return Redrive(moved, kept, operation)


def _redrive_dedup(message_id: str) -> str:
    return hashlib.sha256(json.dumps(["redrive", message_id]).encode()).hexdigest()


__all__ = ["Redrive", "redrive"]
