"""ECS, completed where moto stops: task state change events, and observer containers in-process.

moto's ECS records tasks (RunTask, DescribeTasks, StopTask) but runs no container and sends no
events. Here, as the ECS agent would:

* :func:`container_environment` is what a task's container sees: the task definition's environment
  with the task's container overrides applied;
* :class:`ObserverContainer` runs the observer runtime of one task in a thread that moves only
  when told to (:meth:`~ObserverContainer.step`), so a demo or test interleaves containers and the
  reconciler deterministically: heartbeats fall due on the (frozen) clock, never on real time;
* :func:`task_state_change` builds the EventBridge "ECS Task State Change" event for a task as
  AWS documents it (moto's StopTask sets no ``stopCode`` and no container ``exitCode``).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from aws_lambda_powertools import Logger

from vigil.clock import iso, iso_seconds
from vigil.contract.metrics import SERVICE
from vigil.contract.observers import ExitCode
from vigil.observers.registry import ObserverRegistry
from vigil.observers.runtime import ObserverRuntime, RuntimeSettings, StopReason
from vigil_tools.emulator.author_code import forget_modules
from vigil_tools.project import find_project


def describe_task(ecs: Any, cluster: str, arn: str) -> dict[str, Any]:
    tasks = ecs.describe_tasks(cluster=cluster, tasks=[arn], include=["TAGS"])["tasks"]
    if not tasks:
        raise LookupError(f"ECS does not know task {arn}")
    return dict(tasks[0])


def container_environment(ecs: Any, task: Mapping[str, Any], container: str) -> dict[str, str]:
    """The environment ECS gives the task's ``container``: definition, then overrides."""
    definition = ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])
    environment: dict[str, str] = {}
    for spec in definition["taskDefinition"]["containerDefinitions"]:
        if spec["name"] == container:
            environment.update({e["name"]: e["value"] for e in spec.get("environment", [])})
    for override in (task.get("overrides") or {}).get("containerOverrides") or []:
        if override.get("name") == container:
            environment.update({e["name"]: e["value"] for e in override.get("environment", [])})
    return environment


def task_state_change(
    task: Mapping[str, Any],
    *,
    version: int,
    account: str,
    region: str,
    at: datetime,
    container: str,
    stop_code: str | None = None,
    exit_code: int | None = None,
    stopped_reason: str | None = None,
) -> dict[str, Any]:
    """The "ECS Task State Change" event of a described task, in its current ``lastStatus``."""
    status = str(task["lastStatus"])
    stopped = status == "STOPPED"
    entry: dict[str, Any] = {
        "containerArn": str(task["taskArn"]).replace(":task/", ":container/") + f"/{container}",
        "lastStatus": status,
        "name": container,
        "taskArn": task["taskArn"],
    }
    if stopped and exit_code is not None:
        entry["exitCode"] = exit_code
    detail: dict[str, Any] = {
        "clusterArn": task["clusterArn"],
        "taskArn": task["taskArn"],
        "taskDefinitionArn": task["taskDefinitionArn"],
        "lastStatus": status,
        "desiredStatus": "STOPPED" if stopped else str(task.get("desiredStatus", "RUNNING")),
        "launchType": task.get("launchType", "FARGATE"),
        "containers": [entry],
        "overrides": task.get("overrides") or {"containerOverrides": []},
        "startedBy": task.get("startedBy"),
        "group": task.get("group"),
        "updatedAt": iso(at),
        "version": version,
    }
    if stopped:
        detail["stopCode"] = stop_code or "EssentialContainerExited"
        detail["stoppedReason"] = (
            stopped_reason or task.get("stoppedReason") or "Essential container in task exited"
        )
        detail["stoppedAt"] = iso(at)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "ECS Task State Change",
        "source": "aws.ecs",
        "account": account,
        "time": iso_seconds(at),
        "region": region,
        "resources": [task["taskArn"]],
        "detail": detail,
    }


@dataclass
class TaskEvents:
    """ECS's events for a cluster's tasks: each task's current state, numbered as ECS numbers
    them (``detail.version`` grows with every event of a task)."""

    ecs: Any
    cluster: str
    container: str
    versions: dict[str, int] = field(default_factory=dict)

    def current(
        self,
        arn: str,
        *,
        at: datetime,
        stop_code: str | None = None,
        exit_code: int | None = None,
    ) -> dict[str, Any]:
        task = describe_task(self.ecs, self.cluster, arn)
        self.versions[arn] = self.versions.get(arn, 1) + 1
        _, _, _, region, account, _ = str(task["taskArn"]).split(":", 5)
        return task_state_change(
            task,
            version=self.versions[arn],
            account=account,
            region=region,
            at=at,
            container=self.container,
            stop_code=stop_code,
            exit_code=exit_code,
        )


class ObserverContainer:
    """One task's container: ``python -m vigil.observers.main`` as an in-process runtime.

    The runtime runs on its own thread, but only ever one of the demo and the container moves: the
    container runs from :meth:`step` until its observer sleeps again (or exits), then hands control
    back. Its heartbeat runs at the start of a step once an interval has passed on the clock, as
    the heartbeat thread would have done meanwhile. ``stdout`` takes what the container prints
    (EMF metrics) while it runs.
    """

    def __init__(
        self,
        task_arn: str,
        environment: Mapping[str, str],
        dynamodb: Any,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        log: IO[str],
        host: str | None = None,
        functions: Path | None = None,
    ) -> None:
        """``functions``: where the team's code is imported from (default: the project's)."""
        self.task_arn = task_arn
        self._functions = functions
        self.settings = RuntimeSettings.from_env(environment)
        self.name = self.settings.name
        self.generation = self.settings.generation
        self._now = now
        self._log = log
        self._interval = timedelta(seconds=self.settings.heartbeat_seconds)
        # A pooled child never heartbeats: its host's heartbeat is its liveness.
        self._next_beat = datetime.max.replace(tzinfo=UTC) if host else now() + self._interval
        self.wakes_at = now()
        logger = container_logger(f"{self.name}-{self.generation}", log, environment)
        self.runtime = ObserverRuntime(
            ObserverRegistry(dynamodb, self.settings.table),
            name=self.name,
            generation=self.generation,
            kinds=self.settings.kinds,
            heartbeat_seconds=self.settings.heartbeat_seconds,
            logger=logger,
            sleeper=self._sleep,
            monotonic=lambda: now().timestamp(),
            heartbeat_thread=False,
            host=host,
            environ=dict(environment),
        )
        self.heartbeats = 0
        self.refused: str | None = None
        """Which write of this container was refused as fenced: "heartbeat" or "checkpoint"."""
        self.exit_code: ExitCode | None = None
        self._resume = threading.Semaphore(0)
        self._paused = threading.Semaphore(0)
        self._error: BaseException | None = None
        self._killed = False
        self._thread = threading.Thread(
            target=self._main, name=f"container-{self.name}-{self.generation}", daemon=True
        )

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.exit_code is None

    def start(self) -> None:
        """The container starts: claims its generation, runs until the observer first sleeps."""
        with self._output():
            self._thread.start()
            self._paused.acquire()
        self._raise()

    def step(self) -> None:
        """Let the container run until its observer sleeps again (or it exits)."""
        if not self.alive:
            return
        with self._output():
            self._resume.release()
            self._paused.acquire()
        self._raise()

    def sigterm(self) -> ExitCode | None:
        """What ECS's StopTask does to the container: SIGTERM, then it finishes its loop."""
        self.runtime.request_stop(StopReason.SIGTERM)  # as main.py's signal handler does
        while self.alive:
            self.step()
        return self.exit_code

    def crash(self) -> None:
        """The process dies of an error (exit 1) at once: nothing more written."""
        self.kill()
        self.exit_code = ExitCode.CRASH

    def kill(self) -> None:
        """The process ends at once (SIGKILL): no exit report, nothing more written."""
        if not self.alive:
            return
        self._killed = True
        self._resume.release()
        self._paused.acquire()
        self._thread.join()  # it is unwinding: once joined, ``alive`` is False for every reader
        self._error = None

    # -- inside the container's thread ------------------------------------------------------------

    def _main(self) -> None:
        try:
            # A new container is a new process: the kind's module and the team's code are
            # imported afresh, with their module state (what an earlier generation left is gone).
            kinds = (target.rpartition(".")[0] for target in self.settings.kinds.values())
            forget_modules(self._functions or find_project().functions, also=kinds)
            self.exit_code = self.runtime.run()
            if self.exit_code is ExitCode.FENCED and self.refused is None:
                self.refused = "checkpoint"
        except BaseException as error:  # handed to the demo's thread
            self._error = error
        finally:
            self._paused.release()

    @property
    def due_at(self) -> datetime:
        """When this container next has something to do: its observer wakes, or a heartbeat."""
        return min(self.wakes_at, self._next_beat)

    def _sleep(self, stopping: threading.Event, seconds: float) -> None:
        """Sleep on the clock: each step heartbeats when due; the observer wakes once ``seconds``
        have passed (or a stop is requested), as its sleep would with the heartbeat thread beside."""
        self.wakes_at = self._now() + timedelta(seconds=seconds)
        while True:
            self._paused.release()
            self._resume.acquire()
            if self._killed:
                raise _Killed()
            if self._now() >= self._next_beat:
                self.runtime.heartbeat_once()
                self._next_beat = self._now() + self._interval
                if self.runtime.stop_reason is StopReason.FENCED:
                    self.refused = self.refused or "heartbeat"
                else:
                    self.heartbeats += 1
            if stopping.is_set() or self._now() >= self.wakes_at:
                return

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _output(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.redirect_stdout(self._log)


class _Killed(BaseException):
    """Unwinds a killed container's thread past the runtime's ``except Exception``."""


def container_logger(label: str, log: IO[str], environment: Mapping[str, str]) -> Logger:
    """A logger of its own (the name is Python's logger's), so its handler is this ``log``."""
    logger = Logger(
        service=f"vigil-container-{label}-{uuid.uuid4().hex[:6]}", logger_handler=_handler(log)
    )
    logger.append_keys(service=environment.get("POWERTOOLS_SERVICE_NAME", SERVICE))
    return logger


def _handler(stream: IO[str]) -> Any:
    import logging

    return logging.StreamHandler(stream)
