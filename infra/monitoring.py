"""``Monitoring``: the console view of Vigil, one dashboard plus alarms that page on lost work."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.observer_fleet import ObserverFleet
from infra.scheduled_job import ScheduledJob


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[ScheduledJob],
        fleet: ObserverFleet | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        # Dashboard names are unique per account across regions: one per stack and region.
        stack = Stack.of(self)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{stack.stack_name}-{stack.region}"
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown="# Vigil\nScheduled jobs: runs, suppressed duplicates, skipped and "
                "missed ticks, dead-lettered events. Observers: starts, restarts, failures, "
                "reconcile time. An alarm means work was lost or delayed.",
                width=24,
                height=2,
            )
        )
        for job in jobs:
            self._add_job(job)
        if fleet is not None:
            self._add_fleet(fleet)

    def _add_fleet(self, fleet: ObserverFleet) -> None:
        """The fleet owns its alarms; the dashboard shows its lifecycle and its dead letters."""
        self.alarms.extend(fleet.alarms.values())
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="observers: lifecycle",
                left=[
                    _fleet_metric(name)
                    for name in (
                        "ObserverStarted",
                        "ObserverRestarted",
                        "ObserverStopped",
                        "ObserverFailed",
                        "ObserverOrphanStopped",
                        "ObserverHeartbeatStale",
                        "ObserverRunTaskFailed",
                    )
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="observers: dead letters and reconcile time",
                left=[
                    _depth(fleet.observers_dlq, "gave up"),
                    _depth(fleet.events_dlq, "undelivered task events"),
                    _depth(fleet.stream_dlq, "unprocessed registry changes"),
                ],
                right=[_fleet_metric("ReconcilePassDuration", "Maximum")],
                width=12,
            ),
        )

    def _add_job(self, job: ScheduledJob) -> None:
        name = job.job_name
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: ticks",
                left=[
                    job.metric("JobRunSucceeded"),
                    job.metric("JobRunFailed"),
                    job.metric("JobDuplicateSuppressed"),
                    job.metric("JobTickSkipped"),
                    job.metric("JobTickMissed"),
                    job.metric("JobRunFenced"),
                    job.metric("JobEventMalformed"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: dead letters",
                left=[
                    _depth(job.failed_runs, "failed runs"),
                    _depth(job.undelivered, "undelivered"),
                ],
                width=12,
            ),
        )
        self._alarm(
            f"{name}-failed-runs",
            _depth(job.failed_runs, "failed runs"),
            f"Job {name}: runs failed after all retries; redrive from the queue once fixed.",
        )
        self._alarm(
            f"{name}-undelivered",
            _depth(job.undelivered, "undelivered"),
            f"Job {name}: EventBridge Scheduler could not invoke the function.",
        )
        self._alarm(
            f"{name}-missed-ticks",
            job.metric("JobTickMissed"),
            f"Job {name}: ticks arrived later than the maximum lateness and did not run.",
        )
        self._alarm(
            f"{name}-never-delivered",
            job.metric("JobTickNeverDelivered"),
            f"Job {name}: expected ticks never arrived (schedule disabled or deleted, target "
            "broken, account throttled); the audit recorded them MISSED.",
        )
        for variable, metric, what in (
            ("VIGIL_MAX_DURATION_SECONDS", "JobRunTooLong", "took longer than max_duration"),
            ("VIGIL_MIN_DURATION_SECONDS", "JobRunTooShort", "finished under min_duration"),
        ):
            if variable in job.duration_limits:
                self._alarm(f"{name}-{metric}", job.metric(metric), f"Job {name}: a run {what}.")

    def _alarm(self, alarm_id: str, metric: cloudwatch.IMetric, description: str) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                alarm_id,
                metric=metric,
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
        )


def _depth(queue: sqs.IQueue, label: str) -> cloudwatch.Metric:
    return queue.metric_approximate_number_of_messages_visible(
        label=label, period=Duration.minutes(5), statistic="Maximum"
    )


def _fleet_metric(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="Vigil",
        metric_name=name,
        dimensions_map={"service": "vigil"},
        statistic=statistic,
        period=Duration.minutes(5),
    )
