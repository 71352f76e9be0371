"""The pure parts of tasks: claim refusals, retry backoff, the deadline, results, the envelope,
the catalog and the settings. No AWS."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from vigil.contract.tasks import MAX_RESULT_BYTES, CompletionEvents, TaskStatus
from vigil.settings import SettingsError
from vigil.tasks.catalog import Catalog
from vigil.tasks.decisions import (
    FinalFailure,
    Verdict,
    after_failure,
    encode_result,
    may_claim,
    resolve_claim,
)
from vigil.tasks.envelope import Envelope, parse, schedule_name
from vigil.tasks.errors import MalformedTask
from vigil.tasks.settings import TaskSettings

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def seen(status: str, **fields: object) -> dict[str, object]:
    return {"status": status, "token": 5, **fields}


def waiting(retry_message: str, until: str = "12:00:10") -> dict[str, object]:
    """A QUEUED record whose retry is held by ``retry_message`` until ``until`` (NOW is 12:00)."""
    return seen("QUEUED", retry_at=f"2026-11-22T{until}.000Z", retry_message=retry_message)


SPENT = {"redrives": {"op-1"}}
"""A record the redrive ``op-1`` took already."""


@pytest.mark.parametrize(
    ("record", "redrive", "verdict"),
    [
        (seen("SUCCEEDED"), None, Verdict.DUPLICATE),
        (seen("SUCCEEDED"), "op-1", Verdict.DUPLICATE),
        (seen("FAILED"), None, Verdict.DUPLICATE),
        (seen("FAILED"), "op-1", Verdict.RETRY),
        # A redrive runs once: its message back after its run ended FAILED is a DUPLICATE.
        (seen("FAILED", **SPENT), "op-1", Verdict.DUPLICATE),
        (seen("FAILED", **SPENT), "op-2", Verdict.RETRY),
        (seen("CANCELLED"), None, Verdict.CANCELLED),
        (seen("RUNNING", lease_until="2026-11-22T12:01:00.000Z"), None, Verdict.BUSY),
        (seen("RUNNING", lease_until="2026-11-22T11:59:00.000Z"), None, Verdict.RETRY),
        (seen("QUEUED"), None, Verdict.RETRY),
        # A retry waiting for its backoff: only its own message (m-1) or an unspent redrive.
        (waiting("m-0"), None, Verdict.DUPLICATE),
        (waiting("m-1"), None, Verdict.RETRY),
        (waiting("m-0"), "op-1", Verdict.RETRY),
        (waiting("m-0") | SPENT, "op-1", Verdict.DUPLICATE),
        (waiting("m-0", until="11:59:50"), None, Verdict.RETRY),
        (seen("UNCERTAIN"), "op-1", Verdict.BUSY),
        (seen("UNCERTAIN", **SPENT), "op-1", Verdict.DUPLICATE),
        (None, None, Verdict.RETRY),
    ],
)
def test_a_refused_claim_is_decided_from_what_it_saw(
    record: dict[str, object] | None, redrive: str | None, verdict: Verdict
) -> None:
    decision = resolve_claim(record, now=NOW, token=3, redrive=redrive, message_id="m-1")
    assert decision.verdict is verdict


@pytest.mark.parametrize("status", ["QUEUED", "FAILED", "RUNNING"])
def test_a_message_of_another_request_under_the_key_is_never_run(status: str) -> None:
    record = seen(status, request="digest-a", lease_until="2026-11-22T11:59:00.000Z")
    for redrive in (None, "op-1"):
        other = resolve_claim(record, now=NOW, token=3, redrive=redrive, request="digest-b")
        assert other.verdict is Verdict.DUPLICATE and "another request" in other.reason
    own = seen("QUEUED", request="digest-a")
    assert resolve_claim(own, now=NOW, token=3, request="digest-a").verdict is Verdict.RETRY


def test_busy_comes_back_when_the_lease_ends_and_retry_claims_above_the_seen_token() -> None:
    busy = resolve_claim(seen("RUNNING", lease_until="2026-11-22T12:01:30.200Z"), now=NOW, token=3)
    assert busy.come_back_in_s == 91
    retry = resolve_claim(seen("QUEUED", token=9), now=NOW, token=3)
    assert retry.token_floor == 9


def test_backoff_doubles_per_attempt_capped_under_12_hours_then_gives_up() -> None:
    backoff = timedelta(seconds=30)
    assert [after_failure(a, 3, backoff).delay_s for a in (1, 2, 3)] == [30, 60, 120]
    assert after_failure(4, 3, backoff).retry is False
    assert after_failure(1, 0, backoff).retry is False
    # Under 12 hours: SQS counts those from the receipt, and the message has been in flight.
    assert after_failure(10, 10, timedelta(hours=1)).delay_s == 12 * 3600 - 20 * 60


def test_no_claim_within_the_margin_of_the_deadline() -> None:
    margin = timedelta(seconds=30)
    assert may_claim(30_001, margin) and not may_claim(30_000, margin)


def test_a_result_is_json_within_the_limit_or_refused() -> None:
    assert encode_result(None) is None
    assert encode_result({"a": 1}) == '{"a":1}'
    too_large = encode_result("x" * MAX_RESULT_BYTES)
    assert isinstance(too_large, FinalFailure) and too_large.error_type == "ResultTooLarge"
    not_json = encode_result({1, 2})
    assert isinstance(not_json, FinalFailure) and not_json.error_type == "ResultNotJSON"


def test_an_envelope_round_trips_and_a_redrive_is_marked() -> None:
    envelope = Envelope("send-receipt", "o-1", {"a": 1}, "2026-11-22T12:00:00.000Z", group=None)
    assert parse(envelope.body(), "send-receipt") == envelope
    assert parse(envelope.redrive().body()).redriven is True
    redriven = parse(envelope.redrive("op-1").body())
    assert (redriven.redrive_id, redriven.redrive_operation("m-9")) == ("op-1", "op-1")
    assert parse(envelope.body()).redrive_operation("m-9") is None
    # redriven before operations had ids: the message is an operation of its own
    legacy = json.loads(envelope.body())
    legacy["vigil_task"]["redriven"] = True
    assert parse(json.dumps(legacy)).redrive_operation("m-9") == "message:m-9"


@pytest.mark.parametrize(
    ("body", "reason", "task_id"),
    [
        ("", "not JSON", None),
        ("[1]", "not a task envelope", None),
        (json.dumps({"vigil_task": {"v": 1, "task": "t"}}), "invalid task id", None),
        (
            json.dumps({"vigil_task": {"v": 1, "task": "t", "id": "x", "payload": {}}}),
            "invalid enqueued_at",
            "x",
        ),
        (
            json.dumps(
                {
                    "vigil_task": {
                        "v": 1,
                        "task": "t",
                        "id": "x",
                        "payload": {},
                        "enqueued_at": "2026-11-22T12:00:00",
                    }
                }
            ),
            "invalid enqueued_at",  # no zone
            "x",
        ),
    ],
)
def test_a_malformed_message_says_why(body: str, reason: str, task_id: str | None) -> None:
    with pytest.raises(MalformedTask, match=reason) as raised:
        parse(body, "t")
    assert raised.value.task_id == task_id


def test_schedule_names_fit_schedulers_limit_whatever_the_key() -> None:
    name = schedule_name("a" * 48, "k" * 128)
    assert len(name) <= 64
    assert name != schedule_name("a" * 48, "k" * 127)


def test_the_catalog_refuses_what_it_cannot_use_naming_the_problem() -> None:
    with pytest.raises(
        SettingsError, match=r"VIGIL_STACK .* or VIGIL_TASKS_CATALOG .* is required"
    ):
        Catalog.from_env({})
    with pytest.raises(SettingsError, match="not JSON"):
        Catalog.parse("{")
    with pytest.raises(SettingsError, match="has no queue_url"):
        Catalog.parse(json.dumps({"t": {"table": "x"}}))
    with pytest.raises(SettingsError, match="not a task name"):
        Catalog.parse(json.dumps({"Bad Name": {}}))
    with pytest.raises(SettingsError, match="task t: completion_events must be one of"):
        Catalog.parse(json.dumps({"t": {"queue_url": "q", "table": "x", "completion_events": 1}}))
    catalog = Catalog.parse(json.dumps({"t": {"queue_url": "https://q/1/t", "table": "x"}}))
    assert catalog["t"].completion_events is CompletionEvents.FAILURES
    assert Catalog.parse(catalog.to_json())["t"] == catalog["t"]


@pytest.mark.parametrize(
    ("choice", "announced"),
    [
        (CompletionEvents.ALL, {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED}),
        (CompletionEvents.FAILURES, {TaskStatus.FAILED}),
        (CompletionEvents.NONE, set()),
    ],
)
def test_completion_events_announce_only_the_chosen_outcomes(
    choice: CompletionEvents, announced: set[TaskStatus]
) -> None:
    assert {status for status in TaskStatus if choice.announces(status)} == announced


def test_settings_come_from_the_environment_every_problem_named() -> None:
    env = {
        "VIGIL_TASK_NAME": "send-receipt",
        "VIGIL_TASKS_TABLE": "tasks",
        "VIGIL_TASK_QUEUE_URL": "https://q",
        "VIGIL_TASK_DEAD_LETTER_URL": "https://dlq",
        "VIGIL_TASK_RETRIES": "5",
        "VIGIL_TASK_BACKOFF_SECONDS": "2",
        "VIGIL_TASK_ORDERED": "true",
    }
    settings = TaskSettings.from_env(env)
    assert (settings.retries, settings.backoff, settings.ordered) == (5, timedelta(seconds=2), True)
    assert settings.completion_events is CompletionEvents.FAILURES
    everything = TaskSettings.from_env(env | {"VIGIL_TASK_COMPLETION_EVENTS": "all"})
    assert everything.completion_events is CompletionEvents.ALL
    with pytest.raises(SettingsError) as raised:
        TaskSettings.from_env({"VIGIL_TASK_RETRIES": "-1", "VIGIL_TASK_COMPLETION_EVENTS": "x"})
    message = str(raised.value)
    assert "VIGIL_TASK_NAME" in message and "VIGIL_TASK_RETRIES" in message
    assert "VIGIL_TASK_COMPLETION_EVENTS" in message


def test_enqueueing_needs_boto3_alone() -> None:
    """An application that only enqueues does not need Powertools (the consumer's half)."""
    import os
    import subprocess
    import sys

    probe = (
        "import sys; from vigil.tasks import enqueue, cancel, TaskClient, Catalog; "
        "print(sorted(m for m in sys.modules if m.startswith(('aws_lambda_powertools', 'pydantic'))))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=os.environ
    )
    assert shown.stdout.strip() == "[]"
