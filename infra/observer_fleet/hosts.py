"""Pooled hosts: the hosts table (one item per host task) and what each of the fleet's principals
may do on it: a pooled kind's containers their own hosts' items, the API reads and rebalance
requests, the reconciler the rest. A fleet without a pooled kind has the table too (empty)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.removal import deletion_protected
from vigil.contract.hosts import (
    HOST_EXPIRES,
    HOSTS_KEY,
    LIVE_HOST_ATTRIBUTE,
    LIVE_HOSTS_INDEX,
    REBALANCE_PREFIX,
    host_id_pattern,
)


def build_hosts_table(scope: Construct, removal_policy: RemovalPolicy) -> dynamodb.Table:
    """One item per pooled host task. The passes read the live ones through a sparse,
    keys-only index (``LIVE_HOSTS_INDEX``: heartbeats never write it), so a week of dead
    hosts kept for inspection costs the healthy pass nothing."""
    table = dynamodb.Table(
        scope,
        "Hosts",
        partition_key=dynamodb.Attribute(name=HOSTS_KEY, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute=HOST_EXPIRES,  # dead hosts go a week after their end
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )
    table.add_global_secondary_index(
        index_name=LIVE_HOSTS_INDEX,
        partition_key=dynamodb.Attribute(
            name=LIVE_HOST_ATTRIBUTE, type=dynamodb.AttributeType.STRING
        ),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )
    return table


def grant_own_hosts(role: iam.Role, hosts: dynamodb.Table, kind: str) -> None:
    """A pooled kind's hosts read and heartbeat their own items: keys that begin with the kind
    (``host_id_pattern``), and only GetItem and UpdateItem, which always name their one key."""
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
            resources=[hosts.table_arn],
            conditions=own_keys(host_id_pattern(kind)),
        )
    )


def grant_api(function: lambda_.Function, hosts: dynamodb.Table, pooled: Sequence[str]) -> None:
    """``GET /hosts`` and the host of ``GET /observers/{name}`` read the table; a rebalance
    request is one marker item per pooled kind (the reconciler acts on it): the API may put
    those keys and no host's."""
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["dynamodb:GetItem", "dynamodb:Scan"],
            resources=[hosts.table_arn],
        )
    )
    markers = [f"{REBALANCE_PREFIX}{kind}" for kind in pooled]
    if markers:
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:PutItem"],
                resources=[hosts.table_arn],
                conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": markers}},
            )
        )


def grant_reconciler(function: lambda_.Function, hosts: dynamodb.Table) -> None:
    """The reconciler starts, heartbeats and retires hosts and reads the live ones."""
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=[
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:Scan",
                "dynamodb:Query",
                "dynamodb:DeleteItem",  # a rebalance request, once acted on
                "dynamodb:BatchGetItem",  # the live hosts the index lists
            ],
            resources=[hosts.table_arn, f"{hosts.table_arn}/index/{LIVE_HOSTS_INDEX}"],
        )
    )


def own_keys(pattern: str) -> dict[str, Any]:
    """An IAM condition: every partition key the request names matches ``pattern`` (StringLike),
    and it names at least one (``ForAllValues`` alone holds for none: a Scan)."""
    return {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [pattern]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
