"""Job control decisions: pure functions of a job's declaration, its recorded state and the time.

Each one either returns what to do or raises a domain error the API maps to an HTTP answer (see
``control_api.py``); nothing here reads or writes AWS, so a refused request has written nothing.

* ``pause_terms``: a pause needs a reason and, if it ends by itself, an end in the future.
* ``run_terms``: run now (a fresh millisecond tick) or run a given tick (``at``: must be a tick of
  the schedule, in the past, inside the history's retention).
* ``backfill_plan``: every expected tick in a past range, shorter than the retention, that has no
  SUCCEEDED, UNCERTAIN or FENCED record (a rerun would leave those as they are).
* ``never_delivered``: the audit, a dead man's switch. Expected ticks older than ``max_lateness``
  with no record at all, counted only from when the audit first saw the job (with this schedule)
  and outside the job's last pause::

      audit_since        pause                         now - max_lateness       now
      |---- t1 ---- t2 --[-- t3 --)-- t4 ---- t5 ------|-- t6 (may still come) --|
      counted: t1, t2, t4, t5 when they have no record; t3 paused; t6 not yet late
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from vigil.catalog import read_catalog
from vigil.clock import epoch_ms, from_epoch_ms
from vigil.contract.jobs import SCHEDULER_INPUT_KEY
from vigil.contract.layout import Catalogued
from vigil.contract.schedule import InvalidSchedule, Schedule
from vigil.jobs.events import Trigger, tick_key
from vigil.jobs.model import STANDING_STATUSES, JobHead
from vigil.settings import SettingsError

OPEN_ENDED_MS = epoch_ms(datetime(9999, 12, 31, tzinfo=UTC))
"""``paused_until_ms`` of a pause without ``--until``: one number keeps the claim's condition one."""
REASON_LIMIT = 500
AUDIT_LOOKBACK = timedelta(hours=1)
"""How far back each audit pass looks beyond ``max_lateness``; passes run every few minutes."""
MAX_BACKFILL_TICKS = 10_000


class UnknownJob(LookupError):
    def __init__(self, job: str, known: Mapping[str, Any]) -> None:
        super().__init__(f"no job {job!r}; jobs: {', '.join(sorted(known)) or '(none)'}")


class InvalidRequest(ValueError):
    """A request the API refuses with 422, naming the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class JobPaused(RuntimeError):
    """Manual runs wait for a resume: a paused job runs nothing."""


class NotPaused(RuntimeError):
    """Resume of a job that is not paused."""


@dataclass(frozen=True)
class JobSpec:
    """A declared job, as the construct describes it to the jobs-control function."""

    name: str
    function: str
    schedule: Schedule
    overlap: str
    max_lateness: timedelta
    retention: timedelta
    retry_attempts: int = 2
    """Lambda's asynchronous retries of a failed run: a FAILED record is final only after them."""

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> JobSpec:
        return cls(
            name=name,
            function=str(raw["function"]),
            schedule=Schedule(str(raw["schedule"]), str(raw.get("time_zone", "UTC"))),
            overlap=str(raw.get("overlap", "skip")),
            max_lateness=timedelta(seconds=float(raw.get("max_lateness_seconds", 300))),
            retention=timedelta(seconds=float(raw.get("retention_seconds", 30 * 86400))),
            retry_attempts=int(raw.get("retry_attempts", 2)),
        )


def parse_catalog(text: str) -> dict[str, JobSpec]:
    """``VIGIL_JOBS``: ``{job: {function, schedule, time_zone, ...}}``; raises ValueError."""
    try:
        raw = json.loads(text)
        return {name: JobSpec.from_json(name, spec) for name, spec in raw.items()}
    except (ValueError, KeyError, TypeError, AttributeError, InvalidSchedule) as error:
        raise ValueError(f"VIGIL_JOBS is not a valid jobs catalog: {error}") from error


def read_jobs(ssm: Any, stack: str) -> dict[str, JobSpec]:
    """The stack's jobs catalog (``vigil.catalog``); raises SettingsError on a bad part."""
    parts = read_catalog(ssm, stack, Catalogued.JOBS)
    try:
        return {name: JobSpec.from_json(name, spec) for name, spec in parts.entries.items()}
    except (ValueError, KeyError, TypeError, AttributeError, InvalidSchedule) as error:
        raise SettingsError(f"the jobs catalog of stack {stack} is not valid: {error}") from error


def find_job(jobs: Mapping[str, JobSpec], name: str) -> JobSpec:
    if name not in jobs:
        raise UnknownJob(name, jobs)
    return jobs[name]


def parse_time(field: str, raw: str) -> datetime:
    """An ISO 8601 time with a zone (``Z`` or an offset), as UTC."""
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(field, f"{raw!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise InvalidRequest(field, f"{raw!r} has no time zone (add Z or an offset)")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidRequest(field, f"{raw!r} is outside the times Vigil can represent") from None


# --- pause -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PauseTerms:
    reason: str
    since: datetime
    until: datetime | None

    @property
    def until_ms(self) -> int:
        return epoch_ms(self.until) if self.until else OPEN_ENDED_MS


def pause_terms(reason: str | None, until: str | None, now: datetime) -> PauseTerms:
    text = (reason or "").strip()
    if not text:
        raise InvalidRequest("reason", "a pause needs a reason (who reads the list must know why)")
    if len(text) > REASON_LIMIT:
        raise InvalidRequest("reason", f"at most {REASON_LIMIT} characters")
    end = parse_time("until", until) if until is not None else None  # "" is a mistake, not "never"
    if end is not None and end <= now:
        raise InvalidRequest("until", f"{until} is not in the future")
    return PauseTerms(reason=text, since=now, until=end)


def is_paused(head: JobHead | None, now: datetime) -> bool:
    return bool(head and head.paused_at(epoch_ms(now)))


# --- run now / run a tick ----------------------------------------------------------------------


@dataclass(frozen=True)
class RunTerms:
    """The manual tick to send, and the event that carries it (the scheduler's own format)."""

    job: str
    scheduled_at: datetime
    trigger: Trigger
    requested_by: str
    overlap: str | None
    request_id: str | None = None
    """The API request that asked (API Gateway's request id): Lambda's retries of its invocation
    carry it too, so the guard can count that request's attempts apart from earlier ones."""

    @property
    def key(self) -> str:
        return tick_key(self.scheduled_at, self.trigger is Trigger.NOW)

    def event(self) -> dict[str, Any]:
        stamp = self.key if self.trigger is Trigger.NOW else tick_key(self.scheduled_at)
        payload: dict[str, Any] = {
            "job": self.job,
            "scheduled_time": stamp,
            "trigger": self.trigger.value,
            "requested_by": self.requested_by,
        }
        if self.overlap:
            payload["overlap"] = self.overlap
        if self.request_id:
            payload["request_id"] = self.request_id
        return {SCHEDULER_INPUT_KEY: payload}


def run_terms(
    spec: JobSpec,
    *,
    at: str | None,
    overlap: str | None,
    backfill: bool,
    requested_by: str,
    now: datetime,
    anchor: datetime | None,
    recorded: bool,
    request_id: str | None = None,
) -> RunTerms:
    """``recorded``: the tick already has a record (a rate() tick needs no anchor then)."""
    if overlap not in (None, "allow"):
        raise InvalidRequest("overlap", "may only be 'allow' (the job's own policy otherwise)")
    if at is None:
        if backfill:
            raise InvalidRequest("at", "a backfill run names its tick")
        moment = now.replace(microsecond=now.microsecond // 1000 * 1000)
        return RunTerms(spec.name, moment, Trigger.NOW, requested_by, overlap, request_id)
    moment = parse_time("at", at)
    if moment > now:
        raise InvalidRequest("at", f"{at} is in the future; it will be delivered by the schedule")
    if moment < now - spec.retention:
        raise InvalidRequest("at", f"{at} is older than the history's retention ({spec.retention})")
    if not recorded and not _is_tick(spec.schedule, moment, anchor):
        raise InvalidRequest(
            "at", f"{at} is not a tick of {spec.schedule.expression} ({spec.schedule.time_zone})"
        )
    trigger = Trigger.BACKFILL if backfill else Trigger.AT
    return RunTerms(spec.name, moment, trigger, requested_by, overlap, request_id)


def _is_tick(schedule: Schedule, moment: datetime, anchor: datetime | None) -> bool:
    if schedule.needs_anchor and anchor is None:
        return False
    return schedule.is_tick(moment, anchor)


def scheduled_anchor(keys: list[str]) -> datetime | None:
    """The latest tick the scheduler delivered (whole-second keys; run-now keys carry ms)."""
    scheduled = [k for k in keys if len(k) == len("2026-01-01T00:00:00Z")]
    return datetime.fromisoformat(max(scheduled)) if scheduled else None


# --- backfill ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackfillPlan:
    job: str
    start: datetime
    end: datetime
    expected: int
    to_run: list[tuple[str, str | None]]
    """(tick key, its recorded status or None), oldest first."""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "from": tick_key(self.start),
            "to": tick_key(self.end),
            "expected": self.expected,
            "ticks": [{"tick": key, "status": status} for key, status in self.to_run],
        }


def backfill_range(spec: JobSpec, start: str, end: str, now: datetime) -> tuple[datetime, datetime]:
    first, last = parse_time("from", start), parse_time("to", end)
    if first >= now:
        raise InvalidRequest("from", f"{start} is in the future")
    if last > now:
        raise InvalidRequest("to", f"{end} is in the future; the schedule delivers those ticks")
    if last <= first:
        raise InvalidRequest("to", "must be after from")
    if last - first > spec.retention or first < now - spec.retention:
        raise InvalidRequest(
            "from", f"the range reaches past the history's retention ({spec.retention})"
        )
    return first, last


def backfill_plan(
    spec: JobSpec,
    first: datetime,
    last: datetime,
    statuses: Mapping[str, str],
    anchor: datetime | None,
) -> BackfillPlan:
    """Ticks in ``[first, last]`` a rerun would run (not :data:`STANDING_STATUSES`: SUCCEEDED,
    UNCERTAIN, FENCED ...); a rate() job needs an anchor."""
    if spec.schedule.needs_anchor and anchor is None:
        raise InvalidRequest("from", "no delivered tick yet to align this rate() schedule on")
    ticks = list(spec.schedule.between(first, last + timedelta(seconds=1), anchor))
    if len(ticks) > MAX_BACKFILL_TICKS:
        raise InvalidRequest("from", f"{len(ticks)} ticks; at most {MAX_BACKFILL_TICKS} at once")
    to_run = [
        (key, statuses.get(key))
        for key in map(tick_key, ticks)
        if statuses.get(key) not in STANDING_STATUSES
    ]
    return BackfillPlan(spec.name, first, last, len(ticks), to_run)


# --- the audit ---------------------------------------------------------------------------------


def audit_window(spec: JobSpec, now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)``: ticks in it are late enough to be judged and recent enough to look at."""
    end = now - spec.max_lateness
    return end - AUDIT_LOOKBACK, end


def never_delivered(
    spec: JobSpec,
    *,
    now: datetime,
    audit_since: datetime,
    pauses: Sequence[tuple[datetime, datetime]],
    recorded: set[str],
    anchor: datetime | None,
) -> list[datetime]:
    """Expected ticks in the audit window that have no record at all and fell in no pause
    (each ``[since, until)``), oldest first."""
    start, end = audit_window(spec, now)
    start = max(start, audit_since + timedelta(microseconds=1))  # strictly after first sight
    if start >= end:
        return []
    if spec.schedule.needs_anchor:
        anchor = anchor or audit_since
    return [
        tick
        for tick in spec.schedule.between(start, end, anchor)
        if tick_key(tick) not in recorded and not any(a <= tick < b for a, b in pauses)
    ]


def head_pause(head: JobHead | None) -> tuple[datetime, datetime] | None:
    """The pause the head carries (a resume only moves its end): also known to a job paused
    before pauses had records of their own."""
    if head is None or head.paused_since is None or head.paused_until_ms is None:
        return None
    return datetime.fromisoformat(head.paused_since), from_epoch_ms(head.paused_until_ms)
