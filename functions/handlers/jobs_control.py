"""Lambda handler of the jobs-control function: the jobs routes of the management API, and the
never-delivered audit on its own schedule.

Thin on purpose: it tells the two triggers apart, builds its dependencies on the first
invocation (not at import) and hands over to ``vigil.jobs.control_api`` / ``vigil.jobs.audit``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import boto3
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.jobs.audit import audit
from vigil.jobs.control import JobSpec, parse_catalog
from vigil.jobs.control_api import ControlServices, build_control_app
from vigil.jobs.control_store import ControlStore
from vigil.jobs.store import RunStore

AUDIT_EVENT_KEY = "vigil-audit"
logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()


@dataclass(frozen=True)
class ControlSettings:
    table: str
    jobs: dict[str, JobSpec]

    @classmethod
    def from_env(cls, environ: Any = os.environ) -> ControlSettings:
        table = environ.get("VIGIL_RUNS_TABLE", "")
        if not table:
            raise ValueError("environment variable VIGIL_RUNS_TABLE is required")
        return cls(table=table, jobs=parse_catalog(environ.get("VIGIL_JOBS", "{}")))


_services: ControlServices | None = None
_app: tuple[ControlServices, APIGatewayRestResolver] | None = None


def services() -> ControlServices:
    global _services
    if _services is None:
        settings = ControlSettings.from_env()
        dynamodb, lambda_ = boto3.client("dynamodb"), boto3.client("lambda")

        def invoke(function: str, event: dict[str, Any]) -> None:
            lambda_.invoke(
                FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
            )

        _services = ControlServices(
            jobs=settings.jobs,
            control=ControlStore(dynamodb, settings.table),
            runs=RunStore(dynamodb, settings.table),
            invoke=invoke,
        )
    return _services


def handle(event: dict[str, Any], context: Any, built: ControlServices) -> dict[str, Any]:
    if AUDIT_EVENT_KEY in event:
        findings = audit(built.jobs, built.control, built.runs, built.clock())
        for finding in findings:
            logger.warning("tick never delivered", extra={"job": finding.job, "tick": finding.tick})
            with single_metric(
                name=telemetry.JobMetric.NEVER_DELIVERED,
                unit=MetricUnit.Count,
                value=1,
                namespace=telemetry.NAMESPACE,
            ) as emitted:
                emitted.add_dimension(name="service", value=telemetry.SERVICE)
                emitted.add_dimension(name="job", value=finding.job)
        return {"never_delivered": [f"{f.job} {f.tick}" for f in findings]}
    global _app
    if _app is None or _app[0] is not built:
        _app = (built, build_control_app(built))
    return _app[1].resolve(event, context)


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context, services())
