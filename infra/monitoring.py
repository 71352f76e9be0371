"""``Monitoring``: the console view of Vigil: one dashboard, alarms that tell an SNS topic, and
saved Logs Insights queries.

Rows, top to bottom: each job (ticks, dead letters); each task (outcomes, queue, durations); the fleet (observers by status, desired against
running, the oldest heartbeat, lifecycle, dead letters); each observer kind's CPU and memory; the
API; each function (errors, throttles, duration, concurrency). Every alarm in the stack, the fleet's
included, notifies the topic on ALARM and on OK.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.alarms import alarm_above, alarm_above_zero
from infra.alerts import alarm_topic, notify
from infra.background_task import BackgroundTask
from infra.dashboard_rows import api_row, function_row, queue_depth
from infra.jobs_control import JobsControl
from infra.observer_fleet import ObserverFleet
from infra.observer_fleet.dashboard import fleet_rows
from infra.saved_queries import saved_queries
from infra.scheduled_job import ScheduledJob
from infra.tasks_api import TasksApi
from vigil.contract.alarms import Alarm
from vigil.contract.metrics import STACK_WIDE_TASK_METRICS, JobMetric, TaskMetric
from vigil.contract.stages import dashboard_name
from vigil.contract.tasks import CompletionEvents

MINUTE = Duration.minutes(1)

TASK_OUTCOMES = tuple(
    metric
    for metric in TaskMetric
    if metric not in (TaskMetric.DURATION, TaskMetric.QUEUE_WAIT, *STACK_WIDE_TASK_METRICS)
)
"""The counts on a task's outcomes graph; its durations have a graph of their own."""


class Monitoring(Construct):
    """The dashboard, the alarms and their topic, the saved queries (see the module).

    Args:
        jobs: the stack's jobs: a dashboard row and alarms each.
        fleet: the observer fleet: its rows, and its alarms notify the topic too.
        control: the jobs control: its audit's alarm and function row.
        tasks: the stack's tasks: rows and alarms each.
        tasks_api: the tasks API: its function's row.
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
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cloudwatch.Alarm] = []
        self.topic = alarm_topic(self)
        stack = Stack.of(self)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name(stack.stack_name, stack.region)
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown="# Vigil\nScheduled jobs: runs, suppressed duplicates, skipped and "
                "missed ticks, dead-lettered events. Tasks: enqueued, succeeded, failed and "
                "duplicate, queue age, durations. Observers: by status, desired against "
                "running, heartbeats, restarts, failures; CPU and memory per kind. Then the API "
                "and every function. An alarm means work was lost or delayed; alarms go to the "
                "stack's `AlarmTopicArn`.",
                width=24,
                height=2,
            )
        )
        for job in jobs:
            self._add_job(job)
        for task in tasks:
            self._add_task(task)
        if fleet is not None:
            self._add_fleet(fleet)
        self._add_functions(jobs, fleet, control, tasks, tasks_api)
        self.queries = saved_queries(
            self,
            job_logs=[job.function.log_group for job in jobs],
            observer_logs=[
                fleet.log_group,
                fleet.reconciler.log_group,
                fleet.api_function.log_group,
            ]
            if fleet
            else [],
        )
        notify(self.topic, self.alarms)

    def _add_functions(
        self,
        jobs: Sequence[ScheduledJob],
        fleet: ObserverFleet | None,
        control: JobsControl | None,
        tasks: Sequence[BackgroundTask],
        tasks_api: TasksApi | None,
    ) -> None:
        functions = [(f"job {job.job_name}", job.function) for job in jobs]
        functions += [(f"task {task.task_name}", task.function) for task in tasks]
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
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="jobs audit: undelivered",
                    left=[queue_depth(control.audit_undelivered, "undelivered audits")],
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
        for label, function in functions:
            self.dashboard.add_widgets(*function_row(label, function))

    def _add_fleet(self, fleet: ObserverFleet) -> None:
        """The fleet owns its alarms and its rows (``infra.observer_fleet.dashboard``)."""
        self.alarms.extend(fleet.alarms.values())
        for row in fleet_rows(fleet):
            self.dashboard.add_widgets(*row)

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
                    job.metric(JobMetric.UNCERTAIN),
                    job.metric(JobMetric.MALFORMED),
                    job.metric(JobMetric.FINISH_UNRECORDED),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: dead letters",
                left=[
                    queue_depth(job.failed_runs, "failed runs"),
                    queue_depth(job.undelivered, "undelivered"),
                ],
                width=12,
            ),
        )
        self._alarm(
            Alarm.JOB_FAILED_RUNS,
            f"{name}-failed-runs",
            queue_depth(job.failed_runs, "failed runs"),
            f"Job {name}: runs failed after all retries; redrive from the queue once fixed.",
        )
        self._alarm(
            Alarm.JOB_UNDELIVERED,
            f"{name}-undelivered",
            queue_depth(job.undelivered, "undelivered"),
            f"Job {name}: EventBridge Scheduler could not invoke the function.",
        )
        self._alarm(
            Alarm.JOB_MISSED_TICKS,
            f"{name}-missed-ticks",
            job.metric(JobMetric.MISSED),
            f"Job {name}: ticks arrived later than the maximum lateness and did not run.",
        )
        self._alarm(
            Alarm.JOB_NEVER_DELIVERED,
            f"{name}-never-delivered",
            job.metric(JobMetric.NEVER_DELIVERED),
            f"Job {name}: expected ticks never arrived (schedule disabled or deleted, target "
            "broken, account throttled); the audit recorded them MISSED.",
        )
        self._alarm(
            Alarm.JOB_FINISH_UNRECORDED,
            f"{name}-finish-unrecorded",
            job.metric(JobMetric.FINISH_UNRECORDED),
            f"Job {name}: a run ended but DynamoDB refused its outcome until the invocation's "
            "time ran out (throttling?). Lambda's retry on the same container records it; on "
            f"another one the body runs again. Type `vigil jobs history {name}`: a tick with 2 "
            "attempts ran twice, so check that its effects were fenced by its token.",
        )
        self._alarm(
            Alarm.JOB_UNCERTAIN,
            f"{name}-uncertain",
            job.metric(JobMetric.UNCERTAIN),
            f"Job {name}: a tick stopped UNCERTAIN on an effect (run.once) an earlier run began "
            f"and never recorded done; it is not retried. Type `vigil jobs history {name}` for "
            "the tick and its effect, find out whether the effect happened, then "
            f"`vigil jobs settle {name} TICK --effect NAME --done` (it happened) or `--not-done` "
            f"and `vigil jobs run {name} --at TICK` (it runs again).",
        )
        for variable, alarm, metric, what in (
            (
                "VIGIL_MAX_DURATION_SECONDS",
                Alarm.JOB_TOO_LONG,
                JobMetric.TOO_LONG,
                "took longer than max_duration",
            ),
            (
                "VIGIL_MIN_DURATION_SECONDS",
                Alarm.JOB_TOO_SHORT,
                JobMetric.TOO_SHORT,
                "finished under min_duration",
            ),
        ):
            if variable in job.duration_limits:
                self._alarm(
                    alarm,
                    f"{name}-{metric.value}",
                    job.metric(metric),
                    f"Job {name}: a run {what}.",
                )

    def _add_task(self, task: BackgroundTask) -> None:
        name = task.task_name
        age = task.queue.metric_approximate_age_of_oldest_message(
            label="oldest message (s)", period=Duration.minutes(5), statistic="Maximum"
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title=f"task {name}: outcomes",
                left=[
                    task.queue.metric_number_of_messages_sent(
                        label="enqueued (messages sent)", period=MINUTE, statistic="Sum"
                    ),
                    *(task.metric(metric) for metric in TASK_OUTCOMES),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"task {name}: queue",
                left=[
                    queue_depth(task.queue, "waiting"),
                    queue_depth(task.dead_letters, "dead letters"),
                ],
                right=[age],
                right_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=task.max_queue_age_seconds, label="max_queue_age"
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"task {name}: run and wait (ms)",
                left=[
                    task.metric(TaskMetric.DURATION, "p50", "run p50"),
                    task.metric(TaskMetric.DURATION, "p99", "run p99"),
                    task.metric(TaskMetric.QUEUE_WAIT, "p99", "wait p99"),
                ],
                width=8,
            ),
        )
        failed = (
            f"Type `vigil tasks list {name} --status FAILED` for the errors; once fixed, "
            f"`vigil tasks redrive {name}` runs them again (safe to repeat: a task that "
            "succeeded meanwhile is recorded DUPLICATE)."
        )
        self.alarms.append(
            alarm_above(
                self,
                f"task-{name}-queue-age",
                alarm=Alarm.TASK_QUEUE_AGE,
                metric=age,
                threshold=task.max_queue_age_seconds,
                description=f"Task {name}: a message has waited over max_queue_age "
                f"({task.max_queue_age_seconds} s): the function fails, is throttled or its "
                f"concurrency ({task.concurrency}) cannot keep up. Type `vigil tasks list {name} "
                "--status QUEUED`; see the function's errors and throttles on the dashboard.",
            )
        )
        self._alarm(
            Alarm.TASK_DEAD_LETTERS,
            f"task-{name}-dead-letters",
            queue_depth(task.dead_letters, "dead letters"),
            f"Task {name}: messages in its dead-letter queue (out of retries, malformed, or an "
            f"invocation that kept dying). {failed}",
        )
        self._alarm(
            Alarm.TASK_FAILED,
            f"task-{name}-failed",
            task.metric(TaskMetric.FAILED),
            f"Task {name}: tasks FAILED after all retries. {failed}",
        )
        self._alarm(
            Alarm.TASK_FINISH_UNRECORDED,
            f"task-{name}-finish-unrecorded",
            task.metric(TaskMetric.FINISH_UNRECORDED),
            f"Task {name}: a run ended but DynamoDB refused its outcome until the invocation's "
            "time ran out (throttling?); the message comes back and the task runs again once its "
            f"lease expires. Type `vigil tasks list {name} --status RUNNING`: a task with 2 "
            "attempts ran twice, so check that its effects were fenced by its token.",
        )
        self._alarm(
            Alarm.TASK_UNCERTAIN,
            f"task-{name}-uncertain",
            task.metric(TaskMetric.UNCERTAIN),
            f"Task {name}: a task stopped UNCERTAIN on an effect (run.once) an earlier attempt "
            f"began and never recorded done; it is not retried. Type `vigil tasks list {name} "
            "--status UNCERTAIN` for the tasks and their effects, find out whether the effect "
            f"happened, then `vigil tasks settle {name} ID --effect NAME --done` (it happened) or "
            f"`--not-done` and `vigil tasks redrive {name}` (it runs again).",
        )
        if task.completion_events is CompletionEvents.NONE:
            return  # it sends no events, so none can go unsent
        self._alarm(
            Alarm.TASK_EVENT_UNSENT,
            f"task-{name}-event-unsent",
            task.metric(TaskMetric.EVENT_UNSENT),
            f"Task {name}: completion events EventBridge did not take in time; their subscribers "
            f"did not hear of these outcomes. The records have them: type `vigil tasks list {name}`.",
        )

    def _alarm(
        self, alarm: Alarm, alarm_id: str, metric: cloudwatch.IMetric, description: str
    ) -> None:
        self.alarms.append(
            alarm_above_zero(self, alarm_id, alarm=alarm, metric=metric, description=description)
        )
