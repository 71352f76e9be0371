# ruff: noqa: F811 (the flows' fixtures, imported, are the tests' parameters)
"""Review of flows (issue 30), adversarial: each test is a defect found by trying to break a
guarantee of docs/guides/flows.md, reproduced here (it failed before its fix), on moto with the
test's clock (:class:`vigil_tools.testing.flow_queue.FlowQueue`)."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Stack
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_flows import (  # noqa: F401 (fixtures)
    Crash,
    Ran,
    client,
    flow_handler,
    journal,
    queue,
)
from vigil.contract.tasks import TaskStatus
from vigil.tasks import TaskRun
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.envelope import parse
from vigil.tasks.flows.errors import Abort
from vigil_tools.testing.flow_queue import Delegating, FlowQueue


def dead_letters(stack: Stack) -> list[dict[str, Any]]:
    return stack.messages(stack.catalog.spec(PLAIN).dead_letter_url)


def redrive_dead_letter(stack: Stack, queue: FlowQueue, task_id: str) -> None:
    """An operator's redrive of the flow's dead letter, onto the played queue."""
    (dead,) = [m for m in dead_letters(stack) if parse(m["Body"]).id == task_id]
    queue.send_message(QueueUrl=queue.url, MessageBody=parse(dead["Body"]).redrive("op-1").body())


def test_a_running_flow_asked_to_cancel_does_not_sleep_past_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """A cancel asked while a flow runs, then the flow reaches a three-day sleep: it stops there
    (CANCELLED, compensated) at once, not three days later."""
    undone: list[str] = []

    def reserve() -> int:
        client.cancel(PLAIN, "cs-1")  # asked while the step runs (the record is RUNNING)
        return 1

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", reserve, compensate=lambda r: undone.append("release"))
        run.sleep("hold", timedelta(days=3))
        run.step("ship", lambda: 2)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="cs-1")
    queue.run(handler, until=stack.clock() + timedelta(minutes=1))
    record = client.get(PLAIN, "cs-1")
    assert (record.status, undone) == (TaskStatus.CANCELLED, ["release"])


def test_a_flow_whose_retries_are_spent_by_crashes_still_compensates(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """A step that kills its invocation every time (a timeout): once the retries are spent the
    flow ends FAILED, and the guide says the compensations of its finished steps run then too."""
    undone: list[str] = []

    def ship() -> Any:
        raise Crash()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", lambda: 1, compensate=lambda r: undone.append(f"release {r}"))
        run.step("ship", ship)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="rc-1")
    for _ in range(3):  # the first attempt and its two retries, each dying in "ship"
        with contextlib.suppress(Crash):
            queue.run(handler, until=stack.clock() + timedelta(minutes=16))
    queue.run(handler, until=stack.clock() + timedelta(minutes=16))
    record = client.get(PLAIN, "rc-1")
    assert record.status is TaskStatus.COMPENSATED, (record.status, record.error_type)
    assert record.error_type == "RunCrashed" and undone == ["release 1"]


def test_a_redriven_flow_whose_compensation_failed_finishes_compensating(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """Compensation stopped at a step whose undo raised (FAILED CompensationFailed, newer ones
    undone). The operator fixes the cause and redrives: the flow must finish compensating, not
    go on forward on the results of steps it already undid."""
    ran, undone = Ran(), list[str]()
    bank = {"down": True}

    def refund(_: Any) -> None:
        if bank["down"]:
            raise RuntimeError("bank down")
        undone.append("refund")

    def ship() -> Any:
        ran.calls.append("ship")
        if ran.calls.count("ship") == 1:
            raise Abort("no courier")
        return "shipped"

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("charge", ran.fn("charge"), compensate=refund)
        run.step("reserve", ran.fn("reserve"), compensate=lambda r: undone.append("release"))
        return run.step("ship", ship)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="rd-1")
    queue.run(handler)
    record = client.get(PLAIN, "rd-1")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "CompensationFailed")
    assert undone == ["release"]

    bank["down"] = False
    redrive_dead_letter(stack, queue, "rd-1")
    queue.run(handler)
    record = client.get(PLAIN, "rd-1")
    assert ran.calls.count("ship") == 1, "ship ran again after reserve was released"
    assert undone == ["release", "refund"]
    assert record.status is TaskStatus.COMPENSATED, (record.status, record.error_type)


def test_a_superseded_run_does_not_compensate_a_flow_a_newer_run_holds(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """A run that outlived its lease (a newer delivery took the flow over) and then fails finally
    is superseded: it must not undo the steps the newer run goes on from."""
    undone: list[str] = []

    def ship() -> Any:
        # The lease ran out and a newer delivery claimed the flow (its token is newer).
        stack.dynamodb.update_item(
            TableName=stack.table,
            Key={"pk": {"S": f"TASK#{PLAIN}"}, "sk": {"S": "sp-1"}},
            UpdateExpression="SET #t = #t + :one",
            ExpressionAttributeNames={"#t": "token"},
            ExpressionAttributeValues={":one": {"N": "1000"}},
        )
        raise Abort("no courier")

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", lambda: 1, compensate=lambda r: undone.append("release"))
        run.step("ship", ship)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="sp-1")
    queue.deliver(handler)
    assert undone == [], "a superseded run released the stock the newer run relies on"
    assert "compensation" not in journal(stack, "sp-1")["reserve"]


def test_signals_to_names_a_flow_never_waits_on_do_not_use_up_its_steps(
    stack: Stack,
    queue: FlowQueue,
    client: TaskClient,
    flow_handler: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal is kept on its own item until its wait (a sender's typo, or a hostile one, too):
    such items are not the flow's steps and must not push its own over MAX_STEPS."""
    monkeypatch.setattr("vigil.tasks.flows.run.MAX_STEPS", 3)

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("a", lambda: 1)
        run.wait_for("go", timeout=timedelta(minutes=5))
        return run.step("b", lambda: 2)

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="fl-1")
    queue.run(handler)
    for name in ("typo-1", "typo-2", "go"):
        client.signal(PLAIN, "fl-1", name, 1)
    queue.run(handler)
    record = client.get(PLAIN, "fl-1")
    assert (record.status, record.result) == (TaskStatus.SUCCEEDED, 2), record.error_message
    assert [s["name"] for s in record.steps or []][:3] == ["a", "go", "b"]


def test_a_wait_without_a_timeout_is_refused_at_the_call_naming_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """Not a TypeError retried with the task's retries: InvalidStep naming the wait, at once,
    with nothing written for it."""

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.wait_for("approval")

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="nt-1")
    queue.run(handler, until=stack.clock() + timedelta(hours=1))
    record = client.get(PLAIN, "nt-1")
    assert (record.status, record.attempts, record.error_type) == (
        TaskStatus.FAILED,
        1,
        "InvalidStep",
    )
    assert "'approval'" in str(record.error_message)
    assert journal(stack, "nt-1") == {}


def test_a_map_child_cancelled_before_it_started_counts_its_end_and_the_flow_wakes(
    stack: Stack, queue: FlowQueue, client: TaskClient, make_handler: HandlerFactory
) -> None:
    """The guide: a child that ends CANCELLED counts its end on the map's item like any end. A
    child cancelled while QUEUED meets CANCELLED when its message comes: its end must be counted
    then, or the flow waits on the map until its record expires, with no wake-up ever sent."""
    from tests.tasks.test_flow_map import Family, map_item
    from vigil.tasks.flows.fanout import child_id

    family = Family(make_handler, queue, client)
    family.return_exceptions = True
    client.enqueue(PLAIN, {"album": "a"}, key="mc-1")
    queue.deliver(family.handler)  # the flow enqueues three children and waits
    client.cancel(PLAIN, child_id("mc-1", "squares", 1))
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))
    assert map_item(stack, "mc-1")["ended"] == 3
    record = client.get(PLAIN, "mc-1")
    assert record.status is TaskStatus.SUCCEEDED, record.status
    assert record.result[0] == {"square": 0} and "CANCELLED" in record.result[1]["failed"]
    assert sorted(family.children_ran) == [0, 2]


def test_a_crash_after_the_last_compensation_still_ends_the_flow_compensated(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """Every compensation ran and is recorded DONE, then the invocation died before the flow's
    end was written: the delivery that comes back has nothing left to undo, and the flow is
    COMPENSATED (each compensation once), not FAILED."""
    undone: list[str] = []
    crash = [True]

    class DiesAfterLastUndo(Delegating):
        def update_item(self, **request: Any) -> Any:
            answer = self._client.update_item(**request)
            values = list(request.get("ExpressionAttributeValues", {}).values())
            recorded = {"S": "DONE"} in values and {"S": "STARTED"} not in values  # not its intent
            if request["Key"]["sk"] == {"S": "reserve"} and recorded and crash and crash.pop():
                raise Crash()  # the last compensation is recorded, the flow's end is not
            return answer

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", lambda: 1, compensate=lambda r: undone.append("release"))
        run.step("charge", lambda: 2, compensate=lambda r: undone.append("refund"))
        raise Abort("no courier")

    handler = flow_handler(body, dynamodb=DiesAfterLastUndo(stack.dynamodb))
    client.enqueue(PLAIN, {}, key="cc-1")
    with contextlib.suppress(Crash):
        queue.run(handler)
    queue.run(handler, until=stack.clock() + timedelta(minutes=16))
    record = client.get(PLAIN, "cc-1")
    assert undone == ["refund", "release"]
    assert record.status is TaskStatus.COMPENSATED, (record.status, record.error_type)
