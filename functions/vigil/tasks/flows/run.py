"""A flow's steps as its body calls them: ``run.step``, ``run.sleep``, ``run.sleep_until``,
``run.wait_for`` (:class:`Flow`, one per execution of the body).

Every execution of the body (the first, a retry, a takeover, a redelivery, a resume after a sleep
or a signal) starts again from the top; the journal, read once per execution in pages, tells each
call what an earlier execution finished::

    step  DONE in the journal -> its recorded result, fn not run
          otherwise -> [boundary: a cancel asked? a newer run?] -> fn -> result recorded (1 PutItem)
    sleep end reached -> returns;  otherwise -> Suspend: the guard sends the wake-up, the record
          says SLEEPING until then, the invocation ends
    wait  signalled -> its payload;  timed out -> SignalTimeout;  otherwise armed -> Suspend
          (WAITING until the timeout; a signal wakes it earlier)

Steps run at least once and record at most once: two executions racing through one step both
run it, the first to record wins and both go on with that result. For an effect that must not
run twice, ``once=True`` (an attempt found begun and not recorded ends the flow UNCERTAIN on
``step:<name>``) or a fenced write (``run.fenced``: the run's token fences it, and every
attempt, so every step's attempt, has a newer token).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from vigil.clock import Clock, iso
from vigil.contract.flows import (
    MAX_STEPS,
    STEP_NAME,
    STEP_NAME_CHARACTERS,
    StepField,
    StepKind,
    StepState,
)
from vigil.contract.tasks import CANCEL_REQUESTED_ATTRIBUTE, MAX_QUEUE_DELAY_S, TaskStatus
from vigil.dynamo import Item, truncate
from vigil.fenced_write import Halt
from vigil.tasks.errors import TaskFenced
from vigil.tasks.flows.errors import (
    Abort,
    Compensating,
    CompensationUncertain,
    FlowCancelled,
    InvalidStep,
    Replayed,
    SignalTimeout,
    Suspend,
)
from vigil.tasks.flows.journal import FlowJournal, Refused, encode_result

F = StepField
Compensation = Callable[[Any], Any]


@dataclass
class FlowSite:
    """What the guard hands a flow about the run it is part of."""

    journal: FlowJournal
    token: int
    attempt: int
    clock: Clock
    retention: timedelta
    enqueued_at: datetime
    claimed: Item
    """The record as the claim left it (a cancel asked of a sleeping flow is on it)."""
    resume_body: str
    """The run's message body, without a redrive's marks: what wakes the flow."""
    read_record: Callable[[], Item | None]
    """The task's record, read at a step boundary (a cancel asked since, a newer run)."""
    ordered: bool = False
    can_schedule: bool = False
    """A one-time schedule can wake it (a sleep or wait beyond SQS's 15-minute delay)."""
    halt: Halt = field(default_factory=Halt)
    children: Callable[[], Any] = field(default=lambda: None)
    """The :class:`~vigil.tasks.enqueue.TaskClient` a map enqueues its children with."""
    queue_url: str = ""
    """The flow's queue: a map's last child sends the flow's resume message there."""


@dataclass
class Finished:
    name: str
    compensate: Compensation
    result: Any
    done: bool
    """Its compensation already recorded DONE (an earlier execution ran it)."""


@dataclass(frozen=True)
class CompensationFailure:
    step: str
    error: BaseException


class Flow:
    def __init__(self, site: FlowSite) -> None:
        self.site = site
        self._entries: dict[str, Item] | None = None
        self._used: dict[str, tuple[StepKind, str]] = {}
        self._seq = 0
        self.finished: list[Finished] = []
        self.cancelled = False
        self.replaying = False
        """Replayed only to learn its finished steps: the first boundary raises Replayed."""

    @property
    def label(self) -> str:
        return f"flow {self.site.journal.task} {self.site.journal.id}"

    def entries(self) -> dict[str, Item]:
        if self._entries is None:
            self._entries = self.site.journal.read()
            # The flow's own items (a signal sent to a name it never waits on has no seq: it
            # neither shifts the order nor counts against the flow's MAX_STEPS).
            self._seq = max(
                (int(e[F.SEQ]) for e in self._entries.values() if F.SEQ in e), default=0
            )
        return self._entries

    # Steps --------------------------------------------------------------------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        compensate: Compensation | None = None,
        once: bool = False,
        **kwargs: Any,
    ) -> Any:
        if not callable(fn):
            raise InvalidStep(str(name), f"fn must be callable, got {type(fn).__name__}")
        if compensate is not None and not callable(compensate):
            raise InvalidStep(str(name), "compensate must be callable")
        digest = _digest(name, args, kwargs)
        entry = self._reach(name, StepKind.STEP, digest)
        if entry is not None and entry.get(F.STATE) == StepState.DONE:
            result = self._done(name, entry, compensate)
            if entry.get(F.COMPENSATION) is not None:
                self._cancel_check(self.site.claimed)  # a cancel's compensating: CANCELLED's way
                raise Compensating(
                    f"step {name!r} was compensated ({entry[F.COMPENSATION]}) when the flow "
                    "ended: finishing the compensation, not going on from it"
                )
            return result
        if entry is not None and entry.get(F.STATE) == StepState.STARTED and once:
            raise self._uncertain(name, entry)
        self._boundary()
        clock = self.site.clock
        fields: dict[str, Any] = {
            F.KIND: StepKind.STEP.value,
            F.NAME: name,
            F.SEQ: self._seq_of(name, entry),
            F.ARGS: digest,
            F.STARTED_AT: iso(clock()),
            F.ATTEMPTS: int((entry or {}).get(F.ATTEMPTS, 0)) + 1,
            F.EXPIRES_AT: self._expires_at(),
        }
        if compensate is not None:
            fields[F.COMPENSABLE] = True
        if once:
            began = self.site.journal.record_start(name, fields)
            if isinstance(began, Refused):
                seen = began.seen or {}
                if seen.get(F.STATE) == StepState.DONE:
                    return self._done(name, seen, compensate)
                raise self._uncertain(name, seen)
        try:
            value = fn(*args, **kwargs)
        except Exception as error:
            self.site.journal.record_failure(
                name, fields, truncate(f"{type(error).__name__}: {error}")
            )
            raise
        text = encode_result(name, value)
        done = self.site.journal.record_done(
            name, {**fields, F.RESULT: text, F.FINISHED_AT: iso(clock())}
        )
        if isinstance(done, Refused):
            # Another execution recorded it first: its result is the step's, for every reader.
            seen = done.seen or {}
            return self._done(name, seen, compensate)
        self.entries()[name] = done
        return self._done(name, done, compensate)

    # Sleeps -------------------------------------------------------------------------------------

    def sleep(self, name: str, duration: timedelta | float) -> None:
        seconds = _seconds(name, duration, "duration")
        self.sleep_until(name, self.site.clock() + timedelta(seconds=seconds), _from_sleep=True)

    def sleep_until(self, name: str, when: datetime, *, _from_sleep: bool = False) -> None:
        entry = self._reach(name, StepKind.SLEEP, "")
        now = self.site.clock()
        if entry is not None and F.UNTIL in entry:
            until = datetime.fromisoformat(str(entry[F.UNTIL]))
        else:
            if not isinstance(when, datetime) or when.tzinfo is None:
                raise InvalidStep(name, f"sleep_until needs an aware datetime, got {when!r}")
            self._check_wake(name, now, when)
            self._boundary_claimed()
            fields: dict[str, Any] = {
                F.KIND: StepKind.SLEEP.value,
                F.NAME: name,
                F.SEQ: self._seq_of(name, entry),
                F.UNTIL: iso(when),
                F.STARTED_AT: iso(now),
                F.EXPIRES_AT: self._expires_at(),
            }
            put = self.site.journal.put_new(name, fields)
            seen = (put.seen or {}) if isinstance(put, Refused) else put
            if seen.get(F.KIND) != StepKind.SLEEP or F.UNTIL not in seen:
                raise InvalidStep(name, "the name is another kind of step in this flow's journal")
            self.entries()[name] = seen
            until = datetime.fromisoformat(str(seen[F.UNTIL]))
        if now >= until:
            return
        self._before_suspend()
        raise Suspend(name, TaskStatus.SLEEPING.value, until)

    # Waits --------------------------------------------------------------------------------------

    def wait_for(self, name: str, *, timeout: timedelta | float | None = None) -> Any:
        if timeout is None:  # refused at the call, naming the wait, not a TypeError retried
            raise InvalidStep(str(name), "a wait needs a timeout (within the flow's retention)")
        seconds = _seconds(name, timeout, "timeout")
        entry = self._reach(name, StepKind.WAIT, "")
        now = self.site.clock()
        if entry is not None and F.SIGNAL_KEY in entry:
            return json.loads(str(entry[F.SIGNAL]))
        if entry is not None and F.TIMED_OUT_AT in entry:
            raise SignalTimeout(name, str(entry.get(F.UNTIL, entry[F.TIMED_OUT_AT])))
        if entry is None or F.UNTIL not in entry:
            until = now + timedelta(seconds=seconds)
            self._check_wake(name, now, until)
            self._boundary_claimed()
            armed = self.site.journal.arm_wait(
                name,
                {
                    F.KIND: StepKind.WAIT.value,
                    F.NAME: name,
                    F.SEQ: self._seq_of(name, entry),
                    F.UNTIL: iso(until),
                    F.STARTED_AT: iso(now),
                    F.RESUME: self.site.resume_body,
                    F.EXPIRES_AT: self._expires_at(),
                },
            )
            seen = (armed.seen or {}) if isinstance(armed, Refused) else armed
            if seen.get(F.KIND) not in (None, StepKind.WAIT):
                raise InvalidStep(name, "the name is another kind of step in this flow's journal")
            self.entries()[name] = seen
            if F.SIGNAL_KEY in seen:  # the signal came first: kept for this wait
                return json.loads(str(seen[F.SIGNAL]))
            until = datetime.fromisoformat(str(seen[F.UNTIL]))
        else:
            until = datetime.fromisoformat(str(entry[F.UNTIL]))
        if now >= until:
            decided = self.site.journal.time_out(name, now, self._expires_at())
            if isinstance(decided, Refused):  # the signal won the race: one outcome only
                return json.loads(str((decided.seen or {})[F.SIGNAL]))
            raise SignalTimeout(name, iso(until))
        self._before_suspend()
        raise Suspend(name, TaskStatus.WAITING.value, until)

    # Fan-out and fan-in --------------------------------------------------------------------------

    def map(
        self, name: str, task: str, payloads: list[Any], *, return_exceptions: bool = False
    ) -> list[Any]:
        """One ``task`` per payload, enqueued once; the flow waits (no compute) until every
        child has ended, then their results in order (:mod:`.fanout`)."""
        from vigil.tasks.flows.fanout import run_map

        return run_map(
            self, name, task, payloads, _digest(name, (task, payloads), {}), return_exceptions
        )

    # Compensation -------------------------------------------------------------------------------

    def compensate(self) -> tuple[list[str], CompensationFailure | None]:
        """The compensations of the finished steps, newest first, each at most once (its intent
        recorded before it runs): the steps compensated, and the first compensation that raised
        or that an earlier execution began and never recorded (the rest are not run)."""
        ran: list[str] = []
        earlier = sum(1 for finished in self.finished if finished.done)  # an earlier execution's
        for finished in reversed(self.finished):
            if finished.done:
                continue
            order = earlier + len(ran) + 1
            began = self.site.journal.begin_compensation(finished.name, self._expires_at())
            if isinstance(began, Refused):
                if (began.seen or {}).get(F.COMPENSATION) == StepState.DONE:
                    continue  # an earlier execution finished it
                return ran, CompensationFailure(finished.name, CompensationUncertain(finished.name))
            try:
                finished.compensate(finished.result)
            except Exception as error:
                self.site.journal.record_compensation(
                    finished.name,
                    truncate(f"{type(error).__name__}: {error}"),
                    order,
                    self._expires_at(),
                )
                return ran, CompensationFailure(finished.name, error)
            self.site.journal.record_compensation(
                finished.name, StepState.DONE.value, order, self._expires_at()
            )
            ran.append(finished.name)
        return ran, None

    # Helpers ------------------------------------------------------------------------------------

    def _reach(self, name: str, kind: StepKind, digest: str) -> Item | None:
        if not isinstance(name, str) or not STEP_NAME.match(name):
            raise InvalidStep(str(name), f"invalid step name: {STEP_NAME_CHARACTERS}")
        used = self._used.get(name)
        if used is not None and used != (kind, digest):
            what = "arguments" if used[0] == kind else f"kind ({used[0].value})"
            raise InvalidStep(
                name, f"the name is used twice in this execution with different {what}"
            )
        entry = self.entries().get(name)
        if entry is not None and entry.get(F.KIND) not in (None, kind.value):
            raise InvalidStep(
                name, f"the name is a {entry.get(F.KIND)} in this flow's journal, not a {kind}"
            )
        if entry is None and used is None and self._seq >= MAX_STEPS:
            raise InvalidStep(name, f"a flow holds at most {MAX_STEPS} steps, sleeps and waits")
        self._used[name] = (kind, digest)
        return entry

    def _seq_of(self, name: str, entry: Item | None) -> int:
        if entry is not None and F.SEQ in entry:
            return int(entry[F.SEQ])
        self._seq += 1
        return self._seq

    def _done(self, name: str, entry: Item, compensate: Compensation | None) -> Any:
        raw = entry.get(F.RESULT)
        result = json.loads(raw) if isinstance(raw, str) else None
        if compensate is not None and not any(f.name == name for f in self.finished):
            self.finished.append(
                Finished(name, compensate, result, entry.get(F.COMPENSATION) == StepState.DONE)
            )
        return result

    def _uncertain(self, name: str, entry: Item) -> BaseException:
        from vigil.effects.journal import Uncertain

        error = Uncertain(
            self.label,
            f"step:{name}",
            {"fence": f"attempt {entry.get(F.ATTEMPTS)}", "at": entry.get(F.STARTED_AT)},
        )
        self.site.halt.note(error)
        return error

    def _boundary(self) -> None:
        """Before a step runs: a cancel asked since the claim stops the flow here, a newer run
        fences this one out (one GetItem; a finished step costs none)."""
        self._replay_check()
        record = self.site.read_record() or {}
        if record.get("token") != self.site.token or record.get("status") != "RUNNING":
            raise TaskFenced(f"{self.label}: taken over by a newer run")
        self._cancel_check(record)

    def _boundary_claimed(self) -> None:
        self._replay_check()
        self._cancel_check(self.site.claimed)

    def _replay_check(self) -> None:
        if self.replaying:
            raise Replayed(f"{self.label}: replayed up to here, nothing new run")

    def _before_suspend(self) -> None:
        """Before the invocation ends asleep or waiting: a cancel asked while this run ran
        (after its claim) stops the flow now, not when it wakes days later; a newer run fences
        it out before it sends a wake-up (one GetItem a suspension)."""
        self._boundary()

    def _cancel_check(self, record: Item) -> None:
        if record.get(CANCEL_REQUESTED_ATTRIBUTE):
            self.cancelled = True
            raise FlowCancelled(f"{self.label}: cancelled at {record[CANCEL_REQUESTED_ATTRIBUTE]}")

    def _check_wake(self, name: str, now: datetime, until: datetime) -> None:
        """A sleep's end or a wait's timeout the flow can be woken at, or :class:`InvalidStep`."""
        last = self.site.enqueued_at + self.site.retention
        if until > last:
            raise InvalidStep(
                name,
                f"{iso(until)} is beyond the flow's retention ({self.site.retention} from its "
                f"enqueue, {iso(last)}): its journal would be gone before it wakes",
            )
        wait_s = math.ceil((until - now).total_seconds())
        if wait_s > 0 and self.site.ordered:
            raise InvalidStep(name, "an ordered task (a FIFO queue, no delay) cannot sleep or wait")
        if wait_s > MAX_QUEUE_DELAY_S and not self.site.can_schedule:
            raise InvalidStep(
                name, "beyond 15 minutes needs the task's scheduler role, which it has not"
            )

    def _expires_at(self) -> int:
        return int((self.site.clock() + self.site.retention).timestamp())


def _digest(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    text = json.dumps([list(args), kwargs], sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _seconds(name: str, value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        raise InvalidStep(str(name), f"{what} must be a timedelta or seconds, got {value!r}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidStep(str(name), f"{what} must be positive, got {seconds} s")
    return seconds


__all__ = ["Abort", "Flow", "FlowSite"]
