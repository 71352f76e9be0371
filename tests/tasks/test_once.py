"""``run.once`` in a task: an effect an attempt began and never recorded done is not done
again by the retry; the task ends UNCERTAIN (final: the message is deleted, nothing retried)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tables import create_table
from tests.helpers.tasks import PLAIN, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.effects import WRITES_ENV
from vigil.contract.journal import Verdict
from vigil.contract.tasks import TaskStatus
from vigil.dynamo import to_wire
from vigil.settle import NotSettleable
from vigil.tasks import TaskRun
from vigil.tasks.envelope import parse
from vigil.tasks.store import TaskStore, task_key


def test_a_crash_between_intent_and_completion_ends_uncertain_not_a_second_send(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        with run.once("receipt-email") as first:
            if first:
                sent.append(run.attempt)
                if run.attempt == 1:
                    raise RuntimeError("died after sending, before the completion")

    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))

    assert invoke(handler, batch) == [batch[0]["messageId"]]  # a retry, back in 10 s
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []  # UNCERTAIN: final, the message is deleted
    assert invoke(handler, batch) == []  # a copy: DUPLICATE, not run

    assert sent == [1]
    record = client.get(PLAIN, "o-1")
    assert (record.status, record.uncertain_effect) == (TaskStatus.UNCERTAIN, "receipt-email")
    assert (record.effects or {})["receipt-email"]["state"] == "INTENT"


def test_a_completed_effect_is_skipped_by_the_retry(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> str:
        with run.once("receipt-email") as first:
            if first:
                sent.append(run.attempt)
        if run.attempt == 1:
            raise RuntimeError("failed after the effect was recorded done")
        return "ok"

    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-2")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    invoke(handler, batch)
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []
    assert sent == [1]
    assert client.get(PLAIN, "o-2").status is TaskStatus.SUCCEEDED


def _uncertain(stack: Stack, make_handler: HandlerFactory, sent: list[int]) -> Any:
    """A task left UNCERTAIN on ``receipt-email`` (sent, then a crash before the completion);
    returns its handler."""

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        with run.once("receipt-email") as first:
            if first:
                sent.append(run.attempt)
                if len(sent) == 1:
                    raise RuntimeError("died after sending, before the completion")

    stack.client().enqueue(PLAIN, {}, key="o-3")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    invoke(handler, batch)
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []
    assert stack.client().get(PLAIN, "o-3").status is TaskStatus.UNCERTAIN
    return handler


def test_settled_not_done_a_redrive_runs_the_task_and_its_effect_again(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    sent: list[int] = []
    handler = _uncertain(stack, make_handler, sent)
    (dead,) = stack.dead_letters()  # the UNCERTAIN attempt's message, kept for after settling
    redriven = parse(dead["Body"]).redrive().body()
    assert invoke(handler, [record_of(redriven, "m-early")]) != []  # not settled: kept, not run

    store = TaskStore(stack.dynamodb, stack.table)
    settled = store.settle(
        PLAIN, "o-3", "receipt-email", verdict=Verdict.NOT_DONE, now=stack.clock()
    )
    assert settled.status is TaskStatus.FAILED and "redrive" in (settled.error_message or "")

    assert invoke(handler, [record_of(redriven, "m-r1")]) == []
    assert stack.client().get(PLAIN, "o-3").status is TaskStatus.SUCCEEDED
    assert sent == [1, 3]


def test_settled_done_rerun_a_redrive_runs_the_rest_of_the_task_without_the_effect(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    sent: list[int] = []
    handler = _uncertain(stack, make_handler, sent)
    (dead,) = stack.dead_letters()
    redriven = parse(dead["Body"]).redrive().body()

    store = TaskStore(stack.dynamodb, stack.table)
    settled = store.settle(
        PLAIN, "o-3", "receipt-email", verdict=Verdict.DONE_RERUN, now=stack.clock()
    )
    assert settled.status is TaskStatus.FAILED and "redrive" in (settled.error_message or "")
    assert (settled.effects or {})["receipt-email"]["state"] == "DONE"

    assert invoke(handler, [record_of(redriven, "m-r1")]) == []
    assert stack.client().get(PLAIN, "o-3").status is TaskStatus.SUCCEEDED
    assert sent == [1]  # the receipt is not sent again


def test_settled_done_the_task_succeeded_and_bad_settlements_change_nothing(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    sent: list[int] = []
    _uncertain(stack, make_handler, sent)
    store = TaskStore(stack.dynamodb, stack.table)
    before = stack.client().get(PLAIN, "o-3")
    with pytest.raises(NotSettleable, match="on effect 'receipt-email', not UNCERTAIN on 'x'"):
        store.settle(PLAIN, "o-3", "x", verdict=Verdict.DONE, now=stack.clock())
    assert stack.client().get(PLAIN, "o-3") == before

    settled = store.settle(PLAIN, "o-3", "receipt-email", verdict=Verdict.DONE, now=stack.clock())
    assert settled.status is TaskStatus.SUCCEEDED
    assert (settled.effects or {})["receipt-email"]["state"] == "DONE"
    with pytest.raises(NotSettleable, match="is SUCCEEDED, not UNCERTAIN"):
        store.settle(PLAIN, "o-3", "receipt-email", verdict=Verdict.NOT_DONE, now=stack.clock())
    assert sent == [1]


def test_an_uncertain_effect_the_body_catches_still_ends_the_task_uncertain(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The retry's body catches ``Uncertain`` (a per-item loop that logs and goes on) and
    returns: the task still ends UNCERTAIN on the effect, not SUCCEEDED."""
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> str:
        try:
            with run.once("receipt-email") as first:
                if first:
                    sent.append(run.attempt)
                    if run.attempt == 1:
                        raise SystemError("died after sending, before the completion")
        except SystemError:
            raise  # the first attempt dies (a retry comes)
        except Exception:
            pass  # the retry's loop logs and goes on
        return "done"

    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-9")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []

    record = client.get(PLAIN, "o-9")
    assert (record.status, record.uncertain_effect) == (TaskStatus.UNCERTAIN, "receipt-email")
    assert sent == [1]


def test_a_strict_write_of_an_attempt_a_newer_one_claimed_is_refused_and_left_to_it(
    stack: Stack, make_handler: HandlerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run.fenced.strict`` checks the task's record (its token, still RUNNING) in the write's
    own request: a newer attempt's claim refuses it although that attempt wrote nothing there
    (the plain writer lands); the attempt ends FENCED, its message left to the newer one."""
    create_table(stack.dynamodb, "receipts", "id")
    monkeypatch.setenv(WRITES_ENV, json.dumps({"tables": {"Receipts": "receipts"}}))
    written: list[str] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        stack.dynamodb.update_item(  # a newer attempt claims the task meanwhile
            TableName=stack.table,
            Key=to_wire(task_key(PLAIN, run.id)),
            UpdateExpression="SET #t = #t + :one",
            ExpressionAttributeNames={"#t": "token"},
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        for how, writers in (("plain", run.fenced), ("strict", run.fenced.strict)):
            writers.table("Receipts").put_item(Item={"id": {"S": f"{run.id}-{how}"}})
            written.append(how)

    stack.client().enqueue(PLAIN, {}, key="o-s")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    assert invoke(make_handler(body), batch) == [batch[0]["messageId"]]  # kept, not deleted
    assert written == ["plain"]


@pytest.mark.parametrize("verdict", [Verdict.DONE_RERUN, Verdict.NOT_DONE])
def test_a_settled_task_that_spent_its_retries_still_runs_on_the_operators_redrive(
    stack: Stack, make_handler: HandlerFactory, verdict: Verdict
) -> None:
    """One retry allowed, and both attempts spent reaching UNCERTAIN (the first crashed after
    its intent, the second found it): the settlement leaves the task FAILED for a redrive, which
    gets the retries afresh like any redrive of a FAILED task (found in review: the redrive was
    judged attempt 3 of 2, "RunCrashed", and never ran the body)."""
    sent: list[int] = []
    ran: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        ran.append(run.attempt)
        with run.once("receipt-email") as first:
            if first:
                sent.append(run.attempt)
                if len(sent) == 1:
                    raise RuntimeError("died after sending, before the completion")

    stack.client().enqueue(PLAIN, {}, key="o-4")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=1, backoff=timedelta(seconds=10))
    invoke(handler, batch)
    stack.clock.advance(timedelta(seconds=11))
    assert invoke(handler, batch) == []
    assert stack.client().get(PLAIN, "o-4").status is TaskStatus.UNCERTAIN
    (dead,) = stack.dead_letters()
    redriven = parse(dead["Body"]).redrive().body()

    store = TaskStore(stack.dynamodb, stack.table)
    store.settle(PLAIN, "o-4", "receipt-email", verdict=verdict, now=stack.clock())
    assert invoke(handler, [record_of(redriven, "m-r1")]) == []

    record = stack.client().get(PLAIN, "o-4")
    assert record.status is TaskStatus.SUCCEEDED, record.error_message
    assert ran == [1, 2, 3]
    assert sent == ([1] if verdict is Verdict.DONE_RERUN else [1, 3])
