"""``Monitoring``: the console view of Vigil: dashboards, alarms that tell an SNS topic, and saved
Logs Insights queries, at a cost that grows little with the number of jobs and tasks.

- Alarms. A job's or task's conditions that Vigil's own metrics report (missed ticks, uncertain
  runs, failed tasks, ...) are one Metrics Insights alarm each for the whole stack, grouped by job
  or task: each is a contributor with its own state and CloudWatch's notification names it
  (``infra.alarms.insights_alarm``). What SQS reports stays one alarm per job (its failed runs
  waiting) and per task (its queue too old, or dead letters waiting), in its shard. The stack's
  own (the jobs' undelivered ticks, the audit, the fleet) are as before. Every alarm notifies the
  topic on ALARM and on OK.
- Dashboards. The stack's, ``<stack>-<region>``: what is failing now (the jobs and tasks with the
  most failures, by those same queries), the stack's totals, the fleet, the API and the stack's
  own functions. One per shard, ``<stack>-jobs-<n>-<region>``: a row per job or task of the shard
  (its outcomes, its function, its queues), at most 500 widgets each.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.alarms import alarm_above_zero, insights_alarm, insights_query
from infra.alerts import alarm_topic, notify
from infra.background_task import BackgroundTask
from infra.dashboard_rows import api_row, function_row, queue_depth, shard_function_widget
from infra.errors import ConfigurationError
from infra.jobs_control import JobsControl
from infra.layout import Layout, Shard
from infra.observer_fleet import ObserverFleet
from infra.observer_fleet.dashboard import fleet_rows
from infra.quotas import INSIGHTS_SERIES
from infra.saved_queries import saved_queries
from infra.scheduled_job import ScheduledJob
from infra.stage import stage_of
from infra.tasks_api import TasksApi
from vigil.contract.alarms import Alarm
from vigil.contract.layout import Entity
from vigil.contract.metrics import NAMESPACE, JobMetric, TaskMetric, dimensions
from vigil.contract.stages import dashboard_name
from vigil.contract.tasks import CompletionEvents

MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)

JOB_OUTCOMES = (
    JobMetric.FAILED,
    JobMetric.MISSED,
    JobMetric.SKIPPED,
    JobMetric.DUPLICATE,
    JobMetric.FENCED,
    JobMetric.UNCERTAIN,
    JobMetric.MALFORMED,
    JobMetric.FINISH_UNRECORDED,
    JobMetric.PAUSED,
)
"""What a job emits per job: every outcome but a success (counted for the stack)."""
TASK_OUTCOMES = (
    TaskMetric.FAILED,
    TaskMetric.RETRIED,
    TaskMetric.DUPLICATE,
    TaskMetric.FENCED,
    TaskMetric.CANCELLED,
    TaskMetric.MALFORMED,
    TaskMetric.FINISH_UNRECORDED,
    TaskMetric.UNCERTAIN,
    TaskMetric.EVENT_UNSENT,
    TaskMetric.COMPENSATED,
    TaskMetric.COMPENSATION_FAILED,
)
"""What a task emits per task: every outcome but a success (counted for the stack, with the
durations and queue waits)."""
FLOW_TOTALS = {
    TaskMetric.COMPENSATED: "COMPENSATED",
    TaskMetric.COMPENSATION_FAILED: "FAILED compensating",
    TaskMetric.STUCK: "stuck past max_duration",
}
"""What the flows' graph sums over every task (those series exist only while it happens)."""
FAILING_NOW = 10
"""How many jobs (or tasks) each "failing now" query shows: the most failing first."""

JOB_DESCRIPTIONS: dict[Alarm, str] = {
    Alarm.JOB_MISSED_TICKS: "Jobs: ticks arrived later than the job's maximum lateness and did "
    "not run. The notification names the job (its `job` dimension): type `vigil jobs history JOB`.",
    Alarm.JOB_NEVER_DELIVERED: "Jobs: expected ticks never arrived (schedule disabled or deleted, "
    "target broken, account throttled); the audit recorded them MISSED. The notification names "
    "the job: type `vigil jobs history JOB`.",
    Alarm.JOB_FINISH_UNRECORDED: "Jobs: a run ended but DynamoDB refused its outcome until the "
    "invocation's time ran out (throttling?). Lambda's retry on the same container records it; "
    "on another one the body runs again. The notification names the job: type `vigil jobs "
    "history JOB`: a tick with 2 attempts ran twice, so check that its effects were fenced.",
    Alarm.JOB_UNCERTAIN: "Jobs: a tick stopped UNCERTAIN on an effect (run.once) an earlier run "
    "began and never recorded done; it is not retried. The notification names the job: type "
    "`vigil jobs history JOB` for the tick and its effect, find out whether it happened, then "
    "`vigil jobs settle JOB TICK --effect NAME --done` or `--not-done` and `vigil jobs run JOB "
    "--at TICK`.",
    Alarm.JOB_TOO_LONG: "Jobs: a run took longer than the job's max_duration. The notification "
    "names the job: type `vigil jobs history JOB`.",
    Alarm.JOB_TOO_SHORT: "Jobs: a run finished under the job's min_duration (it probably did "
    "nothing). The notification names the job: type `vigil jobs history JOB`.",
}
TASK_FAILED_HINT = (
    "Type `vigil tasks list TASK --status FAILED` for the errors; once fixed, `vigil tasks "
    "redrive TASK` runs them again (safe to repeat: a task that succeeded meanwhile is recorded "
    "DUPLICATE)."
)
TASK_DESCRIPTIONS: dict[Alarm, str] = {
    Alarm.TASK_FAILED: "Tasks: tasks FAILED after all their retries. The notification names the "
    f"task (its `task` dimension). {TASK_FAILED_HINT}",
    Alarm.TASK_FINISH_UNRECORDED: "Tasks: a run ended but DynamoDB refused its outcome until the "
    "invocation's time ran out (throttling?); the message comes back and the task runs again "
    "once its lease expires. The notification names the task: type `vigil tasks list TASK "
    "--status RUNNING`: a task with 2 attempts ran twice, so check that its effects were fenced.",
    Alarm.TASK_UNCERTAIN: "Tasks: a task stopped UNCERTAIN on an effect (run.once) an earlier "
    "attempt began and never recorded done; it is not retried. The notification names the task: "
    "type `vigil tasks list TASK --status UNCERTAIN`, find out whether the effect happened, then "
    "`vigil tasks settle TASK ID --effect NAME --done` or `--not-done` and `vigil tasks redrive "
    "TASK`.",
    Alarm.TASK_EVENT_UNSENT: "Tasks: completion events EventBridge did not take in time; their "
    "subscribers did not hear of these outcomes. The notification names the task; the records "
    "have the outcomes: type `vigil tasks list TASK`.",
    Alarm.TASK_STUCK: "Tasks: a task (a flow, most often) has not ended past its max_duration. "
    "The notification names the task; the tasks audit's log names each id ('task stuck'), and "
    "`vigil tasks stuck TASK` lists them with their status, deadline and wake-up: type `vigil "
    "tasks get TASK ID` for its steps, then signal, cancel or fix what holds it.",
    Alarm.FLOW_COMPENSATION_FAILED: "Flows: a failed flow's compensation raised, so what it "
    "undid is partial and the flow is FAILED naming the step. The notification names the task: "
    "type `vigil tasks list TASK --status FAILED`, then `vigil tasks get TASK ID` for its steps "
    "(each step's compensation is DONE or its error), and undo the rest by hand.",
}


class Monitoring(Construct):
    """The dashboards, the alarms and their topic, the saved queries (see the module).

    Args:
        jobs: the stack's jobs: an alarm each, a row on its shard's dashboard, and the
            stack's Metrics Insights alarms.
        fleet: the observer fleet: its rows, and its alarms notify the topic too.
        control: the jobs control: its audit's alarm and function row.
        tasks: the stack's tasks: as the jobs.
        tasks_api: the tasks API: its function's row.
        layout: the stack's shards (their dashboards).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[ScheduledJob],
        fleet: ObserverFleet | None = None,
        control: JobsControl | None = None,
        tasks: Sequence[BackgroundTask] = (),
        tasks_api: TasksApi | None = None,
        layout: Layout | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self.topic = alarm_topic(self)
        self.stage = stage_of(self)
        stack = Stack.of(self)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name(stack.stack_name, stack.region)
        )
        self.shard_dashboards: dict[tuple[Entity, int], cloudwatch.Dashboard] = {}
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown="# Vigil\nWhat is failing now: the jobs and tasks with the most "
                "failures, missed ticks and uncertain runs (their alarms notify naming them). "
                "Then the stack's totals, the observers (by status, desired against running, "
                "heartbeats, restarts; CPU and memory per kind), the API and the stack's own "
                "functions. Each job and task has a row on its shard's dashboard, "
                "`<stack>-jobs-<n>-<region>` and `<stack>-tasks-<n>-<region>`. An alarm means "
                "work was lost or delayed; alarms go to the stack's `AlarmTopicArn`.",
                width=24,
                height=3,
            )
        )
        self._check_insights(jobs, tasks)
        self._add_failing_now(jobs, tasks)
        self._add_insights_alarms(jobs, tasks)
        for job in jobs:
            self._add_job(job)
        for task in tasks:
            self._add_task(task)
        if fleet is not None:
            self._add_fleet(fleet)
        self._add_functions(fleet, control, tasks_api)
        shard_logs = list(dict.fromkeys(job.shard.log_group for job in jobs))
        self.queries = saved_queries(
            self,
            job_logs=shard_logs,
            observer_logs=[
                fleet.log_group,
                fleet.reconciler.log_group,
                fleet.api_function.log_group,
            ]
            if fleet
            else [],
        )
        notify(self.topic, self.alarms)

    # -- the stack's alarms over every job and task ------------------------------------------------

    def _check_insights(
        self, jobs: Sequence[ScheduledJob], tasks: Sequence[BackgroundTask]
    ) -> None:
        """A query reads at most 500 series: one alarm covers at most 500 jobs (or tasks)."""
        for what, count in (("jobs", len(jobs)), ("tasks", len(tasks))):
            if count > INSIGHTS_SERIES.limit:
                raise ConfigurationError(
                    "Monitoring",
                    what,
                    f"{count} {what}: a Metrics Insights alarm reads at most "
                    f"{INSIGHTS_SERIES.limit} {INSIGHTS_SERIES.what} ({INSIGHTS_SERIES.source}), "
                    f"so one stack holds at most {INSIGHTS_SERIES.limit} {what}",
                )

    def _add_insights_alarms(
        self, jobs: Sequence[ScheduledJob], tasks: Sequence[BackgroundTask]
    ) -> None:
        if jobs:
            for alarm, description in JOB_DESCRIPTIONS.items():
                if alarm is Alarm.JOB_TOO_LONG and not any(
                    "VIGIL_MAX_DURATION_SECONDS" in job.duration_limits for job in jobs
                ):
                    continue
                if alarm is Alarm.JOB_TOO_SHORT and not any(
                    "VIGIL_MIN_DURATION_SECONDS" in job.duration_limits for job in jobs
                ):
                    continue
                self._insights(alarm, description)
        if tasks:
            for alarm, description in TASK_DESCRIPTIONS.items():
                if alarm is Alarm.TASK_EVENT_UNSENT and all(
                    task.completion_events is CompletionEvents.NONE for task in tasks
                ):
                    continue
                if alarm is Alarm.TASK_STUCK and all(
                    task.max_duration_seconds is None for task in tasks
                ):
                    continue
                self._insights(alarm, description)

    def _insights(self, alarm: Alarm, description: str) -> None:
        self.alarms.append(
            insights_alarm(self, f"{alarm.value}", alarm=alarm, description=description)
        )

    def _add_failing_now(
        self, jobs: Sequence[ScheduledJob], tasks: Sequence[BackgroundTask]
    ) -> None:
        """The jobs and tasks failing now, most first (the alarms' own queries), and the stack's
        totals of what succeeds (counted for the stack, not per job)."""
        widgets: list[cloudwatch.IWidget] = []
        for entity, metrics in (
            ("job", (JobMetric.FAILED, JobMetric.MISSED, JobMetric.UNCERTAIN)),
            ("task", (TaskMetric.FAILED, TaskMetric.RETRIED, TaskMetric.UNCERTAIN)),
        ):
            if (entity == "job" and not jobs) or (entity == "task" and not tasks):
                continue
            widgets.append(
                cloudwatch.GraphWidget(
                    title=f"{entity}s failing now (the {FAILING_NOW} most, per metric)",
                    left=[
                        cloudwatch.MathExpression(
                            expression=insights_query(
                                str(metric), entity, self.stage, limit=FAILING_NOW
                            ),
                            using_metrics={},
                            period=FIVE_MINUTES,
                            label="",
                        )
                        for metric in metrics
                    ],
                    width=8,
                )
            )
        totals = [
            self._stack_metric(JobMetric.SUCCEEDED, "jobs succeeded"),
            self._stack_metric(TaskMetric.SUCCEEDED, "tasks succeeded"),
        ]
        widgets.append(cloudwatch.GraphWidget(title="succeeded (the stack)", left=totals, width=8))
        self.dashboard.add_widgets(*widgets)
        if tasks:
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="tasks: run and wait (ms, the stack)",
                    left=[
                        self._stack_metric(TaskMetric.DURATION, "run p50", "p50"),
                        self._stack_metric(TaskMetric.DURATION, "run p99", "p99"),
                        self._stack_metric(TaskMetric.QUEUE_WAIT, "wait p99", "p99"),
                    ],
                    width=12,
                ),
                self._flows_by_state(),
            )

    def _flows_by_state(self) -> cloudwatch.IWidget:
        """Flows entering each state a flow has of its own, per 5 minutes, for the stack: slept
        and waiting (one series each for the stack: a flow's normal path), compensated, its
        compensation failed, stuck past max_duration (each the total of its per-task series,
        which exist only while that happens). Their successes, failures and cancels count with
        the tasks'; how many sleep or wait *now* is the records' (the console, `vigil local
        up`, ``vigil tasks list --status SLEEPING``): a gauge would cost a read of every one."""
        totals = [
            cloudwatch.MathExpression(
                expression=insights_query(str(metric), "task", self.stage, grouped=False),
                using_metrics={},
                period=FIVE_MINUTES,
                label=label,
            )
            for metric, label in FLOW_TOTALS.items()
        ]
        return cloudwatch.GraphWidget(
            title="flows by state entered (the stack, per 5 minutes)",
            left=[
                self._stack_metric(TaskMetric.SLEPT, "SLEEPING"),
                self._stack_metric(TaskMetric.WAITED, "WAITING"),
                *totals,
            ],
            width=12,
        )

    def _stack_metric(
        self, metric: JobMetric | TaskMetric, label: str, statistic: str = "Sum"
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=str(metric),
            dimensions_map=dimensions(self.stage),
            statistic=statistic,
            period=FIVE_MINUTES,
            label=label,
        )

    # -- each job and task: its alarm and its row, in its shard --------------------------------

    def shard_dashboard(self, shard: Shard) -> cloudwatch.Dashboard:
        key = (shard.entity, shard.index)
        if key not in self.shard_dashboards:
            stack = Stack.of(self)
            name = dashboard_name(
                f"{stack.stack_name}-{shard.entity.plural}-{shard.index}", stack.region
            )
            dashboard = cloudwatch.Dashboard(shard, "Dashboard", dashboard_name=name)
            dashboard.add_widgets(
                cloudwatch.TextWidget(
                    markdown=f"# Vigil {shard.entity.plural}, shard {shard.index}\nOne row per "
                    f"{shard.entity.value} of the shard: what it did that was not a success, its "
                    "function, its queues. The stack's dashboard shows what is failing now.",
                    width=24,
                    height=2,
                )
            )
            self.shard_dashboards[key] = dashboard
        return self.shard_dashboards[key]

    def _add_job(self, job: ScheduledJob) -> None:
        name = job.job_name
        self.shard_dashboard(job.shard).add_widgets(
            cloudwatch.GraphWidget(
                title=f"{name}: ticks that did not succeed",
                left=[job.metric(metric) for metric in JOB_OUTCOMES],
                width=8,
            ),
            shard_function_widget(f"{name}: runs", job.function),
            cloudwatch.GraphWidget(
                title=f"{name}: dead letters",
                left=[queue_depth(job.failed_runs, "failed runs")],
                width=8,
            ),
        )
        self.alarms.append(
            alarm_above_zero(
                job,
                "FailedRunsAlarm",
                alarm=Alarm.JOB_FAILED_RUNS,
                metric=queue_depth(job.failed_runs, "failed runs"),
                description=f"Job {name}: runs failed after all retries; `vigil jobs redrive "
                f"{name}` once fixed.",
            )
        )

    def _add_task(self, task: BackgroundTask) -> None:
        name = task.task_name
        age = task.queue.metric_approximate_age_of_oldest_message(
            label="oldest message (s)", period=FIVE_MINUTES, statistic="Maximum"
        )
        dead = queue_depth(task.dead_letters, "dead letters")
        # A priority level's queue (``priorities``) ages apart from the normal one: each alarms.
        ages: dict[str, cloudwatch.IMetric] = {"age": age}
        for index, queue in enumerate(task.priority_queues.values()):
            ages[f"age{index + 1}"] = queue.metric_approximate_age_of_oldest_message(
                period=FIVE_MINUTES, statistic="Maximum"
            )
        levels = task.priority_queues
        self.shard_dashboard(task.shard).add_widgets(
            cloudwatch.GraphWidget(
                title=f"task {name}: outcomes",
                left=[
                    task.queue.metric_number_of_messages_sent(
                        label="enqueued (messages sent)", period=MINUTE, statistic="Sum"
                    ),
                    *(
                        queue.metric_number_of_messages_sent(
                            label=f"enqueued {level}", period=MINUTE, statistic="Sum"
                        )
                        for level, queue in levels.items()
                    ),
                    *(task.metric(metric) for metric in TASK_OUTCOMES),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"task {name}: queue",
                # Each priority level's queue beside the normal one: its own backlog and age.
                left=[
                    queue_depth(task.queue, "waiting"),
                    *(queue_depth(queue, f"waiting {level}") for level, queue in levels.items()),
                    dead,
                ],
                right=[
                    age,
                    *(
                        queue.metric_approximate_age_of_oldest_message(
                            label=f"oldest {level} message (s)",
                            period=FIVE_MINUTES,
                            statistic="Maximum",
                        )
                        for level, queue in levels.items()
                    ),
                ],
                right_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=task.max_queue_age_seconds, label="max_queue_age"
                    )
                ],
                width=8,
            ),
            shard_function_widget(f"task {name}: runs", task.function),
        )
        self.alarms.append(
            alarm_above_zero(
                task,
                "QueueAlarm",
                alarm=Alarm.TASK_QUEUE,
                metric=cloudwatch.MathExpression(
                    expression="IF("
                    + "".join(
                        f"FILL({label}, 0) > {task.max_queue_age_seconds} || " for label in ages
                    )
                    + "FILL(dead, 0) > 0, 1, 0)",
                    using_metrics={**ages, "dead": dead},
                    period=FIVE_MINUTES,
                    label="old message or dead letters",
                ),
                description=f"Task {name}: a message has waited over max_queue_age "
                f"({task.max_queue_age_seconds} s), or dead letters wait. Type `vigil tasks "
                f"list {name} --status QUEUED` (the function fails, is throttled or its "
                f"concurrency, {task.concurrency}, cannot keep up: its row on the shard's "
                f"dashboard), or `vigil tasks list {name} --status FAILED`, then `vigil tasks "
                f"redrive {name}` once fixed.",
            )
        )

    # -- the stack's own --------------------------------------------------------------------------

    def _add_functions(
        self,
        fleet: ObserverFleet | None,
        control: JobsControl | None,
        tasks_api: TasksApi | None,
    ) -> None:
        functions = []
        if tasks_api is not None:
            functions.append(("tasks API", tasks_api.function))
            self.alarms.append(tasks_api.audit.alarm)
        if fleet is not None:
            self.dashboard.add_widgets(*api_row(fleet.api))
            functions += [("reconciler", fleet.reconciler), ("API function", fleet.api_function)]
        if control is not None:
            if control.owns_api:
                self.dashboard.add_widgets(*api_row(control.api))
            functions.append(("jobs control", control.function))
            undelivered = Layout.of(self).undelivered_queue
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="jobs: undelivered ticks and audits",
                    left=[
                        queue_depth(control.audit_undelivered, "undelivered audits"),
                        *([queue_depth(undelivered, "undelivered ticks")] if undelivered else []),
                    ],
                    width=8,
                )
            )
            self._alarm(
                Alarm.JOBS_AUDIT_UNDELIVERED,
                "jobs-audit-undelivered",
                queue_depth(control.audit_undelivered, "undelivered audits"),
                "Jobs audit: EventBridge Scheduler could not invoke the audit; never-delivered "
                "ticks are not being detected.",
            )
            if undelivered is not None:
                self._alarm(
                    Alarm.JOB_UNDELIVERED,
                    "jobs-undelivered",
                    queue_depth(undelivered, "undelivered ticks"),
                    "Jobs: EventBridge Scheduler could not invoke a job's function; each message "
                    "in the stack's JobsUndelivered queue names its job (its input's `job`), and "
                    "the never-delivered audit alarms naming it once its tick is missed.",
                )
        for label, function in functions:
            self.dashboard.add_widgets(*function_row(label, function))

    def _add_fleet(self, fleet: ObserverFleet) -> None:
        """The fleet owns its alarms and its rows (``infra.observer_fleet.dashboard``)."""
        self.alarms.extend(fleet.alarms.values())
        for row in fleet_rows(fleet):
            self.dashboard.add_widgets(*row)

    def _alarm(
        self, alarm: Alarm, alarm_id: str, metric: cloudwatch.IMetric, description: str
    ) -> None:
        self.alarms.append(
            alarm_above_zero(self, alarm_id, alarm=alarm, metric=metric, description=description)
        )
