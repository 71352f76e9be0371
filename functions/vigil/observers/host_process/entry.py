"""A host's entry point: ``python -m vigil.observers.main`` with ``VIGIL_HOST_ID`` set.

Exit codes as the dedicated container's: 0 after a hand-over (SIGTERM: StopTask or a Spot
interruption), 2 bad environment, 3 fenced (the host was replaced).
"""

from __future__ import annotations

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
from vigil.observers.container_client import client_config
from vigil.observers.host_process.children import ChildConfig, Launcher, ProcessLauncher
from vigil.observers.host_process.heartbeat_store import HeartbeatStore
from vigil.observers.host_process.settings import FetchJson, HostSettings, fetch_json
from vigil.observers.host_process.supervisor import BEATS_PER_INTERVAL, HostSupervisor
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
        beats = client or boto3.client(
            # A heartbeat call (retries included) must return well inside half an interval, the
            # time its lease leaves for it (see the supervisor): read timeouts of I/12.
            "dynamodb",
            config=client_config(settings.heartbeat_seconds / (2 * BEATS_PER_INTERVAL)),
        )
        client = client or boto3.client(
            "dynamodb", config=client_config(settings.heartbeat_seconds)
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
    supervisor = HostSupervisor(
        HeartbeatStore(
            beats, settings.hosts_table, host_id=settings.host_id, task_arn=settings.task_arn
        ),
        launcher,
        FencedWrites(client, settings.table),
        slots=settings.slots,
        heartbeat_seconds=settings.heartbeat_seconds,
        stop_timeout_seconds=settings.stop_timeout_seconds,
        logger=log,
    )
    log.info("host starting", extra={"slots": settings.slots, "task_arn": settings.task_arn})

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal received: handing over", extra={"signal": signal.Signals(signum).name})
        supervisor.request_shutdown()

    waker = SignalWaker()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return int(supervisor.run(waker.wait))


class SignalWaker:
    """Ends the host's wait when a signal arrives: Python resumes an interrupted wait (PEP 475),
    so the signal also writes a byte to a pipe the wait watches (``signal.set_wakeup_fd``)."""

    def __init__(self) -> None:
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)

    def wait(self, sentinels: Sequence[int], timeout: float) -> None:
        ready = multiprocessing.connection.wait([*sentinels, self._read], timeout)
        if self._read in ready:
            try:
                while os.read(self._read, 512):
                    pass
            except BlockingIOError:
                pass
