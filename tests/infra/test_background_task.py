"""The synthesized template of the app's background tasks, and synth-time validation of
BackgroundTask. Template assertions read the session's one synthesized app (``synthesized``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.background_task import BackgroundTask
from infra.errors import ConfigurationError
from infra.monitoring import Monitoring
from infra.stack import VigilStack
from tests.helpers.monitoring import alarm_series
from vigil.contract.tasks import CatalogField, CompletionEvents, TaskEnv
from vigil_tools.emulator.deploy import _with_fifo_queue_names
from vigil_tools.emulator.template import Synthesized

TASKS = {"send-receipt": "SendReceipt", "provision-tenant": "ProvisionTenant"}
ANNOUNCED = {"send-receipt": "all", "provision-tenant": "all"}
"""The example's choices: both are subscribed to (the default, "failures", is in the tests of
the construct alone)."""


def by_path(synthesized: Synthesized, resource_type: str, part: str) -> dict[str, Any]:
    (found,) = [
        (key, r)
        for key, r in synthesized.resources(resource_type).items()
        if part in r["Metadata"]["aws:cdk:path"]
    ]
    return {"id": found[0], **found[1]}


def role_statements(synthesized: Synthesized, role: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions(statement: dict[str, Any]) -> list[str]:
    found = statement["Action"]
    return found if isinstance(found, list) else [found]


def test_queues_fifo_when_ordered_with_a_redrive_net_and_visibility_six_times_the_timeout(
    synthesized: Synthesized,
) -> None:
    for task, construct in TASKS.items():
        queue = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/Queue/")
        dead = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/DeadLetters/")
        function = by_path(synthesized, "AWS::Lambda::Function", f"/{construct}/Function/")
        ordered = task == "provision-tenant"
        for q in (queue, dead):
            assert q["Properties"].get("FifoQueue", False) is ordered
            if ordered:
                assert q["Properties"]["ContentBasedDeduplication"] is False
        variables = function["Properties"]["Environment"]["Variables"]
        retries = int(variables[TaskEnv.RETRIES])
        assert queue["Properties"]["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dead["id"], "Arn"]},
            "maxReceiveCount": retries + 12,
        }
        assert queue["Properties"]["VisibilityTimeout"] >= 6 * function["Properties"]["Timeout"]
        assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86_400


def test_the_event_source_reports_partial_batches_and_caps_concurrency(
    synthesized: Synthesized,
) -> None:
    expected = {"send-receipt": (10, 5), "provision-tenant": (1, 2)}
    for task, construct in TASKS.items():
        mapping = by_path(
            synthesized, "AWS::Lambda::EventSourceMapping", f"/{construct}/Function/"
        )["Properties"]
        queue = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/Queue/")
        assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue["id"], "Arn"]}
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        batch, concurrency = expected[task]
        assert mapping["BatchSize"] == batch
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": concurrency}
        # FIFO event sources take no batching window
        assert ("MaximumBatchingWindowInSeconds" in mapping) is (task == "send-receipt")


def test_the_function_environment_is_the_task_contract(synthesized: Synthesized) -> None:
    tables = synthesized.resources("AWS::DynamoDB::Table")
    tasks_table = by_path(synthesized, "AWS::DynamoDB::Table", "/Tasks/Table")
    # One index only, sparse (retry_at is set only while a retry waits): no write unit on the
    # clean path; keys only, so a claim or a finish that changes other attributes writes none.
    (index,) = tasks_table["Properties"]["GlobalSecondaryIndexes"]
    assert index == {
        "IndexName": "retries",
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "retry_at", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    assert tasks_table["Properties"]["TimeToLiveSpecification"]["AttributeName"] == "expires_at"
    tasks_tables = [t for t in tables.values() if "/Tasks/" in t["Metadata"]["aws:cdk:path"]]
    assert len(tasks_tables) == 1, "every task shares the one tasks table"
    for task, construct in TASKS.items():
        variables = by_path(synthesized, "AWS::Lambda::Function", f"/{construct}/Function/")[
            "Properties"
        ]["Environment"]["Variables"]
        assert set(TaskEnv) <= set(variables)
        assert variables[TaskEnv.NAME] == task
        assert variables[TaskEnv.TABLE] == {"Ref": tasks_table["id"]}
        assert variables[TaskEnv.ORDERED] == str(task == "provision-tenant").lower()
        assert variables[TaskEnv.EVENT_BUS] == "default"
        assert variables[TaskEnv.COMPLETION_EVENTS] == ANNOUNCED[task]
        queue = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/Queue/")
        assert variables[TaskEnv.QUEUE_URL] == {"Ref": queue["id"]}


def test_each_task_function_touches_only_its_own_records_and_queues(
    synthesized: Synthesized,
) -> None:
    for task, construct in TASKS.items():
        function = by_path(synthesized, "AWS::Lambda::Function", f"/{construct}/Function/")
        statements = role_statements(synthesized, function["Properties"]["Role"]["Fn::GetAtt"][0])
        assert all("*" not in action for s in statements for action in actions(s))
        dynamo = [s for s in statements if any(a.startswith("dynamodb:") for a in actions(s))]
        assert [s["Condition"] for s in dynamo] == [
            {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TASK#{task}"]}}
        ]
        assert set(actions(dynamo[0])) == {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        }
        own = {
            json.dumps(
                {
                    "Fn::GetAtt": [
                        by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/{q}/")["id"],
                        "Arn",
                    ]
                }
            )
            for q in ("Queue", "DeadLetters")
        }
        sqs = [s for s in statements if any(a.startswith("sqs:") for a in actions(s))]
        assert {json.dumps(s["Resource"]) for s in sqs} == own
        (events,) = [s for s in statements if "events:PutEvents" in actions(s)]
        assert "event-bus/default" in json.dumps(events["Resource"])


def test_the_scheduler_role_only_sends_to_its_task_queues(synthesized: Synthesized) -> None:
    (group,) = synthesized.resources("AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"] == "Vigil-tasks"
    for construct in TASKS.values():
        role = by_path(synthesized, "AWS::IAM::Role", f"/{construct}/SchedulerRole/")
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
        assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
        queue = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/Queue/")
        dead = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/DeadLetters/")
        (statement,) = role_statements(synthesized, role["id"])
        assert statement["Action"] == "sqs:SendMessage"
        # The queue, and the dead-letter queue a schedule that cannot send leaves the task in
        assert sorted(r["Fn::GetAtt"][0] for r in statement["Resource"]) == sorted(
            [queue["id"], dead["id"]]
        )


def test_the_catalog_and_table_outputs(synthesized: Synthesized) -> None:
    outputs = synthesized.template["Outputs"]
    table = by_path(synthesized, "AWS::DynamoDB::Table", "/Tasks/Table")
    assert outputs["TasksTableName"]["Value"] == {"Ref": table["id"]}
    separator, parts = outputs["TasksCatalog"]["Value"]["Fn::Join"]
    entries = json.loads(separator.join(p if isinstance(p, str) else "ref" for p in parts))
    assert set(entries) == set(TASKS)
    for task, entry in entries.items():
        assert set(entry) == {field.value for field in CatalogField}
        assert entry[CatalogField.ORDERED] is (task == "provision-tenant")
        assert entry[CatalogField.SCHEDULE_GROUP] == "Vigil-tasks"
        assert entry[CatalogField.RETENTION_SECONDS] == 30 * 86_400
        assert entry[CatalogField.COMPLETION_EVENTS] == ANNOUNCED[task]


def test_the_management_api_routes_and_its_least_privilege(synthesized: Synthesized) -> None:
    function = by_path(synthesized, "AWS::Lambda::Function", "/TasksApi/Function/")
    assert function["Properties"]["Handler"] == "handlers.tasks_api.handler"
    variables = function["Properties"]["Environment"]["Variables"]
    assert {"VIGIL_TASKS_CATALOG", TaskEnv.TABLE} <= set(variables)
    resources = synthesized.resources("AWS::ApiGateway::Resource")
    paths = {r["Properties"]["PathPart"] for r in resources.values()}
    assert {"tasks", "{task}", "{id+}"} <= paths
    task_resources = {
        key for key, r in resources.items() if r["Properties"]["PathPart"] in ("{task}", "{id+}")
    }
    methods = {
        (m["Properties"]["HttpMethod"], m["Properties"]["ResourceId"]["Ref"])
        for m in synthesized.resources("AWS::ApiGateway::Method").values()
        if m["Properties"]["ResourceId"].get("Ref") in task_resources
    }
    assert sorted(method for method, _ in methods) == ["DELETE", "GET", "GET", "POST"]
    for method in synthesized.resources("AWS::ApiGateway::Method").values():
        if method["Properties"]["ResourceId"].get("Ref") in task_resources:
            assert method["Properties"]["AuthorizationType"] == "AWS_IAM"
    statements = role_statements(synthesized, function["Properties"]["Role"]["Fn::GetAtt"][0])
    dynamo, index = [s for s in statements if any(a.startswith("dynamodb:") for a in actions(s))]
    for statement in (dynamo, index):  # the records, and the audit's query of the retries index
        assert statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] == [
            "TASK#send-receipt",
            "TASK#provision-tenant",
        ]
    assert actions(index) == ["dynamodb:Query"] and "/index/retries" in json.dumps(index)
    (send,) = [s for s in statements if actions(s) == ["sqs:SendMessage"]]
    assert len(send["Resource"]) == 2
    schedules = {
        action: json.dumps(s["Resource"])
        for s in statements
        for action in actions(s)
        if action.startswith("scheduler:")
    }
    assert set(schedules) == {"scheduler:CreateSchedule", "scheduler:DeleteSchedule"}
    # Only these tasks' schedule names: not another task's (nor any schedule in the group);
    # deleting also under the legacy names, of their exact length (cancel finds both).
    for task in ("send-receipt", "provision-tenant"):
        for granted in schedules.values():
            assert f"schedule/Vigil-tasks/_{task}_*" in granted
        legacy = f"schedule/Vigil-tasks/{task}-{'?' * 40}"
        assert legacy in schedules["scheduler:DeleteSchedule"]
        assert legacy not in schedules["scheduler:CreateSchedule"]
    assert "schedule/Vigil-tasks/*" not in json.dumps(schedules)
    (passing,) = [s for s in statements if actions(s) == ["iam:PassRole"]]
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }
    assert len(passing["Resource"]) == 2


def test_each_task_alarms_on_queue_age_dead_letters_failures_and_lost_outcomes(
    synthesized: Synthesized,
) -> None:
    alarms = [
        a
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        if json.dumps(a["Properties"]["AlarmDescription"]).startswith('"Task ')
    ]
    assert len(alarms) == 6 * len(TASKS)
    for task in TASKS:
        own = [a for a in alarms if a["Properties"]["AlarmDescription"].startswith(f"Task {task}:")]
        by_metric = {
            name: {**a["Properties"], "dimensions": dims}
            for a in own
            for _, name, dims in alarm_series(a)
        }
        assert set(by_metric) == {
            "ApproximateAgeOfOldestMessage",
            "ApproximateNumberOfMessagesVisible",
            "TaskFailed",
            "TaskFinishUnrecorded",
            "TaskEventUnsent",
            "TaskRunUncertain",
        }
        assert by_metric["ApproximateAgeOfOldestMessage"]["Threshold"] > 0
        for metric in ("ApproximateNumberOfMessagesVisible", "TaskFailed"):
            description = by_metric[metric]["AlarmDescription"]
            assert f"`vigil tasks list {task} --status FAILED`" in description
            assert f"`vigil tasks redrive {task}`" in description
        assert ("task", task) in by_metric["TaskFailed"]["dimensions"]


def test_an_application_role_can_be_granted_enqueue_only_and_tasks_share_one_table() -> None:
    stack = Stack(App(), "App")
    first = BackgroundTask(stack, "SendReceipt", handler="tasks.send_receipt.handler")
    second = BackgroundTask(stack, "SendInvoice", handler="tasks.send_receipt.handler")
    assert first.table is second.table
    application = iam.Role(stack, "Application", assumed_by=iam.AccountRootPrincipal())
    first.grant_enqueue(application)
    kinds = [type(c).__name__ for c in stack.node.children]
    assert kinds.count("TasksTable") == 1 and kinds.count("ScheduleGroup") == 1
    policy = application.node.find_child("DefaultPolicy")
    assert isinstance(policy, iam.Policy)
    granted = stack.resolve(policy.document.to_json())["Statement"]
    assert sorted(a for s in granted for a in actions(s)) == [
        "dynamodb:PutItem",
        "iam:PassRole",
        "scheduler:CreateSchedule",
        "sqs:SendMessage",
    ]
    (records,) = [s for s in granted if actions(s) == ["dynamodb:PutItem"]]
    assert records["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["TASK#send-receipt"]}
    }


def test_a_task_that_announces_nothing_may_not_put_events() -> None:
    stack = Stack(App(), "App")
    grants = {}
    for choice in CompletionEvents:
        task = BackgroundTask(
            stack, f"Announce{choice.name}", handler=VALID["handler"], completion_events=choice
        )
        policy = task.function.role.node.find_child("DefaultPolicy")  # type: ignore[union-attr]
        assert isinstance(policy, iam.Policy)
        statements = stack.resolve(policy.document.to_json())["Statement"]
        grants[choice] = any("events:PutEvents" in actions(s) for s in statements)
    assert grants == {
        CompletionEvents.ALL: True,
        CompletionEvents.FAILURES: True,
        CompletionEvents.NONE: False,
    }


def test_a_stack_without_tasks_has_an_empty_catalog_and_no_tasks_resources() -> None:
    stack = VigilStack(App(), "Plain", declare_jobs=lambda scope, runs: [])
    template = Template.from_stack(stack).to_json()
    assert template["Outputs"]["TasksCatalog"]["Value"] == "{}"
    assert "TasksTableName" not in template["Outputs"]
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::Lambda::EventSourceMapping" not in kinds
    assert "AWS::Scheduler::ScheduleGroup" not in kinds


VALID: dict[str, Any] = {"handler": "tasks.send_receipt.handler"}


@pytest.mark.parametrize(
    ("overrides", "parameter", "fragment"),
    [
        ({"timeout": Duration.minutes(16)}, "timeout", "15 minutes"),
        ({"timeout": Duration.seconds(0)}, "timeout", "1 s"),
        ({"timeout": Duration.millis(1500)}, "timeout", "whole seconds"),
        ({"concurrency": 1}, "concurrency", "2-1000"),
        ({"concurrency": 1001}, "concurrency", "2-1000"),
        ({"retries": -1}, "retries", "0-10"),
        ({"retries": 11}, "retries", "0-10"),
        ({"backoff": Duration.hours(13)}, "backoff", "12 hours"),
        ({"batch_size": 0}, "batch_size", "1-10000"),
        ({"batch_size": 10_001, "batching_window": Duration.seconds(1)}, "batch_size", "1-10000"),
        ({"batch_size": 11, "ordered": True}, "batch_size", "1-10, what SQS allows a FIFO"),
        ({"batch_size": 100}, "batching_window", "at least 1 s for a batch size over 10"),
        ({"batching_window": Duration.minutes(6)}, "batching_window", "0-300"),
        ({"batching_window": Duration.seconds(1), "ordered": True}, "batching_window", "FIFO"),
        (
            {"timeout": Duration.minutes(1), "visibility_timeout": Duration.minutes(5)},
            "visibility_timeout",
            "6 x the timeout",
        ),
        ({"retention": Duration.days(7)}, "retention", "at least 14 days"),
        ({"memory_size": 64}, "memory_size", "128-10240"),
        ({"lease_margin": Duration.seconds(0)}, "lease_margin", "clock skew"),
        (
            {"timeout": Duration.seconds(5), "lease_margin": Duration.seconds(5)},
            "lease_margin",
            "below the timeout",
        ),
        ({"max_queue_age": Duration.seconds(30)}, "max_queue_age", "60 s"),
        ({"handler": "tasks.nope.handler"}, "handler", "no module 'tasks.nope'"),
        ({"handler": "tasks.send_receipt.missing"}, "handler", "defines no 'missing'"),
        ({"task_name": "Bad_Name"}, "task_name", "must match"),
        (
            {"completion_events": "successes"},
            "completion_events",
            "'successes' is not one of ['all', 'failures', 'none']",
        ),
    ],
)
def test_invalid_parameters_fail_the_synth_naming_the_task_and_the_parameter(
    overrides: dict[str, Any], parameter: str, fragment: str
) -> None:
    stack = Stack(App(), "Test")
    with pytest.raises(ConfigurationError) as raised:
        BackgroundTask(stack, "SendReceipt", **{**VALID, **overrides})
    message = str(raised.value)
    name = overrides.get("task_name", "send-receipt")
    assert f"BackgroundTask 'SendReceipt' (task {name})" in message
    assert f"invalid {parameter}" in message
    assert fragment in message
    assert raised.value.parameter == parameter


def test_a_longer_visibility_timeout_is_accepted() -> None:
    stack = Stack(App(), "Test")
    task = BackgroundTask(
        stack,
        "SendReceipt",
        handler="tasks.send_receipt.handler",
        timeout=Duration.minutes(1),
        visibility_timeout=Duration.minutes(10),
    )
    assert task.visibility_timeout_seconds == 600


def test_the_emulator_names_fifo_queues_as_cloudformation_does(synthesized: Synthesized) -> None:
    """moto names a FIFO queue without ``.fifo`` and then refuses it: the stack did not deploy."""
    named = _with_fifo_queue_names(synthesized.template, "Vigil")["Resources"]
    for logical_id, resource in synthesized.resources("AWS::SQS::Queue").items():
        name = named[logical_id]["Properties"].get("QueueName")
        if resource["Properties"].get("FifoQueue"):
            assert name.endswith(".fifo") and len(name) <= 80
        else:
            assert name is None
    for resource in synthesized.resources("AWS::SQS::Queue").values():
        assert "QueueName" not in resource["Properties"], "the template itself is unchanged"


def test_a_task_that_announces_nothing_has_no_unsent_event_alarm() -> None:
    stack = Stack(App(), "App")
    tasks = [
        BackgroundTask(stack, f"Announce{c.name}", handler=VALID["handler"], completion_events=c)
        for c in CompletionEvents
    ]
    monitoring = Monitoring(stack, "Monitoring", jobs=[], tasks=tasks)
    unsent = sorted(a.node.id for a in monitoring.alarms if a.node.id.endswith("event-unsent"))
    assert unsent == sorted(f"task-{t.task_name}-event-unsent" for t in tasks[:2]), unsent
