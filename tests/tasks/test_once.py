"""``run.once`` in a task: an effect an attempt began and never recorded done is not done
again by the retry; the task ends UNCERTAIN (final: the message is deleted, nothing retried)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.helpers.tasks import PLAIN, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.tasks import TaskStatus
from vigil.tasks import TaskRun


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
