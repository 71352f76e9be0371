"""A pooled host task in the emulator, built on the shared contract (``vigil.contract.hosts``).

The host process itself is built elsewhere; until the emulator runs its entry point, this stands
in for it with the contract's behaviour, so the manager side can be exercised end to end:

* one conditional heartbeat per interval on its own item (live status, its own ``task_arn``),
  ``ReturnValues=ALL_NEW``; the answer's ``assigned`` is what it runs; a refusal makes it a zombie
  (every child stopped, exit 3);
* each assigned (name, generation) runs as an :class:`~vigil_tools.emulator.ecs.ObserverContainer`
  (the unchanged observer runtime), stepped like a dedicated container; a child whose generation
  is no longer assigned gets SIGTERM;
* a child that exits is reported once with ``HOST_EXIT`` on its observer's item, conditioned on
  the generation and the host.

:func:`task_runner` picks what a task runs from its environment: a host (``VIGIL_HOST_ID``) or one
observer. ``HOST_RUNNER`` is the hook the real host entry point replaces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import IO, Any, Protocol

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms
from vigil.contract.hosts import (
    HOST_EXIT,
    HOST_ID_ENV,
    HOSTS_KEY,
    HOSTS_TABLE_ENV,
    LIVE_HOST_STATUSES,
    OBSERVER_HOST,
)
from vigil.contract.observers import ExitCode
from vigil.dynamo import Update, from_wire, is_condition_failure, to_wire
from vigil_tools.emulator.ecs import ObserverContainer


class TaskRunner(Protocol):
    """What the emulator steps for one task (an observer's container, or a host)."""

    @property
    def alive(self) -> bool: ...

    def start(self) -> None: ...

    def step(self) -> None: ...

    def kill(self) -> None: ...


class EmulatedHost:
    def __init__(
        self,
        task_arn: str,
        environment: Mapping[str, str],
        dynamodb: Any,
        *,
        now: Callable[[], datetime],
        log: IO[str],
    ) -> None:
        self.task_arn = task_arn
        self.host_id = environment[HOST_ID_ENV]
        self._environment = dict(environment)
        self._table = environment[HOSTS_TABLE_ENV]
        self._registry = environment["VIGIL_OBSERVERS_TABLE"]
        self._interval = timedelta(seconds=int(environment["VIGIL_HEARTBEAT_SECONDS"]))
        self._dynamodb = dynamodb
        self._now = now
        self._log = log
        self._next_beat = now()
        self.children: dict[str, ObserverContainer] = {}
        self.exit_code: ExitCode | None = None
        self.heartbeats = 0

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    def start(self) -> None:
        self.step()

    def step(self) -> None:
        if not self.alive:
            return
        if self._now() >= self._next_beat:
            self._next_beat = self._now() + self._interval
            assigned = self._heartbeat()
            if assigned is None:  # refused: replaced or lost, a zombie
                for child in self.children.values():
                    child.kill()
                self.exit_code = ExitCode.FENCED
                return
            self._follow(assigned)
        for name, child in sorted(self.children.items()):
            child.step()
            if not child.alive:
                self._report(name, child)

    def kill(self) -> None:
        for child in self.children.values():
            child.kill()
        self.exit_code = ExitCode.CRASH

    def _heartbeat(self) -> dict[str, int] | None:
        running = {
            n: {"generation": c.generation, "state": "running" if c.alive else "exited"}
            for n, c in self.children.items()
        }
        update = Update().set_all({"heartbeat_at_ms": epoch_ms(self._now()), "running": running})
        update.condition(update.one_of("status", *LIVE_HOST_STATUSES))
        update.condition(update.eq("task_arn", self.task_arn))
        try:
            answer = self._dynamodb.update_item(
                TableName=self._table,
                Key=to_wire({HOSTS_KEY: self.host_id}),
                ReturnValues="ALL_NEW",
                **update.request(),
            )
        except ClientError as error:
            if is_condition_failure(error):
                return None
            raise
        self.heartbeats += 1
        item = from_wire(answer["Attributes"]) or {}
        return {k: int(v) for k, v in (item.get("assigned") or {}).items()}

    def _follow(self, assigned: dict[str, int]) -> None:
        for name, child in list(self.children.items()):
            if assigned.get(name) != child.generation and child.alive:
                child.sigterm()
                self._report(name, child)
        for name, generation in sorted(assigned.items()):
            current = self.children.get(name)
            if current is not None and current.generation == generation:
                continue
            environment = {
                **self._environment,
                "VIGIL_OBSERVER_NAME": name,
                "VIGIL_OBSERVER_GENERATION": str(generation),
            }
            child = ObserverContainer(
                self.task_arn, environment, self._dynamodb, now=self._now, log=self._log
            )
            self.children[name] = child
            child.start()

    def _report(self, name: str, child: ObserverContainer) -> None:
        """HOST_EXIT once per child, fenced on its generation and this host."""
        if self.children.get(name) is not child:
            return
        del self.children[name]
        code = int(child.exit_code) if child.exit_code is not None else int(ExitCode.CRASH)
        update = Update().set(
            HOST_EXIT,
            {
                "generation": child.generation,
                "exit_code": code,
                "reason": f"child exited with {code}",
                "at_ms": epoch_ms(self._now()),
            },
        )
        update.condition(
            update.eq("generation", child.generation), update.eq(OBSERVER_HOST, self.host_id)
        )
        try:
            self._dynamodb.update_item(
                TableName=self._registry, Key=to_wire({"name": name}), **update.request()
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise


HostRunner = Callable[..., TaskRunner]
HOST_RUNNER: HostRunner = EmulatedHost
"""What runs a host task in the emulator; the host process's entry point replaces it."""


def task_runner(
    task_arn: str,
    environment: Mapping[str, str],
    dynamodb: Any,
    *,
    now: Callable[[], datetime],
    log: IO[str],
) -> TaskRunner:
    """A host for a host task (``VIGIL_HOST_ID`` set), else the observer's container."""
    if environment.get(HOST_ID_ENV):
        return HOST_RUNNER(task_arn, environment, dynamodb, now=now, log=log)
    return ObserverContainer(task_arn, environment, dynamodb, now=now, log=log)
