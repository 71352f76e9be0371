"""How a reconciler resync grows with the fleet, on moto: API calls by operation and wall time.

For 100, 1,000 and 10,000 observers (each RUNNING on a moto Fargate task) the benchmark times one
resync with every heartbeat fresh (it must describe no task) and one with 5 % of heartbeats stale
(those tasks are described in batches of 100, stopped and replaced). It also measures the
reconciler's own time from a STOPPED event to its replacement RunTask call.

Wall time is mostly moto's (its DynamoDB Query serializes ~3 ms per item); the "own" column
subtracts the time spent inside AWS calls. moto answers ListTasks in one page; a shim serves that
answer in AWS's pages of 100 so the ListTasks count is what AWS would see.

``python -m benchmarks.reconciler_scale`` prints the table; ``run(quick=True)`` skips 10,000.
"""

from __future__ import annotations

import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from moto import mock_aws

from benchmarks.offline import offline_aws
from tests.helpers.moto_fleet import (
    KIND,
    TABLE,
    MotoFleet,
    default_task_transitions,
    task_event,
)
from vigil.clock import ManualClock
from vigil.dynamo import to_wire
from vigil.observers.ecs_tasks import task_state
from vigil.observers.model import Status
from vigil.observers.reconciler.report import PassReport
from vigil.observers.registry import ObserverRegistry

SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
STALE_EVERY = 20  # 5 % of heartbeats go stale in the second pass
LATENCY_SAMPLES = 20
OPERATIONS = ("Query", "ListTasks", "DescribeTasks", "RunTask", "StopTask", "UpdateItem", "GetItem")


class Timing:
    """Counts calls by operation and the time spent inside them (botocore before/after hooks)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.aws_seconds = 0.0
        self.marks: dict[str, float] = {}
        self._started: float | None = None

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    def _before(self, model: Any, **_: Any) -> None:
        self.calls[model.name] = self.calls.get(model.name, 0) + 1
        self.marks.setdefault(model.name, time.perf_counter())
        self._started = time.perf_counter()

    def _after(self, **_: Any) -> None:
        if self._started is not None:
            self.aws_seconds += time.perf_counter() - self._started
            self._started = None

    def reset(self) -> None:
        self.calls.clear()
        self.marks.clear()
        self.aws_seconds = 0.0


class PagedListTasks:
    """moto's ECS client, with ListTasks answered in AWS's pages (moto returns one page)."""

    def __init__(self, client: Any, timing: Timing) -> None:
        self._client = client
        self._timing = timing
        self._pending: list[str] = []

    def list_tasks(self, **kwargs: Any) -> dict[str, Any]:
        size = int(kwargs.pop("maxResults", 100))
        token = kwargs.pop("nextToken", None)
        if token is None:
            self._pending = list(self._client.list_tasks(**kwargs)["taskArns"])
        else:
            self._timing.calls["ListTasks"] = self._timing.calls.get("ListTasks", 0) + 1
        page, self._pending = self._pending[:size], self._pending[size:]
        answer: dict[str, Any] = {"taskArns": page}
        if self._pending:
            answer["nextToken"] = "more"
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def running_fleet(
    size: int, clock: ManualClock, *, record_revision: bool = False
) -> tuple[MotoFleet, Timing, PagedListTasks]:
    """``size`` observers RUNNING on moto tasks, heartbeats fresh; ``record_revision``: their
    records name the task definition they run (as the starter records it)."""
    fleet = MotoFleet(clock)
    timing = Timing()
    observers = []
    started_ms = int((clock() - timedelta(hours=2)).timestamp() * 1000)
    for index in range(size):
        name = f"obs-{index:05d}"
        arn = fleet.run_observer_task(name, 1)
        observers.append(
            fleet.observer(
                name, status=Status.RUNNING, generation=1, task_arn=arn, heartbeat_at=clock()
            )
        )
    revision = {"task_definition": fleet.task_definition_arn} if record_revision else {}
    fleet.put_many(observers, started_at_ms=started_ms, **revision)
    for client in (fleet.dynamodb, fleet.ecs_client, fleet.sqs):
        timing.attach(client)
    return fleet, timing, PagedListTasks(fleet.ecs_client, timing)


def _pass(fleet: MotoFleet, timing: Timing, ecs: PagedListTasks, label: str) -> dict[str, Any]:
    timing.reset()
    # moto's whole account lives in this process; a Lambda's heap would not hold it. Freezing it
    # keeps the garbage collector from rescanning it, which would bill moto's size to "own".
    gc.collect()
    gc.freeze()
    try:
        started = time.perf_counter()
        report = fleet.reconciler(ecs_client=ecs).resync(label)
        wall = time.perf_counter() - started
    finally:
        gc.unfreeze()
    return _figures(wall, timing, report)


def _figures(wall: float, timing: Timing, report: PassReport | None) -> dict[str, Any]:
    """What a measured pass reports: its wall time, the reconciler's own share, its AWS calls."""
    assert report is not None
    return {
        "wall": wall,
        "own": wall - timing.aws_seconds,
        "calls": dict(timing.calls),
        "described": report.described,
        "started": report.started,
    }


def _make_stale(fleet: MotoFleet, size: int) -> int:
    """Age every STALE_EVERY-th heartbeat past three intervals; returns how many."""
    stale = 0
    old_ms = int((fleet.clock() - timedelta(minutes=10)).timestamp() * 1000)
    for index in range(0, size, STALE_EVERY):
        fleet.dynamodb.update_item(
            TableName="vigil-observers",
            Key=to_wire({"kind": KIND, "name": f"obs-{index:05d}"}),
            UpdateExpression="SET heartbeat_at_ms = :old",
            ExpressionAttributeValues={":old": {"N": str(old_ms)}},
        )
        stale += 1
    return stale


def measure_scale(size: int) -> list[dict[str, Any]]:
    clock = ManualClock(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    with mock_aws():
        try:
            fleet, timing, ecs = running_fleet(size, clock)
            fresh = _pass(fleet, timing, ecs, "fresh")
            stale_count = _make_stale(fleet, size)
            stale = _pass(fleet, timing, ecs, "stale")
        finally:
            default_task_transitions()
    fresh.update(observers=size, case="all fresh")
    stale.update(observers=size, case=f"{stale_count} stale")
    return [fresh, stale]


FOREIGN_TASKS = 150


def measure_foreign(size: int = 100, foreign: int = FOREIGN_TASKS) -> dict[str, Any]:
    """A fleet sharing its cluster with ``foreign`` tasks that are not observers': the calls of
    the second of two passes by one warm reconciler (the first describes them once)."""
    clock = ManualClock(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    with mock_aws():
        try:
            fleet, timing, ecs = running_fleet(size, clock)
            network = {
                "awsvpcConfiguration": {
                    "subnets": [fleet.subnet_id],
                    "securityGroups": [fleet.security_group_id],
                }
            }
            for _ in range(foreign):
                fleet.ecs_client.run_task(
                    cluster=fleet.cluster_arn,
                    taskDefinition=fleet.task_definition_arn,
                    launchType="FARGATE",
                    networkConfiguration=network,
                )
            reconciler = fleet.reconciler(ecs_client=ecs)
            reconciler.resync("first")
            timing.reset()
            clock.advance(timedelta(seconds=10))
            started = time.perf_counter()
            report = reconciler.resync("second")
            wall = time.perf_counter() - started
        finally:
            default_task_transitions()
    return {
        **_figures(wall, timing, report),
        "observers": size,
        "case": f"{foreign} foreign tasks, second pass",
    }


def measure_restart_latency(samples: int = LATENCY_SAMPLES) -> list[float]:
    """Seconds from handing a STOPPED event to the reconciler to its RunTask call."""
    clock = ManualClock(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    latencies: list[float] = []
    with mock_aws():
        try:
            fleet = MotoFleet(clock)
            timing = Timing()
            timing.attach(fleet.ecs_client)
            fleet.running_task("latency", 1)
            registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=clock)
            for _ in range(samples):
                item = fleet.item("latency")
                arn, generation = item["task_arn"], item["generation"]
                fleet.ecs_client.stop_task(cluster=fleet.cluster_arn, task=arn, reason="crash")
                event = task_event(
                    fleet,
                    arn,
                    name="latency",
                    generation=generation,
                    last_status="STOPPED",
                    version=5,
                    exit_code=1,
                )
                reconciler = fleet.reconciler()
                timing.reset()
                started = time.perf_counter()
                reconciler.on_task_event(task_state(event["detail"]))
                latencies.append(timing.marks["RunTask"] - started)
                # The new generation's container claims, then runs healthily for an hour, so the
                # next crash is a first failure again and restarts at once.
                registry.claim_generation("latency", generation + 1)
                clock.advance(timedelta(hours=1))
        finally:
            default_task_transitions()
    return latencies


def pass_table(
    lead: Sequence[str],
    rows: list[dict[str, Any]],
    lead_cells: Callable[[dict[str, Any]], Sequence[str]],
    operations: Sequence[str] = OPERATIONS,
    tail: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """A Markdown table of passes: the lead columns, wall and own time, calls by operation, then
    ``tail`` (header, row key) columns."""
    heads = [*lead, "Wall per pass (s)", "Reconciler's own (s)", "API calls", *operations]
    heads += [head for head, _ in tail]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in rows:
        calls = row["calls"]
        cells = [*lead_cells(row), f"{row['wall']:.2f}", f"{row['own']:.2f}"]
        cells += [str(sum(calls.values())), *(str(calls.get(op, 0)) for op in operations)]
        cells += [str(row[key]) for _, key in tail]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _growth(rows: list[dict[str, Any]], case_prefix: str) -> str:
    picked = [r for r in rows if case_prefix in r["case"]]
    parts = []
    for small, large in itertools.pairwise(picked):
        parts.append(
            f"{small['observers']:,} -> {large['observers']:,}: "
            f"calls x{sum(large['calls'].values()) / sum(small['calls'].values()):.1f}, "
            f"wall x{large['wall'] / small['wall']:.1f}, "
            f"own x{large['own'] / max(small['own'], 1e-9):.1f}"
        )
    return "; ".join(parts)


def run(quick: bool = False) -> str:
    rows: list[dict[str, Any]] = []
    for size in QUICK_SIZES if quick else SIZES:
        rows.extend(measure_scale(size))
    foreign = measure_foreign()
    latencies = measure_restart_latency()
    lines = pass_table(
        ("Observers", "Heartbeats"), rows, lambda r: (f"{r['observers']:,}", r["case"])
    )
    lines += pass_table(
        ("Observers", "Cluster"), [foreign], lambda r: (f"{r['observers']:,}", r["case"])
    )[2:]
    lines.append("")
    lines.append(f"Growth, all fresh: {_growth(rows, 'all fresh')}.")
    lines.append(f"Growth, 5 % stale: {_growth(rows, 'stale')}.")
    expected_pages = ", ".join(
        f"{r['observers']:,}: {math.ceil(r['observers'] / 100)}" for r in rows[::2]
    )
    lines.append(f"ListTasks pages are one per 100 running tasks ({expected_pages}).")
    p95 = sorted(latencies)[max(0, math.ceil(0.95 * len(latencies)) - 1)]
    lines.append(
        f"STOPPED event to replacement RunTask call (reconciler's own time on moto, "
        f"{len(latencies)} samples): median {statistics.median(latencies) * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    offline_aws()
    import sys

    print(run(quick="--quick" in sys.argv))
