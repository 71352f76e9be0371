"""What an SQS queue holds, read without receiving it.

On AWS a reader walks a whole queue by keeping what it received hidden, then showing it again
(ChangeMessageVisibility 0). Under the testing kit's frozen clock moto shows a message again only
once the clock has moved (it compares ``now > visible_at``), so a redrive in the same instant would
find the queue empty: the kit reads moto's queue itself, consuming and hiding nothing.
"""

from __future__ import annotations

from typing import Any


def peek(session: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message in the queue, visible or in flight, oldest first: ``MessageId``, ``Body``,
    ``MessageAttributes`` and (FIFO) ``MessageGroupId`` and ``MessageDeduplicationId``, as
    ReceiveMessage would answer them."""
    from moto.sqs.models import sqs_backends

    account, name = queue_url.rstrip("/").split("/")[-2:]
    queue = sqs_backends[account][session.region_name].get_queue(name)
    return [_message(m) for m in queue._messages]


def _message(message: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {"MessageId": message.id, "Body": message.body}
    if message.message_attributes:
        answer["MessageAttributes"] = dict(message.message_attributes)
    if message.group_id is not None:
        answer["MessageGroupId"] = message.group_id
    if message.deduplication_id is not None:
        answer["MessageDeduplicationId"] = message.deduplication_id
    return answer
