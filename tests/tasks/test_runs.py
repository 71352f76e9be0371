"""A task's function, fed batches as SQS's event source feeds them: once per key whatever the
delivery does (duplicates, redeliveries, a Lambda timeout mid-batch, takeovers), retries with
backoff, the dead-letter queue, cancel, redrive, results and completion events."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.clients import Delegating
from tests.helpers.jobs import throttled
from tests.helpers.tasks import (
    ORDERED,
    PLAIN,
    Stack,
    ThrottledFinish,
    invoke,
    record_of,
    records,
    settle,
)
from tests.tasks.conftest import HandlerFactory
from vigil.contract.tasks import (
    MAX_RESULT_BYTES,
    REASON_ATTRIBUTE,
    CompletionEvents,
    TaskEventType,
    TaskStatus,
)
from vigil.tasks import TaskRun
from vigil.tasks.envelope import parse


class Body:
    """A task body that records its runs, fails its first ``fail`` attempts, can run code."""

    def __init__(self, fail: int = 0, during: Any = None, returns: Any = "default") -> None:
        self.runs: list[tuple[str, int, dict[str, Any]]] = []
        self.fail = fail
        self.during = during
        self.returns = returns

    def __call__(self, run: TaskRun, payload: dict[str, Any]) -> Any:
        self.runs.append((run.id, run.attempt, payload))
        if self.during:
            self.during(run)
        if len(self.runs) <= self.fail:
            raise RuntimeError(f"boom #{len(self.runs)}")
        return {"done": run.id} if self.returns == "default" else self.returns

    @property
    def ids(self) -> list[str]:
        return [task_id for task_id, _, _ in self.runs]


def url(stack: Stack, task: str = PLAIN) -> str:
    return stack.catalog.spec(task).queue_url


def test_one_key_enqueued_three_times_runs_once(stack: Stack, make_handler: HandlerFactory) -> None:
    client, body = stack.client(), Body()
    client.enqueue(PLAIN, {"order": "o-1"}, key="o-1")
    assert client.enqueue(PLAIN, {"order": "o-1"}, key="o-1") == "o-1"  # its record answers
    for _ in range(2):  # copies of its message (SQS's, or enqueues racing the first)
        stack.send_copy(PLAIN, {"order": "o-1"}, key="o-1")
    handler = make_handler(body)
    batch = records(stack.messages(url(stack)))
    assert len(batch) == 3

    assert invoke(handler, batch) == []
    assert body.ids == ["o-1"]
    record = client.get(PLAIN, "o-1")
    assert (record.status, record.attempts, record.result) == (
        TaskStatus.SUCCEEDED,
        1,
        {"done": "o-1"},
    )


def test_a_redelivery_after_the_visibility_timeout_is_one_request(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body()
    handler = make_handler(body)
    invoke(handler, batch)
    handler.dynamodb.reset()

    stack.clock.advance(timedelta(minutes=30))
    assert invoke(make_handler(body, dynamodb=handler.dynamodb), batch) == []  # deleted
    assert body.ids == ["o-1"]
    assert handler.dynamodb.counts == {"update_item": 1}  # the refused claim, nothing else


def test_a_run_outliving_its_lease_is_taken_over_and_its_late_finish_fenced(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body(returns={"by": "newer"}))

    def stall(run: TaskRun) -> None:
        # The first run hangs past its lease; SQS hands the message to another container.
        stack.clock.advance(timedelta(minutes=10))
        assert invoke(newer, [record]) == []

    first = Body(during=stall, returns={"by": "first"})
    failed = invoke(make_handler(first), [record])

    assert failed == [record["messageId"]]  # FENCED: the message is left to the newer run
    final = stack.client().get(PLAIN, "o-1")
    assert (final.status, final.attempts, final.result) == (
        TaskStatus.SUCCEEDED,
        2,
        {"by": "newer"},
    )
    # The message comes back once more: DUPLICATE, deleted.
    assert invoke(make_handler(Body()), [record]) == []


def test_progress_of_a_run_taken_over_stops_it(stack: Stack, make_handler: HandlerFactory) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body())
    reached: list[int] = []

    def report(run: TaskRun) -> None:
        run.progress(10, "started")
        stack.clock.advance(timedelta(minutes=10))
        invoke(newer, [record])
        reached.append(1)
        run.progress(50, "half")  # raises TaskFenced: this run lost the task
        reached.append(2)

    assert invoke(make_handler(Body(during=report)), [record]) == [record["messageId"]]
    assert reached == [1]
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.SUCCEEDED


def test_a_lambda_timeout_mid_batch_reruns_nothing_that_finished(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    client = stack.client()
    for n in (1, 2, 3):
        client.enqueue(PLAIN, {}, key=f"o-{n}")
    batch = records(stack.messages(url(stack)))

    class Killed(BaseException):
        """Lambda's timeout: the process is gone, the batch answers nothing."""

    def die_on_second(run: TaskRun) -> None:
        if run.id == "o-2":
            raise Killed

    first = Body(during=die_on_second)
    with pytest.raises(Killed):
        invoke(make_handler(first), batch)
    assert first.ids == ["o-1", "o-2"]

    # No partial response: SQS hands the whole batch back after the visibility timeout (6x the
    # function's timeout, so the killed run's lease has run out by then).
    stack.clock.advance(timedelta(minutes=6))
    second = Body()
    handler = make_handler(second)
    assert invoke(handler, batch) == []
    assert second.ids == ["o-2", "o-3"]  # o-1 was DUPLICATE
    statuses = {r.id: (r.status, r.attempts) for r in client.list(PLAIN)[0]}
    assert statuses == {
        "o-1": (TaskStatus.SUCCEEDED, 1),
        "o-2": (TaskStatus.SUCCEEDED, 2),
        "o-3": (TaskStatus.SUCCEEDED, 1),
    }


def test_near_the_deadline_the_rest_of_the_batch_is_not_claimed(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    client = stack.client()
    for n in (1, 2, 3):
        client.enqueue(PLAIN, {}, key=f"o-{n}")
    batch = records(stack.messages(url(stack)))
    remaining = [60_000]

    def slow(run: TaskRun) -> None:
        remaining[0] -= 20_000

    body = Body(during=slow)
    failed = invoke(make_handler(body), batch, remaining=lambda: remaining[0])

    assert body.ids == ["o-1", "o-2"]  # 20 s left after o-2: under the 30 s margin
    assert failed == [batch[2]["messageId"]]
    third = client.get(PLAIN, "o-3")
    assert (third.status, third.attempts) == (TaskStatus.QUEUED, 0)  # unclaimed, untouched


def test_failures_retry_with_backoff_then_fail_into_the_dead_letter_queue(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {"order": "o-1"}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body(fail=99)
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))

    assert invoke(handler, batch) == [batch[0]["messageId"]]
    retry = stack.client().get(PLAIN, "o-1")
    assert (retry.status, retry.attempts, retry.error_message) == (
        TaskStatus.QUEUED,
        1,
        "boom #1",
    )
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    assert invoke(handler, batch) == []  # out of retries: FAILED, dead-lettered, deleted

    delays = [c["VisibilityTimeout"] for c in handler.sqs.of("change_message_visibility")]
    assert delays == [10, 20]
    failed = stack.client().get(PLAIN, "o-1")
    assert (failed.status, failed.attempts, failed.error_type, failed.error_message) == (
        TaskStatus.FAILED,
        3,
        "RuntimeError",
        "boom #3",
    )
    (dead,) = stack.dead_letters()
    assert dead["Body"] == batch[0]["body"]
    reason = dead["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"]
    assert reason == "failed after 3 attempt(s): RuntimeError: boom #3"
    assert invoke(handler, batch) == [] and len(body.runs) == 3  # a late copy: DUPLICATE


def test_a_key_enqueued_again_during_a_retrys_backoff_does_not_run_it_early(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The copy's message took the QUEUED record at once, so the retry ran with no backoff
    at all. It is now a DUPLICATE while the backoff lasts: the retry's own message runs it."""
    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-1")
    (first,) = records(stack.messages(url(stack)))
    stack.sqs.delete_message(QueueUrl=url(stack), ReceiptHandle=first["receiptHandle"])
    body = Body(fail=1)
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    assert invoke(handler, [first]) == [first["messageId"]]  # a retry, back in 10 s

    stack.send_copy(PLAIN, {}, key="o-1")  # a copy of the key's message
    copy = records(stack.messages(url(stack)))
    stack.clock.advance(timedelta(seconds=4))
    assert invoke(handler, copy) == []  # DUPLICATE: deleted, not run
    assert len(body.runs) == 1
    waiting = client.get(PLAIN, "o-1")
    assert (waiting.status, waiting.attempts) == (TaskStatus.QUEUED, 1)

    # The retry's own message runs it (even a little early by this clock: SQS said it was due).
    stack.clock.advance(timedelta(seconds=5))
    assert invoke(handler, [first]) == []
    done = client.get(PLAIN, "o-1")
    assert (done.status, done.attempts) == (TaskStatus.SUCCEEDED, 2)


def test_malformed_messages_go_to_the_dead_letter_queue_at_once_with_the_reason(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    def envelope(**fields: Any) -> str:
        base = {
            "v": 1,
            "task": PLAIN,
            "id": "o-1",
            "payload": {},
            "enqueued_at": "2026-11-22T12:00:00.000Z",
        }
        return json.dumps({"vigil_task": base | fields})

    bodies = {
        "not JSON": "{nope",
        "no envelope": json.dumps({"order": 1}),
        "version": envelope(v=2),
        "other task": envelope(task=ORDERED),
        "bad id": envelope(id="has space"),
        "payload": envelope(id="o-7", payload=[1]),
    }
    batch = [record_of(text, f"m-{n}") for n, text in enumerate(bodies.values())]
    body = Body()

    assert invoke(make_handler(body), batch) == []  # never retried
    assert body.runs == []
    reasons = sorted(
        m["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"] for m in stack.dead_letters()
    )
    assert len(reasons) == 6 and all(r.startswith("malformed: ") for r in reasons)
    assert any("not JSON" in r for r in reasons)
    assert any("a message of task 'provision-tenant'" in r for r in reasons)
    # Readable as this task's id: recorded FAILED with the reason.
    failed = stack.client().get(PLAIN, "o-7")
    assert (failed.status, failed.error_type) == (TaskStatus.FAILED, "MalformedTask")
    assert "not a JSON object" in (failed.error_message or "")


def test_a_cancelled_task_is_not_run_when_its_message_comes(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    client = stack.client()
    client.enqueue(PLAIN, {}, key="o-1")
    client.cancel(PLAIN, "o-1")
    body = Body()
    assert invoke(make_handler(body), records(stack.messages(url(stack)))) == []
    assert body.runs == []
    assert client.get(PLAIN, "o-1").status is TaskStatus.CANCELLED


def test_a_redriven_failed_task_runs_again_and_a_second_redrive_is_a_duplicate(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body(fail=1)
    handler = make_handler(body, retries=0)
    invoke(handler, batch)
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.FAILED

    (dead,) = stack.dead_letters()
    redriven = parse(dead["Body"]).redrive().body()
    assert invoke(handler, [record_of(redriven, "m-r1")]) == []
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.attempts, record.error_type) == (TaskStatus.SUCCEEDED, 2, None)
    assert invoke(handler, [record_of(redriven, "m-r2")]) == []  # repeated redrive: DUPLICATE
    assert len(body.runs) == 2


def test_a_throttled_finish_is_written_through_persist(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    throttling = ThrottledFinish(stack.dynamodb, times=3)
    before = stack.clock()
    assert invoke(make_handler(Body(), dynamodb=throttling), batch) == []
    assert throttling.refused == 3
    assert stack.clock() > before  # backed off, on the test's clock
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.SUCCEEDED


def test_a_finish_out_of_time_is_remembered_for_the_messages_redelivery(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    throttling = ThrottledFinish(stack.dynamodb, times=None)
    body = Body()
    handler = make_handler(body, dynamodb=throttling)
    remaining = [40_000]

    def time_runs_out(run: TaskRun) -> None:
        remaining[0] = 3_000

    body.during = time_runs_out
    assert invoke(handler, batch, remaining=lambda: remaining[0]) == [batch[0]["messageId"]]
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.RUNNING

    throttling.times = 0  # the throttle clears; the same container gets the message back
    assert invoke(handler, batch) == []
    assert len(body.runs) == 1  # written from memory, not run again
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.SUCCEEDED


def test_a_result_too_large_fails_the_task_plainly(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body(returns={"blob": "x" * MAX_RESULT_BYTES})
    assert invoke(make_handler(body, retries=3), batch) == []  # no retry: it would not shrink
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.error_type, record.result) == (
        TaskStatus.FAILED,
        "ResultTooLarge",
        None,
    )
    assert len(stack.dead_letters()) == 1 and len(body.runs) == 1


def run_ok_and_bad(stack: Stack, make_handler: HandlerFactory, choice: CompletionEvents) -> Any:
    """Tasks ``ok`` (succeeds) and ``bad`` (fails, no retries) run in one batch; the handler."""
    client = stack.client()
    client.enqueue(PLAIN, {}, key="ok")
    client.enqueue(PLAIN, {}, key="bad")

    def fail_bad(run: TaskRun) -> None:
        if run.id == "bad":
            raise ValueError("no such order")

    handler = make_handler(Body(during=fail_bad), retries=0, completion_events=choice)
    assert invoke(handler, records(stack.messages(url(stack)))) == []
    return handler


def test_completion_events_reach_a_rule_subscriber(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    inbox = stack.sqs.create_queue(QueueName="app-inbox")["QueueUrl"]
    inbox_arn = stack.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    stack.events.put_rule(
        Name="task-done",
        EventPattern=json.dumps(
            {"source": ["vigil"], "detail-type": ["Vigil Task Succeeded", "Vigil Task Failed"]}
        ),
    )
    stack.events.put_targets(Rule="task-done", Targets=[{"Id": "inbox", "Arn": inbox_arn}])
    run_ok_and_bad(stack, make_handler, CompletionEvents.ALL)

    events = [json.loads(m["Body"]) for m in stack.messages(inbox)]
    by_id = {e["detail"]["id"]: e for e in events}
    assert by_id["ok"]["detail-type"] == "Vigil Task Succeeded"
    assert by_id["ok"]["detail"]["result"] == {"done": "ok"}
    assert by_id["bad"]["detail-type"] == "Vigil Task Failed"
    assert by_id["bad"]["detail"]["error_type"] == "ValueError"
    assert by_id["bad"]["detail"]["enqueued_at"] == "2026-11-22T12:00:00.000Z"


@pytest.mark.parametrize(
    ("choice", "announced"),
    [
        (CompletionEvents.ALL, [TaskEventType.SUCCEEDED, TaskEventType.FAILED]),
        (CompletionEvents.FAILURES, [TaskEventType.FAILED]),
        (CompletionEvents.NONE, []),
    ],
)
def test_a_task_announces_the_outcomes_it_chose_and_records_them_all(
    stack: Stack, make_handler: HandlerFactory, choice: CompletionEvents, announced: list[str]
) -> None:
    handler = run_ok_and_bad(stack, make_handler, choice)

    client = stack.client()
    sent = [entry for call in handler.events.of("put_events") for entry in call["Entries"]]
    assert sorted(entry["DetailType"] for entry in sent) == sorted(announced)
    ok, bad = client.get(PLAIN, "ok"), client.get(PLAIN, "bad")
    assert (ok.status, ok.result, ok.attempts) == (TaskStatus.SUCCEEDED, {"done": "ok"}, 1)
    assert (bad.status, bad.error_type, bad.attempts) == (TaskStatus.FAILED, "ValueError", 1)


def test_an_ordered_group_runs_in_order_and_stops_at_its_first_failure(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    client = stack.client()
    for tenant, action in (("a", "create"), ("b", "create"), ("a", "resize"), ("a", "delete")):
        client.enqueue(ORDERED, {"tenant": tenant}, key=f"{tenant}-{action}", group=tenant)
    queue = url(stack, ORDERED)
    batch = records(stack.messages(queue))
    assert [parse(r["body"]).id for r in batch] == ["a-create", "b-create", "a-resize", "a-delete"]

    def fail_resize_once(run: TaskRun) -> None:
        if run.id == "a-resize" and run.attempt == 1:
            raise RuntimeError("database busy")

    body = Body(during=fail_resize_once)
    handler = make_handler(body, ORDERED, retries=1)
    failed = invoke(handler, batch)

    # a-delete is not run before a-resize: the group stops; b runs on.
    assert body.ids == ["a-create", "b-create", "a-resize"]
    assert failed == [batch[2]["messageId"], batch[3]["messageId"]]
    settle(stack, queue, batch, failed)

    again = [r for r in batch if r["messageId"] in failed]
    assert invoke(handler, again) == []
    assert body.ids[3:] == ["a-resize", "a-delete"]
    assert {r.id: r.status for r in client.list(ORDERED)[0]} == {
        "a-create": TaskStatus.SUCCEEDED,
        "a-delete": TaskStatus.SUCCEEDED,
        "a-resize": TaskStatus.SUCCEEDED,
        "b-create": TaskStatus.SUCCEEDED,
    }


def test_a_message_whose_record_was_never_written_still_runs(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """enqueue's PutItem failed after its SendMessage: the claim creates the record."""
    plan = stack.client().plan(PLAIN, {"order": "o-1"}, key="o-1")
    stack.client().send(plan)
    assert stack.items() == []
    body = Body()
    assert invoke(make_handler(body), records(stack.messages(url(stack)))) == []
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.enqueued_at) == (TaskStatus.SUCCEEDED, plan.envelope.enqueued_at)


def test_a_busy_task_comes_back_when_the_holders_lease_ends(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    stack.client().enqueue(PLAIN, {}, key="o-1")
    (record,) = records(stack.messages(url(stack)))
    other = make_handler(Body())

    def duplicate_meanwhile(run: TaskRun) -> None:
        # A standard queue's duplicate copy, delivered while this run holds the task.
        assert invoke(other, [record | {"messageId": "copy"}]) == ["copy"]

    invoke(make_handler(Body(during=duplicate_meanwhile)), [record])
    (visibility,) = other.sqs.of("change_message_visibility")
    assert visibility["VisibilityTimeout"] == 90  # 60 s left + the 30 s margin


class DeadLetterThrottled(Delegating):
    """An SQS client whose sends to the dead-letter queue are throttled while ``down``."""

    def __init__(self, client: Any, dead_letter_url: str) -> None:
        super().__init__(client)
        self.dead_letter_url = dead_letter_url
        self.down = True

    def send_message(self, **kwargs: Any) -> Any:
        if self.down and kwargs["QueueUrl"] == self.dead_letter_url:
            raise throttled("SendMessage")
        return self._client.send_message(**kwargs)


def test_a_failure_whose_dead_letter_could_not_be_sent_still_ends_in_the_dead_letter_queue(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Out of retries, the dead-letter send throttled until the invocation's time ran out: the
    message is kept, and its redelivery must not be taken for a DUPLICATE and dropped."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    sqs = DeadLetterThrottled(stack.sqs, stack.catalog.spec(PLAIN).dead_letter_url)
    remaining = [60_000]

    def time_runs_out(run: TaskRun) -> None:
        remaining[0] = 3_000

    body = Body(fail=99, during=time_runs_out)
    handler = make_handler(body, retries=0, sqs=sqs)

    assert invoke(handler, batch, remaining=lambda: remaining[0]) == [batch[0]["messageId"]]
    assert stack.dead_letters() == [] and len(body.runs) == 1
    body.during = None

    sqs.down = False
    stack.clock.advance(timedelta(minutes=10))  # the message is back
    assert invoke(handler, batch) == []
    assert len(stack.dead_letters()) == 1
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.FAILED


def test_an_ordered_batch_that_fails_whole_is_answered_not_raised(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Every message kept is still an answer (``batchItemFailures``), not an invocation error:
    the retry's backoff set on the message holds either way, and no error is counted twice."""
    stack.client().enqueue(ORDERED, {"tenant": "a"}, key="a-create", group="a")
    batch = records(stack.messages(url(stack, ORDERED)))
    handler = make_handler(Body(fail=1), ORDERED, retries=1)
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    assert invoke(handler, batch) == []


def test_a_body_that_kills_every_invocation_ends_failed_with_its_reason_not_running_forever(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A crash (a timeout, out of memory) records nothing; each redelivery takes the expired
    lease over. Past its retries the task is not run again: FAILED, dead-lettered, with why."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))

    class Killed(BaseException):
        pass

    def die(run: TaskRun) -> None:
        raise Killed

    body = Body(during=die)
    for _ in range(2):  # the first run and its one retry both die
        with pytest.raises(Killed):
            invoke(make_handler(body, retries=1), batch)
        stack.clock.advance(timedelta(minutes=10))

    assert invoke(make_handler(body, retries=1), batch) == []
    assert len(body.runs) == 2
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.attempts, record.error_type) == (
        TaskStatus.FAILED,
        3,
        "RunCrashed",
    )
    (dead,) = stack.dead_letters()
    assert "RunCrashed" in dead["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"]


def test_a_run_whose_fenced_write_is_refused_after_a_takeover_is_fenced(
    stack: Stack, make_handler: HandlerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run.fenced`` refusing a write means a newer attempt of this task wrote: the delivery
    ends FENCED (the message left to the newer run), not logged as the run failing."""
    from aws_lambda_powertools import Logger

    from vigil.effects import Fenced

    errors: list[str] = []
    monkeypatch.setattr(Logger, "exception", lambda self, message, *a, **k: errors.append(message))

    stack.client().enqueue(PLAIN, {}, key="o-1")
    (record,) = records(stack.messages(url(stack)))
    newer = make_handler(Body(returns={"by": "newer"}))

    def refused(run: TaskRun) -> None:
        stack.clock.advance(timedelta(minutes=10))
        invoke(newer, [record])
        raise Fenced("table t put_item", "task:plain/o-1#1", "task:plain/o-1#2")

    assert invoke(make_handler(Body(during=refused)), [record]) == [record["messageId"]]
    final = stack.client().get(PLAIN, "o-1")
    assert (final.status, final.result) == (TaskStatus.SUCCEEDED, {"by": "newer"})
    assert "task run failed" not in errors
