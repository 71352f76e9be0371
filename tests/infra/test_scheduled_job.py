"""The synthesized template of the app's jobs, and synth-time validation of ScheduledJob."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk.assertions import Annotations, Match, Template

from infra.errors import ConfigurationError
from infra.scheduled_job import ScheduledJob
from tests.helpers.monitoring import alarm_series
from tests.helpers.templates import everywhere, from_parent, role_statements
from vigil_tools.emulator.template import Synthesized


@pytest.fixture(scope="module")
def template(synthesized: Synthesized) -> Template:
    return Template.from_json(synthesized.template)


def job_functions(synthesized: Synthesized) -> list[dict[str, Any]]:
    """The jobs' functions, in their shards (each with ``id`` and ``stack``)."""
    return [
        function
        for function in everywhere(synthesized, "AWS::Lambda::Function")
        if "VIGIL_JOB_NAME" in function["Properties"]["Environment"]["Variables"]
    ]


def test_each_schedule_retries_dead_letters_and_passes_the_scheduled_time(
    template: Template, synthesized: Synthesized
) -> None:
    everything = everywhere(synthesized, "AWS::Scheduler::Schedule")
    # The jobs' schedules; the jobs-control audit has its own (tests/infra/test_jobs_control.py),
    # and so has the stranded-tasks audit (tests/tasks/test_audit.py).
    audits = ("/JobsControl/", "/TasksApi/Audit/")
    schedules = {
        s["id"]: s
        for s in everything
        if not any(part in s["Metadata"]["aws:cdk:path"] for part in audits)
    }
    assert len(schedules) == 2
    undelivered = {
        json.dumps(
            from_parent(
                synthesized, s["stack"], s["Properties"]["Target"]["DeadLetterConfig"]["Arn"]
            )
        )
        for s in schedules.values()
    }
    assert len(undelivered) == 1 and "JobsUndelivered" in undelivered.pop(), "one for the stack"
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


def test_failed_runs_go_to_an_sqs_on_failure_destination(synthesized: Synthesized) -> None:
    # Two jobs, the observers' reconciler and the jobs' audit (each a destination of its own).
    configs = everywhere(synthesized, "AWS::Lambda::EventInvokeConfig")
    assert len(configs) == 4
    for config in configs:
        assert "Destination" in config["Properties"]["DestinationConfig"]["OnFailure"]
    retries = sorted(c["Properties"]["MaximumRetryAttempts"] for c in configs)
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
        "/Test/Jobs3/Cleanup",
        Match.string_like_regexp("late retries of a failed tick will not run"),
    )


def test_every_queue_is_encrypted_and_tls_only(synthesized: Synthesized) -> None:
    queues = everywhere(synthesized, "AWS::SQS::Queue")
    assert all(q["Properties"]["SqsManagedSseEnabled"] is True for q in queues)
    covered = set()
    for policy in everywhere(synthesized, "AWS::SQS::QueuePolicy"):
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        (deny,) = [s for s in statements if s["Effect"] == "Deny"]
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for queue in policy["Properties"]["Queues"]:
            covered.add((id(policy["stack"]), queue["Ref"]))
    assert covered == {(id(q["stack"]), q["id"]) for q in queues}, "every queue, TLS only"


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
    for function in job_functions(synthesized):
        job = function["Properties"]["Environment"]["Variables"]["VIGIL_JOB_NAME"]
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = role_statements(function["stack"], role)
        resource = {
            id(s): json.dumps(from_parent(synthesized, function["stack"], s["Resource"]))
            for s in statements
        }
        dynamo = [
            s
            for s in statements
            if "dynamodb" in json.dumps(s["Action"]) and "JobRuns" in resource[id(s)]
        ]
        # the rest: the app's own tables it declared (cleanup: its Sessions), nothing of Vigil's
        others = [
            s for s in statements if "dynamodb" in json.dumps(s["Action"]) and s not in dynamo
        ]
        assert all("Sessions" in resource[id(s)] for s in others)
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
    for function in job_functions(synthesized):
        props = function["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "vigil"
        assert (
            props["FunctionName"]
            == f"Vigil_job_{props['Environment']['Variables']['VIGIL_JOB_NAME']}"
        )
        (group,) = function["stack"].resources("AWS::Logs::LogGroup")
        assert props["LoggingConfig"] == {"LogGroup": {"Ref": group}}, "its shard's log group"
    for log_group in everywhere(synthesized, "AWS::Logs::LogGroup"):
        assert log_group["Properties"]["RetentionInDays"] == 30


def test_alarms_watch_dead_letters_and_missed_ticks(synthesized: Synthesized) -> None:
    """One alarm a job (its failed runs waiting, in its shard); the rest one alarm each for every
    job, a Metrics Insights query grouped by job that names it."""
    for job in ("Cleanup", "DailyReport"):
        (alarm,) = [
            a
            for a in everywhere(synthesized, "AWS::CloudWatch::Alarm")
            if f"/{job}/FailedRunsAlarm/" in a["Metadata"]["aws:cdk:path"]
        ]
        assert [name for _, name, _ in alarm_series(alarm)] == [
            "ApproximateNumberOfMessagesVisible"
        ]
    queries = {
        q["Expression"]: a["Properties"]
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        for q in a["Properties"].get("Metrics", [])
        if str(q.get("Expression", "")).startswith("SELECT")
    }
    for metric in (
        "JobTickNeverDelivered",
        "JobTickMissed",
        "JobRunUncertain",
        "JobFinishUnrecorded",
    ):
        (query,) = [q for q in queries if f'SUM("{metric}")' in q]
        assert query == (
            f'SELECT SUM("{metric}") FROM SCHEMA("Vigil", job, service) '
            "WHERE service = 'vigil' GROUP BY job ORDER BY SUM() DESC"
        )
        assert queries[query]["Threshold"] == 0
        assert "`vigil jobs history JOB`" in json.dumps(queries[query]["AlarmDescription"])
    assert synthesized.resources("AWS::CloudWatch::Dashboard"), "the stack's"
    shards = [
        d
        for d in everywhere(synthesized, "AWS::CloudWatch::Dashboard")
        if d["stack"].nested == {} and d["stack"] is not synthesized
    ]
    assert len(shards) == 4, "one per shard of jobs or tasks"


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
