#!/usr/bin/env python3
"""The Vigil CDK app: the jobs, tasks and observers this team runs. ``python app.py`` synthesizes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import App, Duration, Environment, Validations
from aws_cdk import aws_dynamodb as dynamodb
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.background_task import BackgroundTask
from infra.nag import refuse_unaccepted_grants, suppress_accepted_findings
from infra.observer_fleet import ObserverFleet, ObserverKind
from infra.quotas import QuotaExceeded, check_assembly
from infra.removal import data_removal_policy, deletion_protected
from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob
from infra.stack import VigilStack
from infra.stage import STAGE_CONTEXT, stage_of
from infra.tasks_table import TasksTable
from vigil.contract.stages import InvalidStage, stack_name


def app_table(scope: Construct, construct_id: str, key: str) -> dynamodb.Table:
    """One of the team's own tables (not Vigil's): a string key, on demand, kept like Vigil's."""
    removal_policy = data_removal_policy(scope)
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=key, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )


def declare_jobs(scope: Construct, runs: JobRunsTable) -> list[ScheduledJob]:
    # The web app's sessions; cleanup deletes the idle ones through run.fenced (writes=[...]
    # grants exactly its fenced writes), and reads them with a grant of its own.
    sessions = app_table(scope, "Sessions", key="id")
    # Frequent, and must never overlap itself: a slow run makes the next tick SKIPPED. A failed
    # run is not retried (the next tick comes in 5 minutes); it waits in the dead-letter queue
    # for a redrive.
    cleanup = ScheduledJob(
        scope,
        "Cleanup",
        handler="jobs.cleanup.handler",
        schedule="rate(5 minutes)",
        overlap="skip",
        timeout=Duration.minutes(4),
        max_lateness=Duration.minutes(2),
        retry_attempts=0,
        runs_table=runs.table,
        writes=[sessions],
    )
    sessions.grant(cleanup.function, "dynamodb:Scan")
    return [
        cleanup,
        # Business-hours report in Prague time; reports for different days may overlap.
        ScheduledJob(
            scope,
            "DailyReport",
            handler="jobs.daily_report.handler",
            schedule="cron(30 7 ? * MON-FRI *)",
            time_zone="Europe/Prague",
            overlap="allow",
            timeout=Duration.minutes(10),
            max_lateness=Duration.hours(1),
            retry_attempts=2,
            max_event_age=Duration.hours(6),
            memory_size=512,
            runs_table=runs.table,
        ),
    ]


def declare_tasks(scope: Construct, tasks: TasksTable) -> list[BackgroundTask]:
    return [
        # Once per order: the order's id is the key. At most 5 receipts are sent at a time.
        BackgroundTask(
            scope,
            "SendReceipt",
            handler="tasks.send_receipt.handler",
            timeout=Duration.seconds(30),
            retries=3,
            backoff=Duration.seconds(30),
            concurrency=5,
            max_queue_age=Duration.minutes(10),
            # The shop's order page subscribes to receipts sent (docs/guides/tasks.md's rule), so
            # successes are announced too; the default, "failures", announces only what needs
            # acting on.
            completion_events="all",
            # A receipt the shop's support desk resends jumps the queue: enqueue(...,
            # priority="high") goes to its own queue and event source, beside the normal backlog.
            priorities=("high",),
            tasks_table=tasks.table,
        ),
        # In order per tenant (the group): a FIFO queue, one step of a tenant at a time.
        BackgroundTask(
            scope,
            "ProvisionTenant",
            handler="tasks.provision_tenant.handler",
            ordered=True,
            timeout=Duration.minutes(2),
            retries=2,
            backoff=Duration.minutes(1),
            concurrency=2,
            batch_size=1,
            max_queue_age=Duration.minutes(30),
            # The signup page waits for its tenant's steps: announced, successes too.
            completion_events="all",
            tasks_table=tasks.table,
        ),
        # A flow (docs/guides/flows.md): onboard a tenant over days, each step once; its sleep of
        # three days and its wait for the tenant's verification run no compute in between.
        BackgroundTask(
            scope,
            "OnboardTenant",
            handler="tasks.onboard_tenant.handler",
            timeout=Duration.minutes(1),
            # Its three-day pause and two-day wait end within a week: past that it is stuck.
            max_duration=Duration.days(7),
            retries=3,
            backoff=Duration.seconds(30),
            concurrency=5,
            completion_events="all",
            tasks_table=tasks.table,
        ),
    ]


def declare_observers(scope: Construct) -> ObserverFleet:
    # A ticker that checkpoints a counter: visible in its logs and in its registry item, and
    # written through ctx.fenced into a table of the team's (a replaced generation cannot write
    # over its successor's count). The same code pooled: up to 10 tickers share one task
    # (10 x 64 MiB + the host's base fit 1 GiB).
    counts = app_table(scope, "TickerCounts", key="observer")
    return ObserverFleet(
        scope,
        "Observers",
        kinds={
            "ticker": ObserverKind(
                "observers.ticker.run", cpu=256, memory_mib=512, writes=(counts,)
            ),
            "pooled-ticker": ObserverKind(
                "observers.ticker.run",
                cpu=512,
                memory_mib=1024,
                placement="pooled",
                slots_per_host=10,
                observer_memory_mib=64,
                headroom=5,
                writes=(counts,),
                # Half the kind may be in a hand-over at once: a deploy reaches every observer in
                # a few minutes (the default, 10 %, suits fleets of thousands).
                max_unavailable=50,
            ),
        },
        heartbeat_interval=Duration.seconds(30),
        max_observers=50,
    )


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context, so ``python app.py`` synthesizes what ``cdk synth`` would."""
    context: dict[str, Any] = json.loads((Path(__file__).parent / "cdk.json").read_text())[
        "context"
    ]
    return {**context, "aws:cdk:enable-path-metadata": True}


def build_app(
    outdir: str | None = None,
    stage: str | None = None,
    context: dict[str, Any] | None = None,
    *,
    jobs: Callable[[Construct, JobRunsTable], Sequence[ScheduledJob]] = declare_jobs,
    tasks: Callable[[Construct, TasksTable], Sequence[BackgroundTask]] = declare_tasks,
    observers: Callable[[Construct], ObserverFleet] = declare_observers,
) -> App:
    """The app for one stage: ``stage`` here, or ``-c stage=NAME`` from the CDK CLI, or none (the
    stack ``Vigil`` as it was before stages). A stage name that does not fit raises InvalidStage.
    ``context``: more, as ``-c KEY=VALUE`` gives it (``legacyRegistry``). ``jobs``, ``tasks`` and
    ``observers`` declare another app on the same stack (the benchmarks' 200 jobs, 200 tasks and
    20 kinds: ``benchmarks.scale_app``)."""
    # Under the CDK CLI, CDK_CONTEXT_JSON already carries cdk.json's context (and -c options).
    base = None if "CDK_CONTEXT_JSON" in os.environ else cdk_json_context()
    app = App(outdir=outdir or os.environ.get("CDK_OUTDIR", "cdk.out"), context=base)
    if stage is not None:
        app.node.set_context(STAGE_CONTEXT, stage)
    for key, value in (context or {}).items():
        app.node.set_context(key, value)
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = os.environ.get("CDK_DEFAULT_REGION", "us-east-1")
    stack = VigilStack(
        app,
        stack_name(stage_of(app)),
        declare_jobs=jobs,
        declare_observers=observers,
        declare_tasks=tasks,
        env=Environment(account=account, region=region),
        description="Vigil: exactly-once scheduled jobs, once-per-key tasks and always-running "
        "observers",
    )
    # cdk-nag's AwsSolutions pack as a validation plugin: a finding interrupts the synth (both
    # ``python app.py`` and ``cdk synth``); every accepted one is acknowledged in infra.nag.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    suppress_accepted_findings(stack)
    # What cdk-nag cannot see (NotAction, NotResource, ``?``) stops the synth here, naming it.
    refuse_unaccepted_grants(stack)
    return app


def main(argv: list[str] | None = None) -> None:
    """``python app.py [--stage NAME]`` (``make synth STAGE=NAME``); ``cdk`` passes ``-c stage``."""
    parser = argparse.ArgumentParser(description="Synthesize Vigil's stack for one stage.")
    parser.add_argument("--stage", help="a named stage: stack Vigil-NAME (default: stack Vigil)")
    args = parser.parse_args(argv)
    try:
        app = build_app(stage=args.stage)
        assembly = app.synth()
        # Every deploy quota, with the values CloudFormation fills in at their longest: a synth
        # that would fail to deploy fails here, naming the limit and the construct.
        check_assembly(assembly.directory, stack_name(stage_of(app)))
    except (InvalidStage, QuotaExceeded) as invalid:
        sys.exit(f"error: {invalid}")


if __name__ == "__main__":
    main()
