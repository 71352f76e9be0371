"""Redrive a task's dead-lettered messages: each back to the task's queue, marked ``redriven``.

The consumer's claim lets a redriven message take a FAILED record (its attempts go on), and a
SUCCEEDED record makes it a DUPLICATE, so a redrive is safe to repeat. A message that is not a
task envelope (what the consumer dead-lettered as malformed) stays in the dead-letter queue: sent
back it would only be refused again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from vigil.contract.tasks import ENVELOPE_KEY, EnvelopeField

RECEIVE_MAX = 10
HIDE_SECONDS = 300
"""How long a taken message stays hidden while it is sent back (then it is deleted)."""


@dataclass(frozen=True)
class RedrivenTask:
    message_id: str
    """The dead-letter message's id (the new message has its own)."""
    task: str
    id: str


def redrive_tasks(
    sqs: Any, dead_letter_url: str, queue_url: str, *, limit: int = 100
) -> list[RedrivenTask]:
    """Move up to ``limit`` envelopes from the dead-letter queue back to the queue."""
    fifo = queue_url.endswith(".fifo")
    done: list[RedrivenTask] = []
    while len(done) < limit:
        messages = sqs.receive_message(
            QueueUrl=dead_letter_url,
            MaxNumberOfMessages=min(RECEIVE_MAX, limit - len(done)),
            WaitTimeSeconds=0,
            VisibilityTimeout=HIDE_SECONDS,
        ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            envelope = _envelope(message["Body"])
            if envelope is None:
                continue
            envelope[EnvelopeField.REDRIVEN.value] = True
            body = json.dumps({ENVELOPE_KEY: envelope}, separators=(",", ":"))
            task, task_id = str(envelope[EnvelopeField.TASK]), str(envelope[EnvelopeField.ID])
            send: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
            if fifo:
                send["MessageGroupId"] = str(envelope.get(EnvelopeField.GROUP) or task)
                # Not the enqueue's deduplication id: SQS would drop a redrive within 5 minutes.
                send["MessageDeduplicationId"] = hashlib.sha256(
                    f"{task}\n{task_id}\nredrive\n{message['MessageId']}".encode()
                ).hexdigest()
            sqs.send_message(**send)
            sqs.delete_message(QueueUrl=dead_letter_url, ReceiptHandle=message["ReceiptHandle"])
            done.append(RedrivenTask(message["MessageId"], task, task_id))
    return done


def _envelope(body: str) -> dict[str, Any] | None:
    try:
        envelope = json.loads(body)[ENVELOPE_KEY]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(envelope, dict) or not {EnvelopeField.TASK, EnvelopeField.ID} <= set(
        envelope
    ):
        return None
    return envelope
