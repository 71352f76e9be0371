"""What makes a stage's stack its own, read out of a synthesized template: the physical names it
claims in the account and the metric identities its alarms read."""

from __future__ import annotations

import json
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
    """(resource type, name) of every named resource of the template and its nested ones (a
    nested stack's generated names qualified by its path), given or generated."""
    names = set()
    for path, template in synthesized.stacks():
        owner = "-".join((stack, *path))
        for logical_id, resource in template.template["Resources"].items():
            kind = resource["Type"]
            if kind not in PHYSICAL_NAME:
                continue
            given = resource.get("Properties", {}).get(PHYSICAL_NAME[kind])
            name = f"{owner}-{logical_id}-*" if given is None else _name(given, owner)
            names.add((kind, name))
    return names


def alarm_metrics(synthesized: Synthesized, stack: str) -> set[Series]:
    """(namespace, metric, dimensions) of every metric an alarm reads; a dimension that refers to
    a resource (a queue, a function) names the stack's own."""
    found = set()
    alarms = [
        alarm
        for _, template in synthesized.stacks()
        for alarm in template.resources("AWS::CloudWatch::Alarm").values()
    ]
    for alarm in alarms:
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
