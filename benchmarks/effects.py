"""Fenced writes (``run.fenced``): requests added per write, and what a job pays to import them.

Requests are counted from botocore's ``before-call`` events on moto, a plain write beside the
same write fenced; a refused write counts too. The import cost: the modules a job that never names
``run.fenced`` loads (none of :mod:`vigil.effects`), and the one-off import on first use.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.import_time import ROOT, _median_ms
from vigil.clock import ManualClock
from vigil.contract.effects import WRITES_ENV
from vigil.effects import Effects, Fenced, RunFence
from vigil.effects.fence import Grants
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings
from vigil.jobs.store import RunStore

TABLE, BUCKET = "bench-items", "bench-objects"


class Requests:
    """Counts the API calls made through the clients it hands out."""

    def __init__(self) -> None:
        self.count = 0

    def client(self, service: str) -> Any:
        client = boto3.client(service, region_name="us-east-1")
        client.meta.events.register("before-call", self._count)
        return client

    def _count(self, **_: Any) -> None:
        self.count += 1

    def of(self, action: Callable[[], Any]) -> int:
        before = self.count
        with contextlib.suppress(Fenced):  # a refused write still costs its requests
            action()
        return self.count - before


def _rows() -> list[tuple[str, int, int]]:
    requests = Requests()
    ddb, s3, sqs = (requests.client(s) for s in ("dynamodb", "s3", "sqs"))
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    s3.create_bucket(Bucket=BUCKET)
    fifo = sqs.create_queue(QueueName="bench.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    grants = Grants.from_env(
        {
            WRITES_ENV: json.dumps(
                {"tables": {"T": TABLE}, "buckets": {"B": BUCKET}, "queues": {"Q": fifo}}
            )
        },
        "bench",
    )
    run = Effects(RunFence.of_job("bench", "t", 200), grants, requests.client)
    zombie = Effects(RunFence.of_job("bench", "t", 100), grants, requests.client)
    key = {"id": {"S": "k"}}
    update = {"Key": key, "UpdateExpression": "SET v = :v"}
    value = {"ExpressionAttributeValues": {":v": {"S": "x"}}}
    table = run.table("T")
    return [
        (
            "DynamoDB put_item",
            requests.of(lambda: ddb.put_item(TableName=TABLE, Item=key)),
            requests.of(lambda: table.put_item(Item=key)),
        ),
        (
            "DynamoDB update_item",
            requests.of(lambda: ddb.update_item(TableName=TABLE, **update, **value)),
            requests.of(lambda: table.update_item(**update, **value)),
        ),
        (
            "DynamoDB write refused (superseded run)",
            1,
            requests.of(lambda: zombie.table("T").put_item(Item=key)),
        ),
        (
            "DynamoDB delete_item",
            requests.of(lambda: ddb.delete_item(TableName=TABLE, Key=key)),
            requests.of(lambda: table.delete_item(Key=key)),
        ),
        (
            "S3 put_object (new object)",
            requests.of(lambda: s3.put_object(Bucket=BUCKET, Key="new-plain", Body=b"x")),
            requests.of(lambda: run.s3.put_object(Bucket="B", Key="new", Body=b"x")),
        ),
        (
            "S3 put_object (overwrite)",
            requests.of(lambda: s3.put_object(Bucket=BUCKET, Key="new-plain", Body=b"y")),
            requests.of(lambda: run.s3.put_object(Bucket="B", Key="new", Body=b"y")),
        ),
        (
            "SQS send_message (FIFO)",
            requests.of(
                lambda: sqs.send_message(
                    QueueUrl=fifo, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d"
                )
            ),
            requests.of(lambda: run.sqs.send_message(QueueUrl="Q", MessageBody="x", effect="e")),
        ),
    ]


def _journal_rows() -> list[tuple[str, int, int]]:
    """A job's tick through the real guard: the requests of a whole tick without and with one
    ``run.once`` effect, and those its retry makes once the effect is DONE (the skip is learnt
    from the intent's refusal, no read)."""
    requests = Requests()
    ddb = requests.client("dynamodb")
    ddb.create_table(
        TableName="bench-runs",
        KeySchema=[
            {"AttributeName": k, "KeyType": t} for k, t in (("pk", "HASH"), ("sk", "RANGE"))
        ],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("pk", "sk")],
        BillingMode="PAY_PER_REQUEST",
    )
    clock = ManualClock(datetime(2026, 11, 25, 12, 0, tzinfo=UTC))
    store = RunStore(ddb, "bench-runs")
    guard = JobGuard(JobSettings(job="bench", table="bench-runs"), store, clock)
    inside: list[int] = []

    def tick(minute: int, body: Callable[[Run], Any]) -> int:
        clock.advance(1)  # a later token than the last claim's, as a real clock gives
        at = datetime(2026, 11, 25, 12, minute, tzinfo=UTC)
        event = Tick(job="bench", scheduled_at=at, source="scheduler")
        return requests.of(
            lambda: guard.execute(event, body, remaining_ms=lambda: 60_000, holder="h")
        )

    def once(run: Run) -> None:
        before = requests.count
        with run.once("welcome-email") as first:
            if first:
                pass
        inside.append(requests.count - before)
        if run.attempt == 1 and run.scheduled_at.minute == 2:
            raise RuntimeError("fails after the effect is DONE: the retry skips it")

    plain = tick(0, lambda run: None)
    journalled = tick(1, once)
    with contextlib.suppress(RuntimeError):  # attempt 1 fails (FAILED) after the effect
        tick(2, once)
    tick(2, once)
    return [
        ("a tick with one `run.once` effect (intent + completion)", plain, journalled),
        ("its retry, the effect DONE: skipped (the refused intent)", 0, inside[-1]),
    ]


LOADED = (
    "import sys, jobs.cleanup, vigil.jobs.decorator, vigil.tasks.decorator; "
    "print(len([m for m in sys.modules if m.startswith('vigil.effects')]))"
)


def run() -> str:
    with mock_aws():
        rows = _rows()
        journal = _journal_rows()
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED],
        env={"PYTHONPATH": str(ROOT / "functions"), "AWS_DEFAULT_REGION": "us-east-1"},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    base = _median_ms("import boto3; import jobs.cleanup", tracing=False)
    first_use = _median_ms("import boto3; import jobs.cleanup; import vigil.effects", False)
    lines = [
        "| Write | plain requests | fenced requests | added |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {plain} | {fenced} | +{fenced - plain} |" for name, plain, fenced in rows),
        "",
        f"A job that does not use `run.fenced` imports {loaded} modules of `vigil.effects`: "
        "+0 ms at import. The first `run.fenced` of a container imports it once: "
        f"{first_use - base:+.1f} ms (median of fresh interpreters).",
        "The S3 put adds a `head_object` (S3 conditions on the ETag, not on metadata); every "
        "other fenced write carries its condition on the write itself.",
        "",
        "| Journal (`run.once`) | DynamoDB requests without | with | added |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {plain} | {used} | +{used - plain} |" for name, plain, used in journal),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
