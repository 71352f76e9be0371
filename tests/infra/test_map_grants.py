"""``BackgroundTask.map_to``: a flow's ``run.map`` needs its function to enqueue and read its
children and each child's function to count its end on the flow's map and wake it. The grants
live in the top-level stack, so a flow and a child in two shards synthesize without a cycle.
One synth of a two-task app: about 8 s."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration
from aws_cdk.assertions import Template

from infra.background_task import BackgroundTask
from infra.errors import ConfigurationError
from infra.stack import VigilStack
from infra.tasks_table import TasksTable
from vigil.contract.layout import Entity, shard_of

FLOW, CHILD = "build-album", "resize-image"


def test_a_flow_and_its_child_in_two_shards_get_each_others_grants_from_the_top_stack() -> None:
    assert shard_of(Entity.TASK, FLOW) != shard_of(Entity.TASK, CHILD)  # two shards: the case

    def declare(scope: Any, tasks: TasksTable) -> list[BackgroundTask]:
        flow = BackgroundTask(
            scope,
            "BuildAlbum",
            handler="tasks.onboard_tenant.handler",
            timeout=Duration.seconds(30),
            tasks_table=tasks.table,
        )
        child = BackgroundTask(
            scope,
            "ResizeImage",
            handler="tasks.send_receipt.handler",
            timeout=Duration.seconds(30),
            tasks_table=tasks.table,
        )
        flow.map_to(child)
        return [flow, child]

    app = App()
    stack = VigilStack(app, "Vigil", declare_jobs=lambda scope, runs: [], declare_tasks=declare)
    template = Template.from_stack(stack).to_json()
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
    ]
    text = json.dumps(policies)
    assert "dynamodb:UpdateItem" in text and f"TASK#{FLOW}/*" in text  # the child: the map
    assert "sqs:SendMessage" in text and "ssm:GetParametersByPath" in text  # wake; catalog
    assert f'"TASK#{CHILD}"' in text  # the flow enqueues and reads its child's records only
    statements = [s for group in policies for s in group]

    def allowed(action: str, needle: str) -> bool:
        return any(
            action in json.dumps(s["Action"]) and needle in json.dumps(s) for s in statements
        )

    # A cancelled flow cancels its children that have not ended, as ``cancel`` does a task.
    assert allowed("dynamodb:UpdateItem", f'"TASK#{CHILD}"')
    assert allowed("scheduler:DeleteSchedule", CHILD)
    app.synth()  # no cycle between the shards


def test_map_to_refuses_nothing_and_what_is_not_a_task() -> None:
    made: list[BackgroundTask] = []

    def declare(scope: Any, tasks: TasksTable) -> list[BackgroundTask]:
        made.append(
            BackgroundTask(
                scope, "Flow", handler="tasks.onboard_tenant.handler", tasks_table=tasks.table
            )
        )
        return made

    VigilStack(App(), "Vigil", declare_jobs=lambda scope, runs: [], declare_tasks=declare)
    (flow,) = made
    with pytest.raises(ConfigurationError, match="invalid map_to: name at least one child"):
        flow.map_to()
    with pytest.raises(ConfigurationError, match="invalid map_to: 'x' is not a BackgroundTask"):
        flow.map_to("x")  # type: ignore[arg-type]
