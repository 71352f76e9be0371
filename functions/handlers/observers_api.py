"""Lambda handler of the observers management API (API Gateway REST proxy, IAM auth).

Thin on purpose: telemetry decorators around the resolver. The app (registry, idempotency store,
boto3 clients) is built on the first invocation, not at import.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.observers.api import ApiSettings, MigrationGate, Services, build_app
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.kinds_catalog import with_kinds
from vigil.observers.rebalance_requests import RebalanceRequests
from vigil.observers.registry import ObserverCommands

logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()
_app: APIGatewayRestResolver | None = None


def app() -> APIGatewayRestResolver:
    global _app
    if _app is None:
        settings = ApiSettings.from_env(with_kinds(os.environ, lambda: boto3.client("ssm")))
        client = boto3.client("dynamodb")
        _app = build_app(
            Services(
                registry=ObserverCommands(
                    client, settings.table, max_observers=settings.max_observers
                ),
                kinds=settings.kinds,
                idempotency_store=DynamoDBPersistenceLayer(
                    table_name=settings.idempotency_table, boto3_client=client
                ),
                hosts=HostStore(client, settings.hosts_table) if settings.hosts_table else None,
                placements=settings.placements,
                rebalance=RebalanceRequests(client, settings.hosts_table)
                if settings.hosts_table
                else None,
                migration=MigrationGate(client, settings.table, settings.legacy_table)
                if settings.legacy_table
                else None,
            )
        )
    return _app


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app().resolve(event, context)
