"""The task guard: one queue message in, the task run at most once per key, its outcome recorded.

Flow of one message (the decorator hands each message of a batch here)::

    parse the envelope --malformed--> dead-letter queue with the reason, FAILED record (if the
                                      key has none); deleted
    an outcome this container could not record for this message? -> write it first
    near the deadline? -> not claimed; reported failed, visible again at once
    claim (1 UpdateItem, retried through throttles as the same request)
        --refused--> resolve_claim: OWN (its own earlier try landed: run it),
                     DUPLICATE / CANCELLED (deleted, 1 request; a copy during a retry's
                     backoff, or of a redrive already spent on the record, is a DUPLICATE;
                     the message that finished the task sends its event again),
                     BUSY (back when the holder's lease ends), RETRY
    claimed past the retries (the earlier attempts crashed) -> FAILED RunCrashed, not run
    run the body -> a result over 4 KiB to the results bucket -> finish (1 UpdateItem fenced by
    the token, through persist; an announced outcome writes its event's id: the outbox)
        SUCCEEDED -> completion event; deleted (not sent in time: kept, comes back to send it)
        failed, retries left -> QUEUED with the error; back after the backoff
        failed, none left -> dead-letter queue with the error, then FAILED; event; deleted
        fenced (a newer delivery took it over) -> nothing recorded; left to the newer one

Why a message is reported failed rather than deleted whenever anything is unsure: the record is
the once-only guarantee, so an extra delivery costs one request (DUPLICATE), while a message
deleted too early could lose a task.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from vigil import telemetry
from vigil.clock import Clock, Sleeper, iso, system_clock
from vigil.contract.metrics import TaskMetric
from vigil.contract.tasks import (
    FINAL_STATUSES,
    RESULT_INLINE_BYTES,
    SUSPENDED_STATUSES,
    TaskStatus,
    max_receive_count,
)
from vigil.dynamo import truncate
from vigil.fenced_write import Halt, RunRecordSite, once, refused_write, stopped_on
from vigil.jobs.finish import OutcomeUnrecorded, Unfinished, record_outcome
from vigil.leases import next_token
from vigil.persist import Backoff, OutOfTime, is_transient, persist
from vigil.tasks.completion import completion_entry, event_id, owes_event, send_completion
from vigil.tasks.decisions import (
    FinalFailure,
    RetryPolicy,
    Verdict,
    after_failure,
    crashed_out,
    encode_result,
    lease_until,
    may_claim,
    resolve_claim,
)
from vigil.tasks.envelope import Envelope, parse
from vigil.tasks.errors import MalformedTask, TaskCancelled, TaskFenced
from vigil.tasks.flows.errors import (
    Abort,
    ChildFailed,
    FlowCancelled,
    InvalidStep,
    Replayed,
    Suspend,
)
from vigil.tasks.queues import TaskQueue
from vigil.tasks.rate import Deferred, RateLimiter
from vigil.tasks.results import ResultStore
from vigil.tasks.settings import MAX_BACKOFF, TaskSettings
from vigil.tasks.store import (
    BUDGET_FROM,
    CancelAsked,
    Claim,
    Claimed,
    TaskFinish,
    TaskStore,
    cancelled,
)

if TYPE_CHECKING:
    from vigil.effects import Effects
    from vigil.tasks.flows.run import Flow, FlowSite

MAX_CLAIM_ATTEMPTS = 4
EVENT_RETRY_S = 60
"""A completion event PutEvents kept refusing: its message comes back this much later to send
it (the invocation's own retries are spent by then)."""
PROGRESS_BUDGET_S = 2.0
"""How long a throttled progress note is retried before it is dropped (``ProgressDropped``)."""
CLAIM_BACKOFF = Backoff(reserve_s=0.0)
"""A throttled claim is retried while a run could still start (``_claim_time_left`` keeps the
lease margin back already)."""


@dataclass(frozen=True)
class TaskRun:
    """What a task's body is told about the run it is doing."""

    task: str
    id: str
    attempt: int
    fencing_token: int
    enqueued_at: datetime
    remaining_ms: Callable[[], int] = field(repr=False)
    report: Callable[[int, str | None], bool] = field(repr=False)
    record: RunRecordSite | None = field(default=None, repr=False)
    """The task's record, where ``run.once`` journals effects (and the claim
    ``run.fenced.strict`` checks: its token, still RUNNING)."""
    halt: Halt = field(default_factory=Halt, repr=False, compare=False)
    """What the effects raised that ends the run, kept whatever the body did with it."""
    flow_site: Callable[[], FlowSite] | None = field(default=None, repr=False, compare=False)
    """What a flow's steps need (:mod:`vigil.tasks.flows.run`), built on the first step."""

    def remaining_time(self) -> timedelta:
        return timedelta(milliseconds=self.remaining_ms())

    @functools.cached_property
    def fenced(self) -> Effects:
        """Writes a superseded attempt of this task cannot make (:mod:`vigil.effects`), loaded
        on first use."""
        from vigil.effects import Effects, RunFence

        fence = RunFence.of_task(self.task, self.id, self.fencing_token)
        return Effects.from_env(fence, halt=self.halt, claim=self.record)

    def once(
        self, effect: str, check: Callable[[], bool] | None = None
    ) -> AbstractContextManager[bool]:
        """``with run.once("receipt-email") as first: if first: send()``: an effect no write
        can fence, done at most once per task, or the task ends UNCERTAIN for a person to
        settle (:mod:`vigil.effects.journal`). Loaded on first use, like :attr:`fenced`."""
        return once(self.record, effect, check, self.halt)

    @functools.cached_property
    def flow(self) -> Flow:
        """The body's steps, journalled beside the task's record (:mod:`vigil.tasks.flows`): loaded
        on the first ``step``, ``sleep`` or ``wait_for``."""
        from vigil.tasks.flows.run import Flow

        if self.flow_site is None:
            raise RuntimeError("this run has no journal for steps")
        return Flow(self.flow_site())

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``run.step("charge", charge, order)``: ``fn``'s JSON result, run and recorded the first
        time, returned as recorded on every later execution of the body. ``compensate=undo``
        (run with the result if the flow ends FAILED), ``once=True`` (an attempt that died
        inside it ends the flow UNCERTAIN rather than running it again)."""
        return self.flow.step(name, fn, *args, **kwargs)

    def sleep(self, name: str, duration: timedelta | float) -> None:
        """End this invocation; the flow resumes after ``duration`` with no compute between."""
        self.flow.sleep(name, duration)

    def sleep_until(self, name: str, when: datetime) -> None:
        self.flow.sleep_until(name, when)

    def wait_for(self, name: str, *, timeout: timedelta | float | None = None) -> Any:
        """The payload of the signal ``name`` (``vigil.tasks.signal``), waiting for it with no
        compute between; :class:`~vigil.tasks.flows.errors.SignalTimeout` after ``timeout``
        (required: without one, :class:`~vigil.tasks.flows.errors.InvalidStep`)."""
        return self.flow.wait_for(name, timeout=timeout)

    def map(
        self, name: str, task: str, payloads: list[Any], *, return_exceptions: bool = False
    ) -> list[Any]:
        """Fan-out and fan-in: one ``task`` per payload, enqueued exactly once; the flow waits
        with no compute until all have ended and gets their results in order. A child that
        did not succeed raises :class:`~vigil.tasks.flows.errors.ChildFailed` (or, with
        ``return_exceptions=True``, is returned as it)."""
        return self.flow.map(name, task, payloads, return_exceptions=return_exceptions)

    def progress(self, percent: int, note: str | None = None) -> None:
        """Record how far the run is (0-100), readable on the task's record while it runs.
        Raises :class:`TaskFenced` if a newer delivery took the task over, and
        :class:`TaskCancelled` if someone cancelled it: stop then."""
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise ValueError(f"progress must be an integer from 0 to 100, got {percent!r}")
        try:
            held = self.report(percent, truncate(note) if note is not None else None)
        except TaskCancelled as cancelled:
            self.halt.note(cancelled)
            raise
        if not held:
            raise TaskFenced(f"{self.task} {self.id}: taken over by a newer run")


Body = Callable[[TaskRun, dict[str, Any]], Any]


@dataclass(frozen=True)
class Message:
    """One SQS record of the batch, as the guard needs it."""

    message_id: str
    receipt_handle: str
    body: str
    group: str | None = None
    receive_count: int = 1
    """SQS's ``ApproximateReceiveCount``: how often the message was handed out, this time too."""
    source_arn: str = ""
    """The queue it came from (``eventSourceARN``): a priority level's or the task's own."""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Message:
        attributes = record.get("attributes") or {}
        return cls(
            message_id=str(record["messageId"]),
            receipt_handle=str(record.get("receiptHandle", "")),
            body=str(record.get("body", "")),
            group=attributes.get("MessageGroupId"),
            receive_count=_count(attributes.get("ApproximateReceiveCount")),
            source_arn=str(record.get("eventSourceARN", "")),
        )


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    RETRIED = "RETRIED"
    DUPLICATE = "DUPLICATE"
    CANCELLED = "CANCELLED"
    BUSY = "BUSY"
    FENCED = "FENCED"
    MALFORMED = "MALFORMED"
    DEFERRED = "DEFERRED"
    """Not claimed: the invocation was too near its deadline."""
    UNCERTAIN = "UNCERTAIN"
    """Stopped on an effect an earlier attempt began and never recorded done: final."""
    UNRECORDED = "UNRECORDED"
    """The body ran but its outcome could not be written in time: remembered for a redelivery."""
    SUSPENDED = "SUSPENDED"
    """A flow slept or waits: its wake-up is sent, its record SLEEPING or WAITING."""
    COMPENSATED = "COMPENSATED"
    """A flow failed and its finished steps' compensations ran, in reverse."""


DELETED = frozenset(
    {
        Outcome.SUCCEEDED,
        Outcome.FAILED,
        Outcome.DUPLICATE,
        Outcome.CANCELLED,
        Outcome.MALFORMED,
        Outcome.UNCERTAIN,
        Outcome.SUSPENDED,
        Outcome.COMPENSATED,
    }
)
"""Outcomes whose message is done with (reported success, so the event source deletes it)."""


@dataclass(frozen=True)
class Delivery:
    """What became of one message."""

    outcome: Outcome
    task_id: str | None = None
    attempt: int = 0
    reason: str = ""
    duration_ms: int | None = None
    queue_wait_ms: int | None = None
    event_unsent: bool = False
    """Its completion event was given up (the message had no receive left to send it)."""
    announce_pending: bool = False
    """Its completion event is not sent yet: the message is kept, and comes back to send it."""
    suspended: TaskStatus | None = None
    """SUSPENDED: SLEEPING or WAITING (counted apart on the dashboard)."""

    @property
    def delete(self) -> bool:
        return self.outcome in DELETED and not self.announce_pending


class ClaimContention(RuntimeError):
    """The record kept changing under the claim: the message is reported failed, comes back."""


class TaskGuard:
    """One per container (the decorator builds it on the first invocation): ``unfinished`` is
    what it remembers of outcomes it could not record, by message id."""

    def __init__(
        self,
        settings: TaskSettings,
        store: TaskStore,
        queue: TaskQueue,
        events: Any,
        clock: Clock = system_clock,
        *,
        sleep: Sleeper = time.sleep,
        unfinished: Unfinished[TaskFinish] | None = None,
        results: ResultStore | None = None,
        retry_policy: RetryPolicy | None = None,
        scheduler: Callable[[], Any] | None = None,
        children: Callable[[], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.children = children or _default_children
        self.retry_policy = retry_policy or RetryPolicy()
        self._scheduler = scheduler or _no_scheduler
        self._store = store
        self._queue = queue
        self._events = events
        self._results = results
        self._clock = clock
        self._sleep = sleep
        self.unfinished = unfinished if unfinished is not None else Unfinished[TaskFinish]()
        self._rate = (
            RateLimiter(
                store.client, settings.table, settings.task, settings.rate_limit, MAX_BACKOFF
            )
            if settings.rate_limit is not None
            else None
        )

    def deliver(
        self, message: Message, body: Body, *, remaining_ms: Callable[[], int], holder: str
    ) -> Delivery:
        try:
            envelope = parse(message.body, self.settings.task)
        except MalformedTask as malformed:
            return self._malformed(message, malformed, remaining_ms)
        remembered = self.unfinished.recall(message.message_id, envelope.task, envelope.id)
        if remembered is not None:
            return self._conclude(message, envelope, remembered, remaining_ms, how="remembered")
        if not may_claim(remaining_ms(), self.settings.lease_margin):
            # Visible again at once, for the next invocation: nothing ran, so nothing waits.
            # Its receive is spent (SQS counts every one), but not an attempt: those are the
            # record's, and the redrive policy leaves room (``max_receive_count``).
            self._come_back(message, 0)
            return Delivery(Outcome.DEFERRED, envelope.id, reason="too near the deadline")
        if self._rate is not None:
            # Before the claim: a start over the limit spends no attempt, only a receive.
            try:
                pace = self._rate.admit(message.message_id, message.receive_count, self._clock())
            except Exception as error:
                if not is_transient(error):
                    raise
                # A hot pace item: back in a second, as a wait (no attempt), not after the
                # queue's whole visibility timeout, which a raise would cost.
                pace = Deferred(1, self._clock(), why=f"the limiter was throttled ({error})")
            if isinstance(pace, Deferred):
                self._come_back(message, pace.seconds)
                telemetry.metrics().add_metric(name=TaskMetric.RATE_LIMITED, unit="Count", value=1)
                why = pace.why or f"rate limit {self._rate.limit}: its slot is at {iso(pace.slot)}"
                return Delivery(Outcome.DEFERRED, envelope.id, reason=why)
        claimed = self._claim(message, envelope, remaining_ms, holder)
        if isinstance(claimed, Delivery):
            return claimed
        return self._run(message, envelope, claimed, body, remaining_ms)

    # Claim --------------------------------------------------------------------------------------

    def _claim(
        self, message: Message, envelope: Envelope, remaining_ms: Callable[[], int], holder: str
    ) -> Claimed | Delivery:
        floor = 0
        cancelled_flow = False
        # This delivery: the invocation and the message (two copies of a key in one batch are
        # two holders), so a claim that meets its own earlier try knows it (Verdict.OWN).
        holder = f"{holder}/{message.message_id}"
        redrive = envelope.redrive_operation(message.message_id)
        for _ in range(MAX_CLAIM_ATTEMPTS):
            now = self._clock()
            token = next_token(now, floor)
            claim = Claim(
                task=envelope.task,
                id=envelope.id,
                token=token,
                now=now,
                lease_until=lease_until(now, remaining_ms(), self.settings.lease_margin),
                holder=holder,
                expires_at=now + self.settings.retention,
                enqueued_at=envelope.enqueued_at,
                due_at=envelope.due_at,
                group=envelope.group,
                redrive=redrive,
                message_id=message.message_id,
                request=envelope.request,
                wake=envelope.wake,
                cancelled_flow=cancelled_flow,
                deadline=now + self.settings.max_duration
                if self.settings.max_duration is not None
                else None,
            )
            try:
                # The same request on every try: one that DynamoDB applied but whose answer was
                # lost (then throttled, or timed out) is met by its retry as this claim's own.
                answer = persist(
                    functools.partial(self._store.claim, claim),
                    time_left_s=self._claim_time_left(remaining_ms),
                    sleep=self._sleep,
                    backoff=CLAIM_BACKOFF,
                )
            except OutOfTime as out_of_time:
                # Nothing ran. Visible again at once; if the claim did land, its lease holds
                # the task until it ends, then the next delivery takes it as a crashed attempt.
                self._come_back(message, 0)
                return Delivery(
                    Outcome.DEFERRED, envelope.id, reason=f"claim not written: {out_of_time}"
                )
            if isinstance(answer, Claimed):
                return answer
            decision = resolve_claim(
                answer.seen,
                now=now,
                token=token,
                redrive=redrive,
                message_id=message.message_id,
                holder=holder,
                request=envelope.request,
                wake=envelope.wake,
            )
            if decision.verdict is Verdict.OWN and answer.seen is not None:
                return Claimed(answer.seen)
            if decision.verdict in (Verdict.DUPLICATE, Verdict.CANCELLED):
                outcome = (
                    Outcome.DUPLICATE
                    if decision.verdict is Verdict.DUPLICATE
                    else Outcome.CANCELLED
                )
                duplicate = Delivery(outcome, envelope.id, reason=decision.reason)
                if envelope.parent and answer.seen is not None:
                    # A map's child that ended, back (or cancelled before it ran): its end told
                    # (counted once), so its flow is not left waiting for it.
                    not_told = self._tell_parent(envelope, answer.seen, remaining_ms)
                    if not_told:
                        return replace(duplicate, outcome=Outcome.UNRECORDED, reason=not_told)
                if decision.verdict is Verdict.CANCELLED:
                    return duplicate
                if answer.seen is None or not owes_event(answer.seen, message.message_id):
                    return duplicate
                # The message that finished it, back: its invocation may have died before the
                # event went out. Sent again, the same event (built from the record alone).
                again = replace(duplicate, reason=f"{decision.reason}; completion event re-sent")
                return self._announce(message, answer.seen, again, self._time_left(remaining_ms))
            if decision.verdict is Verdict.END_CANCELLED and answer.seen is not None:
                if not cancelled_flow and self._store.has_steps(envelope.task, envelope.id):
                    # A flow: taken over to stop at its next step, cancelling its children
                    # and running the compensations its dead run did not reach (one Query).
                    cancelled_flow = True
                    floor = int(answer.seen.get("token", 0))
                    continue
                return self._end_cancelled(message, envelope, answer.seen, remaining_ms)
            if decision.verdict is Verdict.BUSY:
                self._come_back(message, decision.come_back_in_s)
                return Delivery(Outcome.BUSY, envelope.id, reason=decision.reason)
            floor = decision.token_floor
        raise ClaimContention(f"{envelope.task} {envelope.id}: the record kept changing")

    def _claim_time_left(self, remaining_ms: Callable[[], int]) -> Callable[[], float]:
        """A claim is retried only while a run could still start: up to the lease margin."""
        margin_s = self.settings.lease_margin.total_seconds()
        return lambda: remaining_ms() / 1000 - margin_s

    # Run ----------------------------------------------------------------------------------------

    def _run(
        self,
        message: Message,
        envelope: Envelope,
        claimed: Claimed,
        body: Body,
        remaining_ms: Callable[[], int],
    ) -> Delivery:
        record = claimed.record
        attempt, token = int(record["attempts"]), int(record["token"])
        started = self._clock()
        enqueued = datetime.fromisoformat(str(record.get("enqueued_at") or envelope.enqueued_at))
        waited_from = datetime.fromisoformat(envelope.due_at) if envelope.due_at else enqueued
        run = TaskRun(
            task=envelope.task,
            id=envelope.id,
            attempt=attempt,
            fencing_token=token,
            enqueued_at=enqueued,
            remaining_ms=remaining_ms,
            report=functools.partial(self._progress, envelope, token, remaining_ms),
            record=self._store.record_site(
                envelope.task,
                envelope.id,
                token,
                self._time_left(remaining_ms),
                self._clock,
                self._sleep,
            ),
            flow_site=functools.partial(self._flow_site, envelope, record, remaining_ms),
        )
        uncertain: str | None = None
        cancelled: FlowCancelled | None = None
        logger = telemetry.logger()
        error: BaseException | None = None
        encoded: str | FinalFailure | None = None
        # Attempts on the current budget: an operator's redrive gets the retries afresh, counted
        # from the attempts spent when it went FAILED (on the record, so any message of the key
        # is judged the same; SQS's receive count would also count deferrals and busy returns).
        budget = attempt - int(record.get(BUDGET_FROM, 0))
        if crashed_out(budget, self.settings.retries):
            encoded = FinalFailure(
                "RunCrashed",
                f"{budget - 1} attempt(s) ended without an outcome (a timeout, out of memory "
                f"or a crash) and {self.settings.retries} retries are allowed: not run again",
            )
            if budget == self.settings.retries + 2:
                self._replay_to_compensate(run, envelope, body)
        else:
            try:
                encoded = encode_result(body(run, envelope.payload))
            except TaskCancelled as told:
                run.halt.note(told)
            except TaskFenced as fenced:
                return Delivery(Outcome.FENCED, envelope.id, attempt, str(fenced))
            except Suspend as suspend:
                if run.halt.stop(returned=False) is None:
                    return self._suspend(message, envelope, record, suspend, started, remaining_ms)
                error = RuntimeError(str(suspend))
            except FlowCancelled as stopped:
                cancelled = stopped
            except Exception as raised:
                error = raised
            # What the effects raised ends the run, even if the body caught it (and went on).
            stop = run.halt.stop(returned=error is None)
            if stop is None and error is not None and (refused_write(error) or stopped_on(error)):
                stop = error
            if stop is None and run.halt.cancelled is not None:
                # Told it is cancelled (whatever it did then): CANCELLED, not retried.
                cancel = run.halt.cancelled
                encoded = FinalFailure(type(cancel).__name__, str(cancel))
            if stop is not None:
                uncertain = stopped_on(stop)
                if uncertain is None:  # a newer attempt of this task wrote: superseded
                    return Delivery(Outcome.FENCED, envelope.id, attempt, str(stop))
                error = stop
            elif error is not None and not isinstance(error, Abort):
                logger.error("task run failed", extra={"attempt": attempt}, exc_info=error)
        finished = self._clock()
        outcome = TaskFinish(
            task=envelope.task,
            id=envelope.id,
            token=token,
            status=TaskStatus.SUCCEEDED,
            at=finished,
            attempt=attempt,
            expires_at=finished + self.settings.retention,
            duration_ms=int((finished - started).total_seconds() * 1000),
            result=None if isinstance(encoded, FinalFailure) else encoded,
            enqueued_at=str(record.get("enqueued_at") or envelope.enqueued_at),
            message_id=message.message_id,
        )
        if uncertain is not None:
            # An earlier attempt began the effect and never recorded it done: final, not retried
            # (a retry would face the same unknown), for ``vigil tasks settle``.
            assert error is not None
            outcome = replace(
                outcome,
                status=TaskStatus.UNCERTAIN,
                error_type=type(error).__name__,
                error_message=truncate(str(error)),
                uncertain_effect=uncertain,
            )
        elif cancelled is not None:
            status, error_type, text = self._compensate(
                run, TaskStatus.CANCELLED, "FlowCancelled", self._cancel_children(run, cancelled)
            )
            outcome = replace(
                outcome,
                status=status,
                result=None,
                error_type=error_type,
                error_message=truncate(text),
                answers_cancel=True,
            )
        elif error is not None or isinstance(encoded, FinalFailure):
            if isinstance(encoded, FinalFailure):
                error_type, text, final = encoded.error_type, encoded.message, True
            else:
                assert error is not None
                # A Reject, an error the task's retry_on/no_retry_on leaves out, a flow's Abort or
                # a step refused at its call: no retry.
                error_type, text = type(error).__name__, str(error)
                final = isinstance(
                    error, Abort | InvalidStep | ChildFailed
                ) or not self.retry_policy.retries(error)
            # Judged on the same budget as a crash: a redrive's retries are afresh for both.
            failure = after_failure(budget, self.settings.retries, self.settings.backoff)
            retry = not final and failure.retry
            status = TaskStatus.QUEUED if retry else TaskStatus.FAILED
            held = None
            if not retry and run.halt.cancelled is None:
                # About to be dead-lettered (one read, on a final failure only; a retry's finish
                # checks itself). A run a newer delivery took over is superseded: its outcome
                # would be refused, so it leaves no dead letter either (a Reject met after the
                # lease ran out, a TaskFenced the body turned into another error), and a flow's
                # compensations are not its to run (the newer run goes on from those steps).
                held = self._store.still_held(envelope.task, envelope.id, token)
                if not held.held:
                    why = "a newer delivery took the task over; this failure is not recorded"
                    return Delivery(Outcome.FENCED, envelope.id, attempt, why)
            if not retry:
                status, error_type, text = self._compensate(run, status, error_type, text)
            outcome = replace(
                outcome,
                status=status,
                error_type=error_type,
                error_message=truncate(text),
                retry_in_s=failure.delay_s if retry else 0,
                retry_message=message.message_id if retry else None,
                not_retried=error is not None and failure.retry and not retry,
            )
            if run.halt.cancelled is not None:
                outcome = _as_cancelled(outcome, run.halt.cancelled)
            elif held is not None and held.cancel is not None:
                # A cancel asked for meanwhile ends it CANCELLED instead.
                outcome = _as_cancelled(outcome, held.cancel)
        outcome = self._announced(outcome)
        wait_ms = max(0, int((started - waited_from).total_seconds() * 1000))
        delivery = self._conclude(message, envelope, outcome, remaining_ms, how="ran")
        return Delivery(
            delivery.outcome,
            delivery.task_id,
            delivery.attempt,
            delivery.reason,
            duration_ms=outcome.duration_ms,
            queue_wait_ms=wait_ms if attempt == 1 else None,
            event_unsent=delivery.event_unsent,
            announce_pending=delivery.announce_pending,
        )

    def _announced(self, outcome: TaskFinish) -> TaskFinish:
        """``outcome`` with its completion event's id, if its task announces its status."""
        if not self.settings.completion_events.announces(outcome.status):
            return replace(outcome, event_id=None)
        return replace(
            outcome, event_id=event_id(outcome.task, outcome.id, outcome.token, outcome.status)
        )

    def _end_cancelled(
        self,
        message: Message,
        envelope: Envelope,
        seen: Mapping[str, Any],
        remaining_ms: Callable[[], int],
    ) -> Delivery:
        """A run cancelled while it ran died without an outcome: CANCELLED under its token
        (fenced like its own finish would be), the message deleted; nothing runs."""
        now = self._clock()
        told = cancelled(envelope.task, envelope.id, seen)
        outcome = TaskFinish(
            task=envelope.task,
            id=envelope.id,
            token=int(seen["token"]),
            status=TaskStatus.CANCELLED,
            at=now,
            attempt=int(seen.get("attempts", 0)),
            expires_at=now + self.settings.retention,
            error_type=type(told).__name__,
            error_message=truncate(str(told)),
            enqueued_at=str(seen.get("enqueued_at") or envelope.enqueued_at),
            message_id=message.message_id,
        )
        return self._conclude(
            message, envelope, self._announced(outcome), remaining_ms, how="cancelled"
        )

    # Flows --------------------------------------------------------------------------------------

    def _flow_site(
        self, envelope: Envelope, record: Mapping[str, Any], remaining_ms: Callable[[], int]
    ) -> FlowSite:
        from vigil.tasks.flows.journal import FlowJournal
        from vigil.tasks.flows.run import FlowSite

        settings = self.settings
        return FlowSite(
            journal=FlowJournal(self._store.client, settings.table, envelope.task, envelope.id),
            token=int(record["token"]),
            attempt=int(record["attempts"]),
            clock=self._clock,
            retention=settings.retention,
            enqueued_at=datetime.fromisoformat(
                str(record.get("enqueued_at") or envelope.enqueued_at)
            ),
            claimed=dict(record),
            resume_body=envelope.resume().body(),
            read_record=lambda: self._store.item(envelope.task, envelope.id),
            ordered=settings.ordered,
            can_schedule=bool(settings.scheduler_role_arn and settings.schedule_group),
            children=self.children,
            queue_url=self._queue.queue_url,
        )

    def _suspend(
        self,
        message: Message,
        envelope: Envelope,
        record: Mapping[str, Any],
        suspend: Suspend,
        started: datetime,
        remaining_ms: Callable[[], int],
    ) -> Delivery:
        """The flow sleeps or waits: its wake-up is sent first (a delayed message or a one-time
        schedule), then the record says SLEEPING or WAITING, then the message is deleted. Not
        sent in time: the message is kept, comes back, and the flow reaches the same step again
        (its journal keeps the same end)."""
        from vigil.tasks.flows.wake import send_wake

        now = self._clock()
        body = envelope.resume().body()
        settings = self.settings
        try:
            if not suspend.by_children:  # a map's flow is woken by its last child to end
                persist(
                    lambda: send_wake(
                        self._queue,
                        self._scheduler,
                        task=envelope.task,
                        task_id=envelope.id,
                        step=suspend.step,
                        body=body,
                        now=now,
                        until=suspend.until,
                        role_arn=settings.scheduler_role_arn,
                        group=settings.schedule_group,
                    ),
                    time_left_s=self._time_left(remaining_ms),
                    sleep=self._sleep,
                )
        except OutOfTime as out_of_time:
            return Delivery(
                Outcome.UNRECORDED,
                envelope.id,
                int(record["attempts"]),
                f"wake-up not sent: {out_of_time}",
            )
        status = TaskStatus(suspend.status)
        outcome = TaskFinish(
            task=envelope.task,
            id=envelope.id,
            token=int(record["token"]),
            status=status,
            at=now,
            attempt=int(record["attempts"]),
            expires_at=now + settings.retention,
            duration_ms=int((now - started).total_seconds() * 1000),
            enqueued_at=str(record.get("enqueued_at") or envelope.enqueued_at),
            message_id=message.message_id,
            wake_at=suspend.until,
            waiting_for=suspend.step if status is TaskStatus.WAITING else None,
            resume=body,
        )
        return self._conclude(message, envelope, outcome, remaining_ms, how="suspended")

    def _tell_parent(
        self, envelope: Envelope, record: Mapping[str, Any], remaining_ms: Callable[[], int]
    ) -> str | None:
        """A map's child ended: its end counted on the map (once), the flow woken by the last.
        None, or why it could not be told (the message comes back and tells it again)."""
        from vigil.tasks.flows.fanout import count_end

        status = record.get("status")
        if status not in {s.value for s in FINAL_STATUSES} or envelope.parent is None:
            return None
        parent = envelope.parent
        try:
            persist(
                lambda: count_end(
                    self._store.client,
                    self._queue.client,
                    self.settings.table,
                    parent,
                    envelope.id,
                    str(status),
                    self._clock(),
                ),
                time_left_s=self._time_left(remaining_ms),
                sleep=self._sleep,
            )
        except OutOfTime as out_of_time:
            return f"its flow {parent['task']} {parent['id']} not told: {out_of_time}"
        return None

    def _replay_to_compensate(self, run: TaskRun, envelope: Envelope, body: Body) -> None:
        """A flow whose retries crashed away ends FAILED with its compensations run, as one
        whose retries raised: its body is replayed from its journal, each finished step returning
        its result and none run (the replay stops at the first that would), so
        :meth:`_compensate` knows them. A task with no journal costs one Query and runs nothing.
        Only on the first claim past the retries: a replay that itself dies leaves the next
        claim FAILED RunCrashed without it."""
        if run.flow_site is None:
            return
        flow = run.flow
        if not flow.entries():
            return
        flow.replaying = True
        with suppress(Exception, Suspend, FlowCancelled, Replayed):
            body(run, envelope.payload)

    def _cancel_children(self, run: TaskRun, cancelled: FlowCancelled) -> str:
        """A cancelled flow's maps' children that have not ended, cancelled (before its
        compensations run, so none of them starts after the undo); what was done, for the
        record's error message."""
        from vigil.tasks.flows.fanout import cancel_children

        flow = run.__dict__.get("flow")
        done = cancel_children(flow) if flow is not None else []
        return "; ".join([str(cancelled), *(str(each) for each in done)])

    def _compensate(
        self, run: TaskRun, status: TaskStatus, error_type: str, text: str
    ) -> tuple[TaskStatus, str, str]:
        """A flow ending FAILED (or CANCELLED): its finished steps' compensations, newest first.
        All ran: COMPENSATED (a cancel stays CANCELLED); one raised: FAILED naming it, counted
        (``FlowCompensationFailed``, alarmed)."""
        flow = run.__dict__.get("flow")
        if flow is None or not flow.finished:
            # Nothing compensable reached. (Every one already DONE, by an execution that died
            # before its end was written: COMPENSATED below, with nothing run again.)
            return status, error_type, text
        ran, failed = flow.compensate()
        if failed is not None:
            telemetry.count_one(TaskMetric.COMPENSATION_FAILED, task=run.task)
            return (
                TaskStatus.FAILED,
                "CompensationFailed",
                f"the compensation of step {failed.step!r} raised "
                f"{type(failed.error).__name__}: {failed.error} (after {error_type}: {text}; "
                f"compensated before it: {', '.join(ran) or 'none'})",
            )
        done = TaskStatus.CANCELLED if status is TaskStatus.CANCELLED else TaskStatus.COMPENSATED
        return done, error_type, f"{text} (compensated: {', '.join(ran) or 'all before'})"

    def _progress(
        self,
        envelope: Envelope,
        token: int,
        remaining_ms: Callable[[], int],
        percent: int,
        note: str | None,
    ) -> bool:
        """``run.progress``: False when fenced out. A note is not worth a retry of the whole
        task: a throttled one is retried for at most ``PROGRESS_BUDGET_S`` (within the run's
        time), then dropped and counted, and the run goes on."""
        slept = [0.0]

        def pause(seconds: float) -> None:
            slept[0] += seconds
            self._sleep(seconds)

        margin_s = self.settings.lease_margin.total_seconds()
        try:
            return persist(
                lambda: self._store.progress(envelope.task, envelope.id, token, percent, note),
                time_left_s=lambda: min(
                    PROGRESS_BUDGET_S - slept[0], remaining_ms() / 1000 - margin_s
                ),
                sleep=pause,
                backoff=CLAIM_BACKOFF,
            )
        except OutOfTime as out_of_time:
            telemetry.metrics().add_metric(name=TaskMetric.PROGRESS_DROPPED, unit="Count", value=1)
            telemetry.logger().warning(
                "progress note dropped", extra={"percent": percent, "reason": str(out_of_time)}
            )
            return True

    # Finish -------------------------------------------------------------------------------------

    def _conclude(
        self,
        message: Message,
        envelope: Envelope,
        outcome: TaskFinish,
        remaining_ms: Callable[[], int],
        how: str,
    ) -> Delivery:
        """Record ``outcome`` (through transient faults), then act on the message: delete it
        or have it come back after the backoff.

        A run out of retries goes to the dead-letter queue *before* its record says FAILED: a
        FAILED record makes every later copy of the message a DUPLICATE, so were the send to
        fail after it, the task would be in neither place. The other way round, the worst is a
        second copy in the dead-letter queue, which a redrive runs at most once (the key)."""
        time_left_s = self._time_left(remaining_ms)
        if self._results is not None and len((outcome.result or "").encode()) > RESULT_INLINE_BYTES:
            try:
                outcome = self._store_result(outcome, time_left_s)
            except OutOfTime as out_of_time:
                self.unfinished.remember(message.message_id, outcome)
                why = f"result not stored: {out_of_time}"
                return Delivery(Outcome.UNRECORDED, envelope.id, outcome.attempt, why)
        error = f"{outcome.error_type}: {outcome.error_message}" if outcome.error_type else ""
        if outcome.status in _DEAD_LETTERED and how != "remembered":
            # UNCERTAIN too: once settled not done, ``vigil tasks redrive`` runs it from there.
            reason = f"{outcome.status.value.lower()} after {outcome.attempt} attempt(s)"
            reason += f" (not retried: {outcome.error_type})" if outcome.not_retried else ""
            reason += f": {error}"
            not_sent = self._dead_letter(message, reason, time_left_s)
            if not_sent:
                return Delivery(Outcome.UNRECORDED, envelope.id, outcome.attempt, not_sent)
        try:
            recorded = record_outcome(
                self._store,
                outcome,
                request_id=message.message_id,
                unfinished=self.unfinished,
                time_left_s=time_left_s,
                sleep=self._sleep,
            )
        except OutcomeUnrecorded as unrecorded:
            return Delivery(Outcome.UNRECORDED, envelope.id, outcome.attempt, str(unrecorded))
        except CancelAsked as asked:
            # A failure's finish met a cancel asked for since: it ends CANCELLED instead.
            told = cancelled(outcome.task, outcome.id, asked.seen)
            again = self._announced(_as_cancelled(outcome, told))
            return self._conclude(message, envelope, again, remaining_ms, how="cancelled")
        self.unfinished.forget(message.message_id)
        if not recorded:
            return Delivery(
                Outcome.FENCED,
                envelope.id,
                outcome.attempt,
                "a newer delivery took the task over; this outcome is not recorded",
            )
        if envelope.parent and outcome.status in FINAL_STATUSES:
            not_told = self._tell_parent(envelope, outcome.recorded(), remaining_ms)
            if not_told:  # back: its DUPLICATE tells the flow again
                return Delivery(Outcome.UNRECORDED, envelope.id, outcome.attempt, not_told)
        if outcome.status in SUSPENDED_STATUSES:
            return Delivery(
                Outcome.SUSPENDED,
                envelope.id,
                outcome.attempt,
                f"{outcome.status.value} until {iso(outcome.wake_at or outcome.at)}",
                suspended=outcome.status,
            )
        if outcome.status is TaskStatus.QUEUED:
            self._come_back(message, outcome.retry_in_s)
            return Delivery(
                Outcome.RETRIED,
                envelope.id,
                outcome.attempt,
                f"attempt {outcome.attempt} failed ({error}); retry in {outcome.retry_in_s} s",
            )
        final = _FINAL_OUTCOME.get(outcome.status, Outcome.FAILED)
        done = Delivery(
            final, envelope.id, outcome.attempt, error if final is Outcome.FAILED else how
        )
        if outcome.event_id is None:
            return done
        return self._announce(message, outcome.recorded(), done, time_left_s)

    def _store_result(self, outcome: TaskFinish, time_left_s: Callable[[], float]) -> TaskFinish:
        """A result too big for the record, in the results bucket; the record keeps where."""
        assert self._results is not None and outcome.result is not None
        ref = persist(
            functools.partial(
                self._results.put, outcome.task, outcome.id, outcome.token, outcome.result
            ),
            time_left_s=time_left_s,
            sleep=self._sleep,
        )
        return replace(outcome, result=None, result_ref=ref)

    def _dead_letter(
        self, message: Message, reason: str, time_left_s: Callable[[], float]
    ) -> str | None:
        """The message, with ``reason``, in the dead-letter queue through transient faults;
        what stopped it if time ran out first (the message is then kept, to come back)."""
        try:
            persist(
                lambda: self._queue.dead_letter(
                    message.body, reason, message_id=message.message_id, group=message.group
                ),
                time_left_s=time_left_s,
                sleep=self._sleep,
            )
        except OutOfTime as out_of_time:
            return f"not dead-lettered: {out_of_time}"
        return None

    def _announce(
        self,
        message: Message,
        record: Mapping[str, Any],
        delivery: Delivery,
        time_left_s: Callable[[], float],
    ) -> Delivery:
        """Send the completion event ``record`` owes (:mod:`vigil.tasks.completion`). Not sent
        in time: the message is kept and comes back to send it, unless its receives are spent
        (then given up: ``event_unsent``, counted and alarmed)."""
        entry = completion_entry(record, self.settings.event_bus)
        try:
            send_completion(self._events, entry, time_left_s=time_left_s, sleep=self._sleep)
        except Exception:
            telemetry.logger().exception("completion event not sent")
        else:
            return delivery
        if message.receive_count >= max_receive_count(self.settings.retries):
            return replace(delivery, event_unsent=True)
        self._come_back(message, EVENT_RETRY_S)
        return replace(delivery, announce_pending=True)

    # Messages that are not tasks ----------------------------------------------------------------

    def _malformed(
        self, message: Message, malformed: MalformedTask, remaining_ms: Callable[[], int]
    ) -> Delivery:
        reason = f"malformed: {malformed.reason}"
        not_sent = self._dead_letter(message, reason, self._time_left(remaining_ms))
        if not_sent:
            return Delivery(Outcome.UNRECORDED, malformed.task_id, reason=not_sent)
        if malformed.task == self.settings.task and malformed.task_id:
            now = self._clock()
            self._store.mark_malformed(
                malformed.task,
                malformed.task_id,
                truncate(malformed.reason),
                now,
                now + self.settings.retention,
            )
        return Delivery(Outcome.MALFORMED, malformed.task_id, reason=malformed.reason)

    # Helpers ------------------------------------------------------------------------------------

    def come_back_at_once(self, message: Message) -> None:
        """A message the batch kept without delivering it (an ordered group stopped before it)."""
        self._come_back(message, 0)

    def _come_back(self, message: Message, seconds: int) -> None:
        """Best effort: if it fails, the message comes back after the queue's own visibility
        timeout instead, which is later, never lost."""
        try:
            self._queue.come_back_in(message.receipt_handle, seconds, message.source_arn)
        except Exception:
            telemetry.logger().exception("could not change the message's visibility")

    @staticmethod
    def _time_left(remaining_ms: Callable[[], int]) -> Callable[[], float]:
        return lambda: remaining_ms() / 1000


_DEAD_LETTERED = frozenset({TaskStatus.FAILED, TaskStatus.UNCERTAIN})
_FINAL_OUTCOME = {
    TaskStatus.SUCCEEDED: Outcome.SUCCEEDED,
    TaskStatus.UNCERTAIN: Outcome.UNCERTAIN,
    TaskStatus.COMPENSATED: Outcome.COMPENSATED,
    TaskStatus.CANCELLED: Outcome.CANCELLED,
}


def _as_cancelled(outcome: TaskFinish, told: BaseException) -> TaskFinish:
    """A run's outcome turned CANCELLED by the cancel it was told of (or met at its finish):
    final, no retry, no dead letter; the cancellation is its error."""
    return replace(
        outcome,
        status=TaskStatus.CANCELLED,
        result=None,
        result_ref=None,
        error_type=type(told).__name__,
        error_message=truncate(str(told)),
        retry_in_s=0,
        retry_message=None,
    )


def _default_children() -> Any:
    from vigil.tasks.enqueue import default_client

    return default_client()


def _no_scheduler() -> Any:
    raise RuntimeError("this task has no scheduler: it cannot sleep beyond 15 minutes")


def _count(raw: Any) -> int:
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return 1
