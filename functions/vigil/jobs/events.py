"""Turns whatever delivered a tick into the tick's identity: its scheduled time.

Accepted shapes:

* EventBridge Scheduler, through the input template the ``ScheduledJob`` construct writes::

    {"vigil": {"job": "cleanup", "scheduled_time": "<aws.scheduler.scheduled-time>",
               "execution_id": "<aws.scheduler.execution-id>",
               "attempt": "<aws.scheduler.attempt-number>"}}

* An EventBridge scheduled rule (``"detail-type": "Scheduled Event"`` with its ``time``).
* A manual tick, sent by the jobs-control function (run now, run a given tick, backfill) through
  the same asynchronous invocation as a scheduled delivery::

    {"vigil": {"job": "cleanup", "scheduled_time": "2026-11-22T12:00:00.412Z",
               "trigger": "now" | "at" | "backfill", "requested_by": "<caller ARN>",
               "overlap": "allow"}}

  A run-now tick keeps its milliseconds, so its key never equals a scheduled tick's.
* A Lambda on-failure destination record (``requestPayload`` holds one of the above), so a message
  taken from a job's dead-letter queue can be redriven as it is.

Only the scheduled time identifies a tick: the execution id changes on every delivery attempt. Any
other shape is rejected before anything is written, so it fails into the dead-letter queue instead
of running a job for an invented tick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from vigil.clock import iso, iso_seconds
from vigil.contract.jobs import SCHEDULER_INPUT_KEY
from vigil.events import MalformedEvent


class Trigger(StrEnum):
    """Who asked for a tick: the schedule, or an operator through the jobs-control API."""

    SCHEDULE = "schedule"
    NOW = "now"
    """Run now: a fresh tick of its own (millisecond key)."""
    AT = "at"
    """Run a given scheduled tick again (one recorded MISSED, FAILED, PAUSED or SKIPPED)."""
    BACKFILL = "backfill"
    """Run a past scheduled tick a rerun may take (not SUCCEEDED, UNCERTAIN nor FENCED)."""


@dataclass(frozen=True)
class Tick:
    job: str | None
    scheduled_at: datetime
    source: str
    execution_id: str | None = None
    delivery_attempt: int | None = None
    trigger: Trigger = Trigger.SCHEDULE
    requested_by: str | None = None
    overlap: str | None = None
    """An operator's override of the job's overlap policy (only ``allow``)."""
    request_id: str | None = None
    """The management API request behind a manual tick (see ``RunTerms.request_id``)."""

    @property
    def manual(self) -> bool:
        """Asked for by an operator: runs whatever its lateness, like a redrive."""
        return self.trigger is not Trigger.SCHEDULE

    @property
    def rerun(self) -> bool:
        """A scheduled tick run again on request: any record but SUCCEEDED may be taken over."""
        return self.trigger in (Trigger.AT, Trigger.BACKFILL)

    @property
    def redriven(self) -> bool:
        """Handed back from a dead-letter queue by an operator, as the whole destination record."""
        return self.source.startswith("redrive:")

    @property
    def key(self) -> str:
        """Sortable text of the scheduled time, whole seconds (a schedule never ticks faster);
        a run-now tick adds milliseconds, so it can never take a scheduled tick's key."""
        return tick_key(self.scheduled_at, self.trigger is Trigger.NOW)


def tick_key(moment: datetime, with_ms: bool = False) -> str:
    return iso(moment) if with_ms else iso_seconds(moment)


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
    return replace(inner, source=f"redrive:{inner.source}")


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
    trigger = _trigger(payload)
    scheduled_at = _timestamp(
        payload.get("scheduled_time"), "scheduled_time", keep_ms=trigger is Trigger.NOW
    )
    return Tick(
        job=job,
        scheduled_at=scheduled_at,
        source="scheduler" if trigger is Trigger.SCHEDULE else f"manual:{trigger.value}",
        execution_id=str(execution_id) if execution_id else None,
        delivery_attempt=delivery_attempt,
        trigger=trigger,
        requested_by=str(payload["requested_by"]) if payload.get("requested_by") else None,
        overlap=_overlap(payload.get("overlap")),
        request_id=str(payload["request_id"]) if payload.get("request_id") else None,
    )


def _trigger(payload: dict[str, Any]) -> Trigger:
    raw = payload.get("trigger", Trigger.SCHEDULE.value)
    try:
        return Trigger(raw)
    except ValueError:
        raise MalformedEvent(f"'trigger' must be one of {[t.value for t in Trigger]}") from None


def _overlap(raw: Any) -> str | None:
    if raw in (None, ""):
        return None
    if raw != "allow":
        raise MalformedEvent(f"'overlap' may only override to 'allow', got {raw!r}")
    return "allow"


def _timestamp(value: Any, field: str, keep_ms: bool = False) -> datetime:
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
    moment = moment.astimezone(UTC)
    if keep_ms:
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    return moment.replace(microsecond=0)
