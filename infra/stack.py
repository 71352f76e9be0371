"""``VigilStack``: composes the capabilities; each construct owns its own resources."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.background_task import BackgroundTask
from infra.catalogs import Catalog
from infra.console import Console
from infra.jobs_control import JobsControl
from infra.layout import Layout
from infra.monitoring import Monitoring
from infra.observer_fleet import ObserverFleet
from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob
from infra.tasks_api import TasksApi
from infra.tasks_table import TasksTable
from vigil.contract.layout import Catalogued, catalog_path
from vigil.contract.tasks import CatalogField


class VigilStack(Stack):
    """The stack a team deploys: its scheduled jobs and background tasks (in nested stacks, a shard
    each, ``infra.layout``), its observer fleet, its catalogs, its dashboards. Without
    ``declare_tasks`` there is no tasks table, no tasks API function and the tasks catalog is
    empty.

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
        self.layout = Layout.of(self)
        self.runs = JobRunsTable(self, "JobRuns")
        self.jobs = list(declare_jobs(self, self.runs))
        self.observers = declare_observers(self) if declare_observers else None
        self.tasks_table: TasksTable | None = None
        self.tasks: list[BackgroundTask] = []
        self.tasks_api: TasksApi | None = None
        if declare_tasks is not None:
            self.tasks_table = TasksTable(self, "Tasks")
            self.tasks = list(declare_tasks(self, self.tasks_table))
        self.jobs_catalog = Catalog(
            self,
            "JobsCatalog",
            catalogued=Catalogued.JOBS,
            entries={job.job_name: job.catalog_entry() for job in self.jobs},
        )
        self.tasks_catalog = Catalog(
            self,
            "TasksCatalog",
            catalogued=Catalogued.TASKS,
            entries={task.task_name: task.catalog_fields() for task in self.tasks},
            shared=self._tasks_shared(),
        )
        self.jobs_control = JobsControl(
            self,
            "JobsControl",
            catalog=self.jobs_catalog,
            runs_table=self.runs.table,
            api=self.observers.api if self.observers else None,
        )
        if self.tasks and self.tasks_table is not None:
            self.tasks_api = TasksApi(
                self,
                "TasksApi",
                tasks=self.tasks,
                catalog=self.tasks_catalog,
                table=self.tasks_table.table,
                schedule_group=self.tasks[0].schedule_group_name,
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
            layout=self.layout,
        )
        self.console = Console(
            self,
            "Console",
            runs_table=self.runs.table,
            jobs_catalog=self.jobs_catalog,
            tasks_catalog=self.tasks_catalog,
            tasks=self.tasks,
            tasks_table=self.tasks_table.table if self.tasks_table else None,
            fleet=self.observers,
        )
        self._outputs()

    def task(self, name: str) -> BackgroundTask:
        """The task named ``name`` (its ``task_name``), for another stack's grants
        (``grant_enqueue``, ``grant_read``); an unknown name is a ValueError naming the tasks."""
        for task in self.tasks:
            if task.task_name == name:
                return task
        known = ", ".join(sorted(t.task_name for t in self.tasks)) or "none"
        raise ValueError(f"{self.node.id}: no task {name!r}; the tasks are: {known}")

    def _tasks_shared(self) -> dict[str, str]:
        """What every task of the stack shares: its table and group of one-time schedules."""
        if not self.tasks:
            return {}
        return {
            CatalogField.TABLE.value: self.tasks[0].table.table_name,
            CatalogField.SCHEDULE_GROUP.value: self.tasks[0].schedule_group_name,
        }

    def _outputs(self) -> None:
        """What the ``vigil`` commands need to find, read from the deployed stack; the jobs and
        tasks themselves are in the catalogs (``vigil.catalog``: one path per stack)."""
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
            "CatalogPath",
            description="Where the jobs' and tasks' catalogs are: SSM parameters under "
            "<path>/jobs and <path>/tasks (give an application VIGIL_STACK, the stack's name)",
            value=catalog_path(self.stack_name, Catalogued.JOBS).rsplit("/", 1)[0],
        )
        if self.tasks_table is not None:
            CfnOutput(self, "TasksTableName", value=self.tasks_table.table.table_name)
