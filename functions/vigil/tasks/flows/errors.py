"""What a flow's calls raise to its author, and what a signal's sender is told.

Every misuse (:class:`InvalidStep`) is raised at the call, naming the step, before anything is
written for it.
"""

from __future__ import annotations

from datetime import datetime

from vigil.tasks.errors import InvalidTask


class InvalidStep(ValueError):
    """A step, sleep or wait the journal cannot take: its name, its arguments against an earlier
    use of the name, a result that is not JSON or too big, a sleep beyond the record's retention,
    more steps than a flow holds. Nothing was written for it."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"step {step!r}: {message}")
        self.step = step


class Abort(Exception):
    """Raised by a step (or the body) to end the flow FAILED at once, without retries: the
    compensations of its finished steps run in reverse."""


class Compensating(Abort):
    """A re-execution (a redrive, a delivery after a crash) met a finished step whose
    compensation is recorded: the flow was ending and had begun undoing its steps. It does not
    go on forward from results it undid: it finishes compensating (the compensations not
    recorded DONE run, newest first) and ends as a failure would."""


class CompensationUncertain(RuntimeError):
    """A compensation an earlier execution began and never recorded (its invocation died inside
    it): it may or may not have run, so it is not run a second time; the flow ends FAILED
    naming it (``CompensationFailed``, alarmed) for an operator to check."""

    def __init__(self, step: str) -> None:
        super().__init__(
            f"its earlier execution died inside it (begun, never recorded): not run again, "
            f"check whether step {step!r} was undone"
        )
        self.step = step


class SignalTimeout(Exception):
    """``run.wait_for``: no signal came before the timeout (decided once: a later signal is
    refused)."""

    def __init__(self, wait: str, until: str) -> None:
        super().__init__(f"wait {wait!r}: no signal by {until}")
        self.wait = wait
        self.until = until


class Suspend(BaseException):
    """The flow ends this invocation and resumes at ``until`` (or at a signal): raised by
    ``run.sleep``/``run.wait_for`` through the body to the guard. A BaseException, so a body's
    ``except Exception`` does not swallow it."""

    def __init__(
        self, step: str, status: str, until: datetime, *, by_children: bool = False
    ) -> None:
        super().__init__(f"{status.lower()} at {step!r} until {until.isoformat()}")
        self.step = step
        self.status = status
        self.until = until
        self.by_children = by_children
        """A map's wait: its last child to end wakes it (no wake-up is sent; ``until`` is the
        retention's end)."""


class ChildFailed(Exception):
    """``run.map``: a child ended other than SUCCEEDED (FAILED, CANCELLED, UNCERTAIN,
    COMPENSATED); with ``return_exceptions=True`` it is returned in the child's place."""

    def __init__(
        self, step: str, index: int, task: str, task_id: str, status: str, error: str
    ) -> None:
        super().__init__(f"map {step!r}: child {index} ({task} {task_id}) ended {status}: {error}")
        self.step = step
        self.index = index
        self.task = task
        self.id = task_id
        self.status = status
        self.error = error


class FlowCancelled(BaseException):
    """A cancel was asked of this flow: it stops at this step boundary, compensations run."""


class Replayed(BaseException):
    """A flow replayed only to learn its finished steps (its retries crashed away, so its
    compensations can run) reached a step, sleep or wait that would do something new: the
    replay stops there, before it."""


class SignalRefused(RuntimeError):
    """A signal the flow cannot take: it has ended, its wait timed out, or the name was signalled
    with another key. Nothing was written. The API answers 409."""

    def __init__(self, task: str, task_id: str, name: str, why: str) -> None:
        super().__init__(f"{task} {task_id}: signal {name!r} refused: {why}")
        self.why = why


class InvalidSignal(InvalidTask):
    """A signal's name, key or payload is not valid: nothing was written (400)."""
