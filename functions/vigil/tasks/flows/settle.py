"""An operator's verdict on a ``once=True`` step a flow stopped UNCERTAIN on (``step:<name>``):
the same ``vigil tasks settle`` (CLI, ``POST /tasks/{task}/{id}/settle``, the console) a task's
``run.once`` has, written on two items at once (one TransactWriteItems, both conditional):

    the flow's record  UNCERTAIN on step:<name>  ->  FAILED (Settled), for ``vigil tasks redrive``
    the step's item    STARTED (begun, unrecorded) ->  done: DONE with the operator's result
                                                     not done: FAILED, so the resume runs it again

Either both are written or neither (the record not UNCERTAIN on that step, or the step not begun
and unrecorded: :class:`~vigil.settle.NotSettleable`, nothing changed). A step's "done" never ends
the flow there (``--done`` is ``--done-rerun``): the steps after it must still run, so the flow
resumes, after the redrive, at the step after it with the settled result as the step's return.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vigil.clock import iso
from vigil.contract.flows import StepField, StepKind, StepState
from vigil.contract.journal import Verdict
from vigil.dynamo import Update
from vigil.tasks.flows.errors import InvalidStep
from vigil.tasks.flows.journal import encode_result, step_key

F = StepField
STEP_EFFECT = "step:"
"""How a flow's record names an uncertain step: ``step:<name>``."""
NO_RESULT: Any = object()
"""``result`` not given (a step settled done returns ``None``)."""


def step_of(effect: str) -> str | None:
    """The step's name if ``effect`` is a flow's ``step:<name>``, else None."""
    return effect.removeprefix(STEP_EFFECT) if effect.startswith(STEP_EFFECT) else None


def step_verdict(
    task: str, task_id: str, step: str, *, verdict: Verdict, result: Any, now: datetime
) -> tuple[dict[str, str], Update]:
    """The step's item's side of the settlement: its key and the conditional update."""
    update = Update().set(F.SETTLED_AT, iso(now))
    if verdict.happened:
        text = encode_result(step, None if result is NO_RESULT else result)
        update.set(F.STATE, StepState.DONE.value).set(F.RESULT, text)
        update.set(F.FINISHED_AT, iso(now))
        update.remove(F.ERROR)
    else:
        if result is not NO_RESULT:
            raise InvalidStep(step, "a result is given only with done: a step not done has none")
        update.set(F.STATE, StepState.FAILED.value)
        update.set(F.ERROR, "settled not done by an operator: the flow runs it again")
    update.condition(update.eq(F.KIND, StepKind.STEP.value))
    update.condition(update.eq(F.STATE, StepState.STARTED.value))
    return step_key(task, task_id, step), update
