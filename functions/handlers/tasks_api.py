"""Lambda handler of the tasks routes of the management API (API Gateway REST proxy, IAM auth),
and of the tasks audit (stranded and stuck tasks) on its own schedule.

Thin on purpose: telemetry decorators around the resolver of ``vigil.tasks.api``, or around
``vigil.tasks.audit``. The catalog comes from ``VIGIL_TASKS_CATALOG`` (the stack's tasks), read
with the boto3 clients on the first invocation, not at import.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.clock import Clock, system_clock
from vigil.contract.metrics import TaskMetric
from vigil.contract.tasks import AUDIT_EVENT_KEY
from vigil.tasks.api import TasksServices, build_tasks_app
from vigil.tasks.audit import AuditIncomplete, Stranded, Stuck, audit, stuck
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient

logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()
T = TypeVar("T")
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
    """One pass of the tasks audit: the stranded retries, then the tasks stuck past their
    ``max_duration``. ``TasksStranded`` is emitted every pass (zero too), so its alarm also
    fires when the audit stops running (missing data breaches); ``TaskStuck`` per task that has
    any. A task the pass could not read fails the invocation, after every other was reported."""
    now = clock()
    failed: list[AuditIncomplete] = []
    stranded = _completed(lambda: audit(tasks.catalog, tasks.store, now), failed)
    late = _completed(lambda: stuck(tasks.catalog, tasks.store, now), failed)
    _report_stuck(late)
    if failed:
        _report(stranded, emit=False)
        for incomplete in failed:
            for task, error in incomplete.failures.items():
                logger.error("tasks audit failed", extra={"task": task, "error": repr(error)})
        raise failed[0]  # the invocation fails: no TasksStranded this pass, so its alarm fires
    _report(stranded)
    return {
        "stranded": [f"{s.task} {s.id}" for s in stranded],
        "stuck": [f"{s.task} {s.id}" for s in late],
    }


def _completed(find: Callable[[], list[T]], failed: list[AuditIncomplete]) -> list[T]:
    """What ``find`` found, of every task it could read (the others' failure kept in ``failed``)."""
    try:
        return find()
    except AuditIncomplete as incomplete:
        failed.append(incomplete)
        return list(incomplete.found)


def _report_stuck(found: list[Stuck]) -> None:
    _log("task stuck: not ended past its max_duration", found)
    for task, count in Counter(late.task for late in found).items():
        telemetry.emit_one(TaskMetric.STUCK, count, "Count", task=task)


def _report(found: list[Stranded], *, emit: bool = True) -> None:
    _log("task stranded: waiting for a retry no message holds", found)
    if emit:
        telemetry.emit_one(TaskMetric.STRANDED, len(found), "Count")


def _log(message: str, findings: Sequence[Stranded | Stuck]) -> None:
    """One error line per finding, its fields as keys (an empty one left out)."""
    for finding in findings:
        logger.error(message, extra={k: v for k, v in asdict(finding).items() if v})


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if AUDIT_EVENT_KEY in event:
        return run_audit(client())
    return app().resolve(event, context)
