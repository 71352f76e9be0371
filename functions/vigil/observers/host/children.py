"""Child processes: one per observer on a host, and what runs inside one.

Each observer gets its own process, so an exception, an ``os._exit``, a segfault or a hang ends
that process only; the host sees it through the process's sentinel and exit code. Processes come
from a multiprocessing *forkserver* whose server has already imported boto3, Powertools, the
runtime and the kinds' modules: a child is a fork of that warm process, so its start is fast and
the pages of those modules are shared between children (copy-on-write) instead of loaded K times.

Signals are the host's only channel into a child (no shared state to corrupt):

- SIGTERM: stop and hand over (``ctx.stopping`` becomes true; the runtime checkpoints and writes
  its own exit report as a dedicated container does);
- SIGUSR1: fenced (the host was replaced): stop at once, write nothing more;
- SIGKILL: the host's last word to a child that ignored a stop past the stop timeout.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

PRELOADED = (
    "boto3",
    "botocore.client",
    "aws_lambda_powertools",
    "aws_lambda_powertools.metrics",
    "vigil.observers.runtime",
    "vigil.observers.host.children",
)
"""Imported once in the forkserver, shared by every child."""
WARM = "vigil.observers.host.warm"
"""Imported last: the shared botocore session, then a frozen GC (see that module)."""
_HANDLED = (signal.SIGTERM, signal.SIGUSR1)


@dataclass(frozen=True)
class ChildConfig:
    """What every child of one host needs (picklable: it crosses into the forkserver)."""

    table: str
    kinds: dict[str, str]
    heartbeat_seconds: int
    host_id: str
    environ: dict[str, str] = field(default_factory=dict)
    """Variables the child sets before it builds its clients (the emulator's endpoint in tests);
    empty on ECS, where the host's environment is already the child's."""


class Child(Protocol):
    """One observer's process as the supervisor handles it (tests substitute fakes)."""

    name: str
    generation: int

    @property
    def exitcode(self) -> int | None: ...

    @property
    def sentinel(self) -> int: ...

    def stop(self) -> None: ...

    def fence(self) -> None: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    def start(self, name: str, generation: int) -> Child: ...


class ProcessChild:
    def __init__(self, process: Any, name: str, generation: int) -> None:
        self._process = process
        self.name = name
        self.generation = generation

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    @property
    def exitcode(self) -> int | None:
        code = self._process.exitcode
        return None if code is None else int(code)

    @property
    def sentinel(self) -> int:
        return int(self._process.sentinel)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def fence(self) -> None:
        self._signal(signal.SIGUSR1)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def join(self, timeout: float | None = None) -> None:
        self._process.join(timeout)

    def _signal(self, signum: int) -> None:
        # One that exited between the check and the signal is seen by the next reap.
        if self._process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._process.pid, signum)


class ProcessLauncher:
    """Starts children from a forkserver (or ``spawn``, where forkserver is unavailable)."""

    def __init__(
        self,
        config: ChildConfig,
        *,
        method: str = "forkserver",
        preload: Sequence[str] = (),
    ) -> None:
        self._config = config
        self._context = multiprocessing.get_context(method)
        if method == "forkserver":
            kind_modules = {target.rpartition(".")[0] for target in config.kinds.values()}
            # Takes effect when the server starts (the first child); a module that fails to
            # import there is skipped by multiprocessing and imported by the child itself.
            modules = [*PRELOADED, *preload, *sorted(kind_modules), WARM]
            self._context.set_forkserver_preload(modules)

    def start(self, name: str, generation: int) -> ProcessChild:
        process = self._context.Process(  # type: ignore[attr-defined]
            target=child_main,
            args=(self._config, name, generation),
            name=f"observer:{name}:{generation}",
            # Not daemonic: an observer may start processes of its own. The host always waits
            # for (or kills) its children before it exits.
            daemon=False,
        )
        process.start()
        return ProcessChild(process, name, generation)


def child_main(config: ChildConfig, name: str, generation: int) -> None:
    """The child process: today's runtime for one (name, generation), pooled on its host."""
    # Block the host's signals until the runtime can take them; one sent meanwhile is pending,
    # not lost (and does not kill the child before it could write anything).
    signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the host, which stops us
    os.environ.update(config.environ)
    sys.exit(int(_run(config, name, generation)))


def _run(config: ChildConfig, name: str, generation: int) -> int:
    import boto3

    from vigil import telemetry
    from vigil.observers.host import warm
    from vigil.observers.main import client_config
    from vigil.observers.registry import FencedWrites
    from vigil.observers.runtime import ObserverRuntime, StopReason

    session = boto3.session.Session(botocore_session=warm.SESSION)
    client = session.client("dynamodb", config=client_config(config.heartbeat_seconds))
    runtime = ObserverRuntime(
        FencedWrites(client, config.table),
        name=name,
        generation=generation,
        kinds=config.kinds,
        heartbeat_seconds=config.heartbeat_seconds,
        logger=telemetry.logger(),
        host=config.host_id,
    )
    reasons: Mapping[int, StopReason] = {
        signal.SIGTERM: StopReason.SIGTERM,
        signal.SIGUSR1: StopReason.FENCED,
    }

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        runtime.logger.info("told to stop by the host", extra={"reason": reasons[signum].value})
        runtime.request_stop(reasons[signum])

    for signum in _HANDLED:
        signal.signal(signum, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)
    return int(runtime.run())
