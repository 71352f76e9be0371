"""Tasks: AWS requests, write units, dollars and own time per task, beside Powertools' batch
processing with its idempotency doing the same work, in one run on moto.

Requests are counted from botocore's own ``before-call`` events (as ``jobs_requests`` does), so a
request is counted whether it succeeds or is refused by its condition. moto's
``ReturnConsumedCapacity`` is a constant (1.0 whatever the item), so DynamoDB units are computed
from the item's size as DynamoDB bills them: a write is ceil(max(size before, size after) / 1 KB)
units, at least 1 (a refused conditional write too, by the size of the item it saw); a strongly
consistent read ceil(size / 4 KB). The sizes are read back from the table by an uncounted client.

The event source is played by hand as Lambda's SQS mapping plays it: ReceiveMessage (up to the
batch size), invoke, DeleteMessageBatch for what the function did not report failed. A
duplicate delivery replays the records (a visibility timeout or a Lambda timeout's whole batch).
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

from vigil.clock import iso
from vigil.contract.tasks import TaskStatus
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
QUICK_SIZES = (1_000, 3_000)
FULL_SIZES = (1_000, 10_000, 100_000)
PRICED = "2025 list prices (us-east-1, from ../shared/NOTES.md)"
PRICE = {
    "sqs": 0.40,  # per million requests (standard)
    "wru": 0.625,  # per million write request units (on-demand)
    "rru": 0.125,  # per million read request units
    "events": 1.00,  # per million PutEvents entries (custom events)
    "lambda_requests": 0.20,  # per million invocations
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
            context["vigil_before"] = item_size(self._read(params))
        context["vigil_consistent"] = bool(params.get("ConsistentRead"))

    def _after(self, model: Any, parsed: Any, context: Any, **_: Any) -> None:
        if model.name in WRITES:
            after = item_size(self._read(context["vigil_params"]))
            self.units["WRU"] += max(1, math.ceil(max(context["vigil_before"], after) / 1024))
        elif model.name in READS:
            halves = 2 if context.get("vigil_consistent") else 1
            self.units[HALF_RRU] += halves * max(1, math.ceil(item_size(parsed.get("Item")) / 4096))
        elif model.name in ("Query", "Scan"):
            size = sum(item_size(item) for item in parsed.get("Items", []))
            self.units[HALF_RRU] += max(1, math.ceil(size / 4096))

    def _read(self, params: dict[str, Any]) -> dict[str, Any] | None:
        table = params["TableName"]
        if table not in self.keys:
            schema = self.reader.describe_table(TableName=table)["Table"]["KeySchema"]
            self.keys[table] = [part["AttributeName"] for part in schema]
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


# --- the two sides ----------------------------------------------------------------------------


@dataclass
class Side:
    """One way of doing the work: how to enqueue, and a Lambda handler for the queue."""

    name: str
    sqs: Any
    queue_url: str
    enqueue: Callable[[str], Any]
    handler: Callable[[Any, Any], dict[str, Any]]
    clients: tuple[Any, ...]


def vigil_side(dynamodb: Any, sqs: Any, events: Any, table: str) -> tuple[Side, TaskClient]:
    from vigil.tasks import task

    url = sqs.create_queue(QueueName=f"vigil-{TASK}")["QueueUrl"]
    dead = sqs.create_queue(QueueName=f"vigil-{TASK}-dlq")["QueueUrl"]
    client = TaskClient(
        Catalog({TASK: TaskSpec(name=TASK, queue_url=url, table=table, dead_letter_url=dead)}),
        sqs=sqs,
        dynamodb=dynamodb,
    )
    handler = task(
        _send_receipt,
        settings=TaskSettings(
            task=TASK,
            table=table,
            queue_url=url,
            dead_letter_url=dead,
            lease_margin=LEASE_MARGIN,
        ),
        dynamodb=dynamodb,
        sqs=sqs,
        events=events,
    )
    side = Side(
        "Vigil tasks",
        sqs,
        url,
        lambda key: client.enqueue(TASK, PAYLOAD | {"order": key}, key=key),
        handler,
        (dynamodb, sqs, events),
    )
    return side, client


def _send_receipt(run: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """The example's work, minus the mail: the same result on both sides."""
    return {"receipt": f"R-{payload['order']}", "order": payload["order"]}


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
        lambda key: sqs.send_message(
            QueueUrl=url, MessageBody=json.dumps(PAYLOAD | {"order": key})
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


# --- timing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    queued: int
    enqueue_ms: float
    consume_ms: float
    wall_s: float


def timed(side: Side, queued: int, fill: Callable[[int], None]) -> Timing:
    """Own time per task of the enqueue and of the function, with ``queued`` tasks waiting: the
    queue (and table) is filled to that depth, then :data:`SAMPLE` tasks are enqueued one by one
    and run in batches of :data:`BATCH`, each timed. The sample's batches are its own messages
    as sent, handed to the function as the event source would hand them: moto's ReceiveMessage
    scans the whole queue (O(depth), an emulator artefact), and the function itself makes no
    queue request for a task that succeeds."""
    started = time.perf_counter()
    fill(queued - SAMPLE)
    sent = Sent(side.sqs)
    enqueue_s = 0.0
    for i in range(SAMPLE):
        begin = time.perf_counter()
        side.enqueue(f"sample-{i}")
        enqueue_s += time.perf_counter() - begin
    consume_s = 0.0
    for start in range(0, SAMPLE, BATCH):
        batch = sent.records[start : start + BATCH]
        begin = time.perf_counter()
        failed = invoke(side, batch)
        consume_s += time.perf_counter() - begin
        if failed:
            raise RuntimeError(f"{side.name}: {len(failed)} messages failed")
    return Timing(
        queued, 1000 * enqueue_s / SAMPLE, 1000 * consume_s / SAMPLE, time.perf_counter() - started
    )


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
    stores: the depth, without ``n`` requests through HTTP emulation (which would take the
    benchmark's whole time on this machine)."""
    from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    queues = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    queue = side.queue_url.rsplit("/", 1)[-1]

    def fill(n: int) -> None:
        now = datetime.now(UTC)
        for i in range(n):
            queues.send_message(queue, _body(client, f"fill-{i}"))
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
                tables.put_item(table, to_wire(item))

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
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }.items():
        os.environ.setdefault(name, value)
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


def measure_counts(table_of: Callable[[Any], str] = _tasks_table) -> tuple[Counts, Counts, int]:
    """Both sides counted; and the stdout bytes per task of the Vigil side."""
    with mock_aws():
        dynamodb, sqs, events = _clients()
        reader = boto3.client("dynamodb", region_name="us-east-1")
        vigil, _ = vigil_side(dynamodb, sqs, events, table_of(dynamodb))
        with _quiet():
            vigil_counts = count(vigil, Meter(reader))
        logged = _QUIET["written"]
        powertools = powertools_side(*_clients()[:2])
        powertools_counts = count(powertools, Meter(reader))
    return vigil_counts, powertools_counts, logged // (2 * COUNTED)


def measure_times(sizes: tuple[int, ...]) -> list[tuple[Timing, Timing]]:
    rows = []
    for size in sizes:
        with mock_aws():
            dynamodb, sqs, events = _clients()
            table = _tasks_table(dynamodb)
            vigil, client = vigil_side(dynamodb, sqs, events, table)
            powertools = powertools_side(dynamodb, sqs)
            with _quiet():
                rows.append(
                    (
                        timed(vigil, size, filler(vigil, client, table)),
                        timed(powertools, size, filler(powertools, None, table)),
                    )
                )
    return rows


def run(quick: bool = False, sizes: tuple[int, ...] | None = None) -> str:
    _environment()
    vigil, powertools, logged = measure_counts()
    times = measure_times(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    # own time at the smallest size prices Lambda's GB-seconds
    lines = _requests_table(vigil, powertools)
    lines += ["", *_cost_table(vigil, powertools, times[0], logged)]
    lines += ["", *_time_table(times)]
    return "\n".join(lines)


def _requests_table(vigil: Counts, powertools: Counts) -> list[str]:
    lines = [
        f"| per task (mean of {COUNTED}; batches of {BATCH}) | Vigil tasks | Powertools batch + "
        "idempotency |",
        "|---|---|---|",
    ]
    for label, part in (
        ("enqueue", "enqueue"),
        ("first run (the function's requests)", "first"),
        ("event source per task (receive + delete of its batch)", "source"),
        ("duplicate delivery (the function's requests)", "duplicate"),
    ):
        ours, theirs = (_spelled(c, getattr(c, part)) for c in (vigil, powertools))
        lines.append(f"| {label} | {ours} | {theirs} |")
    total_wru = [c.per_task(c.enqueue + c.first).get("WRU", 0.0) for c in (vigil, powertools)]
    lines.append(
        f"| **DynamoDB write units per task** (enqueue + run) | **{total_wru[0]:g}** (target <= 3) "
        f"| **{total_wru[1]:g}** |"
    )
    dup = [
        sum(v for k, v in c.per_task(c.duplicate).items() if k not in ("WRU", HALF_RRU))
        for c in (vigil, powertools)
    ]
    lines.append(f"| **requests per duplicate** | **{dup[0]:g}** (target 1) | **{dup[1]:g}** |")
    if vigil.failures or powertools.failures:
        lines.append(
            f"| messages reported failed (should be 0) | {vigil.failures} | {powertools.failures} |"
        )
    return lines


def _spelled(counts: Counts, counter: Counter[str]) -> str:
    parts = [
        f"{name.replace('DynamoDB ', 'DDB ').replace('EventBridge ', 'EB ')} {value:g}"
        for name, value in counts.per_task(counter).items()
        if value
    ]
    return ", ".join(parts) or "none"


def _cost_table(
    vigil: Counts, powertools: Counts, times: tuple[Timing, Timing], logged: int
) -> list[str]:
    def lines_of(c: Counts, own_ms: float) -> dict[str, tuple[float, float]]:
        per = c.per_task(c.enqueue + c.first + c.source)
        sqs = sum(v for k, v in per.items() if k.startswith("SQS "))
        events = per.get("EventBridge PutEvents", 0.0)
        rru = per.get(HALF_RRU, 0.0) / 2
        gb_s = MEMORY_GB * own_ms / 1000
        return {
            "SQS requests (send, receive, delete)": (sqs, sqs * PRICE["sqs"]),
            "DynamoDB write units": (per.get("WRU", 0.0), per.get("WRU", 0.0) * PRICE["wru"]),
            "DynamoDB read units": (rru, rru * PRICE["rru"]),
            "EventBridge PutEvents (completion event)": (events, events * PRICE["events"]),
            "Lambda requests (one per batch)": (1 / BATCH, PRICE["lambda_requests"] / BATCH),
            f"Lambda GB-seconds ({MEMORY_GB * 1024:.0f} MB x own time)": (
                gb_s,
                gb_s * 1_000_000 * PRICE["gb_s"],
            ),
        }

    ours, theirs = lines_of(vigil, times[0].consume_ms), lines_of(powertools, times[1].consume_ms)
    lines = [
        f"| $ per million tasks ({PRICED}; priced {datetime.now(UTC):%Y-%m-%d}) | per task, Vigil "
        "| $ Vigil | per task, Powertools | $ Powertools |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (quantity, dollars) in ours.items():
        other_quantity, other_dollars = theirs[name]
        lines.append(
            f"| {name} | {quantity:.3g} | {dollars:.2f} | {other_quantity:.3g} | {other_dollars:.2f} |"
        )
    total, other_total = (sum(d for _, d in side.values()) for side in (ours, theirs))
    lines.append(f"| **total** | | **{total:.2f}** (target <= 3) | | **{other_total:.2f}** |")
    lines.append(
        f"\nAssumed: full batches of {BATCH} (the example's batch size; at batch size 1 the "
        f"event source's receive + delete and Lambda's request are per task: about "
        f"+${(2 - 2 / BATCH) * PRICE['sqs'] + (1 - 1 / BATCH) * PRICE['lambda_requests']:.2f} "
        "per million); own time measured at "
        f"{times[0].queued:,} queued tasks against in-process moto, so it is moto's time mostly "
        "(a real AWS request takes milliseconds: at 10 ms per request the Vigil function's 3 "
        f"requests per task would be about ${3 * 0.010 * MEMORY_GB * PRICE['gb_s'] * 1e6:.2f} of "
        "GB-seconds per million). Not in the table: the event source's empty polls while the "
        "queue is idle (a fixed few hundred thousand requests a month, cents), DynamoDB storage "
        f"(records kept for `retention`), and CloudWatch Logs: the Vigil function wrote "
        f"{logged:,} bytes of log lines and metrics per task (about "
        f"${logged * 1e6 / 1e9 * 0.50:.2f} per million at $0.50 per GB ingested, a price not in "
        "NOTES.md)."
    )
    return lines


def _time_table(rows: list[tuple[Timing, Timing]]) -> list[str]:
    lines = [
        "| queued tasks | Vigil enqueue ms/task | Vigil function ms/task | Powertools enqueue "
        "ms/task | Powertools function ms/task | wall s (both) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for ours, theirs in rows:
        lines.append(
            f"| {ours.queued:,} | {ours.enqueue_ms:.2f} | {ours.consume_ms:.2f} | "
            f"{theirs.enqueue_ms:.2f} | {theirs.consume_ms:.2f} | "
            f"{ours.wall_s + theirs.wall_s:.0f} |"
        )
    lines.append(
        f"\nOwn time per task in-process on moto, so moto's time mostly, on a machine shared "
        f"with other work (load ~9 on 2 cores): at each depth the queue (and the tasks table) "
        f"is filled straight into moto's stores, then {SAMPLE} enqueues and {SAMPLE} runs "
        f"(batches of {BATCH} of the sample's own messages) are timed one by one. The enqueue is SendMessage + PutItem (Powertools: "
        "SendMessage); the function's time is a batch's divided by its size; the event source's "
        "receive and delete are outside both."
    )
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=lambda text: tuple(int(s) for s in text.split(",")))
    arguments = parser.parse_args()
    print(run(quick=arguments.quick, sizes=arguments.sizes))
