"""Tasks: AWS requests, write units, dollars and own time per task, beside Powertools' batch
processing with its idempotency doing the same work, in one run on moto.

Requests are counted from botocore's own ``before-call`` events (as ``jobs_requests`` does), so a
request is counted whether it succeeds or is refused by its condition. moto's
``ReturnConsumedCapacity`` is a constant (1.0 whatever the item), so DynamoDB units are computed
from the item's size as DynamoDB bills them: a write is ceil(max(size before, size after) / 1 KB)
units, at least 1 (a refused conditional write too, by the size of the item it saw); a strongly
consistent read ceil(size / 4 KB). The sizes are read back from the table by an uncounted client.

Time is split: the time inside AWS calls (botocore's ``_make_api_call``, moto's here) apart from
the code's own (:class:`AwsCalls`), on the thread's CPU clock; Lambda's GB-seconds are priced on
the own time at Lambda's CPU share plus an assumed latency per request (:func:`cost_lines`).

The event source is played by hand as Lambda's SQS mapping plays it: ReceiveMessage (up to the
batch size), invoke, DeleteMessageBatch for what the function did not report failed. A
duplicate delivery replays the records (a visibility timeout or a Lambda timeout's whole batch).

Beside the clean path, every other way a task goes (:data:`PATHS`: the key enqueued again, its
message delivered again, a copy while it runs, one failed attempt, a 60 KB result) is counted
end to end on both sides (:func:`run_path`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.offline import offline_aws
from vigil.clock import iso
from vigil.contract.tasks import DEFAULT_COMPLETION_EVENTS, CompletionEvents, TaskStatus
from vigil.dynamo import to_wire
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import epoch_s, task_key
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.sqs_event import sqs_records

TASK = "send-receipt"
BATCH = 10
"""The example's ``SendReceipt`` batch size (``BackgroundTask``'s default)."""
MEMORY_GB = 256 / 1024
"""The example's ``SendReceipt`` memory (``BackgroundTask``'s default, 256 MB)."""
TIMEOUT_MS = 30_000
"""The example's ``SendReceipt`` timeout: every invocation starts with this much time left."""
LEASE_MARGIN = timedelta(seconds=10)
"""``BackgroundTask``'s default lease margin."""
COUNTED = 50
"""Tasks per side in the counting pass (5 full batches)."""
SAMPLE = 200
"""Tasks enqueued and run, each timed, at each queue depth."""
QUICK_SIZES = (1_000,)
FULL_SIZES = (1_000, 10_000, 100_000)
PRICED = "2025 list prices (us-east-1, from ../shared/NOTES.md)"
PRICE = {
    "sqs": 0.40,  # per million requests (standard)
    "wru": 0.625,  # per million write request units (on-demand)
    "rru": 0.125,  # per million read request units
    "events": 1.00,  # per million PutEvents entries (custom events)
    "lambda_requests": 0.20,  # per million invocations
    "s3_put": 5.00,  # per million PUT requests (S3 Standard)
    "s3_get": 0.40,  # per million GET requests
    "gb_s": 0.0000166667,  # per GB-second (x86)
}
PAYLOAD = {"order": "o-0", "email": "buyer@example.com", "total": 4200}
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
READS = frozenset({"GetItem"})
HALF_RRU = "half RRU"
"""Read units are counted in halves (an eventually consistent read of up to 4 KB)."""


# --- what DynamoDB bills ----------------------------------------------------------------------


def item_size(item: dict[str, Any] | None) -> int:
    """An item's size in bytes as DynamoDB counts it (attribute names plus values)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in (item or {}).items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, raw), *_ = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: one}) for one in raw)
    if kind == "L":
        return 3 + sum(1 + _value_size(one) for one in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in raw.items())
    raise ValueError(f"unknown attribute type {kind}")


@dataclass
class Meter:
    """Requests by ``service.operation`` and DynamoDB units, from every client it watches."""

    reader: Any
    """An unwatched DynamoDB client: reads items back for their size."""
    keys: dict[str, list[str]] = field(default_factory=dict)
    indexes: dict[str, list[tuple[list[str], str]]] = field(default_factory=dict)
    """Per table, each global index's key attributes and projection type."""
    requests: Counter[str] = field(default_factory=Counter)
    units: Counter[str] = field(default_factory=Counter)
    """``WRU`` and read units in halves (:data:`HALF_RRU`)."""

    def watch(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.register("before-call.*.*", self._count)
            client.meta.events.register("before-parameter-build.dynamodb.*", self._before)
            client.meta.events.register("after-call.dynamodb.*", self._after)

    def _count(self, model: Any, **_: Any) -> None:
        self.requests[f"{model.service_model.service_id} {model.name}"] += 1

    def _before(self, model: Any, params: dict[str, Any], context: Any, **_: Any) -> None:
        if model.name in WRITES:
            context["vigil_params"] = params
            context["vigil_before_item"] = self._read(params)
            context["vigil_before"] = item_size(context["vigil_before_item"])
        context["vigil_consistent"] = bool(params.get("ConsistentRead"))

    def _after(self, model: Any, parsed: Any, context: Any, **_: Any) -> None:
        if model.name in WRITES:
            item = self._read(context["vigil_params"])
            after = item_size(item)
            self.units["WRU"] += max(1, math.ceil(max(context["vigil_before"], after) / 1024))
            table = context["vigil_params"]["TableName"]
            before = context["vigil_before_item"]
            self.units["WRU"] += sum(
                _index_writes(keys, projection, before, item)
                for keys, projection in self.indexes.get(table, [])
            )
        elif model.name in READS:
            halves = 2 if context.get("vigil_consistent") else 1
            self.units[HALF_RRU] += halves * max(1, math.ceil(item_size(parsed.get("Item")) / 4096))
        elif model.name in ("Query", "Scan"):
            size = sum(item_size(item) for item in parsed.get("Items", []))
            self.units[HALF_RRU] += max(1, math.ceil(size / 4096))

    def _read(self, params: dict[str, Any]) -> dict[str, Any] | None:
        table = params["TableName"]
        if table not in self.keys:
            described = self.reader.describe_table(TableName=table)["Table"]
            self.keys[table] = [part["AttributeName"] for part in described["KeySchema"]]
            self.indexes[table] = [
                (
                    [part["AttributeName"] for part in index["KeySchema"]],
                    index["Projection"]["ProjectionType"],
                )
                for index in described.get("GlobalSecondaryIndexes", [])
            ]
        source = params.get("Key") or params["Item"]
        key = {name: source[name] for name in self.keys[table]}
        item = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return dict(item) if item else None

    @contextlib.contextmanager
    def span(self, into: Counter[str]) -> Iterator[None]:
        """Adds what the block cost (requests and units) to ``into``."""
        requests, units = Counter(self.requests), Counter(self.units)
        with contextlib.suppress(Exception):  # a failing body still costs its requests
            yield
        into.update(self.requests - requests)
        into.update(self.units - units)


def _index_writes(
    keys: list[str], projection: str, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> int:
    """Write units a base-table write costs a global index (items under 1 KB): an item entering
    or leaving it is one index write, one whose index key changes two (a delete and a put), one
    that stays with the same key none for a keys-only index (one otherwise, approximately)."""
    was = before is not None and all(k in before for k in keys)
    now = after is not None and all(k in after for k in keys)
    if was and now:
        assert before is not None and after is not None
        if any(before[k] != after[k] for k in keys):
            return 2
        return 0 if projection == "KEYS_ONLY" or before == after else 1
    return int(was or now)


# --- the two sides ----------------------------------------------------------------------------


@dataclass
class Side:
    """One way of doing the work: how to enqueue, and a Lambda handler for the queue."""

    name: str
    sqs: Any
    queue_url: str
    enqueue: Callable[..., Any]
    """``enqueue(key, **payload)``: one task, keyed by its order."""
    handler: Callable[[Any, Any], dict[str, Any]]
    clients: tuple[Any, ...]


def vigil_side(
    dynamodb: Any,
    sqs: Any,
    events: Any,
    table: str,
    completion_events: CompletionEvents = DEFAULT_COMPLETION_EVENTS,
    s3: Any = None,
) -> tuple[Side, TaskClient]:
    """Vigil's handler and client; with ``s3``, a results bucket for results over 4 KiB (what
    ``BackgroundTask`` deploys)."""
    from vigil.tasks import task

    bucket = ""
    if s3 is not None:
        bucket = "vigil-task-results"
        s3.create_bucket(Bucket=bucket)
    url = sqs.create_queue(QueueName=f"vigil-{TASK}")["QueueUrl"]
    dead = sqs.create_queue(QueueName=f"vigil-{TASK}-dlq")["QueueUrl"]
    spec = TaskSpec(
        name=TASK,
        queue_url=url,
        table=table,
        dead_letter_url=dead,
        completion_events=completion_events,
    )
    client = TaskClient(Catalog({TASK: spec}), sqs=sqs, dynamodb=dynamodb, s3=s3)
    handler = task(
        _send_receipt,
        settings=TaskSettings(
            task=TASK,
            table=table,
            queue_url=url,
            dead_letter_url=dead,
            lease_margin=LEASE_MARGIN,
            completion_events=completion_events,
            results_bucket=bucket,
        ),
        dynamodb=dynamodb,
        sqs=sqs,
        events=events,
        s3=s3,
    )
    side = Side(
        f"Vigil tasks ({completion_events.value})",
        sqs,
        url,
        lambda key, **extra: client.enqueue(TASK, PAYLOAD | {"order": key} | extra, key=key),
        handler,
        (dynamodb, sqs, events, *([s3] if s3 is not None else [])),
    )
    return side, client


@dataclass
class Work:
    """The example's work, minus the mail, the same on both sides, with what a path needs: a
    first attempt that fails (``fail`` in the payload), a big result (``big``: bytes of JSON),
    something to do while it runs (``during``, set by the path: a copy delivered meanwhile)."""

    during: Callable[[dict[str, Any]], None] | None = None
    failed: set[str] = field(default_factory=set)
    copied: set[str] = field(default_factory=set)

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        order = payload["order"]
        if self.during is not None and order not in self.copied:
            self.copied.add(order)
            self.during(payload)
        if payload.get("fail") and order not in self.failed:
            self.failed.add(order)
            raise RuntimeError("the first attempt fails")
        result: dict[str, Any] = {"receipt": f"R-{order}", "order": order}
        if payload.get("big"):
            result["lines"] = "x" * int(payload["big"])
        return result


WORK = Work()


def _send_receipt(run: Any, payload: dict[str, Any]) -> dict[str, Any]:
    return WORK(payload)


def powertools_side(dynamodb: Any, sqs: Any) -> Side:
    """Powertools' documented recipe: ``BatchProcessor`` + ``process_partial_response``, each
    record's work under ``idempotent_function`` keyed by the order, a plain SendMessage."""
    from aws_lambda_powertools.utilities.batch import (
        BatchProcessor,
        EventType,
        process_partial_response,
    )
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    dynamodb.create_table(
        TableName="idempotency",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    url = sqs.create_queue(QueueName="powertools-receipts")["QueueUrl"]
    persistence = DynamoDBPersistenceLayer(table_name="idempotency", boto3_client=dynamodb)
    config = IdempotencyConfig(event_key_jmespath="order", expires_after_seconds=7 * 86400)
    warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")

    @idempotent_function(  # type: ignore[untyped-decorator]
        data_keyword_argument="payload", persistence_store=persistence, config=config
    )
    def send_receipt(payload: dict[str, Any]) -> dict[str, Any]:
        return _send_receipt(None, payload)

    def record_handler(record: Any) -> Any:
        return send_receipt(payload=json.loads(record.body))

    def handler(event: Any, context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        processor = BatchProcessor(event_type=EventType.SQS)
        return dict(
            process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        )

    return Side(
        "Powertools batch + idempotency",
        sqs,
        url,
        lambda key, **extra: sqs.send_message(
            QueueUrl=url, MessageBody=json.dumps(PAYLOAD | {"order": key} | extra)
        ),
        handler,
        (dynamodb, sqs),
    )


# --- the event source -------------------------------------------------------------------------


def receive(side: Side) -> list[dict[str, Any]]:
    """One poll of the event source: a batch's records (empty: the queue is drained)."""
    answer = side.sqs.receive_message(
        QueueUrl=side.queue_url,
        MaxNumberOfMessages=BATCH,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return sqs_records(answer.get("Messages", []))


def invoke(side: Side, batch: list[dict[str, Any]]) -> list[str]:
    answer = side.handler({"Records": batch}, LambdaContext(remaining_ms=lambda: TIMEOUT_MS))
    return [failure["itemIdentifier"] for failure in answer["batchItemFailures"]]


def settle(side: Side, batch: list[dict[str, Any]], failed: list[str]) -> None:
    done = [r for r in batch if r["messageId"] not in failed]
    if done:
        side.sqs.delete_message_batch(
            QueueUrl=side.queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)
            ],
        )


# --- counting ---------------------------------------------------------------------------------


@dataclass
class Counts:
    enqueue: Counter[str] = field(default_factory=Counter)
    first: Counter[str] = field(default_factory=Counter)
    duplicate: Counter[str] = field(default_factory=Counter)
    source: Counter[str] = field(default_factory=Counter)
    """The event source's own requests (receive, delete) for the first deliveries."""
    failures: int = 0
    tasks: int = 0

    def per_task(self, counter: Counter[str]) -> dict[str, float]:
        return {name: value / self.tasks for name, value in sorted(counter.items())}


def count(side: Side, meter: Meter, tasks: int = COUNTED) -> Counts:
    """Enqueue ``tasks``, drain them in batches, then redeliver every batch once."""
    meter.watch(*side.clients)
    counts = Counts(tasks=tasks)
    prefix = side.name.split()[0].lower()
    for i in range(tasks):
        with meter.span(counts.enqueue):
            side.enqueue(f"{prefix}-{i}")
    delivered = []
    while True:
        with meter.span(counts.source):
            batch = receive(side)
        if not batch:
            break
        with meter.span(counts.first):
            failed = invoke(side, batch)
        counts.failures += len(failed)
        with meter.span(counts.source):
            settle(side, batch, failed)
        delivered.append(batch)
    for batch in delivered:
        with meter.span(counts.duplicate):
            counts.failures += len(invoke(side, batch))
    # the last, empty poll is the event source idling, not a task's cost
    counts.source["SQS ReceiveMessage"] -= 1
    return counts


# --- the paths: every way a task goes, what it costs --------------------------------------------

PATH_TASKS = 10
"""Tasks per path and side: one full batch."""
BIG_RESULT_BYTES = 60_000


@dataclass(frozen=True)
class PathSpec:
    name: str
    payload: dict[str, Any]
    what: str


PATHS = (
    PathSpec("clean", {}, "enqueued once, run once"),
    PathSpec(
        "duplicate after: the key again",
        {},
        "the same key enqueued again once the task ended (a new message)",
    ),
    PathSpec(
        "duplicate after: its message again",
        {},
        "its message delivered again once the task ended (its batch timed out after the finish, "
        "or its delete failed): an announced outcome's event is sent again",
    ),
    PathSpec(
        "duplicate during",
        {},
        "a copy of its message delivered while it runs; the copy comes back once the run ended",
    ),
    PathSpec("one failure", {"fail": True}, "the first attempt raises, the retry succeeds"),
    PathSpec(
        "big result, then its message again",
        {"big": BIG_RESULT_BYTES},
        f"the task returns {BIG_RESULT_BYTES // 1000} KB of JSON; then its message again",
    ),
)


@dataclass
class PathCount:
    """What a path cost its tasks, all told: requests and units (``Meter``), invocations."""

    requests: Counter[str] = field(default_factory=Counter)
    invocations: int = 0
    tasks: int = PATH_TASKS

    def per_task(self, name: str) -> float:
        return self.requests.get(name, 0) / self.tasks

    def service(self, prefix: str) -> float:
        return sum(v for k, v in self.requests.items() if k.startswith(prefix)) / self.tasks

    @property
    def dollars(self) -> float:
        """$ per million tasks on this path (Lambda's GB-seconds left out: see the cost table)."""
        s3_put = self.per_task("S3 PutObject")
        s3_get = self.per_task("S3 GetObject")
        return (
            self.service("SQS ") * PRICE["sqs"]
            + self.per_task("WRU") * PRICE["wru"]
            + self.per_task(HALF_RRU) / 2 * PRICE["rru"]
            + self.per_task("EventBridge PutEvents") * PRICE["events"]
            + s3_put * PRICE["s3_put"]
            + s3_get * PRICE["s3_get"]
            + self.invocations / self.tasks * PRICE["lambda_requests"]
        )


def run_path(side: Side, meter: Meter, path: PathSpec, tasks: int = PATH_TASKS) -> PathCount:
    """``tasks`` tasks down ``path``, counted from the enqueue to the last delete: the event
    source's receive and delete too. A message that "comes back" is handed to the function
    again as the event source would once its visibility ends (no test waits for it)."""
    meter.watch(*side.clients)
    count = PathCount(tasks=tasks)
    prefix = side.name.split()[0].lower()
    keys = [f"{prefix}-{path.name[:3]}-{i}" for i in range(tasks)]

    def deliver(batch: list[dict[str, Any]]) -> list[str]:
        """One invocation; one that raises (Powertools' batch processor does when every record
        of the batch failed) fails the whole batch, as Lambda's event source takes it."""
        count.invocations += 1
        try:
            return invoke(side, batch)
        except Exception:
            return [record["messageId"] for record in batch]

    with meter.span(count.requests):
        for key in keys:
            side.enqueue(key, **path.payload)
        batch = receive(side)
        by_order = {_order_of(record["body"]): record for record in batch}
        copies: list[dict[str, Any]] = []
        if path.name == "duplicate during":

            def copy_meanwhile(payload: dict[str, Any]) -> None:
                record = by_order[payload["order"]]
                if deliver([record]):  # kept: it comes back when the run has ended
                    copies.append(record)

            WORK.during = copy_meanwhile
        try:
            failed = deliver(batch)
        finally:
            WORK.during = None
        if failed:  # a retry after its backoff (the message's visibility), or a copy kept
            retried = [r for r in batch if r["messageId"] in failed]
            failed = deliver(retried)
        if copies:
            deliver(copies)
        if path.name in (
            "duplicate after: its message again",
            "big result, then its message again",
        ):
            deliver(batch)
        settle(side, batch, failed)
        if path.name == "duplicate after: the key again":
            for key in keys:
                side.enqueue(key, **path.payload)
            again = receive(side)
            settle(side, again, deliver(again))
    WORK.failed.clear()
    WORK.copied.clear()
    return count


def _order_of(body: str) -> str:
    """The order a message is for: Vigil's envelope names it as the task's id, Powertools' body
    is the payload itself."""
    raw = json.loads(body)
    return str(raw["vigil_task"]["id"] if "vigil_task" in raw else raw["order"])


def measure_paths() -> list[tuple[PathSpec, list[PathCount]]]:
    """Each path on each side (Vigil with its results bucket, default and "all"; Powertools),
    each in a fresh moto."""
    rows = []
    for path in PATHS:
        counted = []
        for choice in CHOICES:
            with mock_aws():
                dynamodb, sqs, events = _clients()
                s3 = boto3.client("s3", region_name="us-east-1")
                side, _ = vigil_side(dynamodb, sqs, events, _tasks_table(dynamodb), choice, s3)
                with _quiet():
                    counted.append(run_path(side, Meter(_clients()[0]), path))
        with mock_aws():
            dynamodb, sqs, _ = _clients()
            with _quiet():
                counted.append(run_path(powertools_side(dynamodb, sqs), Meter(_clients()[0]), path))
        rows.append((path, counted))
    return rows


def _paths_table(rows: list[tuple[PathSpec, list[PathCount]]]) -> list[str]:
    names = _columns()
    names[0] += " (default)"
    lines = [
        f"| per task, all told (mean of {PATH_TASKS}: enqueue, every delivery, the event "
        f"source's receives and deletes) | {' | '.join(names)} |",
        "|---|" + "---|" * len(names),
    ]
    for path, counted in rows:
        cells = []
        for c in counted:
            parts = [
                f"DDB {c.service('DynamoDB '):g}",
                f"SQS {c.service('SQS '):g}",
            ]
            if c.per_task("EventBridge PutEvents"):
                parts.append(f"EB {c.per_task('EventBridge PutEvents'):g}")
            if c.service("S3 "):
                parts.append(f"S3 {c.service('S3 '):g}")
            cells.append(
                f"{' + '.join(parts)} requests; **{c.per_task('WRU'):g} WRU**; "
                f"{c.invocations / c.tasks:g} invocations; **${c.dollars:.2f}**/M"
            )
        lines.append(f"| **{path.name}**: {path.what} | {' | '.join(cells)} |")
    return lines


PATHS_NOTE = (
    "Every path's requests and write units are counted on moto (a refused conditional write is "
    "billed by the item it read; an index write is counted as DynamoDB bills it: an item "
    "entering or leaving Vigil's sparse `retries` index is one more write unit). Priced at the "
    "prices above, plus S3 Standard's $5.00 per million PUT and $0.40 per million GET (2025 list "
    "prices, not in NOTES.md), and without Lambda's GB-seconds (see the cost table). Vigil runs "
    "with its results bucket, as `BackgroundTask` deploys it."
)


# --- timing -----------------------------------------------------------------------------------


class AwsCalls:
    """The time spent inside AWS calls (botocore's ``BaseClient._make_api_call``, wrapped while
    :meth:`watching`) and their number: on moto that time is the emulator's, which says nothing
    of AWS, so a block's own time is its time minus this. Nested calls (a hook that reads the
    table back) count once, inside the outer call.

    Times are this thread's CPU time (``time.thread_time``; moto runs in the caller's thread):
    on a machine shared with other work the wall clock also counts the waits for a core, which
    are not the code's. The wall clock is kept beside it (``wall_s``), for what it is."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.requests = 0
        self._depth = 0
        self.clock = time.thread_time

    @contextlib.contextmanager
    def watching(self) -> Iterator[AwsCalls]:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call

        def timed_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if self._depth:
                return original(client, operation, params)
            self._depth += 1
            begin = self.clock()
            try:
                return original(client, operation, params)
            finally:
                self.seconds += self.clock() - begin
                self.requests += 1
                self._depth -= 1

        BaseClient._make_api_call = timed_call  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]

    @contextlib.contextmanager
    def span(self, into: Split) -> Iterator[None]:
        """Adds the block's time, its time in AWS calls and its requests to ``into``."""
        seconds, requests = self.seconds, self.requests
        begin, wall = self.clock(), time.perf_counter()
        yield
        into.total_s += self.clock() - begin
        into.wall_s += time.perf_counter() - wall
        into.aws_s += self.seconds - seconds
        into.requests += self.requests - requests


@dataclass
class Split:
    """A measured block, summed over ``per`` tasks: its CPU time, the part inside AWS calls,
    its wall time, and the requests it made."""

    total_s: float = 0.0
    aws_s: float = 0.0
    wall_s: float = 0.0
    requests: int = 0
    per: int = SAMPLE

    @property
    def own_ms(self) -> float:
        """Vigil's (or Powertools') own time per task: all but the time inside AWS calls."""
        return 1000 * (self.total_s - self.aws_s) / self.per

    @property
    def aws_ms(self) -> float:
        return 1000 * self.aws_s / self.per

    @property
    def wall_ms(self) -> float:
        return 1000 * self.wall_s / self.per

    @property
    def requests_per_task(self) -> float:
        return self.requests / self.per


@dataclass(frozen=True)
class Timing:
    queued: int
    enqueue: Split
    consume: Split
    fill_s: float
    wall_s: float


def timed(side: Side, queued: int, fill: Callable[[int], None]) -> Timing:
    """Own time per task of the enqueue and of the function, with ``queued`` tasks waiting: the
    queue (and table) is filled to that depth, then :data:`SAMPLE` tasks are enqueued one by one
    and run in batches of :data:`BATCH`, each timed, with the time inside AWS calls apart. The
    sample's batches are its own messages as sent, handed to the function as the event source
    would hand them: moto's ReceiveMessage scans the whole queue (O(depth), an emulator
    artefact), and the function itself makes no queue request for a task that succeeds."""
    started = time.perf_counter()
    fill(queued - SAMPLE)
    filled = time.perf_counter() - started
    sent = Sent(side.sqs)
    enqueue, consume = Split(), Split()
    calls = AwsCalls()
    with calls.watching(), _cheap_moto_sends():
        for i in range(SAMPLE):
            with calls.span(enqueue):
                side.enqueue(f"sample-{i}")
        for start in range(0, SAMPLE, BATCH):
            batch = sent.records[start : start + BATCH]
            with calls.span(consume):
                failed = invoke(side, batch)
            if failed:
                raise RuntimeError(f"{side.name}: {len(failed)} messages failed")
    return Timing(queued, enqueue, consume, filled, time.perf_counter() - started)


@contextlib.contextmanager
def _cheap_moto_sends() -> Iterator[None]:
    """moto's SendMessage reads the queue's attributes, whose three approximate counts walk
    every message in the queue (for ``ContentBasedDeduplication``, on a standard queue too): an
    enqueue took 630 ms of wall time at 10,000 queued (load ~10), so seconds at 100,000, for
    each of the sample's sends on both sides. Nothing in the timed sample reads those
    counts, so they are stubbed while it runs; the time is inside an AWS call either way, and
    so not in the own time measured."""
    from unittest import mock

    from moto.sqs.models import Queue

    counts = (
        "approximate_number_of_messages",
        "approximate_number_of_messages_delayed",
        "approximate_number_of_messages_not_visible",
    )
    with contextlib.ExitStack() as stack:
        for name in counts:
            stack.enter_context(mock.patch.object(Queue, name, property(lambda _: 0)))
        yield


class Sent:
    """The records of every message an SQS client sends from now on."""

    def __init__(self, sqs: Any) -> None:
        self.records: list[dict[str, Any]] = []
        sqs.meta.events.register("before-parameter-build.sqs.SendMessage", self._body)
        sqs.meta.events.register("after-call.sqs.SendMessage", self._sent)

    def _body(self, params: dict[str, Any], context: Any, **_: Any) -> None:
        context["vigil_body"] = params["MessageBody"]

    def _sent(self, parsed: Any, context: Any, **_: Any) -> None:
        message = {
            "MessageId": parsed["MessageId"],
            "ReceiptHandle": "",
            "Body": context["vigil_body"],
        }
        self.records.extend(sqs_records([message]))


def filler(side: Side, client: TaskClient | None, table: str) -> Callable[[int], None]:
    """Puts ``n`` tasks on the queue and (Vigil) their QUEUED records straight into moto's
    stores: the depth, without ``n`` requests through HTTP emulation. Not even through moto's
    backend ``send_message``: it reads the queue's attributes, which counts every message in
    the queue (three scans) on each send, so filling ``n`` costs O(n^2) (3,000 took 335 s).
    A message is built as moto builds one (:class:`moto.sqs.models.Message`, marked sent) and
    appended to the queue's list."""
    from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
    from moto.dynamodb.models import dynamodb_backends
    from moto.moto_api._internal import mock_random
    from moto.sqs.models import Message, sqs_backends

    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_queue(
        side.queue_url.rsplit("/", 1)[-1]
    )
    records = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(table)

    def fill(n: int) -> None:
        now = datetime.now(UTC)
        messages = []
        for i in range(n):
            message = Message(str(mock_random.uuid4()), _body(client, f"fill-{i}"))
            message.mark_sent()
            messages.append(message)
            if client is not None:
                item = {
                    **task_key(TASK, f"fill-{i}"),
                    "task": TASK,
                    "id": f"fill-{i}",
                    "status": TaskStatus.QUEUED.value,
                    "attempts": 0,
                    "enqueued_at": iso(now),
                    "expires_at": epoch_s(now + timedelta(days=7)),
                }
                records.put_item(to_wire(item))
        queue._messages.extend(messages)

    return fill


def _body(client: TaskClient | None, key: str) -> str:
    payload = PAYLOAD | {"order": key}
    return client.plan(TASK, payload, key=key).body if client else json.dumps(payload)


# --- the run ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[int]:
    """The handlers' log lines and metrics (stdout, CloudWatch Logs in Lambda) into a file: the
    table stays readable, and the bytes per task are measured. Yields nothing useful; read
    ``_quiet.written`` after."""
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield 0
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            _QUIET["written"] = sink.seek(0, os.SEEK_END)


_QUIET: dict[str, int] = {"written": 0}


def _environment() -> None:
    offline_aws()
    os.environ["POWERTOOLS_IDEMPOTENCY_DISABLED"] = "false"
    os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"  # no X-Ray daemon on moto


def _clients() -> tuple[Any, Any, Any]:
    return (
        boto3.client("dynamodb", region_name="us-east-1"),
        boto3.client("sqs", region_name="us-east-1"),
        boto3.client("events", region_name="us-east-1"),
    )


def _tasks_table(dynamodb: Any) -> str:
    """The stack's tasks table as synthesized (its keys, no index: what a write costs)."""
    from vigil_tools.emulator.template import create_table, synthesized_app

    return create_table(synthesized_app(), dynamodb, "Vigil/Tasks", "vigil-tasks")


CHOICES = (DEFAULT_COMPLETION_EVENTS, CompletionEvents.ALL)
"""Vigil's configurations priced: the default (the target is judged on it), and every outcome
announced (one PutEvents entry more per task)."""


def measure_counts(
    table_of: Callable[[Any], str] = _tasks_table,
) -> tuple[list[Counts], int]:
    """Vigil counted with each of :data:`CHOICES`, then Powertools; and the stdout bytes per
    task of Vigil's default."""
    counted, logged = [], 0
    for choice in CHOICES:
        with mock_aws():
            dynamodb, sqs, events = _clients()
            vigil, _ = vigil_side(dynamodb, sqs, events, table_of(dynamodb), choice)
            with _quiet():
                counted.append(count(vigil, Meter(_clients()[0])))
            if choice is DEFAULT_COMPLETION_EVENTS:
                logged = _QUIET["written"] // (2 * COUNTED)
    with mock_aws():
        dynamodb, sqs, _ = _clients()
        counted.append(count(powertools_side(dynamodb, sqs), Meter(_clients()[0])))
    return counted, logged


def timed_vigil(queued: int, choice: CompletionEvents = DEFAULT_COMPLETION_EVENTS) -> Timing:
    with mock_aws():
        dynamodb, sqs, events = _clients()
        table = _tasks_table(dynamodb)
        side, client = vigil_side(dynamodb, sqs, events, table, choice)
        with _quiet():
            return timed(side, queued, filler(side, client, table))


def timed_powertools(queued: int) -> Timing:
    with mock_aws():
        dynamodb, sqs, _ = _clients()
        side = powertools_side(dynamodb, sqs)
        with _quiet():
            return timed(side, queued, filler(side, None, "idempotency"))


def measure_times(sizes: tuple[int, ...]) -> list[tuple[Timing, Timing]]:
    """Vigil (default) and Powertools at each depth, each in a fresh moto."""
    return [(timed_vigil(size), timed_powertools(size)) for size in sizes]


def run(quick: bool = False, sizes: tuple[int, ...] | None = None) -> str:
    _environment()
    began = datetime.now(UTC)
    counted, logged = measure_counts()
    sizes = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    times = measure_times(sizes)
    # Lambda's GB-seconds are priced on the own time at the smallest depth, per configuration.
    vigil, powertools = times[0]
    priced = [vigil, timed_vigil(sizes[0], CompletionEvents.ALL), powertools]
    lines = _requests_table(counted)
    lines += ["", *_cost_table(counted, priced, logged)]
    lines += ["", *_paths_table(measure_paths()), "", PATHS_NOTE]
    lines += ["", *_time_table(times)]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(
        f"\nRun {began:%Y-%m-%d %H:%M} UTC, {(datetime.now(UTC) - began).total_seconds():.0f} s, "
        f"load average at the end {load} on {os.cpu_count()} cores: `python -m "
        f"benchmarks.tasks_requests --sizes {','.join(str(n) for n in sizes)}`."
    )
    return "\n".join(lines)


def _columns() -> list[str]:
    """The configurations' names, in :func:`measure_counts`' order."""
    return [f"Vigil, {choice.value}" for choice in CHOICES] + ["Powertools batch + idempotency"]


def _requests_table(counted: list[Counts]) -> list[str]:
    names = _columns()
    names[0] += " (default)"
    lines = [
        f"| per task (mean of {COUNTED}; batches of {BATCH}) | {' | '.join(names)} |",
        "|---|" + "---|" * len(counted),
    ]
    for label, part in (
        ("enqueue", "enqueue"),
        ("first run (the function's requests)", "first"),
        ("event source per task (receive + delete of its batch)", "source"),
        ("duplicate delivery (the function's requests)", "duplicate"),
    ):
        cells = [_spelled(c, getattr(c, part)) for c in counted]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    wru = [f"**{c.per_task(c.enqueue + c.first).get('WRU', 0.0):g}**" for c in counted]
    wru[0] += " (target <= 3)"
    lines.append(f"| **DynamoDB write units per task** (enqueue + run) | {' | '.join(wru)} |")
    dup = [
        f"**{sum(v for k, v in c.per_task(c.duplicate).items() if k not in ('WRU', HALF_RRU)):g}**"
        for c in counted
    ]
    dup[0] += " (target 1)"
    lines.append(f"| **requests per duplicate** | {' | '.join(dup)} |")
    if any(c.failures for c in counted):
        failures = " | ".join(str(c.failures) for c in counted)
        lines.append(f"| messages reported failed (should be 0) | {failures} |")
    return lines


def _spelled(counts: Counts, counter: Counter[str]) -> str:
    parts = [
        f"{name.replace('DynamoDB ', 'DDB ').replace('EventBridge ', 'EB ')} {value:g}"
        for name, value in counts.per_task(counter).items()
        if value
    ]
    return ", ".join(parts) or "none"


LAMBDA_VCPU_MB = 1769
"""Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB (AWS's
documentation), so at :data:`MEMORY_GB` the own time measured on a whole core stretches by
1,769 / 256 (about 6.9) when the code is CPU-bound, as it is between its requests."""
CPU_STRETCH = LAMBDA_VCPU_MB / (MEMORY_GB * 1024)
AWS_LATENCY_MS = 10
"""Assumed: the time a Lambda function waits on one AWS request in the region (DynamoDB,
SQS, EventBridge answer in single-digit to low tens of milliseconds). The number of requests is
measured; moto's time for them is not AWS's, so it is replaced by this."""
GB_S_LINE = (
    f"Lambda GB-seconds ({MEMORY_GB * 1024:.0f} MB x (own CPU time x {CPU_STRETCH:.1f} + "
    f"requests x {AWS_LATENCY_MS} ms))"
)


def cost_lines(counts: Counts, timing: Timing) -> dict[str, tuple[float, float]]:
    """``{line: (quantity per task, $ per million tasks)}``: the requests and units counted,
    and the function's GB-seconds on its own time (stretched by :data:`CPU_STRETCH`) plus its
    requests at :data:`AWS_LATENCY_MS`."""
    per = counts.per_task(counts.enqueue + counts.first + counts.source)
    sqs = sum(v for k, v in per.items() if k.startswith("SQS "))
    events = per.get("EventBridge PutEvents", 0.0)
    rru = per.get(HALF_RRU, 0.0) / 2
    billed_ms = (
        timing.consume.own_ms * CPU_STRETCH + timing.consume.requests_per_task * AWS_LATENCY_MS
    )
    gb_s = MEMORY_GB * billed_ms / 1000
    return {
        "SQS requests (send, receive, delete)": (sqs, sqs * PRICE["sqs"]),
        "DynamoDB write units": (per.get("WRU", 0.0), per.get("WRU", 0.0) * PRICE["wru"]),
        "DynamoDB read units": (rru, rru * PRICE["rru"]),
        "EventBridge PutEvents (completion event)": (events, events * PRICE["events"]),
        "Lambda requests (one per batch)": (1 / BATCH, PRICE["lambda_requests"] / BATCH),
        GB_S_LINE: (gb_s, gb_s * 1_000_000 * PRICE["gb_s"]),
    }


def _cost_table(counted: list[Counts], priced: list[Timing], logged: int) -> list[str]:
    sides = [cost_lines(c, t) for c, t in zip(counted, priced, strict=True)]
    names = _columns()
    names[0] += " (default)"
    header = " | ".join(f"{name}: per task | $" for name in names)
    lines = [
        f"| $ per million tasks ({PRICED}; priced {datetime.now(UTC):%Y-%m-%d}) | {header} |",
        "|---|" + "---:|---:|" * len(sides),
    ]
    for line in sides[0]:
        cells = " | ".join(f"{side[line][0]:.3g} | {side[line][1]:.2f}" for side in sides)
        lines.append(f"| {line} | {cells} |")
    totals = [f"**{sum(d for _, d in side.values()):.2f}**" for side in sides]
    totals[0] += " (target <= 3)"
    lines.append(f"| **total** | {' | '.join(f' | {t}' for t in totals)} |")
    timing_notes = "; ".join(
        f"{name}: {t.consume.own_ms:.2f} ms own CPU + {t.consume.requests_per_task:g} requests "
        f"({t.consume.aws_ms:.2f} ms CPU inside moto, not priced)"
        for name, t in zip(names, priced, strict=True)
    )
    lines.append(
        f'\nThe target is judged on the default (`completion_events="failures"`: a task that '
        'succeeds sends no event; a failed one does, too rare to show per million); "all" '
        "adds one PutEvents entry per task. Lambda's GB-seconds are the function's own CPU "
        "time per task (measured: all but the time inside botocore's `_make_api_call`, at "
        f"{priced[0].queued:,} queued tasks) stretched by {CPU_STRETCH:.1f}, **assumed** "
        f"(Lambda's CPU share at {MEMORY_GB * 1024:.0f} MB: one vCPU per {LAMBDA_VCPU_MB:,} MB), "
        f"plus, **assumed**, {AWS_LATENCY_MS} ms of AWS latency per request it makes (the "
        "requests are counted in the run). Per task: "
        f"{timing_notes}. Also assumed: full batches of {BATCH} (the example's batch size; at "
        "batch size 1 the event source's receive + delete and Lambda's request are per task: "
        f"about +${(2 - 2 / BATCH) * PRICE['sqs'] + (1 - 1 / BATCH) * PRICE['lambda_requests']:.2f} "
        "per million). Not in the table: the event source's empty polls while the queue is idle "
        "(a fixed few hundred thousand requests a month, cents), DynamoDB storage (records "
        f"kept for `retention`), and CloudWatch Logs: the Vigil function wrote {logged:,} bytes "
        f"of log lines and metrics per task (about ${logged * 1e6 / 1e9 * 0.50:.2f} per million "
        "at $0.50 per GB ingested, a price not in NOTES.md)."
    )
    return lines


def _time_table(rows: list[tuple[Timing, Timing]]) -> list[str]:
    lines = [
        "| queued tasks | Vigil enqueue: own ms | in AWS calls ms (requests) | Vigil function: "
        "own ms | in AWS calls ms (requests) | Powertools enqueue: own ms | in AWS calls ms "
        "(requests) | Powertools function: own ms | in AWS calls ms (requests) | fill s | wall s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for ours, theirs in rows:
        cells = " | ".join(
            f"{split.own_ms:.2f} | {split.aws_ms:.2f} ({split.requests_per_task:g})"
            for split in (ours.enqueue, ours.consume, theirs.enqueue, theirs.consume)
        )
        lines.append(
            f"| {ours.queued:,} | {cells} | {ours.fill_s + theirs.fill_s:.0f} | "
            f"{ours.wall_s + theirs.wall_s:.0f} |"
        )
    walls = "; ".join(
        f"{ours.queued:,}: "
        + ", ".join(
            f"{split.wall_ms:.1f}"
            for split in (ours.enqueue, ours.consume, theirs.enqueue, theirs.consume)
        )
        for ours, theirs in rows
    )
    lines.append(
        f"\nPer task, in-process on moto, CPU time of the benchmark's thread (the machine is "
        f"shared, so the wall clock counts waits for a core too): at each depth the queue (and "
        f"the tasks table) is filled straight into moto's stores, then {SAMPLE} enqueues and "
        f"{SAMPLE} runs (batches of {BATCH} of the sample's own messages) are timed. Own time is "
        "all but the time inside AWS calls (botocore's `_make_api_call`, which includes "
        "botocore's own building and parsing of the request); the time inside them is moto's, "
        "shown for what it is (moto's SendMessage would walk the whole queue three times; the "
        "counts it walks for are stubbed during the sample). The enqueue is SendMessage + "
        "PutItem (Powertools: SendMessage); the function's time is a batch's divided by its "
        "size; the event source's receive and delete are outside both. Wall ms per task, same "
        f"order (Vigil enqueue, function, Powertools enqueue, function): {walls}."
    )
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=lambda text: tuple(int(s) for s in text.split(",")))
    arguments = parser.parse_args()
    print(run(quick=arguments.quick, sizes=arguments.sizes))
