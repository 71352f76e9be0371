"""Container entry point: ``python -m vigil.observers.main``.

A dedicated task runs one observer (``VIGIL_OBSERVER_NAME`` and ``VIGIL_OBSERVER_GENERATION``); a
pooled host task (``VIGIL_HOST_ID``) runs many, see :mod:`vigil.observers.host_process`.

Exit codes (the reconciler and ECS read them): 0 clean stop, 1 crash in the observer's code,
2 bad configuration or environment, 3 fenced (this generation was replaced).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError

from vigil import telemetry
from vigil.contract.hosts import HOST_ID_ENV
from vigil.observers.container_client import client_config
from vigil.observers.registry import FencedWrites
from vigil.observers.runtime import ExitCode, ObserverRuntime, RuntimeSettings, StopReason
from vigil.settings import SettingsError


def main(environ: Mapping[str, str] | None = None, client: Any = None) -> int:
    environ = os.environ if environ is None else environ
    if environ.get(HOST_ID_ENV, "").strip():
        from vigil.observers.host_process.entry import (
            main as host_main,
        )  # only hosts pay its imports

        return host_main(environ, client=client)
    log = telemetry.logger()
    try:
        settings = RuntimeSettings.from_env(environ)
        client = client or boto3.client(
            "dynamodb", config=client_config(settings.heartbeat_seconds)
        )
    except (SettingsError, BotoCoreError) as error:
        log.error("bad configuration", extra={"reason": str(error)})
        return ExitCode.BAD_CONFIGURATION
    runtime = ObserverRuntime(
        FencedWrites(client, settings.table),
        name=settings.name,
        generation=settings.generation,
        kinds=settings.kinds,
        heartbeat_seconds=settings.heartbeat_seconds,
        logger=log,
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal received", extra={"signal": signal.Signals(signum).name})
        runtime.request_stop(StopReason.SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return int(runtime.run())


if __name__ == "__main__":
    sys.exit(main())
