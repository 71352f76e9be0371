"""The jobs page: each job's state (paused: why, by whom, until when), next fire, last tick and
its error, dead letters waiting; one job's last ticks (status, attempts, duration, error).

Buttons: run now, pause (with a reason) / resume, redrive the dead letters, settle an UNCERTAIN
tick. Reads per view: the jobs' heads (one BatchGetItem per 100 jobs: what the counts and the
failing-first order need), a GetQueueAttributes per job shown (its dead letters), and with a
job chosen one Query of its ticks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil.console.controls import Control, Controls, Field, settle_controls
from vigil.console.frame import counts, more, state
from vigil.console.markup import Safe, short, table, tag
from vigil.console.services import ConsoleServices
from vigil.jobs.control import JobSpec
from vigil.jobs.listing import FAILING, jobs_query, list_jobs
from vigil.jobs.listing import row as job_row
from vigil.jobs.model import JobHead, RunRecord, RunStatus

TICKS_SHOWN = 10
FILTERS = ("FAILING", "LATE", "PAUSED")


@dataclass(frozen=True)
class JobLine:
    name: str
    state: str
    schedule: str
    next_fire: str | None
    last_tick: str | None
    last_error: str | None
    paused_since: str | None
    pause: str | None
    """``reason (by X, until T)`` while paused."""
    dead_letters: int | None


@dataclass(frozen=True)
class TickLine:
    tick: str
    status: str
    attempts: int
    duration_ms: int | None
    trigger: str | None
    requested_by: str | None
    error: str | None
    uncertain_effect: str | None


@dataclass(frozen=True)
class JobsView:
    counts: list[tuple[str, int]]
    lines: list[JobLine]
    status: str | None
    next: str | None
    job: str | None = None
    ticks: list[TickLine] | None = None


def read(services: ConsoleServices, params: Mapping[str, Any]) -> JobsView:
    now = services.clock()
    status = params.get("status") or None
    query = jobs_query(status, None, services.page_size, params.get("next") or None)
    heads = services.runs.heads_of(services.jobs)
    by_job = {head.job: head for head in heads}
    everything = [job_row(spec, by_job.get(name), now) for name, spec in services.jobs.items()]
    page = list_jobs(services.jobs, heads, query, now)
    tally = [
        ("jobs", len(services.jobs)),
        ("failing", sum(1 for r in everything if r.state in {s.value for s in FAILING})),
        ("late", sum(1 for r in everything if r.late)),
        ("paused", sum(1 for r in everything if r.paused)),
    ]
    lines = [
        line_of(r.spec, r.head, r.state, now, _dead_letters(services, r.spec.name))
        for r in page.entries
    ]
    job = params.get("job") or None
    ticks = None
    if job and job in services.jobs:
        ticks = [_tick(r) for r in services.runs.history(job, limit=TICKS_SHOWN)]
    return JobsView(tally, lines, status, page.next, job if ticks is not None else None, ticks)


def _dead_letters(services: ConsoleServices, job: str) -> int | None:
    url = services.dead_letters.get(job)
    if not url:
        return None
    answer = services.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(answer.get("Attributes", {}).get("ApproximateNumberOfMessages", 0))


def line_of(
    spec: JobSpec, head: JobHead | None, word: str, now: datetime, dead: int | None
) -> JobLine:
    paused = word == RunStatus.PAUSED.value and head is not None
    pause = None
    if paused and head is not None:
        until = head.paused_until if head.paused_until and head.paused_until < "9999" else "resumed"
        pause = f"{head.pause_reason or ''} (by {head.paused_by or '?'}, until {until})"
    return JobLine(
        name=spec.name,
        state=word,
        schedule=spec.schedule.expression,
        next_fire=_next_fire(spec, head, now),
        last_tick=head.last_tick if head else None,
        last_error=head.last_error if head else None,
        paused_since=head.paused_since if paused and head else None,
        pause=pause,
        dead_letters=dead,
    )


def _next_fire(spec: JobSpec, head: JobHead | None, now: datetime) -> str | None:
    anchor = None
    if spec.schedule.needs_anchor:
        if head is None or not head.last_tick:
            return None
        anchor = datetime.fromisoformat(head.last_tick)
    upcoming = spec.schedule.next_after(now, 1, anchor)
    return upcoming[0].isoformat() if upcoming else None


def _tick(record: RunRecord) -> TickLine:
    error = f"{record.error_type}: {record.error_message}" if record.error_type else None
    return TickLine(
        tick=record.tick,
        status=record.status.value,
        attempts=record.attempts,
        duration_ms=record.duration_ms,
        trigger=record.trigger,
        requested_by=record.requested_by,
        error=error or record.detail,
        uncertain_effect=record.uncertain_effect,
    )


# -- rendering (pure) --------------------------------------------------------------------------


def render(view: JobsView, controls: Controls) -> Safe:
    filters = [
        controls.render(
            Control(f"show {word.lower()}", {"page": "jobs", "status": word}, view=True)
        )
        for word in FILTERS
    ]
    filters.append(controls.render(Control("show all", {"page": "jobs"}, view=True)))
    rows = [_row(line, controls) for line in view.lines]
    listing = (
        table(
            [
                "job",
                "state",
                "schedule",
                "next fire",
                "last tick",
                "last error",
                "pause",
                "dead letters",
                "",
            ],
            rows,
        )
        if rows
        else tag("p", "no job matches", class_="muted")
    )
    next_args = {"page": "jobs", "status": view.status, "next": view.next} if view.next else None
    return tag(
        "div",
        counts(view.counts),
        tag("div", *filters),
        listing,
        more(controls, "next page", next_args),
        _ticks(view, controls) if view.job else None,
    )


def _row(line: JobLine, controls: Controls) -> list[Any]:
    buttons = [
        controls.render(
            Control(
                "run now",
                {"action": "jobs.run", "job": line.name, "page": "jobs"},
                confirm=f"Run {line.name} now?",
                primary=True,
            )
        )
    ]
    if line.pause is None:
        buttons.append(
            controls.render(
                Control(
                    "pause",
                    {"action": "jobs.pause", "job": line.name, "page": "jobs"},
                    confirm=f"Pause {line.name}? Its ticks are recorded PAUSED, not run.",
                    fields=(Field(f"reason-{line.name}", "reason"),),
                )
            )
        )
    else:
        buttons.append(
            controls.render(
                Control(
                    "resume",
                    {
                        "action": "jobs.resume",
                        "job": line.name,
                        "seen": line.paused_since,
                        "page": "jobs",
                    },
                    confirm=f"Resume {line.name}?",
                )
            )
        )
    if line.dead_letters:
        buttons.append(
            controls.render(
                Control(
                    f"redrive {line.dead_letters}",
                    {
                        "action": "jobs.redrive",
                        "job": line.name,
                        "seen": line.dead_letters,
                        "page": "jobs",
                    },
                    confirm=f"Hand {line.name}'s {line.dead_letters} dead letters back to it?",
                )
            )
        )
    buttons.append(controls.render(Control("ticks", {"page": "jobs", "job": line.name}, view=True)))
    return [
        tag("b", line.name),
        state(line.state),
        line.schedule,
        line.next_fire or "-",
        line.last_tick or "-",
        short(line.last_error) or "-",
        line.pause or "-",
        "-" if line.dead_letters is None else str(line.dead_letters),
        tag("span", *buttons),
    ]


def _ticks(view: JobsView, controls: Controls) -> Safe:
    job = view.job or ""
    rows = []
    for tick in view.ticks or []:
        settle = []
        if tick.status == RunStatus.UNCERTAIN.value and tick.uncertain_effect:
            settle = settle_controls(
                controls,
                f"{job} tick {tick.tick}",
                tick.uncertain_effect,
                {"action": "jobs.settle", "job": job, "tick": tick.tick, "page": "jobs"},
            )
        rows.append(
            [
                tick.tick,
                state(tick.status),
                str(tick.attempts),
                "-" if tick.duration_ms is None else f"{tick.duration_ms} ms",
                tick.trigger or "schedule",
                tick.requested_by or "-",
                short(tick.error) or "-",
                tag("span", *settle) if settle else "-",
            ]
        )
    return tag(
        "div",
        tag("h4", f"{job}: last {TICKS_SHOWN} ticks"),
        table(
            [
                "tick",
                "status",
                "attempts",
                "duration",
                "trigger",
                "requested by",
                "error / note",
                "",
            ],
            rows,
        )
        if rows
        else tag("p", "no tick recorded yet", class_="muted"),
    )
