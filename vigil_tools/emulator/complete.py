"""Create, through their own APIs, the template resources moto's CloudFormation accepts but skips.

moto answers CREATE_COMPLETE for AWS::Scheduler::Schedule, AWS::Scheduler::ScheduleGroup,
AWS::Lambda::EventInvokeConfig and AWS::CloudWatch::Alarm without creating anything. The emulator reads those resources from the same
template and creates them, so the local account holds what a real deploy would; after a later
deploy of the stack, again: what exists already is updated to the template's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from vigil_tools.emulator.intrinsics import Resolver
from vigil_tools.emulator.template import Synthesized

Client = Callable[[str], Any]


def complete(synth: Synthesized, resolver: Resolver) -> dict[str, int]:
    """Create what moto skipped, through the resolver's session and clients (one per service)."""
    client = resolver.client
    created = {
        "schedule_groups": 0,
        "schedules": 0,
        "event_invoke_configs": 0,
        "alarms": 0,
        "queue_policies": 0,
    }
    for resource in synth.resources("AWS::SQS::QueuePolicy").values():
        _queue_policy(resolver.resolve(resource["Properties"]), client)
        created["queue_policies"] += 1
    for logical_id, resource in synth.resources("AWS::Scheduler::ScheduleGroup").items():
        name = resolver.resolve(resource["Properties"]).get("Name", logical_id)
        if not _exists(partial(client("scheduler").create_schedule_group, Name=name)):
            created["schedule_groups"] += 1
    for logical_id, resource in synth.resources("AWS::Scheduler::Schedule").items():
        _schedule(logical_id, resolver.resolve(resource["Properties"]), client)
        created["schedules"] += 1
    for resource in synth.resources("AWS::Lambda::EventInvokeConfig").values():
        _event_invoke_config(resolver.resolve(resource["Properties"]), client)
        created["event_invoke_configs"] += 1
    for logical_id, resource in synth.resources("AWS::CloudWatch::Alarm").items():
        _alarm(logical_id, resolver.resolve(resource["Properties"]), client)
        created["alarms"] += 1
    return created


def _exists(create: Callable[[], Any]) -> bool:
    """Run ``create``; True when it was there already (a later deploy of the same stack)."""
    try:
        create()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConflictException":
            raise
        return True
    return False


def _schedule(logical_id: str, props: dict[str, Any], client: Client) -> None:
    """Created, or updated to the template's when a later deploy finds it."""
    scheduler = client("scheduler")
    args = _schedule_args(logical_id, props)
    if _exists(partial(scheduler.create_schedule, **args)):
        scheduler.update_schedule(**args)


def _schedule_args(logical_id: str, props: dict[str, Any]) -> dict[str, Any]:
    target = props["Target"]
    return dict(
        Name=props.get("Name", logical_id),
        GroupName=props.get("GroupName", "default"),
        Description=props.get("Description", ""),
        ScheduleExpression=props["ScheduleExpression"],
        ScheduleExpressionTimezone=props.get("ScheduleExpressionTimezone", "UTC"),
        FlexibleTimeWindow=props["FlexibleTimeWindow"],
        State=props.get("State", "ENABLED"),
        Target={
            "Arn": target["Arn"],
            "RoleArn": target["RoleArn"],
            "Input": target.get("Input", ""),
            "RetryPolicy": target.get("RetryPolicy", {}),
            "DeadLetterConfig": target.get("DeadLetterConfig", {}),
        },
    )


def _event_invoke_config(props: dict[str, Any], client: Client) -> None:
    args: dict[str, Any] = {
        "FunctionName": props["FunctionName"],
        "Qualifier": props.get("Qualifier", "$LATEST"),
    }
    for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig"):
        if key in props:
            args[key] = props[key]
    client("lambda").put_function_event_invoke_config(**args)


def _alarm(logical_id: str, props: dict[str, Any], client: Client) -> None:
    args = {k: v for k, v in props.items() if k != "AlarmName"}
    client("cloudwatch").put_metric_alarm(AlarmName=props.get("AlarmName", logical_id), **args)


def _queue_policy(props: dict[str, Any], client: Client) -> None:
    for url in props["Queues"]:
        client("sqs").set_queue_attributes(
            QueueUrl=url, Attributes={"Policy": json.dumps(props["PolicyDocument"])}
        )
