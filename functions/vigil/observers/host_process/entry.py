"""A host's entry point: ``python -m vigil.observers.main`` with ``VIGIL_HOST_ID`` set.

Exit codes as the dedicated container's: 0 after a hand-over (SIGTERM: StopTask or a Spot
interruption), 1 the host itself failed (its children are killed first: none runs on
unsupervised), 2 bad environment, 3 fenced (the host was replaced).
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import signal
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError

from vigil import telemetry
from vigil.contract.observers import ExitCode
from vigil.observers.container_client import host_client_config
from vigil.observers.host_process.calls import ThreadCalls
from vigil.observers.host_process.children import ChildConfig, Launcher, ProcessLauncher
from vigil.observers.host_process.heartbeat_store import HeartbeatStore
from vigil.observers.host_process.settings import FetchJson, HostSettings, fetch_json
from vigil.observers.host_process.supervisor import HostSupervisor
from vigil.observers.registry import FencedWrites
from vigil.settings import SettingsError


def main(
    environ: Mapping[str, str],
    *,
    client: Any = None,
    launcher: Launcher | None = None,
    fetch: FetchJson = fetch_json,
) -> int:
    log = telemetry.logger()
    try:
        settings = HostSettings.from_env(environ, fetch)
        # One attempt per call: the supervisor retries within its lease and never waits on a call.
        client = client or boto3.client(
            "dynamodb", config=host_client_config(settings.heartbeat_seconds)
        )
    except (SettingsError, BotoCoreError) as error:
        log.error("bad host configuration", extra={"reason": str(error)})
        return ExitCode.BAD_CONFIGURATION
    if launcher is None:
        forkserver = ProcessLauncher(
            ChildConfig(
                table=settings.table,
                kinds=settings.kinds,
                heartbeat_seconds=settings.heartbeat_seconds,
                host_id=settings.host_id,
            )
        )
        forkserver.warm_up()
        launcher = forkserver
    waker = SignalWaker()
    supervisor = HostSupervisor(
        HeartbeatStore(
            client, settings.hosts_table, host_id=settings.host_id, task_arn=settings.task_arn
        ),
        launcher,
        FencedWrites(client, settings.table),
        slots=settings.slots,
        heartbeat_seconds=settings.heartbeat_seconds,
        stop_timeout_seconds=settings.stop_timeout_seconds,
        logger=log,
        calls=ThreadCalls(on_done=waker.wake),
    )
    log.info("host starting", extra={"slots": settings.slots, "task_arn": settings.task_arn})

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal received: handing over", extra={"signal": signal.Signals(signum).name})
        supervisor.request_shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return int(supervisor.run(waker.wait))
    except Exception:
        log.exception("host failed: killing its children")
        supervisor.kill_children()
        return ExitCode.CRASH


class SignalWaker:
    """Ends the host's wait when a signal arrives or one of its calls ends: Python resumes an
    interrupted wait (PEP 475), so the signal also writes a byte to a pipe the wait watches
    (``signal.set_wakeup_fd``), and so does :meth:`wake` (from a call's thread)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        signal.set_wakeup_fd(self._write)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe wakes the wait already
            os.write(self._write, b"\0")

    def wait(self, sentinels: Sequence[int], timeout: float) -> None:
        ready = multiprocessing.connection.wait([*sentinels, self._read], timeout)
        if self._read in ready:
            try:
                while os.read(self._read, 512):
                    pass
            except BlockingIOError:
                pass
