"""Turns whatever delivered a tick into the tick's identity: its scheduled time.

Accepted shapes:

* EventBridge Scheduler, through the input template the ``ScheduledJob`` construct writes::

    {"vigil": {"job": "cleanup", "scheduled_time": "<aws.scheduler.scheduled-time>",
               "execution_id": "<aws.scheduler.execution-id>",
               "attempt": "<aws.scheduler.attempt-number>"}}

* An EventBridge scheduled rule (``"detail-type": "Scheduled Event"`` with its ``time``).
* A Lambda on-failure destination record (``requestPayload`` holds one of the above), so a message
  taken from a job's dead-letter queue can be redriven as it is.

Only the scheduled time identifies a tick: the execution id changes on every delivery attempt. Any
other shape is rejected before anything is written, so it fails into the dead-letter queue instead
of running a job for an invented tick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vigil.contract.jobs import SCHEDULER_INPUT_KEY
from vigil.events import MalformedEvent


@dataclass(frozen=True)
class Tick:
    job: str | None
    scheduled_at: datetime
    source: str
    execution_id: str | None = None
    delivery_attempt: int | None = None

    @property
    def redriven(self) -> bool:
        """Handed back from a dead-letter queue by an operator, as the whole destination record."""
        return self.source.startswith("redrive:")

    @property
    def key(self) -> str:
        """Sortable text of the scheduled time, whole seconds (a schedule never ticks faster)."""
        return self.scheduled_at.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_tick(event: Any) -> Tick:
    if isinstance(event, str | bytes):
        try:
            event = json.loads(event)
        except ValueError as error:
            raise MalformedEvent(f"event is not JSON: {error}") from None
    if not isinstance(event, dict):
        raise MalformedEvent(f"event must be a JSON object, got {type(event).__name__}")
    if "requestPayload" in event and "requestContext" in event:
        return _redriven(event)
    if SCHEDULER_INPUT_KEY in event:
        return _from_scheduler(event[SCHEDULER_INPUT_KEY])
    if event.get("detail-type") == "Scheduled Event":
        return Tick(job=None, scheduled_at=_timestamp(event.get("time"), "time"), source="rule")
    raise MalformedEvent(
        "event carries no scheduled time: expected a Vigil scheduler input "
        f"({{'{SCHEDULER_INPUT_KEY}': {{'scheduled_time': ...}}}}) or an EventBridge "
        f"'Scheduled Event'; got keys {sorted(event)[:10]}"
    )


def _redriven(record: dict[str, Any]) -> Tick:
    inner = parse_tick(record["requestPayload"])
    return Tick(
        job=inner.job,
        scheduled_at=inner.scheduled_at,
        source=f"redrive:{inner.source}",
        execution_id=inner.execution_id,
        delivery_attempt=inner.delivery_attempt,
    )


def _from_scheduler(payload: Any) -> Tick:
    if not isinstance(payload, dict):
        raise MalformedEvent(f"'{SCHEDULER_INPUT_KEY}' must be an object")
    job = payload.get("job")
    if job is not None and not isinstance(job, str):
        raise MalformedEvent("'job' must be a string")
    attempt = payload.get("attempt")
    try:
        delivery_attempt = int(attempt) if attempt not in (None, "") else None
    except (TypeError, ValueError):
        raise MalformedEvent(f"'attempt' must be a number, got {attempt!r}") from None
    execution_id = payload.get("execution_id")
    return Tick(
        job=job,
        scheduled_at=_timestamp(payload.get("scheduled_time"), "scheduled_time"),
        source="scheduler",
        execution_id=str(execution_id) if execution_id else None,
        delivery_attempt=delivery_attempt,
    )


def _timestamp(value: Any, field: str) -> datetime:
    if not isinstance(value, str) or not value:
        raise MalformedEvent(f"'{field}' is missing or not a string")
    if value.startswith("<aws."):
        raise MalformedEvent(f"'{field}' is an unexpanded placeholder {value!r}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise MalformedEvent(f"'{field}' is not an ISO 8601 timestamp: {value!r}") from None
    if moment.tzinfo is None:
        raise MalformedEvent(f"'{field}' has no time zone: {value!r}")
    return moment.astimezone(UTC).replace(microsecond=0)
