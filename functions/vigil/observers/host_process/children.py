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

The forkserver is the children's parent, and multiprocessing learns a child's exit status from it.
If the forkserver dies (OOM killer, a bug), multiprocessing reports exit code 255 for every child
at once although they still run. So a child's liveness is read from the process itself, through
a pidfd (Linux: immune to pid reuse, readable once the process has ended): a child still running
is not exited, whatever multiprocessing says; it stays supervised (the host signals it through its
pidfd, waits on that pidfd) until it really ends, and then its status, which died with the
forkserver, reads :data:`~vigil.observers.host_process.exits.STATUS_LOST` (unless the host reaps it
itself, as PID 1 of its container does). multiprocessing starts a new forkserver for the next
child by itself. Without pidfds (not Linux) an orphaned child cannot be watched safely: it is
killed as soon as the forkserver's death is seen, and reported.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from vigil.observers.host_process.exits import STATUS_LOST

if TYPE_CHECKING:
    from vigil.observers.registry.layout import RegistryRef

PRELOADED = (
    "boto3",
    "botocore.client",
    "aws_lambda_powertools",
    "aws_lambda_powertools.metrics",
    "vigil.observers.runtime",
    "vigil.observers.host_process.children",
)
"""Imported once in the forkserver, shared by every child."""
WARM = "vigil.observers.host_process.warm"
"""Imported last: the shared botocore session, then a frozen GC (see that module)."""
_HANDLED = (signal.SIGTERM, signal.SIGUSR1)
FORKSERVER_GONE = 255
"""What multiprocessing reports for a child when it cannot read the status from the forkserver."""


@dataclass(frozen=True)
class ChildConfig:
    """What every child of one host needs (picklable: it crosses into the forkserver)."""

    table: str | RegistryRef
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
        self._pidfd = _open_pidfd(int(process.pid))
        self._orphaned = False
        """The forkserver died while this child ran: its exit status will not come from there."""
        self._final: int | None = None

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    @property
    def orphaned(self) -> bool:
        return self._orphaned

    @property
    def exitcode(self) -> int | None:
        """None while the process runs (whatever multiprocessing says), then its exit status."""
        if self._final is not None:
            return self._final
        code = self._process.exitcode
        if code is None:
            return None
        if code == FORKSERVER_GONE and not self._orphaned and self._running():
            self._orphaned = True
            if self._pidfd is None:
                self._kill_by_pid()  # cannot be watched safely: ended now, while its pid is its own
        if self._orphaned:
            if self._running():
                return None
            code = self._reaped_status()
        self._final = int(code)
        self._close()
        return self._final

    @property
    def sentinel(self) -> int:
        """Readable once the child has ended: multiprocessing's, or the pidfd once orphaned
        (multiprocessing's then reads as ended for ever)."""
        if self._orphaned and self._pidfd is not None:
            return self._pidfd
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
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)
        elif self.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def _running(self) -> bool:
        if self._pidfd is not None:
            readable, _, _ = select.select([self._pidfd], [], [], 0)
            return not readable
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def _kill_by_pid(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _reaped_status(self) -> int:
        """The status of an orphan that has ended, if this process is its reaper (PID 1 of the
        container, or a subreaper); else it is lost."""
        if self._pidfd is None:
            return STATUS_LOST
        try:
            ended = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            return STATUS_LOST
        if ended is None:
            return STATUS_LOST
        return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, or it has already been reaped
        return None


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

    def warm_up(self) -> None:
        """Start the forkserver and wait for its preload imports (seconds) before the host's
        first heartbeat, so starting the first child does not eat into the heartbeat's lease:
        one child that does nothing is started and waited for."""
        process = self._context.Process(target=_nothing, name="warm-up")  # type: ignore[attr-defined]
        process.start()
        process.join()

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


def _nothing() -> None:
    """The warm-up child's body."""


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
    from vigil.observers.container_client import client_config
    from vigil.observers.host_process import warm
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
