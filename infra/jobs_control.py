"""``JobsControl``: the jobs routes of the management API and the never-delivered audit.

One function (``handlers.jobs_control.handler``) serves both, separate from the observers API
function (least privilege: it touches only the runs table's jobs items and invokes only the
stack's job functions). Its routes join the observers' REST API when the app has a fleet (one
endpoint, one IAM policy for operators); without a fleet it gets a REST API of its own. The audit
runs on its own EventBridge schedule, so it works whether or not a fleet (and its minute resync)
exists.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.catalogs import Catalog
from infra.function import InvokeTarget, vigil_function
from infra.management_api import (
    API_GATEWAY_TIMEOUT_SECONDS,
    access_log_group,
    api_integration,
    management_api_options,
    restrict_to_operators,
)
from infra.queues import dead_letter_queue
from vigil.contract.jobs import IDEMPOTENCY_PK, JOB_PK_PREFIX
from vigil.contract.layout import CATALOG_DIGEST_ENV as DIGEST_ENV
from vigil.contract.layout import STACK_ENV, Entity, function_prefix

AUDIT_EVERY = Duration.minutes(5)


class JobsControl(Construct):
    """The jobs routes of the management API and the never-delivered audit (see the module).

    Args:
        catalog: the stack's jobs catalog, the jobs its routes and audit know.
        runs_table: the job runs table they record in.
        api: the REST API to join (the fleet's); none: these routes get their own.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalog: Catalog,
        runs_table: dynamodb.ITable,
        api: apigateway.RestApi | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = self._build_function(catalog, runs_table)
        self._grant(catalog, runs_table)
        self.owns_api = api is None
        """True when the stack has no fleet and these routes have an API of their own."""
        self.api = api or self._build_rest_api()
        self._add_routes(self.api)
        self.audit_undelivered = dead_letter_queue(self, "AuditUndelivered")
        """Audits the scheduler could not deliver, or that failed after Lambda's retries (alarmed:
        while it fills, never-delivered ticks go unnoticed)."""
        self.function.configure_async_invoke(
            on_failure=destinations.SqsDestination(self.audit_undelivered),
            retry_attempts=2,
            max_event_age=Duration.hours(1),
        )
        self.audit_schedule = self._build_audit_schedule()

    def _build_function(self, catalog: Catalog, runs_table: dynamodb.ITable) -> lambda_.Function:
        return vigil_function(
            self,
            "Function",
            handler="handlers.jobs_control.handler",
            description="Vigil jobs control: run now, pause, backfill plans, never-delivered audit",
            timeout=Duration.seconds(API_GATEWAY_TIMEOUT_SECONDS),
            environment={
                "VIGIL_RUNS_TABLE": runs_table.table_name,
                STACK_ENV: Stack.of(self).stack_name,
                DIGEST_ENV: catalog.digest,
            },
        )

    def _grant(self, catalog: Catalog, runs_table: dynamodb.ITable) -> None:
        """The stack's jobs' items (and the jobs index), their functions, their catalog.

        By the jobs' key prefix and their functions' name prefix (``vigil.contract.layout``): one
        statement each at any number of jobs, where listing them would pass IAM's 10,240
        characters near a hundred jobs. The runs table holds this stack's jobs only, and only this
        stack names functions ``<stack>_job_*``.
        """
        catalog.grant_read(self.function)
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",  # GET /jobs: the declared jobs' heads, by key
                    "dynamodb:UpdateItem",
                    "dynamodb:Query",
                ],
                resources=[runs_table.table_arn],
                conditions={
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{JOB_PK_PREFIX}*"]}
                },
            )
        )
        # Idempotency-Key answers of POST /jobs/{job}/runs, kept by Powertools in one partition.
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                ],
                resources=[runs_table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [IDEMPOTENCY_PK]}
                },
            )
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"], resources=[job_functions_arn(Stack.of(self))]
            )
        )

    def _build_rest_api(self) -> apigateway.RestApi:
        """Without an observer fleet: the same kind of API, IAM on every method, access-logged."""
        self.api_access_logs = access_log_group(self, logs.RetentionDays.ONE_MONTH)
        api = apigateway.RestApi(
            self,
            "Api",
            description="Vigil jobs",
            **management_api_options(self, self.api_access_logs, "jobs"),
        )
        restrict_to_operators(api)
        return api

    def _add_routes(self, api: apigateway.RestApi) -> None:
        """``/jobs`` and ``/jobs/{proxy+}``: more specific than the observers' ``/{proxy+}``."""
        integration = api_integration(self.function)
        iam_only = apigateway.MethodOptions(authorization_type=apigateway.AuthorizationType.IAM)
        resource = api.root.add_resource("jobs")
        resource.add_method("GET", integration, authorization_type=iam_only.authorization_type)
        resource.add_proxy(default_integration=integration, default_method_options=iam_only)

    def _build_audit_schedule(self) -> scheduler.Schedule:
        return scheduler.Schedule(
            self,
            "Audit",
            schedule=scheduler.ScheduleExpression.rate(AUDIT_EVERY),
            description="Vigil: record expected job ticks that were never delivered",
            time_window=scheduler.TimeWindow.off(),
            target=InvokeTarget(
                self.function,
                input=scheduler.ScheduleTargetInput.from_object({"vigil-audit": True}),
                retry_attempts=2,
                max_event_age=Duration.minutes(5),
                dead_letter_queue=self.audit_undelivered,
            ),
        )


def job_functions_arn(stack: Stack) -> str:
    """Every job function of the stack (``STACK_job_*``): what run now and a redrive invoke."""
    return stack.format_arn(
        service="lambda",
        resource="function",
        resource_name=f"{function_prefix(stack.stack_name, Entity.JOB)}*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
