"""ECS's side, live: each task the reconciler runs becomes a real local process.

The process runs the container's command (the task definition's, else the image's ``CMD`` from
its Dockerfile) in the functions folder the image is built from, with the task's environment (the
definition's, then the task's overrides) plus the endpoint's address and fake credentials. So an
observer task (``VIGIL_OBSERVER_NAME``/``GENERATION``) or a pooled host task (``VIGIL_HOST_ID``)
runs exactly what its container would; ``ECS_CONTAINER_METADATA_URI_V4`` points at the task's
metadata on the local endpoint (:mod:`.task_metadata`), where a host reads its task ARN. When the process exits ECS stops the task; StopTask sends
it SIGTERM, then SIGKILL after the container's stop timeout; either way the reconciler receives the
task's STOPPED event with the exit code, as EventBridge would deliver it.

Each container is a session of its own (its process group): as ``docker stop`` does, SIGTERM goes to
the first process, which hands over to its children; the SIGKILL after the stop timeout, and the end
of the first process (the container ends with it), kill the whole group, so a pooled host's
observer children or a kind's subprocesses never outlive their container.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from vigil_tools.emulator.ecs import TaskEvents, container_environment, describe_task
from vigil_tools.emulator.template import Synthesized
from vigil_tools.local.task_metadata import ENV as METADATA_ENV
from vigil_tools.local.task_metadata import TaskMetadata

DEFAULT_STOP_TIMEOUT = 30.0


def image_command(synth: Synthesized, functions: Path) -> list[str]:
    """The ``CMD`` (exec form) of the Dockerfile the template's container image is built from."""
    for image in synth.assets.get("dockerImages", {}).values():
        dockerfile = functions / image["source"].get("dockerFile", "Dockerfile")
        if not dockerfile.is_file():
            continue
        for line in reversed(dockerfile.read_text().splitlines()):
            if line.strip().upper().startswith("CMD "):
                command = json.loads(line.strip()[4:])
                return [str(part) for part in command]
    raise LookupError(f"no Dockerfile with an exec-form CMD under {functions} for the image")


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    stop_timeout: float
    signalled_at: float | None = None


@dataclass
class ContainerProcesses:
    """One process per running task of ``cluster``; :meth:`sync` brings them in line with ECS."""

    session: Any
    cluster: str
    container: str
    command: list[str]
    functions: Path
    endpoint_env: Mapping[str, str]
    log_dir: Path
    deliver: Callable[[dict[str, Any]], object]
    """Hands a task state change event to the reconciler."""
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    held: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    """A block Ctrl-C waits for (``Interrupts.held``): spawning a process and recording it."""
    metadata: TaskMetadata | None = None
    """ECS's task metadata endpoint, served by the local endpoint; None: no variable set."""
    running: dict[str, Running] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    versions: dict[str, int] = field(default_factory=dict)

    @functools.cached_property
    def ecs(self) -> Any:
        """One client for the loop's every round (a new one each time cost more than the call)."""
        return self.session.client("ecs")

    def sync(self) -> None:
        tasks = self.ecs.list_tasks(cluster=self.cluster, desiredStatus="RUNNING")["taskArns"]
        for arn in tasks:
            if arn not in self.running and arn not in self.reported:
                self._start(arn)
        stopped = set(
            self.ecs.list_tasks(cluster=self.cluster, desiredStatus="STOPPED")["taskArns"]
        )
        for arn, run in list(self.running.items()):
            code = run.process.poll()
            if code is None and arn in stopped:
                self._signal(run)
                continue
            if code is None:
                continue
            _kill_group(run.process)  # the container ends with its first process
            del self.running[arn]
            run.log.close()
            if self.metadata is not None:
                self.metadata.forget(arn)
            if arn not in stopped:  # it exited by itself: ECS stops the task
                self.ecs.stop_task(
                    cluster=self.cluster, task=arn, reason="Essential container in task exited"
                )
            self._report(
                arn, code, "UserInitiated" if run.signalled_at else "EssentialContainerExited"
            )
        for arn in stopped - set(self.running) - self.reported:
            self._report(arn, None, "UserInitiated")  # stopped before it had a process

    def pids(self) -> list[int]:
        return [run.process.pid for run in self.running.values()]

    def stop_all(self, grace: float = 10.0) -> None:
        """SIGTERM every first process, SIGKILL every container's whole group once its first process
        has ended or ``grace`` seconds have passed, reap them all."""
        for run in self.running.values():
            _send(run.process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for run in self.running.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            _kill_group(run.process)
            run.process.wait()
            run.log.close()
        self.running.clear()

    def _start(self, arn: str) -> None:
        task = describe_task(self.ecs, self.cluster, arn)
        environment = container_environment(self.ecs, task, self.container)
        name = environment.get("VIGIL_OBSERVER_NAME") or environment.get("VIGIL_HOST_ID") or "task"
        generation = environment.get("VIGIL_OBSERVER_GENERATION", "")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = (
            self.log_dir / f"container-{name}{'-gen' + generation if generation else ''}.log"
        ).open("ab")
        command = [sys.executable if part == "python" else part for part in self.command]
        stop_timeout = _stop_timeout(self.ecs, task, self.container)
        if self.metadata is not None:
            environment[METADATA_ENV] = self.metadata.register(task, self.container)
        try:
            # Ctrl-C waits for the record: a process started but not recorded is never stopped.
            with self.held():
                process = subprocess.Popen(
                    command,
                    cwd=self.functions,
                    env={
                        **_base_environment(),
                        **environment,
                        **self.endpoint_env,
                        "PYTHONPATH": str(self.functions),
                    },
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C reaches `vigil local up`, which stops it
                )
                self.running[arn] = Running(process, log, stop_timeout)
        except BaseException:
            if arn not in self.running:
                log.close()
            raise

    def _signal(self, run: Running) -> None:
        if run.signalled_at is None:
            run.signalled_at = time.monotonic()
            _send(run.process, signal.SIGTERM)
        elif time.monotonic() - run.signalled_at > run.stop_timeout:
            _kill_group(run.process)

    def _report(self, arn: str, exit_code: int | None, stop_code: str) -> None:
        self.reported.add(arn)
        events = TaskEvents(self.ecs, self.cluster, self.container, self.versions)
        # a process killed by signal N reports -N; a container's exit code is 128 + N
        code = exit_code if exit_code is None or exit_code >= 0 else 128 - exit_code
        self.deliver(events.current(arn, at=self.now(), stop_code=stop_code, exit_code=code))


def _base_environment() -> dict[str, str]:
    """What a container has besides its task's variables: a PATH, a locale, nothing of ours."""
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SYSTEMROOT")
    return {k: v for k, v in os.environ.items() if k in keep}


def _stop_timeout(ecs: Any, task: Mapping[str, Any], container: str) -> float:
    definition = ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])
    for spec in definition["taskDefinition"]["containerDefinitions"]:
        if spec["name"] == container and spec.get("stopTimeout"):
            return float(spec["stopTimeout"])
    return DEFAULT_STOP_TIMEOUT


def _send(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of the container (its session, led by ``process``). Called before
    the leader is reaped, or just after, while its id still names the group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
