"""The observers' ECS side: the cluster, the execution role, and per kind a task role (its own
grants only) and a Fargate task definition whose container runs the kind's handler.

The container image is built from the project's own ``functions/`` (``functions/observers/Dockerfile``)
by ``cdk deploy``; synth only hashes the folder, so tests and ``python app.py`` need no Docker.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.function import FUNCTIONS_DIR
from infra.observer_fleet.hosts import grant_own_hosts, own_keys
from infra.observer_fleet.kinds import ObserverKind, construct_suffix
from infra.stage import stage_environment
from infra.writes import Declared, grant_writes, writes_environment
from vigil.contract.hosts import HOST_SLOTS_ENV, HOSTS_TABLE_ENV, Capacity
from vigil.contract.observers import (
    CONTAINER_UPDATE_ATTRIBUTES,
    LEGACY_CONTAINER_UPDATE_ATTRIBUTES,
    REGISTRY_TABLE_ENV,
)

CONTAINER_NAME = "observer"


def build_cluster(
    scope: Construct, vpc: ec2.IVpc, kinds: Mapping[str, ObserverKind], *, insights: bool
) -> ecs.Cluster:
    return ecs.Cluster(
        scope,
        "Cluster",
        vpc=vpc,
        container_insights_v2=ecs.ContainerInsights.ENABLED
        if insights
        else ecs.ContainerInsights.DISABLED,
        # FARGATE and FARGATE_SPOT, for a Spot kind's capacity provider strategy.
        enable_fargate_capacity_providers=any(
            spec.capacity == Capacity.SPOT for spec in kinds.values()
        )
        or None,
    )


def build_execution_role(scope: Construct) -> iam.Role:
    return iam.Role(
        scope,
        "ExecutionRole",
        assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
        description="Pulls the observer image and writes its logs",
    )


def build_task_role(
    scope: Construct,
    kind: str,
    spec: ObserverKind,
    *,
    registry: dynamodb.Table,
    hosts: dynamodb.Table,
    writes: Sequence[Declared],
    legacy: dynamodb.Table | None = None,
) -> iam.Role:
    """The role of one kind's containers, so one kind's code cannot use another's grants.

    Every grant on a table the kinds share is held to the kind's own keys by
    ``dynamodb:LeadingKeys``, which GetItem and UpdateItem always name (a Scan or a Query of
    an index would name none, and ``ForAllValues`` holds for an empty set, hence the ``Null``
    check as well; neither is granted). The registry's partition is the kind: a container reads
    and writes its own kind's observers and no other's, and of them only what a container
    writes or compares (``CONTAINER_UPDATE_ATTRIBUTES``): never an observer's config, task or
    placement history; its desired state, generation and host only as far as a fenced write
    compares them. A pooled kind's hosts read and heartbeat their own host items: keys that
    begin with the kind (``host_id_pattern``). Dedicated kinds get no hosts grant.

    ``legacy``: the name-keyed registry of an earlier deployment, while its observers move over
    (``legacyRegistry``): the grants its running containers have always had (any item, the
    attributes a container writes), until the deploy without the context drops them.
    """
    role = iam.Role(
        scope,
        f"TaskRole{construct_suffix(kind)}",
        assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
        description=f"Vigil observer containers of the kind {kind}",
    )
    # The container reads its own record and writes claims, heartbeats and checkpoints: items
    # of its own kind's partition, and only the attributes it writes or compares.
    own = own_keys(kind)  # no wildcard in a kind's name: exactly its partition
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["dynamodb:GetItem"], resources=[registry.table_arn], conditions=own
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["dynamodb:UpdateItem"],
            resources=[registry.table_arn],
            conditions=both(own, only_attributes(CONTAINER_UPDATE_ATTRIBUTES)),
        )
    )
    if legacy is not None:
        role.add_to_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[legacy.table_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[legacy.table_arn],
                conditions=only_attributes(LEGACY_CONTAINER_UPDATE_ATTRIBUTES),
            )
        )
    if spec.pooled:
        grant_own_hosts(role, hosts, kind)
    grant_writes(role, writes)
    return role


def build_log_group(scope: Construct, retention: logs.RetentionDays) -> logs.LogGroup:
    """Every kind's containers log here, under a stream prefix of their kind."""
    return logs.LogGroup(
        scope, "TaskLogs", retention=retention, removal_policy=RemovalPolicy.DESTROY
    )


def build_task_definition(
    scope: Construct,
    kind: str,
    spec: ObserverKind,
    *,
    task_role: iam.Role,
    execution_role: iam.Role,
    log_group: logs.LogGroup,
    stop_timeout: Duration,
    registry: dynamodb.Table,
    hosts: dynamodb.Table,
    heartbeat_seconds: int,
    writes: Sequence[Declared],
) -> ecs.FargateTaskDefinition:
    """One kind's task: its size, its role, and one container running its handler."""
    definition = ecs.FargateTaskDefinition(
        scope,
        f"Task{construct_suffix(kind)}",
        cpu=spec.cpu,
        memory_limit_mib=spec.memory_mib,
        task_role=task_role,
        execution_role=execution_role,
        runtime_platform=ecs.RuntimePlatform(
            cpu_architecture=ecs.CpuArchitecture.X86_64,
            operating_system_family=ecs.OperatingSystemFamily.LINUX,
        ),
    )
    definition.add_container(
        CONTAINER_NAME,
        image=ecs.ContainerImage.from_asset(
            str(FUNCTIONS_DIR),
            file="observers/Dockerfile",
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=["**/__pycache__", "**/*.pyc"],
        ),
        # Container-level memory: ECS accepts task-level only, but moto's RunTask needs it.
        memory_limit_mib=spec.memory_mib,
        essential=True,
        stop_timeout=stop_timeout,
        logging=ecs.LogDrivers.aws_logs(stream_prefix=kind, log_group=log_group),
        environment={
            **stage_environment(scope),
            REGISTRY_TABLE_ENV: registry.table_name,
            # Its own kind only: a container (a host's child too) refuses a record of
            # another kind (unknown kind, exit BAD_CONFIGURATION) rather than run its code
            # under this kind's role.
            "VIGIL_OBSERVER_KINDS": json.dumps({kind: spec.handler}),
            "VIGIL_HEARTBEAT_SECONDS": str(heartbeat_seconds),
            HOSTS_TABLE_ENV: hosts.table_name,
            # Not PLACEMENTS_ENV: the container does not read it, and a new rollout budget
            # must not make a new revision (which would roll every observer of every kind).
            **({HOST_SLOTS_ENV: str(spec.slots_per_host)} if spec.pooled else {}),
            **writes_environment(scope, writes),
        },
    )
    return definition


def both(*conditions: dict[str, Any]) -> dict[str, Any]:
    """IAM conditions that must all hold (one statement's blocks, merged by operator)."""
    merged: dict[str, dict[str, Any]] = {}
    for condition in conditions:
        for operator, keys in condition.items():
            clash = set(merged.get(operator, {})) & set(keys)
            if clash:
                raise ValueError(f"two conditions on {operator} {sorted(clash)}")
            merged.setdefault(operator, {}).update(keys)
    return merged


def only_attributes(attributes: Sequence[str]) -> dict[str, Any]:
    """An IAM condition: the request names (sets, removes or compares) no top-level attribute
    but ``attributes`` (``dynamodb:Attributes``; the key must be among them), and names one.

    ``ReturnValues`` stays free: the container's claim and heartbeat read the whole record back
    (ALL_NEW), which AWS's attribute-level examples forbid to keep *reads* to the list. Reads are
    not narrowed here (GetItem reads the whole item too); writes are."""
    return {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(attributes)},
        "Null": {"dynamodb:Attributes": "false"},
    }
