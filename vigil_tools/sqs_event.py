"""SQS messages as the records of a Lambda event, as an SQS event source hands them to a task's
function: for the tests and benchmarks that play the event source in-process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def sqs_records(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """ReceiveMessage's messages (``MessageId``, ``ReceiptHandle``, ``Body``, ``Attributes``)
    as Lambda event records."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1",
        }
        for m in messages
    ]
