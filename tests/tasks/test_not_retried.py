"""Errors not worth retrying: ``raise Reject(reason)`` in the body, or an exception named in
``@task(no_retry_on=...)`` (or not named in ``retry_on``), ends the task FAILED at its first
attempt, dead-lettered with the reason, its completion event sent, no further attempt.
(moto, simulated clock; about 2 s in all.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.tasks import REASON_ATTRIBUTE, CompletionEvents, TaskStatus
from vigil.tasks import Reject, task


class BadOrder(ValueError):
    pass


class MailDown(ConnectionError):
    pass


def run_once(stack: Stack, handler: Any, key: str) -> list[str]:
    stack.client().enqueue(PLAIN, {}, key=key)
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    return invoke(handler, batch)


def reasons(stack: Stack) -> list[str]:
    return [
        message["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"]
        for message in stack.dead_letters()
    ]


def test_a_rejected_task_fails_at_once_dead_lettered_with_its_reason(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    runs: list[int] = []

    def body(run: Any, payload: dict[str, Any]) -> None:
        runs.append(run.attempt)
        raise Reject("order o-1 has no email")

    handler = make_handler(body, retries=3, completion_events=CompletionEvents.FAILURES)
    assert run_once(stack, handler, "o-1") == []  # deleted: nothing comes back

    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.attempts) == (TaskStatus.FAILED, 1)
    assert (record.error_type, record.error_message) == ("Reject", "order o-1 has no email")
    assert runs == [1]
    (reason,) = reasons(stack)
    assert "order o-1 has no email" in reason and "not retried" in reason
    (event,) = handler.events.of("put_events")
    detail = json.loads(event["Entries"][0]["Detail"])
    assert (detail["status"], detail["error_type"]) == ("FAILED", "Reject")


@pytest.mark.parametrize(
    ("options", "raised", "retried"),
    [
        ({"no_retry_on": (BadOrder,)}, BadOrder("no email"), False),
        ({"no_retry_on": (BadOrder,)}, MailDown("smtp"), True),
        ({"retry_on": (ConnectionError,)}, MailDown("smtp"), True),
        ({"retry_on": (ConnectionError,)}, BadOrder("no email"), False),
        # no_retry_on wins where both name the error
        ({"retry_on": (Exception,), "no_retry_on": (ValueError,)}, BadOrder("x"), False),
        ({}, BadOrder("no email"), True),
    ],
    ids=["named", "not named", "retry_on", "not in retry_on", "both", "neither"],
)
def test_the_decorator_says_which_errors_are_retried(
    stack: Stack, options: dict[str, Any], raised: Exception, retried: bool
) -> None:
    def body(run: Any, payload: dict[str, Any]) -> None:
        raise raised

    handler = task(
        body,
        settings=stack.settings(PLAIN, retries=2),
        dynamodb=stack.dynamodb,
        sqs=stack.sqs,
        events=stack.events,
        clock=stack.clock,
        sleep=stack.clock.advance,
        **options,
    )
    failed = run_once(stack, handler, "o-2")
    record = stack.client().get(PLAIN, "o-2")
    if retried:
        assert (record.status, failed != []) == (TaskStatus.QUEUED, True)
        assert stack.dead_letters() == []
    else:
        assert (record.status, failed, record.attempts) == (TaskStatus.FAILED, [], 1)
        assert len(stack.dead_letters()) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"no_retry_on": BadOrder}, "no_retry_on must be a tuple of exception classes"),
        ({"retry_on": ("ValueError",)}, "retry_on must be a tuple of exception classes"),
        ({"retry_on": (int,)}, "retry_on must be a tuple of exception classes"),
    ],
)
def test_a_bad_retry_option_is_refused_when_the_handler_is_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        task(lambda run, payload: None, **options)
