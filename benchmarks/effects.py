"""Fenced writes (``run.fenced``): requests added per write, and what a job pays to import them.

Requests are counted from botocore's ``before-call`` events on moto, a plain write beside the
same write fenced; a refused write counts too. The import cost: the modules a job that never names
``run.fenced`` loads (none of :mod:`vigil.effects`), and the one-off import on first use.

The strict writers (``run.fenced.strict``) beside the plain ones, through the real jobs guard (its
claim is the job's ``HEAD`` a real claim wrote): requests counted the same way, and the capacity
units each request costs by AWS's rules applied to the sizes of the items as written here (moto
reports no capacity for a transaction, and half a unit for a strongly consistent read): a write
1 unit per KB of the larger of the item before and after; every item of a transaction, its
``ConditionCheck`` included, 2 write units per KB (AWS's transaction capacity rule; a standalone
``ConditionCheck`` measured at 2 write units against real DynamoDB by the dynamodb-conformance
suite); a strongly consistent read 1 read unit per 4 KB.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.host_memory import _wire_size as item_size
from benchmarks.import_time import ROOT, _median_ms
from tests.helpers.tables import create_table
from vigil.clock import ManualClock
from vigil.contract.effects import WRITES_ENV
from vigil.effects import Effects, Fenced, RunFence
from vigil.effects.fence import Grants
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings
from vigil.jobs.store import HEAD_SK, RunStore, job_pk

TABLE, BUCKET = "bench-items", "bench-objects"
STRICT_TABLE = "strict-items"


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
    create_table(ddb, TABLE, "id")
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
            "S3 put_object (the bytes the object already holds)",
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
    create_table(ddb, "bench-runs", "pk", "sk")
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


def _write_units(*sizes: int, transactional: bool = False) -> int:
    return sum(math.ceil(max(size, 1) / 1024) * (2 if transactional else 1) for size in sizes)


def _strict_rows() -> list[tuple[str, str, str]]:
    """Each write plain and strict, by a job run the guard claimed: requests and units."""
    requests = Requests()
    ddb, sqs = requests.client("dynamodb"), requests.client("sqs")
    create_table(ddb, "strict-runs", "pk", "sk")
    create_table(ddb, STRICT_TABLE, "id")
    queue = sqs.create_queue(QueueName="strict-mail")["QueueUrl"]
    requests.client("s3").create_bucket(Bucket="strict-objects")
    granted = {"tables": {"T": STRICT_TABLE}, "queues": {"Q": queue}}
    granted["buckets"] = {"B": "strict-objects"}
    grants = Grants.from_env({WRITES_ENV: json.dumps(granted)}, "bench")
    clock = ManualClock(datetime(2026, 11, 25, 12, 0, tzinfo=UTC))
    guard = JobGuard(
        JobSettings(job="bench", table="strict-runs"), RunStore(ddb, "strict-runs"), clock
    )
    rows: list[tuple[str, str, str]] = []

    def stored(table: str, key: dict[str, Any]) -> dict[str, Any]:
        return dict(ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", {}))

    def body(run: Run) -> None:
        plain = Effects(run.fenced.fence, grants, requests.client)
        strict = Effects(run.fenced.fence, grants, requests.client, claim=run.claim).strict
        key = {"id": {"S": "k"}}
        head = item_size(
            stored("strict-runs", {"pk": {"S": job_pk("bench")}, "sk": {"S": HEAD_SK}})
        )
        for label, write in (
            ("put_item", lambda e: e.table("T").put_item(Item={**key, "v": {"S": "x" * 100}})),
            (
                "update_item",
                lambda e: e.table("T").update_item(
                    Key=key,
                    UpdateExpression="SET n = :n",
                    ExpressionAttributeValues={":n": {"N": "1"}},
                ),
            ),
        ):
            before = item_size(stored(STRICT_TABLE, key))
            count = requests.of(functools.partial(write, plain))
            size = max(before, item_size(stored(STRICT_TABLE, key)))
            strict_count = requests.of(functools.partial(write, strict))
            rows.append(
                (
                    f"DynamoDB {label} ({size} B item; the claim checked: {head} B)",
                    f"{count} request, {_write_units(size)} WRU",
                    f"{strict_count} request, {_write_units(size, head, transactional=True)} WRU",
                )
            )
        bodies = (f"report {n}".encode() for n in itertools.count())
        for label, send in (
            (
                "SQS send_message",
                lambda e: e.sqs.send_message(QueueUrl="Q", MessageBody="x", effect="e"),
            ),
            (
                "S3 put_object (overwrite)",
                lambda e: e.s3.put_object(Bucket="B", Key="k", Body=next(bodies)),
            ),
        ):
            requests.of(functools.partial(send, plain))  # the S3 object exists: an overwrite next
            count = requests.of(functools.partial(send, plain))
            strict_count = requests.of(functools.partial(send, strict))
            rows.append(
                (
                    f"{label} (the claim read first, strongly consistent)",
                    f"{count} request{'s' if count > 1 else ''}",
                    f"{strict_count} requests (+1 GetItem, {math.ceil(head / 4096)} RRU)",
                )
            )

    tick = Tick(job="bench", scheduled_at=clock(), source="scheduler")
    guard.execute(tick, body, remaining_ms=lambda: 60_000, holder="h")
    return rows


LOADED = (
    "import sys, jobs.cleanup, vigil.jobs.decorator, vigil.tasks.decorator; "
    "print(len([m for m in sys.modules if m.startswith('vigil.effects')]))"
)


def run() -> str:
    with mock_aws():
        rows = _rows()
        journal = _journal_rows()
        strict = _strict_rows()
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
        "",
        "| Each write, plain and strict | `run.fenced` | `run.fenced.strict` |",
        "|---|---|---|",
        *(f"| {name} | {plain} | {strict_one} |" for name, plain, strict_one in strict),
        "",
        "WRU: write request units (on demand; the same count of capacity units when "
        "provisioned), RRU: read request units, by AWS's rules on the sizes written here "
        "(see the benchmark's docstring); DynamoDB on demand prices a million WRU at $0.625 "
        "and a million RRU at $0.125 (2025 list prices, us-east-1).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
