"""The tasks benchmark's own counts for one task, checked against the issue's targets: what
``benchmarks/tasks_requests.py`` prints is what one task costs (not a timing test); and its
arithmetic (the split of time inside AWS calls, the priced lines)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from benchmarks.tasks_requests import (
    AWS_LATENCY_MS,
    CPU_STRETCH,
    GB_S_LINE,
    MEMORY_GB,
    PATHS,
    PRICE,
    AwsCalls,
    Counts,
    Meter,
    Split,
    Timing,
    cost_lines,
    count,
    item_size,
    powertools_side,
    run_path,
    vigil_side,
)
from tests.conftest import REGION
from tests.helpers.tables import create_pk_sk_table, create_tasks_table
from vigil.contract.tasks import CompletionEvents


@pytest.mark.parametrize(
    ("choice", "events"),
    [(CompletionEvents.FAILURES, {}), (CompletionEvents.ALL, {"EventBridge PutEvents": 1})],
)
def test_one_task_costs_three_write_units_and_a_duplicate_one_request(
    dynamodb: Any, choice: CompletionEvents, events: dict[str, int]
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    client = boto3.client("events", region_name=REGION)
    table = create_pk_sk_table(dynamodb, "vigil-tasks")
    side, _ = vigil_side(dynamodb, sqs, client, table, choice)
    counts = count(side, Meter(boto3.client("dynamodb", region_name=REGION)), tasks=1)

    assert counts.failures == 0
    # a keyed enqueue reads its key's record first (one key, one request): one read unit
    assert counts.enqueue == {
        "DynamoDB GetItem": 1,
        "half RRU": 2,
        "SQS SendMessage": 1,
        "DynamoDB PutItem": 1,
        "WRU": 1,
    }
    assert counts.first == {"DynamoDB UpdateItem": 2, "WRU": 2} | events
    # the same message back (its batch timed out): the outbox re-sends an announced event
    assert counts.duplicate == {"DynamoDB UpdateItem": 1, "WRU": 1} | events
    assert counts.source == {"SQS ReceiveMessage": 1, "SQS DeleteMessageBatch": 1}


def test_item_size_counts_names_and_values_as_dynamodb_does() -> None:
    # "pk" (2) + "TASK#a" (6); "n" (1) + 12345 (3 digit pairs + 1 byte); "ok" (2) + BOOL (1)
    assert item_size({"pk": {"S": "TASK#a"}, "n": {"N": "12345"}, "ok": {"BOOL": True}}) == 16


def test_time_inside_aws_calls_is_apart_from_the_own_time(dynamodb: Any) -> None:
    calls, split = AwsCalls(), Split(per=2)
    with calls.watching(), calls.span(split):
        dynamodb.list_tables()
        dynamodb.list_tables()
    assert split.requests == 2 and split.requests_per_task == 1
    assert 0 < split.aws_s <= split.total_s and split.wall_s > 0
    assert split.own_ms == pytest.approx(1000 * (split.total_s - split.aws_s) / 2)
    dynamodb.list_tables()  # no longer watched
    assert calls.requests == 2


def test_the_priced_lines_are_the_counts_times_the_prices() -> None:
    counts = Counts(tasks=2)
    counts.enqueue.update({"SQS SendMessage": 2, "WRU": 2})
    counts.first.update({"EventBridge PutEvents": 2, "WRU": 4})
    counts.source.update({"SQS ReceiveMessage": 1, "SQS DeleteMessageBatch": 1})
    consume = Split(total_s=0.010, aws_s=0.006, requests=6, per=2)  # 2 ms own, 3 requests
    lines = cost_lines(counts, Timing(1_000, Split(), consume, fill_s=0, wall_s=0))

    assert lines["SQS requests (send, receive, delete)"] == (2.0, pytest.approx(0.80))
    assert lines["DynamoDB write units"] == (3.0, pytest.approx(3 * 0.625))
    assert lines["EventBridge PutEvents (completion event)"] == (1.0, 1.00)
    gb_s = MEMORY_GB * (2 * CPU_STRETCH + 3 * AWS_LATENCY_MS) / 1000
    assert lines[GB_S_LINE] == (pytest.approx(gb_s), pytest.approx(gb_s * 1e6 * PRICE["gb_s"]))
    assert len(lines) == 6


@pytest.mark.parametrize(
    ("path", "vigil", "powertools"),
    [
        # a duplicate while it runs: BUSY (claim + ChangeMessageVisibility), then DUPLICATE;
        # Powertools: its put refused twice (in progress, then completed)
        ("duplicate during", {"DynamoDB UpdateItem": 4, "SQS ChangeMessageVisibility": 1}, 4),
        # a failed attempt: the retry's index entry is written and removed (2 of the 7 WRU)
        ("one failure", {"DynamoDB UpdateItem": 4, "WRU": 7}, 4),
        # 60 KB: in the bucket, the record stays small; Powertools keeps it on its record
        ("big result, then its message again", {"S3 PutObject": 1, "WRU": 4}, 119),
    ],
)
def test_each_unhappy_path_costs_what_the_benchmark_prints(
    dynamodb: Any, path: str, vigil: dict[str, int], powertools: int
) -> None:
    """What ``run_path`` counts for one task (the benchmark's paths table): Vigil's requests
    that make each path, and Powertools' DynamoDB requests (during) or write units."""
    spec = next(p for p in PATHS if p.name == path)

    def client(service: str) -> Any:
        return boto3.client(service, region_name=REGION)  # one per side: each counted once

    table = create_tasks_table(dynamodb)
    side, _ = vigil_side(
        dynamodb, client("sqs"), client("events"), table, CompletionEvents.FAILURES, client("s3")
    )
    ours = run_path(side, Meter(client("dynamodb")), spec, tasks=1).requests
    assert {k: ours[k] for k in vigil} == vigil

    theirs = run_path(
        powertools_side(client("dynamodb"), client("sqs")), Meter(client("dynamodb")), spec, tasks=1
    ).requests
    writes = sum(v for k, v in theirs.items() if k.startswith("DynamoDB "))
    assert (writes if path == "duplicate during" else theirs["WRU"]) == powertools
