"""The fleet's part of the management API: the function behind ``/observers`` and ``/hosts``,
with only the registry, hosts and idempotency calls its routes make, and the REST API in front
of it (IAM on every method, access logs, the stage's throttle: ``infra.management_api``)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.catalogs import Catalog
from infra.function import vigil_function
from infra.management_api import (
    API_GATEWAY_TIMEOUT_SECONDS,
    access_log_group,
    api_backed,
    management_api_options,
    restrict_to_operators,
)
from infra.observer_fleet import hosts as fleet_hosts
from infra.observer_fleet.registry import index_arns
from vigil.contract.hosts import HOSTS_TABLE_ENV
from vigil.contract.layout import CATALOG_DIGEST_ENV, STACK_ENV
from vigil.contract.observers import (
    FLEET_INDEX,
    LEGACY_REGISTRY_TABLE_ENV,
    REGISTRY_TABLE_ENV,
    STOPPED_INDEX,
)


def build_api_function(
    scope: Construct,
    *,
    registry: dynamodb.Table,
    idempotency: dynamodb.Table,
    hosts: dynamodb.Table,
    kinds_catalog: Catalog,
    pooled: Sequence[str],
    max_observers: int,
    heartbeat_seconds: int,
    legacy: dynamodb.Table | None = None,
) -> lambda_.Function:
    """The function behind ``/observers`` and ``/hosts``, with the grants its routes use.
    ``legacy``: a name-keyed registry being migrated (the API answers 503 until the reconciler
    has copied it; it reads nothing of it)."""
    function = vigil_function(
        scope,
        "ApiFunction",
        handler="handlers.observers_api.handler",
        description="Vigil observers management API",
        timeout=Duration.seconds(API_GATEWAY_TIMEOUT_SECONDS),
        environment={
            REGISTRY_TABLE_ENV: registry.table_name,
            **({LEGACY_REGISTRY_TABLE_ENV: legacy.table_name} if legacy is not None else {}),
            "VIGIL_IDEMPOTENCY_TABLE": idempotency.table_name,
            STACK_ENV: Stack.of(scope).stack_name,
            CATALOG_DIGEST_ENV: kinds_catalog.digest,
            "VIGIL_MAX_OBSERVERS": str(max_observers),
            "VIGIL_HEARTBEAT_SECONDS": str(heartbeat_seconds),
            HOSTS_TABLE_ENV: hosts.table_name,
        },
    )
    kinds_catalog.grant_read(function)  # each kind's handler and options
    # Only what the registry's API calls use: reads and list pages, and the transactions of
    # create, stop, restart and settle (TransactWriteItems is authorised per Put and Update
    # action).
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=[
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
            ],
            resources=[registry.table_arn],
        )
    )
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:Query"],
            resources=index_arns(registry, FLEET_INDEX, STOPPED_INDEX),
        )
    )
    fleet_hosts.grant_api(function, hosts, pooled)
    idempotency.grant_read_write_data(function)
    return function


def build_rest_api(
    scope: Construct, function: lambda_.Function, log_retention: logs.RetentionDays
) -> tuple[apigateway.LambdaRestApi, logs.LogGroup]:
    """A proxy REST API; IAM (SigV4) authorization on every method, the root included.

    Every request is access-logged as JSON with the caller's IAM identity; the stage throttles.
    API Gateway writes logs through one role per account and region (``cloud_watch_role``).
    Returns the API and its access log group.
    """
    access_logs = access_log_group(scope, log_retention)
    api = apigateway.LambdaRestApi(
        scope,
        "Api",
        handler=api_backed(function),
        proxy=True,
        description="Vigil observers",
        **management_api_options(scope, access_logs, "observers"),
    )
    restrict_to_operators(api)
    return api, access_logs
