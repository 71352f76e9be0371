"""A generated app of 200 scheduled jobs, 200 tasks (a quarter ordered) and 20 observer kinds (8 of
them pooled): the size issue 29 asks one deploy to hold, synthesized as ``app.py`` is (the same
stack, the same cdk-nag validation, the same quota check), for the suite's synth test and the
benchmarks.

The declarations vary what changes a job's or task's resources (schedules and time zones, duration
limits, declared writes, retries; ordered tasks, completion events, batch sizes) so that every
resource shape the constructs make is in the assembly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App, Duration
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.background_task import BackgroundTask
from infra.observer_fleet import ObserverFleet, ObserverKind
from infra.quotas import Template, check_assembly
from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob
from infra.tasks_table import TasksTable
from vigil.contract.stages import stack_name

JOBS = 200
TASKS = 200
KINDS = 20
POOLED = 8
SCHEDULES = (
    ("rate(5 minutes)", "UTC"),
    ("rate(1 hour)", "UTC"),
    ("cron(30 7 ? * MON-FRI *)", "Europe/Prague"),
    ("cron(0 3 * * ? *)", "America/New_York"),
)


@dataclass(frozen=True)
class Size:
    jobs: int = JOBS
    tasks: int = TASKS
    kinds: int = KINDS
    pooled: int = POOLED


def job_name(index: int) -> str:
    return f"job-{index:03d}"


def task_name(index: int) -> str:
    return f"task-{index:03d}"


def kind_name(index: int, pooled: bool) -> str:
    return f"{'pool' if pooled else 'kind'}-{index:02d}"


def declare_jobs(size: Size) -> Any:
    def declare(scope: Construct, runs: JobRunsTable) -> list[ScheduledJob]:
        reports = dynamodb.Table(
            scope,
            "Reports",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
        )
        jobs = []
        for index in range(size.jobs):
            schedule, time_zone = SCHEDULES[index % len(SCHEDULES)]
            jobs.append(
                ScheduledJob(
                    scope,
                    f"Job{index:03d}",
                    job_name=job_name(index),
                    handler="jobs.cleanup.handler",
                    schedule=schedule,
                    time_zone=time_zone,
                    overlap="skip" if index % 2 else "allow",
                    timeout=Duration.minutes(2),
                    max_lateness=Duration.minutes(10),
                    retry_attempts=index % 3,
                    max_duration=Duration.minutes(1) if index % 10 == 0 else None,
                    runs_table=runs.table,
                    writes=[reports] if index % 5 == 0 else [],
                )
            )
        return jobs

    return declare


def declare_tasks(size: Size) -> Any:
    def declare(scope: Construct, tasks: TasksTable) -> list[BackgroundTask]:
        declared = []
        for index in range(size.tasks):
            ordered = index % 4 == 0
            declared.append(
                BackgroundTask(
                    scope,
                    f"Task{index:03d}",
                    task_name=task_name(index),
                    handler="tasks.send_receipt.handler",
                    ordered=ordered,
                    batch_size=1 if ordered else 10,
                    concurrency=2 + index % 5,
                    retries=index % 4,
                    completion_events=("failures", "all", "none")[index % 3],
                    tasks_table=tasks.table,
                )
            )
        return declared

    return declare


def declare_observers(size: Size) -> Any:
    def declare(scope: Construct) -> ObserverFleet:
        kinds: dict[str, str | ObserverKind] = {}
        for index in range(size.kinds - size.pooled):
            kinds[kind_name(index, False)] = ObserverKind(
                "observers.ticker.run", cpu=256, memory_mib=512
            )
        for index in range(size.pooled):
            kinds[kind_name(index, True)] = ObserverKind(
                "observers.ticker.run",
                cpu=512,
                memory_mib=1024,
                placement="pooled",
                slots_per_host=10,
                observer_memory_mib=64,
            )
        return ObserverFleet(scope, "Observers", kinds=kinds, max_observers=1000)

    return declare


def build_scale_app(outdir: str | Path, size: Size = Size(), stage: str | None = None) -> App:
    """The generated app, as ``app.build_app`` builds the example (its context, its nag plugin)."""
    from app import build_app

    return build_app(
        str(outdir),
        stage,
        jobs=declare_jobs(size),
        tasks=declare_tasks(size),
        observers=declare_observers(size),
    )


def synthesize_scale(
    outdir: str | Path, size: Size = Size(), stage: str | None = None
) -> list[Template]:
    """Synthesized into ``outdir`` and held to every deploy quota (``infra.quotas``)."""
    build_scale_app(outdir, size, stage).synth()
    return check_assembly(outdir, stack_name(stage))
