"""Flows: DynamoDB requests and write units per step, per sleep, per signal; a resume's cost at
10, 100 and 1,000 finished steps; dollars per million steps beside Step Functions and beside the
same work as plain tasks chained by hand. One run on moto, the flow's function invoked in-process
through :class:`vigil_tools.testing.flow_queue.FlowQueue` on a manual clock.

Requests are counted from botocore's ``before-parameter-build`` events (the call's own parameters). moto's ``ReturnConsumedCapacity``
is a constant, so write units are computed from the items as DynamoDB bills them: ceil(size /
1 KB) per write (at least 1), the size of each written item measured by :func:`item_size`
(attribute names plus values, DynamoDB's rule). Own time is the CPU time outside
botocore's ``_make_api_call`` (moto's time is not Lambda's), in every thread.

``python -m benchmarks.flows_requests`` writes the ``flows-requests`` section of
docs/benchmarks.md.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.client import BaseClient
from moto import mock_aws

from benchmarks.offline import REGION, create_tasks_table, offline_aws
from vigil.clock import ManualClock
from vigil.tasks import TaskRun, task
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.settings import TaskSettings
from vigil_tools.testing.flow_queue import FlowQueue

TASK = "onboard"
TABLE = "vigil-tasks"
PRICE_WRU = 0.625  # $ per million write request units (NOTES.md, on-demand since Nov 2024)
PRICE_RRU = 0.125
PRICE_SQS = 0.40
PRICE_SCHEDULER = 1.00
PRICE_STEP_FUNCTIONS_STANDARD = 25.0  # $ per million state transitions
PRICE_LAMBDA_GB_S = 0.0000166667
PRICE_LAMBDA_REQUEST = 0.20
LAMBDA_CPU_STRETCH = 6.9  # 256 MB has 256/1769 of a vCPU (as the tasks benchmark assumes)
MEMORY_GB = 0.25
TASKS_CHAINED_PER_STEP = 2.50
"""$ per million tasks, the tasks benchmark's measured default (docs/benchmarks.md, tasks-requests):
one step as one plain task, enqueued by the one before it."""


class Meter:
    """Requests by operation and write units, from botocore's events on one client."""

    def __init__(self, client: BaseClient) -> None:
        self.calls: Counter[str] = Counter()
        self.write_units = 0
        self.read_units = 0.0
        client.meta.events.register("before-parameter-build", self._before)
        client.meta.events.register("after-call.dynamodb.UpdateItem", self._updated)

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls[model.name] += 1
        if model.name == "PutItem":
            self.write_units += max(1, math.ceil(item_size(params["Item"]) / 1024))
        elif model.name == "UpdateItem":
            self.write_units += 1  # an item under 1 KB; one returned bigger adds the rest
        elif model.name == "GetItem":
            self.read_units += 1.0 if params.get("ConsistentRead") else 0.5
        elif model.name == "BatchGetItem":
            for table in params["RequestItems"].values():
                per_item = 1.0 if table.get("ConsistentRead") else 0.5
                self.read_units += per_item * len(table["Keys"])  # records under 4 KB

    def _updated(self, parsed: dict[str, Any], **_: Any) -> None:
        """An UpdateItem that returned the item (``ALL_NEW``): billed by its size (a map's item
        grows with the set of its ended children)."""
        attributes = parsed.get("Attributes")
        if attributes:
            self.write_units += max(1, math.ceil(item_size(attributes) / 1024)) - 1

    def reset(self) -> None:
        self.calls.clear()
        self.write_units = 0
        self.read_units = 0.0


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item in wire form: each name's bytes plus its value's."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return math.ceil(len(str(raw).lstrip("-").replace(".", "")) / 2) + 1
    if kind == "BOOL" or kind == "NULL":
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) for k, v in raw.items())
    return len(str(raw).encode())


class OwnTime:
    """CPU time outside botocore's calls: the process's CPU time less each call's, measured on
    the thread that made it (``enqueue_many`` writes its records from a thread pool)."""

    def __init__(self) -> None:
        self.inside = 0.0
        original = BaseClient._make_api_call
        meter = self

        def timed(client: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(client, *args, **kwargs)
            finally:
                meter.inside += time.thread_time() - start

        BaseClient._make_api_call = timed  # type: ignore[method-assign]
        self._original = original

    @contextmanager
    def measure(self) -> Iterator[list[float]]:
        out: list[float] = []
        start, inside = time.process_time(), self.inside
        yield out
        out.append((time.process_time() - start) - (self.inside - inside))

    def close(self) -> None:
        BaseClient._make_api_call = self._original  # type: ignore[method-assign]


class Bench:
    def __init__(self) -> None:
        self.clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.meter = Meter(self.dynamodb)
        sqs = boto3.client("sqs", region_name=REGION)
        scheduler = boto3.client("scheduler", region_name=REGION)
        create_tasks_table(self.dynamodb, TABLE)
        url = sqs.create_queue(QueueName=f"vigil-{TASK}")["QueueUrl"]
        dead = sqs.create_queue(QueueName=f"vigil-{TASK}-dlq")["QueueUrl"]
        self.queue = FlowQueue(sqs, scheduler, url, self.clock)
        self.sqs_meter = Meter(sqs)
        spec = TaskSpec(
            name=TASK,
            queue_url=url,
            dead_letter_url=dead,
            table=TABLE,
            ordered=False,
            retention=timedelta(days=7),
            scheduler_role_arn="arn:aws:iam::123456789012:role/scheduler",
            schedule_group="vigil-tasks",
            function=f"vigil-{TASK}",
        )
        self.client = TaskClient(
            Catalog({TASK: spec}),
            sqs=self.queue,
            dynamodb=self.dynamodb,
            scheduler=self.queue.scheduler,
            clock=self.clock,
            sleep=self.pause,
        )
        self.settings = TaskSettings(
            task=TASK,
            table=TABLE,
            queue_url=url,
            dead_letter_url=dead,
            scheduler_role_arn=spec.scheduler_role_arn,
            schedule_group=spec.schedule_group,
        )

    def pause(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def handler(
        self, body: Callable[[TaskRun, dict[str, Any]], Any], children: TaskClient | None = None
    ) -> Any:
        return task(
            body,
            settings=self.settings,
            children=children,
            dynamodb=self.dynamodb,
            sqs=self.queue,
            events=boto3.client("events", region_name=REGION),
            scheduler=self.queue.scheduler,
            clock=self.clock,
            sleep=self.pause,
        )


def measure(steps_for_resume: tuple[int, ...] = (10, 100, 1000)) -> dict[str, Any]:
    offline_aws()
    own = OwnTime()
    try:
        with mock_aws():
            return _measure(Bench(), own, steps_for_resume)
    finally:
        own.close()


def _measure(bench: Bench, own: OwnTime, sizes: tuple[int, ...]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    count = [0]

    def steps(run: TaskRun, payload: dict[str, Any]) -> Any:
        for index in range(count[0]):
            run.step(f"step-{index}", lambda i=index: {"n": i, "ok": True})
        return "done"

    # Per step: a flow of 100 steps, less the same flow of none (claim, finish, journal read).
    per: dict[int, tuple[Counter[str], int, float, float]] = {}
    for n in (0, 100):
        count[0] = n
        handler = bench.handler(steps)
        bench.client.enqueue(TASK, {}, key=f"steps-{n}")
        bench.meter.reset()
        with own.measure() as took:
            bench.queue.run(handler)
        per[n] = (
            Counter(bench.meter.calls),
            bench.meter.write_units,
            bench.meter.read_units,
            took[0],
        )
    calls = per[100][0] - per[0][0]
    results["step"] = {
        "requests": {k: v / 100 for k, v in calls.items()},
        "wru": (per[100][1] - per[0][1]) / 100,
        "rru": (per[100][2] - per[0][2]) / 100,
        "own_ms": (per[100][3] - per[0][3]) / 100 * 1000,
    }

    # Per sleep: the flow sleeps once (3 days: a schedule) and resumes, less the flow without it.
    def sleeper(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.sleep("nap", timedelta(days=3))

    for name, body, key in (("sleep", sleeper, "sleep-1"), ("none", steps, "none-1")):
        count[0] = 0
        handler = bench.handler(body)
        bench.client.enqueue(TASK, {}, key=key)
        bench.meter.reset()
        bench.sqs_meter.reset()
        schedules_before = len(bench.queue.schedules)
        bench.queue.run(handler, until=bench.clock() + timedelta(days=3, minutes=1))
        results[f"run-{name}"] = (
            Counter(bench.meter.calls),
            bench.meter.write_units,
            len(bench.queue.schedules) + 1 - schedules_before,
        )
    sleep_calls = results["run-sleep"][0] - results["run-none"][0]
    results["sleep"] = {
        "requests": dict(sleep_calls),
        "wru": results["run-sleep"][1] - results["run-none"][1],
        "sqs_sends": 1,
    }

    # Per signal: what the sender's signal costs (the flow waits on it).
    def waiter(run: TaskRun, payload: dict[str, Any]) -> Any:
        return run.wait_for("go", timeout=timedelta(days=1))

    handler = bench.handler(waiter)
    bench.client.enqueue(TASK, {}, key="wait-1")
    bench.queue.run(handler)
    bench.meter.reset()
    bench.client.signal(TASK, "wait-1", "go", {"ok": True})
    results["signal"] = {"requests": dict(bench.meter.calls), "wru": bench.meter.write_units}

    # Resume cost: a flow with N finished steps run again (all skipped).
    resume: dict[int, dict[str, Any]] = {}
    for n in sizes:
        count[0] = n
        handler = bench.handler(steps)
        key = f"resume-{n}"
        bench.client.enqueue(TASK, {}, key=key)
        bench.queue.run(handler)
        bench.dynamodb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": f"TASK#{TASK}"}, "sk": {"S": key}},
            UpdateExpression="SET #s = :q",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":q": {"S": "QUEUED"}},
        )
        from vigil.tasks.envelope import Envelope

        bench.queue.send_message(
            QueueUrl=bench.queue.url,
            MessageBody=Envelope(TASK, key, {}, "2026-01-01T00:00:00.000Z").body(),
        )
        bench.meter.reset()
        with own.measure() as took:
            bench.queue.run(handler)
        resume[n] = {
            "queries": bench.meter.calls["Query"],
            "writes": bench.meter.calls["PutItem"],
            "own_ms": took[0] * 1000,
        }
    results["resume"] = resume
    results["child"] = _per_child(bench, own)
    return results


CHILDREN = 100


def _per_child(bench: Bench, own: OwnTime) -> dict[str, Any]:
    """A flow that maps over 100 children, less the same flow mapping none: every request from
    the children's enqueue to the flow's wake and fan-in (the children's own runs included),
    divided by 100. The children are the same task (a payload with ``n``)."""
    sends: Counter[str] = Counter()
    send, batch = bench.queue.send_message, bench.queue.send_message_batch

    def counted_send(**request: Any) -> Any:
        sends["SendMessage"] += 1
        return send(**request)

    def counted_batch(**request: Any) -> Any:
        sends["SendMessageBatch"] += 1
        sends["SendMessage"] -= len(request["Entries"])  # it sends each through send_message
        return batch(**request)

    bench.queue.send_message = counted_send  # type: ignore[method-assign]
    bench.queue.send_message_batch = counted_batch  # type: ignore[method-assign]
    size = [0]

    def family(run: TaskRun, payload: dict[str, Any]) -> Any:
        if "n" in payload:
            return {"n": payload["n"]}
        return run.map("fan", TASK, [{"n": n} for n in range(size[0])])

    handler = bench.handler(family, children=bench.client)
    per: dict[int, tuple[Counter[str], int, float, float, Counter[str], int]] = {}
    for round_, n in enumerate((10, 0, CHILDREN)):  # the first warms up (imports, first calls)
        size[0] = n
        bench.client.enqueue(TASK, {}, key=f"map-{round_}-{n}")
        bench.meter.reset()
        sends.clear()
        invocations = bench.queue.invocations
        with own.measure() as took:
            bench.queue.run(handler)
        record = bench.client.get(TASK, f"map-{round_}-{n}", steps=False)
        if record.status.value != "SUCCEEDED" or len(record.result or []) != n:
            raise RuntimeError(f"the map of {n} did not end with its results: {record.status}")
        per[n] = (
            Counter(bench.meter.calls),
            bench.meter.write_units,
            bench.meter.read_units,
            took[0],
            Counter(sends),
            bench.queue.invocations - invocations,
        )
    bench.queue.send_message, bench.queue.send_message_batch = send, batch  # type: ignore[method-assign]
    full, none = per[CHILDREN], per[0]
    return {
        "requests": {k: v / CHILDREN for k, v in (full[0] - none[0]).items()},
        "wru": (full[1] - none[1]) / CHILDREN,
        "rru": (full[2] - none[2]) / CHILDREN,
        "own_ms": (full[3] - none[3]) / CHILDREN * 1000,
        "sqs": {k: v / CHILDREN for k, v in (full[4] - none[4]).items() if v},
    }


def render(results: dict[str, Any]) -> str:
    step, sleep, signal = results["step"], results["sleep"], results["signal"]

    def show(requests: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in sorted(requests.items()) if v)

    lines = [
        "| per | DynamoDB requests | write units | other |",
        "|---|---|---:|---|",
        f"| step (that runs) | {show(step['requests'])} | **{step['wru']:g}** (target <= 2) | |",
        "| step (finished, on a resume) | none (read with the journal's page) | 0 | |",
        f"| sleep of 3 days (suspend + resume) | {show(sleep['requests'])} | {sleep['wru']:g} | "
        "1 one-time schedule (1 Scheduler invocation) |",
        f"| signal (to a waiting flow) | {show(signal['requests'])} | {signal['wru']:g} | "
        "1 SQS SendMessage (the wake-up) |",
    ]
    own_ms = step["own_ms"]
    gb_s = own_ms / 1000 * LAMBDA_CPU_STRETCH * MEMORY_GB
    dollars = {
        "DynamoDB write units": step["wru"] * PRICE_WRU,
        "DynamoDB read units (the step boundary's GetItem)": step["rru"] * PRICE_RRU,
        f"Lambda GB-seconds (own CPU {own_ms:.2f} ms x {LAMBDA_CPU_STRETCH} at 256 MB)": gb_s
        * PRICE_LAMBDA_GB_S
        * 1e6,
    }
    total = sum(dollars.values())
    lines += [
        "",
        "| $ per million steps (2025 list prices, us-east-1, ../shared/NOTES.md) | $ |",
        "|---|---:|",
        *(f"| {what} | {cost:.2f} |" for what, cost in dollars.items()),
        f"| **Vigil flow, total** | **{total:.2f}** (target <= "
        f"{PRICE_STEP_FUNCTIONS_STANDARD / 10:.2f}, 1/10 of Standard) |",
        f"| Step Functions Standard ($25 per million state transitions, one per step) | "
        f"{PRICE_STEP_FUNCTIONS_STANDARD:.2f} |",
        f"| The same step as a plain task chained by hand (the tasks benchmark's default) | "
        f"{TASKS_CHAINED_PER_STEP:.2f} |",
        "",
        *_child_lines(results["child"]),
        "",
        "| resume of a flow with N finished steps | Query requests (pages) | writes | own CPU ms |",
        "|---:|---:|---:|---:|",
        *(
            f"| {n:,} | {r['queries']} | {r['writes']} | {r['own_ms']:.1f} |"
            for n, r in results["resume"].items()
        ),
        "",
        "A step that runs writes its result once (PutItem, 1 write unit under about 900 bytes of "
        "item; `once=True` adds its intent, 2) and reads the task's record once (GetItem, "
        "strongly consistent: a cancel asked since, a newer run). A finished step costs nothing "
        "on a resume: the journal is one Query per 1 MB page (about 5,000 small steps), so the "
        "requests stay flat and the own time grows with the steps replayed. Step Functions "
        "Express bills per execution ($1.00 per million) and duration, not per transition: it "
        "is not in the table (a flow of many steps in one Express execution costs its duration; "
        "Express cannot sleep past 5 minutes). Assumed, as in the tasks benchmark: Lambda's CPU "
        "share at 256 MB (6.9x the measured CPU time); not priced: the claim and finish of each "
        "invocation (3 write units per invocation, shared by its steps), SQS's receive and "
        "delete, and CloudWatch Logs.",
    ]
    return "\n".join(lines)


BATCH = 10
"""Children a child's function takes an invocation (``BackgroundTask``'s default batch size)."""
LATENCY_MS = 10
"""Assumed, as the tasks benchmark does: AWS's latency per request, billed as Lambda's time."""


def _child_lines(child: dict[str, Any]) -> list[str]:
    """The child of a ``run.map``: requests, write units and dollars per million children."""

    def show(requests: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in sorted(requests.items()) if v)

    requests = sum(child["requests"].values()) + sum(child["sqs"].values())
    busy_ms = child["own_ms"] * LAMBDA_CPU_STRETCH + requests * LATENCY_MS
    gb_s = busy_ms / 1000 * MEMORY_GB
    sqs = sum(child["sqs"].values()) + 2 / BATCH  # + the event source's receive and delete
    dollars = {
        "DynamoDB write units": child["wru"] * PRICE_WRU,
        "DynamoDB read units": child["rru"] * PRICE_RRU,
        f"SQS requests ({sqs:.2f}: the sends, and a receive and a delete per batch of {BATCH})": (
            sqs * PRICE_SQS
        ),
        f"Lambda requests (1 invocation per batch of {BATCH})": PRICE_LAMBDA_REQUEST / BATCH,
        f"Lambda GB-seconds (own CPU {child['own_ms']:.2f} ms x {LAMBDA_CPU_STRETCH} + "
        f"{requests:.2f} requests x {LATENCY_MS} ms, at 256 MB)": gb_s * PRICE_LAMBDA_GB_S * 1e6,
    }
    total = sum(dollars.values())
    return [
        f"| per child of a `run.map` (a map of {CHILDREN}, less a map of none; from the "
        "enqueue to the flow's wake and fan-in, the child's own run included) | "
        "DynamoDB requests | write units | read units | SQS |",
        "|---|---|---:|---:|---|",
        f"| child | {show(child['requests'])} | **{child['wru']:.2f}** | {child['rru']:.2f} | "
        f"{show(child['sqs'])} |",
        "",
        "| $ per million children (2025 list prices, us-east-1) | $ |",
        "|---|---:|",
        *(f"| {what} | {cost:.2f} |" for what, cost in dollars.items()),
        f"| **a child, total** | **{total:.2f}** |",
        f"| Step Functions Standard, a Map state's iteration (1 state transition at least) | "
        f"{PRICE_STEP_FUNCTIONS_STANDARD:.2f} |",
        "",
        "A child is a whole task (its QUEUED record, claim and finish: 3 of its writes) plus "
        "the map's share: its end counted on the map's item (an UpdateItem whose write units "
        "grow with the set of ended indexes), the enqueue's BatchGetItem and SendMessageBatch "
        "(10 a request), the last child's wake-up and the fan-in's BatchGetItem (100 a request). "
        f"Measured in one invocation for all children (the queue here hands out every due "
        f"message at once); priced at {BATCH} a batch (`BackgroundTask`'s default): one Lambda "
        "request and one SQS receive and delete per batch. Own CPU is the process's (the "
        "enqueue writes its records from a thread pool) outside botocore's calls; "
        f"{LATENCY_MS} ms of AWS latency per request is assumed, as in the tasks benchmark.",
    ]


def run() -> str:
    return render(measure())


if __name__ == "__main__":
    import sys

    from benchmarks.run import main as run_main

    run_main(["--only", "flows-requests", *sys.argv[1:]])
