"""Reading a task's result from Python, and waiting for it: ``get``, ``wait`` and the handle
``enqueue`` returns (Celery's ``AsyncResult(id).get(timeout=10)``).

``wait`` polls the task's record (one strongly consistent GetItem a poll: one read unit for a
record under 4 KB) on a fixed backoff, so a wait's cost is known before it starts::

    poll --not final--> sleep 0.25 s --> poll --> 0.5 s --> poll --> 1 s --> 2 s --> 4 s --> 5 s ...
                                                                     (capped at 5 s; the last
                                                                      sleep ends at the deadline,
                                                                      which gets one last poll)

A final record answers: SUCCEEDED returns the result (read back from the results bucket when it
was too big for the record: one S3 GET), FAILED, CANCELLED and UNCERTAIN raise
:class:`TaskFailed` with the record's error. A task still QUEUED (retrying included) or RUNNING
at the deadline raises :class:`TimeoutError`; the task itself goes on. An application that waits
often, or long, should subscribe to the task's completion event instead (one PutEvents per
task, whatever the number of waiters): ``completion_events="all"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vigil.clock import Clock, Sleeper
from vigil.contract.tasks import TaskStatus
from vigil.tasks.errors import InvalidTask

if TYPE_CHECKING:
    from vigil.tasks.enqueue import TaskClient
    from vigil.tasks.store import TaskRecord

DEFAULT_TIMEOUT_S = 60.0
FINAL = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.UNCERTAIN}
)


class TaskFailed(RuntimeError):
    """The task ended without a result: FAILED (its error), CANCELLED, or UNCERTAIN (an effect
    begun and never recorded done, for ``vigil tasks settle``). ``error_type`` and
    ``error_message`` are the record's; ``record`` is the whole of it."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.task, self.task_id, self.status = record.task, record.id, record.status
        self.error_type = record.error_type or record.status.value
        self.error_message = record.error_message or ""
        super().__init__(
            f"{record.task} {record.id} ended {record.status.value} after "
            f"{record.attempts} attempt(s): {self.error_type}: {self.error_message}".rstrip(": ")
        )


@dataclass(frozen=True)
class PollBackoff:
    """How ``wait`` spaces its polls: ``first_s``, doubling, at most ``max_s`` apart. No jitter:
    the schedule (and so the cost of a wait) is the same every time."""

    first_s: float = 0.25
    max_s: float = 5.0

    def __post_init__(self) -> None:
        for field, value in (("first_s", self.first_s), ("max_s", self.max_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise InvalidTask("poll", f"PollBackoff.{field} must be > 0 seconds, got {value!r}")

    def pause(self, poll: int) -> float:
        """The sleep after poll number ``poll`` (1 for the first)."""
        return float(min(self.max_s, self.first_s * 2.0 ** min(poll - 1, 64)))

    def polls(self, done_after_s: float, timeout_s: float) -> int:
        """How many polls a wait makes for a task that ends ``done_after_s`` after it starts
        (or never, past ``timeout_s``): what a wait costs, in GetItem requests."""
        at, poll = 0.0, 1
        while at < min(done_after_s, timeout_s):
            at = min(at + self.pause(poll), timeout_s)
            poll += 1
        return poll


def seconds_of(field: str, value: timedelta | float) -> float:
    """A duration given as a timedelta or seconds (``delay``, ``timeout``), or
    :class:`InvalidTask` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        raise InvalidTask(
            field, f"{field} must be a timedelta or seconds, got {type(value).__name__}"
        )
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidTask(field, f"{field} must not be negative, got {seconds} s")
    return seconds


def outcome(record: TaskRecord) -> Any:
    """A final record's answer: the result, or :class:`TaskFailed`."""
    if record.status is TaskStatus.SUCCEEDED:
        if record.result is None and record.result_unavailable:
            from vigil.tasks.results import ResultUnavailable

            raise ResultUnavailable(
                f"{record.task} {record.id} SUCCEEDED, but its result cannot be read: "
                f"{record.result_unavailable}"
            )
        return record.result
    raise TaskFailed(record)


def wait_for(
    read: Callable[[], TaskRecord],
    clock: Clock,
    sleep: Sleeper,
    timeout: timedelta | float = DEFAULT_TIMEOUT_S,
    poll: PollBackoff | None = None,
) -> Any:
    """Poll the record ``read`` returns until it is final (see the module's docstring), on the
    caller's clock and sleeper (a test's steps them)."""
    seconds = seconds_of("timeout", timeout)
    backoff = poll or PollBackoff()
    try:
        deadline = clock() + timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidTask(
            "timeout", f"timeout {seconds:g} s ends after the year 9999: give a shorter one"
        ) from None
    polls = 0
    while True:
        record = read()
        polls += 1
        if record.status in FINAL:
            return outcome(record)
        left = (deadline - clock()).total_seconds()
        if left <= 0:
            raise TimeoutError(
                f"{record.task} {record.id} is still {record.status.value} after {seconds:g} s "
                f"({polls} poll(s)); it goes on: wait again, or subscribe to its completion event"
            )
        sleep(min(backoff.pause(polls), left))


class TaskHandle(str):
    """What ``enqueue`` returns: the task's id (a ``str``, as before), with ``.get()`` and
    ``.wait(timeout)`` on its record."""

    task: str
    client: TaskClient

    def __new__(cls, task: str, task_id: str, client: TaskClient) -> TaskHandle:
        handle = super().__new__(cls, task_id)
        handle.task, handle.client = task, client
        return handle

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        """Pickled or copied, a handle is the id it is (a ``str``): its client (boto3's) is
        neither, and code that kept the id in a cache, a session or another process goes on."""
        return (str, (str(self),))

    @property
    def id(self) -> str:
        return str(self)

    def get(self) -> TaskRecord:
        """The record now (``vigil.tasks.get``)."""
        return self.client.get(self.task, self.id)

    def wait(
        self, timeout: timedelta | float = DEFAULT_TIMEOUT_S, poll: PollBackoff | None = None
    ) -> Any:
        """The result once final (``vigil.tasks.wait``)."""
        return self.client.wait(self.task, self.id, timeout, poll)


__all__ = ["PollBackoff", "TaskFailed", "TaskHandle", "outcome", "seconds_of", "wait_for"]
