"""``VigilStack``: the deployed app on a simulated clock, as a test drives it.

Jobs: ``fire`` delivers a job's schedule event as EventBridge Scheduler would (``copies`` for the
duplicate deliveries Scheduler may make, at once), through the deployed function with Lambda's retries and
on-failure destination; ``hold=True`` stops the run after its claim until the test releases it
(:class:`HeldRun`), so a test can make it outlive its lease; ``advance`` moves the clock and every deployed schedule (and the
reconciler's minute resync) fires on the way; ``history``, ``dead_letters`` and ``redrive`` read
and act as the ``vigil jobs`` commands do.

Observers: ``create_observer`` goes through the deployed management API function (as the ``vigil``
CLI does), the registry's stream reaches the reconciler, its tasks get containers running the
observer runtime (:mod:`vigil_tools.testing.fleet`); ``crash`` kills one, ``observer`` reads the
registry.

Tasks: ``enqueue`` goes through ``vigil.tasks``' own enqueue (message first, then the record), with
``copies`` more of the same message at once; the deployed SQS event source mappings deliver what is
due (:mod:`vigil_tools.emulator.queue_mappings`), at once and on every ``advance``, with delays,
visibility timeouts, retries, FIFO groups and the redrive policy; one-time schedules (``at``)
send their message when due. ``task`` reads a task's record, ``dead_letters``/``redrive`` take a
task's name as they take a job's, ``task_events`` shows the completion events.

Every error in a job's own code is kept with its traceback: ``Tick.traceback`` shows it from the
author's first frame, and :meth:`VigilStack.reraise` raises it again so pytest shows it too.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Literal, overload

from vigil.clock import iso, iso_seconds
from vigil.contract.journal import JOURNAL_ATTRIBUTE, Verdict
from vigil.contract.schedule import Schedule as Evaluator
from vigil.contract.tasks import ENVELOPE_KEY, MAX_QUEUE_DELAY_S, REASON_ATTRIBUTE, CatalogField
from vigil.dynamo import from_wire
from vigil.effects.journal import journal_entries
from vigil.events import MalformedEvent
from vigil.jobs.control import RunTerms
from vigil.jobs.events import Trigger, parse_tick
from vigil.jobs.redrive import redrive_job
from vigil.jobs.store import RunStore
from vigil.observers.registry import ObserverNotFound, ObserverRegistry
from vigil_tools.api_client import ApiError, InProcessTransport, ObserversClient
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.author_code import forget_modules
from vigil_tools.emulator.clients import own_client
from vigil_tools.emulator.event_log import captured_events
from vigil_tools.emulator.lambda_runtime import AsyncInvocation, Invocation, LocalLambda
from vigil_tools.emulator.queue_mappings import BatchResult, QueueMapping, deliver_together
from vigil_tools.emulator.queues import peek
from vigil_tools.emulator.rules import scheduled_event, scheduled_rules
from vigil_tools.emulator.scheduler import (
    OneTimeSchedule,
    Schedule,
    deployed_schedules,
    fire_one_time,
    one_time_schedules,
)
from vigil_tools.emulator.template import Synthesized
from vigil_tools.emulator.ttl import TtlSweep
from vigil_tools.jobs_cli import JobsCatalog
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.project import find_project
from vigil_tools.tasks_catalog import tasks_catalog
from vigil_tools.testing.fleet import SteppedFleet
from vigil_tools.testing.hold import Parked
from vigil_tools.testing.interleave import Turns
from vigil_tools.testing.kill import Kill, KillAt, killing
from vigil_tools.testing.names import UnknownName, check
from vigil_tools.testing.tracebacks import format_author, reraise

MAX_STEPS = 100_000


@dataclass(frozen=True)
class Tick:
    """One recorded tick of a job, as ``vigil jobs history`` shows it."""

    tick: str
    scheduled_at: datetime
    status: str
    attempts: int
    fencing_token: int | None
    error_type: str | None
    error_message: str | None
    detail: str | None
    traceback: str | None
    """The author's traceback of the last failed attempt this stack saw, or None."""
    uncertain_effect: str | None = None
    """UNCERTAIN: the ``run.once`` effect an earlier run began and never recorded done."""
    effects: dict[str, Any] = field(default_factory=dict)
    """``run.once``'s journal on the tick's record: effect -> ``{state, fence, at}``."""


class HeldRun:
    """A delivery whose run stopped right after it claimed its tick, before the job's body
    (``fire(job, hold=True)``); its lease runs out while the test moves time on."""

    def __init__(
        self, job: str, claimed: Tick, parked: Parked, done: Callable[[AsyncInvocation], None]
    ) -> None:
        self.job = job
        self.tick = claimed.tick
        self.fencing_token = claimed.fencing_token
        self.attempt = claimed.attempts
        self._parked = parked
        self._done = done

    @property
    def held(self) -> bool:
        return self._parked.parked

    def release(self) -> AsyncInvocation:
        """The run goes on, late: its body runs with its own (old) fencing token, then its
        finish, which a newer run's claim refuses (``FENCED``). The delivery's result."""
        if not self.held:
            raise RuntimeError(f"{self.job} tick {self.tick}: this run was released already")
        result = self._parked.release()
        self._done(result)
        return result


@dataclass(frozen=True)
class DeadLetter:
    """One event in a job's ``FailedRuns`` queue: Lambda's on-failure destination record."""

    scheduled_at: datetime | None
    error_type: str | None
    error_message: str | None
    record: dict[str, Any]
    message_id: str


@dataclass(frozen=True)
class TaskDeadLetter:
    """One message in a task's dead-letter queue."""

    task: str | None
    id: str | None
    """The task and id its envelope names (None: not an envelope, dead-lettered as malformed)."""
    reason: str | None
    """The consumer's ``vigil_reason`` attribute (None: moved by the queue's redrive policy)."""
    body: str
    message_id: str


@dataclass(frozen=True)
class ObserverState:
    """One observer, as the registry holds it."""

    name: str
    kind: str
    status: str
    desired: str
    generation: int
    restarts: int
    checkpoint: dict[str, Any] | None
    config: dict[str, Any]
    last_exit: dict[str, Any] | None
    failure_reason: str | None
    uncertain_effect: str | None = None
    """``ctx.once`` stopped it UNCERTAIN on this effect, until :meth:`VigilStack.settle_observer`."""
    uncertain_reason: str | None = None
    effects: dict[str, Any] = field(default_factory=dict)
    """``ctx.once``'s journal on its record: effect -> ``{state, fence, at}``."""
    next_start_at: str | None = None
    """PENDING waiting out a restart backoff (a quick crash after another): when it may start
    (ISO 8601); the reconciler starts it at its first pass after (the minute's resync), so
    advance a minute past it."""


class VigilStack:
    """The app deployed on the emulator, driven on a simulated clock: what ``vigil_stack`` gives
    a test. Jobs fire on their schedules as time advances (or on demand), tasks run as they are
    enqueued, observers run in their containers; each is read back as the CLI would show it."""

    def __init__(
        self,
        account: LocalAccount,
        *,
        now: Callable[[], datetime],
        move_to: Callable[[datetime], object],
        functions_dir: Any = None,
        log_dir: Path | None = None,
    ) -> None:
        """``log_dir``: where the functions' logs go (default: the console)."""
        # A new test is a new set of containers: the team's modules (a job's helpers too) are
        # imported afresh, so no module state leaks from one test into the next.
        forget_modules(Path(functions_dir) if functions_dir else find_project().functions)
        self.account = account
        self._now = now
        self._move_to = move_to
        self.runtime = LocalLambda(
            account.session,
            now=now,
            advance=lambda delta: move_to(now() + delta),
            functions_dir=functions_dir,
            log_dir=log_dir,
        )
        # What the deployment declares is read once per deployment, not once per test.
        stack = account.deployed.stack_name
        self.catalog = account.once(
            "jobs catalog",
            lambda: JobsCatalog.from_stack(account.session, stack),
        )
        self.fleet = SteppedFleet.of(account, self.runtime, now)
        self._schedules = account.once("schedules", lambda: deployed_schedules(account.session))
        self._rules = account.once("rules", lambda: scheduled_rules(account.session))
        self._anchor = now()
        self._after: dict[str, datetime] = {}
        """Per schedule or rule: occurrences up to here have fired."""
        self._failures: dict[tuple[str, str], BaseException] = {}
        """(job, tick) -> what the job's code raised on its last failed attempt."""
        self._api = ObserversClient(InProcessTransport(self._api_handler))
        self._registry_reader: ObserverRegistry | None = None
        self._held: list[HeldRun] = []
        self._ttl = TtlSweep.of(account.session)
        """Items past their TTL leave the tables on the way, as on AWS."""
        self.tasks_catalog: dict[str, dict[str, Any]] = account.once(
            "tasks catalog",
            lambda: tasks_catalog(account.session, stack),
        )
        """The stack's ``TasksCatalog`` output: per task, its queues, table, function."""
        self._sqs = own_client(account.session, "sqs")
        self._scheduler = own_client(account.session, "scheduler")
        """The emulator's own clients: Lambda's poller's and Scheduler's requests."""
        self._queues = QueueMapping.all_of(account.session, sqs=self._sqs)
        self.batches: list[BatchResult] = []
        """Every batch the SQS event source mappings delivered, in order."""

    # -- deploys ---------------------------------------------------------------------------------

    def redeploy(self, synth: Synthesized) -> None:
        """Deploy ``synth`` (a newer version of the app) over the running stack, as ``cdk deploy``
        does: CloudFormation updates the stack in place, the tables keep their data, running
        tasks and their containers run on (on their old task definitions, with their old
        environment), and the functions run the new configuration from their next invocation.
        The clock does not move."""
        before = {s.name for s in self._schedules} | {r.name for r in self._rules}
        self.account.redeploy(synth)
        session = self.account.session
        stack = self.account.deployed.stack_name
        self.catalog = self.account.once(
            "jobs catalog",
            lambda: JobsCatalog.from_stack(session, stack),
        )
        self.tasks_catalog = self.account.once(
            "tasks catalog", lambda: tasks_catalog(session, stack)
        )
        self.fleet.refresh()
        self._registry_reader = None
        self._schedules = self.account.once("schedules", lambda: deployed_schedules(session))
        self._rules = self.account.once("rules", lambda: scheduled_rules(session))
        # A schedule or rule the deploy created fires from now on, not from the kit's start.
        for name in {s.name for s in self._schedules} | {r.name for r in self._rules}:
            if name not in before:
                self._after[name] = self.now()
        self._queues = QueueMapping.all_of(session, sqs=self._sqs)

    # -- time ------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The simulated clock's time (UTC)."""
        return self._now()

    def advance(
        self,
        *,
        minutes: float = 0,
        seconds: float = 0,
        hours: float = 0,
        days: float = 0,
        tasks_only: bool = False,
    ) -> list[AsyncInvocation]:
        """Move the clock; every schedule, the resync and the containers run on the way.

        ``tasks_only``: only the tasks run on the way (their queues, their one-time schedules:
        a sleeping flow wakes, a wait times out); the jobs' schedules and the observers'
        containers do not, and their occurrences in that span are dropped, not delivered late.
        What a test of a flow sleeping for days uses: the example app's jobs would otherwise run
        every tick of those days (a cleanup every 5 minutes is 864 ticks in three days)."""
        end = self.now() + timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        if end < self.now():
            raise ValueError("advance() moves time forward only")
        return self._advance_to(end, tasks_only=tasks_only)

    def _advance_to(self, end: datetime, *, tasks_only: bool = False) -> list[AsyncInvocation]:
        delivered: list[AsyncInvocation] = []
        for _ in range(MAX_STEPS):
            moment, action = self._next(end, tasks_only=tasks_only)
            if action is None:
                break
            if moment > self.now():
                self._move_to(moment)
            delivered += action()
            if not tasks_only:
                self.fleet.settle()
        else:
            raise RuntimeError(f"advance() did more than {MAX_STEPS} steps")
        if end > self.now():
            self._move_to(end)
        if tasks_only:
            for name in [s.name for s in self._schedules] + [r.name for r in self._rules]:
                self._after[name] = max(self._after.get(name, self._anchor), end)
        else:
            self.fleet.step_due()
            self.fleet.settle()
        self._ttl.due(self.now())
        return delivered

    def _next(
        self, end: datetime, *, tasks_only: bool = False
    ) -> tuple[datetime, Callable[[], list[AsyncInvocation]] | None]:
        best: tuple[datetime, Callable[[], list[AsyncInvocation]] | None] = (end, None)
        if tasks_only:
            return self._next_task(end, best)
        for schedule in self._schedules:
            moment = self._occurrence(schedule.name, schedule.expression, schedule.time_zone, end)
            if moment is not None and (best[1] is None or moment < best[0]):
                best = (moment, self._deliver_schedule(schedule, moment))
        for rule in self._rules:
            moment = self._occurrence(rule.name, rule.expression, "UTC", end)
            if moment is not None and (best[1] is None or moment < best[0]):
                best = (moment, self._deliver_rule(rule.name, rule.arn, rule.targets, moment))
        due = self.fleet.next_due()
        if due is not None and due <= end and (best[1] is None or due < best[0]):
            best = (due, self._step_containers)
        return self._next_task(end, best)

    def _next_task(
        self, end: datetime, best: tuple[datetime, Callable[[], list[AsyncInvocation]] | None]
    ) -> tuple[datetime, Callable[[], list[AsyncInvocation]] | None]:
        """What is due first of the tasks' one-time schedules and queues, if before ``best``."""
        for once in one_time_schedules(self._scheduler, recurring=self._schedules):
            moment = max(once.due_at, self.now())
            if moment <= end and (best[1] is None or moment < best[0]):
                best = (moment, self._fire_one_time(once))
        due = [(m, m.next_due(self.now())) for m in self._queues]
        for mapping, moment_or_none in due:
            if moment_or_none is None or moment_or_none > end:
                continue
            if best[1] is None or moment_or_none < best[0]:
                # The function's other mappings due then too (its priority levels) take turns.
                siblings = [
                    m
                    for m, at in due
                    if m.function == mapping.function and at is not None and at <= moment_or_none
                ]
                best = (moment_or_none, self._deliver_queue(siblings))
        return best

    def _fire_one_time(self, schedule: OneTimeSchedule) -> Callable[[], list[AsyncInvocation]]:
        def fire() -> list[AsyncInvocation]:
            fire_one_time(self._sqs, self._scheduler, schedule)
            return []

        return fire

    def _deliver_queue(self, mappings: list[QueueMapping]) -> Callable[[], list[AsyncInvocation]]:
        """The due batches of one function's mappings, taking turns a poll each
        (:func:`deliver_together`); batches of one poll run at once, interleaved as ``fire``'s
        copies are (so copies of one task meet in the guard as on AWS)."""
        function = mappings[0].function

        def together(batches: Any) -> list[Any]:
            with _quiet():
                if len(batches) == 1:
                    return [batches[0]()]
                with self.runtime.concurrently(function):
                    return Turns().run(batches)

        def deliver() -> list[AsyncInvocation]:
            self.batches += deliver_together(mappings, self.runtime.invoke, self._now, together)
            return []

        return deliver

    def _occurrence(
        self, key: str, expression: str, time_zone: str, end: datetime
    ) -> datetime | None:
        """The first occurrence after the last one fired, up to ``end`` included."""
        after = self._after.get(key, self._anchor)
        evaluator = Evaluator(expression, time_zone)
        anchor = self._anchor if evaluator.needs_anchor else None
        tiny = timedelta(microseconds=1)
        return next(iter(evaluator.between(after + tiny, end + tiny, anchor=anchor)), None)

    def _step_containers(self) -> list[AsyncInvocation]:
        self.fleet.step_due()
        return []

    def _deliver_schedule(
        self, schedule: Schedule, moment: datetime
    ) -> Callable[[], list[AsyncInvocation]]:
        def deliver() -> list[AsyncInvocation]:
            self._after[schedule.name] = moment
            return [
                self._invoke_async(
                    schedule.target_arn, json.loads(schedule.render_input(moment)), moment
                )
            ]

        return deliver

    def _deliver_rule(
        self, name: str, arn: str, targets: tuple[str, ...], moment: datetime
    ) -> Callable[[], list[AsyncInvocation]]:
        def deliver() -> list[AsyncInvocation]:
            self._after[name] = moment
            return [self._invoke_async(t, scheduled_event(arn, moment), moment) for t in targets]

        return deliver

    # -- jobs ------------------------------------------------------------------------------------

    @property
    def jobs(self) -> list[str]:
        """The app's job names, sorted."""
        return sorted(self.catalog.jobs)

    @overload
    def fire(
        self, job: str, at: datetime | None = None, *, copies: int = 1
    ) -> list[AsyncInvocation]: ...

    @overload
    def fire(self, job: str, at: datetime | None = None, *, hold: Literal[True]) -> HeldRun: ...

    def fire(
        self, job: str, at: datetime | None = None, *, copies: int = 1, hold: bool = False
    ) -> list[AsyncInvocation] | HeldRun:
        """Scheduler delivers ``job``'s tick scheduled at ``at`` (default: now), ``copies`` times
        at once: the copies run concurrently, their requests interleaved (:mod:`.interleave`).

        An ``at`` ahead is reached as :meth:`advance` would reach it: time passes, every schedule
        fires its occurrences before ``at`` on time (as on AWS, where they do not wait), then the
        copies are delivered; when ``job``'s own schedule has an occurrence at ``at``, the copies
        are that occurrence, not more deliveries of it. An ``at`` in the past is a late delivery.
        ``at`` must be timezone-aware.

        ``hold=True`` delivers once and stops the run right after its claim, before the body:
        the :class:`HeldRun` goes on when the test calls ``release()`` (:mod:`.hold`).
        """
        if copies < 1:
            raise ValueError("copies must be at least 1")
        if hold and copies != 1:
            raise ValueError("fire(hold=True) holds one delivery: leave copies at 1")
        if at is not None and at.utcoffset() is None:
            raise ValueError(
                f"fire(at={at!r}): give a timezone-aware datetime (e.g. tzinfo=UTC); a naive one "
                "would be read in this machine's local time"
            )
        schedule = self._schedule_of(job)
        moment = (at or self.now()).astimezone(UTC)
        if moment > self.now():
            self._advance_to(moment - timedelta(microseconds=1))
            self._move_to(moment)
            if self._occurrence(schedule.name, schedule.expression, schedule.time_zone, moment):
                self._after[schedule.name] = moment
        events = [json.loads(schedule.render_input(moment, attempt=c + 1)) for c in range(copies)]
        function = schedule.target_arn
        if hold:
            return self._hold(job, function, events[0], moment)
        with _quiet(), self.runtime.concurrently(function):
            results = Turns().run([partial(self.runtime.invoke_async, function, e) for e in events])
        for result in results:
            self._record_failures(function, result, moment)
        self.fleet.settle()
        return results

    def _hold(self, job: str, function: str, event: Any, moment: datetime) -> HeldRun:
        def deliver() -> AsyncInvocation:
            with _quiet():
                return self.runtime.invoke_async(function, event)

        parked = Parked(deliver)
        parked.start()
        key = _tick_key(moment)
        claimed = next((t for t in self.history(job) if t.tick == key), None)
        if claimed is None or claimed.status != "RUNNING" or not parked.parked:
            result = parked.release()
            self._record_failures(function, result, moment)
            last = result.attempts[-1] if result.attempts else None
            answer = (last.payload or {}).get("outcome") if last and last.ok else None
            raise RuntimeError(
                f"fire({job!r}, hold=True): the delivery of {key} did not claim the tick (it "
                f"answered {answer or (last.error_type if last else None)}), so no run is held"
            )
        held = HeldRun(
            job, claimed, parked, lambda result: self._record_failures(function, result, moment)
        )
        self._held.append(held)
        return held

    def run(self, job: str, at: str | datetime) -> AsyncInvocation:
        """What ``vigil jobs run JOB --at TICK`` does: the tick delivered again as an operator's
        rerun (its event as the jobs API sends it), through the guard: it claims a FAILED,
        MISSED, SKIPPED or PAUSED tick (or one whose run's lease ran out) and runs it; any other
        is a DUPLICATE."""
        spec = self.catalog.job(check("job", job, self.catalog.jobs))
        moment = datetime.fromisoformat(_tick_key(at).replace("Z", "+00:00"))
        terms = RunTerms(job, moment, Trigger.AT, requested_by="vigil_stack", overlap=None)
        return self._invoke_async(spec["function"], terms.event(), moment)

    def settle_job(
        self, job: str, tick: str | datetime, effect: str, outcome: Verdict | str
    ) -> Tick:
        """``vigil jobs settle JOB TICK --effect E --done|--done-rerun|--not-done`` (``outcome``
        ``"done"``, ``"done_rerun"`` or ``"not_done"``): the tick's record as it is after; a
        tick that is not UNCERTAIN on ``effect`` raises ``NotSettleable`` (nothing changed).
        ``done_rerun`` and ``not_done`` leave it FAILED, for :meth:`run` to run again."""
        check("job", job, self.catalog.jobs)
        key = _tick_key(tick)
        store = RunStore(self.account.session.client("dynamodb"), self.catalog.runs_table)
        store.settle(job, key, effect, verdict=_verdict(outcome), now=self.now())
        return next(t for t in self.history(job) if t.tick == key)

    def settle_task(self, task: str, task_id: str, effect: str, outcome: Verdict | str) -> Any:
        """``vigil tasks settle TASK ID --effect E --done|--done-rerun|--not-done``: the task's
        record as it is after (``done_rerun`` and ``not_done`` leave it FAILED, for
        :meth:`redrive` to run it again from its dead-letter queue)."""
        from vigil.tasks.store import TaskStore

        spec = self.tasks_catalog[check("task", task, self.tasks_catalog)]
        store = TaskStore(self.account.session.client("dynamodb"), spec[CatalogField.TABLE])
        return store.settle(task, task_id, effect, verdict=_verdict(outcome), now=self.now())

    def kill(self, at: KillAt) -> AbstractContextManager[Kill]:
        """``with vigil_stack.kill(KillAt("SendMessage")) as kill:``: the first invocation that
        makes that request dies there, after AWS applied it (or before it left: ``applied=
        False``), as a killed process does: nothing more of it runs or reaches AWS, Lambda
        retries it (:mod:`.kill`). ``kill.fired`` says whether it happened."""
        return killing(at)

    def close(self) -> None:
        """The end of a test: runs still held are let go, so no thread waits for ever."""
        for held in self._held:
            if held.held:
                held.release()

    def table(self, name: str) -> str:
        """The deployed name of the app's own DynamoDB table ``name`` (its construct id, the alias
        ``writes=[...]`` grants it under): to seed it, and to read what the runs wrote there."""
        prefix = f"{self.account.deployed.stack_name}/"
        tables = {
            str(resource["Metadata"]["aws:cdk:path"])[len(prefix) :].split("/")[0]: logical_id
            for logical_id, resource in self.account.synth.resources("AWS::DynamoDB::Table").items()
            if str(resource.get("Metadata", {}).get("aws:cdk:path", "")).count("/") == 2
        }
        return self.account.physical_id(tables[check("table", name, tables)])

    def history(self, job: str) -> list[Tick]:
        """The job's recorded ticks, newest first."""
        check("job", job, self.catalog.jobs)
        store = RunStore(self.account.session.client("dynamodb"), self.catalog.runs_table)
        ticks = []
        for record in store.history(job, limit=1000):
            failure = self._failures.get((job, record.tick))
            ticks.append(
                Tick(
                    tick=record.tick,
                    scheduled_at=datetime.fromisoformat(record.tick.replace("Z", "+00:00")),
                    status=record.status.value,
                    attempts=record.attempts,
                    fencing_token=record.fencing_token,
                    error_type=record.error_type,
                    error_message=record.error_message,
                    detail=record.detail,
                    traceback=format_author(failure) if failure else None,
                    uncertain_effect=record.uncertain_effect,
                    effects=dict(record.effects or {}),
                )
            )
        return ticks

    def reraise(self, job: str, tick: str | datetime | None = None) -> None:
        """Raise again what the job's code raised on its last failure (of ``tick``, if given),
        showing the author's traceback. Does nothing when it never failed."""
        __tracebackhide__ = True
        check("job", job, self.catalog.jobs)
        key = _tick_key(tick) if tick is not None else None
        for (name, failed_tick), error in reversed(list(self._failures.items())):
            if name == job and key in (None, failed_tick):
                reraise(error)

    def dead_letters(self, job: str) -> list[Any]:
        """The events in the job's dead-letter queue (or, given a task's name, the messages in
        the task's), all of them, left there (read without receiving: ReceiveMessage answers at
        most ten, and hides or counts what it answers): :class:`DeadLetter` for a job,
        :class:`TaskDeadLetter` for a task."""
        if job in self.tasks_catalog and job not in self.catalog.jobs:
            return self._task_dead_letters(job)
        queue = self.catalog.job(self._job_or_task(job))["failed_runs"]
        return [_dead_letter(message) for message in peek(self.account.session, queue)]

    def redrive(self, job: str) -> Any:
        """What ``vigil jobs redrive`` does: every dead-lettered event back to the function (a
        ``skip`` job's one at a time, oldest first, and what fails again stays in the queue). Given
        a task's name, every dead-lettered task back to its queue, marked ``redriven``, and
        what is due then runs (``vigil.tasks.redrive.Redrive``: ``moved`` ids, ``kept``)."""
        if job in self.tasks_catalog and job not in self.catalog.jobs:
            return self._redrive_task(job)
        spec = self.catalog.job(self._job_or_task(job))
        done = redrive_job(
            self.account.session.client("sqs"),
            spec,
            send=lambda event: self._invoke_async(spec["function"], event, _scheduled_at(event)),
            call=lambda event: self._invoke(spec["function"], event, _scheduled_at(event)),
        )
        self.fleet.settle()
        return [item.result for item in done]

    def _job_or_task(self, name: str) -> str:
        """A job's name, or the error naming the jobs and tasks there are."""
        if name in self.catalog.jobs:
            return name
        if self.tasks_catalog:
            raise UnknownName("job or task", name, [*self.catalog.jobs, *self.tasks_catalog])
        raise UnknownName("job", name, self.catalog.jobs)

    def _schedule_of(self, job: str) -> Schedule:
        function = self.catalog.job(check("job", job, self.catalog.jobs))["function"]
        for schedule in self._schedules:
            if schedule.target_arn.rsplit(":", 1)[-1] == function:
                return schedule
        raise LookupError(f"job {job!r} has no deployed schedule")

    def _invoke_async(self, function: str, event: Any, moment: datetime | None) -> AsyncInvocation:
        with _quiet():
            result = self.runtime.invoke_async(function, event)
        self._record_failures(function, result, moment)
        return result

    def _invoke(self, function: str, event: Any, moment: datetime | None) -> Invocation:
        """A synchronous invocation (a redrive of a ``skip`` job waits for each tick's)."""
        with _quiet():
            result = self.runtime.invoke(function, event)
        self._record_failures(function, AsyncInvocation.answered(function, result), moment)
        return result

    def _record_failures(
        self, function: str, result: AsyncInvocation, moment: datetime | None
    ) -> None:
        job = self._job_of(function)
        if job is not None and moment is not None:
            for attempt in result.attempts:
                if attempt.exception is not None:
                    self._failures[(job, _tick_key(moment))] = attempt.exception

    def _job_of(self, function: str) -> str | None:
        name = function.rsplit(":", 1)[-1]
        return next((j for j, spec in self.catalog.jobs.items() if spec["function"] == name), None)

    # -- tasks ---------------------------------------------------------------------------------

    @property
    def tasks(self) -> list[str]:
        """The app's task names, sorted."""
        return sorted(self.tasks_catalog)

    def enqueue(
        self,
        task: str,
        payload: dict[str, Any],
        key: str | None = None,
        copies: int = 1,
        delay: timedelta | float | None = None,
        *,
        group: str | None = None,
        deliver: bool = True,
        priority: str | None = None,
    ) -> str:
        """Enqueue ``task`` as an application does (``vigil.tasks.enqueue``); its id.

        ``copies`` puts more of the very same message on the queue at once (SQS delivers at
        least once; a FIFO queue drops the copies as duplicates within 5 minutes, as on AWS).
        ``group``: an ordered task's group; ``priority``: one of its declared levels. ``deliver`` (default) then runs what is due now, as ``advance`` would: a task without
        a delay runs before this returns; a delayed one waits for ``advance``. A delay beyond
        SQS's 15 minutes is a one-time schedule, which delivers once: no copies with it.
        """
        check("task", task, self.tasks_catalog)
        if copies < 1:
            raise ValueError("copies must be at least 1")
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else (delay or 0)
        if copies > 1 and seconds > MAX_QUEUE_DELAY_S:
            raise ValueError(
                f"enqueue(copies={copies}, delay={seconds:g} s): a start beyond "
                f"{MAX_QUEUE_DELAY_S} s is a one-time schedule, which delivers once"
            )
        client = self._task_client
        task_id = str(
            client.enqueue(task, payload, key=key, delay=delay, group=group, priority=priority)
        )
        if copies > 1:
            self._send_copies(task, task_id, copies - 1, delay_s=int(-(-seconds // 1)))
        if deliver:
            self._advance_to(self.now())
        return task_id

    def _send_copies(self, task: str, task_id: str, extra: int, delay_s: int) -> None:
        queue = self.tasks_catalog[task][CatalogField.QUEUE_URL]
        sent = [
            m for m in peek(self.account.session, queue) if _names(m["Body"]) == (task, task_id)
        ]
        if not sent:
            raise RuntimeError(
                f"enqueue({task!r}, key={task_id!r}): its message is not on the queue"
            )
        message = sent[-1]
        copy: dict[str, Any] = {"QueueUrl": queue, "MessageBody": message["Body"]}
        for attribute in ("MessageGroupId", "MessageDeduplicationId"):
            if attribute in message:
                copy[attribute] = message[attribute]
        if delay_s and "MessageGroupId" not in message:
            copy["DelaySeconds"] = delay_s
        sqs = self.account.session.client("sqs")
        for _ in range(extra):
            sqs.send_message(**copy)

    def task(self, task: str, task_id: str) -> Any:
        """The task's record (``vigil tasks get``): ``vigil.tasks``' ``TaskRecord``, with
        ``status``, ``attempts``, ``result``, ``error_type``, ``error_message``, its times and
        progress. ``TaskNotFound`` (a LookupError) when there is none."""
        return self._task_client.get(check("task", task, self.tasks_catalog), task_id)

    def signal(
        self, task: str, task_id: str, name: str, payload: Any, *, key: str | None = None
    ) -> Any:
        """``vigil tasks signal``: ``name`` with ``payload`` to the flow ``task_id``
        (``vigil.tasks``' ``signal``), then what is due runs, as :meth:`enqueue` does: a flow
        WAITING on ``name`` resumes before this returns. The same ``key`` (default: the payload's
        digest) again counts once; a finished or unknown flow is refused with nothing written."""
        check("task", task, self.tasks_catalog)
        sent = self._task_client.signal(task, task_id, name, payload, key=key)
        self._advance_to(self.now())
        return sent

    def steps(self, task: str, task_id: str) -> list[dict[str, Any]]:
        """A flow's step timeline as ``vigil tasks get`` shows it: one row per step, sleep or
        wait in the order the body first reached them (``name``, ``kind``, ``status``,
        ``attempts``, ``until``...); empty for a plain task or a flow not started yet."""
        return list(self.task(task, task_id).steps or [])

    @cached_property
    def _task_client(self) -> Any:
        """``vigil.tasks``' client on this stack's catalog and the simulated clock (one for the
        stack's life: a test reads its tasks often, and three new clients cost more)."""
        # (until the tasks runtime is merged, mypy finds no typed vigil.tasks on this branch)
        from vigil.tasks.catalog import Catalog  # type: ignore[import-untyped, unused-ignore]
        from vigil.tasks.enqueue import TaskClient  # type: ignore[import-untyped, unused-ignore]

        session = self.account.session
        return TaskClient(
            Catalog.parse(json.dumps(self.tasks_catalog)),
            sqs=session.client("sqs"),
            dynamodb=session.client("dynamodb"),
            scheduler=session.client("scheduler"),
            s3=session.client("s3"),
            clock=self._now,
            # a wait's pause moves the stack on: its tasks run while the test waits for them
            sleep=self._pause,
        )

    def _pause(self, seconds: float) -> None:
        self._advance_to(self.now() + timedelta(seconds=seconds))

    @property
    def task_client(self) -> Any:
        """``vigil.tasks``' client as an application holds it (``enqueue``, ``get``, ``wait``,
        ``cancel``), on this stack: ``wait``'s pauses advance the simulated clock, so what it
        waits for runs. Unlike :meth:`enqueue`, its ``enqueue`` delivers nothing by itself."""
        return self._task_client

    def task_events(self, task: str | None = None) -> list[dict[str, Any]]:
        """The completion events put on the default bus (source ``vigil``), oldest first; only
        ``task``'s when given."""
        if task is not None:
            check("task", task, self.tasks_catalog)
        return [
            event
            for event in captured_events(self.account.session)
            if task is None or (event.get("detail") or {}).get("task") == task
        ]

    def _task_dead_letters(self, task: str) -> list[TaskDeadLetter]:
        return task_dead_letters(
            self.account.session, self.tasks_catalog[task][CatalogField.DEAD_LETTER_URL]
        )

    def _redrive_task(self, task: str) -> Any:
        """``vigil tasks redrive``: ``vigil.tasks``' redrive, then what is due runs."""
        from vigil.tasks.queues import TaskQueue  # type: ignore[import-untyped, unused-ignore]
        from vigil.tasks.redrive import redrive as redrive_task  # type: ignore[import-untyped, unused-ignore]

        spec = self.tasks_catalog[task]
        sqs = self.account.session.client("sqs")
        queue = TaskQueue(
            sqs,
            spec[CatalogField.QUEUE_URL],
            spec[CatalogField.DEAD_LETTER_URL],
            spec.get(CatalogField.PRIORITY_QUEUE_URLS),
        )
        done = redrive_task(sqs, queue, task=task)
        self._advance_to(self.now())
        return done

    # -- observers -------------------------------------------------------------------------------

    @property
    def kinds(self) -> list[str]:
        """``vigil observers kinds``: the observer kinds the fleet runs."""
        return self._api.kinds()

    def hosts(self, kind: str | None = None) -> list[dict[str, Any]]:
        """``vigil hosts list``: the pooled kinds' hosts as ``GET /hosts`` answers."""
        return self._api.hosts(kind)

    def observers(self) -> list[dict[str, Any]]:
        """``vigil observers list``: every observer as ``GET /observers`` answers (with its host)."""
        return self._api.list()

    def migration(self) -> dict[str, Any]:
        """``vigil observers migrate``: where an upgrade from a registry keyed by name stands
        (``GET /migration``: copied yet, and which observers still write the old table)."""
        return self._api.migration()

    def create_observer(
        self, name: str, kind: str, config: dict[str, Any] | None = None
    ) -> ObserverState:
        """``vigil observers create``: the API writes the registry, the reconciler starts it."""
        check("kind", kind, self.kinds)
        self._api.create(name, kind, config or {})
        self.fleet.settle()
        return self.observer(name)

    def stop_observer(self, name: str) -> ObserverState:
        """``vigil observers stop``: its task is stopped, it ends STOPPED. A pooled observer's
        host stops its child and reports it at its next heartbeat: the clock moves on to that
        report (a few seconds, at most a minute), so it is STOPPED here too."""
        self._known_observer(name)
        self._api.stop(name)
        self.fleet.settle()
        self._until_reported(name, "STOPPED", "FAILED")
        return self.observer(name)

    def restart_observer(self, name: str) -> ObserverState:
        """``vigil observers restart``: a new generation replaces its task (re-arms FAILED or
        STOPPED too)."""
        self._known_observer(name)
        self._api.restart(name)
        self.fleet.settle()
        return self.observer(name)

    def settle_observer(self, name: str, effect: str, outcome: Verdict | str) -> ObserverState:
        """``vigil observers settle NAME --effect E --done|--done-rerun|--not-done`` (``outcome``
        ``"done"``, ``"done_rerun"`` or ``"not_done"``): the journal takes the verdict and the
        reconciler starts the next generation (a refusal raises the API's ``ApiError``,
        ``not_settleable``)."""
        self._known_observer(name)
        self._api.settle(name, effect, verdict=_verdict(outcome))
        self.fleet.settle()
        return self.observer(name)

    def crash(self, name: str) -> ObserverState:
        """The observer's process dies (exit 1) and is replaced: its own container, which ECS
        reports to the reconciler; or for a pooled kind its child process on the host, which the
        host reports at its next heartbeats (the host and its other observers run on; the clock
        moves on to those reports, a few seconds). RUNNING again either way after a crash the
        reconciler restarts at once (the first); a quick crash after another waits out its
        restart backoff (30 s, doubling): PENDING then, ``next_start_at`` saying when, and
        RUNNING after the reconciler's first pass past it (advance a minute past it); FAILED
        once its restarts are spent."""
        arn = self._known_observer(name).task_arn
        if arn is None:
            raise RuntimeError(f"observer {name!r} has no task to crash")
        self.fleet.crash(arn, observer=name)
        self.fleet.settle()
        self._until_reported(name, "RUNNING", "FAILED", backoff=True)
        return self.observer(name)

    def _until_reported(self, name: str, *statuses: str, backoff: bool = False) -> None:
        """A pooled observer's host reports what happened to its child (and starts the next)
        at its heartbeats, not at once as ECS does for a task: the clock moves on, a second at a
        time and at most a minute, until the registry says one of ``statuses`` (or, with
        ``backoff``, PENDING until a restart backoff ends: the report is in, and the restart is
        the test's to advance to)."""
        if self._known_observer(name).host is None:
            return
        end = self.now() + timedelta(minutes=1)
        while self.now() < end:
            observer = self._known_observer(name)
            if observer.status.value in statuses:
                return
            waiting = observer.next_start_at is not None and observer.next_start_at > self.now()
            if backoff and observer.status.value == "PENDING" and waiting:
                return
            self.advance(seconds=1)

    def observer(self, name: str) -> ObserverState:
        """One observer as the registry holds it now (an unknown name raises ``UnknownName``)."""
        observer = self._known_observer(name)
        return ObserverState(
            name=observer.name,
            kind=observer.kind,
            status=observer.status.value,
            desired=observer.desired.value,
            generation=observer.generation,
            restarts=observer.restarts,
            checkpoint=observer.checkpoint,
            config=observer.config,
            last_exit=observer.last_exit.to_json() if observer.last_exit else None,
            failure_reason=observer.failure_reason,
            next_start_at=iso(observer.next_start_at) if observer.next_start_at else None,
            uncertain_effect=observer.uncertain_effect,
            uncertain_reason=observer.uncertain_reason,
            effects=self._journal(name),
        )

    def _journal(self, name: str) -> dict[str, Any]:
        item = self.account.session.client("dynamodb").get_item(
            TableName=self.fleet.fleet.registry_table,
            Key=self._registry().key(name),
            ProjectionExpression="#e",
            ExpressionAttributeNames={"#e": JOURNAL_ATTRIBUTE},
        )
        return journal_entries(from_wire(item.get("Item")))

    def _registry(self) -> ObserverRegistry:
        """The registry as the deployment names it, read through one client (a test reads its
        observers often; a client costs more than the reads); made again after a redeploy."""
        if self._registry_reader is None:
            client = self.account.session.client("dynamodb")
            self._registry_reader = ObserverRegistry(client, self.fleet.fleet.registry)
        return self._registry_reader

    def observer_logs(self, name: str) -> str:
        """What the observer's containers wrote (JSON lines), every generation, oldest first."""
        self._known_observer(name)
        containers = sorted(
            (c for c in self.fleet.containers.values() if c.name == name),
            key=lambda c: c.generation,
        )
        return "".join(self.fleet.logs[c.task_arn].getvalue() for c in containers)

    def _known_observer(self, name: str) -> Any:
        try:
            return self._registry().get(name)
        except ObserverNotFound:
            names = [o["name"] for o in self._api.list()]
            raise UnknownName("observer", name, names) from None

    def _api_handler(self, event: dict[str, Any], _context: LambdaContext) -> dict[str, Any]:
        result = self.fleet.invoke(self.fleet.fleet.api_function, event)
        if not result.ok:
            assert result.exception is not None
            raise result.exception
        return dict(result.payload)


@contextmanager
def _quiet() -> Iterator[None]:
    """Powertools warns when an invocation emitted no metric: not news in a test. Nor is its
    warning that a run's ``job`` dimension was set twice: runs that overlap here (copies, a held
    run) share one Metrics object, where on AWS each has its own container."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        warnings.filterwarnings("ignore", message="Dimension 'job' has already been added")
        yield


def task_dead_letters(session: Any, queue: str) -> list[TaskDeadLetter]:
    """The messages in a task's dead-letter queue ``queue``, with the consumer's reason (read
    without receiving them: the kit and the demo look, an operator's redrive moves them)."""
    letters = []
    for message in peek(session, queue):
        named = _names(message["Body"])
        reason = (message.get("MessageAttributes") or {}).get(REASON_ATTRIBUTE) or {}
        letters.append(
            TaskDeadLetter(
                task=named[0] if named else None,
                id=named[1] if named else None,
                reason=reason.get("StringValue"),
                body=message["Body"],
                message_id=message["MessageId"],
            )
        )
    return letters


def _names(body: str) -> tuple[str, str] | None:
    """The task and id a message's envelope names; None when it is not an envelope."""
    try:
        envelope = json.loads(body)[ENVELOPE_KEY]
        return str(envelope["task"]), str(envelope["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _verdict(outcome: Verdict | str) -> Verdict:
    try:
        return Verdict(outcome)
    except ValueError:
        raise ValueError(
            f"outcome {outcome!r}: one of {', '.join(repr(v.value) for v in Verdict)}"
        ) from None


def _tick_key(moment: str | datetime) -> str:
    if isinstance(moment, str):
        return moment
    return iso_seconds(moment)


def _dead_letter(message: dict[str, Any]) -> DeadLetter:
    record = json.loads(message["Body"])
    answer = record.get("responsePayload") or {}
    return DeadLetter(
        scheduled_at=_scheduled_at(record),
        error_type=answer.get("errorType"),
        error_message=answer.get("errorMessage"),
        record=record,
        message_id=message["MessageId"],
    )


def _scheduled_at(event: Any) -> datetime | None:
    """The tick an event (or a destination record holding one) is for; None if it has none."""
    try:
        return parse_tick(event).scheduled_at
    except MalformedEvent:
        return None


__all__ = [
    "ApiError",
    "DeadLetter",
    "HeldRun",
    "Kill",
    "KillAt",
    "ObserverState",
    "TaskDeadLetter",
    "Tick",
    "VigilStack",
]
