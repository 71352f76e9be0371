"""The console an operator gets: alarms that notify, a dashboard that covers everything, queries,
access logs, retained data, retention on every log group (IAM wildcards: test_iam_wildcards.py)."""

from __future__ import annotations

import json
import re
import shlex
from enum import StrEnum
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk.assertions import Match, Template

from infra.alarms import TOKEN_WORST_LENGTH, alarm_above_zero
from infra.errors import ConfigurationError
from infra.monitoring import Monitoring
from infra.queues import dead_letter_queue
from infra.runs_table import JobRunsTable
from tests.helpers.monitoring import dashboard_widgets, shard_dashboards, widget_series
from tests.helpers.templates import everywhere
from vigil.contract.alarms import ALARMS, DESCRIPTION_LIMIT, RUNBOOKS, Alarm
from vigil_tools.emulator.template import Synthesized


def logical_id(synthesized: Synthesized, resource_type: str, path_part: str) -> str:
    (found,) = [
        key
        for key, r in synthesized.resources(resource_type).items()
        if path_part in r["Metadata"]["aws:cdk:path"]
    ]
    return found


def test_every_alarm_tells_the_topic_on_alarm_and_on_ok(synthesized: Synthesized) -> None:
    (topic,) = synthesized.resources("AWS::SNS::Topic")
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    assert len(alarms) >= 15
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
    outputs = synthesized.template["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": topic}
    (policy,) = synthesized.resources("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"} for s in statements)


def test_an_alarm_email_from_context_subscribes_and_a_bad_one_fails_the_synth() -> None:
    stack = Stack(App(context={"alarmEmail": "ops@example.com"}), "Mailed")
    Monitoring(stack, "Monitoring", jobs=[])
    Template.from_stack(stack).has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    quiet = Stack(App(), "Quiet")
    Monitoring(quiet, "Monitoring", jobs=[])
    Template.from_stack(quiet).resource_count_is("AWS::SNS::Subscription", 0)
    with pytest.raises(ConfigurationError, match="alarmEmail"):
        Monitoring(Stack(App(context={"alarmEmail": "nobody"}), "Bad"), "Monitoring", jobs=[])


def test_the_new_alarms_watch_failed_observers_shortfall_reconciler_and_api(
    synthesized: Synthesized,
) -> None:
    alarms = {
        r["Metadata"]["aws:cdk:path"].split("/")[-2]: r["Properties"]
        for r in synthesized.resources("AWS::CloudWatch::Alarm").values()
    }
    assert alarms["ObserversInFailedAlarm"]["MetricName"] == "FleetFailed"
    shortfall = alarms["FleetShortfallAlarm"]
    assert shortfall["EvaluationPeriods"] == shortfall["DatapointsToAlarm"] == 5
    (expression,) = [q for q in shortfall["Metrics"] if "Expression" in q]
    # Observers in a planned hand-over (a rollout within max_unavailable) are not missing
    assert expression["Expression"] == "desired - running - FILL(handover, 0)"
    names = {
        q["MetricStat"]["Metric"]["MetricName"]
        for q in shortfall["Metrics"]
        if "Id" in q and "MetricStat" in q
    }
    assert names == {"FleetDesiredRunning", "FleetRunning", "FleetHandingOver"}
    assert alarms["ReconcilerErrorsAlarm"]["MetricName"] == "Errors"
    assert alarms["Api5xxAlarm"]["MetricName"] == "5XXError"
    assert alarms["ReconcilerFailuresAlarm"]["MetricName"] == "ApproximateNumberOfMessagesVisible"


def test_states_that_can_stick_alarm_after_three_passes_and_say_what_to_type(
    synthesized: Synthesized,
) -> None:
    alarms = {
        r["Metadata"]["aws:cdk:path"].split("/")[-2]: r["Properties"]
        for r in synthesized.resources("AWS::CloudWatch::Alarm").values()
    }
    for alarm, metric in (
        ("ResyncSkippedAlarm", "ResyncSkipped"),
        ("ObserverErrorsAlarm", "ReconcilePassErrors"),
        ("StopNotCompletedAlarm", "ObserverStopFailed"),
        ("HeartbeatStaleAlarm", "ObserverHeartbeatStale"),
    ):
        props = alarms[alarm]
        assert props["MetricName"] == metric and props["Period"] == 60
        assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == 3
        description = json.dumps(props["AlarmDescription"])
        assert "`vigil observers" in description or "`aws dynamodb" in description, alarm
    titles = {w["properties"].get("title") for w in dashboard_widgets(synthesized)}
    assert "observers: stuck states (per minute; alarmed after 3 in a row)" in titles


def test_the_reconciler_falling_behind_the_registry_stream_alarms_and_shows(
    synthesized: Synthesized,
) -> None:
    reconciler = logical_id(synthesized, "AWS::Lambda::Function", "Observers/Reconciler/")
    (alarm,) = [
        r["Properties"]
        for r in synthesized.resources("AWS::CloudWatch::Alarm").values()
        if r["Properties"].get("MetricName") == "IteratorAge"
    ]
    assert alarm["Namespace"] == "AWS/Lambda" and alarm["Statistic"] == "Maximum"
    assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": reconciler}}]
    assert alarm["Threshold"] == 300_000 and alarm["Period"] == 60
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == 3
    assert "`aws lambda list-event-source-mappings" in json.dumps(alarm["AlarmDescription"])
    (widget,) = [
        w
        for w in dashboard_widgets(synthesized)
        if w["properties"].get("title") == "reconciler: registry stream iterator age (ms)"
    ]
    assert [name for _, name, _ in widget_series(widget)] == ["IteratorAge"]


def test_the_reconcilers_failed_events_go_to_a_queue(synthesized: Synthesized) -> None:
    reconciler = logical_id(synthesized, "AWS::Lambda::Function", "Observers/Reconciler/")
    queue = logical_id(synthesized, "AWS::SQS::Queue", "Observers/ReconcilerFailures/")
    (config,) = [
        c["Properties"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": reconciler}
    ]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue, "Arn"]}


def test_the_dashboards_cover_every_job_task_function_queue_kind_the_api_and_the_fleet(
    synthesized: Synthesized,
) -> None:
    widgets = dashboard_widgets(synthesized)
    titles = {w["properties"].get("title") for w in widgets}
    for label in ("jobs control", "tasks API", "reconciler", "API function"):
        assert {
            f"{label}: invocations, errors, throttles",
            f"{label}: duration (ms)",
            f"{label}: concurrent executions",
        } <= titles
    assert {
        "jobs failing now (the 10 most, per metric)",
        "tasks failing now (the 10 most, per metric)",
        "observers: desired against running",
        "observers by status",
        "observers: oldest heartbeat of a RUNNING one (s)",
        "observers API: requests, 4XX, 5XX",
        "observers API: latency (ms)",
        "kind ticker: CPU (units)",
        "kind ticker: memory (MiB)",
    } <= titles
    shards = shard_dashboards(synthesized)
    assert sorted(shards) == [
        f"Vigil-{kind}-{n}-us-east-1"
        for kind, n in (("jobs", 3), ("jobs", 5), ("tasks", 0), ("tasks", 6))
    ]
    shard_titles = {w["properties"].get("title") for found in shards.values() for w in found}
    for job in ("cleanup", "daily-report"):
        assert {
            f"{job}: ticks that did not succeed",
            f"{job}: runs",
            f"{job}: dead letters",
        } <= shard_titles
    for task in ("send-receipt", "provision-tenant", "onboard-tenant"):
        assert {
            f"task {task}: outcomes",
            f"task {task}: queue",
            f"task {task}: runs",
        } <= shard_titles
    console = dashboard_widgets(synthesized, console=True)  # the console's functions
    every = widgets + console + [w for found in shards.values() for w in found]
    series = [s for w in every for s in widget_series(w)]
    read = {name for _, name, _ in series}
    durations = {d for _, name, dims in series if name == "Duration" for d in dims}
    for path, stack in synthesized.stacks():
        for logical_id in stack.resources("AWS::Lambda::Function"):
            assert ("FunctionName", f"<{{Ref:{logical_id}}}>") in durations, (path, logical_id)
    queue_dims = {d for _, name, dims in series for d in dims if d[0] == "QueueName"}
    for path, stack in synthesized.stacks():
        for queue in stack.resources("AWS::SQS::Queue"):
            assert ("QueueName", f"<{{Fn::GetAtt:[{queue},QueueName]}}>") in queue_dims, path
    assert {
        "Errors",
        "Throttles",
        "ConcurrentExecutions",
        "5XXError",
        "4XXError",
        "Latency",
    } <= read
    assert {"CpuUtilized", "MemoryUtilized"} <= read
    assert "JobFinishUnrecorded" in read  # each job's row shows outcomes given up on
    # Enqueues counted where every one is seen, whoever sent it (an application with only boto3
    # emits no EMF): SQS's NumberOfMessagesSent of each task's queue, on its outcomes graph.
    outcomes = [
        w
        for found in shards.values()
        for w in found
        if str(w["properties"].get("title")).endswith(": outcomes")
    ]
    assert len(outcomes) == 3
    for widget in outcomes:
        assert "NumberOfMessagesSent" in {name for _, name, _ in widget_series(widget)}
    assert "TaskEnqueued" not in read
    stats = json.dumps(every)
    assert '"stat":"p50"' in stats.replace(" ", "") and '"stat":"p99"' in stats.replace(" ", "")


def test_the_dashboard_counts_flows_by_the_state_they_enter(synthesized: Synthesized) -> None:
    """SLEEPING and WAITING from their stack-wide series; COMPENSATED, a failed compensation and
    the stuck ones summed over every task's series (one Metrics Insights total each)."""
    (flows,) = [
        w
        for w in dashboard_widgets(synthesized)
        if w["properties"].get("title") == "flows by state entered (the stack, per 5 minutes)"
    ]
    read = {name for _, name, _ in widget_series(flows)}
    assert {"FlowSlept", "FlowWaited"} <= read
    options = [row[-1] for row in flows["properties"]["metrics"]]
    expressions = [o["expression"] for o in options if "expression" in o]
    assert expressions == [
        f'SELECT SUM("{metric}") FROM SCHEMA("Vigil", service, task) WHERE service = \'vigil\''
        for metric in ("FlowCompensated", "FlowCompensationFailed", "TaskStuck")
    ]
    assert {"SLEEPING", "WAITING", "COMPENSATED"} <= {o.get("label") for o in options}


def test_the_cluster_runs_container_insights(synthesized: Synthesized) -> None:
    (cluster,) = synthesized.resources("AWS::ECS::Cluster").values()
    assert {"Name": "containerInsights", "Value": "enabled"} in cluster["Properties"][
        "ClusterSettings"
    ]


def test_saved_queries_for_a_tick_an_observer_and_the_last_errors(
    synthesized: Synthesized,
) -> None:
    queries = {
        q["Properties"]["Name"]: q["Properties"]
        for q in synthesized.resources("AWS::Logs::QueryDefinition").values()
    }
    assert set(queries) == {
        "Vigil/one tick's story",
        "Vigil/one observer's story",
        "Vigil/last errors per job",
    }
    job_logs = {
        json.dumps(everything)
        for path, stack in synthesized.stacks()
        if path and stack.resources("AWS::Lambda::EventInvokeConfig")  # a shard of jobs
        for everything in [
            {"Fn::GetAtt": [path[0], f"Outputs.{output}"]}
            for output in stack.template["Outputs"]
            if "Logs" in output
        ]
    }
    assert len(job_logs) == 2, "each shard of jobs shares one log group"
    for name in ("Vigil/one tick's story", "Vigil/last errors per job"):
        groups = {json.dumps(g) for g in queries[name]["LogGroupNames"]}
        assert groups == job_logs
    assert 'filter tick = "TICK"' in queries["Vigil/one tick's story"]["QueryString"]
    assert "by job" in queries["Vigil/last errors per job"]["QueryString"]
    observer = queries["Vigil/one observer's story"]
    assert 'filter observer = "OBSERVER"' in observer["QueryString"]
    assert "generation" in observer["QueryString"]
    groups = {g["Ref"] for g in observer["LogGroupNames"]}
    assert logical_id(synthesized, "AWS::Logs::LogGroup", "Observers/TaskLogs") in groups
    assert logical_id(synthesized, "AWS::Logs::LogGroup", "Observers/ReconcilerLogs") in groups


def test_the_api_logs_every_request_as_json_with_the_caller_and_throttles(
    synthesized: Synthesized,
) -> None:
    (stage,) = synthesized.resources("AWS::ApiGateway::Stage").values()
    access = stage["Properties"]["AccessLogSetting"]
    logs = logical_id(synthesized, "AWS::Logs::LogGroup", "Observers/ApiAccessLogs")
    # The log group's ARN without the ":*" of Fn::GetAtt (logGroupDestinationArnWithoutWildcard)
    assert {"Ref": logs} in access["DestinationArn"]["Fn::Join"][1]
    line = json.loads(access["Format"])
    assert line["userArn"] == "$context.identity.userArn"
    assert line["caller"] == "$context.identity.caller"
    assert line["status"] == "$context.status" and "requestId" in line
    (settings,) = stage["Properties"]["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == 50 and settings["ThrottlingBurstLimit"] == 100
    assert synthesized.resources("AWS::ApiGateway::Account"), "the logging role API Gateway needs"


def test_every_log_group_has_a_retention(synthesized: Synthesized) -> None:
    groups = everywhere(synthesized, "AWS::Logs::LogGroup")
    assert len(groups) >= 6
    assert all(g["Properties"]["RetentionInDays"] > 0 for g in groups)
    for function in everywhere(synthesized, "AWS::Lambda::Function"):
        assert "LogGroup" in function["Properties"]["LoggingConfig"]


def test_every_table_has_point_in_time_recovery_and_data_is_retained(
    synthesized: Synthesized,
) -> None:
    tables = synthesized.resources("AWS::DynamoDB::Table")
    # runs, registry, the older registry keyed by name, idempotency, hosts, tasks; the app's
    # sessions, counts
    assert len(tables) == 8
    for table in tables.values():
        spec = table["Properties"]["PointInTimeRecoverySpecification"]
        assert spec["PointInTimeRecoveryEnabled"] is True
    # Kept by a destroy, a removal and a replacement; deleted by its own create's rollback, so
    # not deletion-protected (tests/infra/test_teardown.py)
    for resource in [*tables.values(), *everywhere(synthesized, "AWS::SQS::Queue")]:
        assert resource["DeletionPolicy"] == "RetainExceptOnCreate"
        assert resource["UpdateReplacePolicy"] == "Retain"


def test_a_throwaway_stack_deletes_its_data_with_it() -> None:
    stack = Stack(App(context={"throwaway": "true"}), "Throwaway")
    JobRunsTable(stack, "JobRuns")
    dead_letter_queue(stack, "Dlq")
    template = Template.from_stack(stack)
    for resource_type in ("AWS::DynamoDB::Table", "AWS::SQS::Queue"):
        template.all_resources(resource_type, {"DeletionPolicy": "Delete"})
    template.all_resources_properties("AWS::DynamoDB::Table", {"DeletionProtectionEnabled": False})


def test_functions_write_only_their_own_log_group(synthesized: Synthesized) -> None:
    roles = synthesized.resources("AWS::IAM::Role").values()
    managed: list[Any] = [m for r in roles for m in r["Properties"].get("ManagedPolicyArns", [])]
    assert not any("AWSLambdaBasicExecutionRole" in json.dumps(m) for m in managed)
    Template.from_json(synthesized.template).has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Action": ["logs:CreateLogStream", "logs:PutLogEvents"]})]
                )
            }
        },
    )


def _deployed_length(description: Any) -> tuple[str, int]:
    """The description's text and its length once deployed, a name (a token) at its longest."""
    if isinstance(description, str):
        return description, len(description)
    parts = description["Fn::Join"][1]
    text = "".join(part if isinstance(part, str) else "NAME" for part in parts)
    return text, sum(len(p) if isinstance(p, str) else TOKEN_WORST_LENGTH for p in parts)


def test_every_alarm_links_its_runbook_entry_fits_cloudwatch_and_reads_as_its_spec(
    synthesized: Synthesized,
) -> None:
    found: set[Alarm] = set()
    for resource in everywhere(synthesized, "AWS::CloudWatch::Alarm"):
        logical, props = resource["id"], resource["Properties"]
        text, length = _deployed_length(props["AlarmDescription"])
        link = text.rsplit(" Runbook: ", 1)[-1]
        assert link.startswith(f"{RUNBOOKS}#"), logical
        alarm = Alarm(link.removeprefix(f"{RUNBOOKS}#"))
        spec = ALARMS[alarm]
        found.add(alarm)

        assert length <= DESCRIPTION_LIMIT, (logical, length)
        assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == spec.periods, logical
        missing = (
            "breaching" if spec.missing_breaches else "ignore" if spec.gauge else "notBreaching"
        )
        assert props["TreatMissingData"] == missing, logical
        if "Period" in props:  # a plain metric; a math expression's period is in its metrics
            assert props["Period"] == spec.period_minutes * 60, logical
            assert props["Statistic"] == spec.statistic, logical
            if isinstance(spec.watches, StrEnum):  # a Vigil metric, named by the contract
                assert props["MetricName"] == spec.watches.value, logical
    always = {alarm for alarm, spec in ALARMS.items() if not spec.declared_when}
    assert always <= found, always - found


def test_every_command_an_alarm_says_to_type_parses(synthesized: Synthesized) -> None:
    """``vigil ...`` in a description is what the operator types from the alarm's e-mail."""
    from vigil_tools.cli import build_parser

    placeholders = {"TICK": "2026-11-22T12:00:00+00:00", "ID": "a1", "NAME": "mail"}
    typed = [
        command
        for resource in everywhere(synthesized, "AWS::CloudWatch::Alarm")
        for command in re.findall(
            r"`(vigil [^`]*)`", _deployed_length(resource["Properties"]["AlarmDescription"])[0]
        )
    ]

    assert len(typed) > 10
    for command in typed:
        words = [placeholders.get(word, word) for word in shlex.split(command)]
        build_parser().parse_args(words[1:])  # raises on an unknown command or argument


def test_a_description_too_long_for_cloudwatch_fails_the_synth_naming_the_alarm() -> None:
    stack = Stack(App(), "Long")
    metric = cloudwatch.Metric(namespace="Vigil", metric_name="TaskFailed")
    alarm_above_zero(stack, "Fits", alarm=Alarm.TASK_FAILED, metric=metric, description="x" * 900)

    with pytest.raises(ConfigurationError, match=r"'TooLong'.*1025 characters"):
        alarm_above_zero(
            stack,
            "TooLong",
            alarm=Alarm.TASK_FAILED,
            metric=metric,
            description="x" * (DESCRIPTION_LIMIT - len(f" Runbook: {RUNBOOKS}#task-failed") + 1),
        )
