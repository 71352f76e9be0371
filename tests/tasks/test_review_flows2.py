# ruff: noqa: F811 (the flows' fixtures, imported, are the tests' parameters)
"""Second adversarial review of flows (issue 30): cancel with children, settle, stuck flows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_flow_map import Family, family  # noqa: F401 (a fixture)
from tests.tasks.test_flows import Crash, Ran, client, flow_handler, queue  # noqa: F401 (fixtures)
from vigil.contract.journal import Verdict
from vigil.contract.tasks import TaskStatus
from vigil.tasks import TaskRun
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.envelope import parse
from vigil_tools.testing.flow_queue import FlowQueue


def test_a_plain_tasks_once_effect_named_step_colon_is_settled_as_the_tasks_effect(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """``run.once`` takes ``step:receipt`` as an effect name (':' is allowed); a plain task left
    UNCERTAIN on it is settled as any task's effect, not looked for as a flow's step (which it
    has none of: every verdict was refused, the task unsettleable)."""
    sent: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> str:
        with run.once("step:receipt") as first:
            if first:
                sent.append(run.attempt)
                if len(sent) == 1:
                    raise RuntimeError("died after sending, before the completion")
        return "ok"

    client = stack.client()
    client.enqueue(PLAIN, {}, key="rv2-1")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(body, retries=2, backoff=timedelta(seconds=10))
    invoke(handler, batch)
    stack.clock.advance(timedelta(seconds=11))
    invoke(handler, batch)
    record = client.get(PLAIN, "rv2-1")
    assert (record.status, record.uncertain_effect) == (TaskStatus.UNCERTAIN, "step:receipt")

    settled = client.settle(PLAIN, "rv2-1", "step:receipt", verdict=Verdict.DONE)
    assert settled.status is TaskStatus.SUCCEEDED  # done: as for any task, not DONE_RERUN
    assert (settled.effects or {})["step:receipt"]["state"] == "DONE"
    (dead,) = stack.dead_letters()
    invoke(handler, [record_of(parse(dead["Body"]).redrive().body(), "m-r1")])
    assert sent == [1]


def test_cancel_of_a_flow_queued_for_a_retry_compensates_its_finished_steps(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """Between a failed attempt and its retry a flow's record is QUEUED, with steps finished:
    the cancel ends it as a sleeping flow's does (in its function, compensating), not as a task
    that never started (CANCELLED at once, its compensations never run)."""
    ran, undone = Ran(), list[str]()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", ran.fn("reserve"), compensate=lambda r: undone.append("release"))
        run.step("charge", ran.fn("charge", fail=5))

    handler = flow_handler(body, retries=3, backoff=timedelta(minutes=1))
    client.enqueue(PLAIN, {}, key="rv2-2")
    queue.deliver(handler)  # reserve done, charge raised: a retry in a minute
    assert client.get(PLAIN, "rv2-2").status is TaskStatus.QUEUED

    client.cancel(PLAIN, "rv2-2", by="ops")
    queue.run(handler, until=stack.clock() + timedelta(minutes=10))
    record = client.get(PLAIN, "rv2-2")
    assert record.status is TaskStatus.CANCELLED
    assert undone == ["release"]
    assert ran.calls == ["reserve", "charge"]


def test_a_map_whose_children_a_cancel_ended_reads_stopped_not_done(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    """Its QUEUED children, cancelled by the flow's cancel, are counted as ended: the map's
    count is full, but the map did not finish (its results were never collected)."""
    client.enqueue(PLAIN, {"album": "a"}, key="rv2-3")
    queue.deliver(family.handler)  # WAITING on its 3 QUEUED children
    queue.held = {}
    client.cancel(PLAIN, "rv2-3", by="ops")
    queue.deliver(family.handler)
    record = client.get(PLAIN, "rv2-3")
    assert record.status is TaskStatus.CANCELLED
    row = {row["name"]: row for row in record.steps or []}["squares"]
    assert row["children"] == {"total": 3, "CANCELLED": 3, "stop_asked": 0}
    assert row["status"] == "STOPPED"


def test_a_cancelled_flow_whose_invocation_dies_compensating_is_finished_not_left_cancelled(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """The cancel wakes the flow; its invocation dies inside the newest step's compensation.
    The message comes back: the flow is taken over to finish its cancel (it was ended
    CANCELLED as if nothing were owed: the compensation left begun and unknown, the older
    step's never run, no alarm). Now it ends FAILED naming the uncertain compensation
    (CompensationFailed, alarmed), which is not run a second time."""
    undone = list[str]()

    def undo_ship(_: Any) -> None:
        undone.append("ship")
        raise Crash()

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("reserve", lambda: 1, compensate=lambda r: undone.append("reserve"))
        run.step("ship", lambda: 2, compensate=undo_ship)
        run.sleep("hold", timedelta(days=3))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="rv2-4")
    queue.run(handler)
    client.cancel(PLAIN, "rv2-4", by="ops")
    with pytest.raises(Crash):
        queue.deliver(handler)
    queue.run(handler, until=stack.clock() + timedelta(hours=1))
    record = client.get(PLAIN, "rv2-4")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "CompensationFailed")
    assert "'ship'" in (record.error_message or "")
    assert undone == ["ship"]


def test_a_cancelled_flow_whose_compensation_raises_ends_failed_naming_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, flow_handler: Any
) -> None:
    """The cancel's compensation raises: the record says FAILED CompensationFailed naming the
    step (as for a failure's), not CANCELLED TaskCancelled with the compensation unnamed."""

    def refund(_: Any) -> None:
        raise RuntimeError("bank down")

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        run.step("charge", lambda: 1, compensate=refund)
        run.sleep("hold", timedelta(days=3))

    handler = flow_handler(body)
    client.enqueue(PLAIN, {}, key="rv2-5")
    queue.run(handler)
    client.cancel(PLAIN, "rv2-5", by="ops")
    queue.run(handler, until=stack.clock() + timedelta(minutes=5))
    record = client.get(PLAIN, "rv2-5")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "CompensationFailed")
    assert "'charge'" in (record.error_message or "") and "bank down" in (
        record.error_message or ""
    )
