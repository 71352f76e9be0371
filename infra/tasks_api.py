"""``TasksApi``: the tasks routes of the management API, served by their own function.

``POST /tasks/{task}`` enqueues, ``GET /tasks/{task}`` lists (``?status=``), ``GET`` and ``DELETE
/tasks/{task}/{id}`` read and cancel. The same function runs the stranded-tasks audit
(:mod:`infra.tasks_audit`). The routes join the stack's management API (the observers' or
the jobs' own: one endpoint, one IAM policy for operators), IAM on every method. The function
(``handlers.tasks_api.handler``) is separate from the jobs' and the observers' (least privilege:
only the declared tasks' records, queues, schedules and scheduler roles).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.background_task import BackgroundTask, catalog, grant_tasks
from infra.function import vigil_function
from infra.management_api import API_GATEWAY_TIMEOUT_SECONDS, api_integration
from infra.tasks_audit import TasksAudit
from vigil.contract.tasks import CATALOG_ENV, TaskEnv

HANDLER = "handlers.tasks_api.handler"


class TasksApi(Construct):
    """The tasks routes of the management API and their function (see the module).

    Args:
        tasks: the stack's tasks, the only ones the routes serve.
        table: the tasks table they record in.
        api: the REST API the routes join.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        tasks: Sequence[BackgroundTask],
        table: dynamodb.ITable,
        api: apigateway.RestApi,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = vigil_function(
            self,
            "Function",
            handler=HANDLER,
            description="Vigil tasks API: enqueue, read, list and cancel tasks",
            timeout=Duration.seconds(API_GATEWAY_TIMEOUT_SECONDS),
            environment={
                CATALOG_ENV: Stack.of(self).to_json_string(catalog(tasks)),
                TaskEnv.TABLE.value: table.table_name,
            },
        )
        grant_tasks(self.function, tasks, manage=True)
        if tasks:
            tasks[0].results.grant_read(self.function, [task.task_name for task in tasks])
        self._add_routes(api)
        self.audit = TasksAudit(
            self,
            "Audit",
            function=self.function,
            task_names=[task.task_name for task in tasks],
            table=table,
        )

    def _add_routes(self, api: apigateway.RestApi) -> None:
        """Explicit resources, more specific than the observers' ``/{proxy+}``; ``{id+}`` so that
        an id with a ``/`` (refused by ``enqueue`` since, but a record may predate that) reaches
        the function and gets its 404 there rather than the observers' routes."""
        integration = api_integration(self.function)
        iam_only = apigateway.AuthorizationType.IAM
        task = api.root.add_resource("tasks").add_resource("{task}")
        for method in ("GET", "POST"):
            task.add_method(method, integration, authorization_type=iam_only)
        one = task.add_resource("{id+}")
        for method in ("GET", "DELETE"):
            one.add_method(method, integration, authorization_type=iam_only)
