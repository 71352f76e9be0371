"""The jobs guard: decides whether a delivered tick runs, runs it at most once, records it.

Flow of one delivery::

    parse tick -> an outcome this container could not record for this request? -> write it first
               -> too late? -> record MISSED
               -> claim (1 transaction) -> refused? -> resolve_conflict -> DUPLICATE | SKIP | RETRY
               -> run the body -> finish (1 transaction, fenced by the token, retried through
                  transient faults while the invocation has time: :mod:`vigil.jobs.finish`)
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vigil.clock import Clock, Sleeper, system_clock
from vigil.dynamo import truncate
from vigil.fenced_write import Halt, RunRecordSite, once, refused_write, stopped_on
from vigil.jobs.decisions import ClaimTerms, DurationFlag, Verdict, duration_flag, resolve_conflict
from vigil.jobs.events import Tick
from vigil.jobs.finish import OutcomeUnrecorded, Unfinished, record_outcome
from vigil.jobs.model import JobSettings, Outcome, Overlap, RunStatus
from vigil.jobs.store import Claim, Finish, RunStore, TickTaken
from vigil.leases import lease_is_live, next_token

if TYPE_CHECKING:
    from vigil.effects import Effects

MAX_CLAIM_ATTEMPTS = 5


class ClaimContention(RuntimeError):
    """The tick's state kept changing under the claim; raising lets Lambda retry the delivery."""


class WrongJob(ValueError):
    """The event names another job: a misrouted schedule must not run this job."""


class TickBusy(RuntimeError):
    """The tick cannot run now and must not be dropped: an earlier attempt of this same
    invocation still holds its lease (it crashed, or it still runs), or it is a redrive meeting
    another tick's run under ``skip``. Failing lets Lambda retry later or dead-letter it."""


class TickTooLate(RuntimeError):
    """A retry of a FAILED (or crashed) tick arrived after the lateness limit: it will not run
    here, and failing sends it to the dead-letter queue, where a redrive can still run it."""


@dataclass(frozen=True)
class Run:
    """What a job body is told about the run it is doing."""

    job: str
    scheduled_at: datetime
    fencing_token: int
    attempt: int
    remaining_ms: Callable[[], int]
    tick: str = ""
    """The tick's key, as the history shows it (the unit of once for fenced sends)."""
    record: RunRecordSite | None = None
    """The tick's record, where ``run.once`` journals effects (None: no journal, e.g. a test's
    hand-made run)."""
    claim: RunRecordSite | None = None
    """The job's newest claim (its ``HEAD``), which ``run.fenced.strict`` checks."""
    halt: Halt = field(default_factory=Halt, repr=False, compare=False)
    """What the effects raised that ends the run, kept whatever the body did with it."""

    def remaining_time(self) -> timedelta:
        return timedelta(milliseconds=self.remaining_ms())

    @functools.cached_property
    def fenced(self) -> Effects:
        """Writes a superseded run of this job cannot make (:mod:`vigil.effects`), loaded on
        first use: a job that never names it does not import it."""
        from vigil.effects import Effects, RunFence

        fence = RunFence.of_job(self.job, self.tick, self.fencing_token)
        return Effects.from_env(fence, halt=self.halt, claim=self.claim)

    def once(
        self, effect: str, check: Callable[[], bool] | None = None
    ) -> AbstractContextManager[bool]:
        """``with run.once("welcome-email") as first: if first: send()``: an effect no write can
        fence, done at most once per tick, or the tick ends UNCERTAIN for a person to settle
        (:mod:`vigil.effects.journal`). Loaded on first use, like :attr:`fenced`."""
        return once(self.record, effect, check, self.halt)


@dataclass(frozen=True)
class Result:
    job: str
    tick: str
    outcome: Outcome
    attempt: int = 0
    fencing_token: int | None = None
    reason: str = ""
    duration_flag: DurationFlag | None = None

    def to_json(self) -> dict[str, Any]:
        flag = {"duration_flag": self.duration_flag.value} if self.duration_flag else {}
        return {
            "job": self.job,
            "tick": self.tick,
            "outcome": self.outcome.value,
            "attempt": self.attempt,
            "fencing_token": self.fencing_token,
            "reason": self.reason,
            **flag,
        }


Body = Callable[[Run], Any]


_NOT_RUN = {
    Verdict.PAUSED: (RunStatus.PAUSED, Outcome.PAUSED),
    Verdict.SKIP: (RunStatus.SKIPPED, Outcome.SKIPPED),
}
"""Refused claims that are recorded final, visibly, and not run."""


class JobGuard:
    def __init__(
        self,
        settings: JobSettings,
        store: RunStore,
        clock: Clock = system_clock,
        *,
        sleep: Sleeper = time.sleep,
        unfinished: Unfinished[Finish] | None = None,
    ) -> None:
        """One guard per container (the decorator builds it on the first invocation):
        ``unfinished`` is what this container remembers of outcomes it could not record."""
        self.settings = settings
        self._store = store
        self._clock = clock
        self._sleep = sleep
        self.unfinished = unfinished if unfinished is not None else Unfinished[Finish]()

    def execute(
        self, tick: Tick, body: Body, *, remaining_ms: Callable[[], int], holder: str
    ) -> Result:
        """Run ``body`` for ``tick`` unless another delivery did, does, or must; never twice."""
        job = self.settings.job
        if tick.job is not None and tick.job != job:
            raise WrongJob(f"event is for job {tick.job!r}, this function runs {job!r}")
        remembered = self.unfinished.recall(holder, job, tick.key)
        if remembered is not None:
            recorded = self._record(remembered, remaining_ms, holder)
            self.unfinished.forget(holder)  # only once written: an error keeps it for the retry
            if remembered.status is RunStatus.SUCCEEDED:
                return _reported(remembered, recorded, "recorded by Lambda's retry of the request")
            # A failed run recorded late: this retry claims it again, as it would have anyway.
        now = self._clock()
        lateness = now - tick.scheduled_at
        expires_at = now + self.settings.retention
        # An operator's redrive or manual tick is deliberate: it runs whatever the lateness.
        if lateness > self.settings.max_lateness and not (tick.redriven or tick.manual):
            return self._too_late(tick, lateness, now, expires_at)
        overlap = Overlap.ALLOW if tick.overlap == Overlap.ALLOW.value else self.settings.overlap

        terms = ClaimTerms()
        for _ in range(MAX_CLAIM_ATTEMPTS):
            now = self._clock()
            token = next_token(now, terms.token_floor)
            claim = Claim(
                job=job,
                tick=tick.key,
                token=token,
                attempt=terms.expected_attempts + 1,
                expected_attempts=terms.expected_attempts,
                overlap=overlap,
                now=now,
                lease_until=now
                + timedelta(milliseconds=remaining_ms())
                + self.settings.lease_margin,
                expires_at=expires_at,
                holder=holder,
                execution_id=tick.execution_id,
                trigger=tick.trigger.value,
                requested_by=tick.requested_by,
                rerun=tick.rerun,
                request_id=tick.request_id,
                first_attempt=terms.first_attempt,
            )
            refusal = self._store.claim(claim)
            if refusal is None:
                return self._run(claim, tick, body, remaining_ms)
            decision = resolve_conflict(
                terms=terms,
                token=token,
                overlap=overlap,
                holder=holder,
                tick_refused=refusal.tick_refused,
                tick_seen=refusal.tick_seen,
                head_refused=refusal.head_refused,
                head_seen=refusal.head_seen,
                now=now,
                rerun=tick.rerun,
                request_id=tick.request_id,
                redriven=tick.redriven,
            )
            if decision.verdict is Verdict.DUPLICATE:
                return Result(job, tick.key, Outcome.DUPLICATE, reason=decision.reason)
            if decision.verdict is Verdict.BUSY:
                raise TickBusy(f"{job} tick {tick.key}: {decision.reason}")
            if decision.verdict in _NOT_RUN:
                status, outcome = _NOT_RUN[decision.verdict]
                try:
                    self._store.record_final(
                        job=job,
                        tick=tick.key,
                        status=status,
                        now=now,
                        expires_at=expires_at,
                        detail=decision.reason,
                        expected_attempts=decision.terms.expected_attempts,
                        rerun=tick.rerun,
                    )
                except TickTaken:
                    # The record moved: claim again. But an operator's rerun of a paused job's
                    # recorded tick leaves that record as it was, and is not run.
                    if not (tick.manual and outcome is Outcome.PAUSED):
                        continue
                return Result(job, tick.key, outcome, reason=decision.reason)
            terms = decision.terms
        raise ClaimContention(
            f"{job} tick {tick.key}: state changed under {MAX_CLAIM_ATTEMPTS} claims in a row"
        )

    def _too_late(
        self, tick: Tick, lateness: timedelta, now: datetime, expires_at: datetime
    ) -> Result:
        job = self.settings.job
        detail = (
            f"delivered {lateness} after its scheduled time (limit {self.settings.max_lateness})"
        )
        try:
            self._store.record_final(
                job=job,
                tick=tick.key,
                status=RunStatus.MISSED,
                now=now,
                expires_at=expires_at,
                detail=detail,
            )
        except TickTaken as taken:
            seen = taken.seen or {}
            unfinished = seen.get("status") == RunStatus.FAILED or (
                seen.get("status") == RunStatus.RUNNING and not lease_is_live(seen, now)
            )
            if unfinished:
                raise TickTooLate(
                    f"{job} tick {tick.key} is {seen.get('status')}; {detail}"
                ) from None
            return Result(job, tick.key, Outcome.DUPLICATE, reason="late copy of a known tick")
        return Result(job, tick.key, Outcome.MISSED, reason=detail)

    def _run(self, claim: Claim, tick: Tick, body: Body, remaining_ms: Callable[[], int]) -> Result:
        run = Run(
            job=claim.job,
            scheduled_at=tick.scheduled_at,
            fencing_token=claim.token,
            attempt=claim.attempt,
            remaining_ms=remaining_ms,
            tick=claim.tick,
            record=self._store.record_site(
                claim.job, claim.tick, claim.token, lambda: remaining_ms() / 1000, self._clock
            ),
            claim=self._store.claim_site(
                claim.job, claim.token, lambda: remaining_ms() / 1000, self._clock
            ),
        )
        started = self._clock()
        try:
            body(run)
        except BaseException as error:  # SystemExit too: the lease must not outlive a dead run
            # What the effects raised ends the run, even if the body caught it and raised another.
            stopped = self._stopped(claim, started, run.halt.stop(returned=False) or error)
            if stopped is not None:
                return stopped(remaining_ms)
            outcome = self._outcome(claim, RunStatus.FAILED, started, error)
            # A run that hung past max_duration and then failed is the usual too-long run: the
            # handler counts the flag (and an unrecorded outcome) on its way out.
            with contextlib.suppress(AttributeError):
                error.vigil_duration_flag = _flag(outcome)  # type: ignore[attr-defined]
            try:
                self._record(outcome, remaining_ms, claim.holder)
            except OutcomeUnrecorded as unrecorded:
                # The body's error is what Lambda reports and dead-letters; the note says more.
                with contextlib.suppress(AttributeError):
                    error.vigil_unrecorded = unrecorded  # type: ignore[attr-defined]
                error.add_note(str(unrecorded))
            raise
        halted = run.halt.stop(returned=True)
        stopped = self._stopped(claim, started, halted) if halted is not None else None
        if stopped is not None:
            return stopped(remaining_ms)
        outcome = self._outcome(claim, RunStatus.SUCCEEDED, started, None)
        return _reported(outcome, self._record(outcome, remaining_ms, claim.holder))

    def _stopped(
        self, claim: Claim, started: datetime, error: BaseException
    ) -> Callable[[Callable[[], int]], Result] | None:
        """How the run ends when ``error`` stops it (an uncertain effect, a refused write);
        None for any other error."""
        effect = stopped_on(error)
        if effect is not None:
            return lambda left: self._uncertain(claim, started, error, effect, left)
        if refused_write(error):
            return lambda left: self._superseded(claim, started, error, left)
        return None

    def _uncertain(
        self,
        claim: Claim,
        started: datetime,
        error: BaseException,
        effect: str,
        remaining_ms: Callable[[], int],
    ) -> Result:
        """An earlier run began ``effect`` and never recorded it done: the tick ends UNCERTAIN,
        final (not retried: a retry would face the same unknown), for ``vigil jobs settle``."""
        outcome = replace(
            self._outcome(claim, RunStatus.UNCERTAIN, started, error), uncertain_effect=effect
        )
        if not self._record(outcome, remaining_ms, claim.holder):
            return _reported(outcome, recorded=False)
        return Result(
            outcome.job,
            outcome.tick,
            Outcome.UNCERTAIN,
            outcome.attempt,
            outcome.token,
            str(error),
        )

    def _superseded(
        self,
        claim: Claim,
        started: datetime,
        error: BaseException,
        remaining_ms: Callable[[], int],
    ) -> Result:
        """The body's write through ``run.fenced`` was refused: a newer run of the job (this
        tick's takeover, or a later tick's run) wrote there, so this run is superseded. Its tick
        ends FENCED when it is still this run's (else its successor's record stands), either way
        not retried nor dead-lettered, as a task's attempt refused the same way is."""
        outcome = self._outcome(claim, RunStatus.FENCED, started, error)
        recorded = self._record(outcome, remaining_ms, claim.holder)
        reason = f"superseded by a newer run: {error}" if recorded else ""
        result = _reported(outcome, recorded=False)
        return replace(result, reason=reason or result.reason)

    def _outcome(
        self, claim: Claim, status: RunStatus, started: datetime, error: BaseException | None
    ) -> Finish:
        finished = self._clock()
        duration = max(finished - started, timedelta(0))
        flag = duration_flag(
            duration,
            succeeded=status is RunStatus.SUCCEEDED,
            max_duration=self.settings.max_duration,
            min_duration=self.settings.min_duration,
        )
        return Finish(
            job=claim.job,
            tick=claim.tick,
            token=claim.token,
            overlap=claim.overlap,
            status=status,
            finished_at=finished,
            duration_ms=int(duration.total_seconds() * 1000),
            attempt=claim.attempt,
            error_type=type(error).__name__ if error is not None else None,
            error_message=truncate(str(error)) if error is not None else None,
            duration_flag=flag.value if flag else None,
        )

    def _record(self, outcome: Finish, remaining_ms: Callable[[], int], holder: str) -> bool:
        """The outcome written, through transient faults while this invocation has time; out of
        time, it is remembered for Lambda's retry of this request (``OutcomeUnrecorded``)."""
        return record_outcome(
            self._store,
            outcome,
            request_id=holder,
            unfinished=self.unfinished,
            time_left_s=lambda: remaining_ms() / 1000,
            sleep=self._sleep,
        )


def _flag(outcome: Finish) -> DurationFlag | None:
    return DurationFlag(outcome.duration_flag) if outcome.duration_flag else None


def _reported(outcome: Finish, recorded: bool, how: str = "") -> Result:
    """What a run that finished reports: the outcome recorded, or FENCED if a newer run's was."""
    if recorded:
        result, reason = Outcome.SUCCEEDED, how
    else:
        result, reason = Outcome.FENCED, "a newer run took the tick over; outcome not recorded"
    return Result(
        outcome.job, outcome.tick, result, outcome.attempt, outcome.token, reason, _flag(outcome)
    )


def describe(result: Result) -> str:
    token = f" token={result.fencing_token}" if result.fencing_token else ""
    return f"{result.job} {result.tick}: {result.outcome.value}{token} {result.reason}".strip()
