"""Results from Python: ``vigil.tasks.get``/``wait`` and the handle ``enqueue`` returns. The
task's body runs when the waiter's (simulated) sleep reaches its moment, so every poll is counted
and every wait is the same wait. (moto, simulated clock; about 2 s in all.)"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.tasks import TaskStatus
from vigil.tasks import (
    InvalidTask,
    PollBackoff,
    TaskFailed,
    TaskHandle,
    TaskNotFound,
    UnknownTask,
    enqueue,
    get,
    wait,
)
from vigil.tasks.enqueue import TaskClient


class Waiter:
    """A client whose sleeps step the stack's clock, running the task's queued messages through
    ``handler`` once ``run_after_s`` have passed since it was made."""

    def __init__(self, stack: Stack, handler: Any = None, run_after_s: float = 0.0) -> None:
        self.stack, self.handler = stack, handler
        self.due = stack.clock() + timedelta(seconds=run_after_s)
        self.dynamodb = Counting(stack.dynamodb)
        self.slept: list[float] = []
        self.client: TaskClient = TaskClient(
            stack.catalog,
            sqs=stack.sqs,
            dynamodb=self.dynamodb,
            scheduler=stack.scheduler,
            s3=stack.s3,
            clock=stack.clock,
            sleep=self.sleep,
        )

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.stack.clock.advance(seconds)
        if self.handler is not None and self.stack.clock() >= self.due:
            url = self.stack.catalog.spec(PLAIN).queue_url
            batch = records(self.stack.messages(url))
            if batch:
                invoke(self.handler, batch)
            self.handler = None

    @property
    def polls(self) -> int:
        return self.dynamodb.counts["get_item"]


Body = Callable[[Any, dict[str, Any]], Any]


def test_wait_returns_the_result_once_the_task_succeeds(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    waiter = Waiter(stack, make_handler(lambda run, payload: {"receipt": payload["order"]}), 3)
    handle = enqueue(PLAIN, {"order": "o-1"}, key="o-1", client=waiter.client)
    waiter.dynamodb.reset()

    assert handle.wait(timeout=30) == {"receipt": "o-1"}
    # polls at 0, 0.25, 0.75, 1.75, 3.75 s: done by then, the fifth answers
    assert waiter.slept == [0.25, 0.5, 1.0, 2.0]
    assert waiter.polls == 5 == PollBackoff().polls(done_after_s=3, timeout_s=30)
    # a poll is one GetItem, nothing else (a flow's step timeline is read by get, not by wait)
    assert waiter.dynamodb.counts == {"get_item": 5}


def test_the_handle_is_the_id_and_reads_the_record(stack: Stack) -> None:
    client = stack.client()
    handle = enqueue(PLAIN, {"order": "o-1"}, key="o-1", client=client)
    assert isinstance(handle, TaskHandle) and isinstance(handle, str)
    assert handle == "o-1" == handle.id and handle.task == PLAIN
    assert handle.get().status is TaskStatus.QUEUED
    assert get(PLAIN, "o-1", client=client).status is TaskStatus.QUEUED


def test_a_failed_task_raises_task_failed_with_its_error(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    def body(run: Any, payload: dict[str, Any]) -> None:
        raise ValueError("no email for order o-2")

    waiter = Waiter(stack, make_handler(body, retries=0), 1)
    enqueue(PLAIN, {"order": "o-2"}, key="o-2", client=waiter.client)

    with pytest.raises(TaskFailed, match="FAILED after 1 attempt") as raised:
        wait(PLAIN, "o-2", timeout=10, client=waiter.client)
    failed = raised.value
    assert (failed.task, failed.task_id, failed.status) == (PLAIN, "o-2", TaskStatus.FAILED)
    assert (failed.error_type, failed.error_message) == ("ValueError", "no email for order o-2")


def test_a_cancelled_task_raises_task_failed_saying_so(stack: Stack) -> None:
    client = stack.client()
    enqueue(PLAIN, {}, key="o-3", client=client).get()
    client.cancel(PLAIN, "o-3")
    with pytest.raises(TaskFailed, match="CANCELLED") as raised:
        wait(PLAIN, "o-3", timeout=5, client=client)
    assert raised.value.status is TaskStatus.CANCELLED


def test_a_task_still_running_at_the_deadline_is_a_timeout_after_a_known_number_of_polls(
    stack: Stack,
) -> None:
    waiter = Waiter(stack)
    handle = enqueue(PLAIN, {}, key="o-4", client=waiter.client)
    waiter.dynamodb.reset()
    start = stack.clock()

    with pytest.raises(TimeoutError, match="o-4 is still QUEUED after 10 s"):
        handle.wait(timeout=timedelta(seconds=10))
    assert stack.clock() - start == timedelta(seconds=10)  # the last sleep ends at the deadline
    assert waiter.slept == [0.25, 0.5, 1.0, 2.0, 4.0, 2.25]
    assert waiter.polls == 7 == PollBackoff().polls(done_after_s=float("inf"), timeout_s=10)


def test_a_retrying_task_is_waited_for_through_its_retries(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    tries: list[int] = []

    def body(run: Any, payload: dict[str, Any]) -> str:
        tries.append(run.attempt)
        if run.attempt == 1:
            raise RuntimeError("flaky")
        return "sent"

    handler = make_handler(body, retries=2, backoff=timedelta(seconds=1))
    waiter = Waiter(stack)
    enqueue(PLAIN, {}, key="o-5", client=waiter.client)
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    original = waiter.sleep

    def sleep(seconds: float) -> None:  # the message comes back (SQS's redelivery, replayed)
        original(seconds)
        invoke(handler, batch)

    waiter.client._sleep = sleep
    assert wait(PLAIN, "o-5", timeout=30, client=waiter.client) == "sent"
    assert tries == [1, 2]


BAD: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("negative timeout", {"timeout": -1}, InvalidTask, "timeout must not be negative"),
    ("timeout as text", {"timeout": "10"}, InvalidTask, "timeout must be a timedelta"),
    ("infinite timeout", {"timeout": float("inf")}, InvalidTask, "timeout must not be negative"),
    ("unknown task", {"task": "send-reciept"}, UnknownTask, "the tasks are: provision-tenant"),
    ("unknown id", {"task_id": "never"}, TaskNotFound, "no task send-receipt never"),
]


@pytest.mark.parametrize(("case", "call", "error", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_to_wait_is_refused_plainly(
    stack: Stack, case: str, call: dict[str, Any], error: type[Exception], message: str
) -> None:
    dynamodb = Counting(stack.dynamodb)
    client = stack.client(dynamodb=dynamodb)
    arguments = {"task": PLAIN, "task_id": "o-1", "timeout": 5} | call
    with pytest.raises(error, match=message) as raised:
        wait(arguments.pop("task"), arguments.pop("task_id"), client=client, **arguments)
    if isinstance(raised.value, InvalidTask):
        assert raised.value.field == ("task" if error is UnknownTask else "timeout")
        assert dynamodb.calls == []  # refused before any request


def test_a_poll_backoff_must_be_positive() -> None:
    with pytest.raises(InvalidTask, match="first_s must be > 0"):
        PollBackoff(first_s=0)
