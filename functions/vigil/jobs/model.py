"""The vocabulary of scheduled jobs: run statuses, overlap policies, settings and run records."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.settings import Environment


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"
    PAUSED = "PAUSED"
    """Delivered while the job was paused: not run, not failed, not dead-lettered."""
    UNCERTAIN = "UNCERTAIN"
    """Stopped on an effect (``run.once``) an earlier run began and never recorded done: not
    retried, alarmed, for a person to settle (``vigil jobs settle``)."""
    FENCED = "FENCED"
    """Superseded: a write through ``run.fenced`` was refused (``Fenced``) because a newer run of
    the job wrote there. Not retried, not dead-lettered: a retry would claim a newer token still
    and write this older tick's data over its successor's, which is what the fence refused."""


FINAL_STATUSES = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.SKIPPED,
        RunStatus.MISSED,
        RunStatus.PAUSED,
        RunStatus.UNCERTAIN,
        RunStatus.FENCED,
    }
)
"""A tick in one of these states never runs again, whatever is delivered later."""

RERUNNABLE_STATUSES = frozenset(
    {RunStatus.FAILED, RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.PAUSED}
)
"""The final (or failed) ticks an operator's rerun (``--at``, backfill) may run once more; the
rest of :data:`FINAL_STATUSES` stand: SUCCEEDED and UNCERTAIN (settle it instead) did or may
have done the work, and a FENCED tick's data was superseded by a newer run, which a rerun's
newer token would overwrite."""

STANDING_STATUSES = FINAL_STATUSES - RERUNNABLE_STATUSES
"""Final ticks a rerun finds as they are (it ends DUPLICATE): a backfill plans none of them, and
``run --at --wait`` takes the unchanged record as the answer."""


class Overlap(StrEnum):
    SKIP = "skip"
    """A tick that arrives while another tick of the job holds its lease is recorded SKIPPED."""
    ALLOW = "allow"
    """Ticks may run side by side; each still runs once."""


class Outcome(StrEnum):
    """What one delivery did; DUPLICATE is a suppressed delivery, not a failure."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"
    DUPLICATE = "DUPLICATE"
    FENCED = "FENCED"
    PAUSED = "PAUSED"
    UNCERTAIN = "UNCERTAIN"


@dataclass(frozen=True)
class JobSettings:
    """What the construct tells the guard through the environment, validated once per container.

    A frozen dataclass rather than pydantic: this sits on every job's cold start path.
    """

    job: str
    table: str
    overlap: Overlap = Overlap.SKIP
    max_lateness: timedelta = timedelta(minutes=5)
    lease_margin: timedelta = timedelta(seconds=30)
    retention: timedelta = timedelta(days=30)
    max_duration: timedelta | None = None
    min_duration: timedelta | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> JobSettings:
        """Raises :class:`~vigil.settings.SettingsError` naming the variable at fault."""
        read = Environment(env)
        return cls(
            **read.gather(
                job=lambda: read.text("VIGIL_JOB_NAME"),
                table=lambda: read.text("VIGIL_RUNS_TABLE"),
                overlap=lambda: read.choice("VIGIL_OVERLAP", Overlap, Overlap.SKIP),
                max_lateness=lambda: read.seconds("VIGIL_MAX_LATENESS_SECONDS", cls.max_lateness),
                lease_margin=lambda: read.seconds("VIGIL_LEASE_MARGIN_SECONDS", cls.lease_margin),
                retention=lambda: read.seconds("VIGIL_RETENTION_SECONDS", cls.retention),
                max_duration=lambda: _optional_seconds(read, "VIGIL_MAX_DURATION_SECONDS"),
                min_duration=lambda: _optional_seconds(read, "VIGIL_MIN_DURATION_SECONDS"),
            )
        )


def _optional_seconds(read: Environment, name: str) -> timedelta | None:
    """A duration flag the construct sets only when the job declares it: absent is "no flag",
    present but empty is refused like any other setting."""
    return read.seconds(name, timedelta(0)) if read.present(name) else None


@dataclass(frozen=True)
class RunRecord:
    """One tick of one job, as the history shows it."""

    job: str
    tick: str
    status: RunStatus
    attempts: int
    fencing_token: int | None
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    error_type: str | None
    error_message: str | None
    detail: str | None
    trigger: str | None = None
    requested_by: str | None = None
    duration_flag: str | None = None
    first_attempt: int = 1
    """The attempt at which the latest request for this tick began (see ``ClaimTerms``)."""
    uncertain_effect: str | None = None
    """UNCERTAIN: the effect found begun and never recorded done."""
    effects: Mapping[str, Mapping[str, Any]] | None = None
    """``run.once``'s journal: effect -> {state, fence, at}."""

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> RunRecord:
        return cls(
            job=item["job"],
            tick=item["scheduled_at"],
            status=RunStatus(item["status"]),
            attempts=int(item.get("attempts", 0)),
            fencing_token=int(item["fencing_token"]) if "fencing_token" in item else None,
            started_at=item.get("started_at"),
            finished_at=item.get("finished_at"),
            duration_ms=int(item["duration_ms"]) if "duration_ms" in item else None,
            error_type=item.get("error_type"),
            error_message=item.get("error_message"),
            detail=item.get("detail"),
            trigger=item.get("trigger"),
            requested_by=item.get("requested_by"),
            duration_flag=item.get("duration_flag"),
            first_attempt=int(item.get("first_attempt", 1)),
            uncertain_effect=item.get(UNCERTAIN_EFFECT_ATTRIBUTE),
            effects=item.get(JOURNAL_ATTRIBUTE) or None,
        )


@dataclass(frozen=True)
class JobHead:
    """The latest state of a job: its fence, who holds its lease, and its last recorded tick."""

    job: str
    fence: int
    lease_tick: str | None
    lease_until: str | None
    last_tick: str | None
    last_status: RunStatus | None
    last_finished_at: str | None
    last_error: str | None
    paused_by: str | None = None
    pause_reason: str | None = None
    paused_since: str | None = None
    paused_until: str | None = None
    paused_until_ms: int | None = None

    def paused_at(self, now_ms: int) -> bool:
        """Paused at that moment: the pause's end (a far-future sentinel when open-ended) is ahead."""
        return self.paused_until_ms is not None and self.paused_until_ms > now_ms

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> JobHead:
        return cls(
            job=item["job"],
            fence=int(item.get("fence", 0)),
            lease_tick=item.get("lease_tick"),
            lease_until=item.get("lease_until"),
            last_tick=item.get("last_tick"),
            last_status=RunStatus(item["last_status"]) if item.get("last_status") else None,
            last_finished_at=item.get("last_finished_at"),
            last_error=item.get("last_error"),
            paused_by=item.get("paused_by"),
            pause_reason=item.get("pause_reason"),
            paused_since=item.get("paused_since"),
            paused_until=item.get("paused_until"),
            paused_until_ms=int(item["paused_until_ms"]) if "paused_until_ms" in item else None,
        )
