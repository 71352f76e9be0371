"""A pooled host task in the emulator: the real host process, stepped on the emulator's clock.

What runs is the host's own code (:mod:`vigil.observers.host_process`): its
:class:`~vigil.observers.host_process.supervisor.HostSupervisor` with the real
:class:`~vigil.observers.host_process.heartbeat_store.HeartbeatStore` and ``HOST_EXIT`` reports, driven
through :meth:`~HostSupervisor.tick` with the simulated time instead of its ``run`` loop. Only the
children differ from ECS: instead of forked processes they are in-process
:class:`~vigil_tools.emulator.ecs.ObserverContainer` s running the unchanged observer runtime in
pooled mode (no heartbeats of their own, the claim conditioned on the host). A host signals a child
(SIGTERM: stop and hand over; SIGUSR1: fenced, write nothing; SIGKILL); here the same three reach
the child's runtime directly (:class:`ContainerChild`).

:func:`task_runner` picks what a task runs from its environment: a host (``VIGIL_HOST_ID``) or one
observer's container. ``HOST_RUNNER`` is what runs a host task (tests may substitute it).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import IO, Any, Generic, Protocol, TypeVar

from vigil.clock import ManualClock
from vigil.contract.hosts import HOST_ID_ENV, TASK_ARN_ENV
from vigil.contract.observers import ExitCode
from vigil.observers.host_process.calls import Call, Outcome
from vigil.observers.host_process.heartbeat_store import HeartbeatStore
from vigil.observers.host_process.settings import HostSettings
from vigil.observers.host_process.supervisor import HostSupervisor
from vigil.observers.registry import FencedWrites
from vigil.observers.runtime import StopReason
from vigil_tools.emulator.ecs import ObserverContainer, container_logger

T = TypeVar("T")
STOP_STEPS = 100
"""Steps a host gets to hand its children over after SIGTERM before ECS kills it."""


class TaskRunner(Protocol):
    """What the emulator steps for one task (an observer's container, or a host)."""

    task_arn: str
    exit_code: ExitCode | None

    @property
    def alive(self) -> bool: ...

    @property
    def due_at(self) -> datetime: ...

    def start(self) -> None: ...

    def step(self) -> None: ...

    def sigterm(self) -> ExitCode | None: ...

    def kill(self) -> None: ...


class ContainerChild:
    """The :class:`~vigil.observers.host_process.children.Child` protocol over an in-process container:
    the signals a host sends its child processes, delivered as the child's handlers would."""

    NO_SENTINEL = -1
    """No process to wait on: the emulator steps the host instead of letting it wait."""

    def __init__(self, container: ObserverContainer) -> None:
        self.container = container
        self.name = container.name
        self.generation = container.generation

    @property
    def exitcode(self) -> int | None:
        """As multiprocessing gives it: the runtime's code, or minus the signal that ended it
        (a container that ended without a code of its own was killed)."""
        code = self.container.exit_code
        if code is not None:
            return int(code)
        return None if self.container.alive else -int(signal.SIGKILL)

    @property
    def sentinel(self) -> int:
        return self.NO_SENTINEL

    def stop(self) -> None:
        """SIGTERM: ``ctx.stopping``, then the runtime checkpoints and reports its exit."""
        self.container.runtime.request_stop(StopReason.SIGTERM)

    def fence(self) -> None:
        """SIGUSR1: stop at once and write nothing more."""
        self.container.runtime.request_stop(StopReason.FENCED)

    def kill(self) -> None:
        self.container.kill()


class ContainerLauncher:
    """Starts each child as a pooled :class:`ObserverContainer` with the host's environment."""

    def __init__(
        self,
        task_arn: str,
        environment: Mapping[str, str],
        dynamodb: Any,
        *,
        host_id: str,
        now: Callable[[], datetime],
        log: IO[str],
    ) -> None:
        self._task_arn = task_arn
        self._environment = dict(environment)
        self._dynamodb = dynamodb
        self._host_id = host_id
        self._now = now
        self._log = log

    def start(self, name: str, generation: int) -> ContainerChild:
        environment = {
            **self._environment,
            "VIGIL_OBSERVER_NAME": name,
            "VIGIL_OBSERVER_GENERATION": str(generation),
        }
        container = ObserverContainer(
            self._task_arn,
            environment,
            self._dynamodb,
            now=self._now,
            log=self._log,
            host=self._host_id,
        )
        child = ContainerChild(container)
        container.start()
        return child


class ClockCalls:
    """The host's calls on a clock that moves only when told (a soak's :class:`ManualClock`):
    each runs at once, and whatever clock time it spends (a call that hangs moves the clock on,
    as :func:`~vigil.persist.persist`'s pauses may) is given back when it returns; its outcome
    shows only once the clock reaches the time it ended. So a host whose calls hang steps on
    while they do, as the real host's loop does beside its call threads
    (:class:`~vigil.observers.host_process.calls.ThreadCalls`). What a call writes is applied
    when it starts (a late answer's write lands early, never later)."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._ends: list[datetime] = []

    def start(self, work: Callable[[], T]) -> Call[T]:
        began = self._clock()
        outcome: Outcome[T] = Outcome()
        outcome.run(work)
        ended = self._clock()
        self._clock.set(began)
        if ended > began:
            self._ends.append(ended)
        return _Ends(outcome, ended, self._clock)

    @property
    def next_end(self) -> datetime | None:
        """When the next call still running ends (the host looks at it then)."""
        now = self._clock()
        self._ends = [end for end in self._ends if end > now]
        return min(self._ends, default=None)


class _Ends(Generic[T]):
    def __init__(self, outcome: Outcome[T], ended: datetime, clock: Callable[[], datetime]) -> None:
        self._outcome, self._ended, self._clock = outcome, ended, clock

    def done(self) -> bool:
        return self._clock() >= self._ended

    def result(self) -> T:
        return self._outcome.result()


class EmulatedHost:
    """One host task: the real supervisor, ticked on the emulator's clock by :meth:`step`."""

    def __init__(
        self,
        task_arn: str,
        environment: Mapping[str, str],
        dynamodb: Any,
        *,
        now: Callable[[], datetime],
        log: IO[str],
        calls: ClockCalls | None = None,
    ) -> None:
        """``calls``: where the host's own calls run; by default inline (a call takes no time
        on the emulator's clock), :class:`ClockCalls` where calls may hang."""
        settings = HostSettings.from_env({**environment, TASK_ARN_ENV: task_arn})
        self.task_arn = task_arn
        self.host_id = settings.host_id
        self._now = now
        self.launcher = ContainerLauncher(
            task_arn, environment, dynamodb, host_id=self.host_id, now=now, log=log
        )
        self.heartbeats = HeartbeatStore(
            dynamodb, settings.hosts_table, host_id=self.host_id, task_arn=task_arn, clock=now
        )
        self.supervisor = HostSupervisor(
            self.heartbeats,
            self.launcher,
            FencedWrites(dynamodb, settings.table, clock=now),
            slots=settings.slots,
            heartbeat_seconds=settings.heartbeat_seconds,
            stop_timeout_seconds=settings.stop_timeout_seconds,
            logger=container_logger(f"host-{self.host_id}", log, environment),
            monotonic=lambda: now().timestamp(),
            # The emulated clock stands still while a report or a beat backs off: the retry
            # budget counts the pauses, so none needs to be slept for real.
            sleep=lambda _seconds: None,
            calls=calls,
        )
        self._calls = calls
        self.exit_code: ExitCode | None = None

    @property
    def alive(self) -> bool:
        return self.exit_code is None

    @property
    def children(self) -> dict[str, ObserverContainer]:
        """The live children's containers by observer name."""
        return {
            name: child.container
            for name, child in self.supervisor.children.items()
            if isinstance(child, ContainerChild)
        }

    @property
    def fenced(self) -> str | None:
        return self.supervisor.fenced

    def start(self) -> None:
        """The host's first step: its first heartbeat, and the children it was assigned."""
        self.step()

    def step(self) -> None:
        """The supervisor's step at the clock's time, the children run until they sleep again,
        and a second step reaps (and reports) those that exited meanwhile."""
        if not self.alive:
            return
        self._tick()
        for _, container in sorted(self.children.items()):
            container.step()
        if self.alive:
            self._tick()

    def sigterm(self) -> ExitCode | None:
        """StopTask: SIGTERM to the host, which hands every child over, then exits."""
        self.supervisor.request_shutdown()
        for _ in range(STOP_STEPS):
            if not self.alive:
                return self.exit_code
            self.step()
        self.kill()  # ECS's SIGKILL once the stop timeout is over (the clock does not move here)
        return self.exit_code

    def crash_child(self, name: str) -> None:
        """One child process dies (exit 1): the host reaps and reports it (its exit code, as the
        real host reads it from multiprocessing), its other children run on."""
        container = self.children.get(name)
        if container is None:
            raise LookupError(f"host {self.host_id} runs no observer {name!r}")
        container.crash()
        self._tick()

    def kill(self) -> None:
        """The task ends at once (SIGKILL): every child with it, nothing more written."""
        for container in self.children.values():
            container.kill()
        self.exit_code = ExitCode.CRASH

    @property
    def due_at(self) -> datetime:
        """When the host next has something to do: a heartbeat, a deadline, a child's wake, the
        end of one of its calls."""
        now = self._now()
        moment = datetime.fromtimestamp(
            now.timestamp() + self.supervisor.next_wake(now.timestamp()), tz=now.tzinfo
        )
        ends = self._calls.next_end if self._calls is not None else None
        return min([moment, *(c.due_at for c in self.children.values()), *filter(None, [ends])])

    def _tick(self) -> None:
        code = self.supervisor.tick(self._now().timestamp())
        if code is not None:
            self.exit_code = code


HostRunner = Callable[..., TaskRunner]
HOST_RUNNER: HostRunner = EmulatedHost
"""What runs a host task in the emulator."""


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
