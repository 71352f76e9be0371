"""The tasks benchmark's own counts for one task, checked against the issue's targets: what
``benchmarks/tasks_requests.py`` prints is what one task costs (not a timing test)."""

from __future__ import annotations

from typing import Any

import boto3

from benchmarks.tasks_requests import Meter, count, item_size, vigil_side
from tests.conftest import REGION
from tests.helpers.tables import create_pk_sk_table


def test_one_task_costs_three_write_units_and_a_duplicate_one_request(dynamodb: Any) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    side, _ = vigil_side(dynamodb, sqs, events, create_pk_sk_table(dynamodb, "vigil-tasks"))
    counts = count(side, Meter(boto3.client("dynamodb", region_name=REGION)), tasks=1)

    assert counts.failures == 0
    assert counts.enqueue == {"SQS SendMessage": 1, "DynamoDB PutItem": 1, "WRU": 1}
    assert counts.first == {"DynamoDB UpdateItem": 2, "EventBridge PutEvents": 1, "WRU": 2}
    assert counts.duplicate == {"DynamoDB UpdateItem": 1, "WRU": 1}
    assert counts.source == {"SQS ReceiveMessage": 1, "SQS DeleteMessageBatch": 1}


def test_item_size_counts_names_and_values_as_dynamodb_does() -> None:
    # "pk" (2) + "TASK#a" (6); "n" (1) + 12345 (3 digit pairs + 1 byte); "ok" (2) + BOOL (1)
    assert item_size({"pk": {"S": "TASK#a"}, "n": {"N": "12345"}, "ok": {"BOOL": True}}) == 16
