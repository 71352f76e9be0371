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

from benchmarks.offline import offline_aws
from vigil.clock import ManualClock
from vigil.contract.tasks import RateLimit
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
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
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
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


def run(quick: bool = False) -> str:
    began = datetime.now(UTC)
    bulk = measure_bulk()
    rate = measure_rate(QUICK_BACKLOG if quick else BACKLOG)
    lines = [*_bulk_table(bulk), "", *_rate_table(rate)]
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
