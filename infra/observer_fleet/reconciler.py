"""The reconciler and what wakes it: the function (its environment names everything it drives),
its least-privilege grants, and its three triggers: ECS task state changes, the registry's stream
(filtered to the changes it acts on) and the minute resync."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.catalogs import Catalog
from infra.function import vigil_function
from infra.observer_fleet import hosts as fleet_hosts
from infra.observer_fleet.network import Network
from infra.observer_fleet.registry import index_arns
from infra.observer_fleet.tasks import CONTAINER_NAME
from vigil.contract.hosts import HOST_EXIT, HOSTS_TABLE_ENV, WAITING_INDEX
from vigil.contract.layout import CATALOG_DIGEST_ENV, STACK_ENV
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    FLEET_INDEX,
    LEGACY_REGISTRY_TABLE_ENV,
    REGISTRY_TABLE_ENV,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    Desired,
    Status,
)

ECS_TASKS = "ecs-tasks.amazonaws.com"
RECONCILER_TIMEOUT_SECONDS = 180
RESYNC_LEASE_SECONDS = RECONCILER_TIMEOUT_SECONDS + 60
"""A resync lease outlives the pass that took it by a minute (a crashed pass frees it then)."""
STREAM_MAX_RECORD_AGE = Duration.hours(1)


@dataclass(frozen=True)
class Restarts:
    """When the reconciler gives up on an observer, and how long it waits between tries."""

    failure_threshold: int
    backoff_base: Duration
    backoff_cap: Duration


def build_reconciler(
    scope: Construct,
    *,
    registry: dynamodb.Table,
    hosts: dynamodb.Table,
    cluster: ecs.Cluster,
    task_definitions: Mapping[str, ecs.FargateTaskDefinition],
    kinds_catalog: Catalog,
    network: Network,
    observers_dlq: sqs.Queue,
    failures: sqs.Queue,
    heartbeat_seconds: int,
    restarts: Restarts,
    legacy: dynamodb.Table | None = None,
) -> lambda_.Function:
    """The function; ``failures`` keeps the ECS events and ticks it failed on after Lambda's
    async retries; ``legacy``: a name-keyed registry it migrates (``legacyRegistry``). The
    kinds' options and task definitions are in the kinds catalog (in the environment they passed
    Lambda's 4 KB near 20 kinds); the environment keeps the catalog's digest and each task
    definition's revision, so a deploy that changes a kind or registers a revision replaces the
    warm containers, as the kinds in it did."""
    function = vigil_function(
        scope,
        "Reconciler",
        handler="handlers.reconciler.handler",
        description="Vigil observers reconciler: ECS events, registry stream, minute resync",
        timeout=Duration.seconds(RECONCILER_TIMEOUT_SECONDS),
        memory_size=1024,
        environment={
            REGISTRY_TABLE_ENV: registry.table_name,
            **({LEGACY_REGISTRY_TABLE_ENV: legacy.table_name} if legacy is not None else {}),
            HOSTS_TABLE_ENV: hosts.table_name,
            "VIGIL_CLUSTER_ARN": cluster.cluster_arn,
            STACK_ENV: Stack.of(scope).stack_name,
            CATALOG_DIGEST_ENV: Fn.join(
                ",",
                [kinds_catalog.digest]
                + [
                    Fn.select(6, Fn.split(":", d.task_definition_arn))
                    for d in task_definitions.values()
                ],
            ),
            "VIGIL_CONTAINER_NAME": CONTAINER_NAME,
            "VIGIL_SUBNETS": Fn.join(",", network.subnet_ids),
            "VIGIL_SECURITY_GROUPS": network.security_group.security_group_id,
            "VIGIL_ASSIGN_PUBLIC_IP": "true" if network.assign_public_ip else "false",
            "VIGIL_OBSERVERS_DLQ_URL": observers_dlq.queue_url,
            "VIGIL_HEARTBEAT_SECONDS": str(heartbeat_seconds),
            "VIGIL_FAILURE_THRESHOLD": str(restarts.failure_threshold),
            "VIGIL_BACKOFF_BASE_SECONDS": str(int(restarts.backoff_base.to_seconds())),
            "VIGIL_BACKOFF_CAP_SECONDS": str(int(restarts.backoff_cap.to_seconds())),
            # Longer than the function can run, so a killed pass never leaves two running.
            "VIGIL_RESYNC_LEASE_SECONDS": str(RESYNC_LEASE_SECONDS),
        },
    )
    kinds_catalog.grant_read(function)
    # EventBridge invokes asynchronously: after Lambda's retries a failed event is kept (the
    # destination record holds the event and the error), never only logged.
    function.configure_async_invoke(
        on_failure=destinations.SqsDestination(failures),
        retry_attempts=2,
        max_event_age=Duration.hours(1),
    )
    return function


def grant_reconciler(
    function: lambda_.Function,
    *,
    registry: dynamodb.Table,
    hosts: dynamodb.Table,
    pooled: bool,
    cluster: ecs.Cluster,
    task_definitions: Mapping[str, ecs.FargateTaskDefinition],
    task_roles: Mapping[str, iam.IRole],
    execution_role: iam.IRole,
    observers_dlq: sqs.Queue,
    legacy: dynamodb.Table | None = None,
) -> None:
    """Least privilege: this fleet's table, task definitions, cluster, roles and queue; and a
    name-keyed registry being migrated: read whole (the copy), its records fenced one by one
    as their generations end."""
    stack = Stack.of(function)
    indexes = [FLEET_INDEX, STOPPED_INDEX, *([WAITING_INDEX] if pooled else [])]
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"],
            resources=[registry.table_arn, *index_arns(registry, *indexes)],
        )
    )
    if legacy is not None:
        # The copy puts each observer (and its name's claim) that is not there yet.
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:PutItem"], resources=[registry.table_arn])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem"],
                resources=[legacy.table_arn],
            )
        )
    fleet_hosts.grant_reconciler(function, hosts)
    on_cluster = {"ArnEquals": {"ecs:cluster": cluster.cluster_arn}}
    tasks = stack.format_arn(
        service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*"
    )
    _grant_kinds(function, task_definitions, task_roles, on_cluster)
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["ecs:StopTask", "ecs:DescribeTasks"],
            resources=[tasks],
            conditions=on_cluster,
        )
    )
    # ListTasks (a read) has no resource type of its own: "*", narrowed to the cluster.
    function.add_to_role_policy(
        iam.PolicyStatement(actions=["ecs:ListTasks"], resources=["*"], conditions=on_cluster)
    )
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["ecs:TagResource"],
            resources=[tasks],
            conditions={"StringEquals": {"ecs:CreateAction": "RunTask"}},
        )
    )
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[execution_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": ECS_TASKS}},
        )
    )
    observers_dlq.grant_send_messages(function)


def _grant_kinds(
    function: lambda_.Function,
    task_definitions: Mapping[str, ecs.FargateTaskDefinition],
    task_roles: Mapping[str, iam.IRole],
    on_cluster: Mapping[str, Any],
) -> None:
    """Each kind's RunTask (its family) and PassRole (its task role), in managed policies of their
    own: in the role's inline policies they grew with the kinds past IAM's 10,240 characters near
    twenty. A kind's grants sit in the policy its name hashes to, so adding a kind changes one
    policy and moves none; each policy holds some twenty kinds at most (6,144 characters: the
    synth's quota check says so past it)."""
    stack = Stack.of(function)
    groups: dict[int, list[str]] = {}
    for kind in sorted(task_definitions):
        groups.setdefault(kind_grants_policy(kind), []).append(kind)
    for index, kinds in sorted(groups.items()):
        families = [
            stack.format_arn(
                service="ecs",
                resource="task-definition",
                resource_name=f"{task_definitions[kind].family}:*",
            )
            for kind in kinds
        ]
        iam.ManagedPolicy(
            function,
            f"KindGrants{index}",
            description=f"Vigil reconciler: run and pass the roles of kinds {', '.join(kinds)}",
            statements=[
                iam.PolicyStatement(
                    actions=["ecs:RunTask"], resources=families, conditions=dict(on_cluster)
                ),
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[task_roles[kind].role_arn for kind in kinds],
                    conditions={"StringEquals": {"iam:PassedToService": ECS_TASKS}},
                ),
            ],
            roles=[function.role] if function.role is not None else [],
        )


KIND_GRANT_POLICIES = 4
"""Managed policies the kinds' grants are spread over (of the 10 a role may have attached)."""


def kind_grants_policy(kind: str) -> int:
    """The managed policy a kind's grants live in, for good: a stable hash of its name."""
    return int(hashlib.sha256(kind.encode()).hexdigest()[:8], 16) % KIND_GRANT_POLICIES


@dataclass(frozen=True)
class Triggers:
    task_events: events.Rule
    resync: events.Rule


def build_triggers(
    scope: Construct,
    function: lambda_.Function,
    *,
    registry: dynamodb.Table,
    cluster: ecs.Cluster,
    events_dlq: sqs.Queue,
    stream_dlq: sqs.Queue,
    legacy: dynamodb.Table | None = None,
) -> Triggers:
    """ECS task state changes of the cluster, the minute resync, the registry's stream (and a
    name-keyed registry's being migrated: every write of its observers, to replay)."""
    target_options: dict[str, Any] = {
        "dead_letter_queue": events_dlq,
        "retry_attempts": 4,
        "max_event_age": Duration.hours(2),
    }
    task_events = events.Rule(
        scope,
        "TaskStateChanges",
        description="ECS task state changes of the observer fleet's cluster",
        event_pattern=events.EventPattern(
            source=["aws.ecs"],
            detail_type=["ECS Task State Change"],
            detail={"clusterArn": [cluster.cluster_arn]},
        ),
        targets=[events_targets.LambdaFunction(function, **target_options)],
    )
    resync = events.Rule(
        scope,
        "Resync",
        description="The reconciler's periodic level-triggered pass",
        schedule=events.Schedule.rate(Duration.minutes(1)),
        targets=[
            events_targets.LambdaFunction(
                function,
                dead_letter_queue=events_dlq,
                retry_attempts=0,  # the next minute's tick is the retry
                max_event_age=Duration.minutes(1),
            )
        ],
    )
    for table, filters in (
        (registry, stream_filters()),
        *([(legacy, legacy_stream_filters())] if legacy is not None else []),
    ):
        function.add_event_source(
            event_sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=50,
                max_batching_window=Duration.seconds(1),
                bisect_batch_on_error=True,
                retry_attempts=5,
                max_record_age=STREAM_MAX_RECORD_AGE,
                on_failure=event_sources.SqsDlq(stream_dlq),
                filters=filters,
            )
        )
    return Triggers(task_events, resync)


def legacy_stream_filters() -> list[dict[str, Any]]:
    """Every write of an observer in a name-keyed registry being migrated (heartbeats too: its
    running generations' liveness is replayed into the registry keyed by kind); not the
    counter's or the lease's."""
    return [
        dict(
            lambda_.FilterCriteria.filter(
                {"dynamodb": {"NewImage": {attribute: {"S": [{"exists": True}]}}}}
            )
        )
        for attribute in (FLEET_ATTRIBUTE, STOPPED_ATTRIBUTE)
    ]


def stream_filters() -> list[dict[str, Any]]:
    """Wake the reconciler for creates, stops, restart requests and host exits, not heartbeats.

    The handler checks the same conditions (``needs_attention``); this saves the invocations.
    """
    image = ["dynamodb", "NewImage"]

    def pattern(event_name: str, new_image: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"eventName": [event_name]}
        if new_image:
            body[image[0]] = {image[1]: new_image}
        return dict(lambda_.FilterCriteria.filter(body))

    live = [str(status) for status in (Status.STARTING, Status.RUNNING, Status.STOPPING)]
    return [
        pattern("INSERT"),
        pattern("MODIFY", {"status": {"S": [str(Status.PENDING)]}}),
        pattern("MODIFY", {"desired": {"S": [str(Desired.STOPPED)]}, "status": {"S": live}}),
        pattern("MODIFY", {"restart_generation": {"N": [{"exists": True}]}}),
        # A pooled observer's child exited: its host's report stands for a task's STOPPED event.
        pattern("MODIFY", {HOST_EXIT: {"M": {"generation": {"N": [{"exists": True}]}}}}),
    ]
