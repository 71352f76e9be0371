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

from aws_cdk import Acknowledgment, CfnResource, Names, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from infra.errors import ConfigurationError

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
CONSOLE_ROLE = r"\w*Console(View|Operate)FunctionRoleDefaultPolicy[0-9A-F]{8}"
"""The console's two functions (``infra.console``)."""
ONE_TIME_SCHEDULES = ARN.format(service="scheduler") + r"schedule/[A-Za-z0-9_.-]+/_[a-z0-9-]+_\*"
"""``<group>/_<task>_*`` (``vigil.contract.tasks.schedule_grants``): a task's own schedule names."""
CATALOG_PARTS = ARN.format(service="ssm") + r"parameter/vigil/[A-Za-z0-9-]+/(jobs|tasks|kinds)/\*"
"""``/vigil/<stack>/<jobs|tasks|kinds>/*``: the parts of one of the stack's catalogs
(``vigil.catalog``)."""


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
    """One action on one resource, allowed by one policy (``policy``: its logical id).

    A statement's ``NotAction`` is one grant whose action is ``NotAction[a,b]`` (every action but
    these), its ``NotResource`` one whose resource is ``NotResource[r,s]``: no entry of
    :data:`WILDCARDS` names such an action or matches such a resource, so either is unexplained.
    """

    policy: str
    action: str
    resource: str

    @property
    def broad(self) -> bool:
        """Allowed on more than it names: a ``*`` or ``?`` pattern, ``NotAction`` or ``NotResource``."""
        return any(_is_pattern(part) for part in (self.action, self.resource))


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
        r"\w*((JobsControl|TasksApi|Api|ConsoleView|ConsoleOperate)Function|Reconciler)"
        r"RoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"ssm:GetParameter", "ssm:GetParameters"}),
        CATALOG_PARTS,
        "The parts of the stack's catalog of jobs (tasks, the kinds: their handlers, options and "
        "task definitions), read as one path: their number grows with the jobs (tasks, kinds) "
        "declared",
        "parameter/vigil/STACK/jobs/* (tasks/*, kinds/*)",
    ),
    Wildcard(
        r"\w*(JobsControl|ConsoleOperate)FunctionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"lambda:InvokeFunction"}),
        ARN.format(service="lambda") + r"function:[A-Za-z0-9-]+_job_\*",
        "Run now and backfill invoke any of the stack's jobs: their functions are named "
        "STACK_job_NAME, a prefix no other stack's names have (listing them would pass IAM's "
        "10,240 characters near a hundred jobs)",
        "function:STACK_job_*",
    ),
    Wildcard(
        FUNCTION_ROLE,
        frozenset({"s3:PutObject"}),
        # In its shard the bucket's ARN is the parameter that carries it: <referenceto...Arn>
        r"<(referenceto)?\w*TaskResultsBucket[0-9A-F]{8}\.?Arn>/[a-z0-9-]+/\*",
        "A task's result too big for its record is stored under the task's own prefix of the "
        "stack's results bucket; the object's name holds the id and run token, known only then",
        "BUCKET/TASK/*",
    ),
    Wildcard(
        r"\w*TasksApiFunctionRoleDefaultPolicy[0-9A-F]{8}",
        frozenset({"s3:GetObject"}),
        r"<\w*TaskResultsBucket[0-9A-F]{8}\.Arn>/\*",
        "GET /tasks/{task}/{id} reads back a result stored out of its record: the stack's results "
        "bucket holds nothing else, and one statement holds at any number of tasks",
        "BUCKET/*",
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
    Wildcard(
        CONSOLE_ROLE,
        frozenset(
            {
                "sqs:GetQueueAttributes",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:SendMessage",
            }
        ),
        ARN.format(service="sqs") + r"\*",
        "The console reads the depth of every queue of the stack (jobs' failed runs, tasks' "
        "queues and dead letters, in the shards' nested stacks) and its operate function "
        "redrives them: the stack's own queues only, by the tag every resource of the stack "
        "carries (condition aws:ResourceTag/vigil:stack), at any number of jobs and tasks",
        "* (condition aws:ResourceTag/vigil:stack = STACK)",
    ),
    Wildcard(
        CONSOLE_ROLE,
        frozenset({"cloudwatch:DescribeAlarms"}),
        ARN.format(service="cloudwatch") + r"alarm:\*",
        "What is wrong now lists the stack's alarms in ALARM (a read; names by the stack's prefix)",
        "alarm:*",
    ),
    Wildcard(
        CONSOLE_ROLE,
        frozenset({"s3:GetObject"}),
        r"<\w*TaskResultsBucket[0-9A-F]{8}\.Arn>/\*",
        "One task's record, its result stored out of the record included, as GET /tasks reads it",
        "BUCKET/*",
    ),
    Wildcard(
        CONSOLE_ROLE,
        frozenset({"scheduler:DeleteSchedule"}),
        ARN.format(service="scheduler") + r"schedule/[A-Za-z0-9_.-]+/\*",
        "The cancel button deletes a task's pending one-time schedule, in the stack's own group",
        "schedule/STACK-tasks/*",
    ),
)
"""Every wildcard IAM grant Vigil accepts (cdk-nag IAM5, and ``tests/infra/test_iam_wildcards``);
any other fails the synth. The deploying guide's list is rendered from it
(:func:`wildcards_markdown`)."""


NOT_ACTION = "NotAction"
NOT_RESOURCE = "NotResource"


def wildcard_grants(policy: str, document: Mapping[str, Any]) -> list[Grant]:
    """Each action x resource of the document's Allow statements that is :attr:`Grant.broad`.

    ``*`` and ``?`` are IAM's wildcards in actions and resources alike; a statement's
    ``NotAction`` allows every other action and its ``NotResource`` every other resource, so each
    is a wildcard too (cdk-nag, checkov and cfn-lint read neither).
    """
    grants = []
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        for action in _actions(statement):
            for resource in _resources(statement):
                grant = Grant(policy, action, resource)
                if grant.broad:
                    grants.append(grant)
    return grants


def _actions(statement: Mapping[str, Any]) -> list[str]:
    if NOT_ACTION in statement:
        return [_negated(NOT_ACTION, map(str, _listed(statement[NOT_ACTION])))]
    return [str(action) for action in _listed(statement.get("Action", []))]


def _resources(statement: Mapping[str, Any]) -> list[str]:
    if NOT_RESOURCE in statement:
        return [_negated(NOT_RESOURCE, map(_render, _listed(statement[NOT_RESOURCE])))]
    return [_render(resource) for resource in _listed(statement.get("Resource", []))]


def _negated(element: str, values: Iterable[str]) -> str:
    return f"{element}[{','.join(sorted(values))}]"


def _is_pattern(text: str) -> bool:
    return "*" in text or "?" in text or text.startswith((f"{NOT_ACTION}[", f"{NOT_RESOURCE}["))


def policy_grants(stack: Stack) -> dict[str, list[Grant]]:
    """Construct path -> the broad grants of each IAM policy the stack declares: policies,
    managed policies and roles' inline policies, each grant under its resource's logical id."""
    found: dict[str, list[Grant]] = {}
    for construct in stack.node.find_all():
        if isinstance(construct, iam.CfnPolicy | iam.CfnManagedPolicy):
            documents = [construct.policy_document]
        elif isinstance(construct, iam.CfnRole):
            documents = [p["policyDocument"] for p in stack.resolve(construct.policies) or []]
        else:
            continue
        logical_id = str(stack.resolve(construct.logical_id))
        grants = [
            grant
            for document in documents
            for grant in wildcard_grants(logical_id, stack.resolve(document))
        ]
        if grants:
            found[construct.node.path] = grants
    return found


def refuse_unaccepted_grants(stack: Stack) -> None:
    """Fail the synth on any broad grant no :data:`WILDCARDS` entry accepts, naming the construct.

    cdk-nag's IAM5 reads a statement's ``Action`` and ``Resource`` for ``*`` only: a ``NotResource``
    (``iam:CreateUser`` on every user but one), a ``NotAction`` or a ``?`` pattern passed it, and
    checkov and cfn-lint too. This check reads them all (:func:`wildcard_grants`).
    """
    refused = {
        path: unaccepted
        for path, grants in policy_grants(stack).items()
        if (unaccepted := unexplained(grants))
    }
    if not refused:
        return
    lines = [
        f"{path}: allows {grant.action} on {grant.resource}"
        for path, grants in refused.items()
        for grant in grants
    ]
    raise ConfigurationError(
        ", ".join(refused),
        "IAM policy",
        "a broad grant (a * or ? pattern, NotAction or NotResource) that no entry of "
        "infra.nag.WILDCARDS accepts, with its reason: " + "; ".join(lines),
    )


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
        "AwsSolutions-S1",
        "The results bucket is written by the tasks' functions and read by the tasks API, each "
        "request already in the task's record and logs; server access logs would need a second "
        "bucket per stack (use CloudTrail data events where every read must be audited)",
        _path_has("/TaskResults/Bucket"),
    ),
    Accepted(
        "AwsSolutions-COG4",
        "Operators and tools call with IAM (SigV4) authorization, not Cognito user pools",
        _is(apigateway.CfnMethod),
    ),
)


def suppress_accepted_findings(stack: Stack) -> None:
    """Acknowledge the accepted findings of ``stack`` and its nested stacks (the shards)."""
    parameters = _nested_parameters(stack)
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
                _acknowledge(construct, rule, reason, parameters if owner is not stack else None)
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
                _acknowledge(construct, rule, reason, parameters if owner is not stack else None)


_ATTRIBUTE = re.compile(r"<(\w+)\.(\w+)>")


def _nested_parameters(stack: Stack) -> dict[str, str]:
    """The logical id of each of ``stack``'s own resources -> its unique id, from which the CDK
    names the parameter that carries a reference to it into a nested stack (``referenceto`` + the
    unique id + the attribute). The synth makes those parameters only after these findings are
    acknowledged, so a shard's grant on the stack's resource (the task results bucket) resolves
    here as ``<Bucket.Arn>`` and reaches cdk-nag as ``<referenceto...BucketArn>``."""
    return {
        str(stack.resolve(child.logical_id)): Names.unique_id(child)
        for child in stack.node.find_all()
        if isinstance(child, CfnResource) and Stack.of(child) is stack
    }


def _acknowledge(
    construct: IConstruct, rule: str, reason: str, parameters: Mapping[str, str] | None = None
) -> None:
    """``rule`` as cdk-nag names it; in a nested stack, also under the name of the parameter that
    carries a reference to the parent stack's resource (:func:`_nested_parameters`)."""
    names = {rule}
    if parameters:
        names.add(
            _ATTRIBUTE.sub(
                lambda m: f"<referenceto{parameters[m[1]]}{m[2]}>" if m[1] in parameters else m[0],
                rule,
            )
        )
    for name in sorted(names):
        Validations.of(construct).acknowledge(Acknowledgment(id=PACK + name, reason=reason))


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
