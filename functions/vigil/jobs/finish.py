"""Recording a run's outcome: the write that must land once the work is done.

A body that returned (or raised) must not lose that fact to a throttled or unanswered request:
Lambda's retry would find the tick unfinished and, once the lease expired, run the body again.
So the finish goes through :func:`vigil.persist.persist` while the invocation has time left::

    body done -> Finish (built once: every try is the same request, same ClientRequestToken)
      -> try --throttle/5xx/timeout--> pause --> try ...   (persist keeps its reserve before the deadline)
           written                           -> recorded
           refused, the record is this outcome -> recorded (an earlier try landed; its answer was lost)
           refused, the record is not        -> fenced: a newer run took the tick over
           out of time                       -> remembered under the request id; OutcomeUnrecorded
    Lambda's retry of the same request (same aws_request_id) on this container:
      -> the remembered outcome is written first, still fenced by the run's token; the body of a
         run that succeeded does not run again

What remains: a throttle that outlasts the invocation, and then a retry that lands on another
container (Lambda starts new ones as it likes, and always after a timeout), which remembers nothing.
That retry finds its own lease live (``TickBusy``), the next one finds it expired and runs the body
again as attempt 2. Every outcome given up on is counted (``JobFinishUnrecorded``, alarmed per job):
that is the case the body's own fencing (its writes conditional on ``run.fencing_token``) and an
effects journal exist for.

Nothing here is specific to scheduled jobs: anything that holds a run (a store with ``finish``, a
request id to remember under) records its outcome with :func:`record_outcome`. Background tasks
(``vigil.tasks``) record theirs through it too, remembering under the SQS message id, which a
redelivery of the message keeps.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import Generic, Protocol, TypeVar

from vigil.clock import Sleeper
from vigil.persist import FINISH_BACKOFF, Backoff, OutOfTime, persist

REMEMBERED = 64
"""Outcomes one container remembers; Lambda's retries come within minutes, one per request."""


class Outcome(Protocol):
    """What a finish writes, as far as recording it goes: which run (``run``: a job's tick, a
    task's id) under which fencing token, ending how."""

    @property
    def run(self) -> tuple[str, str]:
        """(what, which): (job, tick) or (task, id); a remembered outcome is recalled by it."""
        ...

    @property
    def label(self) -> str:
        """How an error names the run (``cleanup tick 2026-...``)."""
        ...

    @property
    def token(self) -> int: ...

    @property
    def status(self) -> Enum: ...


OutcomeT = TypeVar("OutcomeT", bound=Outcome)
O_contra = TypeVar("O_contra", bound=Outcome, contravariant=True)


class OutcomeStore(Protocol[O_contra]):
    def finish(self, outcome: O_contra) -> bool:
        """One try: True if recorded, False if fenced out; raises on a transient fault."""
        ...


class OutcomeUnrecorded(RuntimeError):
    """A run's outcome could not be written before the invocation's time ran out (the cause says
    why). It is remembered on this container for Lambda's retry of the same request."""

    def __init__(self, outcome: Outcome, out_of_time: OutOfTime) -> None:
        super().__init__(
            f"{outcome.label}: the run {outcome.status.value} (token "
            f"{outcome.token}) but its outcome is not recorded: {out_of_time}; a retry of "
            "this request writes it"
        )
        self.outcome = outcome


class Unfinished(Generic[OutcomeT]):
    """Outcomes this container could not record, by the request id of the invocation that ran
    them; past ``capacity`` the oldest is forgotten (a retry then behaves as on a new container)."""

    def __init__(self, capacity: int = REMEMBERED) -> None:
        self._outcomes: OrderedDict[str, OutcomeT] = OrderedDict()
        self._capacity = capacity

    def remember(self, request_id: str, outcome: OutcomeT) -> None:
        self._outcomes[request_id] = outcome
        self._outcomes.move_to_end(request_id)
        while len(self._outcomes) > self._capacity:
            self._outcomes.popitem(last=False)

    def recall(self, request_id: str, what: str, which: str) -> OutcomeT | None:
        """The outcome remembered for this request, if it is of this run (a job's tick, a task's
        id). It stays remembered until :meth:`forget`: a write of it that fails must not lose
        it."""
        outcome = self._outcomes.get(request_id)
        if outcome is None or outcome.run != (what, which):
            return None
        return outcome

    def forget(self, request_id: str) -> None:
        """The outcome of this request is written (or fenced out): nothing left to remember."""
        self._outcomes.pop(request_id, None)

    def __len__(self) -> int:
        return len(self._outcomes)


def record_outcome(
    store: OutcomeStore[OutcomeT],
    outcome: OutcomeT,
    *,
    request_id: str,
    unfinished: Unfinished[OutcomeT],
    time_left_s: Callable[[], float],
    sleep: Sleeper,
    on_retry: Callable[[BaseException, int], None] | None = None,
    backoff: Backoff = FINISH_BACKOFF,
) -> bool:
    """Write ``outcome`` through transient faults while there is time: True if recorded, False
    if the run was fenced out. Out of time: remembered under ``request_id``, then
    :class:`OutcomeUnrecorded` is raised."""
    try:
        return persist(
            lambda: store.finish(outcome),
            time_left_s=time_left_s,
            sleep=sleep,
            backoff=backoff,
            on_retry=on_retry,
        )
    except OutOfTime as out_of_time:
        unfinished.remember(request_id, outcome)
        raise OutcomeUnrecorded(outcome, out_of_time) from out_of_time


__all__ = ["Outcome", "OutcomeStore", "OutcomeUnrecorded", "Unfinished", "record_outcome"]
