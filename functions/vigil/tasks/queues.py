"""The SQS requests of tasks: send a task's message, dead-letter one with its reason, set when a
message comes back (a retry's backoff, a busy task's lease), and read the queue's depth for the
operator's views. Nothing else touches SQS."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vigil.contract.tasks import MAX_MESSAGE_BYTES, REASON_ATTRIBUTE
from vigil.dynamo import ERROR_TEXT_LIMIT, truncate

REASON_TYPE = "String"
MAX_TASK_MESSAGE_BYTES = MAX_MESSAGE_BYTES - (
    len(REASON_ATTRIBUTE) + len(REASON_TYPE) + 4 * ERROR_TEXT_LIMIT
)
"""The largest task message ``enqueue`` sends (measured with the ``redriven`` flag a redrive
adds): SQS counts message attributes toward its 256 KiB, so the room for the dead letter's
reason (at most ``ERROR_TEXT_LIMIT`` characters of up to 4 bytes) is kept free. A message that
used it all could be neither dead-lettered with its reason nor redriven."""


@dataclass(frozen=True)
class QueueDepth:
    """SQS's approximate counts of a task's queue (for the operator's views, not decisions)."""

    waiting: int
    delayed: int
    in_flight: int
    dead_letters: int


DEPTH_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
)


class TaskQueue:
    """A task's queue, its declared priority levels' queues (``levels``: level -> URL) and its
    dead-letter queue, which they share."""

    def __init__(
        self,
        client: Any,
        queue_url: str,
        dead_letter_url: str = "",
        levels: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client
        self.queue_url = queue_url
        self.dead_letter_url = dead_letter_url
        self.levels = dict(levels or {})

    def level_url(self, level: str | None) -> str:
        """The queue of ``level``; no level, or one no longer declared: the task's own queue
        (a redrive of a message whose level a later deploy removed still runs it)."""
        return self.levels.get(level or "", self.queue_url)

    def source_url(self, source_arn: str | None) -> str:
        """The queue a message came from, by its ``eventSourceARN`` (the queue's name is the
        ARN's last part and the URL's): visibility can only be changed on that queue."""
        name = (source_arn or "").rsplit(":", 1)[-1]
        for url in self.levels.values():
            if name and url.rstrip("/").rsplit("/", 1)[-1] == name:
                return url
        return self.queue_url

    @property
    def client(self) -> Any:
        """The SQS client (a map's child sends its flow's resume message on another queue)."""
        return self._client

    @property
    def fifo(self) -> bool:
        return self.queue_url.endswith(".fifo")

    def send(
        self,
        body: str,
        *,
        delay_s: int = 0,
        group: str | None = None,
        dedup: str | None = None,
        level: str | None = None,
    ) -> str:
        """The message's id, on ``level``'s queue. FIFO: ``group`` and ``dedup`` are required,
        no delay."""
        request: dict[str, Any] = {"QueueUrl": self.level_url(level), "MessageBody": body}
        if delay_s:
            request["DelaySeconds"] = delay_s
        if group is not None:
            request["MessageGroupId"] = group
        if dedup is not None:
            request["MessageDeduplicationId"] = dedup
        return str(self._client.send_message(**request)["MessageId"])

    def dead_letter(
        self, body: str, reason: str, *, message_id: str, group: str | None = None
    ) -> None:
        """The message as it came, with why it will not run, in the dead-letter queue."""
        request: dict[str, Any] = {
            "QueueUrl": self.dead_letter_url,
            "MessageBody": body,
            "MessageAttributes": {
                REASON_ATTRIBUTE: {"DataType": REASON_TYPE, "StringValue": truncate(reason) or "-"}
            },
        }
        if self.dead_letter_url.endswith(".fifo"):
            request["MessageGroupId"] = group or "dead-letters"
            request["MessageDeduplicationId"] = message_id
        self._client.send_message(**request)

    def depth(self) -> QueueDepth:
        """Two GetQueueAttributes: the queue's messages and the dead-letter queue's."""
        waiting, delayed, in_flight = self.queued()
        return QueueDepth(waiting, delayed, in_flight, self.dead_letters())

    def queued(self) -> tuple[int, int, int]:
        """One GetQueueAttributes: the queue's messages waiting, delayed and in flight."""
        return self._counts(self.queue_url)

    def dead_letters(self) -> int:
        """One GetQueueAttributes: the messages in the dead-letter queue (none without one)."""
        return self._counts(self.dead_letter_url)[0] if self.dead_letter_url else 0

    def _counts(self, url: str) -> tuple[int, int, int]:
        attributes = self._client.get_queue_attributes(
            QueueUrl=url, AttributeNames=list(DEPTH_ATTRIBUTES)
        )["Attributes"]
        waiting, delayed, in_flight = (int(attributes.get(name, 0)) for name in DEPTH_ATTRIBUTES)
        return waiting, delayed, in_flight

    def come_back_in(self, receipt_handle: str, seconds: int, source_arn: str = "") -> None:
        """The message reappears after ``seconds`` (its visibility timeout from now), on the
        queue it came from (``source_arn``)."""
        self._client.change_message_visibility(
            QueueUrl=self.source_url(source_arn),
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=seconds,
        )
