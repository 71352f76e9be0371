"""SQS messages as the records of a Lambda event, as an SQS event source hands them to a task's
function: for the tests and benchmarks that play the event source in-process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def sqs_records(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """ReceiveMessage's messages (``MessageId``, ``ReceiptHandle``, ``Body``, ``Attributes``,
    ``MessageAttributes``) as Lambda event records."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {
                name: lambda_attribute(value)
                for name, value in (m.get("MessageAttributes") or {}).items()
            },
            "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1",
        }
        for m in messages
    ]


def lambda_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """A message attribute as Lambda's event spells it (camel case, list fields present)."""
    shaped: dict[str, Any] = {
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value.get("DataType", "String"),
    }
    if "StringValue" in value:
        shaped["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        shaped["binaryValue"] = value["BinaryValue"]
    return shaped
