"""Lambda handler of the jobs-control function: the jobs routes of the management API, and the
never-delivered audit on its own schedule.

Thin on purpose: it tells the two triggers apart, builds its dependencies on the first
invocation (not at import) and hands over to ``vigil.jobs.control_api`` / ``vigil.jobs.audit``.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext

from vigil import telemetry
from vigil.catalog import STACK_ENV, Kept
from vigil.contract.jobs import IDEMPOTENCY_PK
from vigil.jobs.audit import AuditIncomplete, Finding, audit
from vigil.jobs.control import JobSpec, parse_catalog, read_jobs
from vigil.jobs.control_api import ControlServices, build_control_app
from vigil.jobs.control_store import ControlStore
from vigil.jobs.store import RunStore

AUDIT_EVENT_KEY = "vigil-audit"
logger = telemetry.logger()
metrics = telemetry.metrics()
tracer = telemetry.tracer()


@dataclass(frozen=True)
class ControlSettings:
    """The runs table and where the jobs come from: the stack's jobs catalog in SSM
    (``VIGIL_STACK``, read at the first invocation and again each minute: ``vigil.catalog``), or a
    catalog given whole (``VIGIL_JOBS``, a stack deployed before the catalogs, and tests)."""

    table: str
    stack: str = ""
    jobs: dict[str, JobSpec] | None = None

    @classmethod
    def from_env(cls, environ: Any = os.environ) -> ControlSettings:
        table = environ.get("VIGIL_RUNS_TABLE", "")
        if not table:
            raise ValueError("environment variable VIGIL_RUNS_TABLE is required")
        if environ.get("VIGIL_JOBS"):
            return cls(table=table, jobs=parse_catalog(environ["VIGIL_JOBS"]))
        stack = environ.get(STACK_ENV, "")
        if not stack:
            raise ValueError(f"environment variable {STACK_ENV} (or VIGIL_JOBS) is required")
        return cls(table=table, stack=stack)


_services: ControlServices | None = None
_app: tuple[ControlServices, APIGatewayRestResolver] | None = None
_jobs: Kept | None = None


def services() -> ControlServices:
    """Built on the first invocation; built again when the catalog read anew has changed."""
    global _services, _jobs
    settings = ControlSettings.from_env()
    if _jobs is None:
        if settings.jobs is not None:
            static = settings.jobs
            _jobs = Kept(lambda: static, max_age=timedelta.max)
        else:
            ssm = boto3.client("ssm")
            _jobs = Kept(lambda: read_jobs(ssm, settings.stack))
    jobs = _jobs.get()
    if _services is None or _services.jobs != jobs:
        dynamodb, lambda_ = _clients()

        def invoke(function: str, event: dict[str, Any]) -> None:
            lambda_.invoke(
                FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
            )

        _services = ControlServices(
            jobs=jobs,
            control=ControlStore(dynamodb, settings.table),
            runs=RunStore(dynamodb, settings.table),
            invoke=invoke,
            idempotency_store=DynamoDBPersistenceLayer(
                table_name=settings.table,
                key_attr="pk",
                sort_key_attr="sk",
                static_pk_value=IDEMPOTENCY_PK,
                expiry_attr="expires_at",
                boto3_client=dynamodb,
            ),
        )
    return _services


@functools.cache
def _clients() -> tuple[Any, Any]:
    return boto3.client("dynamodb"), boto3.client("lambda")


def handle(event: dict[str, Any], context: Any, built: ControlServices) -> dict[str, Any]:
    if AUDIT_EVENT_KEY in event:
        try:
            findings = audit(built.jobs, built.control, built.runs, built.clock())
        except AuditIncomplete as incomplete:
            _report(incomplete.findings)
            for job, error in incomplete.failures.items():
                logger.error("audit failed", extra={"job": job, "error": repr(error)})
            raise  # the invocation fails: kept by its on-failure destination, and alarmed
        _report(findings)
        return {"never_delivered": [f"{f.job} {f.tick}" for f in findings]}
    global _app
    if _app is None or _app[0] is not built:
        _app = (built, build_control_app(built))
    return _app[1].resolve(event, context)


def _report(findings: list[Finding]) -> None:
    for finding in findings:
        logger.warning("tick never delivered", extra={"job": finding.job, "tick": finding.tick})
        telemetry.count_one(telemetry.JobMetric.NEVER_DELIVERED, job=finding.job)


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context, services())
