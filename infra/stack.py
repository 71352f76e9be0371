"""``VigilStack``: composes the capabilities; each construct owns its own resources."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.jobs_control import JobsControl
from infra.monitoring import Monitoring
from infra.observer_fleet import ObserverFleet
from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob


class VigilStack(Stack):
    """The stack a team deploys: its scheduled jobs, its observer fleet, one dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        declare_jobs: Callable[[Construct, JobRunsTable], Sequence[ScheduledJob]],
        declare_observers: Callable[[Construct], ObserverFleet] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        Tags.of(self).add("vigil:stack", construct_id)
        self.runs = JobRunsTable(self, "JobRuns")
        self.jobs = list(declare_jobs(self, self.runs))
        self.observers = declare_observers(self) if declare_observers else None
        self.jobs_control = JobsControl(
            self,
            "JobsControl",
            jobs=self.jobs,
            runs_table=self.runs.table,
            api=self.observers.api if self.observers else None,
        )
        self.monitoring = Monitoring(
            self, "Monitoring", jobs=self.jobs, fleet=self.observers, control=self.jobs_control
        )
        self._outputs()

    def _outputs(self) -> None:
        """What the ``vigil jobs`` commands need to find, read from the deployed stack."""
        CfnOutput(self, "JobRunsTableName", value=self.runs.table.table_name)
        CfnOutput(self, "JobsApiEndpoint", value=self.jobs_control.api.url)
        CfnOutput(
            self,
            "AlarmTopicArn",
            description="Every alarm notifies this topic on ALARM and OK; subscribe to it",
            value=self.monitoring.topic.topic_arn,
        )
        CfnOutput(
            self, "DashboardName", value=self.monitoring.dashboard.dashboard_name or "unnamed"
        )
        CfnOutput(
            self,
            "JobsCatalog",
            description="Per job: its function and its failed-runs (dead-letter) queue",
            value=self.to_json_string(
                {
                    job.job_name: {
                        "function": job.function.function_name,
                        "failed_runs": job.failed_runs.queue_url,
                        "schedule": job.schedule_expression,
                        "time_zone": job.time_zone,
                    }
                    for job in self.jobs
                }
            ),
        )
