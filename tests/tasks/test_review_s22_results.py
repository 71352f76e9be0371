"""Review of issue 31's results from Python, one key one request and errors not worth retrying:
each test failed on the code as merged (moto, simulated clock; about 2 s in all)."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_runs import Body, url
from vigil.contract.tasks import TaskStatus
from vigil.tasks import InvalidTask, Reject, TaskRun, enqueue, wait


def test_a_superseded_run_that_rejects_is_not_dead_lettered(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A run that outlived its lease and then rejects (its own validation, or a body that turns
    whatever it meets into a Reject) is superseded: its outcome is refused, so it must not leave
    a "not retried" dead letter (and the queue's alarm) for a task the newer run finished."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body(returns={"by": "newer"}))

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        stack.clock.advance(timedelta(minutes=10))  # past its lease: SQS hands it on
        assert invoke(newer, [record]) == []
        raise Reject("the order is no longer valid")

    assert invoke(make_handler(body, retries=3), [record]) == [record["messageId"]]  # FENCED
    final = stack.client().get(PLAIN, "o-1")
    assert (final.status, final.result) == (TaskStatus.SUCCEEDED, {"by": "newer"})
    assert stack.dead_letters() == []


def test_a_superseded_run_turning_its_fencing_into_a_reject_is_not_dead_lettered(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """``except Exception as e: raise Reject(str(e))`` around ``run.progress``: the TaskFenced
    the progress raised is this run's supersession, not a payload no retry can help."""
    stack.client().enqueue(PLAIN, {}, key="o-2")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body())

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        stack.clock.advance(timedelta(minutes=10))
        invoke(newer, [record])
        try:
            run.progress(50)
        except Exception as error:
            raise Reject(f"cannot go on: {error}") from error

    assert invoke(make_handler(body, retries=3), [record]) == [record["messageId"]]
    assert stack.client().get(PLAIN, "o-2").status is TaskStatus.SUCCEEDED
    assert stack.dead_letters() == []


def test_the_same_instant_in_another_time_zone_is_the_same_request(stack: Stack) -> None:
    """``at`` is an instant: 15:30 UTC and 16:30 in UTC+1 start the task at the same moment, so
    the second enqueue is the first one again (its id, nothing sent), not KeyReused."""
    at = datetime(2026, 11, 23, 15, 30, tzinfo=UTC)
    stack.client().enqueue(PLAIN, {}, key="k-1", at=at)
    sqs, scheduler = Counting(stack.sqs), Counting(stack.scheduler)
    client = stack.client(sqs=sqs, scheduler=scheduler)

    paris = at.astimezone(timezone(timedelta(hours=1)))
    assert client.enqueue(PLAIN, {}, key="k-1", at=paris) == "k-1"
    assert (sqs.calls, scheduler.calls) == ([], [])


def test_a_timeout_beyond_the_calendar_is_refused_naming_it(stack: Stack) -> None:
    dynamodb = Counting(stack.dynamodb)
    client = stack.client(dynamodb=dynamodb)
    with pytest.raises(InvalidTask, match="timeout") as raised:
        wait(PLAIN, "o-1", timeout=1e12, client=client)  # 31,700 years: no datetime holds it
    assert raised.value.field == "timeout" and dynamodb.calls == []


def test_an_id_that_is_not_text_is_refused_naming_it(stack: Stack) -> None:
    dynamodb = Counting(stack.dynamodb)
    client = stack.client(dynamodb=dynamodb)
    with pytest.raises(InvalidTask, match="id") as raised:
        wait(PLAIN, 42, timeout=1, client=client)  # type: ignore[arg-type]
    assert raised.value.field == "id" and dynamodb.calls == []


def test_the_handle_pickles_and_copies_as_the_id_it_is(stack: Stack) -> None:
    """``enqueue`` returned a ``str`` before it returned a handle: code that pickles or copies
    the id (a cache, a session, multiprocessing) must keep working."""
    handle = enqueue(PLAIN, {}, key="o-9", client=stack.client())
    assert pickle.loads(pickle.dumps(handle)) == "o-9"
    assert copy.deepcopy(handle) == "o-9" == copy.copy(handle)


def test_a_wait_of_zero_polls_once_and_never_sleeps(stack: Stack) -> None:
    """Held: ``timeout=0`` is one read, an answer or TimeoutError at once."""
    dynamodb, slept = Counting(stack.dynamodb), list[float]()
    client = stack.client(dynamodb=dynamodb)
    client._sleep = slept.append
    enqueue(PLAIN, {}, key="o-0", client=client)
    dynamodb.reset()
    with pytest.raises(TimeoutError, match="1 poll"):
        wait(PLAIN, "o-0", timeout=0, client=client)
    assert (dynamodb.counts["get_item"], slept) == (1, [])


def test_a_rejected_ordered_task_lets_its_group_go_on(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Held: a Reject in an ordered group is FAILED at once and dead-lettered, and the group's
    next task runs in the same batch (the guide: a failure does not stop the group for good)."""
    client = stack.client()
    for action in ("create", "resize"):
        client.enqueue(ORDERED, {}, key=f"a-{action}", group="a")
    ran: list[str] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        ran.append(run.id)
        if run.id == "a-create":
            raise Reject("no such plan")

    handler = make_handler(body, ORDERED, retries=3)
    assert invoke(handler, records(stack.messages(url(stack, ORDERED)))) == []
    assert ran == ["a-create", "a-resize"]
    assert client.get(ORDERED, "a-create").status is TaskStatus.FAILED
    assert client.get(ORDERED, "a-resize").status is TaskStatus.SUCCEEDED
    assert len(stack.dead_letters(ORDERED)) == 1


def _no_retry_on_everything(stack: Stack, body: Any) -> Any:
    from vigil.tasks import task

    def sleep(seconds: float) -> None:
        stack.clock.advance(seconds)

    return task(
        body,
        settings=stack.settings(PLAIN, retries=3),
        dynamodb=stack.dynamodb,
        sqs=stack.sqs,
        events=stack.events,
        clock=stack.clock,
        sleep=sleep,
        no_retry_on=(Exception,),  # a base class of TaskCancelled and TaskFenced
    )


def test_no_retry_on_a_base_of_the_cancel_leaves_a_cancelled_run_cancelled(stack: Stack) -> None:
    """Held: a run told it is cancelled ends CANCELLED, not dead-lettered 'not retried'."""
    stack.client().enqueue(PLAIN, {}, key="o-c")

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        stack.client().cancel(PLAIN, "o-c", by="ops")
        run.progress(10)  # TaskCancelled, let go

    invoke(_no_retry_on_everything(stack, body), records(stack.messages(url(stack))))
    assert stack.client().get(PLAIN, "o-c").status is TaskStatus.CANCELLED
    assert stack.dead_letters() == []


def test_no_retry_on_a_base_of_the_fence_leaves_a_superseded_run_fenced(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Held: a run that lets its TaskFenced go is FENCED, whatever no_retry_on names."""
    stack.client().enqueue(PLAIN, {}, key="o-f")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body())

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        stack.clock.advance(timedelta(minutes=10))
        invoke(newer, [record])
        run.progress(50)

    assert invoke(_no_retry_on_everything(stack, body), [record]) == [record["messageId"]]
    assert stack.client().get(PLAIN, "o-f").status is TaskStatus.SUCCEEDED
    assert stack.dead_letters() == []
