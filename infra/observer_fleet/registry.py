"""The registry: one DynamoDB item per observer, its stream (what wakes the reconciler) and its
sparse indexes; and the API's idempotency table beside it."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.removal import deletion_protected
from vigil.contract.hosts import WAITING_ATTRIBUTE, WAITING_INDEX, WAITING_SORT
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    FLEET_INDEX,
    FLEET_INDEX_PROJECTION,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    STOPPED_INDEX_PROJECTION,
)


def build_registry(
    scope: Construct, removal_policy: RemovalPolicy, *, pooled: bool
) -> dynamodb.Table:
    """The registry table; ``pooled``: the fleet has a pooled kind, so it gets the waiting index."""
    table = dynamodb.Table(
        scope,
        "Registry",
        partition_key=dynamodb.Attribute(name="name", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )
    # Two sparse indexes split the fleet by status (contract.observers.status_fields): every
    # observer but the STOPPED ones, so a resync reads the live fleet whatever number of
    # stopped records the account keeps; and the STOPPED ones, projecting their status alone
    # (it does not change while stopped), so heartbeats never write it.
    for index, attribute, projected in (
        (FLEET_INDEX, FLEET_ATTRIBUTE, FLEET_INDEX_PROJECTION),
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
        return table
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
    return table


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
