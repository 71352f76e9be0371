"""Every job's latest state, what needs a person first: ``vigil jobs list`` and ``GET /jobs``.

A job's *state* is one word: ``PAUSED`` when paused now, else its last tick's status when that
failed (``FAILED``, ``UNCERTAIN``, ``MISSED``), else ``LATE`` when a tick is past its
``max_lateness`` with no record (the audit records it MISSED on its next pass), else its last
tick's status, or ``NEVER`` before its first tick. Listed failing first, then late, then paused,
then running, then the rest, by name within each; filtered by states (``FAILING`` is the three
failed ones) and by a name prefix; paged by ``vigil.listing`` (nothing lost or repeated).

Reads: the catalog (kept by the caller) and the heads from the runs table's jobs index, one
Query for up to 1 MB of heads (about 2,000 jobs; a prefix is a key condition, so it reads only
the jobs it names). Late is decided here, from the schedule and the last tick, with no read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from vigil.contract.jobs import JOB_NAME
from vigil.jobs.control import JobSpec
from vigil.jobs.model import JobHead, RunStatus
from vigil.listing import Page, Query

FAILING = frozenset({RunStatus.FAILED, RunStatus.UNCERTAIN, RunStatus.MISSED})
"""Last statuses that need a person (a rerun, a settlement, a look at why it never ran)."""


class Extra(StrEnum):
    """States beside the run statuses."""

    LATE = "LATE"
    NEVER = "NEVER"
    FAILING = "FAILING"
    """A filter only: FAILED, UNCERTAIN or MISSED."""


STATES = [*(s.value for s in RunStatus), Extra.LATE.value, Extra.NEVER.value]
FILTERS = [*STATES, Extra.FAILING.value]
_RANKS = {"failing": 0, Extra.LATE.value: 1, RunStatus.PAUSED.value: 2, RunStatus.RUNNING.value: 3}


@dataclass(frozen=True)
class JobRow:
    spec: JobSpec
    head: JobHead | None
    state: str
    late: bool
    paused: bool


def head_json(spec: JobSpec, head: JobHead | None, now_ms: int) -> dict[str, Any]:
    paused = bool(head and head.paused_at(now_ms))
    return {
        "job": spec.name,
        "schedule": spec.schedule.expression,
        "time_zone": spec.schedule.time_zone,
        "overlap": spec.overlap,
        "last_tick": head.last_tick if head else None,
        "last_status": head.last_status.value if head and head.last_status else None,
        "paused": paused,
        "pause": {
            "by": head.paused_by,
            "reason": head.pause_reason,
            "since": head.paused_since,
            "until": head.paused_until,
        }
        if paused and head
        else None,
    }


def row_json(job: JobRow, now_ms: int) -> dict[str, Any]:
    """A job of a listing: its head as ``GET /jobs/{job}`` shows it, its state and lateness."""
    return {**head_json(job.spec, job.head, now_ms), "state": job.state, "late": job.late}


def is_late(spec: JobSpec, head: JobHead | None, now: datetime) -> bool:
    """A tick the schedule expected after the last recorded one is older than ``max_lateness``.
    Before the first tick there is nothing to count from: ``NEVER``, not late."""
    if head is None or not head.last_tick:
        return False
    try:
        last = datetime.fromisoformat(head.last_tick)
    except ValueError:
        return False
    due_by = now - spec.max_lateness
    if last >= due_by:
        return False
    anchor = last if spec.schedule.needs_anchor else None
    start = last + timedelta(microseconds=1)
    return next(iter(spec.schedule.between(start, due_by, anchor)), None) is not None


def row(spec: JobSpec, head: JobHead | None, now: datetime) -> JobRow:
    paused = bool(head and head.paused_at(int(now.timestamp() * 1000)))
    last = head.last_status if head else None
    late = not paused and is_late(spec, head, now)
    if paused:
        state = RunStatus.PAUSED.value
    elif last in FAILING:
        state = str(last)
    elif late:
        state = Extra.LATE.value
    else:
        state = str(last) if last else Extra.NEVER.value
    return JobRow(spec, head, state, late, paused)


def _matches(job: JobRow, wanted: frozenset[str]) -> bool:
    if not wanted:
        return True
    facts = {job.state}
    last = job.head.last_status if job.head else None
    if last is not None and last is not RunStatus.PAUSED:  # PAUSED: paused now, not a past tick
        facts.add(last.value)
    if job.late:
        facts.add(Extra.LATE.value)
    if last in FAILING:
        facts.add(Extra.FAILING.value)
    return bool(facts & wanted)


def _rank(job: JobRow) -> tuple[int]:
    if job.state in {s.value for s in FAILING}:
        return (_RANKS["failing"],)
    return (_RANKS.get(job.state, len(_RANKS)),)


def jobs_query(
    status: str | Iterable[str] | None = None,
    prefix: str | None = None,
    limit: int | None = None,
    token: str | None = None,
) -> Query:
    """A listing request of jobs, checked (:class:`vigil.listing.InvalidListing`)."""
    return Query.parse(FILTERS, JOB_NAME, status=status, prefix=prefix, limit=limit, token=token)


def list_jobs(
    jobs: Mapping[str, JobSpec], heads: Iterable[JobHead], query: Query, now: datetime
) -> Page[JobRow]:
    """One page: ``heads`` are those the runs table holds (any job, declared or not, under the
    query's prefix); a declared job without one has never run."""
    by_job = {head.job: head for head in heads}
    rows = (
        row(spec, by_job.get(name), now)
        for name, spec in jobs.items()
        if name.startswith(query.prefix)
    )
    ranked = ((_rank(r), r.spec.name, r) for r in rows if _matches(r, query.statuses))
    return query.page(list(jobs), ranked)
