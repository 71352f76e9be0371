"""The reconciler Lambda's dispatch: each event shape reaches its pass; a malformed one writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from handlers.reconciler import dispatch
from tests.helpers.moto_fleet import CONTAINER, KIND, TABLE, MotoFleet, task_event
from vigil.dynamo import to_wire
from vigil.events import MalformedEvent
from vigil.observers.model import to_item
from vigil.observers.reconciler import ReconcilerConfig
from vigil.settings import SettingsError

SCHEDULED = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


def env(fleet: MotoFleet, **overrides: str) -> dict[str, str]:
    values = {
        "VIGIL_REGISTRY_TABLE": TABLE,
        "VIGIL_CLUSTER_ARN": fleet.cluster_arn,
        "VIGIL_TASK_DEFINITIONS": json.dumps({KIND: fleet.task_definition_arn}),
        "VIGIL_CONTAINER_NAME": CONTAINER,
        "VIGIL_SUBNETS": fleet.subnet_id,
        "VIGIL_SECURITY_GROUPS": fleet.security_group_id,
        "VIGIL_ASSIGN_PUBLIC_IP": "true",
        "VIGIL_OBSERVERS_DLQ_URL": fleet.dlq_url,
        "VIGIL_HEARTBEAT_SECONDS": "30",
    }
    values.update(overrides)
    return values


def test_the_environment_is_validated_once_with_the_variable_named() -> None:
    with pytest.raises(ValueError, match="VIGIL_TASK_DEFINITIONS"):
        ReconcilerConfig.from_env({"VIGIL_TASK_DEFINITIONS": "{not json"})
    with pytest.raises(ValueError, match="VIGIL_HEARTBEAT_SECONDS"):
        ReconcilerConfig.from_env({"VIGIL_HEARTBEAT_SECONDS": "2"})


def test_every_bad_variable_is_named_at_once_in_one_settings_error() -> None:
    with pytest.raises(SettingsError) as raised:
        ReconcilerConfig.from_env(
            {"VIGIL_HEARTBEAT_SECONDS": "2", "VIGIL_ASSIGN_PUBLIC_IP": "maybe"}
        )
    message = str(raised.value)
    for name in (
        "VIGIL_REGISTRY_TABLE",
        "VIGIL_SUBNETS",
        "VIGIL_HEARTBEAT_SECONDS",
        "VIGIL_ASSIGN_PUBLIC_IP",
    ):
        assert name in message


def test_each_event_shape_reaches_its_pass(fleet: MotoFleet) -> None:
    config = ReconcilerConfig.from_env(env(fleet))
    assert config.subnets == [fleet.subnet_id] and config.decision_settings().failure_threshold == 5
    reconciler = fleet.reconciler()
    created = to_item(fleet.observer("a"))
    fleet.put(fleet.observer("a"))
    record = {
        "eventSource": "aws:dynamodb",
        "eventName": "INSERT",
        "dynamodb": {"NewImage": to_wire(created)},
    }
    assert dispatch({"Records": [record]}, "r1", reconciler, fleet.cluster_arn)["observers"] == 1
    arn = fleet.item("a")["task_arn"]
    assert dispatch(SCHEDULED, "r2", reconciler, fleet.cluster_arn)["pass"] == "resync"
    event = task_event(fleet, arn, name="a", generation=1, last_status="RUNNING", version=2)
    answer = dispatch(event, "r3", reconciler, fleet.cluster_arn)
    assert answer == {"pass": "event", "actions": ["SeeTask"]}
    assert fleet.item("a")["task_version"] == 2
    elsewhere = {
        **event,
        "detail": {**event["detail"], "clusterArn": "arn:aws:ecs:x:1:cluster/other"},
    }
    assert dispatch(elsewhere, "r4", reconciler, fleet.cluster_arn)["ignored"] is True


@pytest.mark.parametrize(
    "event",
    [
        [],
        {},
        {"source": "aws.ecs", "detail-type": "ECS Task State Change", "detail": {}},
        {"source": "aws.ecs", "detail-type": "ECS Task State Change", "detail": "x"},
        {"Records": [{"eventSource": "aws:sqs"}]},
        {"source": "aws.events", "detail-type": "Something Else"},
    ],
)
def test_a_malformed_event_is_refused_before_any_call(fleet: MotoFleet, event: Any) -> None:
    fleet.counter.reset()
    with pytest.raises(MalformedEvent):
        dispatch(event, "r", fleet.reconciler(), fleet.cluster_arn)
    assert sum(fleet.counter.calls.values()) == 0


def test_the_lambda_handler_reads_its_environment_and_runs_a_resync(
    fleet: MotoFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    import handlers.reconciler as module

    for key, value in env(fleet).items():
        monkeypatch.setenv(key, value)
    module.config.cache_clear()
    module.reconciler.cache_clear()
    fleet.put(fleet.observer("a"))

    class Context:
        aws_request_id = "req-1"
        function_name = "reconciler"
        memory_limit_in_mb = 1024
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reconciler"

    try:
        answer = module.handler(SCHEDULED, Context())
    finally:
        module.config.cache_clear()
        module.reconciler.cache_clear()
    assert answer == {"pass": "resync", "observers": 1, "described": 0}
    assert fleet.item("a")["status"] == "STARTING"
