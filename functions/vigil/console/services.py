"""What the console reads and acts through: the library's own stores and clients.

Built once per function instance by the handler (``handlers.console_widget``) from the stack's
catalogs, or by a test from the emulator's. Nothing here calls AWS itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vigil.clock import Clock, system_clock
from vigil.jobs.control import JobSpec
from vigil.jobs.control_api import ControlServices
from vigil.jobs.control_store import ControlStore
from vigil.jobs.redrive import Answer
from vigil.jobs.store import RunStore
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.registry import ObserverCommands
from vigil.tasks.enqueue import TaskClient

Invoke = Callable[[str, dict[str, Any]], None]
"""Invoke a function asynchronously (a manual tick, an ``allow`` job's redrive)."""
Call = Callable[[str, Any], Answer]
"""Invoke a function and wait for its answer (a ``skip`` job's redrive, one tick at a time)."""


@dataclass(frozen=True)
class ConsoleServices:
    stack: str
    jobs: Mapping[str, JobSpec]
    dead_letters: Mapping[str, str]
    """Each job's failed-runs queue (its catalog entry's ``failed_runs``)."""
    job_entries: Mapping[str, Mapping[str, Any]]
    """Each job's catalog entry as published (its overlap policy decides how a redrive goes)."""
    control: ControlStore
    runs: RunStore
    invoke: Invoke
    call: Call
    sqs: Any
    cloudwatch: Any
    tasks: TaskClient | None = None
    observers: ObserverCommands | None = None
    hosts: HostStore | None = None
    clock: Clock = system_clock
    page_size: int = 25
    extra: dict[str, Any] = field(default_factory=dict)

    def control_services(self) -> ControlServices:
        """The jobs API's services over the same stores: the run-now button calls what
        ``POST /jobs/{job}/runs`` calls."""
        return ControlServices(
            jobs=self.jobs,
            control=self.control,
            runs=self.runs,
            invoke=self.invoke,
            clock=self.clock,
        )
