"""Lambda handler of the tasks routes of the management API (API Gateway REST proxy, IAM auth).

Thin on purpose: telemetry decorators around the resolver of ``vigil.tasks.api``. The catalog
comes from ``VIGIL_TASKS_CATALOG`` (the stack's tasks), read with the boto3 clients on the first
invocation, not at import.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.tasks.api import TasksServices, build_tasks_app
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient

logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()
_app: APIGatewayRestResolver | None = None


def app() -> APIGatewayRestResolver:
    global _app
    if _app is None:
        client = TaskClient(Catalog.from_env(os.environ))
        _app = build_tasks_app(TasksServices(client=client))
    return _app


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app().resolve(event, context)
