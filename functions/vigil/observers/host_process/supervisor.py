"""The host's loop: heartbeat twice per interval, run what is assigned, report what exits.

A step (:meth:`HostSupervisor.tick`) is driven with the monotonic time: tests call it directly
with the times they choose; :meth:`HostSupervisor.run` calls it whenever a child exits, a call
ends, a signal arrives or the next deadline (heartbeat, stop timeout, the lease, a call's) is due.
A step never waits on the network: heartbeats and exit reports are calls that run beside the loop
(:mod:`.calls`), each with a deadline, and a step looks at them as it looks at its children::

    reap exited children              kill children past their stop deadline
    a beat that ended: lease renewed (answer: assigned), or refused -> fence
    heartbeat due and none in flight: start one
    lease run out? -> fence           plan(assigned) -> stop / start children
    a report that ended: settled, or pending again; start the next pending one

Exit reports must land (:mod:`.exit_reports`): each stays pending until it does, is refused (the
observer moved on) or the host is fenced; a host shutting down does not exit while one is
pending. They go one at a time beside the heartbeat, so they never delay it or the lease's check.

The lease: every accepted heartbeat lets the children work for one heartbeat interval from the
moment the host sent it (the accepted attempt's send, read before the request leaves). The host
beats twice per interval (so one lost beat, and the retries :func:`~vigil.persist.persist` makes
inside the other half, cost nothing), and once the lease runs out without another accepted beat it
fences every child (SIGUSR1) one fence grace before the end of the lease and kills (SIGKILL) any
still there at the end, whatever its calls are doing: a beat still unanswered at the fence is
given up on (it may yet land; a late answer only helps the manager's view)::

    beat ok (sent t) ... beat hangs (t + I/2) ............ fence (t + I - grace) .. kill (t + I)

So a host cut off from DynamoDB and ECS runs nothing one interval after its last accepted beat,
whenever the manager moves its observers (at once on its task's STOPPED event, or after three
silent intervals): two generations overlap at most one interval, and never on the silence path.

A refused heartbeat means the host was replaced (a zombie): it fences every child the same way,
reports nothing more, and exits FENCED::

    reconciler:  host LOST, observers re-placed on other hosts (new generations)
    zombie host: beat | (blocked) ..... beat refused, or the lease ran out -> fence -> exit 3
                     <------------- at most one interval ------------->

A SIGTERM (StopTask, a Spot interruption) is a hand-over: the host beats at once, announcing
DRAINING in that heartbeat (so the manager places each observer elsewhere as soon as its exit is
reported), then tells every child to stop (it checkpoints), keeps heartbeating (still DRAINING)
while they do, reports each exit (once the announcement has been answered), then exits CLEAN::

    SIGTERM -> beat(DRAINING) -> children TERM ... child exits -> HOST_EXIT -> manager places it
                                                   on another host (a DRAINING one takes nothing)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from vigil import telemetry
from vigil.clock import Sleeper
from vigil.contract.hosts import SlotState
from vigil.contract.observers import ExitCode
from vigil.observers.container_client import host_timeouts
from vigil.observers.host_process.calls import Budget, Call, Calls, InlineCalls
from vigil.observers.host_process.children import Child, Launcher
from vigil.observers.host_process.exit_reports import ExitReports, PendingExit, ReportQueue
from vigil.observers.host_process.exits import describe_exit
from vigil.observers.host_process.heartbeat_store import (
    Assignment,
    HeartbeatStore,
    HostFenced,
    Slot,
)
from vigil.observers.host_process.plan import ChildView, plan
from vigil.observers.host_process.settings import DEFAULT_STOP_TIMEOUT_SECONDS
from vigil.observers.runtime import DEFAULT_FENCE_GRACE_SECONDS
from vigil.persist import Backoff, OutOfTime, persist

FENCED_WHY = "host fenced"
DRAINING_WHY = "task stopping (SIGTERM): handing its observers over"
"""The host's ``status_reason`` while it shuts down."""
Wait = Callable[[Sequence[int], float], None]
"""Waits up to ``seconds`` for one of the sentinels (a child's exit), a call's end or a signal."""
BEATS_PER_INTERVAL = 2
"""Heartbeats per heartbeat interval: the lease is one interval, so one beat may be lost."""


@dataclass
class _Slot:
    child: Child
    started: float
    """When the host started it (its monotonic clock): the exit report's run time counts from it."""
    deadline: float | None = None
    """Set once told to stop (or fenced): kill it if it is still there then."""
    why: str | None = None
    """Why the host told it to stop."""
    waiting: float = 0.0
    """How long the host gives it (the stop timeout, or the fence grace)."""
    killed_after: float | None = None


@dataclass(frozen=True)
class _Beat:
    """An accepted heartbeat: its answer, and when the accepted attempt was sent."""

    answer: Assignment
    sent: float


@dataclass(frozen=True)
class _BeatCall:
    call: Call[_Beat]
    deadline: float
    """Given up on after this: the lease's fence (or, before the first lease, the next beat)."""
    announces: bool
    """It carries the shutdown (DRAINING): exit reports wait for its answer."""


class HostSupervisor:
    def __init__(
        self,
        heartbeats: HeartbeatStore,
        launcher: Launcher,
        reports: ExitReports,
        *,
        slots: int,
        heartbeat_seconds: float,
        stop_timeout_seconds: float = DEFAULT_STOP_TIMEOUT_SECONDS,
        fence_grace_seconds: float = DEFAULT_FENCE_GRACE_SECONDS,
        logger: Logger | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Sleeper = time.sleep,
        calls: Calls | None = None,
    ) -> None:
        """``calls``: how heartbeats and exit reports run; the entry point's run on threads
        (:class:`~.calls.ThreadCalls`), the default inline (:class:`~.calls.InlineCalls`) is for
        tests and the emulator, whose clock stands still while a call runs."""
        self._heartbeats = heartbeats
        self._launcher = launcher
        self._slots = slots
        self._interval = heartbeat_seconds
        self._stop_timeout = stop_timeout_seconds
        self._fence_grace = fence_grace_seconds
        self._monotonic = monotonic
        self._sleep = sleep
        self._calls: Calls = calls or InlineCalls()
        self._backoff = Backoff(reserve_s=host_timeouts(heartbeat_seconds).attempt)
        """A retry starts only with one attempt's time left before the call's deadline."""
        self._fence_lead = min(fence_grace_seconds, heartbeat_seconds / (2 * BEATS_PER_INTERVAL))
        """Fence this long before the lease ends (the grace, but leaving room for retries)."""
        self.logger = logger or telemetry.logger()
        self.logger.append_keys(host=heartbeats.host_id)
        self._children: dict[str, _Slot] = {}
        self._finished: dict[str, int] = {}
        self._exits = ReportQueue(
            reports,
            host_id=heartbeats.host_id,
            calls=self._calls,
            backoff=self._backoff,
            logger=self.logger,
            monotonic=monotonic,
            sleep=sleep,
        )
        self._beat: _BeatCall | None = None
        self._assigned: dict[str, int] = {}
        self._next_beat: float | None = None
        self._lease_end: float | None = None
        """When the last accepted heartbeat's lease ends (None before the first)."""
        self._kill_at: float | None = None
        """Once fenced: when children still there are killed."""
        self._shutdown = False
        self._announced = False
        """Whether a heartbeat has carried the shutdown (DRAINING) yet."""
        self._fenced: str | None = None

    # -- what the entry point and tests see -----------------------------------------------------

    @property
    def children(self) -> dict[str, Child]:
        return {name: slot.child for name, slot in self._children.items()}

    @property
    def fenced(self) -> str | None:
        return self._fenced

    @property
    def pending_reports(self) -> dict[str, int]:
        """Observer name -> generation of exits whose report has not landed yet."""
        return {name: exit.generation for name, exit in self._exits.pending.items()}

    @property
    def lease_end(self) -> float | None:
        """When the children must be gone unless another heartbeat is accepted (monotonic)."""
        return self._lease_end

    def request_shutdown(self) -> None:
        """SIGTERM: hand every child over, then exit. Safe in a signal handler (sets a flag)."""
        self._shutdown = True

    def kill_children(self) -> None:
        """SIGKILL to every child: the entry point's last act when the host itself fails, so no
        child runs on unsupervised."""
        for slot in self._children.values():
            slot.child.kill()

    def next_wake(self, now: float) -> float:
        """Seconds until the next deadline (a heartbeat, a stop timeout, the lease, a call's)."""
        # A child already killed is waited for by its sentinel, not polled.
        due = [
            s.deadline
            for s in self._children.values()
            if s.deadline is not None and s.killed_after is None
        ]
        if self._fenced is None:
            if self._next_beat is not None and self._beat is None:
                due.append(self._next_beat)
            if self._lease_end is not None:
                due.append(self._lease_end - self._fence_lead)
            if self._beat is not None:
                due.append(self._beat.deadline)
            if self._exits.deadline is not None:
                due.append(self._exits.deadline)
        return max(0.0, min(due, default=now + self._interval) - now)

    def run(self, wait: Wait) -> ExitCode:
        while True:
            code = self.tick(self._monotonic())
            if code is not None:
                return code
            wait(
                [s.child.sentinel for s in self._children.values()],
                self.next_wake(self._monotonic()),
            )

    # -- one step ---------------------------------------------------------------------------------

    def tick(self, now: float) -> ExitCode | None:
        """One step at monotonic time ``now``; the host's exit code once it is done."""
        self._reap(now)
        self._kill_overdue(now)
        if self._fenced is None:
            self._land_beat(now)
            if self._beat is None and self._beat_due(now):
                self._send_beat(now)
                self._land_beat(now)  # an inline call has already ended
        self._expire_lease(now)  # after the beat: one accepted late (a busy step) renews it
        accepting = self._fenced is None and not self._shutdown
        step = plan(
            self._assigned,
            {
                n: ChildView(s.child.generation, s.deadline is not None)
                for n, s in self._children.items()
            },
            self._finished,
            slots=self._slots,
            accepting=accepting,
        )
        for name in step.forget:
            del self._finished[name]
        if self._fenced is not None:
            # Every child, also one already told to stop: fenced, it writes nothing more.
            for name, slot in self._children.items():
                if slot.why != FENCED_WHY:
                    self._fence_child(name, now)
        for name in step.stop if self._fenced is None else ():
            why = "host shutting down" if self._shutdown else "no longer assigned"
            self._stop_child(name, now, why)
        for name, generation in step.start if self._may_start(now) else ():
            self._start(name, generation, now)
        if step.no_slot:
            self.logger.warning("assigned beyond the host's slots", extra={"waiting": step.no_slot})
        fence = None if self._lease_end is None else self._lease_end - self._fence_lead
        announcing = self._beat is not None and self._beat.announces
        self._exits.step(now, fence=fence, paused=announcing)
        if not accepting and not self._children and not self._exits.pending:
            code = ExitCode.FENCED if self._fenced is not None else ExitCode.CLEAN
            self.logger.info("host exiting", extra={"exit_code": int(code)})
            return code
        return None

    # -- the heartbeat ----------------------------------------------------------------------------

    def _beat_due(self, now: float) -> bool:
        """Twice per interval, and at once after SIGTERM (the announcement precedes every stop)."""
        if self._shutdown and not self._announced:
            return True
        return self._next_beat is None or now >= self._next_beat

    def _send_beat(self, now: float) -> None:
        """Start one heartbeat, retried through transient faults until its deadline: the lease's
        fence (before the first lease, the next beat). It renews the lease from when the
        accepted attempt was sent, never later than DynamoDB saw it."""
        self._next_beat = now + self._interval / BEATS_PER_INTERVAL
        self._announced = self._shutdown
        self._reap(now)  # the running map never lists a child that has exited
        running = {
            name: Slot(
                slot.child.generation,
                SlotState.RUNNING if slot.deadline is None else SlotState.STOPPING,
            )
            for name, slot in self._children.items()
        }
        draining = DRAINING_WHY if self._shutdown else None
        deadline = (
            self._next_beat if self._lease_end is None else self._lease_end - self._fence_lead
        )
        budget = Budget(deadline - now, self._monotonic, self._sleep)
        base = self._monotonic()

        def attempt() -> _Beat:
            sent = now + (self._monotonic() - base)
            answer = self._heartbeats.beat(running, draining=draining, lease_seconds=self._interval)
            return _Beat(answer, sent)

        call = self._calls.start(
            lambda: persist(
                attempt, time_left_s=budget.left, sleep=budget.sleep, backoff=self._backoff
            )
        )
        self._beat = _BeatCall(call, deadline, announces=draining is not None)

    def _land_beat(self, now: float) -> None:
        """Take the heartbeat in flight once it has ended (or its deadline has passed)."""
        flight = self._beat
        if flight is None:
            return
        if not flight.call.done():
            if now >= flight.deadline:
                self._beat = None
                self.logger.warning(
                    "heartbeat unanswered by its deadline: given up on",
                    extra={"lease_left_s": self._lease_left(now)},
                )
            return
        self._beat = None
        try:
            beat = flight.call.result()
        except HostFenced as fenced:
            self._fence(str(fenced), now)
            return
        except (ClientError, BotoCoreError, OutOfTime) as error:
            self.logger.warning(
                "heartbeat failed",
                extra={"error": str(error), "lease_left_s": self._lease_left(now)},
            )
            return
        end = beat.sent + self._interval
        if self._lease_end is None or end > self._lease_end:
            self._lease_end = end
        self._assigned = beat.answer.assigned

    def _lease_left(self, now: float) -> float | None:
        return None if self._lease_end is None else self._lease_end - now

    def _expire_lease(self, now: float) -> None:
        """Fence every child once the last accepted heartbeat's lease is about to end."""
        end = self._lease_end
        if self._fenced is None and end is not None and now >= end - self._fence_lead:
            silent = now - (end - self._interval)
            self._fence(f"no heartbeat accepted for {silent:.1f} s: presumed replaced", now)

    def _fence(self, why: str, now: float) -> None:
        self.logger.error("host fenced: stopping every observer", extra={"reason": why})
        self._fenced = why
        self._assigned = {}
        self._beat = None  # given up on: nothing more is waited for
        self._kill_at = now + self._fence_grace
        if self._lease_end is not None:
            self._kill_at = min(self._kill_at, max(now, self._lease_end))
        dropped = self._exits.drop()  # its observers belong to someone else: it writes nothing
        if dropped:
            self.logger.warning("exit reports dropped", extra={"observers": dropped})

    # -- children ---------------------------------------------------------------------------------

    def _start(self, name: str, generation: int, now: float) -> None:
        try:
            child = self._launcher.start(name, generation)
        except Exception as error:
            # Whatever it is, one child's start must not end the host and leave its other
            # children unsupervised: multiprocessing raises EOFError when the forkserver dies
            # while it forks, ConnectionRefusedError just after.
            reason = f"host could not start it: {type(error).__name__}: {error}"
            self.logger.error("cannot start a child", extra={"observer": name, "error": reason})
            self._finished[name] = generation
            self._exits.pending[name] = PendingExit(generation, ExitCode.CRASH, reason, 0.0)
            return
        self._children[name] = _Slot(child, started=now)
        self.logger.info("child started", extra={"observer": name, "generation": generation})

    def _may_start(self, now: float) -> bool:
        """A child starts only with half an interval of lease left: a start may block for
        seconds (after the forkserver died, the next one imports its preloads before it forks)
        and must not run into the fence. Children are assigned by an accepted beat, which
        leaves a whole interval, so a healthy host never waits for this."""
        left = self._lease_left(now)
        return left is not None and left >= self._interval / BEATS_PER_INTERVAL

    def _stop_child(self, name: str, now: float, why: str) -> None:
        slot = self._children[name]
        slot.deadline, slot.why, slot.waiting = now + self._stop_timeout, why, self._stop_timeout
        self.logger.info("stopping child", extra={"observer": name, "reason": why})
        slot.child.stop()

    def _fence_child(self, name: str, now: float) -> None:
        slot = self._children[name]
        deadline = now + self._fence_grace if self._kill_at is None else self._kill_at
        slot.deadline = deadline if slot.deadline is None else min(slot.deadline, deadline)
        slot.why, slot.waiting = FENCED_WHY, max(0.0, deadline - now)
        slot.child.fence()

    def _kill_overdue(self, now: float) -> None:
        for name, slot in self._children.items():
            if slot.deadline is not None and now >= slot.deadline and slot.killed_after is None:
                self.logger.warning(
                    "child ignored the stop: killing it",
                    extra={"observer": name, "waited_s": slot.waiting},
                )
                slot.killed_after = slot.waiting
                slot.child.kill()

    def _reap(self, now: float) -> None:
        for name, slot in list(self._children.items()):
            exitcode = slot.child.exitcode
            if exitcode is None:
                continue
            del self._children[name]
            generation = slot.child.generation
            self._finished[name] = generation
            code, reason = describe_exit(
                exitcode, asked_to_stop=slot.why, killed_after_s=slot.killed_after
            )
            extra = {"observer": name, "generation": generation, "exit_code": exitcode}
            self.logger.info("child exited", extra={**extra, "reason": reason})
            if self._fenced is None:
                # A fenced host's observers belong to someone else now: it writes nothing.
                ran = max(0.0, now - slot.started)
                self._exits.pending[name] = PendingExit(generation, code, reason, ran)
