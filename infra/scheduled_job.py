"""``ScheduledJob``: one EventBridge schedule, one guarded Lambda function, its queues and grants."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, Duration, TimeZone
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.catalogs import Entry, Filled
from infra.errors import ConfigurationError
from infra.function import InvokeTarget, SharedLogs, check_function, vigil_function
from infra.layout import Layout
from infra.queues import check_retention, dead_letter_queue
from infra.quotas import QUEUE_URL
from infra.runs_table import JobRunsTable
from infra.schedule_expressions import (
    evaluable,
    never_fires_again,
    validate_schedule,
    validate_time_zone,
)
from infra.stage import stage_of
from infra.writes import check_writes, grant_writes, writes_environment
from vigil.contract.jobs import JOB_PK_PREFIX, SCHEDULER_INPUT_KEY
from vigil.contract.layout import CONSTRUCT_FIELD, Entity
from vigil.contract.metrics import NAMESPACE, JobMetric, dimensions

JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
OVERLAP_POLICIES = ("skip", "allow")
LAMBDA_MAX_EVENT_AGE = Duration.hours(6)
LAMBDA_RETRY_DELAYS = (60, 120)
"""Seconds Lambda waits before its first and second asynchronous retry."""


def default_name(construct_id: str) -> str:
    """A construct id in kebab case (``DailyReport`` -> ``daily-report``): a job's or task's name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", construct_id).lower()


@dataclass(frozen=True)
class _Checked:
    name: str
    timeout: int
    max_event_age: int


class ScheduledJob(Construct):
    """A job that EventBridge Scheduler fires and the Vigil guard runs exactly once per tick.

    Declared in a stack, it lives in the nested stack its name hashes to (``infra.layout``): its
    function (named ``<stack>_job_<name>``), role, schedule, invoke config and ``FailedRuns`` queue;
    ``undelivered`` is the stack's one queue for every job's schedule.

    Args:
        handler: ``module.function`` under ``functions/``; checked at synth without importing it.
        schedule: an EventBridge Scheduler expression: ``rate()``, ``cron()`` (6 fields) or
            ``at()``.
        time_zone: the IANA time zone the schedule is evaluated in.
        overlap: ``"skip"``: a tick arriving while an earlier run holds the job's lease is
            recorded SKIPPED; ``"allow"``: ticks overlap, each still runs once.
        timeout: the function's timeout, at most 15 minutes.
        max_lateness: a tick delivered later than this is recorded MISSED and does not run.
        retry_attempts: Lambda's asynchronous retries of a failed run (0-2); after the last one
            the event goes to ``failed_runs``. Synth warns when retries (about 1 and 2 minutes
            apart) would arrive after ``max_lateness`` and so never run.
        delivery_retry_attempts: the scheduler's retries when it cannot invoke the function at
            all (0-185); those events then go to ``undelivered``.
        max_event_age: how long the scheduler keeps trying to deliver a tick (60 s-24 h);
            Lambda's own limit for its retries is capped at 6 h.
        memory_size: the function's memory, in MB.
        lease_margin: added to the invocation's deadline to make a run's lease; must exceed the
            worst clock skew.
        retention: how long tick records stay (DynamoDB TTL); at least the dead-letter queues'
            14 days, so a redrive always finds its tick.
        job_name: the key of the job's records, metrics and grants (default: the construct id
            in kebab case, ``DailyReport`` -> ``daily-report``).
        description: the function's description (default: the job's name and schedule).
        runs_table: the stack's job runs table (default: one shared by the stack's jobs).
        max_duration: a run longer than this (1 s to ``timeout``) is flagged TOO_LONG in its
            record, counts ``JobRunTooLong`` and alarms.
        min_duration: a successful run faster than this (below ``max_duration``) is flagged
            TOO_SHORT (``JobRunTooShort``, alarmed): it probably did nothing.
        writes: the tables, buckets, queues and buses the job writes through ``run.fenced``
            (granted exactly: :mod:`infra.writes`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        schedule: str,
        time_zone: str = "UTC",
        overlap: str = "skip",
        timeout: Duration = Duration.minutes(1),
        max_lateness: Duration = Duration.minutes(5),
        retry_attempts: int = 2,
        delivery_retry_attempts: int = 185,
        max_event_age: Duration = Duration.hours(1),
        memory_size: int = 256,
        lease_margin: Duration = Duration.seconds(30),
        retention: Duration = Duration.days(30),
        job_name: str | None = None,
        description: str | None = None,
        runs_table: dynamodb.ITable | None = None,
        max_duration: Duration | None = None,
        min_duration: Duration | None = None,
        writes: Sequence[Any] = (),
    ) -> None:
        checked = self._validate(
            construct_id=construct_id,
            job_name=job_name,
            handler=handler,
            schedule=schedule,
            time_zone=time_zone,
            overlap=overlap,
            timeout=timeout,
            max_lateness=max_lateness,
            retry_attempts=retry_attempts,
            delivery_retry_attempts=delivery_retry_attempts,
            max_event_age=max_event_age,
            memory_size=memory_size,
            lease_margin=lease_margin,
            retention=retention,
        )
        layout = Layout.of(scope)
        shard = layout.place(Entity.JOB, checked.name, f"ScheduledJob {construct_id!r}")
        super().__init__(shard, construct_id)
        self._vigil_layout = layout
        self.shard = shard
        declared = check_writes(_failing(construct_id), writes)
        self.job_name = checked.name
        self.stage = stage_of(self)
        """The stage its metrics are dimensioned by (read once: a call into the CDK's process)."""
        self.function_name = layout.function_name(Entity.JOB, checked.name)
        self.schedule_expression = schedule
        self.time_zone = time_zone
        self.overlap = overlap
        self.timeout_seconds = checked.timeout
        self.max_lateness_seconds = int(max_lateness.to_seconds())
        self.retention_seconds = int(retention.to_seconds())
        self.retry_attempts = retry_attempts
        self.duration_limits = _duration_limits(construct_id, timeout, max_duration, min_duration)
        self.runs_table = runs_table or _shared_runs_table(self)
        self.failed_runs = dead_letter_queue(self, "FailedRuns")
        self.undelivered = layout.undelivered
        self.function = self._build_function(
            handler=handler,
            description=description or f"Vigil job {checked.name} ({schedule})",
            overlap=overlap,
            timeout=timeout,
            memory_size=memory_size,
            max_lateness=max_lateness,
            lease_margin=lease_margin,
            retention=retention,
        )
        self.function.configure_async_invoke(
            on_failure=destinations.SqsDestination(self.failed_runs),
            retry_attempts=retry_attempts,
            max_event_age=Duration.seconds(
                min(checked.max_event_age, int(LAMBDA_MAX_EVENT_AGE.to_seconds()))
            ),
        )
        for variable, seconds in self.duration_limits.items():
            self.function.add_environment(variable, str(seconds))
        for variable, value in writes_environment(self, declared).items():
            self.function.add_environment(variable, value)
        grant_writes(
            self.function,
            declared,
            claims=self.runs_table,
            claim_conditions=self._own_items(),
        )
        self._warn_if_retries_arrive_too_late(checked.timeout, max_lateness, retry_attempts)
        if never_fires_again(schedule, time_zone):
            Annotations.of(self).add_warning_v2(
                "vigil:never-fires",
                f"job {self.job_name}: {schedule} ({time_zone}) never fires again: remove the job "
                "or fix its schedule",
            )
        self._grant_runs_table()
        self.schedule = self._build_schedule(
            schedule=schedule,
            time_zone=time_zone,
            delivery_retry_attempts=delivery_retry_attempts,
            max_event_age=Duration.seconds(checked.max_event_age),
        )

    # --- validation --------------------------------------------------------------------------

    @staticmethod
    def _validate(
        *,
        construct_id: str,
        job_name: str | None,
        handler: str,
        schedule: str,
        time_zone: str,
        overlap: str,
        timeout: Duration,
        max_lateness: Duration,
        retry_attempts: int,
        delivery_retry_attempts: int,
        max_event_age: Duration,
        memory_size: int,
        lease_margin: Duration,
        retention: Duration,
    ) -> _Checked:
        name = job_name or default_name(construct_id)
        fail = _failing(construct_id)

        if not JOB_NAME.match(name):
            raise fail("job_name", f"{name!r} must match {JOB_NAME.pattern}")
        seconds = check_function(fail, handler=handler, timeout=timeout, memory_size=memory_size)
        if problem := validate_schedule(schedule):
            raise fail("schedule", problem)
        if problem := validate_time_zone(time_zone):
            raise fail("time_zone", problem)
        if problem := evaluable(schedule, time_zone):
            raise fail("schedule", problem)
        if overlap not in OVERLAP_POLICIES:
            raise fail("overlap", f"{overlap!r} is not one of {', '.join(OVERLAP_POLICIES)}")
        if max_lateness.to_seconds() < 0:
            raise fail("max_lateness", "must not be negative")
        if not 0 <= retry_attempts <= 2:
            raise fail("retry_attempts", f"{retry_attempts} is outside Lambda's 0-2")
        if not 0 <= delivery_retry_attempts <= 185:
            raise fail("delivery_retry_attempts", f"{delivery_retry_attempts} is outside 0-185")
        age = int(max_event_age.to_seconds())
        if not 60 <= age <= 86_400:
            raise fail("max_event_age", f"{age} s is outside EventBridge Scheduler's 60 s to 24 h")
        if lease_margin.to_seconds() < 1:
            raise fail("lease_margin", "must be at least 1 s (it absorbs clock skew)")
        check_retention(fail, retention, "tick's record")
        return _Checked(name=name, timeout=seconds, max_event_age=age)

    # --- resources ---------------------------------------------------------------------------

    def _build_function(
        self,
        *,
        handler: str,
        description: str,
        overlap: str,
        timeout: Duration,
        memory_size: int,
        max_lateness: Duration,
        lease_margin: Duration,
        retention: Duration,
    ) -> lambda_.Function:
        return vigil_function(
            self,
            "Function",
            handler=handler,
            description=description,
            timeout=timeout,
            memory_size=memory_size,
            shared_logs=SharedLogs(self.function_name, self.shard.log_group),
            environment={
                "VIGIL_JOB_NAME": self.job_name,
                "VIGIL_RUNS_TABLE": self.runs_table.table_name,
                "VIGIL_OVERLAP": overlap,
                "VIGIL_MAX_LATENESS_SECONDS": str(int(max_lateness.to_seconds())),
                "VIGIL_LEASE_MARGIN_SECONDS": str(int(lease_margin.to_seconds())),
                "VIGIL_RETENTION_SECONDS": str(int(retention.to_seconds())),
            },
        )

    def _warn_if_retries_arrive_too_late(
        self, timeout: int, max_lateness: Duration, retry_attempts: int
    ) -> None:
        """Lambda retries about 1 and 2 minutes after a failed run; later than the lateness limit,
        a retry finds the tick too late and does not run it (the tick stays FAILED, visibly)."""
        if retry_attempts == 0:
            return
        last_retry = timeout + sum(LAMBDA_RETRY_DELAYS[:retry_attempts])
        if max_lateness.to_seconds() < last_retry:
            Annotations.of(self).add_warning_v2(
                "vigil:late-retries",
                f"job {self.job_name}: max_lateness {int(max_lateness.to_seconds())} s is below "
                f"timeout + Lambda's retry delays ({last_retry} s), so late retries of a failed "
                "tick will not run; raise max_lateness or set retry_attempts=0.",
            )

    def _grant_runs_table(self) -> None:
        """Only UpdateItem (all the guard's writes are conditional updates), only this job's items."""
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[self.runs_table.table_arn],
                conditions=self._own_items(),
            )
        )

    def _own_items(self) -> dict[str, Any]:
        """The condition that keeps a grant on the runs table to this job's own items."""
        return {
            "ForAllValues:StringEquals": {
                "dynamodb:LeadingKeys": [f"{JOB_PK_PREFIX}{self.job_name}"]
            }
        }

    def _build_schedule(
        self,
        *,
        schedule: str,
        time_zone: str,
        delivery_retry_attempts: int,
        max_event_age: Duration,
    ) -> scheduler.Schedule:
        return scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.expression(schedule, TimeZone.of(time_zone)),
            description=f"Vigil job {self.job_name}",
            time_window=scheduler.TimeWindow.off(),
            target=InvokeTarget(
                self.function,
                input=scheduler.ScheduleTargetInput.from_object(
                    {
                        SCHEDULER_INPUT_KEY: {
                            "job": self.job_name,
                            "scheduled_time": str(scheduler.ContextAttribute.scheduled_time),
                            "execution_id": str(scheduler.ContextAttribute.execution_id),
                            "attempt": str(scheduler.ContextAttribute.attempt_number),
                        }
                    }
                ),
                retry_attempts=delivery_retry_attempts,
                max_event_age=max_event_age,
                dead_letter_queue=self.undelivered,
                role=self.shard.schedule_role,
            ),
        )

    # --- the catalog and monitoring handles --------------------------------------------------

    def catalog_entry(self) -> Entry:
        """This job's entry in the stack's jobs catalog (``vigil.catalog``): what the jobs
        control, the CLI and the kit find it by."""
        return {
            "function": self.function_name,
            CONSTRUCT_FIELD: self.node.id,
            "failed_runs": Filled(self.failed_runs.queue_url, QUEUE_URL),
            "schedule": self.schedule_expression,
            "time_zone": self.time_zone,
            "overlap": self.overlap,
            "timeout_seconds": self.timeout_seconds,
            "max_lateness_seconds": self.max_lateness_seconds,
            "retention_seconds": self.retention_seconds,
            "retry_attempts": self.retry_attempts,
        }

    def metric(self, metric: JobMetric, statistic: str = "Sum") -> cloudwatch.Metric:
        """A Powertools metric this job emits."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=str(metric),  # a plain str: jsii would take an Enum for its own
            dimensions_map=dimensions(self.stage, job=self.job_name),
            statistic=statistic,
            period=Duration.minutes(5),
        )


def _failing(construct_id: str) -> Callable[[str, str], ConfigurationError]:
    owner = f"ScheduledJob {construct_id!r}"
    return lambda parameter, problem: ConfigurationError(owner, parameter, problem)


def _duration_limits(
    construct_id: str, timeout: Duration, longest: Duration | None, shortest: Duration | None
) -> dict[str, int]:
    """``max_duration`` / ``min_duration`` as the guard's environment; checked at synth."""
    limits: dict[str, int] = {}
    owner = f"ScheduledJob {construct_id!r}"
    if longest is not None:
        seconds = int(longest.to_seconds())
        if not 1 <= seconds <= timeout.to_seconds():
            raise ConfigurationError(owner, "max_duration", "must be from 1 s to the timeout")
        limits["VIGIL_MAX_DURATION_SECONDS"] = seconds
    if shortest is not None:
        seconds = int(shortest.to_seconds())
        if seconds < 1 or (longest is not None and seconds >= longest.to_seconds()):
            raise ConfigurationError(
                owner, "min_duration", "must be at least 1 s and below max_duration"
            )
        limits["VIGIL_MIN_DURATION_SECONDS"] = seconds
    return limits


def _shared_runs_table(scope: Construct) -> dynamodb.ITable:
    stack = Layout.of(scope).stack
    existing = stack.node.try_find_child("JobRuns")
    if isinstance(existing, JobRunsTable):
        return existing.table
    return JobRunsTable(stack, "JobRuns").table
