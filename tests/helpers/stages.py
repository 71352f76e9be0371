"""What makes a stage's stack its own, read out of a synthesized template: the physical names it
claims in the account and the metric identities its alarms read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.helpers.monitoring import Series, alarm_series
from vigil_tools.emulator.template import Synthesized

PHYSICAL_NAME = {
    "AWS::ApiGateway::RestApi": "Name",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::ECS::Cluster": "ClusterName",
    "AWS::ECS::TaskDefinition": "Family",
    "AWS::Events::EventBus": "Name",
    "AWS::Events::Rule": "Name",
    "AWS::IAM::Role": "RoleName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Logs::QueryDefinition": "Name",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Scheduler::Schedule": "Name",
    "AWS::Scheduler::ScheduleGroup": "Name",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SSM::Parameter": "Name",
}
"""Each named resource type's name property. Without it, CloudFormation names the resource after
the stack and the logical id (``<stack>-<logical id>-<random>``)."""

STAGING = "staging"
"""The named stage the suite synthesizes beside the default (the session's ``staging`` app)."""

DEFAULT_STAGE_FILE = Path(__file__).parents[1] / "infra" / "default_stage_identity.json"
"""The stack ``Vigil``'s names and alarm metrics as they were before stages (from main's synth)."""
MIGRATING = (("legacyRegistry", "true"),)
"""The ``-c`` option of the upgrade from a registry keyed by name (the ``migrating`` fixture)."""


def _name(value: Any, stack: str) -> str:
    """A name as text; a reference to one of the stack's resources is qualified by the stack, whose
    resources CloudFormation names uniquely."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_name(part, stack) for part in parts)
    if value == {"Ref": "AWS::StackName"}:
        return stack
    return f"{stack}:" + json.dumps(value, separators=(",", ":"), sort_keys=True)


def physical_names(synthesized: Synthesized, stack: str) -> set[tuple[str, str]]:
    """(resource type, name) of every named resource of the template, given or generated."""
    names = set()
    for logical_id, resource in synthesized.template["Resources"].items():
        kind = resource["Type"]
        if kind not in PHYSICAL_NAME:
            continue
        given = resource.get("Properties", {}).get(PHYSICAL_NAME[kind])
        names.add((kind, f"{stack}-{logical_id}-*" if given is None else _name(given, stack)))
    return names


def alarm_metrics(synthesized: Synthesized, stack: str) -> set[Series]:
    """(namespace, metric, dimensions) of every metric an alarm reads; a dimension that refers to
    a resource (a queue, a function) names the stack's own."""
    found = set()
    for alarm in synthesized.resources("AWS::CloudWatch::Alarm").values():
        for namespace, name, dims in alarm_series(alarm):
            found.add(
                (
                    namespace,
                    name,
                    frozenset((k, f"{stack}:{v}" if v.startswith("<") else v) for k, v in dims),
                )
            )
    return found


def identity(synthesized: Synthesized, stack: str) -> dict[str, list[Any]]:
    """Both, as JSON (sorted), the form DEFAULT_STAGE_FILE keeps."""
    return {
        "physical_names": sorted(list(n) for n in physical_names(synthesized, stack)),
        "alarm_metrics": sorted(
            [ns, name, sorted(list(d) for d in dims)]
            for ns, name, dims in alarm_metrics(synthesized, stack)
        ),
    }


def dependencies(template: dict[str, Any], logical_id: str) -> set[str]:
    """Every resource CloudFormation creates before ``logical_id``: its ``DependsOn`` and the
    resources its properties refer to (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``), transitively."""
    resources = template["Resources"]
    found: set[str] = set()
    waiting = [logical_id]
    while waiting:
        resource = resources[waiting.pop()]
        listed = resource.get("DependsOn", [])
        direct = {listed} if isinstance(listed, str) else set(listed)
        direct |= _referred(resource.get("Properties", {})) & resources.keys()
        waiting += sorted(direct - found)
        found |= direct
    return found


def _referred(value: Any) -> set[str]:
    if isinstance(value, list):
        return set().union(*map(_referred, value)) if value else set()
    if not isinstance(value, dict):
        return set()
    found: set[str] = set()
    for key, inner in value.items():
        if key == "Ref" and isinstance(inner, str):
            found.add(inner)
        elif key == "Fn::GetAtt":
            found.add(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
        elif key == "Fn::Sub":
            text = inner[0] if isinstance(inner, list) else inner
            found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text)}
            found |= _referred(inner[1] if isinstance(inner, list) else {})
        else:
            found |= _referred(inner)
    return found


def stages_logging_without_an_account(template: dict[str, Any]) -> list[str]:
    """API stages that write logs (access logs or execution logs) and may be created before the
    account's CloudWatch Logs role is set: no ``AWS::ApiGateway::Account`` of the template comes
    first. API Gateway refuses such a stage in an account and region without the role."""
    resources = template["Resources"]
    accounts = {k for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::Account"}
    logging = [
        logical_id
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::ApiGateway::Stage"
        and (
            "AccessLogSetting" in resource.get("Properties", {})
            or any(
                setting.get("LoggingLevel", "OFF") != "OFF"
                for setting in resource.get("Properties", {}).get("MethodSettings", [])
            )
        )
    ]
    return [stage for stage in logging if not accounts & dependencies(template, stage)]
