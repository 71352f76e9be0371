"""A task function's settings, read once from the environment ``BackgroundTask`` gives it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from vigil.contract.tasks import (
    DEFAULT_COMPLETION_EVENTS,
    CompletionEvents,
    RateLimit,
    TaskEnv,
)
from vigil.settings import Environment

MAX_BACKOFF = timedelta(hours=12) - timedelta(minutes=15 + 5)
"""The longest a message can be set to come back (a retry's backoff, a busy task's wait). SQS
allows a visibility of at most 12 hours *from the message's receipt*, and refuses more; by the
time the guard asks, the message has been in flight for up to a batching window (5 min) and the
invocation so far (at most Lambda's 15 min). Asking for the full 12 hours would be refused and
the retry would come back after the queue's visibility timeout instead, far too early."""


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
    completion_events: CompletionEvents = DEFAULT_COMPLETION_EVENTS
    results_bucket: str = ""
    """Where a result over ``RESULT_INLINE_BYTES`` goes (empty: every result on the record)."""
    rate_limit: RateLimit | None = None
    """At most so many starts a period across every invocation (:mod:`vigil.tasks.rate`)."""
    scheduler_role_arn: str = ""
    """What a flow's wake-up beyond SQS's 15-minute delay is scheduled with (empty: no sleep or
    wait beyond 15 minutes)."""
    schedule_group: str = ""
    max_duration: timedelta | None = None
    """``BackgroundTask(max_duration=)``: the first claim writes the record's deadline (the
    tasks audit finds it stuck past that); None: no deadline."""
    priority_queue_urls: Mapping[str, str] = field(default_factory=dict)
    """Each declared priority level's queue: a message's visibility is set on its own queue."""

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
                completion_events=lambda: read.choice(
                    TaskEnv.COMPLETION_EVENTS, CompletionEvents, cls.completion_events
                ),
                results_bucket=lambda: read.text(TaskEnv.RESULTS_BUCKET, cls.results_bucket),
                rate_limit=lambda: (
                    read.parsed(TaskEnv.RATE_LIMIT, RateLimit.parse)
                    if read.present(TaskEnv.RATE_LIMIT)
                    else None
                ),
                scheduler_role_arn=lambda: read.text(
                    TaskEnv.SCHEDULER_ROLE_ARN, cls.scheduler_role_arn
                ),
                schedule_group=lambda: read.text(TaskEnv.SCHEDULE_GROUP, cls.schedule_group),
                max_duration=lambda: (
                    read.seconds(TaskEnv.MAX_DURATION_SECONDS, timedelta(0))
                    if read.present(TaskEnv.MAX_DURATION_SECONDS)
                    else None
                ),
                priority_queue_urls=lambda: (
                    read.parsed(TaskEnv.PRIORITY_QUEUE_URLS, _levels)
                    if read.present(TaskEnv.PRIORITY_QUEUE_URLS)
                    else {}
                ),
            )
        )


def _levels(raw: str) -> dict[str, str]:
    """``{"high": "https://sqs..."}``; anything else is a ValueError (a SettingsError)."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError("must be a JSON object of level names to queue URLs") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ValueError("must be a JSON object of level names to queue URLs")
    return value
