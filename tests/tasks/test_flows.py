"""Flows (issue 30): a task whose body calls ``run.step``/``run.sleep``/``run.wait_for``, fed by
a queue played on the test's clock (:class:`vigil_tools.testing.flow_queue.FlowQueue`): steps run once and
are skipped when the body runs again, sleeps and waits end the invocation and resume with no
compute between, signals wake waits exactly once against their timeouts, failures compensate in
reverse, and bad input is refused at the call with nothing written."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Counting, Stack
from tests.tasks.conftest import HandlerFactory
from vigil.clock import iso
from vigil.contract.flows import journal_pk
from vigil.contract.tasks import TaskStatus
from vigil.dynamo import from_wire
from vigil.tasks import TaskRun
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.errors import TaskNotFound
from vigil.tasks.flows.errors import Abort, InvalidStep, SignalRefused, SignalTimeout
from vigil_tools.testing.flow_queue import FlowQueue


class Crash(BaseException):
    """The invocation dies (a timeout, out of memory): nothing after it runs or is recorded."""


@pytest.fixture
def queue(stack: Stack) -> FlowQueue:
    return FlowQueue(stack.sqs, stack.scheduler, stack.catalog.spec(PLAIN).queue_url, stack.clock)


@pytest.fixture
def client(stack: Stack, queue: FlowQueue) -> TaskClient:
    return stack.client(sqs=queue, scheduler=queue.scheduler)


@pytest.fixture
def flow_handler(stack: Stack, make_handler: HandlerFactory, queue: FlowQueue) -> Any:
    def make(body: Any, **overrides: Any) -> Any:
        values: dict[str, Any] = {
            "sqs": queue,
            "scheduler": queue.scheduler,
            "scheduler_role_arn": "arn:aws:iam::123456789012:role/vigil-tasks-scheduler",
            "schedule_group": "vigil-tasks",
        }
        handler = make_handler(body, **(values | overrides))
        return handler

    return make


def journal(stack: Stack, task_id: str) -> dict[str, dict[str, Any]]:
    answer = stack.dynamodb.query(
        TableName=stack.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": journal_pk(PLAIN, task_id)}},
    )
    return {item["sk"]["S"]: from_wire(item) or {} for item in answer["Items"]}


class Ran:
    """What each step function did, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def fn(self, name: str, result: Any = None, fail: int = 0) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append(name)
            if self.calls.count(name) <= fail:
                raise RuntimeError(f"{name} failed")
            return result if result is not None else {"step": name, "args": list(args)}

        return call


# A. Steps ---------------------------------------------------------------------------------------


def test_finished_steps_are_not_run_again_when_a_failed_step_is_retried(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        a = run.step("reserve", ran.fn("reserve"), payload["order"])
        b = run.step("charge", ran.fn("charge", fail=1), a["args"][0])
        return {"a": a, "b": b}

    handler = flow_handler(body)
    client.enqueue(PLAIN, {"order": "o-1"}, key="o-1")
    queue.run(handler, until=stack.clock() + timedelta(minutes=5))

    assert ran.calls == ["reserve", "charge", "charge"]
    record = client.get(PLAIN, "o-1")
    assert record.status is TaskStatus.SUCCEEDED
    assert record.result == {
        "a": {"step": "reserve", "args": ["o-1"]},
        "b": {"step": "charge", "args": ["o-1"]},
    }
    steps = journal(stack, "o-1")
    assert (steps["reserve"]["state"], steps["charge"]["state"]) == ("DONE", "DONE")
    assert (steps["reserve"]["seq"], steps["charge"]["seq"]) == (1, 2)
    assert steps["charge"]["attempts"] == 2


def test_a_crash_inside_a_step_resumes_at_that_step_and_the_finished_ones_are_not_rerun(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()
    crash = [True]

    def dies(*_: Any) -> Any:
        ran.calls.append("ship")
        if crash.pop() if crash else False:
            raise Crash()
        return {"shipped": True}

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", ran.fn("reserve"))
        run.step("charge", ran.fn("charge"))
        return run.step("ship", dies)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="o-2")
    with pytest.raises(Crash):
        queue.deliver(handler)
    assert client.get(PLAIN, "o-2").status is TaskStatus.RUNNING
    queue.run(handler, until=stack.clock() + timedelta(minutes=30))

    assert ran.calls == ["reserve", "charge", "ship", "ship"]
    assert client.get(PLAIN, "o-2").result == {"shipped": True}


def test_a_step_is_one_write_and_a_resume_reads_its_journal_in_one_query_per_page(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    dynamodb = Counting(stack.dynamodb)
    count = [0]

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        for index in range(count[0]):
            run.step(f"s{index}", lambda i=index: i)
        return "done"

    count[0] = 100
    handler = flow_handler(body, dynamodb=dynamodb)
    client.enqueue(PLAIN, {}, key="long")
    queue.run(handler)
    writes = [c for c in dynamodb.calls if c[0] == "put_item"]
    # 100 steps: 100 PutItems of about 200 bytes each (1 write unit), one Query.
    assert len(writes) == 100
    assert max(len(json.dumps(kwargs["Item"])) for _, kwargs in writes) < 1024
    assert dynamodb.counts["query"] == 1

    # The same flow again (a redrive): every step skipped, no write, the journal in one Query.
    dynamodb.reset()
    stack.dynamodb.update_item(
        TableName=stack.table,
        Key={"pk": {"S": f"TASK#{PLAIN}"}, "sk": {"S": "long"}},
        UpdateExpression="SET #s = :q REMOVE #r",
        ExpressionAttributeNames={"#s": "status", "#r": "result"},
        ExpressionAttributeValues={":q": {"S": "QUEUED"}},
    )
    queue.send_message(QueueUrl=queue.url, MessageBody=queue_body(client, "long"))
    queue.run(handler)
    assert dynamodb.counts["put_item"] == 0 and dynamodb.counts["query"] == 1
    assert client.get(PLAIN, "long").status is TaskStatus.SUCCEEDED


def queue_body(client: TaskClient, task_id: str) -> str:
    from vigil.tasks.envelope import Envelope

    return Envelope(PLAIN, task_id, {}, "2026-01-01T00:00:00.000Z").body()


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("twice", "used twice in this execution with different arguments"),
        ("not-json", "its result is not JSON"),
        ("too-big", "over the 65536 a step records"),
        ("bad-name", "invalid step name"),
        ("beyond-retention", "beyond the flow's retention"),
    ],
)
def test_bad_steps_are_refused_at_the_call_naming_the_step_with_nothing_written(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any, case: str, error: str
) -> None:
    seen: list[BaseException] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        try:
            if case == "twice":
                run.step("charge", lambda amount: amount, 10)
                run.step("charge", lambda amount: amount, 20)
            elif case == "not-json":
                run.step("charge", lambda: object())
            elif case == "too-big":
                run.step("charge", lambda: "x" * 70_000)
            elif case == "bad-name":
                run.step("no spaces", lambda: 1)
            else:
                run.sleep("charge", timedelta(days=30))
        except InvalidStep as refused:
            seen.append(refused)
            raise

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key=f"bad-{case}")
    queue.run(handler)
    assert len(seen) == 1 and error in str(seen[0])
    if case != "bad-name":
        assert "'charge'" in str(seen[0])
    written = journal(stack, f"bad-{case}")
    # The first "charge" of "twice" is the only step written.
    assert list(written) == (["charge"] if case == "twice" else [])
    # Refused at once: FAILED without retries (a retry would be refused the same way).
    record = client.get(PLAIN, f"bad-{case}")
    assert (record.status, record.attempts, record.error_type) == (
        TaskStatus.FAILED,
        1,
        "InvalidStep",
    )


def test_more_steps_than_a_flow_holds_are_refused(
    stack: Stack,
    queue: FlowQueue,
    client: TaskClient,
    flow_handler: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("vigil.tasks.flows.run.MAX_STEPS", 3)

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        for index in range(4):
            run.step(f"s{index}", lambda: 1)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="many")
    queue.run(handler)
    record = client.get(PLAIN, "many")
    assert record.status is TaskStatus.FAILED
    assert "'s3'" in str(record.error_message) and "at most 3" in str(record.error_message)
    assert sorted(journal(stack, "many")) == ["s0", "s1", "s2"]


def test_a_once_step_found_begun_and_unrecorded_ends_the_flow_uncertain(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    calls: list[int] = []

    def pay() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Crash()
        return "paid"

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        return run.step("pay", pay, once=True)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="o-3")
    with pytest.raises(Crash):
        queue.deliver(handler)
    queue.run(handler, until=stack.clock() + timedelta(minutes=30))
    record = client.get(PLAIN, "o-3")
    assert calls == [1]
    assert (record.status, record.uncertain_effect) == (TaskStatus.UNCERTAIN, "step:pay")


def _uncertain_payment(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any, key: str
) -> tuple[Any, list[int]]:
    """A flow left UNCERTAIN on ``step:pay`` (its attempt died inside the once step)."""
    calls: list[int] = []

    def pay() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Crash()
        return "ch_again"

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        charge = run.step("pay", pay, once=True)
        return run.step("receipt", lambda c: {"receipt_for": c}, charge)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key=key)
    with pytest.raises(Crash):
        queue.deliver(handler)
    queue.run(handler, until=stack.clock() + timedelta(minutes=30))
    assert client.get(PLAIN, key).uncertain_effect == "step:pay"
    return handler, calls


def _redriven(stack: Stack, queue: FlowQueue) -> None:
    """``vigil tasks redrive``: the dead letter back to the task's queue (the CLI's SQS client),
    then into the test's played queue."""
    from tests.tasks.test_cli import vigil

    code, _, err = vigil(stack, "redrive", PLAIN)
    assert code == 0, err
    url = stack.catalog.spec(PLAIN).queue_url
    for message in stack.messages(url):
        queue.send_message(QueueUrl=queue.url, MessageBody=message["Body"])
        stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_an_uncertain_step_settled_done_with_a_result_by_the_cli_resumes_the_flow(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    from tests.tasks.test_cli import vigil

    handler, calls = _uncertain_payment(stack, queue, client, flow_handler, "s-1")
    code, out, err = vigil(
        stack, "settle", PLAIN, "s-1", "--effect", "step:pay", "--done", "--result", '"ch_1"'
    )
    assert code == 0, err
    assert out.startswith(f"{PLAIN} s-1: FAILED effect 'step:pay' settled done")
    step = journal(stack, "s-1")["pay"]
    assert (step["state"], json.loads(step["result"])) == ("DONE", "ch_1")

    _redriven(stack, queue)
    queue.run(handler, until=stack.clock() + timedelta(minutes=1))
    record = client.get(PLAIN, "s-1")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, {"receipt_for": "ch_1"})
    assert calls == [1]  # the payment is not made again


def test_an_uncertain_step_settled_not_done_by_the_api_runs_again_on_the_resume(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    from tests.helpers.rest import send_json
    from vigil.tasks.api import TasksServices, build_tasks_app

    app = build_tasks_app(TasksServices(client=client))
    handler, calls = _uncertain_payment(stack, queue, client, flow_handler, "s-2")
    path = f"/tasks/{PLAIN}/s-2/settle"
    before = stack.items()
    refusals = [
        (path, {"effect": "step:pay", "outcome": "not_done", "result": 1}, 422),
        (path, {"effect": "step:other", "outcome": "done"}, 409),
        (path, {"effect": "step:pay", "outcome": "maybe"}, 422),
        (path, {"effect": "step:pay", "outcome": "done", "result": float("nan")}, 422),
        (f"/tasks/{PLAIN}/nobody/settle", {"effect": "step:pay", "outcome": "done"}, 404),
    ]
    for where, body, expected in refusals:
        status, answer = send_json(app.resolve, "POST", where, body)
        assert status == expected, (body, answer)
    assert stack.items() == before  # nothing written

    status, answer = send_json(
        app.resolve, "POST", path, {"effect": "step:pay", "outcome": "not_done"}
    )
    assert (status, answer["status"]) == (200, "FAILED"), answer
    assert journal(stack, "s-2")["pay"]["state"] == "FAILED"
    status, answer = send_json(
        app.resolve, "POST", path, {"effect": "step:pay", "outcome": "not_done"}
    )
    assert status == 409 and "not UNCERTAIN" in answer["message"]  # settled once

    _redriven(stack, queue)
    queue.run(handler, until=stack.clock() + timedelta(minutes=1))
    record = client.get(PLAIN, "s-2")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, {"receipt_for": "ch_again"})
    assert calls == [1, 1]  # not done: the payment runs again, once


# B. Sleeps ---------------------------------------------------------------------------------------


def test_a_short_sleep_ends_the_invocation_and_resumes_after_an_sqs_delay(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("first", ran.fn("first"))
        run.sleep("cool-down", timedelta(minutes=10))
        return run.step("second", ran.fn("second"))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="s-1")
    start = stack.clock()
    assert queue.run(handler) == 1
    record = client.get(PLAIN, "s-1")
    assert record.status is TaskStatus.SLEEPING
    assert record.wake_at == iso(start + timedelta(minutes=10))
    assert queue.sent_delays[-1] == 600 and not queue.schedules
    # Nothing runs before the end (no compute between): nine minutes on, no invocation.
    assert queue.run(handler, until=start + timedelta(minutes=9)) == 0
    assert queue.run(handler, until=start + timedelta(minutes=11)) == 1
    assert ran.calls == ["first", "second"]
    assert client.get(PLAIN, "s-1").status is TaskStatus.SUCCEEDED


@pytest.mark.parametrize("fraction_ms", [0, 500])
def test_a_three_day_sleep_is_a_one_time_schedule_and_no_invocation_until_it_fires(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any, fraction_ms: int
) -> None:
    """One invocation wakes it, also for a sleep that ends within a second (``at()`` has whole
    seconds: a schedule truncated to the second fired before the sleep's end, was answered
    BUSY and came back a second later, two invocations for one wake-up)."""
    stack.clock.advance(timedelta(milliseconds=fraction_ms))
    ran = Ran()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("welcome", ran.fn("welcome"))
        run.sleep("three-days", timedelta(days=3))
        return run.step("remind", ran.fn("remind"))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="t-1")
    start = stack.clock()
    assert queue.run(handler) == 1
    assert len(queue.schedules) == 1 and client.get(PLAIN, "t-1").status is TaskStatus.SLEEPING
    assert queue.run(handler, until=start + timedelta(days=2, hours=23)) == 0
    assert queue.run(handler, until=start + timedelta(days=3, minutes=1)) == 1
    assert ran.calls == ["welcome", "remind"]
    assert client.get(PLAIN, "t-1").status is TaskStatus.SUCCEEDED


def test_an_early_copy_of_a_sleeping_flows_message_does_not_wake_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.sleep("nap", timedelta(days=1))
        return run.step("after", ran.fn("after"))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="n-1")
    queue.run(handler)
    # A duplicate of the original message (SQS delivers at least once) an hour later.
    stack.clock.advance(timedelta(hours=1))
    queue.send_message(QueueUrl=queue.url, MessageBody=queue_body(client, "n-1"))
    queue.run(handler)
    assert ran.calls == [] and client.get(PLAIN, "n-1").status is TaskStatus.SLEEPING
    queue.run(handler, until=stack.clock() + timedelta(days=1))
    assert ran.calls == ["after"]


# C. Signals and waits ------------------------------------------------------------------------------


def approval_flow(ran: Ran) -> Any:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("ask", ran.fn("ask"))
        try:
            answer = run.wait_for("approval", timeout=timedelta(days=2))
        except SignalTimeout:
            return {"approved": False, "timed_out": True}
        return {"approved": answer["ok"]}

    return body


def test_a_signal_wakes_a_waiting_flow_with_its_payload(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()
    handler = flow_handler(approval_flow(ran))
    client.enqueue(PLAIN, {}, key="w-1")
    queue.run(handler)
    record = client.get(PLAIN, "w-1")
    assert (record.status, record.waiting_for) == (TaskStatus.WAITING, "approval")

    stack.clock.advance(timedelta(hours=5))
    sent = client.signal(PLAIN, "w-1", "approval", {"ok": True})
    again = client.signal(PLAIN, "w-1", "approval", {"ok": True})  # counts once
    assert sent.woke and again.key == sent.key
    queue.run(handler)
    record = client.get(PLAIN, "w-1")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, {"approved": True})
    assert ran.calls == ["ask"]
    with pytest.raises(SignalRefused, match="ended"):
        client.signal(PLAIN, "w-1", "approval", {"ok": False})


def test_a_signal_sent_before_the_wait_is_kept_for_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.sleep("first", timedelta(minutes=5))
        return run.wait_for("approval", timeout=timedelta(hours=1))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="w-2")
    queue.run(handler)
    sent = client.signal(PLAIN, "w-2", "approval", {"ok": 1})
    assert not sent.woke
    queue.run(handler, until=stack.clock() + timedelta(minutes=6))
    assert client.get(PLAIN, "w-2").result == {"ok": 1}
    assert ran.calls == []


def test_a_wait_times_out_and_a_later_signal_is_refused_with_nothing_written(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran = Ran()
    handler = flow_handler(approval_flow(ran))
    client.enqueue(PLAIN, {}, key="w-3")
    start = stack.clock()
    queue.run(handler)
    assert len(queue.schedules) == 1  # two days: a one-time schedule
    queue.run(handler, until=start + timedelta(days=2, minutes=1))
    record = client.get(PLAIN, "w-3")
    assert record.result == {"approved": False, "timed_out": True}
    before = journal(stack, "w-3")
    with pytest.raises(SignalRefused):
        client.signal(PLAIN, "w-3", "approval", {"ok": True})
    assert journal(stack, "w-3") == before


def test_a_signal_racing_the_timeout_one_outcome_wins(
    stack: Stack,
    queue: FlowQueue,
    client: TaskClient,
    flow_handler: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timeout's wake-up is due and the flow resumes; a signal lands between its journal
    read and its timeout write: the timeout's conditional write loses, the signal is returned."""
    ran = Ran()
    handler = flow_handler(approval_flow(ran))
    client.enqueue(PLAIN, {}, key="w-4")
    start = stack.clock()
    queue.run(handler)
    stack.clock.set(start + timedelta(days=2, minutes=1))

    from vigil.tasks.flows import journal as journal_module

    original = journal_module.FlowJournal.time_out

    def signal_first(self: Any, *args: Any) -> Any:
        client.signal(PLAIN, "w-4", "approval", {"ok": True})
        return original(self, *args)

    monkeypatch.setattr(journal_module.FlowJournal, "time_out", signal_first)
    queue.run(handler)
    assert client.get(PLAIN, "w-4").result == {"approved": True}
    assert "timed_out_at" not in journal(stack, "w-4")["approval"]


def test_signals_to_unknown_flows_and_bad_signals_are_refused(client: TaskClient) -> None:
    with pytest.raises(TaskNotFound):
        client.signal(PLAIN, "nobody", "approval", {})
    client.enqueue(PLAIN, {}, key="w-5")
    for name, payload, key in (("bad name", {}, None), ("ok", {1, 2}, None), ("ok", {}, "a/b")):
        with pytest.raises(ValueError):
            client.signal(PLAIN, "w-5", name, payload, key=key)


def test_the_same_signal_under_another_key_is_refused(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    client.enqueue(PLAIN, {}, key="w-6")
    client.signal(PLAIN, "w-6", "approval", {"ok": True}, key="k-1")
    client.signal(PLAIN, "w-6", "approval", {"ok": True}, key="k-1")
    with pytest.raises(SignalRefused, match="another key"):
        client.signal(PLAIN, "w-6", "approval", {"ok": False}, key="k-2")


# D. Compensation and cancel ---------------------------------------------------------------------------


def fulfil(ran: Ran, undone: list[str], ship_fails: str = "abort") -> Any:
    def ship() -> Any:
        ran.calls.append("ship")
        if ship_fails == "abort":
            raise Abort("no courier")
        raise RuntimeError("courier down")

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step(
            "reserve",
            ran.fn("reserve", {"stock": 1}),
            compensate=lambda r: undone.append(f"release {r}"),
        )
        run.step(
            "charge",
            ran.fn("charge", {"paid": 5}),
            compensate=lambda r: undone.append(f"refund {r}"),
        )
        run.step("ship", ship)

    return body


@pytest.mark.parametrize("how", ["abort", "retries spent"])
def test_a_failed_flow_compensates_its_finished_steps_in_reverse_once(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any, how: str
) -> None:
    ran, undone = Ran(), list[str]()
    handler = flow_handler(fulfil(ran, undone, "abort" if how == "abort" else "raise"))
    client.enqueue(PLAIN, {}, key="f-1")
    queue.run(handler, until=stack.clock() + timedelta(hours=1))
    record = client.get(PLAIN, "f-1")
    assert record.status is TaskStatus.COMPENSATED
    assert undone == ["refund {'paid': 5}", "release {'stock': 1}"]
    assert ran.calls.count("reserve") == 1 and ran.calls.count("ship") == (
        1 if how == "abort" else 3
    )
    steps = journal(stack, "f-1")
    assert steps["charge"]["compensation"] == "DONE" and steps["reserve"]["compensation"] == "DONE"
    rows = {r["name"]: r for r in record.steps or []}  # the order they ran, on the record
    assert (rows["charge"]["compensation_order"], rows["reserve"]["compensation_order"]) == (1, 2)


def test_a_compensation_that_raises_fails_the_flow_naming_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    def refund(_: Any) -> None:
        raise RuntimeError("bank down")

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("charge", lambda: 5, compensate=refund)
        raise Abort("stop")

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="f-2")
    queue.run(handler)
    record = client.get(PLAIN, "f-2")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "CompensationFailed")
    assert "'charge'" in str(record.error_message) and "bank down" in str(record.error_message)


def test_cancel_of_a_sleeping_flow_stops_it_and_compensates(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran, undone = Ran(), list[str]()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", ran.fn("reserve"), compensate=lambda r: undone.append("release"))
        run.sleep("hold", timedelta(days=3))
        run.step("ship", ran.fn("ship"))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="c-1")
    queue.run(handler)
    assert client.cancel(PLAIN, "c-1").cancel_requested_at is not None
    queue.run(handler)
    record = client.get(PLAIN, "c-1")
    assert record.status is TaskStatus.CANCELLED and undone == ["release"]
    assert ran.calls == ["reserve"]
    # The three-day wake-up still fires later: it meets CANCELLED and runs nothing.
    queue.run(handler, until=stack.clock() + timedelta(days=4))
    assert ran.calls == ["reserve"] and client.get(PLAIN, "c-1").status is TaskStatus.CANCELLED


def test_cancel_of_a_waiting_flow_stops_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    handler = flow_handler(approval_flow(Ran()))
    client.enqueue(PLAIN, {}, key="c-2")
    queue.run(handler)
    client.cancel(PLAIN, "c-2")
    queue.run(handler)
    assert client.get(PLAIN, "c-2").status is TaskStatus.CANCELLED


def test_a_running_flow_asked_to_cancel_stops_at_its_next_step(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    ran, undone = Ran(), list[str]()

    def ask_cancel() -> Any:
        ran.calls.append("reserve")
        # What the cancel of a running task writes on its record (s22-control's request).
        stack.dynamodb.update_item(
            TableName=stack.table,
            Key={"pk": {"S": f"TASK#{PLAIN}"}, "sk": {"S": "c-3"}},
            UpdateExpression="SET cancel_requested_at = :now",
            ExpressionAttributeValues={":now": {"S": "2026-01-01T00:00:00.000Z"}},
        )
        return 1

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", ask_cancel, compensate=lambda r: undone.append("release"))
        run.step("ship", ran.fn("ship"))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="c-3")
    queue.run(handler)
    assert client.get(PLAIN, "c-3").status is TaskStatus.CANCELLED
    assert ran.calls == ["reserve"] and undone == ["release"]


# C/F. The API, the CLI and the step timeline -------------------------------------------------------


def test_the_api_signals_a_waiting_flow_and_get_shows_its_step_timeline(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    from tests.helpers.rest import send_json
    from vigil.tasks.api import TasksServices, build_tasks_app

    app = build_tasks_app(TasksServices(client=client))

    def api(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return send_json(app.resolve, method, path, body)

    handler = flow_handler(approval_flow(Ran()))
    client.enqueue(PLAIN, {}, key="a-1")
    queue.run(handler)
    status, record = api("GET", f"/tasks/{PLAIN}/a-1")
    assert (status, record["status"], record["waiting_for"]) == (200, "WAITING", "approval")
    assert [(s["name"], s["kind"], s["status"]) for s in record["steps"]] == [
        ("ask", "step", "DONE"),
        ("approval", "wait", "WAITING"),
    ]
    assert record["steps"][1]["until"] == record["wake_at"]

    status, sent = api("POST", f"/tasks/{PLAIN}/a-1/signals/approval", {"payload": {"ok": True}})
    assert (status, sent["woke"]) == (202, True)
    queue.run(handler)
    status, record = api("GET", f"/tasks/{PLAIN}/a-1")
    assert record["result"] == {"approved": True}
    assert record["steps"][1]["status"] == "SIGNALLED"

    refusals = {
        "ended": ("POST", f"/tasks/{PLAIN}/a-1/signals/approval", {"payload": 1}, 409),
        "unknown": ("POST", f"/tasks/{PLAIN}/nobody/signals/approval", {"payload": 1}, 404),
        "bad name": ("POST", f"/tasks/{PLAIN}/a-1/signals/no%20way", {"payload": 1}, 422),
        "extra field": ("POST", f"/tasks/{PLAIN}/a-1/signals/x", {"payload": 1, "no": 2}, 422),
    }
    before = stack.items()
    for case, (method, path, body, expected) in refusals.items():
        status, answer = api(method, path, body)
        assert status == expected, (case, answer)
    assert stack.items() == before  # nothing written


def test_the_timeline_shows_a_passed_sleep_as_slept_and_what_a_cancel_left_as_stopped(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("ask", lambda: 1)
        run.sleep("pause", timedelta(minutes=1))
        return run.wait_for("go", timeout=timedelta(hours=1))

    def rows() -> dict[str, dict[str, Any]]:
        return {row["name"]: row for row in client.get(PLAIN, "tl-1").steps or []}

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="tl-1")
    queue.run(handler)
    assert rows()["pause"]["status"] == "SLEEPING" and "finished_at" not in rows()["pause"]

    queue.run(handler, until=stack.clock() + timedelta(minutes=2))
    assert client.get(PLAIN, "tl-1").status is TaskStatus.WAITING
    pause = rows()["pause"]
    assert (pause["status"], pause["finished_at"]) == ("SLEPT", pause["until"])
    assert rows()["go"]["status"] == "WAITING"

    client.cancel(PLAIN, "tl-1")
    queue.run(handler)
    record = client.get(PLAIN, "tl-1")
    assert record.status is TaskStatus.CANCELLED
    go = rows()["go"]
    assert (go["status"], go["finished_at"]) == ("STOPPED", record.finished_at)


def test_the_cli_signals_a_flow_and_prints_its_steps(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    from tests.tasks.test_cli import vigil

    handler = flow_handler(approval_flow(Ran()))
    client.enqueue(PLAIN, {}, key="cli-1")
    queue.run(handler)
    code, out, err = vigil(stack, "get", PLAIN, "cli-1")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("#"))
    assert header.split()[:4] == ["#", "STEP", "KIND", "STATUS"]
    assert any(
        line.split()[1:4] == ["approval", "wait", "WAITING"]
        for line in out.splitlines()[1:]
        if line[:1].isdigit()
    )

    code, out, err = vigil(stack, "signal", PLAIN, "cli-1", "approval", "--payload", '{"ok": true}')
    assert (code, out) == (0, f"{PLAIN} cli-1: approval woke it\n"), err
    # Woken through the stack's own queue (the CLI's SQS client): its message is there.
    assert len(stack.messages(stack.catalog.spec(PLAIN).queue_url)) == 1
    code, out, err = vigil(
        stack, "signal", PLAIN, "cli-1", "approval", "--payload", "2", "--key", "k9"
    )
    assert code == 1 and "another key" in err


# G. The example flow -----------------------------------------------------------------------------


def onboard_body() -> Any:
    import inspect

    from tasks import onboard_tenant

    return inspect.unwrap(onboard_tenant.handler)


@pytest.mark.parametrize("path", ["verified", "reminded", "aborted"])
def test_the_example_onboard_tenant_flow(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any, path: str
) -> None:
    """Three days asleep with no invocation, then the tenant's verification (a signal) or the
    reminder after two more days; a plan that cannot be activated deletes the account again."""
    handler = flow_handler(onboard_body())
    plan = "blocked" if path == "aborted" else "basic"
    client.enqueue(PLAIN, {"tenant": "t-1", "plan": plan}, key="t-1")
    start = stack.clock()
    queue.run(handler)
    if path == "aborted":
        record = client.get(PLAIN, "t-1")
        assert record.status is TaskStatus.COMPENSATED and record.error_type == "Abort"
        rows = [
            (s["name"], s.get("compensation"), s.get("compensation_order"))
            for s in record.steps or []
        ]
        assert rows == [  # undone in reverse: the workspace first, then the account
            ("create-account", "DONE", 2),
            ("provision-workspace", "DONE", 1),
            ("activate", None, None),
        ]
        return
    assert client.get(PLAIN, "t-1").status is TaskStatus.SLEEPING
    assert queue.run(handler, until=start + timedelta(days=2, hours=23)) == 0
    queue.run(handler, until=start + timedelta(days=3, minutes=1))
    assert client.get(PLAIN, "t-1").status is TaskStatus.WAITING
    if path == "verified":
        client.signal(PLAIN, "t-1", "verified", {"via": "link"})
        queue.run(handler)
        expected = {"account": "acct-t-1", "verified": True, "by": {"via": "link"}}
    else:
        queue.run(handler, until=start + timedelta(days=5, minutes=2))
        expected = {"account": "acct-t-1", "verified": False}
    record = client.get(PLAIN, "t-1")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, expected)
    names = [s["name"] for s in record.steps or []]
    assert names[:6] == [
        "create-account",
        "provision-workspace",
        "activate",
        "welcome-email",
        "welcome-pause",
        "verified",
    ]


def test_list_knows_sleeping_and_waiting_and_never_lists_a_step(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("one", lambda: 1)
        if payload["wait"]:
            run.wait_for("go", timeout=timedelta(hours=1))
        run.sleep("nap", timedelta(hours=1))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {"wait": False}, key="l-1")
    client.enqueue(PLAIN, {"wait": True}, key="l-2")
    queue.run(handler)
    sleeping, _ = client.list(PLAIN, "sleeping")
    waiting, _ = client.list(PLAIN, "WAITING")
    everything, _ = client.list(PLAIN)
    assert [r.id for r in sleeping] == ["l-1"] and [r.id for r in waiting] == ["l-2"]
    assert sorted(r.id for r in everything) == ["l-1", "l-2"]  # the steps are the flows' own
