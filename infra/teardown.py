"""What stays in the account after a stack is gone, read from its synthesized template.

CloudFormation decides by each resource's ``DeletionPolicy``::

    policy                 cdk destroy     rolled-back first deploy    update that removes/replaces
    Delete (none)          deleted         deleted                     deleted
    RetainExceptOnCreate   stays           deleted                     stays (UpdateReplacePolicy)
    Retain                 stays           stays                       stays

A resource that stays must not carry a name fixed by the template, or the next create of the
stack (the retry of a rolled-back first deploy, a deploy after ``cdk destroy``) meets it: "already
exists" (``tests/infra/test_teardown.py``). The deploying guide's list of what stays, and how to
remove it, is rendered here from the template (:func:`teardown_markdown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Ending(Enum):
    """How a stack's resources come to be deleted."""

    DESTROY = "cdk destroy"
    ROLLBACK = "a rolled-back first deploy"


STAYS: dict[str, frozenset[Ending]] = {
    "Delete": frozenset(),
    "RetainExceptOnCreate": frozenset({Ending.DESTROY}),
    "Retain": frozenset({Ending.DESTROY, Ending.ROLLBACK}),
}
"""Each ``DeletionPolicy`` Vigil uses -> the endings after which the resource stays."""


@dataclass(frozen=True)
class Removal:
    """What a resource of one type is, once its stack is gone, and the commands that remove it."""

    what: str
    commands: str


REMOVALS: dict[str, Removal] = {
    "AWS::DynamoDB::Table": Removal(
        "DynamoDB tables (job history, observer registry and hosts, the older registry keyed by "
        "name, idempotency answers, task records, the app's own)",
        "`aws dynamodb delete-table --table-name NAME`",
    ),
    "AWS::SQS::Queue": Removal(
        "SQS queues (dead letters, the tasks' work queues)",
        "`aws sqs delete-queue --queue-url URL`",
    ),
    "AWS::S3::Bucket": Removal(
        "S3 bucket of the tasks' results over 4 KiB (kept by reference)",
        "`aws s3 rb s3://NAME --force` (deletes its objects, then the bucket)",
    ),
    "AWS::IAM::Role": Removal(
        "API Gateway's CloudWatch Logs role",
        "first `aws apigateway get-account --query cloudwatchRoleArn`: while it names this role, "
        "keep it (every API of the account and region logs through it); otherwise "
        "`aws iam detach-role-policy --role-name NAME --policy-arn "
        "arn:aws:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs`, then "
        "`aws iam delete-role --role-name NAME`",
    ),
    "AWS::ApiGateway::Account": Removal(
        "API Gateway's account setting (which role logs)",
        "nothing to delete: a setting of the account and region, kept for every API there",
    ),
}
"""Every resource type Vigil leaves behind; another type that stays fails the guide's rendering
(and the suite) until it is added here with its commands."""


@dataclass(frozen=True)
class Kept:
    """One resource that outlives its stack, and after which endings."""

    logical_id: str
    type: str
    path: str
    """Its construct path (``aws:cdk:path``), or its logical id outside the CDK."""
    after: frozenset[Ending]


def staying(template: Mapping[str, Any]) -> list[Kept]:
    """Every resource of the template that stays after a ``cdk destroy`` or a rolled-back first
    deploy, in the template's order. An unknown ``DeletionPolicy`` is an error, not a guess."""
    kept = []
    for logical_id, resource in template["Resources"].items():
        policy = resource.get("DeletionPolicy", "Delete")
        if policy not in STAYS:
            raise ValueError(
                f"{logical_id}: DeletionPolicy {policy!r} is none of {sorted(STAYS)}: say in "
                "infra.teardown.STAYS what it leaves after each ending"
            )
        if STAYS[policy]:
            path = resource.get("Metadata", {}).get("aws:cdk:path", logical_id)
            kept.append(Kept(logical_id, resource["Type"], path, STAYS[policy]))
    return kept


def teardown_markdown(template: Mapping[str, Any]) -> str:
    """The deploying guide's table: per resource type that stays, how many, after which ending,
    the resources (by construct path) and how to remove them."""
    by_type: dict[str, list[Kept]] = {}
    for resource in staying(template):
        by_type.setdefault(resource.type, []).append(resource)
    unknown = sorted(by_type.keys() - REMOVALS.keys())
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} stays after its stack: add it to infra.teardown.REMOVALS "
            "with what it is and the commands that remove it"
        )
    rows = [
        f"| What stays | After `{Ending.DESTROY.value}` | After {Ending.ROLLBACK.value} | "
        "Resources | How to remove it |",
        "|---|---:|---:|---|---|",
    ]
    for kind, resources in by_type.items():
        removal = REMOVALS[kind]
        counts = [sum(ending in k.after for k in resources) for ending in Ending]
        paths = ", ".join(f"`{_short(k.path)}`" for k in resources)
        rows.append(
            f"| {removal.what} | {counts[0]} | {counts[1]} | {paths} | {removal.commands} |"
        )
    return "\n".join(rows)


def _short(path: str) -> str:
    """``Vigil/JobRuns/Table/Resource`` -> ``JobRuns/Table``: the construct, not its stack."""
    parts = path.split("/")
    parts = parts[1:] if len(parts) > 1 else parts
    return "/".join(parts[:-1] if len(parts) > 1 and parts[-1] == "Resource" else parts)
