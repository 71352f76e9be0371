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
from infra.roles import InlineRole
from infra.stack import VigilStack
from tests.helpers.monitoring import alarm_series
from tests.helpers.templates import (
    actions,
    catalog,
    everywhere,
    find,
    from_parent,
    function_role,
    role_statements,
)
from vigil.contract.layout import CONSTRUCT_FIELD
from vigil.contract.tasks import CatalogField, CompletionEvents, TaskEnv
from vigil_tools.emulator.deploy import _with_queue_names
from vigil_tools.emulator.template import Synthesized

TASKS = {
    "send-receipt": "SendReceipt",
    "provision-tenant": "ProvisionTenant",
    "onboard-tenant": "OnboardTenant",
}
ANNOUNCED = {"send-receipt": "all", "provision-tenant": "all", "onboard-tenant": "all"}
"""The example's choices: both are subscribed to (the default, "failures", is in the tests of
the construct alone)."""
LEVELS = {"send-receipt": {"high": "QueueHigh"}}
"""The example's priority levels, each with its queue's construct id: a resent receipt jumps
the queue."""


def queues_of(synthesized: Synthesized, task: str, construct: str) -> list[dict[str, Any]]:
    """The task's own queue, then each level's."""
    ids = ["Queue", *LEVELS.get(task, {}).values()]
    return [by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/{q}/") for q in ids]


def by_path(synthesized: Synthesized, resource_type: str, part: str) -> dict[str, Any]:
    return find(synthesized, resource_type, part)


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
    expected = {"send-receipt": (10, 5), "provision-tenant": (1, 2), "onboard-tenant": (10, 5)}
    mappings = everywhere(synthesized, "AWS::Lambda::EventSourceMapping")
    for task, construct in TASKS.items():
        function = [
            m["Properties"]
            for m in mappings
            if f"/{construct}/Function/" in m["Metadata"]["aws:cdk:path"]
        ]
        # One mapping per queue: each level is polled on its own, beside the normal backlog
        queues = queues_of(synthesized, task, construct)
        assert sorted(m["EventSourceArn"]["Fn::GetAtt"][0] for m in function) == sorted(
            q["id"] for q in queues
        )
        for mapping in function:
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            batch, concurrency = expected[task]
            assert mapping["BatchSize"] == batch
            assert mapping["ScalingConfig"] == {"MaximumConcurrency": concurrency}
            # FIFO event sources take no batching window
            assert ("MaximumBatchingWindowInSeconds" in mapping) is (task != "provision-tenant")


def test_the_function_environment_is_the_task_contract(synthesized: Synthesized) -> None:
    tables = synthesized.resources("AWS::DynamoDB::Table")
    tasks_table = by_path(synthesized, "AWS::DynamoDB::Table", "/Tasks/Table")
    # Two indexes, both sparse: retry_at is set only while a retry waits (no write unit on the
    # clean path), deadline only from the first claim to the end of a task that declares
    # max_duration (none for the others); keys only, so a claim or a finish that changes other
    # attributes writes none.
    assert tasks_table["Properties"]["GlobalSecondaryIndexes"] == [
        {
            "IndexName": index,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": sort_key, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
        for index, sort_key in (("retries", "retry_at"), ("deadlines", "deadline"))
    ]
    assert tasks_table["Properties"]["TimeToLiveSpecification"]["AttributeName"] == "expires_at"
    tasks_tables = [t for t in tables.values() if "/Tasks/" in t["Metadata"]["aws:cdk:path"]]
    assert len(tasks_tables) == 1, "every task shares the one tasks table"
    for task, construct in TASKS.items():
        function = by_path(synthesized, "AWS::Lambda::Function", f"/{construct}/Function/")
        variables = function["Properties"]["Environment"]["Variables"]
        # rate_limit, priorities and max_duration: when declared (onboard-tenant: 7 days)
        optional = {TaskEnv.RATE_LIMIT, TaskEnv.PRIORITY_QUEUE_URLS, TaskEnv.MAX_DURATION_SECONDS}
        assert set(TaskEnv) - optional <= set(variables)
        assert variables.get(TaskEnv.MAX_DURATION_SECONDS) == (
            str(7 * 86_400) if task == "onboard-tenant" else None
        )
        assert variables[TaskEnv.NAME] == task
        table = from_parent(synthesized, function["stack"], variables[TaskEnv.TABLE])
        assert table == {"Ref": tasks_table["id"]}
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
        statements = role_statements(function["stack"], function_role(function))
        assert all("*" not in action for s in statements for action in actions(s))
        own_logs = [s for s in statements if any(a.startswith("logs:") for a in actions(s))]
        assert [actions(s) for s in own_logs] == [["logs:CreateLogStream"], ["logs:PutLogEvents"]]
        assert f"/Vigil_task_{task}[*" in json.dumps(own_logs[1]["Resource"])
        dynamo = [s for s in statements if any(a.startswith("dynamodb:") for a in actions(s))]
        assert [s["Condition"] for s in dynamo] == [
            {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"TASK#{task}"]}},
            # A flow's journal: its own partitions (``TASK#<task>/<id>``), read back by Query.
            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"TASK#{task}/*"]}},
        ]
        assert "dynamodb:Query" in actions(dynamo[1])
        assert set(actions(dynamo[0])) == {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        }
        own = {
            json.dumps({"Fn::GetAtt": [q["id"], "Arn"]})
            for q in [
                *queues_of(synthesized, task, construct),
                by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/DeadLetters/"),
            ]
        }
        sqs = [s for s in statements if any(a.startswith("sqs:") for a in actions(s))]
        named = {
            json.dumps(resource)
            for s in sqs
            for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        }
        assert named == own
        (events,) = [s for s in statements if "events:PutEvents" in actions(s)]
        assert "event-bus/default" in json.dumps(events["Resource"])


def test_the_scheduler_role_only_sends_to_its_task_queues(synthesized: Synthesized) -> None:
    (group,) = synthesized.resources("AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"] == "Vigil-tasks"
    for task, construct in TASKS.items():
        role = by_path(synthesized, "AWS::IAM::Role", f"/{construct}/SchedulerRole/")
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
        assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
        queues = queues_of(synthesized, task, construct)
        dead = by_path(synthesized, "AWS::SQS::Queue", f"/{construct}/DeadLetters/")
        assert role["Properties"]["Path"] == "/vigil/Vigil/us-east-1/task-schedules/"
        (statement,) = role_statements(role["stack"], role["id"])
        assert statement["Action"] == "sqs:SendMessage"
        # The queues (its levels' too), and the dead-letter queue a schedule that cannot send
        # leaves the task in
        assert sorted(r["Fn::GetAtt"][0] for r in statement["Resource"]) == sorted(
            [*(q["id"] for q in queues), dead["id"]]
        )


def test_the_catalog_and_table_outputs(synthesized: Synthesized) -> None:
    outputs = synthesized.template["Outputs"]
    table = by_path(synthesized, "AWS::DynamoDB::Table", "/Tasks/Table")
    assert outputs["TasksTableName"]["Value"] == {"Ref": table["id"]}
    assert outputs["CatalogPath"]["Value"] == "/vigil/Vigil"
    tasks = catalog(synthesized, "tasks")
    assert tasks["shared"] == {
        CatalogField.TABLE: "ref",
        CatalogField.SCHEDULE_GROUP: "Vigil-tasks",
    }
    assert set(tasks["entries"]) == set(TASKS)
    for task, entry in tasks["entries"].items():
        # only a task with levels has their queues; only one that declares max_duration the second
        optional = set() if task in LEVELS else {CatalogField.PRIORITY_QUEUE_URLS.value}
        if task != "onboard-tenant":
            optional.add(CatalogField.MAX_DURATION_SECONDS.value)
        assert set(entry) | set(tasks["shared"]) == (
            {field.value for field in CatalogField} - optional
        ) | {CONSTRUCT_FIELD}
        assert set(entry.get(CatalogField.PRIORITY_QUEUE_URLS, {})) == set(LEVELS.get(task, {}))
        assert entry[CONSTRUCT_FIELD] == TASKS[task], "what upgrade drain finds old queues by"
        assert entry[CatalogField.ORDERED] is (task == "provision-tenant")
        assert entry[CatalogField.RETENTION_SECONDS] == 30 * 86_400
        assert entry[CatalogField.COMPLETION_EVENTS] == ANNOUNCED[task]
        assert entry[CatalogField.FUNCTION] == f"Vigil_task_{task}"


def test_the_management_api_routes_and_its_least_privilege(synthesized: Synthesized) -> None:
    function = by_path(synthesized, "AWS::Lambda::Function", "/TasksApi/Function/")
    assert function["Properties"]["Handler"] == "handlers.tasks_api.handler"
    variables = function["Properties"]["Environment"]["Variables"]
    assert {"VIGIL_STACK", "VIGIL_CATALOG_DIGEST", TaskEnv.TABLE} <= set(variables)
    assert "VIGIL_TASKS_CATALOG" not in variables, "it grew past Lambda's 4 KB at 7 tasks"
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
    # POST twice: enqueue, and a flow's signal (under the greedy id).
    assert sorted(method for method, _ in methods) == ["DELETE", "GET", "GET", "POST", "POST"]
    for method in synthesized.resources("AWS::ApiGateway::Method").values():
        if method["Properties"]["ResourceId"].get("Ref") in task_resources:
            assert method["Properties"]["AuthorizationType"] == "AWS_IAM"
    # One statement each, whatever the number of tasks: the stack's tasks' records (and the
    # audit's query of their retries and deadlines indexes), its group of one-time schedules, the roles under its
    # path of scheduler roles, its catalog.
    statements = role_statements(synthesized, function_role(function))
    dynamo, index = sorted(
        (s for s in statements if any(a.startswith("dynamodb:") for a in actions(s))),
        key=lambda s: -len(actions(s)),
    )
    for statement in (dynamo, index):
        assert statement["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TASK#*"]}
        }
    assert actions(index) == ["dynamodb:Query"]
    assert "/index/retries" in json.dumps(index) and "/index/deadlines" in json.dumps(index)
    (schedules,) = [s for s in statements if any(a.startswith("scheduler:") for a in actions(s))]
    assert set(actions(schedules)) == {"scheduler:CreateSchedule", "scheduler:DeleteSchedule"}
    assert "schedule/Vigil-tasks/*" in json.dumps(schedules["Resource"])
    (passing,) = [s for s in statements if actions(s) == ["iam:PassRole"]]
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }
    assert "role/vigil/Vigil/us-east-1/task-schedules/*" in json.dumps(passing["Resource"])
    assert not [s for s in statements if any(a.startswith("sqs:") for a in actions(s))]
    # Sending to a task's queue comes from that queue's own policy, which names the API's role.
    for construct in TASKS.values():
        policy = by_path(synthesized, "AWS::SQS::QueuePolicy", f"/{construct}/QueuesPolicy/")
        (send,) = [
            s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
        ]
        assert send["Action"] == "sqs:SendMessage"
        principal = from_parent(synthesized, policy["stack"], send["Principal"]["AWS"])
        assert principal == {"Fn::GetAtt": [function_role(function), "Arn"]}


def test_each_task_alarms_on_its_queue_and_the_stack_on_every_tasks_failures(
    synthesized: Synthesized,
) -> None:
    for task, construct in TASKS.items():
        alarm = by_path(synthesized, "AWS::CloudWatch::Alarm", f"/{construct}/QueueAlarm/")
        props = alarm["Properties"]
        assert {name for _, name, _ in alarm_series(alarm)} == {
            "ApproximateAgeOfOldestMessage",
            "ApproximateNumberOfMessagesVisible",
        }
        (expression,) = [q["Expression"] for q in props["Metrics"] if "Expression" in q]
        assert expression.startswith("IF(FILL(age, 0) > ") and "FILL(dead, 0) > 0" in expression
        assert f"`vigil tasks redrive {task}`" in json.dumps(props["AlarmDescription"])
    insights = {
        json.dumps(q["Expression"])
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        for q in a["Properties"].get("Metrics", [])
        if str(q.get("Expression", "")).startswith("SELECT")
    }
    for metric in ("TaskFailed", "TaskFinishUnrecorded", "TaskEventUnsent", "TaskRunUncertain"):
        (query,) = [q for q in insights if f'SUM(\\"{metric}\\")' in q]
        assert "GROUP BY task" in query


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
        "dynamodb:BatchGetItem",  # enqueue_many reads its keys' records, 100 a request
        "dynamodb:GetItem",  # a keyed enqueue reads its key's record first (one key, one request)
        "dynamodb:PutItem",
        "iam:PassRole",
        "scheduler:CreateSchedule",
        "sqs:SendMessage",
    ]
    (records,) = [s for s in granted if "dynamodb:PutItem" in actions(s)]
    assert records["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["TASK#send-receipt"]}
    }


def test_grant_read_gives_get_and_wait_their_records_and_results_and_nothing_else() -> None:
    stack = Stack(App(), "App")
    task = BackgroundTask(stack, "SendReceipt", handler="tasks.send_receipt.handler")
    BackgroundTask(stack, "SendInvoice", handler="tasks.send_receipt.handler")
    web = iam.Role(stack, "Web", assumed_by=iam.AccountRootPrincipal())
    task.grant_read(web)
    policy = web.node.find_child("DefaultPolicy")
    assert isinstance(policy, iam.Policy)
    granted = stack.resolve(policy.document.to_json())["Statement"]
    assert sorted(a for s in granted for a in actions(s)) == [
        "dynamodb:GetItem",
        "dynamodb:Query",
        "s3:GetObject",
    ]
    (records,) = [s for s in granted if actions(s) == ["dynamodb:GetItem"]]
    assert records["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["TASK#send-receipt"]}
    }
    (journal,) = [s for s in granted if actions(s) == ["dynamodb:Query"]]
    assert journal["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TASK#send-receipt/*"]}
    }  # get's step timeline of a flow: its own journal only
    (results,) = [s for s in granted if actions(s) == ["s3:GetObject"]]
    assert json.dumps(results["Resource"]).endswith('"/send-receipt/*"]]}')


def test_a_task_that_announces_nothing_may_not_put_events() -> None:
    stack = Stack(App(), "App")
    grants = {}
    for choice in CompletionEvents:
        task = BackgroundTask(
            stack, f"Announce{choice.name}", handler=VALID["handler"], completion_events=choice
        )
        role = task.function.role
        assert isinstance(role, InlineRole)
        statements = Stack.of(task).resolve(role.document.to_json())["Statement"]
        grants[choice] = any("events:PutEvents" in actions(s) for s in statements)
    assert grants == {
        CompletionEvents.ALL: True,
        CompletionEvents.FAILURES: True,
        CompletionEvents.NONE: False,
    }


def test_a_stack_without_tasks_has_an_empty_catalog_and_no_tasks_resources() -> None:
    stack = VigilStack(App(), "Plain", declare_jobs=lambda scope, runs: [])
    template = Template.from_stack(stack).to_json()
    assert not stack.tasks_catalog.parameters
    assert "TasksTableName" not in template["Outputs"]
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::CloudFormation::Stack" not in kinds, "no shard without a job or task"
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
        ({"max_duration": Duration.seconds(60)}, "max_duration", "300 s (the tasks audit's"),
        ({"max_duration": Duration.days(366)}, "max_duration", "to 365 days"),
        ({"max_duration": Duration.millis(300_500)}, "max_duration", "must be whole seconds"),
        ({"max_duration": "6h"}, "max_duration", "'6h' is not a Duration"),
        ({"handler": "tasks.nope.handler"}, "handler", "no module 'tasks.nope'"),
        ({"handler": "tasks.send_receipt.missing"}, "handler", "defines no 'missing'"),
        ({"task_name": "Bad_Name"}, "task_name", "must match"),
        (
            {"completion_events": "successes"},
            "completion_events",
            "'successes' is not one of ['all', 'failures', 'none']",
        ),
        ({"rate_limit": "100/fortnight"}, "rate_limit", "N/second, N/minute or N/hour"),
        ({"rate_limit": "0/minute"}, "rate_limit", "N at least 1"),
        ({"rate_limit": "5000/second"}, "rate_limit", "over 250 starts a second"),
        ({"priorities": ("high",), "ordered": True}, "priorities", "an ordered task cannot"),
        ({"priorities": ("High",)}, "priorities", "must match"),
        ({"priorities": ("normal",)}, "priorities", "the task's own queue"),
        ({"priorities": ("high", "high")}, "priorities", "names a level twice"),
        ({"priorities": "high"}, "priorities", "a sequence of level names"),
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


def test_the_emulator_names_queues_as_cloudformation_does(synthesized: Synthesized) -> None:
    """moto names a FIFO queue without ``.fifo`` and then refuses it, and cuts a nested stack's
    queue names before they differ: the stack did not deploy."""
    names: list[str] = []
    for path, stack in synthesized.stacks():
        named = _with_queue_names(stack.template, "Vigil-" + "-".join(path), bool(path))
        for logical_id, resource in stack.resources("AWS::SQS::Queue").items():
            name = named["Resources"][logical_id]["Properties"].get("QueueName")
            if resource["Properties"].get("FifoQueue"):
                assert name.endswith(".fifo") and len(name) <= 80
            elif not path:
                assert name is None
            if name:
                names.append(name)
            assert "QueueName" not in resource["Properties"], "the template itself is unchanged"
    assert len(names) == len(set(names))


def test_a_task_that_announces_nothing_has_no_unsent_event_alarm() -> None:
    def unsent(*choices: CompletionEvents) -> list[str]:
        stack = Stack(App(), "App")
        tasks = [
            BackgroundTask(
                stack, f"Announce{c.name}", handler=VALID["handler"], completion_events=c
            )
            for c in choices
        ]
        monitoring = Monitoring(stack, "Monitoring", jobs=[], tasks=tasks)
        return [a.node.id for a in monitoring.alarms if a.node.id.endswith("event-unsent")]

    assert unsent(*CompletionEvents) == ["task-event-unsent"], "one alarm for every task"
    assert unsent(CompletionEvents.NONE) == []


def test_max_duration_reaches_the_function_and_the_catalog_and_declares_one_stuck_alarm() -> None:
    """About 1 s: two constructs. The stack's one task-stuck alarm (each task a contributor)
    exists once some task declares max_duration; a task without it changes nothing."""
    stack = Stack(App(), "App")
    flow = BackgroundTask(stack, "Onboard", **VALID, max_duration=Duration.days(7))
    plain = BackgroundTask(stack, "SendReceipt", **VALID)
    (variables,) = [
        r["Properties"]["Environment"]["Variables"]
        for r in Template.from_stack(flow.shard).to_json()["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert variables[TaskEnv.MAX_DURATION_SECONDS] == str(7 * 86_400)
    assert stack.resolve(flow.catalog_entry())[CatalogField.MAX_DURATION_SECONDS] == 7 * 86_400
    assert flow.catalog_fields()[CatalogField.MAX_DURATION_SECONDS] == 7 * 86_400
    assert CatalogField.MAX_DURATION_SECONDS not in stack.resolve(plain.catalog_entry())
    assert CatalogField.MAX_DURATION_SECONDS not in plain.catalog_fields()

    def stuck_alarms(*limits: Duration | None) -> list[str]:
        scope = Stack(App(), "Other")
        tasks = [
            BackgroundTask(scope, f"Task{n}", **VALID, max_duration=limit)
            for n, limit in enumerate(limits)
        ]
        monitoring = Monitoring(scope, "Monitoring", jobs=[], tasks=tasks)
        return [a.node.id for a in monitoring.alarms if a.node.id == "task-stuck"]

    assert stuck_alarms(Duration.days(7), None) == ["task-stuck"]
    assert stuck_alarms(None) == []


def test_a_rate_limit_reaches_the_function_and_grants_its_limiters_partition_only() -> None:
    """About 0.5 s: one construct, its template read without the stack's other tasks."""
    from aws_cdk.assertions import Template

    stack = Stack(App(), "Test")
    task = BackgroundTask(stack, "SendReceipt", **VALID, rate_limit="100/m")
    template = Template.from_stack(task.shard).to_json()
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    (variables,) = [f["Properties"]["Environment"]["Variables"] for f in functions]
    assert variables[TaskEnv.RATE_LIMIT] == "100/minute"
    text = json.dumps(template)
    assert '"RATE#send-receipt"' in text and '"RATE#*"' not in text


def test_each_priority_level_is_its_own_queue_and_event_source_sharing_the_dead_letters() -> None:
    """About 1 s: one construct's shard. 2 resources a level (queue, mapping); the catalog, the
    function's environment, the enqueue grant and the scheduler role carry each level's queue."""
    plain = BackgroundTask(Stack(App(), "Plain"), "SendReceipt", **VALID)
    stack = Stack(App(), "Test")
    task = BackgroundTask(stack, "SendReceipt", **VALID, priorities=("high", "urgent-ops"))
    count = len(Template.from_stack(plain.shard).to_json()["Resources"])
    resources = Template.from_stack(task.shard).to_json()["Resources"]
    assert len(resources) == count + 2 * 2  # 2 levels x (queue, event source mapping)
    queues = {k: r for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    high = [k for k in queues if "SendReceiptQueueHigh" in k]
    assert len(high) == 1 and any("SendReceiptQueueUrgentOps" in k for k in queues)
    dead = [k for k in queues if "SendReceiptDeadLetters" in k]
    redrive = queues[high[0]]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dead[0], "Arn"]}
    mappings = [r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    sources = [json.dumps(m["Properties"]["EventSourceArn"]) for m in mappings]
    assert sum("SendReceipt" in s for s in sources) == 3
    assert all(m["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 10} for m in mappings)
    (variables,) = [
        r["Properties"]["Environment"]["Variables"]
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and "SendReceipt" in k
    ]
    assert "high" in json.dumps(variables[TaskEnv.PRIORITY_QUEUE_URLS])
    entry = stack.resolve(task.catalog_entry())
    assert set(entry[CatalogField.PRIORITY_QUEUE_URLS]) == {"high", "urgent-ops"}
    assert CatalogField.PRIORITY_QUEUE_URLS not in Stack.of(plain).resolve(plain.catalog_entry())
    application = iam.Role(stack, "Application", assumed_by=iam.AccountRootPrincipal())
    task.grant_enqueue(application)
    policy = application.node.find_child("DefaultPolicy")
    assert isinstance(policy, iam.Policy)
    granted = stack.resolve(policy.document.to_json())["Statement"]
    (send,) = [s for s in granted if actions(s) == ["sqs:SendMessage"]]
    assert len(send["Resource"]) == 3
    scheduler = stack.resolve(task.scheduler_role.document.to_json())["Statement"]
    (sends,) = [s for s in scheduler if actions(s) == ["sqs:SendMessage"]]
    assert len(sends["Resource"]) == 4  # three work queues and the dead letters


def test_a_prioritized_tasks_catalog_entry_renders_and_measures_its_levels_queues() -> None:
    """About 0.5 s. The levels' URLs are filled in at deploy inside an object: the catalog's
    part renders them, sizes them at their longest and keeps them out of what is declared."""
    from infra.catalogs import declared, longest, rendered

    task = BackgroundTask(Stack(App(), "Test"), "SendReceipt", **VALID, priorities=("high",))
    fields = task.catalog_fields()
    json.dumps(Stack.of(task).resolve(rendered(fields)))
    plain = BackgroundTask(Stack(App(), "Plain"), "SendReceipt", **VALID)
    assert longest("send-receipt", fields) > longest("send-receipt", plain.catalog_fields())
    assert (
        CatalogField.PRIORITY_QUEUE_URLS not in declared({"send-receipt": fields})["send-receipt"]
    )
