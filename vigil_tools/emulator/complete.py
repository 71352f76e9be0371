"""Create, through their own APIs, the template resources moto's CloudFormation accepts but skips.

moto answers CREATE_COMPLETE for AWS::Scheduler::Schedule, AWS::Scheduler::ScheduleGroup,
AWS::Lambda::EventInvokeConfig and AWS::CloudWatch::Alarm without creating anything. The emulator reads those resources from the same
template and creates them, so the local account holds what a real deploy would; after a later
deploy of the stack, again: what exists already is updated to the template's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from vigil_tools.emulator.intrinsics import Resolver
from vigil_tools.emulator.template import Synthesized

Client = Callable[[str], Any]


def complete(synth: Synthesized, resolver: Resolver) -> dict[str, int]:
    """Create what moto skipped, in the stack and its nested ones (the shards), through the
    resolver's session and clients (one per service)."""
    created = {
        "schedule_groups": 0,
        "schedules": 0,
        "event_invoke_configs": 0,
        "alarms": 0,
        "queue_policies": 0,
    }
    for template, stack_resolver in resolver.every_stack():
        for key, count in _complete_one(template, stack_resolver).items():
            created[key] += count
    return created


def _complete_one(synth: Synthesized, resolver: Resolver) -> dict[str, int]:
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
    groups = synth.resources("AWS::Scheduler::ScheduleGroup")
    existing = _schedule_groups(client) if groups else set()
    for logical_id, resource in groups.items():
        name = resolver.resolve(resource["Properties"]).get("Name", logical_id)
        if name in existing:
            # Kept from the stack's previous version (a later deploy): moto's create would
            # replace it with an empty group, losing its one-time schedules.
            continue
        client("scheduler").create_schedule_group(Name=name)
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


def refresh_parameters(resolver: Resolver) -> int:
    """After a later deploy: each SSM parameter's value as the template has it now. moto's update
    creates the resources it adds before it changes the ones it modifies, whatever they depend
    on: a new parameter naming a task definition that the same update registers anew (the kinds
    catalog) got the old revision, where CloudFormation waits for the new one. Returns how many
    it corrected."""
    ssm = resolver.client("ssm")
    corrected = 0
    for synth, stack in resolver.every_stack():
        for resource in synth.resources("AWS::SSM::Parameter").values():
            props = stack.resolve(resource["Properties"])
            name, value = props["Name"], props["Value"]
            if ssm.get_parameter(Name=name)["Parameter"]["Value"] != value:
                ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
                corrected += 1
    return corrected


def forget_completed(resolver: Resolver) -> None:
    """Before a later deploy: the schedules and alarms :func:`complete` created for the stack as it
    was (moto's stack never held them), deleted, so those the new template drops go as they do on
    AWS; ``complete`` makes the new template's again."""
    scheduler = resolver.client("scheduler")
    cloudwatch = resolver.client("cloudwatch")
    for synth, stack in resolver.every_stack():
        for logical_id, resource in synth.resources("AWS::Scheduler::Schedule").items():
            props = stack.resolve(resource["Properties"])
            with contextlib.suppress(ClientError):  # already gone
                scheduler.delete_schedule(
                    Name=props.get("Name", logical_id), GroupName=props.get("GroupName", "default")
                )
        alarms = [
            stack.resolve(resource["Properties"]).get("AlarmName", logical_id)
            for logical_id, resource in synth.resources("AWS::CloudWatch::Alarm").items()
        ]
        for start in range(0, len(alarms), 100):
            cloudwatch.delete_alarms(AlarmNames=alarms[start : start + 100])


def _schedule_groups(client: Client) -> set[str]:
    pages = client("scheduler").get_paginator("list_schedule_groups").paginate()
    return {group["Name"] for page in pages for group in page["ScheduleGroups"]}


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
