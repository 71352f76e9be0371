"""cdk-nag (AwsSolutions) findings Vigil accepts, each with the reason a reviewer would want.

cdk-nag runs as a validation plugin (``app.py``): any finding not acknowledged here stops the synth,
``python app.py`` and ``cdk synth`` alike, so a new one cannot slip in. Every acknowledgment names
its rule (with the exact resource or policy for granular rules) and applies to the constructs the
predicate picks, never to the whole stack. The README lists the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

PACK = "AwsSolutions::"
ONE_TIME_SCHEDULES = (
    "A task's one-time schedule is named by its task and id at enqueue time: the grant is the "
    "schedules named for these tasks in the stack's own tasks schedule group, none outside it"
)
WILDCARDS: dict[frozenset[str], str] = {
    frozenset({"xray:PutTraceSegments", "xray:PutTelemetryRecords"}): (
        "X-Ray has no resource-level permissions; active tracing needs Resource *"
    ),
    frozenset({"dynamodb:ListStreams"}): (
        "ListStreams has no resource-level permissions; the stream event source needs it"
    ),
    frozenset({"ecs:ListTasks"}): (
        "ListTasks (a read) has no task resource; narrowed by an ecs:cluster condition"
    ),
    frozenset({"ecr:GetAuthorizationToken"}): (
        "ECR's registry token has no resource-level permissions; image pulls need it"
    ),
    frozenset({"lambda:InvokeFunction"}): (
        "The scheduler's role invokes only its job's function (and that function's versions)"
    ),
    frozenset({"ecs:RunTask"}): (
        "RunTask on any revision of the fleet's own task definition families, on its own cluster"
    ),
    frozenset({"ecs:StopTask", "ecs:DescribeTasks"}): (
        "StopTask and DescribeTasks on tasks of the fleet's own cluster only"
    ),
    frozenset({"ecs:TagResource"}): (
        "Tags on tasks of the fleet's own cluster, only as RunTask creates them"
    ),
    frozenset({"scheduler:CreateSchedule", "scheduler:DeleteSchedule"}): ONE_TIME_SCHEDULES,
    frozenset({"scheduler:CreateSchedule"}): ONE_TIME_SCHEDULES,
}
"""IAM5 (wildcard) findings accepted by the statement's actions: any other wildcard fails synth."""


@dataclass(frozen=True)
class Accepted:
    rule: str
    reason: str
    picks: Callable[[IConstruct], bool]


def _path_has(*parts: str) -> Callable[[IConstruct], bool]:
    return lambda c: all(part in c.node.path for part in parts)


def _is(kind: type) -> Callable[[IConstruct], bool]:
    return lambda c: isinstance(c, kind)


def _policy_of(*names: str) -> Callable[[IConstruct], bool]:
    return lambda c: isinstance(c, iam.CfnPolicy) and any(n in c.node.path for n in names)


ACCEPTED: tuple[Accepted, ...] = (
    Accepted(
        "AwsSolutions-SQS3",
        "Every Vigil queue without a dead-letter queue is itself one (a Lambda on-failure "
        "destination, a scheduler or EventBridge target DLQ, a stream on-failure target, a "
        "task's dead letters); the tasks' work queues, the only sources, have their own",
        _is(sqs.CfnQueue),
    ),
    Accepted(
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AmazonAPIGatewayPushToCloudWatchLogs]",
        "API Gateway's account-level logging role, with the policy AWS documents for it; "
        "access logs need it",
        _path_has("/Api/CloudWatchRole"),
    ),
    Accepted(
        "AwsSolutions-L1",
        "python3.12 is the runtime the pinned Powertools layer is published for and the suite "
        "tests; moving on is a deliberate change of pins",
        _is(lambda_.CfnFunction),
    ),
    Accepted(
        "AwsSolutions-ECS2",
        "The environment holds names only (table, kinds, heartbeat interval), no secrets; an "
        "observer's own configuration lives in the registry",
        _is(ecs.CfnTaskDefinition),
    ),
    Accepted(
        "AwsSolutions-VPC7",
        "The default VPC only carries observers' outbound connections (no ingress rule, no NAT); "
        "use an existing VPC with flow logs via ObserverFleet(vpc=...) where they are required",
        _path_has("Observers/Vpc"),
    ),
    Accepted(
        "AwsSolutions-APIG2",
        "A proxy to one function, which validates every request (Powertools' resolver with "
        "pydantic models) and answers 400/422 in one place",
        _is(apigateway.CfnRestApi),
    ),
    Accepted(
        "AwsSolutions-APIG3",
        "IAM (SigV4) authorization on every method and stage throttling; a WAF web ACL adds at "
        "least $5 a month and has nothing to inspect for signed operator calls",
        _is(apigateway.CfnStage),
    ),
    Accepted(
        "AwsSolutions-APIG6",
        "JSON access logs record every request with the caller; execution logs would add an "
        "API Gateway-owned log group the stack cannot give a retention",
        _is(apigateway.CfnStage),
    ),
    Accepted(
        "AwsSolutions-COG4",
        "Operators and tools call with IAM (SigV4) authorization, not Cognito user pools",
        _is(apigateway.CfnMethod),
    ),
)


def suppress_accepted_findings(stack: Stack) -> None:
    for construct in stack.node.find_all():
        for accepted in ACCEPTED:
            if accepted.picks(construct):
                _acknowledge(construct, accepted.rule, accepted.reason)
        if isinstance(construct, iam.CfnPolicy):
            for rule, reason in _accepted_wildcards(stack, construct):
                _acknowledge(construct, rule, reason)


def _acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=PACK + rule, reason=reason))


def _accepted_wildcards(stack: Stack, policy: iam.CfnPolicy) -> list[tuple[str, str]]:
    """IAM5 findings of the policy's wildcard resources, named as cdk-nag names them."""
    accepted = []
    for statement in stack.resolve(policy.policy_document).get("Statement", []):
        actions = statement.get("Action", [])
        reason = WILDCARDS.get(frozenset([actions] if isinstance(actions, str) else actions))
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            rendered = _render(resource)
            if reason and "*" in rendered:
                accepted.append((f"AwsSolutions-IAM5[Resource::{rendered}]", reason))
    return accepted


def _render(value: object) -> str:
    """A resolved CloudFormation value as cdk-nag writes it: ``<LogicalId>``, ``<Id.Attr>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{'.'.join(value['Fn::GetAtt'])}>"
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(_render(part) for part in parts)
    return str(value)
