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

    In rounds: what one round takes is moved after it is all taken, then the next round takes
    again, because a FIFO dead-letter queue hands out no message of a group while another of it
    is in flight (a group of more than 10 comes over several rounds). A message this operation
    itself sent back (a redriven task that failed again within it) is left for the next redrive
    instead of looping within this one; the rounds end when one moves nothing new."""
    operation = new_redrive_id()
    moved: list[str] = []
    kept: list[tuple[str, str]] = []
    seen: set[str] = set()
    while len(moved) < limit:
        taken = _take(sqs, queue, limit - len(moved))
        progressed = False
        for message in taken:
            if message["MessageId"] in seen:
                _release(sqs, queue, message)
                continue
            seen.add(message["MessageId"])
            try:
                envelope = parse(message["Body"], expected_task=task)
            except MalformedTask as malformed:
                kept.append((message["MessageId"], malformed.reason))
                _release(sqs, queue, message)
                continue
            if envelope.redrive_id == operation:
                _release(sqs, queue, message)  # failed again under this very operation
                continue
            again = envelope.redrive(operation)
            queue.send(
                again.body(),
                group=(again.group or task) if queue.fifo else None,
                # A redrive is a new message to FIFO's five-minute deduplication: its own id.
                dedup=_redrive_dedup(message["MessageId"]) if queue.fifo else None,
                level=again.priority,  # back to the level's queue it was enqueued at
            )
            sqs.delete_message(
                QueueUrl=queue.dead_letter_url, ReceiptHandle=message["ReceiptHandle"]
            )
            moved.append(again.id)
            progressed = True
        if not progressed:
            break
    return Redrive(moved, kept, operation)


def _take(sqs: Any, queue: TaskQueue, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` dead letters, each invisible for ``TAKE_FOR_S``, until a receive is empty."""
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
    return taken


def _release(sqs: Any, queue: TaskQueue, message: dict[str, Any]) -> None:
    """Visible again at once, for whoever reads the dead-letter queue next."""
    sqs.change_message_visibility(
        QueueUrl=queue.dead_letter_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )


def _redrive_dedup(message_id: str) -> str:
    return hashlib.sha256(json.dumps(["redrive", message_id]).encode()).hexdigest()


__all__ = ["Redrive", "redrive"]
