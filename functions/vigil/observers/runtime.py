"""The observer runtime inside the container: claim, heartbeat, checkpoints, graceful stops.

A container runs one generation of one observer. It claims that generation in the registry, then
runs the kind's ``run(ctx)`` on the main thread while a heartbeat thread proves it is alive. Every
registry write is fenced by the generation, so when the reconciler replaces this container the
next heartbeat or checkpoint fails and the container stops at once::

    reconciler:   gen 1 started ......... heartbeat stale: StopTask(gen 1), gen 2 started
    container 1:  claim | beat | beat | (blocked) ........ beat -> Fenced -> stop -> exit 3
                                                       <-- at most one interval -->

A heartbeat thread is right here (a long-running process), unlike in Lambda where threads freeze
between invocations. When it cannot reach the registry for two intervals it fences itself, so it
has stopped before the reconciler (which waits three) starts a replacement; ``ctx.stopping`` and
``ctx.sleep`` check that deadline themselves, so a heartbeat call that hangs cannot postpone it. A user loop that
ignores ``ctx.stopping`` after fencing is cut short by a hard exit after a short grace.

A pooled observer (``host`` given) runs the same way in a child process of its host, except that
its liveness is the host's: it writes no heartbeats and keeps no self-fence deadline (the host
heartbeats for all its children and stops them when it is replaced), and its claim also needs
the record to place it on that host.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from vigil import telemetry
from vigil.contract.observers import ExitCode as ExitCode
from vigil.fenced_write import RunRecordSite, once, refused_write, uncertain_effect
from vigil.observers.model import Desired, Observer, parse_kinds, validate_name
from vigil.observers.registry import (
    Fenced,
    FencedWrites,
    ObserverNotFound,
    RegistryError,
    RegistryRef,
    StopRequested,
)
from vigil.observers.registry.layout import registry_ref
from vigil.settings import Environment

if TYPE_CHECKING:
    from vigil.effects import Effects

SELF_FENCE_INTERVALS = 2
"""Missed heartbeats after which the container presumes itself replaced (the reconciler waits 3)."""
DEFAULT_FENCE_GRACE_SECONDS = 2.0

Wait = Callable[[threading.Event, float], None]
"""Waits up to ``seconds``, returning early when the event (stopping) is set: unlike a plain
:data:`vigil.clock.Sleeper`, a stop request cuts it short."""
ObserverFunction = Callable[["ObserverContext"], None]


def event_sleeper(stopping: threading.Event, seconds: float) -> None:
    stopping.wait(seconds)


class StopReason(StrEnum):
    SIGTERM = "SIGTERM"
    STOP_REQUESTED = "stop requested"
    FENCED = "fenced"
    UNCERTAIN = "uncertain effect"


_OVERRIDES = {
    StopReason.FENCED: frozenset(StopReason),
    StopReason.UNCERTAIN: frozenset({StopReason.SIGTERM, StopReason.STOP_REQUESTED}),
}
"""Which earlier reasons a later one replaces (otherwise the first reason stays)."""


@dataclass(frozen=True)
class RuntimeSettings:
    """The container's environment, read and validated once."""

    table: RegistryRef
    name: str
    generation: int
    heartbeat_seconds: int
    kinds: dict[str, str]

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RuntimeSettings:
        """Raises :class:`~vigil.settings.SettingsError` naming the variable at fault."""
        read = Environment(environ)
        return cls(
            **read.gather(
                name=lambda: read.parsed("VIGIL_OBSERVER_NAME", validate_name),
                generation=lambda: read.integer("VIGIL_OBSERVER_GENERATION", minimum=1),
                **container_readers(read),
            )
        )


def container_readers(read: Environment) -> dict[str, Callable[[], Any]]:
    """What every observer container reads, dedicated or host: ``table`` (the registry, and the
    one kind whose partition it addresses), ``heartbeat_seconds`` and ``kinds`` (readers for
    :meth:`Environment.gather`)."""
    return {
        "table": lambda: registry_ref(read, container=True),
        # No default: the reconciler's staleness depends on it.
        "heartbeat_seconds": lambda: read.integer("VIGIL_HEARTBEAT_SECONDS", minimum=1),
        "kinds": lambda: read.parsed("VIGIL_OBSERVER_KINDS", parse_kinds),
    }


class KindError(Exception):
    """The observer's kind is not configured, or its function cannot be imported."""


def load_kind(kinds: Mapping[str, str], kind: str) -> ObserverFunction:
    target = kinds.get(kind)
    if target is None:
        raise KindError(f"kind {kind!r} is not one of {sorted(kinds)}")
    module_name, _, function_name = target.rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise KindError(f"kind {kind!r}: cannot load {target}: {error}") from error
    if not callable(function):
        raise KindError(f"kind {kind!r}: {target} is not callable")
    return function  # type: ignore[no-any-return]


class ObserverContext:
    """What an observer's ``run(ctx)`` sees."""

    def __init__(self, runtime: ObserverRuntime, observer: Observer) -> None:
        self._runtime = runtime
        self.name = observer.name
        self.kind = observer.kind
        self.generation = observer.generation
        self.config: dict[str, Any] = observer.config
        self.state: dict[str, Any] | None = observer.checkpoint
        """The last checkpoint (from a previous generation too), or None on the first start."""
        self.logger: Logger = runtime.logger

    @property
    def stopping(self) -> bool:
        """True once SIGTERM arrived, the registry asked for a stop, or this generation was fenced."""
        return self._runtime.stopping

    def checkpoint(self, state: dict[str, Any]) -> None:
        """Persist ``state`` (a JSON object, at most 64 KB); raises ``Fenced`` once replaced, so
        a replaced container stops its work at the next checkpoint at the latest."""
        self._runtime.save_checkpoint(state)
        self.state = state

    def sleep(self, seconds: float) -> None:
        """Sleep, returning early when stopping."""
        self._runtime.sleep(seconds)

    @functools.cached_property
    def fenced(self) -> Effects:
        """Writes a replaced generation cannot make (:mod:`vigil.effects`), ordered by the
        generation, loaded on first use. A write refused as ``Fenced`` means this generation was
        replaced: stop, as after a refused checkpoint."""
        from vigil.effects import Effects, RunFence

        return Effects.from_env(
            RunFence.of_observer(self.name, self.generation), self._runtime.environ
        )

    def once(
        self, effect: str, check: Callable[[], bool] | None = None
    ) -> AbstractContextManager[bool]:
        """``with ctx.once("alert:incident-7") as first: if first: page()``: an effect no write can
        fence, done at most once per observer across its generations (the journal is on its
        registry record, :mod:`vigil.effects.journal`). An effect an earlier generation began and
        never recorded done: ``check()`` decides, or the observer stops UNCERTAIN (marked on its
        record, alarmed, not restarted) for a person to settle (``vigil observers settle``)."""
        return once(self._runtime.record_site(), effect, check)


class ObserverRuntime:
    def __init__(
        self,
        registry: FencedWrites,
        *,
        name: str,
        generation: int,
        kinds: Mapping[str, str],
        heartbeat_seconds: float,
        logger: Logger | None = None,
        sleeper: Wait = event_sleeper,
        monotonic: Callable[[], float] = time.monotonic,
        hard_exit: Callable[[int], None] = os._exit,
        fence_grace_seconds: float = DEFAULT_FENCE_GRACE_SECONDS,
        heartbeat_thread: bool = True,
        host: str | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._registry = registry
        self.environ = environ
        """The container's environment (what ``ctx.fenced`` reads its grants from): the
        process's on ECS; the emulator's containers share one process and pass their own."""
        self._name = name
        self._generation = generation
        self._kinds = kinds
        self._interval = heartbeat_seconds
        self._sleeper = sleeper
        self._monotonic = monotonic
        self._hard_exit = hard_exit
        self._fence_grace = fence_grace_seconds
        self._host = host
        """Pooled: the host's heartbeat is this observer's liveness (no thread, no deadline)."""
        self._threaded = heartbeat_thread and host is None
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._reason: StopReason | None = None
        self._reason_lock = threading.Lock()
        self._last_beat = monotonic()
        self._claimed = False
        """From the claim on, ``stopping`` and ``sleep`` enforce the self-fence deadline too."""
        self._task_arn: str | None = None
        self._kind = ""
        self._uncertain_error: Exception | None = None
        self.logger = logger or telemetry.logger()
        self.logger.append_keys(observer=name, generation=generation)
        if host is not None:
            self.logger.append_keys(host=host)

    # -- what the context and the signal handler call -----------------------------------------

    @property
    def stopping(self) -> bool:
        if not self._stopping.is_set():
            self._fence_if_silent()
        return self._stopping.is_set()

    @property
    def stop_reason(self) -> StopReason | None:
        return self._reason

    def request_stop(self, reason: StopReason) -> None:
        """Make ``ctx.stopping`` true; the first reason wins, except that fencing overrides all
        (a fenced container must not write its exit report) and an uncertain effect overrides a
        stop (its exit code keeps the reconciler from restarting it)."""
        with self._reason_lock:
            overrides = _OVERRIDES.get(reason, frozenset())
            if self._reason is None or self._reason in overrides:
                self._reason = reason
        self._stopping.set()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, waking at the self-fence deadline to check it on the way."""
        left = seconds
        while left > 0 and not self.stopping:
            wait = min(left, self._silence_left())
            self._sleeper(self._stopping, wait)
            left -= wait

    def record_site(self) -> RunRecordSite:
        """Where ``ctx.once`` journals: this generation's record. A journal write retries through
        transient faults until the self-fence deadline (pooled: one heartbeat interval)."""
        budget = lambda: min(self._silence_left(), float(self._interval))  # noqa: E731
        return self._registry.record_site(self._name, self._generation, budget)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        if self._reason is StopReason.FENCED:
            raise Fenced(self._name, self._generation, None)
        try:
            self._registry.checkpoint(self._name, self._generation, state)
        except Fenced as fenced:
            self._fence(str(fenced))
            raise

    # -- the heartbeat --------------------------------------------------------------------------

    def heartbeat_once(self) -> None:
        """One heartbeat: record liveness, notice a stop request or a replacement."""
        if self._reason is StopReason.FENCED:
            return
        try:
            observer = self._registry.heartbeat(self._name, self._generation)
        except Fenced as fenced:
            self._fence(str(fenced))
            return
        except (ClientError, BotoCoreError, RegistryError) as error:
            silent = self._monotonic() - self._last_beat
            self.logger.warning("heartbeat failed", extra={"error": str(error), "silent_s": silent})
            if silent >= SELF_FENCE_INTERVALS * self._interval:
                self._fence(f"no heartbeat accepted for {silent:.0f} s: presumed replaced")
            return
        self._last_beat = self._monotonic()
        self._task_arn = observer.task_arn or self._task_arn
        if observer.desired is Desired.STOPPED and not self.stopping:
            self.logger.info("stop requested in the registry")
            self.request_stop(StopReason.STOP_REQUESTED)

    def _silence_left(self) -> float:
        """Seconds until the self-fence deadline (infinite before the claim, and for a pooled
        observer, whose host fences itself and its children)."""
        if not self._claimed or self._host is not None:
            return float("inf")
        return SELF_FENCE_INTERVALS * self._interval - (self._monotonic() - self._last_beat)

    def _fence_if_silent(self) -> None:
        """The deadline holds even while the heartbeat thread is stuck in a call that hangs."""
        if self._silence_left() <= 0:
            silent = self._monotonic() - self._last_beat
            self._fence(f"no heartbeat accepted for {silent:.0f} s: presumed replaced")

    def _heartbeat_loop(self) -> None:
        while not self._done.wait(self._interval):
            self.heartbeat_once()
            if self._reason is StopReason.FENCED:
                if not self._done.wait(self._fence_grace):
                    self.logger.error("fenced and the observer did not return: exiting now")
                    sys.stdout.flush()
                    sys.stderr.flush()
                    self._hard_exit(ExitCode.FENCED)
                return

    def _fence(self, why: str) -> None:
        if self._reason is not StopReason.FENCED:
            self.logger.error("fenced: stopping at once", extra={"reason": why})
            _count(telemetry.ObserverMetric.FENCED, self._kind)
        self.request_stop(StopReason.FENCED)

    # -- the whole run --------------------------------------------------------------------------

    def run(self) -> ExitCode:
        try:
            observer = self._registry.get(self._name)
            self._kind = observer.kind
            function = load_kind(self._kinds, observer.kind)
        except (ObserverNotFound, KindError) as error:
            self.logger.error("cannot start", extra={"reason": str(error)})
            return ExitCode.BAD_CONFIGURATION
        if self.stopping:
            # SIGTERM before the claim: claiming now could only undo what the reconciler decided.
            self.logger.info("stopped before start", extra={"reason": str(self._reason)})
            return ExitCode.CLEAN
        try:
            observer = self._registry.claim_generation(
                self._name, self._generation, host=self._host
            )
        except Fenced as fenced:
            self.logger.error("fenced before start", extra={"reason": str(fenced)})
            return ExitCode.FENCED
        except StopRequested:
            self.logger.info("stop requested before start")
            self._report(ExitCode.CLEAN, "stop requested before start", stopped=True)
            return ExitCode.CLEAN
        self._task_arn = observer.task_arn
        self._last_beat = self._monotonic()
        self._claimed = True
        self.logger.append_keys(kind=observer.kind)
        self.logger.info("claimed", extra={"task_arn": observer.task_arn})

        thread = None
        if self._threaded:
            thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
            thread.start()
        crash: Exception | None = None
        try:
            function(ObserverContext(self, observer))
        except Exception as error:
            if refused_write(error):
                self._fence(str(error))
            elif (effect := uncertain_effect(error)) is not None:
                self._uncertain(effect, error)
            else:
                crash = error
        finally:
            self._done.set()
            if thread is not None:
                # A fenced container leaves at once, even with a heartbeat call still hanging.
                left_fenced = self._reason is StopReason.FENCED
                thread.join(timeout=self._fence_grace if left_fenced else None)
        return self._finish(crash)

    def _uncertain(self, effect: str, error: Exception) -> None:
        """An effect an earlier generation began and never recorded done: mark the record (which
        effect, why), count it, and stop UNCERTAIN; the reconciler does not restart it."""
        self.logger.error("uncertain effect: stopping", extra={"effect": effect})
        _count(telemetry.ObserverMetric.UNCERTAIN, self._kind)
        try:
            self._registry.mark_uncertain(self._name, self._generation, effect, str(error))
        except Fenced as fenced:
            self._fence(str(fenced))
            return
        except (RegistryError, ClientError, BotoCoreError) as failed:
            # The exit code still tells the reconciler; the alarm is on the metric.
            self.logger.warning("uncertain mark not written", extra={"error": str(failed)})
        self._uncertain_error = error
        self.request_stop(StopReason.UNCERTAIN)

    def _finish(self, crash: Exception | None) -> ExitCode:
        reason = self._reason
        if reason is StopReason.FENCED:
            return ExitCode.FENCED
        if reason is StopReason.UNCERTAIN:
            self._report(ExitCode.UNCERTAIN, str(self._uncertain_error), stopped=False)
            return ExitCode.UNCERTAIN
        if crash is not None:
            self.logger.exception("observer crashed", exc_info=crash)
            self._report(ExitCode.CRASH, f"{type(crash).__name__}: {crash}", stopped=False)
            return ExitCode.CRASH
        if reason is StopReason.STOP_REQUESTED:
            self._report(ExitCode.CLEAN, "stop requested", stopped=True)
        elif reason is StopReason.SIGTERM:
            self._report(ExitCode.CLEAN, "SIGTERM", stopped=False)
        else:
            self.logger.warning("the observer returned without being asked to stop")
            self._report(ExitCode.CLEAN, "returned without being asked to stop", stopped=False)
        self.logger.info("stopped", extra={"reason": reason.value if reason else "returned"})
        return ExitCode.CLEAN

    def _report(self, code: ExitCode, reason: str, *, stopped: bool) -> None:
        """Best effort: the exit code already tells ECS (and the reconciler) how this ended."""
        try:
            self._registry.report_exit(
                self._name,
                self._generation,
                exit_code=int(code),
                reason=reason,
                task_arn=self._task_arn,
                stopped=stopped,
            )
        except (RegistryError, ClientError, BotoCoreError) as error:
            self.logger.warning("exit report not written", extra={"error": str(error)})


def _count(metric: telemetry.ObserverMetric, kind: str) -> None:
    telemetry.count_one(metric, kind=kind or "unknown")
