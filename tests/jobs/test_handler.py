"""The Lambda handler a job author gets from ``@scheduled_job``: environment, metrics, bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.jobs import FaultyTransactions, context
from vigil.clock import ManualClock
from vigil.contract.effects import WRITES_ENV
from vigil.events import MalformedEvent
from vigil.jobs import scheduled_job
from vigil.jobs.finish import OutcomeUnrecorded
from vigil.jobs.guard import WrongJob
from vigil.jobs.model import JobSettings, Overlap
from vigil.settings import SettingsError
from vigil_tools.lambda_context import LambdaContext

TICK = "2026-11-22T12:00:00Z"


def event(job: str = "cleanup", scheduled_time: str = TICK) -> dict[str, Any]:
    return {"vigil": {"job": job, "scheduled_time": scheduled_time, "execution_id": "e1"}}


@pytest.fixture
def job_env(monkeypatch: pytest.MonkeyPatch, runs_table: str) -> None:
    monkeypatch.setenv("VIGIL_JOB_NAME", "cleanup")
    monkeypatch.setenv("VIGIL_RUNS_TABLE", runs_table)
    monkeypatch.setenv("VIGIL_OVERLAP", "skip")
    monkeypatch.setenv("VIGIL_MAX_LATENESS_SECONDS", "120")


def emf_metrics(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if '"_aws"' in line]


def metric_names(output: str) -> list[str]:
    return [
        metric["Name"]
        for blob in emf_metrics(output)
        for metric in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    ]


def test_the_decorated_body_runs_once_and_emits_the_job_dimension_only_on_no_success(
    job_env: None, dynamodb: Any, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A success counts for the stack (one series whatever the number of jobs); anything else,
    a suppressed duplicate here, for its job too: a series that exists only while it happens."""
    calls = []
    handler = scheduled_job(calls.append, client=dynamodb, clock=clock)
    first = handler(event(), context())
    second = handler(event(), context())
    assert (first["outcome"], second["outcome"]) == ("SUCCEEDED", "DUPLICATE")
    assert len(calls) == 1
    metrics = emf_metrics(capsys.readouterr().out)
    names = {m["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"]: m for m in metrics}
    assert set(names) == {"JobRunSucceeded", "JobDuplicateSuppressed"}
    assert "job" not in names["JobRunSucceeded"]
    assert names["JobDuplicateSuppressed"]["job"] == "cleanup"
    assert all(m["service"] == "vigil" for m in metrics)


def test_a_malformed_event_raises_counts_and_writes_nothing(
    job_env: None,
    dynamodb: Any,
    runs_table: str,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[Any] = []
    handler = scheduled_job(calls.append, client=dynamodb, clock=clock)
    with pytest.raises(MalformedEvent):
        handler({"detail": "garbage"}, context())
    assert calls == []
    assert dynamodb.scan(TableName=runs_table)["Count"] == 0
    [metric] = emf_metrics(capsys.readouterr().out)
    assert metric["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "JobEventMalformed"


def test_an_event_for_another_job_is_refused_and_writes_nothing(
    job_env: None, dynamodb: Any, runs_table: str, clock: ManualClock
) -> None:
    handler = scheduled_job(lambda run: None, client=dynamodb, clock=clock)
    with pytest.raises(WrongJob, match="daily-report"):
        handler(event(job="daily-report"), context())
    assert dynamodb.scan(TableName=runs_table)["Count"] == 0


def test_a_failure_emits_the_failed_metric_and_propagates_for_lambda_to_retry(
    job_env: None, dynamodb: Any, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    def body(run: Any) -> None:
        raise ConnectionError("downstream unavailable")

    handler = scheduled_job(body, client=dynamodb, clock=clock)
    with pytest.raises(ConnectionError):
        handler(event(), context())
    [metric] = emf_metrics(capsys.readouterr().out)
    assert metric["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "JobRunFailed"


def test_an_outcome_not_recorded_in_time_is_counted_and_written_by_lambdas_retry(
    job_env: None, dynamodb: Any, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a container whose finish is throttled until the invocation runs out of time
    calls: list[Any] = []
    client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
    handler = scheduled_job(calls.append, client=client, clock=clock, sleep=clock.advance)
    deadline = clock() + timedelta(seconds=60)
    invocation = LambdaContext(
        aws_request_id="request-1",
        remaining_ms=lambda: int((deadline - clock()).total_seconds() * 1000),
    )
    with pytest.raises(OutcomeUnrecorded):
        handler(event(), invocation)

    # When the throttle clears and Lambda retries the same request a minute later
    client.always = None
    clock.advance(60)
    deadline = clock() + timedelta(seconds=60)
    answer = handler(event(), invocation)

    # Then the outcome is written without running the body again, and each step was counted
    assert (answer["outcome"], len(calls)) == ("SUCCEEDED", 1)
    names = metric_names(capsys.readouterr().out)
    assert names == ["JobFinishUnrecorded", "JobRunSucceeded"]


def test_a_failed_run_not_recorded_in_time_counts_both(
    job_env: None, dynamodb: Any, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    def body(run: Any) -> None:
        raise ConnectionError("downstream unavailable")

    client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
    handler = scheduled_job(body, client=client, clock=clock, sleep=clock.advance)
    deadline = clock() + timedelta(seconds=60)
    invocation = LambdaContext(
        remaining_ms=lambda: int((deadline - clock()).total_seconds() * 1000)
    )
    with pytest.raises(ConnectionError) as raised:
        handler(event(), invocation)
    assert any("not recorded" in note for note in raised.value.__notes__)
    names = metric_names(capsys.readouterr().out)
    assert sorted(names) == ["JobFinishUnrecorded", "JobRunFailed"]


def test_the_example_job_module_is_a_working_handler(
    job_env: None, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from jobs import cleanup

    dynamodb.create_table(  # the app's Sessions table, granted to cleanup by writes=[sessions]
        TableName="sessions",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv(WRITES_ENV, json.dumps({"tables": {cleanup.SESSIONS: "sessions"}}))
    cleanup = importlib.reload(cleanup)  # a fresh container: nothing cached from earlier tests
    monkeypatch.setattr("boto3.client", lambda *a, **k: dynamodb)
    now = datetime.now(UTC).replace(microsecond=0)
    result = cleanup.handler(event(scheduled_time=now.isoformat()), context())
    assert result["outcome"] == "SUCCEEDED"


class TestSettings:
    def test_the_environment_the_construct_sets_is_read_and_validated(self) -> None:
        settings = JobSettings.from_env(
            {
                "VIGIL_JOB_NAME": "cleanup",
                "VIGIL_RUNS_TABLE": "runs",
                "VIGIL_OVERLAP": "allow",
                "VIGIL_MAX_LATENESS_SECONDS": "90",
                "VIGIL_LEASE_MARGIN_SECONDS": "15",
            }
        )
        assert settings.overlap is Overlap.ALLOW
        assert settings.max_lateness == timedelta(seconds=90)
        assert settings.lease_margin == timedelta(seconds=15)

    @pytest.mark.parametrize(
        ("env", "message"),
        [
            ({"VIGIL_RUNS_TABLE": "runs"}, "VIGIL_JOB_NAME is required"),
            ({"VIGIL_JOB_NAME": "j"}, "VIGIL_RUNS_TABLE is required"),
            ({"VIGIL_JOB_NAME": "j", "VIGIL_RUNS_TABLE": "r", "VIGIL_OVERLAP": "queue"}, "one of"),
            (
                {"VIGIL_JOB_NAME": "j", "VIGIL_RUNS_TABLE": "r", "VIGIL_MAX_LATENESS_SECONDS": "x"},
                "number of seconds",
            ),
            (
                {
                    "VIGIL_JOB_NAME": "j",
                    "VIGIL_RUNS_TABLE": "r",
                    "VIGIL_LEASE_MARGIN_SECONDS": "-1",
                },
                "negative",
            ),
        ],
    )
    def test_a_bad_environment_is_a_clear_error(self, env: dict[str, str], message: str) -> None:
        with pytest.raises(SettingsError, match=message):
            JobSettings.from_env(env)
