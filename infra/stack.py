"""``VigilStack``: composes the capabilities; each construct owns its own resources."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.background_task import BackgroundTask, catalog
from infra.jobs_control import JobsControl
from infra.monitoring import Monitoring
from infra.observer_fleet import ObserverFleet
from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob
from infra.tasks_api import TasksApi
from infra.tasks_table import TasksTable


class VigilStack(Stack):
    """The stack a team deploys: its scheduled jobs, its background tasks, its observer fleet,
    one dashboard. Without ``declare_tasks`` there is no tasks table, no tasks API function and
    ``TasksCatalog`` is ``{}``.

    Args:
        declare_jobs: called with the stack and its job runs table; returns the stack's jobs
            (``ScheduledJob``).
        declare_observers: called with the stack; returns its ``ObserverFleet`` (none: no fleet,
            and the jobs' routes get an API of their own).
        declare_tasks: called with the stack and its tasks table; returns its tasks
            (``BackgroundTask``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        declare_jobs: Callable[[Construct, JobRunsTable], Sequence[ScheduledJob]],
        declare_observers: Callable[[Construct], ObserverFleet] | None = None,
        declare_tasks: Callable[[Construct, TasksTable], Sequence[BackgroundTask]] | None = None,
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
        self.tasks_table: TasksTable | None = None
        self.tasks: list[BackgroundTask] = []
        self.tasks_api: TasksApi | None = None
        if declare_tasks is not None:
            self.tasks_table = TasksTable(self, "Tasks")
            self.tasks = list(declare_tasks(self, self.tasks_table))
        if self.tasks and self.tasks_table is not None:
            self.tasks_api = TasksApi(
                self,
                "TasksApi",
                tasks=self.tasks,
                table=self.tasks_table.table,
                api=self.jobs_control.api,
            )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            jobs=self.jobs,
            fleet=self.observers,
            control=self.jobs_control,
            tasks=self.tasks,
            tasks_api=self.tasks_api,
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
            description="Per job: its function, its failed-runs (dead-letter) queue, and what a "
            "redrive needs to know (its overlap policy and timeout)",
            value=self.to_json_string(
                {
                    job.job_name: {
                        "function": job.function.function_name,
                        "failed_runs": job.failed_runs.queue_url,
                        "schedule": job.schedule_expression,
                        "time_zone": job.time_zone,
                        "overlap": job.overlap,
                        "timeout_seconds": str(job.timeout_seconds),
                    }
                    for job in self.jobs
                }
            ),
        )
        CfnOutput(
            self,
            "TasksCatalog",
            description="Per task: its queues, table, scheduler role and schedule group, function "
            "(give it to an application as VIGIL_TASKS_CATALOG)",
            value=self.to_json_string(catalog(self.tasks)),
        )
        if self.tasks_table is not None:
            CfnOutput(self, "TasksTableName", value=self.tasks_table.table.table_name)
