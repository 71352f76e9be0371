"""``TasksApi``: the tasks routes of the management API, served by their own function.

``POST /tasks/{task}`` enqueues, ``GET /tasks/{task}`` lists (``?status=``), ``GET`` and ``DELETE
/tasks/{task}/{id}`` read and cancel. The same function runs the stranded-tasks audit
(:mod:`infra.tasks_audit`). The routes join the stack's management API (the observers' or
the jobs' own: one endpoint, one IAM policy for operators), IAM on every method. The function
(``handlers.tasks_api.handler``) is separate from the jobs' and the observers' (least privilege:
the tasks table's task records, the stack's tasks' queues (each queue's policy lets it send), its
group of one-time schedules and its tasks' scheduler roles, by their path: one statement each at
any number of tasks).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.background_task import BackgroundTask, grant_manage_tasks
from infra.catalogs import Catalog
from infra.function import vigil_function
from infra.management_api import API_GATEWAY_TIMEOUT_SECONDS, api_integration
from infra.tasks_audit import TasksAudit
from vigil.contract.layout import CATALOG_DIGEST_ENV as DIGEST_ENV
from vigil.contract.layout import STACK_ENV
from vigil.contract.tasks import TaskEnv

HANDLER = "handlers.tasks_api.handler"


class TasksApi(Construct):
    """The tasks routes of the management API and their function (see the module).

    Args:
        tasks: the stack's tasks: each lets the function send to its queue (its queue's policy).
        catalog: the stack's tasks catalog, the tasks the routes serve.
        table: the tasks table they record in.
        schedule_group: the stack's group of one-time schedules.
        api: the REST API the routes join.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        tasks: Sequence[BackgroundTask],
        catalog: Catalog,
        table: dynamodb.ITable,
        schedule_group: str,
        api: apigateway.RestApi,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.function = vigil_function(
            self,
            "Function",
            handler=HANDLER,
            description="Vigil tasks API: enqueue, read, list and cancel tasks",
            timeout=Duration.seconds(API_GATEWAY_TIMEOUT_SECONDS),
            environment={
                STACK_ENV: stack.stack_name,
                DIGEST_ENV: catalog.digest,
                TaskEnv.TABLE.value: table.table_name,
            },
        )
        catalog.grant_read(self.function)
        grant_manage_tasks(self.function, table=table, schedule_group=schedule_group)
        for task in tasks:
            task.allow_send(self.function.grant_principal)
        if tasks:
            tasks[0].results.grant_read(self.function)
        self._add_routes(api)
        self.audit = TasksAudit(
            self,
            "Audit",
            function=self.function,
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
        # POST: a flow's signal, ``/tasks/{task}/{id}/signals/{name}`` (under the greedy id: API
        # Gateway gives a proxy resource no children; the function's routes tell them apart).
        for method in ("GET", "DELETE", "POST"):
            one.add_method(method, integration, authorization_type=iam_only)
