"""``Monitoring``: the console view of Vigil, one dashboard plus alarms that page on lost work."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.observer_fleet import ObserverFleet, fleet_metric
from infra.scheduled_job import ScheduledJob
from vigil.contract.metrics import JobMetric, ObserverMetric


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
                    fleet_metric(metric)
                    for metric in (
                        ObserverMetric.STARTED,
                        ObserverMetric.RESTARTED,
                        ObserverMetric.STOPPED,
                        ObserverMetric.FAILED,
                        ObserverMetric.ORPHAN_STOPPED,
                        ObserverMetric.HEARTBEAT_STALE,
                        ObserverMetric.RUN_TASK_FAILED,
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
                right=[fleet_metric(ObserverMetric.RECONCILE_DURATION, "Maximum")],
                width=12,
            ),
        )

    def _add_job(self, job: ScheduledJob) -> None:
        name = job.job_name
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: ticks",
                left=[
                    job.metric(JobMetric.SUCCEEDED),
                    job.metric(JobMetric.FAILED),
                    job.metric(JobMetric.DUPLICATE),
                    job.metric(JobMetric.SKIPPED),
                    job.metric(JobMetric.MISSED),
                    job.metric(JobMetric.FENCED),
                    job.metric(JobMetric.MALFORMED),
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
            job.metric(JobMetric.MISSED),
            f"Job {name}: ticks arrived later than the maximum lateness and did not run.",
        )

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
