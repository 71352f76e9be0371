"""The never-delivered audit: expected ticks that left no record at all become MISSED.

A disabled or deleted schedule, a broken target or a throttled account delivers nothing, so the
guard never runs and nothing is recorded. Each pass, per declared job: read its head (the audit's
start mark and the last pause) and its records of the last hour, decide with
``control.never_delivered`` and record each missing tick MISSED "never delivered" through the
guard's own conditional write (absent records only, so a tick delivered meanwhile wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from vigil.jobs.control import JobSpec, audit_window, head_pause, never_delivered, scheduled_anchor
from vigil.jobs.control_store import ControlStore
from vigil.jobs.events import tick_key
from vigil.jobs.model import JobHead, RunStatus
from vigil.jobs.store import RunStore, TickTaken

NEVER_DELIVERED = "never delivered"


@dataclass(frozen=True)
class Finding:
    job: str
    tick: str


class AuditIncomplete(Exception):
    """Some jobs could not be audited; the others were, and their findings are recorded.

    Raised after the whole pass, so one job's fault (an unreadable head, a throttled query) never
    hides another job's missing ticks; the caller reports the findings, then fails (alarmed).
    """

    def __init__(self, findings: list[Finding], failures: dict[str, Exception]) -> None:
        names = ", ".join(f"{job}: {error!r}" for job, error in failures.items())
        super().__init__(f"audit failed for {len(failures)} job(s): {names}")
        self.findings = findings
        self.failures = failures


def audit(
    jobs: Mapping[str, JobSpec], control: ControlStore, runs: RunStore, now: datetime
) -> list[Finding]:
    findings: list[Finding] = []
    failures: dict[str, Exception] = {}
    for spec in jobs.values():
        try:
            findings += _audit_job(spec, control, runs, now)
        except Exception as error:  # isolated per job, raised together below
            failures[spec.name] = error
    if failures:
        raise AuditIncomplete(findings, failures)
    return findings


def _audit_job(
    spec: JobSpec, control: ControlStore, runs: RunStore, now: datetime
) -> list[Finding]:
    item = control.head_item(spec.name)
    since = (item or {}).get("audit_since")
    # The expression and its time zone: either changing moves every tick, so counting restarts.
    schedule = f"{spec.schedule.expression} in {spec.schedule.time_zone}"
    if since is None or (item or {}).get("audit_schedule") != schedule:
        control.mark_audited(spec.name, schedule, now)
        return []  # ticks before the audit knew the job (or its schedule) are not counted
    head = JobHead.from_item(item) if item and "job" in item else None
    start, _ = audit_window(spec, now)
    # A rate() schedule is aligned on the last tick the scheduler delivered: look one step back.
    lower = start - (spec.schedule.period or timedelta(0))
    keys = list(control.statuses(spec.name, tick_key(lower), tick_key(now)))
    last = [head.last_tick] if head and head.last_tick else []
    pauses = control.pauses(spec.name)
    latest = head_pause(head)
    missing = never_delivered(
        spec,
        now=now,
        audit_since=datetime.fromisoformat(since),
        pauses=[*pauses, latest] if latest else pauses,
        recorded=set(keys),
        anchor=scheduled_anchor(keys + last),
    )
    found = []
    for tick in missing:
        try:
            runs.record_final(
                job=spec.name,
                tick=tick_key(tick),
                status=RunStatus.MISSED,
                now=now,
                expires_at=now + spec.retention,
                detail=NEVER_DELIVERED,
            )
        except TickTaken:
            continue  # delivered after all, while the audit looked
        found.append(Finding(spec.name, tick_key(tick)))
    return found
