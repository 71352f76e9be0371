"""A host's exit reports: each pending until it lands, written one at a time beside the heartbeat.

A child's end is the only way the manager learns that its generation no longer runs (the host's
``running`` map never lists an exited child), so a report must land. Each is one fenced write
(``HOST_EXIT``, conditional on the observer's generation and host) through
:func:`vigil.persist.persist` with a short budget, never past the lease's fence; one still not
written (a throttle storm, an outage, a call that hangs) stays pending and is tried again at the
next step, after the others, until it lands, is refused (the observer moved on) or the host is
fenced (its observers belong to someone else: it writes nothing more).

One report is in flight at a time, beside the heartbeat (:mod:`.calls`): however many are pending
and however long they hang, they never delay a heartbeat or the lease's check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from vigil.clock import Sleeper
from vigil.contract.observers import ExitCode
from vigil.observers.host_process.calls import Budget, Call, Calls
from vigil.observers.registry import RegistryError
from vigil.persist import Backoff, OutOfTime, persist

REPORT_BUDGET_SECONDS = 5.0
"""How long one exit report may retry before it is left pending for a later step."""


class ExitReports(Protocol):
    """Where exits are reported (:class:`~vigil.observers.registry.FencedWrites`)."""

    def report_host_exit(
        self,
        name: str,
        generation: int,
        *,
        host: str,
        exit_code: ExitCode,
        reason: str,
        ran_s: float | None = None,
    ) -> bool: ...


@dataclass(frozen=True)
class PendingExit:
    """A child's end whose report has not landed yet."""

    generation: int
    code: ExitCode
    reason: str
    ran_s: float
    """How long it ran, by the host's monotonic clock (the manager's failure count reads it)."""


@dataclass(frozen=True)
class _InFlight:
    call: Call[bool]
    deadline: float
    name: str
    exit: PendingExit


class ReportQueue:
    def __init__(
        self,
        reports: ExitReports,
        *,
        host_id: str,
        calls: Calls,
        backoff: Backoff,
        logger: Logger,
        monotonic: Callable[[], float],
        sleep: Sleeper,
    ) -> None:
        self.reports = reports
        self.pending: dict[str, PendingExit] = {}
        """By observer name."""
        self._host_id = host_id
        self._calls = calls
        self._backoff = backoff
        self._logger = logger
        self._monotonic = monotonic
        self._sleep = sleep
        self._flight: _InFlight | None = None
        self._last = ""
        """The observer whose report was started last: the next goes to the one after it."""

    @property
    def deadline(self) -> float | None:
        """When the report in flight is given up on (None: none in flight)."""
        return None if self._flight is None else self._flight.deadline

    def drop(self) -> list[str]:
        """The host is fenced: forget every pending report (the one in flight is given up on)."""
        names = sorted(self.pending)
        self.pending.clear()
        self._flight = None
        return names

    def step(self, now: float, *, fence: float | None, paused: bool = False) -> None:
        """Land the report in flight; then, unless ``paused`` (the shutdown's announcement is
        in flight), start the next pending ones, each at most once per step, while they land at
        once (inline calls) and time is left before ``fence`` (the lease's; None: no lease)."""
        tried: set[str] = set()
        while self._land(now):
            waiting = sorted(name for name in self.pending if name not in tried)
            if paused or not waiting:
                return
            name = next((n for n in waiting if n > self._last), waiting[0])
            if not self._start(name, now, fence):
                return
            tried.add(name)

    def _start(self, name: str, now: float, fence: float | None) -> bool:
        """One fenced write, retried through transient faults until its deadline; False when
        no time is left before the fence."""
        deadline = now + REPORT_BUDGET_SECONDS
        if fence is not None:
            deadline = min(deadline, fence)
        if deadline <= now:
            return False
        exit = self.pending[name]
        budget = Budget(deadline - now, self._monotonic, self._sleep)
        reports = self.reports

        def write() -> bool:
            return reports.report_host_exit(
                name,
                exit.generation,
                host=self._host_id,
                exit_code=exit.code,
                reason=exit.reason,
                ran_s=exit.ran_s,
            )

        self._last = name
        call = self._calls.start(
            lambda: persist(
                write, time_left_s=budget.left, sleep=budget.sleep, backoff=self._backoff
            )
        )
        self._flight = _InFlight(call, deadline, name, exit)
        return True

    def _land(self, now: float) -> bool:
        """Settle the report in flight if it has ended (or its deadline has passed): True once
        none is in flight."""
        flight = self._flight
        if flight is None:
            return True
        if not flight.call.done():
            if now < flight.deadline:
                return False
            self._flight = None
            self._not_written(flight, "unanswered by its deadline")
            return True
        self._flight = None
        extra = {"observer": flight.name, "generation": flight.exit.generation}
        try:
            written = flight.call.result()
        except (ClientError, BotoCoreError, OutOfTime) as error:
            self._not_written(flight, str(error))
            return True
        except RegistryError as refused:
            written = False
            extra["why"] = str(refused)
        if not written:
            self._logger.info("exit report refused: the observer moved on", extra=extra)
        if self.pending.get(flight.name) == flight.exit:
            del self.pending[flight.name]
        return True

    def _not_written(self, flight: _InFlight, why: str) -> None:
        """It stays pending: tried again at the next step (after any other pending one)."""
        self._logger.warning(
            "exit report not written yet",
            extra={"observer": flight.name, "generation": flight.exit.generation, "error": why},
        )
