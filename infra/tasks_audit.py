"""``TasksAudit``: the tasks audit's schedule, grant and alarm (``vigil.tasks.audit``).

The audit runs in the tasks API's function (it holds the catalog and may read the tasks' records),
every five minutes, from its own EventBridge Scheduler schedule. It reads the tasks table's sparse
``retries`` and ``deadlines`` indexes (keys only, task records' partitions only) and each
candidate's record. Its metric, ``TasksStranded``, is emitted on every pass, zero too, so its one
alarm fires both when a stranded task is found and when no pass has run for a whole period
(missing data breaches). The tasks it finds stuck past their ``max_duration`` are counted by task
(``TaskStuck``), read by one Metrics Insights alarm of the stack's (``infra.monitoring``).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.alarms import alarm_above_zero
from infra.background_task import task_records_condition
from infra.function import InvokeTarget
from infra.stage import stage_of
from vigil.contract.alarms import ALARMS, Alarm
from vigil.contract.metrics import NAMESPACE, TaskMetric, dimensions
from vigil.contract.tasks import (
    AUDIT_EVENT_KEY,
    AUDIT_EVERY_SECONDS,
    DEADLINES_INDEX,
    RETRIES_INDEX,
)

AUDIT_EVERY = Duration.seconds(AUDIT_EVERY_SECONDS)


class TasksAudit(Construct):
    """The stranded-tasks audit of the stack's tasks, run by ``function`` (see the module)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, construct_id)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[
                    f"{table.table_arn}/index/{index}" for index in (RETRIES_INDEX, DEADLINES_INDEX)
                ],
                conditions=task_records_condition(),
            )
        )
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.rate(AUDIT_EVERY),
            description="Vigil: find tasks waiting for a retry that no message holds, and tasks "
            "not ended past their max_duration",
            time_window=scheduler.TimeWindow.off(),
            target=InvokeTarget(
                function,
                input=scheduler.ScheduleTargetInput.from_object({AUDIT_EVENT_KEY: True}),
                retry_attempts=2,
                max_event_age=Duration.minutes(5),
            ),
        )
        spec = ALARMS[Alarm.TASKS_STRANDED]
        self.metric = cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=str(TaskMetric.STRANDED),
            dimensions_map=dimensions(stage_of(self)),
            statistic=spec.statistic,
            period=Duration.minutes(spec.period_minutes),
            label="stranded tasks",
        )
        self.alarm = alarm_above_zero(
            self,
            "tasks-stranded",
            alarm=Alarm.TASKS_STRANDED,
            metric=self.metric,
            description="Tasks: a record waits for a retry whose message should have taken it by "
            "now (nothing will run or fail it), or the audit that looks has not run for 15 "
            "minutes. The tasks API function's log names each task and id ('task stranded').",
        )
