"""Every AWS quota a Vigil deploy can meet as a team declares more, in one place, with its source,
and the check that holds the synthesized cloud assembly to them (``check_assembly``).

A quota a synth passes and a deploy fails (Lambda's 4 KB of environment, IAM's 10,240 characters of
inline policy) is checked on the template, with every value CloudFormation fills in at deploy (a
queue's URL, a role's ARN) counted at the longest it can be (:data:`WORST`): the check names the
limit and the construct (its ``aws:cdk:path``), and fails the synth (``app.py`` and
``vigil_tools.emulator.template.synthesize`` call it), not the deploy. Quotas sourced from AWS's
pages as of 2025-2026; each says where.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.contract.alarms import DESCRIPTION_LIMIT
from vigil.contract.layout import (
    CATALOG_PARAMETER_LIMIT,
    FUNCTION_NAME_LIMIT,
    Entity,
    function_prefix,
)


@dataclass(frozen=True)
class Quota:
    limit: int
    what: str
    source: str


CFN = "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html"
LAMBDA = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
IAM = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
DASHBOARD = (
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/"
    "CloudWatch-Dashboard-Body-Structure.html"
)
ALARMS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html"
METRIC_MATH = ALARMS
SSM = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/"
    "parameter-store-advanced-parameters.html"
)
FILTERS = "https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html"

RESOURCES = Quota(500, "resources in a stack", CFN)
OUTPUTS = Quota(200, "outputs of a stack", CFN)
PARAMETERS = Quota(200, "parameters of a stack", CFN)
PARAMETER_VALUE = Quota(4096, "bytes of a stack parameter's value (a nested stack's input)", CFN)
TEMPLATE_BODY = Quota(1_048_576, "bytes of a template uploaded to S3 (the CDK uploads them)", CFN)
TEMPLATE_DESCRIPTION = Quota(1024, "bytes of a template's description", CFN)
ENVIRONMENT = Quota(
    4096, "bytes of a Lambda function's environment variables, all together", LAMBDA
)
FUNCTION_NAME = Quota(FUNCTION_NAME_LIMIT, "characters of a Lambda function's name", LAMBDA)
INLINE_POLICIES = Quota(10_240, "characters of a role's inline policies, all together", IAM)
MANAGED_POLICY = Quota(6144, "characters of a managed policy", IAM)
ATTACHED_POLICIES = Quota(10, "managed policies attached to a role (the default quota)", IAM)
DASHBOARD_WIDGETS = Quota(500, "widgets on a CloudWatch dashboard", DASHBOARD)
ALARM_DESCRIPTION = Quota(DESCRIPTION_LIMIT, "characters of an alarm's description", ALARMS)
INSIGHTS_ALARMS = Quota(
    200, "Metrics Insights alarms in an account and region (every stage's stack shares it)", ALARMS
)
INSIGHTS_SERIES = Quota(
    500, "time series a Metrics Insights query returns (one per job or task grouped)", ALARMS
)
MATH_ALARM_METRICS = Quota(10, "metrics a metric-math alarm reads", METRIC_MATH)
CATALOG_PART = Quota(CATALOG_PARAMETER_LIMIT, "characters of a standard SSM parameter", SSM)
EVENT_FILTERS = Quota(5, "filters of a Lambda event source mapping", FILTERS)

QUOTAS: tuple[Quota, ...] = (
    RESOURCES,
    OUTPUTS,
    PARAMETERS,
    PARAMETER_VALUE,
    TEMPLATE_BODY,
    TEMPLATE_DESCRIPTION,
    ENVIRONMENT,
    FUNCTION_NAME,
    INLINE_POLICIES,
    MANAGED_POLICY,
    ATTACHED_POLICIES,
    DASHBOARD_WIDGETS,
    ALARM_DESCRIPTION,
    INSIGHTS_ALARMS,
    INSIGHTS_SERIES,
    MATH_ALARM_METRICS,
    CATALOG_PART,
    EVENT_FILTERS,
)
"""Every quota checked, for the docs' table (``docs/guides/deploying.md``)."""


# -- the longest a value CloudFormation fills in can be ------------------------------------------

REGION = 14  # ap-southeast-1 and its peers
ACCOUNT = 12
PARTITION = 10  # aws-us-gov
URL_SUFFIX = 16  # amazonaws.com.cn
QUEUE_NAME = 80
ARN_HEAD = len("arn:") + PARTITION + len(":xxx:") + REGION + 1 + ACCOUNT + 1
"""``arn:<partition>:<service>:<region>:<account>:`` for a three-letter service."""
QUEUE_URL = len("https://sqs.") + REGION + 1 + URL_SUFFIX + 1 + ACCOUNT + 1 + QUEUE_NAME


def role_arn(path: str = "/") -> int:
    """An IAM role's ARN under ``path``: a name of 64 characters at most."""
    return len("arn:") + PARTITION + len(":iam::") + ACCOUNT + len(":role") + len(path) + 64


REVISION_DIGITS = 7
"""A task definition's revision: ECS keeps up to 1,000,000 of a family."""


def task_definition_arn(family: str) -> int:
    """An ECS task definition's ARN (what ``Ref`` gives): its family, a revision of 7 digits."""
    return ARN_HEAD + len("task-definition/") + len(family) + 1 + REVISION_DIGITS


WORST: dict[tuple[str, str], int] = {
    ("AWS::SQS::Queue", "Ref"): QUEUE_URL,
    ("AWS::SQS::Queue", "Arn"): ARN_HEAD + QUEUE_NAME,
    ("AWS::SQS::Queue", "QueueName"): QUEUE_NAME,
    ("AWS::SQS::Queue", "QueueUrl"): QUEUE_URL,
    ("AWS::DynamoDB::Table", "Ref"): 255,
    ("AWS::DynamoDB::Table", "Arn"): ARN_HEAD + 5 + len("table/") + 255,
    ("AWS::DynamoDB::Table", "StreamArn"): ARN_HEAD + 5 + len("table/") + 255 + 40,
    ("AWS::IAM::Role", "Ref"): 64,
    ("AWS::IAM::Role", "Arn"): role_arn(),
    ("AWS::IAM::Role", "RoleId"): 128,
    ("AWS::Lambda::Function", "Ref"): FUNCTION_NAME_LIMIT,
    ("AWS::Lambda::Function", "Arn"): ARN_HEAD + 3 + len("function:") + FUNCTION_NAME_LIMIT,
    ("AWS::Logs::LogGroup", "Ref"): 512,
    ("AWS::Logs::LogGroup", "Arn"): ARN_HEAD + 1 + len("log-group:") + 512 + 2,
    ("AWS::SNS::Topic", "Ref"): ARN_HEAD + 256,
    ("AWS::SNS::Topic", "TopicArn"): ARN_HEAD + 256,
    ("AWS::SNS::Topic", "TopicName"): 256,
    ("AWS::Events::Rule", "Arn"): ARN_HEAD + 3 + len("rule/") + 64 + 1 + 256,
    ("AWS::ECS::Cluster", "Ref"): 255,
    ("AWS::ECS::Cluster", "Arn"): ARN_HEAD + len("cluster/") + 255,
    ("AWS::ECS::TaskDefinition", "Ref"): ARN_HEAD + len("task-definition/") + 255 + 8,
    ("AWS::EC2::SecurityGroup", "GroupId"): 20,
    ("AWS::EC2::Subnet", "Ref"): 24,
    ("AWS::EC2::VPC", "Ref"): 21,
    ("AWS::ApiGateway::RestApi", "Ref"): 10,
    ("AWS::ApiGateway::RestApi", "RootResourceId"): 10,
    ("AWS::ApiGateway::Stage", "Ref"): 128,
    ("AWS::SSM::Parameter", "Ref"): 2048,
    ("AWS::Scheduler::ScheduleGroup", "Ref"): 64,
    ("AWS::Scheduler::ScheduleGroup", "Arn"): ARN_HEAD + 6 + len("schedule-group/") + 64,
    ("AWS::CloudWatch::Dashboard", "Ref"): 255,
}
"""The longest each (resource type, attribute) can be once CloudFormation fills it in; an
unlisted one counts :data:`UNKNOWN`."""
PSEUDO: dict[str, int] = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": URL_SUFFIX,
    "AWS::StackName": 128,
    "AWS::StackId": 256,
    "AWS::NoValue": 0,
}
UNKNOWN = 256


class QuotaExceeded(ValueError):
    """The cloud assembly would fail at deploy: the message lists each limit and construct."""


@dataclass(frozen=True)
class Problem:
    quota: Quota
    where: str
    """The construct (its path) or the stack."""
    size: int

    def __str__(self) -> str:
        return (
            f"{self.where}: {self.size} {self.quota.what}, over the limit of "
            f"{self.quota.limit} ({self.quota.source})"
        )


# -- reading a cloud assembly -------------------------------------------------------------------


@dataclass
class Template:
    """One stack's template and how each of its parameters is filled (a nested stack's inputs,
    as its parent passes them, so their lengths follow the parent's values)."""

    name: str
    body: dict[str, Any]
    size: int
    parameter_lengths: dict[str, int]
    nested_outputs: dict[tuple[str, str], int] = field(default_factory=dict)
    """(nested stack's logical id, output) -> the longest that output's value can be."""

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.body.get("Resources", {}))

    def path_of(self, logical_id: str) -> str:
        resource = self.resources.get(logical_id, {})
        return str(resource.get("Metadata", {}).get("aws:cdk:path", f"{self.name}/{logical_id}"))

    def length(self, value: Any) -> int:
        """The longest ``value`` can be rendered as a string once deployed (JSON for a mapping)."""
        return _Estimate(self).length(value)


def load_assembly(outdir: Path, stack: str) -> list[Template]:
    """The stack's template and, recursively, its nested stacks' (from their asset files)."""
    root = _load(outdir / f"{stack}.template.json", stack, {})
    assets = json.loads((outdir / f"{stack}.assets.json").read_text())
    return list(_with_nested(outdir, assets, root))


def nested_template_file(assets: Mapping[str, Any], resource: Mapping[str, Any]) -> str | None:
    """The file (in the cloud assembly) of a nested stack's template: its ``TemplateURL`` ends with
    the asset's object key, which the stack's asset manifest maps to the file."""
    url = resource.get("Properties", {}).get("TemplateURL")
    parts = url.get("Fn::Join", ["", []])[1] if isinstance(url, dict) else [url]
    last = parts[-1] if parts and isinstance(parts[-1], str) else ""
    key = last.rsplit("/", 1)[-1]
    for asset in assets.get("files", {}).values():
        for destination in asset.get("destinations", {}).values():
            if destination.get("objectKey") == key:
                return str(asset["source"]["path"])
    return None


def _load(path: Path, name: str, lengths: dict[str, int]) -> Template:
    text = path.read_text()
    return Template(name, json.loads(text), len(text.encode()), lengths)


def _with_nested(outdir: Path, assets: Mapping[str, Any], template: Template) -> Iterator[Template]:
    yield template
    for logical_id, resource in template.resources.items():
        if resource.get("Type") != "AWS::CloudFormation::Stack":
            continue
        asset = nested_template_file(assets, resource)
        if not asset:
            continue
        lengths = {
            key: template.length(value)
            for key, value in resource.get("Properties", {}).get("Parameters", {}).items()
        }
        nested = _load(outdir / asset, _shard_name(template.path_of(logical_id)), lengths)
        yield from _with_nested(outdir, assets, nested)
        for output, body in nested.body.get("Outputs", {}).items():
            template.nested_outputs[(logical_id, output)] = nested.length(body.get("Value"))


def _shard_name(path: str) -> str:
    """``Vigil/Jobs3.NestedStack/Jobs3.NestedStackResource`` -> ``Vigil/Jobs3``."""
    return path.split(".NestedStack/", 1)[0]


class _Estimate:
    def __init__(self, template: Template) -> None:
        self.template = template

    def length(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value.encode())
        if isinstance(value, bool) or value is None:
            return len(json.dumps(value))
        if isinstance(value, (int, float)):
            return len(str(value))
        if isinstance(value, list):
            return sum(self.length(v) for v in value) + 3 * len(value) + 2
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, argument),) = value.items()
                intrinsic = self._intrinsic(key, argument)
                if intrinsic is not None:
                    return intrinsic
            return sum(len(str(k)) + self.length(v) + 4 for k, v in value.items()) + 2
        return UNKNOWN

    def _intrinsic(self, key: str, argument: Any) -> int | None:
        if key == "Ref":
            return self._ref(str(argument))
        if key == "Fn::GetAtt":
            logical_id, attribute = (
                argument if isinstance(argument, list) else str(argument).split(".", 1)
            )
            return self._get_att(str(logical_id), str(attribute))
        if key == "Fn::Join":
            separator, parts = argument
            if not isinstance(parts, list):
                return UNKNOWN
            return sum(self.length(p) for p in parts) + len(separator) * max(len(parts) - 1, 0)
        if key == "Fn::Sub":
            return len(str(argument if isinstance(argument, str) else argument[0])) + UNKNOWN
        if key == "Fn::Select":
            return self._select(argument)
        if key in ("Fn::Split", "Fn::If", "Fn::ImportValue", "Fn::FindInMap", "Fn::Base64"):
            return UNKNOWN
        if key == "Fn::GetAZs":
            return UNKNOWN
        return None

    def _select(self, argument: Any) -> int:
        """One item of a list; of a split string, one of its parts: a task definition's revision
        (part 6 of its ARN split at ``:``) at most :data:`REVISION_DIGITS`, any other part no
        longer than the string."""
        if not isinstance(argument, list) or len(argument) != 2:
            return UNKNOWN
        index, listed = argument
        split = listed.get("Fn::Split") if isinstance(listed, dict) and len(listed) == 1 else None
        if not isinstance(split, list) or len(split) != 2:
            return self.length(listed)
        separator, value = split
        referenced = value.get("Ref") if isinstance(value, dict) and len(value) == 1 else None
        resource = self.template.resources.get(str(referenced)) if referenced else None
        if (resource or {}).get("Type") == "AWS::ECS::TaskDefinition" and (separator, index) == (
            ":",
            6,
        ):
            return REVISION_DIGITS
        return self.length(value)

    def _ref(self, name: str) -> int:
        if name in PSEUDO:
            return PSEUDO[name]
        template = self.template
        if name in template.body.get("Parameters", {}):
            if name in template.parameter_lengths:
                return template.parameter_lengths[name]
            parameter = template.body["Parameters"][name]
            default = parameter.get("Default")
            if str(parameter.get("Type", "")).startswith("AWS::SSM::Parameter::Value"):
                return 2048  # the parameter's value, up to an advanced parameter's size
            return len(str(default)) if default is not None else UNKNOWN
        resource = template.resources.get(name)
        if resource is None:
            return UNKNOWN
        return self._attribute(resource, "Ref")

    def _get_att(self, logical_id: str, attribute: str) -> int:
        resource = self.template.resources.get(logical_id)
        if resource is None:
            return UNKNOWN
        if resource.get("Type") == "AWS::CloudFormation::Stack" and attribute.startswith(
            "Outputs."
        ):
            return self._nested_output(logical_id, attribute.removeprefix("Outputs."))
        return self._attribute(resource, attribute)

    def _attribute(self, resource: Mapping[str, Any], attribute: str) -> int:
        kind = str(resource.get("Type"))
        props = resource.get("Properties", {})
        if kind == "AWS::Lambda::Function" and isinstance(props.get("FunctionName"), str):
            name = len(props["FunctionName"])
            if attribute == "Ref":
                return name
            if attribute == "Arn":
                return ARN_HEAD + 3 + len("function:") + name
        if kind == "AWS::ECS::TaskDefinition" and attribute in ("Ref", "TaskDefinitionArn"):
            family = props.get("Family")
            if isinstance(family, str):
                return task_definition_arn(family)
        if kind == "AWS::IAM::Role" and attribute == "Arn":
            path = props.get("Path", "/")
            return role_arn(path) if isinstance(path, str) else self.length(path) + role_arn("")
        return WORST.get((kind, attribute), UNKNOWN)

    def _nested_output(self, logical_id: str, output: str) -> int:
        return self.template.nested_outputs.get((logical_id, output), UNKNOWN)


# -- the checks ----------------------------------------------------------------------------------


def problems(templates: list[Template]) -> list[Problem]:
    found: list[Problem] = []
    insights = 0
    functions: Counter[Entity] = Counter()
    stack = templates[0].name
    for template in templates:
        found += _stack_problems(template)
        for logical_id, resource in template.resources.items():
            found += _resource_problems(template, logical_id, resource)
            if resource.get("Type") == "AWS::CloudWatch::Alarm" and _is_insights(resource):
                insights += 1
            if resource.get("Type") == "AWS::Lambda::Function":
                name = str(resource.get("Properties", {}).get("FunctionName", ""))
                functions.update(e for e in Entity if name.startswith(function_prefix(stack, e)))
    if insights > INSIGHTS_ALARMS.limit:
        found.append(Problem(INSIGHTS_ALARMS, stack, insights))
    # The stack's alarms over every job (task) group by it: one series each, so one contributor
    # past the query's 500 would go unwatched.
    found += [
        Problem(INSIGHTS_SERIES, f"{stack} ({entity.plural})", count)
        for entity, count in functions.items()
        if count > INSIGHTS_SERIES.limit
    ]
    return found


def check_assembly(outdir: str | Path, stack: str) -> list[Template]:
    """The stack's templates, or :class:`QuotaExceeded` listing every quota they pass."""
    templates = load_assembly(Path(outdir), stack)
    found = problems(templates)
    if found:
        raise QuotaExceeded(
            f"stack {stack} would fail to deploy:\n" + "\n".join(f"  {p}" for p in found)
        )
    return templates


def _stack_problems(template: Template) -> list[Problem]:
    body = template.body
    counted = (
        (RESOURCES, len(body.get("Resources", {}))),
        (OUTPUTS, len(body.get("Outputs", {}))),
        (PARAMETERS, len(body.get("Parameters", {}))),
        (TEMPLATE_BODY, template.size),
        (TEMPLATE_DESCRIPTION, len(str(body.get("Description", "")).encode())),
    )
    return [Problem(quota, template.name, size) for quota, size in counted if size > quota.limit]


def _resource_problems(
    template: Template, logical_id: str, resource: Mapping[str, Any]
) -> list[Problem]:
    kind = resource.get("Type")
    props = resource.get("Properties", {})
    where = template.path_of(logical_id)
    measured: list[tuple[Quota, int]] = []
    if kind == "AWS::Lambda::Function":
        variables = props.get("Environment", {}).get("Variables", {})
        measured.append((ENVIRONMENT, environment_size(template, variables)))
        if isinstance(props.get("FunctionName"), str):
            measured.append((FUNCTION_NAME, len(props["FunctionName"])))
    elif kind == "AWS::IAM::Role":
        measured.append((INLINE_POLICIES, inline_policy_size(template, logical_id)))
        measured.append((ATTACHED_POLICIES, attached_policies(template, logical_id)))
    elif kind == "AWS::IAM::ManagedPolicy":
        measured.append((MANAGED_POLICY, policy_size(template, props.get("PolicyDocument", {}))))
    elif kind == "AWS::CloudWatch::Dashboard":
        measured.append((DASHBOARD_WIDGETS, dashboard_widgets(template, props)))
    elif kind == "AWS::CloudWatch::Alarm":
        if "AlarmDescription" in props:
            measured.append((ALARM_DESCRIPTION, template.length(props["AlarmDescription"])))
        metrics = [m for m in props.get("Metrics", []) if "MetricStat" in m]
        measured.append((MATH_ALARM_METRICS, len(metrics)))
    elif kind == "AWS::SSM::Parameter":
        measured.append((CATALOG_PART, template.length(props.get("Value", ""))))
    elif kind == "AWS::Lambda::EventSourceMapping":
        filters = props.get("FilterCriteria", {}).get("Filters", [])
        measured.append((EVENT_FILTERS, len(filters)))
    elif kind == "AWS::CloudFormation::Stack":
        for value in props.get("Parameters", {}).values():
            measured.append((PARAMETER_VALUE, template.length(value)))
    return [Problem(quota, where, size) for quota, size in measured if size > quota.limit]


def environment_size(template: Template, variables: Mapping[str, Any]) -> int:
    """Lambda counts the variables' keys and values: counted as their JSON, the longer."""
    return sum(len(key) + template.length(value) + 6 for key, value in variables.items()) + 2


def policy_size(template: Template, document: Any) -> int:
    """IAM counts a policy's characters without whitespace: its JSON with no spaces."""
    return template.length(document)


def inline_policy_size(template: Template, role: str) -> int:
    """Every inline policy of a role: its own ``Policies`` and each ``AWS::IAM::Policy`` that names
    it (what the CDK makes of ``add_to_policy`` without an ``InlineRole``)."""
    resources = template.resources
    total = sum(
        policy_size(template, policy.get("PolicyDocument", {})) + len(policy.get("PolicyName", ""))
        for policy in resources[role].get("Properties", {}).get("Policies", [])
    )
    for resource in resources.values():
        if resource.get("Type") != "AWS::IAM::Policy":
            continue
        props = resource.get("Properties", {})
        if {"Ref": role} in props.get("Roles", []):
            total += policy_size(template, props.get("PolicyDocument", {}))
    return total


def attached_policies(template: Template, role: str) -> int:
    """The managed policies a role has: those it lists and each ``AWS::IAM::ManagedPolicy`` of the
    template that names it."""
    resources = template.resources
    listed = resources[role].get("Properties", {}).get("ManagedPolicyArns", [])
    naming = [
        resource
        for resource in resources.values()
        if resource.get("Type") == "AWS::IAM::ManagedPolicy"
        and {"Ref": role} in resource.get("Properties", {}).get("Roles", [])
    ]
    return (len(listed) if isinstance(listed, list) else 1) + len(naming)


def dashboard_widgets(template: Template, props: Mapping[str, Any]) -> int:
    body = props.get("DashboardBody", "")
    text = body if isinstance(body, str) else _joined_text(body)
    return len(re.findall(r'"type":"(?:metric|text|log|alarm|explorer|custom)"', text))


def _joined_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_joined_text(p) for p in parts)
    return "x"


def _is_insights(alarm: Mapping[str, Any]) -> bool:
    return any(
        str(metric.get("Expression", "")).lstrip().upper().startswith("SELECT")
        for metric in alarm.get("Properties", {}).get("Metrics", [])
    )


def catalog_part_fits(length: int) -> bool:
    return length <= CATALOG_PART.limit
