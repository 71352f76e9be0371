"""The testing kit's flows: the example app's ``onboard-tenant`` flow (``functions/tasks/
onboard_tenant.py``) run on the deployed stack. As the simulated clock advances, a SLEEPING
flow's wake-up (a one-time schedule beyond SQS's 15 minutes) and a WAITING flow's timeout are
delivered (``advance(tasks_only=True)``: the jobs' ticks of those days are not run); ``signal`` wakes a wait; ``steps`` is the timeline ``vigil tasks get`` shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("vigil.tasks.flows", exc_type=ImportError)

from vigil.tasks import SignalRefused, TaskNotFound

FLOW = "onboard-tenant"


@pytest.fixture
def stack(vigil_stack: Any) -> Any:
    if FLOW not in vigil_stack.tasks:
        pytest.skip(f"the app declares no {FLOW} flow")
    return vigil_stack


def timeline(stack: Any, task_id: str) -> list[tuple[str, str]]:
    return [(row["name"], row["status"]) for row in stack.steps(FLOW, task_id)]


def invocations(stack: Any) -> int:
    """The function's invocations so far: one per batch the queue's mapping delivered."""
    return len(stack.batches)


def test_a_flow_sleeps_three_days_on_the_clock_and_a_signal_wakes_its_wait(stack: Any) -> None:
    task_id = stack.enqueue(FLOW, {"tenant": "acme"}, key="acme")

    assert stack.task(FLOW, task_id).status == "SLEEPING"
    assert timeline(stack, task_id) == [
        ("create-account", "DONE"),
        ("provision-workspace", "DONE"),
        ("activate", "DONE"),
        ("welcome-email", "DONE"),
        ("welcome-pause", "SLEEPING"),
    ]
    (pause,) = [r for r in stack.steps(FLOW, task_id) if r["kind"] == "sleep"]
    before = invocations(stack)

    stack.advance(hours=71, tasks_only=True)  # not yet: nothing runs
    assert stack.task(FLOW, task_id).status == "SLEEPING"
    assert invocations(stack) == before

    stack.advance(hours=1, tasks_only=True)  # three days: its one-time schedule wakes it
    assert stack.task(FLOW, task_id).status == "WAITING"
    assert invocations(stack) == before + 1
    assert timeline(stack, task_id)[-1] == ("verified", "WAITING")
    assert datetime.fromisoformat(pause["until"]) == stack.now()  # woke when its sleep ended

    sent = stack.signal(FLOW, task_id, "verified", {"by": "ann"})
    assert sent.woke
    done = stack.task(FLOW, task_id)
    assert (done.status, done.result) == (
        "SUCCEEDED",
        {"account": "acct-acme", "verified": True, "by": {"by": "ann"}},
    )
    assert timeline(stack, task_id)[-1] == ("verified", "SIGNALLED")
    # each step ran once: the resumes returned the recorded results
    assert {
        r["name"]: r.get("attempts") for r in stack.steps(FLOW, task_id) if r["kind"] == "step"
    } == {
        "create-account": 1,
        "provision-workspace": 1,
        "activate": 1,
        "welcome-email": 1,
    }
    assert [e["detail"]["status"] for e in stack.task_events(FLOW)] == ["SUCCEEDED"]

    with pytest.raises(SignalRefused):  # ended: refused, nothing written
        stack.signal(FLOW, task_id, "verified", {"by": "bob"})
    with pytest.raises(TaskNotFound):
        stack.signal(FLOW, "nobody", "verified", {})


def test_a_wait_that_times_out_sends_the_reminder(stack: Any) -> None:
    task_id = stack.enqueue(FLOW, {"tenant": "slow"}, key="slow")
    stack.advance(days=3, tasks_only=True)
    assert stack.task(FLOW, task_id).status == "WAITING"

    stack.advance(days=2, tasks_only=True)  # the two days of the wait: its timeout wakes it

    done = stack.task(FLOW, task_id)
    assert (done.status, done.result) == ("SUCCEEDED", {"account": "acct-slow", "verified": False})
    assert timeline(stack, task_id)[-2:] == [
        ("verified", "TIMED_OUT"),
        ("reminder-email", "DONE"),
    ]


def test_a_signal_before_the_wait_is_kept_and_an_aborted_flow_compensates(stack: Any) -> None:
    early = stack.enqueue(FLOW, {"tenant": "eager"}, key="eager")
    stack.signal(FLOW, early, "verified", "early")  # sleeping: kept for its wait
    assert stack.task(FLOW, early).status == "SLEEPING"
    stack.advance(days=3, tasks_only=True)
    assert (stack.task(FLOW, early).status, stack.task(FLOW, early).result["by"]) == (
        "SUCCEEDED",
        "early",
    )

    blocked = stack.enqueue(FLOW, {"tenant": "bad", "plan": "blocked"}, key="bad")
    ended = stack.task(FLOW, blocked)
    assert ended.status == "COMPENSATED"
    rows = {row["name"]: row for row in stack.steps(FLOW, blocked)}
    assert rows["activate"]["status"] == "FAILED"
    assert rows["create-account"]["compensation"] is not None
    # the workspace removed first, then the account: the reverse of the order they were made
    assert (
        rows["provision-workspace"]["compensation_order"],
        rows["create-account"]["compensation_order"],
    ) == (1, 2)
    assert "welcome-email" not in rows
