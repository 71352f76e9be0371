"""The registry: one DynamoDB item per observer, keyed by kind and name, its stream (what wakes
the reconciler) and its sparse indexes; the API's idempotency table beside it; and the registry
keyed by name of deployments from before, left in the stack exactly as they made it (empty in a
new stack), which the reconciler migrates under context ``legacyRegistry``."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.errors import ConfigurationError
from infra.removal import deletion_protected
from vigil.contract.hosts import WAITING_ATTRIBUTE, WAITING_INDEX, WAITING_SORT
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    FLEET_INDEX,
    FLEET_INDEX_PROJECTION,
    REGISTRY_KEY,
    REGISTRY_PARTITION,
    REGISTRY_SORT,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    STOPPED_INDEX_PROJECTION,
)

LEGACY_REGISTRY_CONTEXT = "legacyRegistry"
"""``-c legacyRegistry=true``: the upgrade of a deployment from before the registry was keyed by
kind. Its registry keyed by name (construct ``Registry``, in every stack as that deployment made
it) gets its stream to the reconciler, which copies every observer into the registry keyed by
kind and follows the generations still writing the old table until a rollout hands them over, and
the task roles keep the grants their running containers write with; ``vigil observers migrate``
says when none is left, and the next deploy without the context drops the wiring and the grants
(the table stays in the stack, unwired: a deploy that forgot the context loses nothing)."""


LEGACY_FLEET_INDEX_PROJECTION = (
    "kind",
    "desired",
    "status",
    "generation",
    "task_arn",
    "restarts",
    "consecutive_failures",
    "heartbeat_at",
    "heartbeat_at_ms",
    "created_at",
    "updated_at",
    "version",
    "last_exit",
    "next_start_at",
    "next_start_at_ms",
    "failure_reason",
    "restart_generation",
    "task_version",
    "task_status",
    "started_at_ms",
    "start_attempts",
    "task_definition",
    "capacity",
)
"""The name-keyed registry's fleet index projection as those deployments declared it: frozen here
(an index's projection cannot change in place), whatever the registry keyed by kind projects."""


def legacy_registry_wanted(scope: Construct) -> bool:
    """Context ``legacyRegistry``: true or false (default false)."""
    value: Any = scope.node.try_get_context(LEGACY_REGISTRY_CONTEXT)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigurationError(
        "ObserverFleet", f"context {LEGACY_REGISTRY_CONTEXT}", f"{value!r}: true or false"
    )


def build_registry(
    scope: Construct, removal_policy: RemovalPolicy, *, pooled: bool
) -> dynamodb.Table:
    """The registry table, keyed by kind (partition) and name (sort); ``pooled``: the fleet has a
    pooled kind, so it gets the waiting index."""
    sort_key = dynamodb.Attribute(name=REGISTRY_SORT, type=dynamodb.AttributeType.STRING)
    return _registry(
        scope,
        "KindRegistry",
        REGISTRY_PARTITION,
        sort_key,
        FLEET_INDEX_PROJECTION,
        removal_policy,
        pooled=pooled,
    )


def build_legacy_registry(
    scope: Construct, removal_policy: RemovalPolicy, *, pooled: bool
) -> dynamodb.Table:
    """The registry keyed by name of deployments from before the registry was keyed by kind,
    exactly as they declared it (same construct, same properties: CloudFormation changes nothing
    on it; empty in a new stack): what the upgrade migrates (``LEGACY_REGISTRY_CONTEXT``)."""
    return _registry(
        scope,
        "Registry",
        REGISTRY_KEY,
        None,
        LEGACY_FLEET_INDEX_PROJECTION,
        removal_policy,
        pooled=pooled,
    )


def _registry(
    scope: Construct,
    construct_id: str,
    partition: str,
    sort_key: dynamodb.Attribute | None,
    fleet_projection: tuple[str, ...],
    removal_policy: RemovalPolicy,
    *,
    pooled: bool,
) -> dynamodb.Table:
    table = dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=partition, type=dynamodb.AttributeType.STRING),
        sort_key=sort_key,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )
    _add_indexes(table, fleet_projection, pooled=pooled)
    return table


def _add_indexes(table: dynamodb.Table, fleet_projection: tuple[str, ...], *, pooled: bool) -> None:
    # Two sparse indexes split the fleet by status (contract.observers.status_fields): every
    # observer but the STOPPED ones, so a resync reads the live fleet whatever number of
    # stopped records the account keeps; and the STOPPED ones, projecting their status alone
    # (it does not change while stopped), so heartbeats never write it.
    for index, attribute, projected in (
        (FLEET_INDEX, FLEET_ATTRIBUTE, fleet_projection),
        (STOPPED_INDEX, STOPPED_ATTRIBUTE, STOPPED_INDEX_PROJECTION),
    ):
        table.add_global_secondary_index(
            index_name=index,
            partition_key=dynamodb.Attribute(name=attribute, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="name", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(projected),
        )
    if not pooled:
        return
    # Sparse: only pooled observers waiting for a placement (new, backing off, or whose
    # placement is in flight) carry the partition attribute, so the healthy resync reads
    # the waiting few, not the fleet. Only fleets with a pooled kind have it.
    table.add_global_secondary_index(
        index_name=WAITING_INDEX,
        partition_key=dynamodb.Attribute(
            name=WAITING_ATTRIBUTE, type=dynamodb.AttributeType.STRING
        ),
        sort_key=dynamodb.Attribute(name=WAITING_SORT, type=dynamodb.AttributeType.NUMBER),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )


def index_arns(table: dynamodb.Table, *indexes: str) -> list[str]:
    """The ARNs of ``indexes`` of ``table``, for a grant that may Query them and no other."""
    return [f"{table.table_arn}/index/{index}" for index in indexes]


def build_idempotency_table(scope: Construct, removal_policy: RemovalPolicy) -> dynamodb.Table:
    """The API's idempotency records (Powertools): a retried create or stop answers as the first."""
    return dynamodb.Table(
        scope,
        "Idempotency",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute="expiration",
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )
