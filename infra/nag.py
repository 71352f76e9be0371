"""cdk-nag (AwsSolutions) findings Vigil accepts, each with the reason a reviewer would want.

cdk-nag runs as a validation plugin (``app.py``): any finding not acknowledged here stops the synth,
``python app.py`` and ``cdk synth`` alike, so a new one cannot slip in. Every acknowledgment names
its rule (with the exact resource or policy for granular rules) and applies to the constructs the
predicate picks, never to the whole stack. docs/guides/deploying.md lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

PACK = "AwsSolutions::"
_PART = r"(<[^>]+>|[^:<]+)"
ARN = f"arn:{_PART}:{{service}}:{_PART}:{_PART}:"
"""The start of an ARN as cdk-nag renders it (partition, region and account literal or tokens)."""
FUNCTION_ROLE = r"\w*(Function|Reconciler)Role(DefaultPolicy)?[0-9A-F]{8}"
"""A function's role: its ``DefaultPolicy`` (the stack's own functions) or the role itself, whose
policy is inline (``infra.roles.InlineRole``: the jobs' and tasks' functions)."""
SHARD_FUNCTION_ROLE = r"\w*FunctionRole[0-9A-F]{8}"
"""A job's or task's function role (its policy inline)."""
RECONCILER_ROLE = r"\w*ReconcilerRoleDefaultPolicy[0-9A-F]{8}"
ONE_TIME_SCHEDULES = ARN.format(service="scheduler") + r"schedule/[A-Za-z0-9_.-]+/_[a-z0-9-]+_\*"
CATALOG_PARTS = ARN.format(service="ssm") + r"parameter/vigil/[A-Za-z0-9-]+/(jobs|tasks|kinds)/\*"
"""``/vigil/<stack>/<jobs|tasks|kinds>/*``: the parts of one of the stack's catalogs
(``vigil.catalog``)."""
"""``<group>/_<task>_*`` (``vigil.contract.tasks.schedule_grants``): a task's own schedule names."""


@dataclass(frozen=True)
class Wildcard:
    """One IAM grant Vigil makes on a wildcard: who (a policy's logical id), what, on what, why.

    An action of a statement is accepted on a wildcard resource only by an entry whose
    ``policy`` pattern matches the statement's policy, whose ``actions`` hold the action and whose
    ``resource`` pattern matches that resource: merged statements (``minimizePolicies``) are taken
    apart, so a new action cannot hide beside an accepted one.
    """

    policy: str
    """Regular expression the policy's logical id must match in full."""
    actions: frozenset[str]
    resource: str
    """Regular expression the resource, rendered as cdk-nag renders it, must match in full."""
    reason: str
    shown: str
    """The resource as the deploying guide shows it."""

    def accepts(self, grant: Grant) -> bool:
        return (
            grant.action in self.actions
            and re.fullmatch(self.policy, grant.policy) is not None
            and re.fullmatch(self.resource, grant.resource) is not None
        )


@dataclass(frozen=True)
class Grant:
    """One action on one resource, allowed by one policy (``policy``: its logical id)."""

    policy: str
    action: str
    resource: str


WILDCARDS: tuple[Wildcard, ...] = (
    Wildcard(
        FUNCTION_ROLE,
        frozenset({"xray:PutTraceSegments", "xray:PutTelemetryRecords"}),
        r"\*",
        "X-Ray has no resource-level permissions; every function traces (active tracing)",
        "*",
    ),
    Wildcard(
        RECONCILER_ROLE,
        frozenset({"dynamodb:ListStreams"}),
        r"\*",
        "ListStreams has no resource-level permissions; the registry stream's event source needs it",
        "*",
    ),
    Wildcard(
        RECONCILER_ROLE,
        frozenset({"ecs:ListTasks"}),
        r"\*",
        "ListTasks (a read) has no task resource; narrowed to the fleet's cluster by an "
        "ecs:cluster condition",
        "* (condition ecs:cluster)",
    ),
    Wildcard(
        r"\w*ExecutionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"ecr:GetAuthorizationToken"}),
        r"\*",
        "ECR's registry token has no resource-level permissions; pulling the observer image needs it",
        "*",
    ),
    Wildcard(
        r"\w*ReconcilerKindGrants\d[0-9A-F]{8}",
        frozenset({"ecs:RunTask"}),
        ARN.format(service="ecs") + r"task-definition/[A-Za-z0-9_-]+:\*",
        "Any revision of the fleet's own task definition families (an observer keeps the revision "
        "its generation started on until a rollout hands it over), on its own cluster",
        "task-definition/FAMILY:* (condition ecs:cluster)",
    ),
    Wildcard(
        RECONCILER_ROLE,
        frozenset({"ecs:StopTask", "ecs:DescribeTasks"}),
        ARN.format(service="ecs") + r"task/<\w+>/\*",
        "Task ids are known only once RunTask answers: tasks of the fleet's own cluster only",
        "task/CLUSTER/* (condition ecs:cluster)",
    ),
    Wildcard(
        RECONCILER_ROLE,
        frozenset({"ecs:TagResource"}),
        ARN.format(service="ecs") + r"task/<\w+>/\*",
        "Tags on tasks of the fleet's own cluster, only as RunTask creates them",
        "task/CLUSTER/* (condition ecs:CreateAction RunTask)",
    ),
    Wildcard(
        r"\w+",
        frozenset({"scheduler:CreateSchedule"}),
        ONE_TIME_SCHEDULES,
        "A task's one-time schedule is named by its task and id at enqueue time: schedules named "
        "for these tasks in the stack's own tasks schedule group (grant_enqueue gives it to an "
        "application's role)",
        "schedule/STACK-tasks/_TASK_*",
    ),
    Wildcard(
        SHARD_FUNCTION_ROLE,
        frozenset({"logs:PutLogEvents"}),
        ARN.format(service="logs")
        + r"log-group:<\w+>:log-stream:\?\?\?\?/\?\?/\?\?/[A-Za-z0-9_-]+\[\*",
        "A job's or task's function logs into its shard's log group, where Lambda names each "
        "stream by its date and function: its role may put events into its own function's "
        "streams only",
        "log-group:SHARD:log-stream:????/??/??/FUNCTION[*",
    ),
    Wildcard(
        r"\w*((JobsControl|TasksApi|Api)Function|Reconciler)RoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"ssm:GetParameter", "ssm:GetParameters"}),
        CATALOG_PARTS,
        "The parts of the stack's catalog of jobs (tasks, the kinds: their handlers, options and "
        "task definitions), read as one path: their number grows with the jobs (tasks, kinds) "
        "declared",
        "parameter/vigil/STACK/jobs/* (tasks/*, kinds/*)",
    ),
    Wildcard(
        r"\w*JobsControlFunctionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"lambda:InvokeFunction"}),
        ARN.format(service="lambda") + r"function:[A-Za-z0-9-]+_job_\*",
        "Run now and backfill invoke any of the stack's jobs: their functions are named "
        "STACK_job_NAME, a prefix no other stack's names have (listing them would pass IAM's "
        "10,240 characters near a hundred jobs)",
        "function:STACK_job_*",
    ),
    Wildcard(
        r"\w*TasksApiFunctionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"scheduler:CreateSchedule", "scheduler:DeleteSchedule"}),
        ARN.format(service="scheduler") + r"schedule/[A-Za-z0-9_.-]+/\*",
        "The tasks API enqueues and cancels any of the stack's tasks: one-time schedules in the "
        "stack's own group of them",
        "schedule/STACK-tasks/*",
    ),
    Wildcard(
        r"\w*TasksApiFunctionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"iam:PassRole"}),
        f"arn:{_PART}:iam::{_PART}:" + r"role/vigil/[A-Za-z0-9-]+/[a-z0-9-]+/task-schedules/\*",
        "A task's one-time schedule sends as that task's scheduler role: the roles under the "
        "stack's path of them, to Scheduler only (condition iam:PassedToService)",
        "role/vigil/STACK/REGION/task-schedules/*",
    ),
)
"""Every wildcard IAM grant Vigil accepts (cdk-nag IAM5, and ``tests/infra/test_iam_wildcards``);
any other fails the synth. The deploying guide's list is rendered from it
(:func:`wildcards_markdown`)."""


def wildcard_grants(policy: str, document: Mapping[str, Any]) -> list[Grant]:
    """Each action x resource of the document's Allow statements where either holds a ``*``."""
    grants = []
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        for action in _listed(statement.get("Action", [])):
            for resource in map(_render, _listed(statement.get("Resource", []))):
                if "*" in resource or "*" in action:
                    grants.append(Grant(policy, action, resource))
    return grants


def unexplained(grants: Iterable[Grant]) -> list[Grant]:
    """The grants no :data:`WILDCARDS` entry accepts."""
    return [grant for grant in grants if accepting(grant) is None]


def accepting(grant: Grant) -> Wildcard | None:
    return next((wildcard for wildcard in WILDCARDS if wildcard.accepts(grant)), None)


def wildcards_markdown() -> str:
    """The deploying guide's list of accepted wildcards, one row per :data:`WILDCARDS` entry."""
    rows = [
        "| Policy (logical id) | Actions | Resource | Why |",
        "|---|---|---|---|",
    ]
    for wildcard in WILDCARDS:
        actions = ", ".join(f"`{action}`" for action in sorted(wildcard.actions))
        policy = wildcard.policy.replace("|", "\\|")
        rows.append(f"| `{policy}` | {actions} | `{wildcard.shown}` | {wildcard.reason} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class Accepted:
    rule: str
    reason: str
    picks: Callable[[IConstruct, str], bool]
    """Given a construct and its path (read once: each read is a call into the CDK's process,
    and a stack of two hundred jobs has thousands of constructs)."""


def _path_has(*parts: str) -> Callable[[IConstruct, str], bool]:
    return lambda c, path: all(part in path for part in parts)


def _is(kind: type) -> Callable[[IConstruct, str], bool]:
    return lambda c, path: isinstance(c, kind)


def _policy_of(*names: str) -> Callable[[IConstruct, str], bool]:
    return lambda c, path: isinstance(c, iam.CfnPolicy) and any(n in path for n in names)


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
    """Acknowledge the accepted findings of ``stack`` and its nested stacks (the shards)."""
    for construct in stack.node.find_all():
        if not isinstance(construct, CfnResource):
            continue  # findings are on resources (L1s) only: the rest need no reading
        path = construct.node.path
        for accepted in ACCEPTED:
            if accepted.picks(construct, path):
                _acknowledge(construct, accepted.rule, accepted.reason)
        if isinstance(construct, (iam.CfnPolicy, iam.CfnManagedPolicy)):
            owner = Stack.of(construct)
            document = owner.resolve(construct.policy_document)
            for rule, reason in _accepted_wildcards(owner, construct, document):
                _acknowledge(construct, rule, reason)
        elif isinstance(construct, iam.CfnRole):
            owner = Stack.of(construct)
            policies = owner.resolve(construct.policies) or []
            statements = [
                statement
                for policy in policies
                for statement in (
                    policy.get("PolicyDocument") or policy.get("policyDocument") or {}
                ).get("Statement", [])
            ]
            for rule, reason in _accepted_wildcards(owner, construct, {"Statement": statements}):
                _acknowledge(construct, rule, reason)


def _acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=PACK + rule, reason=reason))


def _accepted_wildcards(
    stack: Stack,
    policy: iam.CfnPolicy | iam.CfnManagedPolicy | iam.CfnRole,
    document: Mapping[str, Any],
) -> list[tuple[str, str]]:
    """IAM5 findings of the policy (or a role's inline policies), named as cdk-nag names them,
    that every grant behind them is accepted for: a finding names only a resource (or action),
    so one unaccepted grant on the same ``*`` leaves it unacknowledged."""
    grants = wildcard_grants(str(stack.resolve(policy.logical_id)), document)
    findings: dict[str, list[Grant]] = {}
    for grant in grants:
        if "*" in grant.resource:
            findings.setdefault(f"AwsSolutions-IAM5[Resource::{grant.resource}]", []).append(grant)
        if "*" in grant.action:
            findings.setdefault(f"AwsSolutions-IAM5[Action::{grant.action}]", []).append(grant)
    accepted = []
    for finding, behind in findings.items():
        reasons = [accepting(grant) for grant in behind]
        if all(reasons):
            accepted.append((finding, "; ".join(sorted({r.reason for r in reasons if r}))))
    return accepted


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


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
