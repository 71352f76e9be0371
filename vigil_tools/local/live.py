"""The live loop of ``vigil local up``: schedules, stream, ECS, reloads and the terminal view.

Time is real, or ``--speed`` times faster for the schedules: a schedule's occurrences are computed
on a clock that runs ``speed`` times as fast from the start, and each is delivered (with the
simulated scheduled time) when that clock reaches it; the reconciler's minute resync likewise.
The functions and containers themselves read the real clock, so leases and heartbeats keep their
real meaning. Lambda's asynchronous retries wait their delays divided by ``speed``. The tasks'
queues run on the real clock too (:class:`TaskQueues`): SQS's delays and visibility timeouts are
moto's, which reads it, and a one-time schedule's time is the one ``enqueue`` computed from it.

Functions run in this process (moto would need Docker), one invocation at a time, each with its
deployed environment; deliveries wait on a small thread pool so a retry's delay blocks nothing,
and every delay waits on the stop event, so Ctrl-C never waits one out.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.contract.schedule import Schedule as Evaluator
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.clients import own_client
from vigil_tools.emulator.lambda_runtime import Invocation, LocalLambda
from vigil_tools.emulator.moto_memory import StreamTrim
from vigil_tools.emulator.queue_mappings import (
    BatchResult,
    QueueMapping,
    by_function,
    deliver_together,
)
from vigil_tools.emulator.rules import scheduled_event, scheduled_rules
from vigil_tools.emulator.scheduler import deployed_schedules, fire_one_time, one_time_schedules
from vigil_tools.emulator.streams import StreamMappings
from vigil_tools.emulator.ttl import TtlSweep
from vigil_tools.local.reload import CodeWatcher

TTL_SWEEP_REAL_SECONDS = 5.0
"""The expired items' sweep runs at most this often in real time (and at least once a simulated
minute): at ``--speed 120`` a sweep a simulated minute would scan every table twice a second,
about a quarter of an idle stack's CPU. AWS deletes within days, usually minutes: a sweep every
few simulated minutes is as faithful."""


def ttl_sweep_interval(speed: float) -> timedelta:
    """Simulated time between two sweeps of expired items at ``speed``."""
    return max(timedelta(minutes=1), timedelta(seconds=TTL_SWEEP_REAL_SECONDS * speed))


class Stopping(Exception):
    """``vigil local up`` is stopping: a delivery waiting out a retry delay gives up."""


class Deliveries:
    """The threads deliveries run on, and the one stop event every wait of theirs uses.

    A retry delay waits on ``stop`` (the event Ctrl-C sets), so stopping interrupts it at once:
    :meth:`close` then returns when the invocations already running have ended, not after the
    delays still pending.
    """

    def __init__(self, stop: threading.Event, *, speed: float, workers: int = 4) -> None:
        self.stop = stop
        self.speed = speed
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delivery")

    def delay(self, delta: timedelta) -> None:
        """Lambda's wait before the next asynchronous attempt (divided by ``speed``)."""
        if self.stop.wait(delta.total_seconds() / self.speed):
            raise Stopping()

    def submit(self, run: Callable[[], object]) -> None:
        self._pool.submit(run)

    def close(self) -> None:
        self.stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


class SerialLambda(LocalLambda):
    """LocalLambda whose invocations run one at a time (each sets the process's environment)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._one_at_a_time = threading.RLock()

    def invoke(self, function: str, event: Any, request_id: str | None = None) -> Invocation:
        with self._one_at_a_time, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            return super().invoke(function, event, request_id)

    def forget_handlers(self, also: Callable[[], None]) -> None:
        """The next invocation of each function imports its handler anew (after a code change);
        ``also`` runs in the same pause between invocations (it drops the team's modules)."""
        with self._one_at_a_time:
            self._handlers.clear()
            also()


@dataclass
class SimulatedClock:
    """Real time, ``speed`` times as fast, from ``start``."""

    speed: float
    start: datetime = field(default_factory=lambda: datetime.now(UTC))
    _began: float = field(default_factory=time.monotonic)

    def __call__(self) -> datetime:
        return self.start + timedelta(seconds=self.elapsed() * self.speed)

    def elapsed(self) -> float:
        """Real seconds since the start."""
        return time.monotonic() - self._began


@dataclass
class Timer:
    """One schedule or rule: delivers each occurrence once the simulated clock passes it."""

    key: str
    expression: str
    time_zone: str
    fire: Callable[[datetime], None]
    after: datetime

    def due(self, now: datetime, anchor: datetime) -> None:
        evaluator = Evaluator(self.expression, self.time_zone)
        tiny = timedelta(microseconds=1)
        for moment in evaluator.between(
            self.after + tiny, now + tiny, anchor=anchor if evaluator.needs_anchor else None
        ):
            self.fire(moment)
        self.after = max(self.after, now)


@dataclass
class TaskQueues:
    """The SQS event source mappings and the one-time schedules that feed their queues, on the
    real clock: each :meth:`due` sends what a one-time schedule has due, then polls every queue
    until it gives nothing more, a function's queues (its priority levels) in turn, a poll each
    (the functions run in-process, one invocation at a time)."""

    mappings: list[QueueMapping]
    invoke: Callable[[str, Any], Invocation]
    sqs: Any
    scheduler: Any
    """The emulator's own clients (Lambda's poller's and Scheduler's requests)."""
    last: dict[str, str] = field(default_factory=dict)
    """The latest batch's outcome per function name, for the view."""

    @classmethod
    def of(
        cls, session: Any, invoke: Callable[[str, Any], Invocation], last: dict[str, str]
    ) -> TaskQueues:
        sqs = own_client(session, "sqs")
        mappings = QueueMapping.all_of(session, sqs=sqs)
        return cls(mappings, invoke, sqs, own_client(session, "scheduler"), last)

    def due(self, clock: Callable[[], datetime]) -> list[BatchResult]:
        for schedule in one_time_schedules(self.scheduler):
            if schedule.due_at <= clock():
                fire_one_time(self.sqs, self.scheduler, schedule)
        delivered: list[BatchResult] = []
        for mappings in by_function(self.mappings):
            for batch in deliver_together(mappings, self.invoke, clock):
                delivered.append(batch)
                self.last[batch.function] = (
                    "ok"
                    if not batch.failed
                    else batch.reason or f"{len(batch.failed)} of {len(batch.message_ids)} failed"
                )
        return delivered


def _real_now() -> datetime:
    return datetime.now(UTC)


class Live:
    """Everything that moves while ``vigil local up`` runs; :meth:`tick` does one round."""

    def __init__(
        self,
        account: LocalAccount,
        runtime: SerialLambda,
        *,
        reconciler: str,
        clock: SimulatedClock,
        deliveries: Deliveries,
        functions: Path,
        out: Callable[[str], None],
        exclusive: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.account = account
        self.runtime = runtime
        self.clock = clock
        self.out = out
        self.deliveries = deliveries
        self.stream = StreamMappings.of(account.session, reconciler)
        self.reconciler = reconciler
        self.watcher = CodeWatcher(functions)
        self.last: dict[str, str] = {}
        """The latest outcome per function name, for the view."""
        start = clock()
        self.timers = [
            Timer(s.name, s.expression, s.time_zone, self._scheduler(s), start)
            for s in deployed_schedules(account.session)
        ] + [
            Timer(r.name, r.expression, "UTC", self._rule(r.arn, r.targets), start)
            for r in scheduled_rules(account.session)
        ]
        self._anchor = start
        self.ttl = TtlSweep.of(account.session, every=ttl_sweep_interval(clock.speed))
        """Items past their TTL leave the tables, as on AWS (moto never expires them)."""
        self.trim = StreamTrim.of(account.session)
        """Stream records and iterators AWS would no longer hold, or no reader needs, leave."""
        self.exclusive = exclusive
        self.tasks = TaskQueues.of(account.session, runtime.invoke, self.last)
        """The tasks' queues, delivered to their functions on the real clock."""

    def tick(self) -> None:
        now = self.clock()
        for timer in self.timers:
            timer.due(now, self._anchor)
        self.stream.deliver(self.runtime.invoke)
        self.tasks.due(_real_now)
        self.ttl.due(now)
        with self.exclusive():  # moto's state, changed between the endpoint's requests
            self.trim.due(now, self.stream.passed())
        for function, event in self._take_pending():
            self._deliver(function, event)
        changed = self.watcher.changed()
        if changed:
            self.runtime.forget_handlers(self.watcher.forget_modules)
            self.out(f"reloaded: {', '.join(changed)} (next invocations and new containers)")

    def close(self) -> None:
        self.deliveries.close()

    def task_event(self, event: dict[str, Any]) -> None:
        self.runtime.invoke(self.reconciler, event)

    def _scheduler(self, schedule: Any) -> Callable[[datetime], None]:
        def fire(moment: datetime) -> None:
            self._deliver(schedule.target_arn, json.loads(schedule.render_input(moment)))

        return fire

    def _rule(self, arn: str, targets: tuple[str, ...]) -> Callable[[datetime], None]:
        def fire(moment: datetime) -> None:
            for target in targets:
                self._deliver(target, scheduled_event(arn, moment))

        return fire

    def _deliver(self, function: str, event: Any) -> None:
        def run() -> None:
            try:
                result = self.runtime.invoke_async(function, event)
            except Stopping:
                return
            except Exception as error:  # the loop must go on; say what broke
                print(f"delivery to {function} failed: {error}", file=sys.stderr)
                return
            last = result.attempts[-1]
            self.last[function.rsplit(":", 1)[-1]] = (
                "ok" if last.ok else f"{last.error_type}: {last.error_message}"
            )

        self.deliveries.submit(run)

    def _take_pending(self) -> list[tuple[str, Any]]:
        taken, self.runtime.pending[:] = list(self.runtime.pending), []
        return taken
