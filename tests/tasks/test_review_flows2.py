"""Second adversarial review of flows (issue 30): cancel with children, settle, stuck flows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.helpers.tasks import PLAIN, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.journal import Verdict
from vigil.contract.tasks import TaskStatus
from vigil.tasks import TaskRun
from vigil.tasks.envelope import parse


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
