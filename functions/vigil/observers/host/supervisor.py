"""The host's loop: heartbeat once per interval, run what is assigned, report what exits.

A step (:meth:`HostSupervisor.tick`) is driven with the monotonic time: tests call it directly
with the times they choose; :meth:`HostSupervisor.run` calls it whenever a child exits, a signal
arrives or the next deadline (heartbeat, stop timeout) is due. One step::

    reap exited children -> report each (HOST_EXIT)     kill children past their stop deadline
    heartbeat if due (ONE write; answer: assigned)      plan(assigned) -> stop / start children

Fencing, in host terms: a refused heartbeat (or none accepted for two intervals: the reconciler
declares the host dead after three) means the host was replaced. It fences every child (SIGUSR1,
then SIGKILL after a short grace), reports nothing more, and exits FENCED::

    reconciler:  host LOST, observers re-placed on other hosts (new generations)
    zombie host: beat | (blocked) ......... beat -> HostFenced -> fence children -> exit 3
                                    <-- at most one interval -->

A SIGTERM (StopTask, a Spot interruption) is a hand-over: the host beats at once, announcing
DRAINING in that heartbeat (so the manager places each observer elsewhere as soon as its exit is
reported), then tells every child to stop (it checkpoints), keeps heartbeating (still DRAINING)
while they do, reports each exit, then exits CLEAN::

    SIGTERM -> beat(DRAINING) -> children TERM ... child exits -> HOST_EXIT -> manager places it
                                                   on another host (a DRAINING one takes nothing)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from vigil import telemetry
from vigil.contract.hosts import SlotState
from vigil.contract.observers import ExitCode
from vigil.observers.host.children import Child, Launcher
from vigil.observers.host.exits import describe_exit
from vigil.observers.host.heartbeat_store import HeartbeatStore, HostFenced, Slot
from vigil.observers.host.plan import ChildView, plan
from vigil.observers.host.settings import DEFAULT_STOP_TIMEOUT_SECONDS
from vigil.observers.runtime import DEFAULT_FENCE_GRACE_SECONDS, SELF_FENCE_INTERVALS

FENCED_WHY = "host fenced"
DRAINING_WHY = "task stopping (SIGTERM): handing its observers over"
"""The host's ``status_reason`` while it shuts down."""
Wait = Callable[[Sequence[int], float], None]
"""Waits up to ``seconds`` for one of the sentinels (a child's exit) or a signal."""


class ExitReports(Protocol):
    """Where exits are reported (:class:`~vigil.observers.registry.FencedWrites`)."""

    def report_host_exit(
        self, name: str, generation: int, *, host: str, exit_code: ExitCode, reason: str
    ) -> bool: ...


@dataclass
class _Slot:
    child: Child
    deadline: float | None = None
    """Set once told to stop (or fenced): kill it if it is still there then."""
    why: str | None = None
    """Why the host told it to stop."""
    waiting: float = 0.0
    """How long the host gives it (the stop timeout, or the fence grace)."""
    killed_after: float | None = None


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
    ) -> None:
        self._heartbeats = heartbeats
        self._launcher = launcher
        self._reports = reports
        self._slots = slots
        self._interval = heartbeat_seconds
        self._stop_timeout = stop_timeout_seconds
        self._fence_grace = fence_grace_seconds
        self._monotonic = monotonic
        self.logger = logger or telemetry.logger()
        self.logger.append_keys(host=heartbeats.host_id)
        self._children: dict[str, _Slot] = {}
        self._finished: dict[str, int] = {}
        self._assigned: dict[str, int] = {}
        self._next_beat: float | None = None
        self._last_accepted: float | None = None
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

    def request_shutdown(self) -> None:
        """SIGTERM: hand every child over, then exit. Safe in a signal handler (sets a flag)."""
        self._shutdown = True

    def next_wake(self, now: float) -> float:
        """Seconds until the next deadline (a heartbeat or a stop timeout)."""
        due = [s.deadline for s in self._children.values() if s.deadline is not None]
        if self._next_beat is not None and self._fenced is None:
            due.append(self._next_beat)
        return max(0.0, min(due, default=now + self._interval) - now)

    def run(self, wait: Wait) -> ExitCode:
        while True:
            now = self._monotonic()
            code = self.tick(now)
            if code is not None:
                return code
            wait([s.child.sentinel for s in self._children.values()], self.next_wake(now))

    # -- one step ---------------------------------------------------------------------------------

    def tick(self, now: float) -> ExitCode | None:
        """One step at monotonic time ``now``; the host's exit code once it is done."""
        self._reap()
        self._kill_overdue(now)
        if self._fenced is None and self._beat_due(now):
            self._beat(now)
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
        for name, generation in step.start:
            self._start(name, generation)
        if step.no_slot:
            self.logger.warning("assigned beyond the host's slots", extra={"waiting": step.no_slot})
        if not accepting and not self._children:
            code = ExitCode.FENCED if self._fenced is not None else ExitCode.CLEAN
            self.logger.info("host exiting", extra={"exit_code": int(code)})
            return code
        return None

    # -- the heartbeat ----------------------------------------------------------------------------

    def _beat_due(self, now: float) -> bool:
        """At each interval, and at once after SIGTERM (the announcement precedes every stop)."""
        if self._shutdown and not self._announced:
            return True
        return self._next_beat is None or now >= self._next_beat

    def _beat(self, now: float) -> None:
        self._next_beat = now + self._interval
        self._announced = self._shutdown
        if self._last_accepted is None:
            self._last_accepted = now
        running = {
            name: Slot(
                slot.child.generation,
                SlotState.RUNNING if slot.deadline is None else SlotState.STOPPING,
            )
            for name, slot in self._children.items()
        }
        try:
            answer = self._heartbeats.beat(
                running, draining=DRAINING_WHY if self._shutdown else None
            )
        except HostFenced as fenced:
            self._fence(str(fenced))
            return
        except (ClientError, BotoCoreError) as error:
            silent = now - self._last_accepted
            self.logger.warning("heartbeat failed", extra={"error": str(error), "silent_s": silent})
            if silent >= SELF_FENCE_INTERVALS * self._interval:
                self._fence(f"no heartbeat accepted for {silent:.0f} s: presumed replaced")
            return
        self._last_accepted = now
        self._assigned = answer.assigned

    def _fence(self, why: str) -> None:
        self.logger.error("host fenced: stopping every observer", extra={"reason": why})
        self._fenced = why
        self._assigned = {}

    # -- children ---------------------------------------------------------------------------------

    def _start(self, name: str, generation: int) -> None:
        try:
            child = self._launcher.start(name, generation)
        except (OSError, ValueError) as error:
            self.logger.error("cannot start a child", extra={"observer": name, "error": str(error)})
            self._finished[name] = generation
            self._report(name, generation, ExitCode.CRASH, f"host could not start it: {error}")
            return
        self._children[name] = _Slot(child)
        self.logger.info("child started", extra={"observer": name, "generation": generation})

    def _stop_child(self, name: str, now: float, why: str) -> None:
        slot = self._children[name]
        slot.deadline, slot.why, slot.waiting = now + self._stop_timeout, why, self._stop_timeout
        self.logger.info("stopping child", extra={"observer": name, "reason": why})
        slot.child.stop()

    def _fence_child(self, name: str, now: float) -> None:
        slot = self._children[name]
        deadline = now + self._fence_grace
        slot.deadline = deadline if slot.deadline is None else min(slot.deadline, deadline)
        slot.why, slot.waiting = FENCED_WHY, self._fence_grace
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

    def _reap(self) -> None:
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
                self._report(name, generation, code, reason)

    def _report(self, name: str, generation: int, code: ExitCode, reason: str) -> None:
        """One fenced write; refused means the observer moved on, a failure is only logged (the
        reconciler still learns of the exit from the host's next ``running`` map)."""
        try:
            written = self._reports.report_host_exit(
                name, generation, host=self._heartbeats.host_id, exit_code=code, reason=reason
            )
        except (ClientError, BotoCoreError) as error:
            self.logger.warning(
                "exit report not written", extra={"observer": name, "error": str(error)}
            )
            return
        if not written:
            self.logger.info("exit report refused: the observer moved on", extra={"observer": name})
