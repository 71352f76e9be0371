"""``Console``: the operator's console as CloudWatch custom widgets (``vigil.console``).

Two functions run the same code: the *view* function draws the pages (read grants only) and is
what the dashboard's widgets invoke; the *operate* function runs the buttons (the writes the
CLI's and the API's calls make) and is what every button's ``<cwdb-action>`` invokes. The
console invokes either under the person's own IAM identity, which is all the widget's invocation
carries of them (no identity, no credentials reach the function): ``lambda:InvokeFunction`` on
the view function lets a person see, on the operate function lets them act
(docs/guides/console.md has both policies).

One dashboard per stage, ``<stack>-console-<region>``: what is wrong now, jobs, tasks, observers
and hosts, a widget each. A widget costs one invocation of the view function each time it is
drawn (on open, on refresh, on a button), and nothing while nobody looks.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.background_task import BackgroundTask, task_records_condition
from infra.catalogs import Catalog
from infra.dashboard_rows import function_row
from infra.function import vigil_function
from infra.jobs_control import job_functions_arn
from infra.observer_fleet import ObserverFleet
from infra.observer_fleet.registry import index_arns
from vigil.contract.console import OPERATE_ARN_ENV, ROLE_ENV, RUNS_TABLE_ENV, Role
from vigil.contract.hosts import HOSTS_TABLE_ENV
from vigil.contract.jobs import JOB_PK_PREFIX
from vigil.contract.layout import STACK_ENV
from vigil.contract.observers import FLEET_INDEX, REGISTRY_TABLE_ENV, STOPPED_INDEX
from vigil.contract.stages import console_dashboard_name

HANDLER = "handlers.console_widget.handler"
STACK_TAG = "vigil:stack"
"""The tag every resource of the stack carries (``VigilStack``): the console's SQS grants name
the stack's queues by it (SQS authorises ``aws:ResourceTag``), at any number of jobs and tasks."""
PAGES = (
    ("now", "Vigil: what is wrong now", 8),
    ("jobs", "Vigil: jobs", 10),
    ("tasks", "Vigil: tasks", 10),
    ("observers", "Vigil: observers and hosts", 10),
)
"""(page, widget title, height in grid units), top to bottom, each the dashboard's full width."""
TIMEOUT = Duration.seconds(30)
MEMORY_MB = 512
"""More memory is more CPU: a page view is mostly boto3 and rendering in one thread."""


class Console(Construct):
    """The console's two functions and its dashboard (see the module)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        runs_table: dynamodb.ITable,
        jobs_catalog: Catalog,
        tasks_catalog: Catalog,
        tasks: Sequence[BackgroundTask] = (),
        tasks_table: dynamodb.ITable | None = None,
        fleet: ObserverFleet | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.operate = self._function("OperateFunction", Role.OPERATE, runs_table, fleet, {})
        self.view = self._function(
            "ViewFunction",
            Role.VIEW,
            runs_table,
            fleet,
            {OPERATE_ARN_ENV: self.operate.function_arn},
        )
        for function, writes in ((self.view, False), (self.operate, True)):
            jobs_catalog.grant_read(function)
            tasks_catalog.grant_read(function)
            self._grant_jobs(function, runs_table, writes)
            self._grant_queues(function, writes)
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["cloudwatch:DescribeAlarms"],
                    resources=[
                        stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    ],
                )
            )
            if tasks and tasks_table is not None:
                self._grant_tasks(function, tasks, tasks_table, writes)
            if fleet is not None:
                self._grant_fleet(function, fleet, writes)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=console_dashboard_name(stack.stack_name, stack.region),
        )
        for page, title, height in PAGES:
            self.dashboard.add_widgets(
                cloudwatch.CustomWidget(
                    function_arn=self.view.function_arn,
                    title=title,
                    params={"page": page},
                    width=24,
                    height=height,
                    update_on_time_range_change=False,
                )
            )
        # What the console itself costs and how it fares: a page view is a view invocation.
        self.dashboard.add_widgets(*function_row("Console view function", self.view))
        self.dashboard.add_widgets(*function_row("Console operate function", self.operate))

    def _function(
        self,
        construct_id: str,
        role: Role,
        runs_table: dynamodb.ITable,
        fleet: ObserverFleet | None,
        extra: dict[str, str],
    ) -> lambda_.Function:
        stack = Stack.of(self)
        fleet_env = (
            {
                REGISTRY_TABLE_ENV: fleet.table.table_name,
                HOSTS_TABLE_ENV: fleet.hosts_table.table_name,
            }
            if fleet is not None
            else {}
        )
        return vigil_function(
            self,
            construct_id,
            handler=HANDLER,
            description=f"Vigil console: the custom widgets' {role.value} function",
            timeout=TIMEOUT,
            memory_size=MEMORY_MB,
            environment={
                STACK_ENV: stack.stack_name,
                RUNS_TABLE_ENV: runs_table.table_name,
                ROLE_ENV: role.value,
                **fleet_env,
                **extra,
            },
        )

    def _grant_jobs(self, function: lambda_.Function, runs: dynamodb.ITable, writes: bool) -> None:
        """The jobs' items (heads, ticks): read; pause, resume and settle write them, run now
        and a redrive invoke the jobs' functions (by the stack's prefix of their names)."""
        actions = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"]
        if writes:
            actions += ["dynamodb:UpdateItem"]  # pause, resume, settle: conditional updates
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=actions,
                resources=[runs.table_arn],
                conditions={
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{JOB_PK_PREFIX}*"]}
                },
            )
        )
        if writes:
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[job_functions_arn(Stack.of(self))]
                )
            )

    def _grant_queues(self, function: lambda_.Function, writes: bool) -> None:
        """The stack's queues, by its tag: depths to read; a redrive takes dead letters and
        sends them back (a task's to its queue; a job's to its function)."""
        actions = ["sqs:GetQueueAttributes"]
        if writes:
            actions += [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:SendMessage",
            ]
        stack = Stack.of(self)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=actions,
                resources=[stack.format_arn(service="sqs", resource="*")],
                conditions={"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": stack.stack_name}},
            )
        )

    def _grant_tasks(
        self,
        function: lambda_.Function,
        tasks: Sequence[BackgroundTask],
        table: dynamodb.ITable,
        writes: bool,
    ) -> None:
        """Task records (``TASK#*``): counts, lists, one record (its stored result too); cancel
        and settle update one, and a cancel deletes its pending one-time schedule."""
        actions = ["dynamodb:GetItem", "dynamodb:Query"]
        if writes:
            actions += ["dynamodb:UpdateItem"]
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=actions, resources=[table.table_arn], conditions=task_records_condition()
            )
        )
        tasks[0].results.grant_read(function)
        if writes:
            stack = Stack.of(self)
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["scheduler:DeleteSchedule"],
                    resources=[
                        stack.format_arn(
                            service="scheduler",
                            resource="schedule",
                            resource_name=f"{tasks[0].schedule_group_name}/*",
                        )
                    ],
                )
            )

    def _grant_fleet(self, function: lambda_.Function, fleet: ObserverFleet, writes: bool) -> None:
        """The registry: pages (its indexes, then items by key); restart, stop and settle are
        the API's conditional writes. The hosts: one Scan."""
        actions = ["dynamodb:GetItem", "dynamodb:BatchGetItem"]
        if writes:
            actions += ["dynamodb:UpdateItem"]  # a transaction of updates (and the counter's)
        function.add_to_role_policy(
            iam.PolicyStatement(actions=actions, resources=[fleet.table.table_arn])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=index_arns(fleet.table, FLEET_INDEX, STOPPED_INDEX),
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:Scan"],
                resources=[fleet.hosts_table.table_arn],
            )
        )
