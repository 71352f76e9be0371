"""Lambda handler of the tasks routes of the management API (API Gateway REST proxy, IAM auth),
and of the stranded-tasks audit on its own schedule.

Thin on purpose: telemetry decorators around the resolver of ``vigil.tasks.api``, or around
``vigil.tasks.audit``. The catalog comes from ``VIGIL_TASKS_CATALOG`` (the stack's tasks), read
with the boto3 clients on the first invocation, not at import.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.clock import Clock, system_clock
from vigil.contract.metrics import TaskMetric
from vigil.contract.tasks import AUDIT_EVENT_KEY
from vigil.tasks.api import TasksServices, build_tasks_app
from vigil.tasks.audit import AuditIncomplete, Stranded, audit
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient

logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()
_client: TaskClient | None = None
_app: APIGatewayRestResolver | None = None


def client() -> TaskClient:
    global _client
    if _client is None:
        _client = TaskClient(Catalog.from_env(os.environ))
    return _client


def app() -> APIGatewayRestResolver:
    global _app
    if _app is None:
        _app = build_tasks_app(TasksServices(client=client()))
    return _app


def run_audit(tasks: TaskClient, clock: Clock = system_clock) -> dict[str, Any]:
    """One pass of the stranded-tasks audit: ``TasksStranded`` is emitted every pass (zero
    too), so its alarm also fires when the audit stops running (missing data breaches)."""
    try:
        found = audit(tasks.catalog, tasks.store, clock())
    except AuditIncomplete as incomplete:
        _report(incomplete.found)
        for task, error in incomplete.failures.items():
            logger.error("tasks audit failed", extra={"task": task, "error": repr(error)})
        raise  # the invocation fails: no TasksStranded this pass, so its alarm fires
    _report(found)
    return {"stranded": [f"{s.task} {s.id}" for s in found]}


def _report(found: list[Stranded]) -> None:
    for stranded in found:
        logger.error(
            "task stranded: waiting for a retry no message holds",
            extra={
                "task": stranded.task,
                "id": stranded.id,
                "retry_at": stranded.retry_at,
                "retry_message": stranded.retry_message,
            },
        )
    telemetry.emit_one(TaskMetric.STRANDED, len(found), "Count")


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if AUDIT_EVENT_KEY in event:
        return run_audit(client())
    return app().resolve(event, context)
