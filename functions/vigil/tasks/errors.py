"""The errors ``vigil.tasks`` raises to its callers (an application, the API, the CLI).

Each one is raised before anything is sent or written, or says plainly what was and was not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vigil.fenced_write import RunCancelled


class InvalidTask(ValueError):
    """``enqueue`` (or ``cancel``) refused its input: nothing was sent, scheduled or written.
    ``field`` names what was wrong (``payload``, ``key``, ``delay``...), for an API's answer."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class UnknownTask(InvalidTask):
    """No task of that name in the catalog; the message names those that exist."""

    def __init__(self, task: str, known: Iterable[str]) -> None:
        names = ", ".join(sorted(known)) or "none"
        super().__init__("task", f"unknown task {task!r}; the tasks are: {names}")
        self.task = task


class EnqueuedUnrecorded(RuntimeError):
    """``enqueue`` sent the task's message but could not write its QUEUED record in time: the
    task runs (its claim writes the record). Enqueue it again only under ``task_id`` as its key:
    a new id would be a second task."""

    def __init__(self, task: str, task_id: str, cause: BaseException) -> None:
        super().__init__(
            f"{task} {task_id}: its message was sent and it will run, but its QUEUED record could "
            f"not be written ({cause}); to enqueue it again, use key={task_id!r}"
        )
        self.task = task
        self.task_id = task_id


class KeyReused(ValueError):
    """A request under a key (the API's ``Idempotency-Key``) already used by another request
    with a different body: nothing was sent or written. The draft "The Idempotency-Key HTTP
    Header Field" answers it 422, as the other management APIs do (``idempotency_key_reused``)."""

    def __init__(self, task: str, task_id: str) -> None:
        super().__init__(
            f"{task} {task_id}: this key was already used with a different request (payload, "
            "delay, at or group); nothing was sent. Use a new key for a new task, or send the "
            "same request again to read its id"
        )
        self.task = task
        self.task_id = task_id


class TaskNotFound(LookupError):
    """No record of that task id (never enqueued, or expired after its retention)."""


class NotCancellable(RuntimeError):
    """A task that has ended (or was cancelled already) cannot be cancelled; the status is
    named. A QUEUED task is cancelled at once, a RUNNING one asked to stop."""

    def __init__(
        self, task: str, task_id: str, status: str, seen: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(
            f"{task} {task_id} is {status}: it has ended, there is nothing to cancel "
            "(only a QUEUED or RUNNING task can be cancelled)"
        )
        self.status = status
        self.seen = seen
        """The record that refused the cancel."""


class TaskFenced(RuntimeError):
    """This run lost its task to a newer one (its lease ran out and another delivery took it
    over): what it writes is refused; the body should stop."""


class TaskCancelled(TaskFenced, RunCancelled):
    """Someone cancelled this task while it ran (``cancel``): raised by ``run.progress``, a new
    ``run.once`` intent or a strict fenced write once the record says so; the run's later fenced
    writes are refused with it. The body should stop: the task ends CANCELLED (not retried, not
    dead-lettered), whether the body lets this go or catches it."""

    def __init__(self, task: str, task_id: str, at: str = "", by: str = "") -> None:
        super().__init__(
            f"{task} {task_id}: cancelled"
            + (f" at {at}" if at else "")
            + (f" by {by}" if by else "")
        )
        self.task = task
        self.task_id = task_id
        self.at = at
        self.by = by


class Reject(Exception):
    """Raised by a task's body for a task that no retry can help (a payload it cannot use): the
    task ends FAILED at this attempt with ``reason``, goes to the dead-letter queue saying so,
    and announces its failure; no further attempt is made. A redrive runs it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MalformedTask(ValueError):
    """A queue message that cannot be a run of this task; ``reason`` goes with it to the
    dead-letter queue. ``task``/``task_id`` are set when the envelope named them readably."""

    def __init__(self, reason: str, task: str | None = None, task_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.task = task
        self.task_id = task_id
