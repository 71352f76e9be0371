"""The console functions' environment, read once, and the services built from it.

``VIGIL_STACK`` (its catalogs), ``VIGIL_RUNS_TABLE``, ``VIGIL_CONSOLE_ROLE`` (``view`` or
``operate``); the view function also ``VIGIL_CONSOLE_OPERATE_ARN`` (where its action buttons
point); with a fleet ``VIGIL_REGISTRY_TABLE`` and ``VIGIL_HOSTS_TABLE``. The jobs' and tasks'
catalogs are read from SSM at the first invocation (``vigil.catalog``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vigil.catalog import read_catalog
from vigil.console.services import ConsoleServices
from vigil.contract.console import OPERATE_ARN_ENV, ROLE_ENV, RUNS_TABLE_ENV, Role
from vigil.contract.hosts import HOSTS_TABLE_ENV
from vigil.contract.layout import STACK_ENV, Catalogued
from vigil.contract.observers import REGISTRY_TABLE_ENV
from vigil.jobs.control import JobSpec
from vigil.jobs.control_store import ControlStore
from vigil.jobs.redrive import Answered
from vigil.jobs.store import RunStore
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.registry import ObserverCommands
from vigil.settings import SettingsError
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient


@dataclass(frozen=True)
class ConsoleSettings:
    stack: str
    runs_table: str
    role: Role
    operate_arn: str = ""
    registry_table: str = ""
    hosts_table: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ConsoleSettings:
        missing = [n for n in (STACK_ENV, RUNS_TABLE_ENV, ROLE_ENV) if not environ.get(n)]
        if missing:
            raise SettingsError(f"environment variables required: {', '.join(missing)}")
        raw_role = environ[ROLE_ENV]
        if raw_role not in {r.value for r in Role}:
            raise SettingsError(f"{ROLE_ENV} must be view or operate, got {raw_role!r}")
        role = Role(raw_role)
        if role is Role.VIEW and not environ.get(OPERATE_ARN_ENV):
            raise SettingsError(f"{OPERATE_ARN_ENV} is required by the view function")
        return cls(
            stack=environ[STACK_ENV],
            runs_table=environ[RUNS_TABLE_ENV],
            role=role,
            operate_arn=environ.get(OPERATE_ARN_ENV, ""),
            registry_table=environ.get(REGISTRY_TABLE_ENV, ""),
            hosts_table=environ.get(HOSTS_TABLE_ENV, ""),
        )


def build_services(settings: ConsoleSettings, clients: Mapping[str, Any]) -> ConsoleServices:
    """``clients``: boto3 clients by service (dynamodb, sqs, ssm, lambda, cloudwatch,
    scheduler, s3); their calls are the page's requests."""
    dynamodb, sqs, lambda_ = clients["dynamodb"], clients["sqs"], clients["lambda"]
    entries = read_catalog(clients["ssm"], settings.stack, Catalogued.JOBS).entries
    jobs = {name: JobSpec.from_json(name, entry) for name, entry in entries.items()}
    tasks_catalog = Catalog.from_stack(clients["ssm"], settings.stack)

    def invoke(function: str, event: dict[str, Any]) -> None:
        lambda_.invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
        )

    def call(function: str, event: Any) -> Any:
        """As ``vigil jobs redrive`` calls: a refused or failed Invoke is an answer (the dead
        letter stays in its queue for the next redrive), never an exception mid-redrive."""
        try:
            response = lambda_.invoke(FunctionName=function, Payload=json.dumps(event).encode())
        except (BotoCoreError, ClientError) as error:
            return Answered(False, type(error).__name__, str(error))
        return Answered.of(response)

    return ConsoleServices(
        stack=settings.stack,
        jobs=jobs,
        dead_letters={n: str(e["failed_runs"]) for n, e in entries.items() if e.get("failed_runs")},
        job_entries=entries,
        control=ControlStore(dynamodb, settings.runs_table),
        runs=RunStore(dynamodb, settings.runs_table),
        invoke=invoke,
        call=call,
        sqs=sqs,
        cloudwatch=clients["cloudwatch"],
        tasks=TaskClient(
            tasks_catalog,
            sqs=sqs,
            dynamodb=dynamodb,
            scheduler=clients["scheduler"],
            s3=clients["s3"],
        )
        if len(tasks_catalog)
        else None,
        observers=ObserverCommands(dynamodb, settings.registry_table)
        if settings.registry_table
        else None,
        hosts=HostStore(dynamodb, settings.hosts_table) if settings.hosts_table else None,
    )
