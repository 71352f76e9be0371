"""Cancelling a RUNNING task: the request is noted on its record, the run learns it at its next
check (``run.progress``, a ``run.once`` intent, a strict fenced write) as ``TaskCancelled``, its
later fenced writes are refused, and the task ends CANCELLED: not retried, not dead-lettered,
announced. A body that never checks is not stopped. Each test about 0.3 s on moto."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from vigil.clock import iso
from vigil.contract.effects import WriteKind
from vigil.contract.journal import Verdict
from vigil.contract.tasks import CompletionEvents, TaskEventType, TaskStatus
from vigil.effects import Uncertain
from vigil.tasks import NotCancellable, TaskRun
from vigil.tasks.envelope import parse
from vigil.tasks.errors import TaskCancelled
from vigil.tasks.store import TaskStore

BY = "arn:aws:iam::123456789012:user/ops"


def one_batch(stack: Stack, key: str = "o-1") -> list[dict[str, Any]]:
    stack.client().enqueue(PLAIN, {"order": key}, key=key)
    return records(stack.messages(stack.catalog.spec(PLAIN).queue_url))


def cancel(stack: Stack, key: str = "o-1") -> None:
    record = stack.client().cancel(PLAIN, key, by=BY)
    assert record.status is TaskStatus.RUNNING  # asked: the run has not stopped yet
    assert (record.cancel_requested_at, record.cancel_requested_by) == (iso(stack.clock()), BY)


def events_of(handler: Any) -> list[str]:
    return [
        entry["DetailType"] for call in handler.events.of("put_events") for entry in call["Entries"]
    ]


def ended_cancelled(stack: Stack, key: str = "o-1") -> None:
    record = stack.client().get(PLAIN, key)
    assert (record.status, record.attempts, record.error_type) == (
        TaskStatus.CANCELLED,
        1,
        "TaskCancelled",
    )
    assert BY in (record.error_message or "") and record.cancel_requested_by == BY
    assert stack.dead_letters() == []  # not dead-lettered (and each invoke reports no retry)


def test_the_run_learns_it_at_progress_and_ends_cancelled_with_its_event(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    told: list[BaseException] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.progress(10)
        cancel(stack)
        try:
            run.progress(20)
        except TaskCancelled as error:
            told.append(error)
            raise
        return {"never": True}

    handler = make_handler(body, completion_events=CompletionEvents.ALL)
    batch = one_batch(stack)
    assert invoke(handler, batch) == []  # the message is deleted
    assert len(told) == 1
    ended_cancelled(stack)
    assert events_of(handler) == [TaskEventType.CANCELLED.value]
    (entry,) = [e for call in handler.events.of("put_events") for e in call["Entries"]]
    assert json.loads(entry["Detail"])["status"] == "CANCELLED"

    # The message again (a redelivery): a DUPLICATE, nothing runs.
    assert invoke(make_handler(body), batch) == []
    assert len(told) == 1
    with pytest.raises(NotCancellable, match="is CANCELLED: it has ended"):
        stack.client().cancel(PLAIN, "o-1")


def test_a_body_that_catches_the_cancel_and_returns_still_ends_cancelled(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        cancel(stack)
        with contextlib.suppress(TaskCancelled):
            run.progress(50)
        return {"result": "ignored"}

    assert invoke(make_handler(body), one_batch(stack)) == []
    ended_cancelled(stack)
    assert stack.client().get(PLAIN, "o-1").result is None


@pytest.mark.parametrize("retries", [2, 0])
def test_a_failure_after_a_cancel_is_neither_retried_nor_dead_lettered(
    stack: Stack, make_handler: HandlerFactory, retries: int
) -> None:
    """The body never checks, and fails: with retries left (the finish's own condition sees the
    cancel) or none (read before the dead letter), it ends CANCELLED."""

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        cancel(stack)
        raise RuntimeError("the mail provider is down")

    assert invoke(make_handler(body, retries=retries), one_batch(stack)) == []
    ended_cancelled(stack)


def test_a_body_that_never_checks_is_not_stopped_and_keeps_its_success(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        cancel(stack)
        return {"sent": True}

    assert invoke(make_handler(body), one_batch(stack)) == []
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, {"sent": True})
    assert record.cancel_requested_by == BY  # asked too late: the audit keeps it


def test_run_once_finishes_the_effect_begun_and_refuses_a_new_one(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A cancel never leaves an effect's fate unknown: the block under way records its
    completion; the next intent is refused (nothing begun), and the task ends CANCELLED."""
    done: list[str] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        with run.once("charge") as first:
            if first:
                cancel(stack)
                done.append("charge")
        with run.once("receipt") as first:
            done.append("receipt")
        return None

    assert invoke(make_handler(body), one_batch(stack)) == []
    ended_cancelled(stack)
    effects = stack.client().get(PLAIN, "o-1").effects or {}
    assert done == ["charge"] and set(effects) == {"charge"}
    assert effects["charge"]["state"] == "DONE"


def test_a_strict_write_learns_it_and_later_fenced_writes_are_refused(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    from vigil.effects import Effects, Grants, RunFence

    stack.dynamodb.create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    outcomes: list[str] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        fence = RunFence.of_task(run.task, run.id, run.fencing_token)
        grants = Grants({WriteKind.TABLES: {"Orders": "orders"}})
        effects = Effects(
            fence, grants, lambda service: stack.dynamodb, halt=run.halt, claim=run.record
        )
        effects.strict.table("Orders").put_item(Item={"pk": {"S": "a"}})
        cancel(stack)
        for write in (effects.strict.table, effects.table):
            try:
                write("Orders").put_item(Item={"pk": {"S": "b"}})
            except TaskCancelled:
                outcomes.append("refused")
        return None

    assert invoke(make_handler(body), one_batch(stack)) == []
    assert outcomes == ["refused", "refused"]
    items = stack.dynamodb.scan(TableName="orders")["Items"]
    assert [item["pk"]["S"] for item in items] == ["a"]
    ended_cancelled(stack)


def test_a_cancelled_run_that_died_ends_cancelled_without_running_again(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    class Killed(BaseException):
        """Lambda's timeout: the process is gone."""

    runs: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        runs.append(run.attempt)
        cancel(stack)
        raise Killed

    batch = one_batch(stack)
    with pytest.raises(Killed):
        invoke(make_handler(body), batch)
    stack.clock.advance(timedelta(minutes=10))  # the lease has run out: its message is back
    assert invoke(make_handler(body), batch) == []
    assert runs == [1]
    ended_cancelled(stack)


def test_cancel_of_a_final_task_is_refused_naming_its_status(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    assert invoke(make_handler(lambda run, payload: None), one_batch(stack)) == []
    with pytest.raises(NotCancellable, match="is SUCCEEDED: it has ended") as refused:
        stack.client().cancel(PLAIN, "o-1", by=BY)
    assert refused.value.status == "SUCCEEDED"
    assert stack.client().get(PLAIN, "o-1").cancel_requested_at is None


def _two_attempts(
    stack: Stack, make_handler: HandlerFactory, body: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """The first attempt of ``body`` fails (a retry), the second runs 11 s later."""
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    batch = one_batch(stack)
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []
    return handler, batch


def test_a_cancel_does_not_hide_an_effect_an_earlier_attempt_left_unknown(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Attempt 1 began the receipt and died before recording it; a cancel is asked while the
    retry runs; the retry meets the unknown effect. It must end UNCERTAIN (a person settles
    it: maybe the receipt went out), not CANCELLED with the intent buried in the journal
    (it did: the intent's refusal raised the cancel before looking at the entry)."""
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        if run.attempt == 2:
            cancel(stack)
        with run.once("receipt-email") as first:
            if first:
                sent.append(run.attempt)
                raise RuntimeError("died after sending, before the completion")

    _two_attempts(stack, make_handler, body)
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.uncertain_effect) == (TaskStatus.UNCERTAIN, "receipt-email")
    assert sent == [1] and record.cancel_requested_by == BY


def test_a_redrive_after_settling_an_uncertain_cancelled_run_runs_it(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Cancelled while it ran and ended UNCERTAIN (a cancel never decides an unknown effect):
    the operator settles it not done and redrives it, which runs it once more, as the guide
    promises for a settled task. The old request must not keep every claim out (it did: the
    claim's condition refused any record with a request, and the redrive ended in
    ClaimContention on every delivery, then the dead-letter queue)."""
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        try:
            with run.once("receipt-email") as first:
                if first:
                    sent.append(run.attempt)
                    if len(sent) == 1:
                        raise RuntimeError("died after sending, before the completion")
        except Uncertain:
            cancel(stack)  # asked while the retry runs, once it met the unknown effect
            raise

    handler, _ = _two_attempts(stack, make_handler, body)
    record = stack.client().get(PLAIN, "o-1")
    assert record.status is TaskStatus.UNCERTAIN and record.cancel_requested_by == BY
    (dead,) = stack.dead_letters()

    store = TaskStore(stack.dynamodb, stack.table)
    store.settle(PLAIN, "o-1", "receipt-email", verdict=Verdict.NOT_DONE, now=stack.clock())
    redriven = parse(dead["Body"]).redrive().body()
    assert invoke(handler, [record_of(redriven, "m-r1")]) == []
    record = stack.client().get(PLAIN, "o-1")
    assert record.status is TaskStatus.SUCCEEDED and sent == [1, 3]
    assert record.cancel_requested_at is None  # the request was the settled run's


def test_a_cancel_between_retries_ends_it_and_the_retry_runs_nothing(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    runs: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        runs.append(run.attempt)
        raise RuntimeError("the mail provider is down")

    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    batch = one_batch(stack)
    assert invoke(handler, batch) == [batch[0]["messageId"]]  # QUEUED for its retry
    record = stack.client().cancel(PLAIN, "o-1", by=BY)
    assert record.status is TaskStatus.CANCELLED  # not started: at once
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []  # the retry's message meets CANCELLED: deleted
    assert runs == [1] and stack.dead_letters() == []
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.CANCELLED
