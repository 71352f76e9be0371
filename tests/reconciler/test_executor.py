"""The executor alone, on fakes: the order of one plan's steps, and a lost race doing nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from vigil.clock import ManualClock
from vigil.observers import decisions as d
from vigil.observers.fleet_store import Conflict
from vigil.observers.model import Desired, Observer, Status
from vigil.observers.reconciler.executor import Executor
from vigil.observers.reconciler.report import PassReport

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
ARN = "arn:aws:ecs:us-east-1:123456789012:task/fleet/current"
RECORD = d.Record(
    Observer(
        name="btc",
        kind="ticker",
        config={},
        desired=Desired.RUNNING,
        status=Status.RUNNING,
        created_at=NOW - timedelta(days=1),
        updated_at=NOW,
        generation=3,
        task_arn=ARN,
        version=7,
    )
)


class Steps:
    """Store, ECS, notices and starter at once, writing down each call in order."""

    def __init__(self, *, conflict: bool = False) -> None:
        self.calls: list[Any] = []
        self.conflict = conflict

    def apply(self, record: d.Record, write: d.Write, now: datetime, seen: Any) -> None:
        self.calls.append(("write", type(write).__name__))
        if self.conflict:
            raise Conflict(None)

    def stop(self, arn: str, reason: str) -> None:
        self.calls.append(("stop", arn))

    def failed(self, record: d.Record, action: d.MarkFailed, now: datetime) -> None:
        self.calls.append(("notice", action.reason))

    def start(
        self, record: d.Record, generation: int, written_version: int, on_demand: bool = False
    ) -> None:
        self.calls.append(("run", generation, written_version))


def carry_out(plan: d.Plan, steps: Steps) -> PassReport:
    fake = cast(Any, steps)
    executor = Executor(store=fake, ecs=fake, notices=fake, starter=fake, clock=ManualClock(NOW))
    report = PassReport()
    executor.carry_out("btc", RECORD, plan, seen=None, report=report)
    return report


def start(generation: int) -> d.StartTask:
    return d.StartTask(generation, restart=True, consecutive_failures=1, retry_at=NOW)


def test_a_failure_is_noticed_then_written_then_its_task_stopped() -> None:
    steps = Steps()
    carry_out(d.Plan(d.MarkFailed("crash loop", 5, None), (d.StopTask(ARN, "x"),)), steps)
    assert steps.calls == [("notice", "crash loop"), ("write", "MarkFailed"), ("stop", ARN)]


def test_a_restart_writes_stops_then_runs_the_next_generation_at_the_written_version() -> None:
    steps = Steps()
    report = carry_out(d.Plan(start(4), (d.StopTask(ARN, "restart requested"),)), steps)
    assert steps.calls == [("write", "StartTask"), ("stop", ARN), ("run", 4, 8)]
    assert (report.started, report.stopped) == (1, 1)


def test_a_retried_start_runs_the_same_generation_without_a_write() -> None:
    steps = Steps()
    carry_out(d.only(d.RetryStart(3)), steps)
    assert steps.calls == [("run", 3, 7)]


def test_a_lost_race_stops_and_starts_nothing() -> None:
    steps = Steps(conflict=True)
    with pytest.raises(Conflict):
        carry_out(d.Plan(start(4), (d.StopTask(ARN, "restart requested"),)), steps)
    assert steps.calls == [("write", "StartTask")]
