"""Tasks under the application's control: bulk enqueue against a loop of ``enqueue``, and the
rate limiter's accuracy and cost under a backlog, on moto and a simulated clock.

Bulk: 1,000 tasks enqueued by a loop of ``enqueue`` and by ``enqueue_many``, every request
counted by operation and by thread. Time is modelled, not timed on moto (whose latency is not
AWS's): the round trips on the critical path (the calling thread's, plus the busiest worker's
for the parallel record writes) at an assumed 10 ms each (an in-region SQS or DynamoDB call).

Rate limit: a backlog enqueued at once under ``100/minute``. The event source is played on the
simulated clock at its worst: every visible message is received at once, a message sent back
reappears when its visibility ends plus a seeded 0-1 s of polling. Starts are counted in every
sliding minute; requests are the limiter's own (DynamoDB) and its ChangeMessageVisibility.

Priorities: a backlog of 10,000 normal tasks enqueued at once, then, a minute later, one task
at ``priority="high"`` (its level's own queue) and one without (the same message on the one
queue, as without levels). The event source of each queue is played on the simulated clock:
``concurrency`` (10) batches of up to 10 in flight per mapping, each batch running 2 s; a free
slot polls at once; an empty queue is polled again after a seeded 0-1 s (Lambda's long polls
answer as a message arrives). The wait is from enqueue to the poll that hands the message out.
What is real and what is modelled:

* real (moto): the high task's and its twin's ``TaskClient.enqueue`` (the level picks the
  queue, the records are written), the level's queue with every receive and delete on it;
* modelled (:mod:`benchmarks.sqs_model`): the normal queue, which moto cannot drain at 10,000
  (its receives and deletes scan the whole queue, several times a message: O(n²)). The model
  hands messages out in sent order as moto does (real standard queues only approximate it),
  and nothing in flight comes back (no batch fails or outlives its visibility). The backlog's
  messages are the bodies ``plan`` builds, sent ten a SendMessageBatch; their QUEUED records
  are not written (they play no part in the order). ``measure_priority(modelled=False)`` plays
  the same on moto's queue, and a test (tests/tasks/test_priority_bench.py) finds the same
  figures both ways on a small backlog with the high task enqueued mid-drain.

The resources a level adds are counted in a synthesized template (one task with and without
``priorities``).

    python -m benchmarks.tasks_control [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.idle_cost import IDLE_RECEIVES_A_MONTH
from benchmarks.offline import create_tasks_table, offline_aws
from benchmarks.sqs_model import Routed, StandardQueue
from vigil.clock import ManualClock
from vigil.contract.tasks import RateLimit
from vigil.tasks.bulk import MAX_BATCH_ENTRIES
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.envelope import parse
from vigil.tasks.rate import Admitted, RateLimiter

TASK = "send-receipt"
TABLE = "vigil-tasks"
REGION = "us-east-1"
BULK = 1_000
ROUND_TRIP_S = 0.010
"""The assumed latency of one SQS or DynamoDB request in the region (for the modelled time)."""
SQS_PER_M = 0.40
WRU_PER_M = 0.625
RRU_PER_M = 0.125
"""us-east-1 list prices (docs/benchmarks.md states their date); approximate."""
RATE = "100/minute"
BACKLOG = 2_000
QUICK_BACKLOG = 400
POLL_LAG_S = 1.0
PRIORITY_BACKLOG = 10_000
QUICK_PRIORITY_BACKLOG = 2_000
PRIORITY_AT_S = 60.0
"""When the high task (and its twin without a level) is enqueued, the backlog a minute old."""
CONCURRENCY = 10
BATCH = 10
BATCH_RUN_S = 2.0


class Counted:
    """A client that counts each request by operation, and by thread (the critical path)."""

    def __init__(self, client: Any, calls: Counter[str], threads: Counter[tuple[int, str]]):
        self._client, self._calls, self._threads = client, calls, threads
        self._lock = threading.Lock()  # moto is not thread-safe: one request at a time

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_") or name in ("meta", "exceptions"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._calls[name] += 1
                self._threads[(threading.get_ident(), name)] += 1
                return attribute(*args, **kwargs)

        return call


@dataclass
class Tally:
    calls: Counter[str] = field(default_factory=Counter)
    threads: Counter[tuple[int, str]] = field(default_factory=Counter)

    def critical_path(self, caller: int) -> int:
        """The caller's own requests, plus the busiest other thread's (the parallel writes)."""
        own = sum(n for (thread, _), n in self.threads.items() if thread == caller)
        others: Counter[int] = Counter()
        for (thread, _), n in self.threads.items():
            if thread != caller:
                others[thread] += n
        return own + max(others.values(), default=0)


@contextmanager
def aws() -> Iterator[tuple[Any, Any, str]]:
    offline_aws()
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        create_tasks_table(dynamodb, TABLE)
        url = sqs.create_queue(QueueName=f"vigil-{TASK}")["QueueUrl"]
        yield dynamodb, sqs, url


def _client(dynamodb: Any, sqs: Any, url: str, tally: Tally) -> TaskClient:
    spec = TaskSpec(
        name=TASK,
        queue_url=url,
        dead_letter_url=url,
        table=TABLE,
        ordered=False,
        retention=timedelta(days=7),
    )
    return TaskClient(
        Catalog({TASK: spec}),
        sqs=Counted(sqs, tally.calls, tally.threads),
        dynamodb=Counted(dynamodb, tally.calls, tally.threads),
    )


@dataclass(frozen=True)
class BulkResult:
    name: str
    calls: Counter[str]
    critical_path: int
    seconds_on_moto: float

    @property
    def dollars(self) -> float:
        sqs = sum(n for op, n in self.calls.items() if "message" in op)
        writes = self.calls["put_item"]
        reads = BULK if self.calls["batch_get_item"] else self.calls["get_item"]
        return (sqs * SQS_PER_M + writes * WRU_PER_M + reads * RRU_PER_M) / 1e6


def measure_bulk() -> list[BulkResult]:
    results = []
    for name in ("loop of enqueue", "enqueue_many"):
        with aws() as (dynamodb, sqs, url):
            tally = Tally()
            client = _client(dynamodb, sqs, url, tally)
            items = [({"order": f"o-{i}"}, f"o-{i}") for i in range(BULK)]
            began = time.perf_counter()
            if name == "enqueue_many":
                outcomes = client.enqueue_many(TASK, items)
                assert all(o.status.value == "enqueued" for o in outcomes)
            else:
                for payload, key in items:
                    client.enqueue(TASK, payload, key=key)
            took = time.perf_counter() - began
            path = tally.critical_path(threading.get_ident())
            results.append(BulkResult(name, tally.calls, path, took))
    return results


@dataclass(frozen=True)
class RateResult:
    backlog: int
    limit: RateLimit
    bound: int
    busiest_minute: int
    mean_per_minute: float
    requests: Counter[str]
    deferrals: int
    most_deferrals: int
    minutes: float


def measure_rate(backlog: int, seed: int = 1) -> RateResult:
    limit = RateLimit.parse(RATE)
    rng = random.Random(seed)
    with aws() as (dynamodb, _, _):
        tally = Tally()
        clock = ManualClock(datetime(2026, 11, 28, 12, tzinfo=UTC))
        start = clock()
        counted = Counted(dynamodb, tally.calls, tally.threads)
        limiter = RateLimiter(counted, TABLE, TASK, limit, timedelta(hours=11))
        queue = [(0.0, n, 1) for n in range(backlog)]
        heapq.heapify(queue)
        starts: list[float] = []
        deferred = [0] * backlog
        while queue:
            visible, message, receives = heapq.heappop(queue)
            at = visible + (rng.random() * POLL_LAG_S if receives > 1 else 0.0)
            clock.set(start + timedelta(seconds=at))
            decision = limiter.admit(f"m-{message}", receives, clock())
            if isinstance(decision, Admitted):
                starts.append(at)
            else:
                deferred[message] += 1
                tally.calls["change_message_visibility"] += 1
                heapq.heappush(queue, (at + decision.seconds, message, receives + 1))
    starts.sort()
    busiest, right = 0, 0
    for left, begin in enumerate(starts):
        while right < len(starts) and starts[right] < begin + limit.period_s:
            right += 1
        busiest = max(busiest, right - left)
    span_minutes = (starts[-1] - starts[0]) / 60
    return RateResult(
        backlog=backlog,
        limit=limit,
        bound=limiter.pacing.bound(limit.starts),
        busiest_minute=busiest,
        mean_per_minute=(len(starts) - 1) / span_minutes if span_minutes else float(len(starts)),
        requests=tally.calls,
        deferrals=sum(deferred),
        most_deferrals=max(deferred),
        minutes=span_minutes,
    )


def _bulk_table(results: list[BulkResult]) -> list[str]:
    lines = [
        f"{BULK:,} tasks of a few bytes each, with keys:",
        "",
        "| | requests | of which | round trips on the critical path | time at 10 ms a trip "
        "| dollars per 1,000 | dollars per million |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        detail = ", ".join(f"{op} {n:,}" for op, n in sorted(r.calls.items()))
        lines.append(
            f"| {r.name} | {sum(r.calls.values()):,} | {detail} | {r.critical_path:,} | "
            f"{r.critical_path * ROUND_TRIP_S:.1f} s | ${r.dollars:.5f} | "
            f"${r.dollars * 1e6 / BULK:.2f} |"
        )
    loop, bulk = results
    lines += [
        "",
        f"`enqueue_many` makes {sum(loop.calls.values()) / sum(bulk.calls.values()):.1f}x fewer "
        f"requests and {loop.critical_path / bulk.critical_path:.0f}x fewer round trips on the "
        "critical path; the records are still one conditional PutItem each (BatchWriteItem takes "
        "no condition), so the DynamoDB dollars stay, and the keys' pre-read adds one read unit "
        "a task. SQS bills a batch of ten small messages as one request.",
    ]
    return lines


def _rate_table(result: RateResult) -> list[str]:
    dynamo = {op: n for op, n in result.requests.items() if op != "change_message_visibility"}
    writes = sum(dynamo.values())
    sqs = result.requests["change_message_visibility"] + result.deferrals  # + the extra receive
    per_task = (writes * WRU_PER_M + sqs * SQS_PER_M) / result.backlog
    over = 100 * (result.busiest_minute - result.limit.starts) / result.limit.starts
    return [
        f'A backlog of {result.backlog:,} enqueued at once under `rate_limit="{result.limit}"`:',
        "",
        "| busiest sliding minute | its bound | over the limit | mean starts a minute "
        "| deferrals (most for one task) | DynamoDB writes a task | SQS requests a task "
        "| limiter dollars per million tasks |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result.busiest_minute} | {result.bound} | {over:+.0f} % | "
        f"{result.mean_per_minute:.1f} | {result.deferrals:,} ({result.most_deferrals}) | "
        f"{writes / result.backlog:.2f} | {sqs / result.backlog:.2f} | "
        f"${per_task:.2f} |",
        "",
        f"The backlog drained in {result.minutes:.1f} simulated minutes. A task that starts "
        "without waiting costs the limiter one conditional UpdateItem (two after an idle spell); "
        "one sent back costs four (the refused move, its reservation on the pace, the "
        "reservation item, taking it) and a ChangeMessageVisibility and one more receive, and "
        "spends no attempt. Each message is sent back once: its slot is reserved, not retried.",
    ]


@dataclass(frozen=True)
class PriorityResult:
    backlog: int
    level_wait_s: float
    one_queue_wait_s: float
    normal_waiting_then: int
    """Normal tasks not yet handed out when the high one was."""
    resources_per_level: int
    receives: int


def measure_priority(
    backlog: int,
    seed: int = 1,
    modelled: bool = True,
    at_s: float = PRIORITY_AT_S,
    count_resources: bool = True,
) -> PriorityResult:
    """See the module: the two mappings played on a simulated clock, the high task and its twin
    enqueued ``at_s`` in. ``modelled`` plays the normal queue through
    :mod:`benchmarks.sqs_model` (False: on moto's, affordable for a small backlog only)."""
    randomness = random.Random(seed)
    with aws() as (dynamodb, moto_sqs, url):
        high_url = moto_sqs.create_queue(QueueName=f"vigil-{TASK}-high")["QueueUrl"]
        normal = StandardQueue()
        sqs = Routed(moto_sqs, url, normal) if modelled else moto_sqs
        began = datetime(2026, 11, 28, tzinfo=UTC)
        clock = ManualClock(began)
        spec = TaskSpec(name=TASK, queue_url=url, table=TABLE, priority_queues={"high": high_url})
        client = TaskClient(Catalog({TASK: spec}), sqs=sqs, dynamodb=dynamodb, clock=clock)
        _enqueue_backlog(client, sqs, url, backlog)
        started: dict[str, float] = {}
        vips: dict[str, float] = {}
        # (when, order, queue URL, what): "poll" a free slot, "done" a batch that ran.
        events: list[tuple[float, int, str, Any]] = []
        order = iter(range(10**9))
        for queue in (url, high_url):
            for _ in range(CONCURRENCY):
                heapq.heappush(events, (0.0, next(order), queue, "poll"))
        heapq.heappush(events, (at_s, next(order), "", "enqueue"))
        receives = 0
        watching: dict[str, bool] = {}
        idle: dict[str, int] = {}
        while events and not (len(vips) == 2 and set(vips) <= set(started)):
            now, _, queue, what = heapq.heappop(events)
            if what == "enqueue":
                clock.set(began + timedelta(seconds=now))
                vips[client.enqueue(TASK, {"vip": 1}, key="vip-level", priority="high")] = now
                vips[client.enqueue(TASK, {"vip": 1}, key="vip-one-queue")] = now
                continue
            if isinstance(what, list):  # a batch done: deleted, its slot polls again
                sqs.delete_message_batch(
                    QueueUrl=queue,
                    Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(what)],
                )
                heapq.heappush(events, (now, next(order), queue, "poll"))
                continue
            receives += 1
            if what == "watch":
                watching[queue] = False
            messages = sqs.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=BATCH, VisibilityTimeout=900
            ).get("Messages", [])
            if not messages:
                # One slot keeps watching an empty queue; the others wait for what it finds.
                if watching.get(queue):
                    idle[queue] = idle.get(queue, 0) + 1
                    continue
                watching[queue] = True
                lag = randomness.uniform(0, POLL_LAG_S)
                heapq.heappush(events, (now + lag, next(order), queue, "watch"))
                continue
            if what == "watch":
                watching[queue] = False
                for _ in range(idle.pop(queue, 0)):
                    heapq.heappush(events, (now, next(order), queue, "poll"))
            for message in messages:
                task_id = parse(message["Body"]).id
                started[task_id] = now
            handles = [m["ReceiptHandle"] for m in messages]
            heapq.heappush(events, (now + BATCH_RUN_S, next(order), queue, handles))
    waiting = backlog - sum(
        1
        for task_id, at in started.items()
        if not task_id.startswith("vip") and at <= started["vip-level"]
    )
    return PriorityResult(
        backlog=backlog,
        level_wait_s=started["vip-level"] - vips["vip-level"],
        one_queue_wait_s=started["vip-one-queue"] - vips["vip-one-queue"],
        normal_waiting_then=waiting,
        resources_per_level=_resources_per_level() if count_resources else 0,
        receives=receives,
    )


def _enqueue_backlog(client: TaskClient, sqs: Any, url: str, backlog: int) -> None:
    """The backlog's messages as ``enqueue_many`` sends them (each built by ``plan``, every
    check ``enqueue`` makes; SendMessageBatch, ten a request, in order). Their QUEUED records are
    not written: they play no part in the order the queue hands messages out, and 10,000
    conditional puts on moto would cost more than the whole drain."""
    bodies = [client.plan(TASK, {"n": n}).body for n in range(backlog)]
    for start in range(0, backlog, MAX_BATCH_ENTRIES):
        entries = [
            {"Id": str(i), "MessageBody": body}
            for i, body in enumerate(bodies[start : start + MAX_BATCH_ENTRIES])
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def _resources_per_level() -> int:
    """Resources a task's first level adds, counted in two synthesized templates."""
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from infra.background_task import BackgroundTask

    counts = []
    for levels in ((), ("high",)):
        task = BackgroundTask(
            Stack(App(), "Bench"),
            "SendReceipt",
            handler="tasks.send_receipt.handler",
            priorities=levels,
        )
        counts.append(len(Template.from_stack(task.shard).to_json()["Resources"]))
    return counts[1] - counts[0]


def _priority_table(result: PriorityResult, seconds: float) -> list[str]:
    idle = IDLE_RECEIVES_A_MONTH * SQS_PER_M / 1e6
    return [
        f'A backlog of {result.backlog:,} normal tasks, then one at `priority="high"` '
        f"{PRIORITY_AT_S:.0f} s later (and its twin without a level):",
        "",
        "| | wait from enqueue to start | normal tasks still queued then |",
        "|---|---:|---:|",
        f'| `priority="high"` (its level\'s queue and event source) | '
        f"{result.level_wait_s:.1f} s | {result.normal_waiting_then:,} |",
        f"| the same task on the one queue (no levels) | {result.one_queue_wait_s:.0f} s | 0 |",
        "",
        f"Each mapping ran {CONCURRENCY} batches of {BATCH} at a time, {BATCH_RUN_S:.0f} s a "
        f"batch ({CONCURRENCY * BATCH / BATCH_RUN_S:.0f} tasks a second); {result.receives:,} "
        "receives in all. The high task's enqueue and its level's queue are moto's; the normal "
        "queue is played by a model of it (`benchmarks/sqs_model.py`: sent order, nothing comes "
        "back from flight), checked against moto's on a small backlog by "
        "`tests/tasks/test_priority_bench.py`. The level's wait is its poller's lag alone: it "
        "does not grow with "
        "the backlog, which goes on at its own pace beside it (the high task does not pre-empt "
        "normal ones in flight). A level costs "
        f"{result.resources_per_level} resources (counted in the template: its queue and its "
        "event source mapping) and, idle, its pollers' empty receives: about "
        f"{IDLE_RECEIVES_A_MONTH:,} a month, ${idle:.2f} (deploying guide's estimate). "
        f"This part took {seconds:.0f} s to run.",
    ]


def run(quick: bool = False) -> str:
    began = datetime.now(UTC)
    bulk = measure_bulk()
    rate = measure_rate(QUICK_BACKLOG if quick else BACKLOG)
    timed = time.perf_counter()
    priority = measure_priority(QUICK_PRIORITY_BACKLOG if quick else PRIORITY_BACKLOG)
    priority_s = time.perf_counter() - timed
    lines = [*_bulk_table(bulk), "", *_rate_table(rate), "", *_priority_table(priority, priority_s)]
    seconds = (datetime.now(UTC) - began).total_seconds()
    flag = " --quick" if quick else ""
    lines.append(
        f"\nRun {began:%Y-%m-%d %H:%M} UTC, {seconds:.0f} s, prices of 2025 (us-east-1, "
        f"approximate): `python -m benchmarks.tasks_control{flag}`."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller backlog")
    print(run(quick=parser.parse_args(argv).quick))


if __name__ == "__main__":
    main()
