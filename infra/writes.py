"""``writes=[...]``: the tables, buckets, queues and buses a job, task or observer kind writes
through ``run.fenced`` (:mod:`vigil.effects`), granted exactly and named in its environment.

Each declared resource gets the few actions its fenced writer makes, on that resource only (no
wildcard actions; an S3 bucket's objects are ``<bucket arn>/*``), and its alias (the construct id
of what was declared) and physical name go into ``VIGIL_WRITES``: the runtime refuses any other
resource before a request, with an error naming what was granted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.errors import ConfigurationError
from vigil.contract.effects import WRITES_ENV, WriteKind

Fail = Callable[[str, str], ConfigurationError]


@dataclass(frozen=True)
class Declared:
    kind: WriteKind
    alias: str
    resource: Any


def _kind_of(resource: Any) -> WriteKind | None:
    """Duck-typed on what each kind's CDK interface has (jsii interfaces defeat isinstance)."""
    if hasattr(resource, "table_arn") and hasattr(resource, "table_name"):
        return WriteKind.TABLES
    if hasattr(resource, "bucket_name") and hasattr(resource, "arn_for_objects"):
        return WriteKind.BUCKETS
    if hasattr(resource, "queue_url") and hasattr(resource, "grant_send_messages"):
        return WriteKind.QUEUES
    if hasattr(resource, "event_bus_name") and hasattr(resource, "grant_put_events_to"):
        return WriteKind.BUSES
    return None


def check_writes(fail: Fail, writes: Sequence[Any]) -> list[Declared]:
    """Each declared resource's kind and alias; anything else fails the synth."""
    if isinstance(writes, (str, bytes)) or not isinstance(writes, Sequence):
        raise fail("writes", "must be a list of tables, buckets, queues and event buses")
    declared: list[Declared] = []
    for position, resource in enumerate(writes):
        kind = _kind_of(resource)
        if kind is None or not isinstance(resource, Construct):
            raise fail(
                "writes",
                f"item {position} ({type(resource).__name__}) is not a DynamoDB table, S3 "
                "bucket, SQS queue or EventBridge bus construct",
            )
        alias = resource.node.id
        if any(d.alias == alias and d.kind is kind for d in declared):
            raise fail("writes", f"{kind.value} {alias!r} is declared twice")
        declared.append(Declared(kind, alias, resource))
    return declared


def grant_writes(
    grantee: iam.IGrantable,
    declared: Sequence[Declared],
    *,
    claims: Any,
    claim_conditions: Mapping[str, Any] | None = None,
) -> None:
    """Exactly the actions each fenced writer makes, on each declared resource only (and, for a
    table or bucket under a customer-managed key, that key's encrypt and decrypt: without it
    the first put is AccessDenied; a queue's grant includes its key already); and, when anything
    is declared, the read of the run's own claim ``run.fenced.strict`` makes (a ``GetItem``, or a
    ``ConditionCheck`` inside the write's transaction) on ``claims``, the table that holds it,
    under ``claim_conditions`` (the run's own partition)."""
    if declared:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:ConditionCheckItem"],
                resources=[claims.table_arn],
                conditions=dict(claim_conditions) if claim_conditions else None,
            )
        )
    for one in declared:
        resource = one.resource
        key = getattr(resource, "encryption_key", None)
        if key is not None and one.kind in (WriteKind.TABLES, WriteKind.BUCKETS):
            key.grant_encrypt_decrypt(grantee)
        if one.kind is WriteKind.TABLES:
            actions = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(actions=actions, resources=[resource.table_arn])
            )
        elif one.kind is WriteKind.BUCKETS:
            # HeadObject is s3:GetObject; without s3:ListBucket a missing key answers 403, not 404.
            # A put of the bytes already there is a one-part upload (s3:PutObject covers its
            # create, part and completion), aborted when its completion loses a race.
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                    resources=[resource.arn_for_objects("*")],
                )
            )
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[resource.bucket_arn])
            )
        elif one.kind is WriteKind.QUEUES:
            resource.grant_send_messages(grantee)
        else:
            resource.grant_put_events_to(grantee)


def writes_environment(scope: Construct, declared: Sequence[Declared]) -> dict[str, str]:
    """``{VIGIL_WRITES: json}`` (nothing when nothing is declared: every resource is refused)."""
    if not declared:
        return {}
    physical = {
        WriteKind.TABLES: lambda r: r.table_name,
        WriteKind.BUCKETS: lambda r: r.bucket_name,
        WriteKind.QUEUES: lambda r: r.queue_url,
        WriteKind.BUSES: lambda r: r.event_bus_name,
    }
    granted: dict[str, dict[str, str]] = {}
    for one in declared:
        granted.setdefault(one.kind.value, {})[one.alias] = physical[one.kind](one.resource)
    return {WRITES_ENV: Stack.of(scope).to_json_string(granted)}
