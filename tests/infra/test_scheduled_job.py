"""The synthesized template of the app's jobs, and synth-time validation of ScheduledJob."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk.assertions import Annotations, Match, Template

from infra.errors import ConfigurationError
from infra.scheduled_job import ScheduledJob
from vigil_tools.emulator.template import Synthesized


@pytest.fixture(scope="module")
def template(synthesized: Synthesized) -> Template:
    return Template.from_json(synthesized.template)


def job_functions(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in synthesized.resources("AWS::Lambda::Function").items()
        if "VIGIL_JOB_NAME" in resource["Properties"]["Environment"]["Variables"]
    }


def test_each_schedule_retries_dead_letters_and_passes_the_scheduled_time(
    template: Template, synthesized: Synthesized
) -> None:
    everything = synthesized.resources("AWS::Scheduler::Schedule")
    # The jobs' schedules; the jobs-control audit has its own (tests/infra/test_jobs_control.py),
    # and so has the stranded-tasks audit (tests/infra/test_tasks_audit.py).
    audits = ("/JobsControl/", "/TasksApi/Audit/")
    schedules = {
        k: v
        for k, v in everything.items()
        if not any(part in v["Metadata"]["aws:cdk:path"] for part in audits)
    }
    assert len(schedules) == 2
    for schedule in schedules.values():
        properties = schedule["Properties"]
        assert properties["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert properties["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 185
        assert "MaximumEventAgeInSeconds" in properties["Target"]["RetryPolicy"]
        assert "Arn" in properties["Target"]["DeadLetterConfig"]
        assert "<aws.scheduler.scheduled-time>" in properties["Target"]["Input"]
    report = next(
        s for s in schedules.values() if "daily-report" in s["Properties"]["Target"]["Input"]
    )
    assert report["Properties"]["ScheduleExpressionTimezone"] == "Europe/Prague"
    assert json.loads(report["Properties"]["Target"]["Input"])["vigil"]["job"] == "daily-report"


def test_failed_runs_go_to_an_sqs_on_failure_destination(
    template: Template, synthesized: Synthesized
) -> None:
    # Two jobs, the observers' reconciler and the jobs' audit (each a destination of its own).
    template.resource_count_is("AWS::Lambda::EventInvokeConfig", 4)
    template.all_resources_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}}},
    )
    retries = sorted(
        c["Properties"]["MaximumRetryAttempts"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
    )
    assert retries == [0, 2, 2, 2], "cleanup is not retried; the report, reconciler, audit twice"


def test_retries_that_would_arrive_too_late_to_run_are_a_synth_warning() -> None:
    stack = Stack(App(), "Test")
    ScheduledJob(
        stack,
        "Cleanup",
        handler="jobs.cleanup.handler",
        schedule="rate(5 minutes)",
        timeout=Duration.minutes(4),
        max_lateness=Duration.minutes(2),
        retry_attempts=2,
    )
    Annotations.from_stack(stack).has_warning(
        "/Test/Cleanup", Match.string_like_regexp("late retries of a failed tick will not run")
    )


def test_every_queue_is_encrypted_and_tls_only(template: Template) -> None:
    template.all_resources_properties("AWS::SQS::Queue", {"SqsManagedSseEnabled": True})
    template.all_resources_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with([Match.object_like({"Effect": "Deny"})])
            }
        },
    )


def test_the_runs_table_has_ttl_point_in_time_recovery_and_the_jobs_index(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "GlobalSecondaryIndexes": [Match.object_like({"IndexName": "jobs-index"})],
        },
    )
    template.has_resource("AWS::DynamoDB::Table", {"DeletionPolicy": "RetainExceptOnCreate"})


def test_each_job_may_only_update_its_own_items(synthesized: Synthesized) -> None:
    functions = job_functions(synthesized)
    policies = synthesized.resources("AWS::IAM::Policy")
    for function in functions.values():
        job = function["Properties"]["Environment"]["Variables"]["VIGIL_JOB_NAME"]
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = [
            statement
            for policy in policies.values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        dynamo = [
            s
            for s in statements
            if "dynamodb" in json.dumps(s["Action"]) and "JobRuns" in json.dumps(s["Resource"])
        ]
        # the rest: the app's own tables it declared (cleanup: its Sessions), nothing of Vigil's
        others = [
            s for s in statements if "dynamodb" in json.dumps(s["Action"]) and s not in dynamo
        ]
        assert all("Sessions" in json.dumps(s["Resource"]) for s in others)
        # A job that declares writes may also read its own claim for run.fenced.strict (a
        # GetItem, or a ConditionCheck in its write's transaction): the same items only.
        strict = ["dynamodb:ConditionCheckItem", "dynamodb:GetItem"]
        action: Any = [*strict, "dynamodb:UpdateItem"] if others else "dynamodb:UpdateItem"
        assert dynamo == [
            {
                "Action": action,
                "Condition": {
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [f"JOB#{job}"]}
                },
                "Effect": "Allow",
                "Resource": dynamo[0]["Resource"],
            }
        ]


def test_functions_share_runtime_tracing_powertools_and_log_retention(
    synthesized: Synthesized,
) -> None:
    for function in job_functions(synthesized).values():
        props = function["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "vigil"
    for log_group in synthesized.resources("AWS::Logs::LogGroup").values():
        assert log_group["Properties"]["RetentionInDays"] == 30


def test_alarms_watch_dead_letters_and_missed_ticks(
    template: Template, synthesized: Synthesized
) -> None:
    job_alarms = [
        alarm
        for alarm in synthesized.resources("AWS::CloudWatch::Alarm").values()
        # (json: a description may name a resource, a token CloudFormation joins)
        if json.dumps(alarm["Properties"]["AlarmDescription"]).startswith('"Job ')
    ]
    assert len(job_alarms) == 6 * 2, (
        "failed runs, undelivered, missed and never-delivered ticks, outcomes not recorded, "
        "effects left uncertain"
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "JobTickNeverDelivered", "Namespace": "Vigil", "Threshold": 0},
    )
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "JobTickMissed", "Namespace": "Vigil", "Threshold": 0},
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "JobRunUncertain", "Namespace": "Vigil", "Threshold": 0},
    )
    for job in ("cleanup", "daily-report"):
        template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "MetricName": "JobFinishUnrecorded",
                "Namespace": "Vigil",
                "Threshold": 0,
                "Dimensions": Match.array_with([{"Name": "job", "Value": job}]),
                "AlarmDescription": Match.string_like_regexp(f"vigil jobs history {job}"),
            },
        )


VALID: dict[str, Any] = {"handler": "jobs.cleanup.handler", "schedule": "rate(5 minutes)"}


@pytest.mark.parametrize(
    ("overrides", "parameter", "fragment"),
    [
        ({"schedule": "rate(5 minute)"}, "schedule", "plural"),
        ({"schedule": "rate(0 minutes)"}, "schedule", "at least 1"),
        ({"schedule": "every 5 minutes"}, "schedule", "must start with"),
        ({"schedule": "cron(0 12 * * * *)"}, "schedule", "exactly one of"),
        ({"schedule": "cron(0 25 * * ? *)"}, "schedule", "outside 0-23"),
        ({"schedule": "cron(0 12 * *)"}, "schedule", "6 fields"),
        ({"schedule": "at(2026-13-01T00:00:00)"}, "schedule", "month"),
        ({"time_zone": "Mars/Olympus"}, "time_zone", "IANA"),
        ({"schedule": "cron(0 22-2 * * ? *)"}, "schedule", "wraps around: write it as 22-23,0-2"),
        ({"schedule": "cron(0 9 ? * FRI-MON *)"}, "schedule", "wraps around"),
        ({"schedule": "cron(0 9 ? * 2#6 *)"}, "schedule", "1-5"),
        ({"overlap": "queue"}, "overlap", "not one of skip, allow"),
        ({"timeout": Duration.minutes(16)}, "timeout", "15 minutes"),
        ({"retry_attempts": 3}, "retry_attempts", "0-2"),
        ({"delivery_retry_attempts": 186}, "delivery_retry_attempts", "0-185"),
        ({"max_event_age": Duration.seconds(30)}, "max_event_age", "60 s to 24 h"),
        ({"memory_size": 64}, "memory_size", "128-10240"),
        ({"lease_margin": Duration.seconds(0)}, "lease_margin", "clock skew"),
        ({"handler": "jobs.nope.handler"}, "handler", "no module 'jobs.nope'"),
        ({"handler": "jobs.cleanup.missing"}, "handler", "defines no 'missing'"),
        ({"handler": "cleanup"}, "handler", "package.module.function"),
        ({"job_name": "Bad_Name"}, "job_name", "must match"),
        ({"retention": Duration.days(7)}, "retention", "at least 14 days"),
        ({"max_duration": Duration.minutes(2)}, "max_duration", "to the timeout"),
        (
            {"max_duration": Duration.seconds(30), "min_duration": Duration.seconds(30)},
            "min_duration",
            "below max_duration",
        ),
    ],
)
def test_invalid_parameters_fail_the_synth_naming_the_job_and_the_parameter(
    overrides: dict[str, Any], parameter: str, fragment: str
) -> None:
    stack = Stack(App(), "Test")
    with pytest.raises(ConfigurationError) as raised:
        ScheduledJob(stack, "Cleanup", **{**VALID, **overrides})
    message = str(raised.value)
    assert "ScheduledJob 'Cleanup'" in message
    assert f"invalid {parameter}" in message
    assert fragment in message


@pytest.mark.parametrize(
    "schedule",
    [
        "rate(1 minute)",
        "rate(12 hours)",
        "cron(0/15 * * * ? *)",
        "cron(30 7 ? * MON-FRI *)",
        "cron(0 9 L * ? *)",
        "at(2027-01-01T09:00:00)",
    ],
)
def test_valid_expressions_are_accepted(schedule: str) -> None:
    stack = Stack(App(), "Test")
    job = ScheduledJob(stack, "Cleanup", handler="jobs.cleanup.handler", schedule=schedule)
    assert job.job_name == "cleanup"


@pytest.mark.parametrize("schedule", ["cron(0 0 30 2 ? *)", "cron(0 0 * * ? 2020-2021)"])
def test_a_cron_that_never_fires_again_is_a_synth_warning(schedule: str) -> None:
    stack = Stack(App(), "Test")
    ScheduledJob(stack, "Cleanup", handler="jobs.cleanup.handler", schedule=schedule)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("never"))
    assert len(warnings) == 1
    assert "never fires again" in str(warnings[0].entry.data)
