"""ECS's side of the observer fleet, in-process and in step with the simulated clock.

What the ECS agent and EventBridge do on AWS, done here between the test's actions until nothing
is left to do (:meth:`SteppedFleet.settle`):

* registry changes reach the reconciler through the registry stream's mapping;
* a task the reconciler ran gets its container: the observer runtime with the task's environment
  (:class:`~vigil_tools.emulator.ecs.ObserverContainer`, stepped on the clock), or for a pooled
  kind's host task the host process (:class:`~vigil_tools.emulator.hosts.EmulatedHost`);
* a container that exits stops its task, and StopTask sends the container SIGTERM; either way the
  reconciler receives the task's STOPPED event, with the container's exit code;
* asynchronous invocations a function queued are delivered.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.ecs import (
    ObserverContainer,
    TaskEvents,
    container_environment,
    describe_task,
)
from vigil_tools.emulator.fleet import DeployedFleet
from vigil_tools.emulator.hosts import EmulatedHost, task_runner
from vigil_tools.emulator.lambda_runtime import Invocation, LocalLambda
from vigil_tools.emulator.streams import StreamMappings

MAX_ROUNDS = 100
"""Rounds of settling before the fleet is declared to loop (a reconciler bug, never a wait)."""


class FleetLoops(RuntimeError):
    """The fleet kept changing: the reconciler and ECS did not come to rest."""


@dataclass
class SteppedFleet:
    account: LocalAccount
    runtime: LocalLambda
    fleet: DeployedFleet
    now: Callable[[], datetime]
    stream: StreamMappings
    containers: dict[str, ObserverContainer] = field(default_factory=dict)
    hosts: dict[str, EmulatedHost] = field(default_factory=dict)
    """Host tasks (pooled kinds) by task ARN."""
    logs: dict[str, io.StringIO] = field(default_factory=dict)
    """Each task's container output, by task ARN."""
    versions: dict[str, int] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    """Tasks whose STOPPED event the reconciler has received."""

    @classmethod
    def of(
        cls, account: LocalAccount, runtime: LocalLambda, now: Callable[[], datetime]
    ) -> SteppedFleet:
        fleet = account.once("fleet", lambda: DeployedFleet.of(account))
        stream = StreamMappings.of(account.session, fleet.reconciler)
        ecs = account.session.client("ecs")
        # Tasks of earlier tests on the same deployment are history: no events for them.
        earlier = {
            arn
            for status in ("RUNNING", "STOPPED")
            for arn in ecs.list_tasks(cluster=fleet.cluster, desiredStatus=status)["taskArns"]
        }
        return cls(account, runtime, fleet, now, stream, reported=earlier)

    def refresh(self) -> None:
        """After a deploy over the running stack: the fleet's resources read again (a new registry
        table, a new stream mapping); the tasks and their containers run on."""
        self.fleet = self.account.once("fleet", lambda: DeployedFleet.of(self.account))
        self.stream.refresh()

    @cached_property
    def ecs(self) -> Any:
        """One ECS client for the fleet's life: it looks at ECS after every step of the clock,
        and a new client costs more than the look."""
        return self.account.session.client("ecs")

    @cached_property
    def _dynamodb(self) -> Any:
        return self.account.session.client("dynamodb")

    def invoke(self, function: str, event: Any) -> Invocation:
        with warnings.catch_warnings():
            # Powertools warns when an invocation emitted no metric (a GET): not news here.
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            return self.runtime.invoke(function, event)

    def settle(self) -> None:
        """Deliver what AWS would deliver, until nothing changes."""
        for _ in range(MAX_ROUNDS):
            acted = bool(self.stream.deliver(self.invoke))
            acted |= bool(self.runtime.run_pending())
            acted |= self._start_containers()
            acted |= self._report_stopped()
            if not acted:
                return
        raise FleetLoops(f"the fleet was still changing after {MAX_ROUNDS} rounds")

    def step_due(self) -> bool:
        """Every live container whose wake-up or heartbeat is due runs until it sleeps again."""
        due = [c for c in self.live() if c.due_at <= self.now()]
        for container in sorted(due, key=lambda c: (c.name, c.generation)):
            container.step()
        hosts = [h for h in self.live_hosts() if h.due_at <= self.now()]
        for host in sorted(hosts, key=lambda h: h.host_id):
            host.step()
        return bool(due or hosts)

    def next_due(self) -> datetime | None:
        runners: list[ObserverContainer | EmulatedHost] = [*self.live(), *self.live_hosts()]
        return min((r.due_at for r in runners), default=None)

    def live_hosts(self) -> list[EmulatedHost]:
        return [h for h in self.hosts.values() if h.alive]

    def live(self) -> list[ObserverContainer]:
        return [c for c in self.containers.values() if c.alive]

    def crash(self, arn: str, observer: str | None = None) -> None:
        """The task's container dies (exit 1): ECS stops the task and reports it. On a host task
        with ``observer`` given, only that observer's child process dies (exit 1), as in AWS: the
        host reports it, the task and its other observers run on."""
        host = self.hosts.get(arn)
        if observer is not None and host is not None and host.alive:
            host.crash_child(observer)
            return
        runner = self.containers.get(arn) or host
        if runner is not None:
            runner.kill()
        self.ecs.stop_task(
            cluster=self.fleet.cluster, task=arn, reason="Essential container in task exited"
        )
        self._task_event(arn, stop_code="EssentialContainerExited", exit_code=1)

    def lose_contact(self, arn: str) -> None:
        """ECS reports the task STOPPED, but its process runs on (an instance cut off from ECS):
        the task's container or host keeps running here, a zombie."""
        self.ecs.stop_task(cluster=self.fleet.cluster, task=arn, reason="Task lost contact")
        self._task_event(arn, stop_code="EssentialContainerExited", exit_code=137)

    def kill_all(self) -> None:
        runners: list[ObserverContainer | EmulatedHost] = [*self.live(), *self.live_hosts()]
        for runner in runners:
            runner.kill()

    def _start_containers(self) -> bool:
        arns = self.ecs.list_tasks(cluster=self.fleet.cluster, desiredStatus="RUNNING")["taskArns"]
        started = False
        for arn in arns:
            if arn in self.containers or arn in self.hosts or arn in self.reported:
                continue
            task = describe_task(self.ecs, self.fleet.cluster, arn)
            environment = container_environment(self.ecs, task, self.fleet.container)
            self.logs[arn] = io.StringIO()
            runner = task_runner(
                arn,
                environment,
                self._dynamodb,
                now=self.now,
                log=self.logs[arn],
            )
            if isinstance(runner, EmulatedHost):
                self.hosts[arn] = runner
            else:
                assert isinstance(runner, ObserverContainer)
                self.containers[arn] = runner
            runner.start()
            started = True
        return started

    def _report_stopped(self) -> bool:
        acted = False
        runners: dict[str, ObserverContainer | EmulatedHost] = {**self.containers, **self.hosts}
        for arn, container in runners.items():
            if arn in self.reported or container.alive or container.exit_code is None:
                continue
            # The container exited by itself (a crash, a clean stop, fenced): ECS stops the task.
            self.ecs.stop_task(
                cluster=self.fleet.cluster, task=arn, reason="Essential container in task exited"
            )
            self._task_event(
                arn, stop_code="EssentialContainerExited", exit_code=int(container.exit_code)
            )
            acted = True
        stopped = self.ecs.list_tasks(cluster=self.fleet.cluster, desiredStatus="STOPPED")
        for arn in stopped["taskArns"]:
            if arn in self.reported:
                continue
            # StopTask (the reconciler's): ECS sends the container SIGTERM and waits for it.
            running = runners.get(arn)
            exit_code = running.sigterm() if running is not None else None
            self._task_event(
                arn,
                stop_code="UserInitiated",
                exit_code=int(exit_code) if exit_code is not None else None,
            )
            acted = True
        return acted

    def _task_event(self, arn: str, *, stop_code: str, exit_code: int | None) -> None:
        self.reported.add(arn)
        events = TaskEvents(self.ecs, self.fleet.cluster, self.fleet.container, self.versions)
        event = events.current(arn, at=self.now(), stop_code=stop_code, exit_code=exit_code)
        result = self.invoke(self.fleet.reconciler, event)
        if not result.ok:
            raise RuntimeError(
                f"the reconciler failed on a task event: {result.error_type}: {result.error_message}"
            )
