"""A task function's settings, read once from the environment ``BackgroundTask`` gives it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from vigil.contract.tasks import TaskEnv
from vigil.settings import Environment

MAX_BACKOFF = timedelta(hours=12)
"""SQS's longest visibility timeout: no retry can wait longer."""


@dataclass(frozen=True)
class TaskSettings:
    task: str
    table: str
    queue_url: str
    dead_letter_url: str
    retries: int = 3
    backoff: timedelta = timedelta(seconds=30)
    ordered: bool = False
    retention: timedelta = timedelta(days=7)
    lease_margin: timedelta = timedelta(seconds=30)
    """Kept past the invocation's deadline on the lease (clock skew), and the time before the
    deadline at which no further message of a batch is claimed."""
    event_bus: str = "default"

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> TaskSettings:
        """Raises :class:`~vigil.settings.SettingsError` naming the variable at fault."""
        read = Environment(env)
        return cls(
            **read.gather(
                task=lambda: read.text(TaskEnv.NAME),
                table=lambda: read.text(TaskEnv.TABLE),
                queue_url=lambda: read.text(TaskEnv.QUEUE_URL),
                dead_letter_url=lambda: read.text(TaskEnv.DEAD_LETTER_URL),
                retries=lambda: read.integer(TaskEnv.RETRIES, minimum=0, default=cls.retries),
                backoff=lambda: read.seconds(TaskEnv.BACKOFF_SECONDS, cls.backoff),
                ordered=lambda: read.flag(TaskEnv.ORDERED, cls.ordered),
                retention=lambda: read.seconds(TaskEnv.RETENTION_SECONDS, cls.retention),
                lease_margin=lambda: read.seconds(TaskEnv.LEASE_MARGIN_SECONDS, cls.lease_margin),
                event_bus=lambda: read.text(TaskEnv.EVENT_BUS, cls.event_bus),
            )
        )
