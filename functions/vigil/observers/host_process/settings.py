"""A host's environment, read and validated once (one error naming every variable at fault).

The task ARN is the host's fence (its heartbeat is conditioned on it), so it comes from ECS
itself: the task metadata endpoint v4 (``$ECS_CONTAINER_METADATA_URI_V4/task``). The local
emulator and tests set ``VIGIL_TASK_ARN`` instead.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from vigil.contract.hosts import (
    HOST_ID_ENV,
    HOST_SLOTS_ENV,
    HOST_STOP_TIMEOUT_ENV,
    HOSTS_TABLE_ENV,
    TASK_ARN_ENV,
)
from vigil.observers.registry.layout import RegistryRef
from vigil.observers.runtime import container_readers
from vigil.settings import Environment, SettingsError

METADATA_ENV = "ECS_CONTAINER_METADATA_URI_V4"
METADATA_TIMEOUT_SECONDS = 2.0
DEFAULT_STOP_TIMEOUT_SECONDS = 10.0

FetchJson = Callable[[str], Any]


def fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=METADATA_TIMEOUT_SECONDS) as answer:
        return json.load(answer)


@dataclass(frozen=True)
class HostSettings:
    host_id: str
    hosts_table: str
    slots: int
    task_arn: str
    stop_timeout_seconds: float
    table: RegistryRef
    heartbeat_seconds: int
    kinds: dict[str, str]

    @classmethod
    def from_env(cls, environ: Mapping[str, str], fetch: FetchJson = fetch_json) -> HostSettings:
        """Raises :class:`~vigil.settings.SettingsError` naming the variables at fault."""
        read = Environment(environ)
        return cls(
            **read.gather(
                host_id=lambda: read.text(HOST_ID_ENV),
                hosts_table=lambda: read.text(HOSTS_TABLE_ENV),
                slots=lambda: read.integer(HOST_SLOTS_ENV, minimum=1),
                task_arn=lambda: _task_arn(read, fetch),
                stop_timeout_seconds=lambda: read.seconds(
                    HOST_STOP_TIMEOUT_ENV, timedelta(seconds=DEFAULT_STOP_TIMEOUT_SECONDS)
                ).total_seconds(),
                **container_readers(read),
            )
        )


def _task_arn(read: Environment, fetch: FetchJson) -> str:
    explicit = read.text(TASK_ARN_ENV, default="")
    if explicit:
        return explicit
    base = read.text(METADATA_ENV)
    url = f"{base.rstrip('/')}/task"
    try:
        arn = fetch(url).get("TaskARN")
    except (OSError, ValueError, AttributeError) as error:
        raise SettingsError(
            f"{METADATA_ENV}: cannot read the task ARN from {url}: {error}"
        ) from None
    if not isinstance(arn, str) or not arn:
        raise SettingsError(f"{METADATA_ENV}: {url} answered without a TaskARN")
    return arn
