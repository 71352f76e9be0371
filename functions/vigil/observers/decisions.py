"""What the reconciler must do for one observer: pure functions of state, evidence and time.

Everything here is deterministic and free of I/O so the rules can be tested exhaustively (hypothesis)
without AWS. The reconciler gathers the evidence (the registry record, what ECS says of the task, an
ECS event), calls :func:`decide`, and carries out the returned :class:`Plan`: at most one write of
the record (the type allows no more) and the effects around it (stop a task, run one again, look
first, or nothing).

A restart, drawn::

    task g stops --> [StopTask g if still up] --> record: generation g+1, STARTING --> RunTask(g+1)
                                     \\--> quick failure n>1: record PENDING until now + backoff(n)
                                      \\--> n >= threshold: record FAILED, notice on the DLQ

Rules, in the order :func:`decide` applies them:

1. An ECS event for a task that is not the observer's current task, or with a ``detail.version`` not
   newer than the one recorded (``task_version``), is stale: ignored (a live non-current task is an
   orphan and is stopped).
2. Desired STOPPED: stop the task if one may run, then mark STOPPED once ECS says it stopped.
3. Desired RUNNING: start a missing observer; restart one whose task stopped or whose heartbeat is
   older than ``stale_after``; back quick failures off exponentially (capped); give up as FAILED after
   ``failure_threshold`` consecutive quick failures, or at once on a bad-config exit.
4. A ``RunTask`` that failed is retried, with the same generation (so the same ``clientToken``), once
   ``next_start_at`` has passed; the record is never dropped because a call failed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import get_args

from vigil.contract.observers import ExitCode
from vigil.observers.model import Desired, LastExit, Observer, Status

STOPPED = "STOPPED"
MISSING = "MISSING"
"""``last_status`` of a task DescribeTasks no longer knows (ECS forgets stopped tasks after ~1 h)."""


@dataclass(frozen=True)
class Settings:
    """The reconciler's tunables; defaults suit a 30 s heartbeat."""

    heartbeat_interval: timedelta = timedelta(seconds=30)
    start_timeout: timedelta = timedelta(minutes=10)
    """How long a started task may take to claim its generation (Fargate image pulls are slow)."""
    healthy_after: timedelta = timedelta(minutes=5)
    """A task that ran this long before failing was healthy: its failure resets the streak."""
    backoff_base: timedelta = timedelta(seconds=30)
    backoff_cap: timedelta = timedelta(minutes=15)
    failure_threshold: int = 5
    run_task_retry_base: timedelta = timedelta(seconds=15)
    run_task_retry_cap: timedelta = timedelta(minutes=5)
    orphan_grace: timedelta = timedelta(minutes=2)
    """A task of the current generation younger than this may still be recorded by its starter."""

    @property
    def stale_after(self) -> timedelta:
        return 3 * self.heartbeat_interval


@dataclass(frozen=True)
class Tracking:
    """What the reconciler keeps on the item besides the shared model (all in the fleet index)."""

    task_version: int | None = None
    """The highest ``detail.version`` seen for the current task."""
    task_status: str | None = None
    """ECS's last status of the current task, as last seen."""
    started_at: datetime | None = None
    """When the current generation was started (RunTask requested)."""
    start_attempts: int = 0
    """RunTask calls that failed for the current generation (drives the retry backoff)."""
    capacity: str | None = None
    """The capacity (``Capacity``) the current task got."""
    legacy: bool = False
    """Its current generation's container writes the name-keyed registry it was copied from
    (``LEGACY_ATTRIBUTE``): a rollout hands it over whatever it runs."""
    legacy_version: int | None = None
    """The old record's version as last copied or replayed (``LEGACY_VERSION``)."""


@dataclass(frozen=True)
class HostExit:
    """A pooled observer's child exited: its host's report (``HOST_EXIT`` on the record)."""

    generation: int
    exit_code: int | None = None
    reason: str | None = None
    at: datetime | None = None
    """When the host wrote it, by the host's clock: shown, never compared with the reconciler's."""
    ran: timedelta | None = None
    """How long the child ran, by the host's monotonic clock (``HOST_EXIT_RAN_MS``)."""


@dataclass(frozen=True)
class Pooled:
    """A pooled observer's placement, as its record holds it (empty for a dedicated one)."""

    host: str | None = None
    """The host its current generation is placed on (the commit point of a placement)."""
    host_exit: HostExit | None = None

    def exit_of(self, generation: int) -> HostExit | None:
        """The host's exit report for this generation, if there is one."""
        found = self.host_exit
        return found if found is not None and found.generation == generation else None


@dataclass(frozen=True)
class Record:
    observer: Observer
    tracking: Tracking = Tracking()
    pooled: Pooled = Pooled()

    @property
    def name(self) -> str:
        return self.observer.name


@dataclass(frozen=True)
class TaskState:
    """One task as ECS describes it (DescribeTasks) or reports it (a Task State Change event)."""

    arn: str
    last_status: str
    version: int | None = None
    observer: str | None = None
    generation: int | None = None
    stop_code: str | None = None
    stopped_reason: str | None = None
    exit_code: int | None = None
    created_at: datetime | None = None
    stopped_at: datetime | None = None
    host: str | None = None
    """A pooled host's task: its host id (such a task carries no observer marks)."""
    ran_for: timedelta | None = None
    """How long the task ran, measured on one clock (a pooled child's, by its host's monotonic
    clock): when known, a failure is quick by it, not by ``stopped_at`` against ``started_at``."""

    @property
    def stopped(self) -> bool:
        return self.last_status in (STOPPED, MISSING)

    def last_exit(self, now: datetime) -> LastExit:
        reason = self.stopped_reason
        if self.last_status == MISSING:
            reason = reason or "ECS no longer knows the task"
        return LastExit(
            stop_code=self.stop_code,
            exit_code=self.exit_code,
            reason=reason,
            task_arn=self.arn,
            at=self.stopped_at or now,
        )


@dataclass(frozen=True)
class Listed:
    """What a ListTasks sweep says: whether the task is among the cluster's running tasks."""

    running: bool


Evidence = TaskState | Listed | None
"""What is known of the current task: described, listed, or nothing (look only if needed)."""


# Actions -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Describe:
    arn: str


@dataclass(frozen=True)
class StopTask:
    arn: str
    reason: str


@dataclass(frozen=True)
class StartTask:
    """Advance the record to ``generation`` (STARTING) and run its task."""

    generation: int
    restart: bool
    consecutive_failures: int
    retry_at: datetime
    """RunTask counts as in flight until then; after it, a pass may retry (same clientToken)."""
    last_exit: LastExit | None = None
    host: str | None = None
    """Pooled: the host this generation is placed on (chosen by the executor, not decided)."""
    task_definition: str | None = None


@dataclass(frozen=True)
class RetryStart:
    """Run the task of the current generation again (same clientToken): the last RunTask failed."""

    generation: int


@dataclass(frozen=True)
class Backoff:
    until: datetime
    consecutive_failures: int
    last_exit: LastExit | None


@dataclass(frozen=True)
class MarkStopping:
    pass


@dataclass(frozen=True)
class MarkStopped:
    last_exit: LastExit | None


@dataclass(frozen=True)
class MarkFailed:
    reason: str
    consecutive_failures: int
    last_exit: LastExit | None


@dataclass(frozen=True)
class SeeTask:
    """Record the newest state seen of the current task (and adopt its ARN if not yet recorded)."""

    arn: str
    version: int | None
    status: str


@dataclass(frozen=True)
class HandOver:
    """Tell the current task to stop (STOPPING, desired still RUNNING) so that the next generation
    starts, on ``task_definition``, once it has checkpointed and stopped: a rollout's move."""

    task_definition: str


@dataclass(frozen=True)
class Ignore:
    reason: str
    stale: bool = False
    """True for a stale or out-of-order ECS event (counted by a metric)."""


Write = StartTask | Backoff | MarkStopping | MarkStopped | MarkFailed | SeeTask | HandOver
"""Actions that change the record."""
Effect = Describe | StopTask | RetryStart | Ignore
"""Actions that change nothing in the record: a look, a call to ECS, or a note."""
Action = Write | Effect
WRITES: tuple[type, ...] = get_args(Write)


@dataclass(frozen=True)
class Plan:
    """What to do for one observer: at most one write of the record, and the effects around it.

    The write is the commit point (a lost race cancels the rest); ``effects`` are listed in the
    order a person reads them (a stop before the write that follows from it).
    """

    write: Write | None = None
    effects: tuple[Effect, ...] = ()

    @property
    def actions(self) -> tuple[Action, ...]:
        return (*self.effects, self.write) if self.write is not None else self.effects

    @property
    def look(self) -> str | None:
        """The task to describe before deciding, when the plan is only that look."""
        return next((e.arn for e in self.effects if isinstance(e, Describe)), None)

    @property
    def starts(self) -> bool:
        """Whether carrying it out calls RunTask."""
        return isinstance(self.write, StartTask) or any(
            isinstance(e, RetryStart) for e in self.effects
        )

    def after(self, *effects: Effect) -> Plan:
        """The same plan, preceded by ``effects``."""
        return Plan(self.write, (*effects, *self.effects))


def only(*effects: Effect) -> Plan:
    """A plan that writes nothing."""
    return Plan(effects=effects)


# Timing ------------------------------------------------------------------------------------------


def backoff_delay(consecutive_failures: int, settings: Settings) -> timedelta:
    """Zero for the first failure, then base, 2*base, 4*base, ... capped."""
    if consecutive_failures <= 1:
        return timedelta(0)
    exponent = min(consecutive_failures - 2, 32)
    return min(settings.backoff_cap, settings.backoff_base * (1 << exponent))


def run_task_retry_delay(attempts: int, settings: Settings) -> timedelta:
    """Delay before retrying a failed RunTask; attempts counts the failures so far (>= 1)."""
    exponent = min(max(attempts - 1, 0), 32)
    return min(settings.run_task_retry_cap, settings.run_task_retry_base * (1 << exponent))


def liveness_deadline(record: Record, settings: Settings) -> datetime | None:
    """When the current task must have shown life by, or None when no task is expected to run."""
    observer = record.observer
    if observer.status is Status.RUNNING:
        seen = observer.heartbeat_at or record.tracking.started_at
        return seen + settings.stale_after if seen else None
    if observer.status is Status.STARTING and observer.task_arn:
        started = record.tracking.started_at or observer.updated_at
        return started + settings.start_timeout
    return None


# Decisions ---------------------------------------------------------------------------------------


def decide(record: Record, evidence: Evidence, now: datetime, settings: Settings) -> Plan:
    """What brings one observer towards its desired state, given what is known."""
    observer = record.observer
    if isinstance(evidence, TaskState) and evidence.arn != observer.task_arn:
        return only(Ignore(f"task {evidence.arn} is not the current task"))
    if observer.desired is Desired.STOPPED:
        return _toward_stopped(record, evidence, now, settings)
    return _toward_running(record, evidence, now, settings)


def decide_event(
    record: Record | None, event: TaskState, now: datetime, settings: Settings
) -> Plan:
    """What to do for one ECS Task State Change event (``record`` None: no such observer)."""
    if record is None:
        if event.stopped:
            return only(Ignore("task of an unknown observer, already stopped"))
        return only(StopTask(event.arn, "orphan: no such observer"))
    observer = record.observer
    current = observer.task_arn == event.arn or (
        observer.task_arn is None
        and observer.status in (Status.STARTING, Status.RUNNING)
        and event.generation == observer.generation
    )
    if not current:
        if event.stopped:
            return only(Ignore(f"stale event for {event.arn}: not the current task", stale=True))
        return only(StopTask(event.arn, f"orphan: {observer.name} runs {observer.task_arn}"))
    seen = record.tracking.task_version if observer.task_arn == event.arn else None
    if seen is not None and event.version is not None and event.version <= seen:
        return only(Ignore(f"out-of-order event: version {event.version} <= {seen}", stale=True))
    adopted = Record(
        observer=_with_task(observer, event.arn),
        tracking=record.tracking,
    )
    if event.stopped:
        return decide(adopted, event, now, settings)
    if observer.desired is Desired.STOPPED and observer.status is not Status.STOPPING:
        return decide(adopted, event, now, settings)
    return Plan(SeeTask(event.arn, event.version, event.last_status))


def classify_orphan(
    task: TaskState, record: Record | None, now: datetime, settings: Settings
) -> StopTask | SeeTask | Ignore:
    """A running task that no record names as current: stop it, adopt it, or leave it a moment."""
    if task.stopped:
        return Ignore("already stopped")
    if task.observer is None:
        return Ignore("task carries no observer marks")
    if record is None:
        return StopTask(task.arn, "orphan: no such observer")
    observer = record.observer
    if observer.status is Status.STOPPED and not _may_be_starting(task, observer, now, settings):
        # The record says nothing runs; only this sweep meets it (STOPPED leaves the fleet index).
        return StopTask(task.arn, f"orphan: {observer.name} is STOPPED")
    if observer.task_arn == task.arn:
        return Ignore("current task")
    if (
        observer.desired is Desired.RUNNING
        and observer.status in (Status.STARTING, Status.RUNNING)
        and observer.task_arn is None
        and task.generation == observer.generation
    ):
        return SeeTask(task.arn, task.version, task.last_status)
    if observer.task_arn is not None and task.generation == observer.generation:
        # Its generation already has its task: a second one (a retry that started another) is
        # an orphan however young, or both would run until their own events arrive.
        return StopTask(
            task.arn, f"orphan: generation {task.generation} of {observer.name} runs elsewhere"
        )
    if _may_be_starting(task, observer, now, settings) or (
        _young(task, now, settings) and task.generation == observer.generation
    ):
        return Ignore("young task of the current generation: its starter may still record it")
    return StopTask(task.arn, f"orphan: {observer.name} generation {observer.generation}")


def _young(task: TaskState, now: datetime, settings: Settings) -> bool:
    return task.created_at is not None and now - task.created_at < settings.orphan_grace


def _may_be_starting(
    task: TaskState, observer: Observer, now: datetime, settings: Settings
) -> bool:
    """A young task of a newer generation than the record's: its starter may still record it."""
    return (
        _young(task, now, settings)
        and task.generation is not None
        and task.generation > observer.generation
    )


def hand_over(record: Record, task_definition: str) -> Plan:
    """A rollout's move of one RUNNING observer: STOPPING, then StopTask; its STOPPED event (a
    ``UserInitiated`` stop, exit 0) starts the next generation at once, with no failure counted."""
    arn = record.observer.task_arn
    if record.observer.status is not Status.RUNNING or arn is None:
        return only(Ignore("not running: a rollout moves it at its next start"))
    return Plan(HandOver(task_definition), (StopTask(arn, f"rollout to {task_definition}"),))


def _with_task(observer: Observer, arn: str) -> Observer:
    if observer.task_arn == arn:
        return observer
    return replace(observer, task_arn=arn)


def _toward_stopped(record: Record, evidence: Evidence, now: datetime, settings: Settings) -> Plan:
    observer = record.observer
    status = observer.status
    if status is Status.STOPPED:
        return only(Ignore("stopped as desired"))
    arn = observer.task_arn
    task_may_run = arn is not None and status in (Status.STARTING, Status.RUNNING, Status.STOPPING)
    if not task_may_run:
        # PENDING, FAILED, or STARTING whose RunTask never returned: nothing runs that we know of
        # (a task that does start anyway is an orphan and the sweep stops it).
        return Plan(MarkStopped(observer.last_exit))
    assert arn is not None
    if isinstance(evidence, TaskState) and evidence.stopped:
        return Plan(MarkStopped(evidence.last_exit(now)))
    if status is not Status.STOPPING:
        return Plan(MarkStopping(), (StopTask(arn, "stop requested"),))
    # STOPPING (the API sets it directly): StopTask is idempotent, so ask until ECS confirms.
    if isinstance(evidence, Listed) and not evidence.running:
        return only(Describe(arn))
    return only(StopTask(arn, "stop requested"))


def _toward_running(record: Record, evidence: Evidence, now: datetime, settings: Settings) -> Plan:
    observer = record.observer
    status = observer.status
    if status in (Status.FAILED, Status.STOPPED):
        # Terminal until someone asks again (the API resets status to PENDING on restart).
        return only(Ignore(f"{status.value}: waits for a restart request"))
    if status is Status.STOPPING:
        # Stop requested then withdrawn (a restart): finish the stop, then start afresh. The
        # container sees RUNNING desired again and would not exit by itself, so it is stopped.
        if observer.task_arn is None:
            return Plan(_start(observer, now, settings))
        if isinstance(evidence, TaskState) and evidence.stopped:
            return _restart(record, evidence, now, settings)
        if isinstance(evidence, Listed) and not evidence.running:
            return only(Describe(observer.task_arn))
        return only(StopTask(observer.task_arn, "stopping before a restart"))
    if status is Status.PENDING:
        if (
            observer.next_start_at
            and now < observer.next_start_at
            and not _restart_requested(observer)
        ):
            return only(Ignore("backing off"))
        return Plan(_start(observer, now, settings))
    arn = observer.task_arn
    if _restart_requested(observer):
        replaced = LastExit(
            stop_code="UserInitiated", reason="restart requested", task_arn=arn, at=now
        )
        start = StartTask(
            generation=observer.generation + 1,
            restart=True,
            consecutive_failures=observer.consecutive_failures,
            retry_at=now + settings.run_task_retry_base,
            last_exit=replaced if arn else observer.last_exit,
        )
        return Plan(start, (StopTask(arn, "restart requested"),) if arn else ())
    if status is Status.STARTING and arn is None:
        if observer.next_start_at and now < observer.next_start_at:
            return only(Ignore("RunTask in flight or backing off"))
        return only(RetryStart(observer.generation))
    if arn is None:
        # RUNNING: the container claimed before its starter recorded the ARN (the sweep adopts it).
        deadline = liveness_deadline(record, settings)
        if deadline is not None and now > deadline:
            lost = TaskState(arn="", last_status=MISSING, stopped_reason="no heartbeat")
            return _restart(record, lost, now, settings)
        return only(Ignore("running; its task ARN is not recorded yet"))
    # STARTING with a task, or RUNNING.
    if isinstance(evidence, TaskState):
        if evidence.stopped:
            return _restart(record, evidence, now, settings)
        deadline = liveness_deadline(record, settings)
        if deadline is not None and now > deadline:
            return _restart(record, evidence, now, settings).after(StopTask(arn, "no heartbeat"))
        return only(Ignore("task up, heartbeat fresh"))
    deadline = liveness_deadline(record, settings)
    stale = deadline is not None and now > deadline
    if stale or (isinstance(evidence, Listed) and not evidence.running):
        return only(Describe(arn))
    return only(Ignore("heartbeat fresh"))


def _start(observer: Observer, now: datetime, settings: Settings) -> StartTask:
    """The next generation, with nothing new to record about the previous one."""
    return StartTask(
        generation=observer.generation + 1,
        restart=observer.generation > 0,
        consecutive_failures=observer.consecutive_failures,
        retry_at=now + settings.run_task_retry_base,
        last_exit=observer.last_exit,
    )


def _restart_requested(observer: Observer) -> bool:
    """A restart request (the API's) names the generation it wants replaced."""
    return (
        observer.restart_generation is not None
        and observer.restart_generation >= observer.generation
    )


def _restart(record: Record, task: TaskState, now: datetime, settings: Settings) -> Plan:
    """The current task stopped (or is being stopped for silence): start the next generation."""
    observer = record.observer
    last_exit = task.last_exit(now)
    if task.stopped and not last_exit.crashed:
        # Stopped on purpose (a person, or a clean exit): not a failure, restart at once.
        failures = observer.consecutive_failures
    else:
        if task.stopped and last_exit.exit_code in _NOT_RESTARTED:
            return Plan(
                MarkFailed(
                    _NOT_RESTARTED[ExitCode(last_exit.exit_code)],
                    observer.consecutive_failures + 1,
                    last_exit,
                )
            )
        if not task.stopped:
            last_exit = LastExit(reason="no heartbeat", task_arn=task.arn, at=now)
        failures = _failure_streak(record, last_exit, now, settings, ran_for=task.ran_for)
        if failures >= settings.failure_threshold:
            return Plan(MarkFailed(_failure_reason(failures, last_exit), failures, last_exit))
    delay = backoff_delay(failures, settings) if last_exit.crashed else timedelta(0)
    if delay > timedelta(0):
        return Plan(Backoff(now + delay, failures, last_exit))
    return Plan(
        StartTask(
            generation=observer.generation + 1,
            restart=True,
            consecutive_failures=failures,
            retry_at=now + settings.run_task_retry_base,
            last_exit=last_exit,
        )
    )


_NOT_RESTARTED = {
    ExitCode.BAD_CONFIGURATION: "bad config: the observer exited with code 2",
    ExitCode.UNCERTAIN: (
        "uncertain effect (exit code 4): an earlier generation began the effect the record's "
        "uncertain_effect names and never recorded it done: `vigil observers settle NAME "
        "--effect EFFECT --done` (or `--not-done`) settles it and restarts the observer (a "
        "record that names no uncertain_effect lost that mark: `vigil observers restart NAME`, "
        "and the next generation marks it again)"
    ),
}
"""Exit codes a restart would only repeat: the observer is marked FAILED with the reason."""


def _failure_streak(
    record: Record,
    last_exit: LastExit,
    now: datetime,
    settings: Settings,
    *,
    ran_for: timedelta | None = None,
) -> int:
    """A failure is quick unless the generation claimed and then ran ``healthy_after``.

    A task that never claimed (still STARTING: it cannot reach the registry, its image does not
    pull...) is always a quick failure, so such an observer backs off and ends FAILED. How long
    it ran is ``ran_for`` when one clock measured it, else its end against its start.
    """
    never_claimed = record.observer.status is Status.STARTING
    if ran_for is not None:
        quick = never_claimed or ran_for < settings.healthy_after
    else:
        started = record.tracking.started_at
        ended = last_exit.at or now
        quick = never_claimed or started is None or ended - started < settings.healthy_after
    return record.observer.consecutive_failures + 1 if quick else 1


def _failure_reason(failures: int, last_exit: LastExit) -> str:
    how = last_exit.reason or last_exit.stop_code or "stopped"
    code = f", exit code {last_exit.exit_code}" if last_exit.exit_code is not None else ""
    return f"{failures} consecutive quick failures; last: {how}{code}"
