"""What is wrong now, first: failing and late jobs, tasks with dead letters (their FAILED and
malformed tasks), FAILED observers, and the stack's alarms in ALARM.

Reads per view: the jobs' heads (one BatchGetItem per 100 jobs), one GetQueueAttributes per
task's dead-letter queue, one filtered Query page of the registry's FAILED observers, one
DescribeAlarms of the stack's alarms in ALARM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vigil.console import jobs_page, observers_page
from vigil.console.controls import Control, Controls
from vigil.console.frame import counts, state
from vigil.console.markup import Safe, short, table, tag
from vigil.console.services import ConsoleServices
from vigil.jobs.listing import jobs_query, list_jobs
from vigil.observers.model import Status
from vigil.tasks.queues import TaskQueue

SHOWN = 20


@dataclass(frozen=True)
class AlarmLine:
    name: str
    reason: str
    since: str


@dataclass(frozen=True)
class NowView:
    jobs: list[jobs_page.JobLine]
    jobs_total: int
    tasks: list[tuple[str, int]]
    observers: list[observers_page.ObserverLine]
    alarms: list[AlarmLine]


def read(services: ConsoleServices, params: Mapping[str, Any]) -> NowView:
    now = services.clock()
    heads = services.runs.heads_of(services.jobs)
    failing = list_jobs(services.jobs, heads, jobs_query("FAILING,LATE", None, SHOWN), now)
    jobs = [jobs_page.line_of(r.spec, r.head, r.state, now, None) for r in failing.entries]
    tasks: list[tuple[str, int]] = []
    if services.tasks is not None:
        for name in sorted(services.tasks.catalog):
            spec = services.tasks.catalog.spec(name)
            dead = TaskQueue(services.sqs, spec.queue_url, spec.dead_letter_url).dead_letters()
            if dead:
                tasks.append((name, dead))
    observers = []
    if services.observers is not None:
        page = services.observers.list_page(status=Status.FAILED, limit=SHOWN)
        observers = [observers_page.line_of(o, now) for o in page.observers]
    return NowView(jobs, failing.matching, tasks, observers, _alarms(services))


def _alarms(services: ConsoleServices) -> list[AlarmLine]:
    answer = services.cloudwatch.describe_alarms(
        StateValue="ALARM", AlarmNamePrefix=services.stack, MaxRecords=SHOWN
    )
    return [
        AlarmLine(
            name=str(a.get("AlarmName")),
            reason=str(a.get("StateReason") or ""),
            since=str(a.get("StateUpdatedTimestamp") or ""),
        )
        for a in answer.get("MetricAlarms", []) + answer.get("CompositeAlarms", [])
    ]


# -- rendering (pure) --------------------------------------------------------------------------


def render(view: NowView, controls: Controls) -> Safe:
    tally = [
        ("failing or late jobs", view.jobs_total),
        ("tasks with dead letters", len(view.tasks)),
        ("failed observers", len(view.observers)),
        ("alarms in ALARM", len(view.alarms)),
    ]
    if not any(n for _, n in tally):
        return tag("div", counts(tally), tag("p", "Nothing is wrong now.", class_="ok"))
    sections = [counts(tally)]
    if view.alarms:
        sections.append(
            tag(
                "div",
                tag("h4", "alarms in ALARM"),
                table(
                    ["alarm", "since", "why"],
                    [[state("ALARM"), a.name, a.since, short(a.reason, 200)] for a in view.alarms],
                ),
            )
        )
    if view.jobs:
        rows = [
            [
                tag("b", j.name),
                state(j.state),
                j.last_tick or "-",
                short(j.last_error) or "-",
                controls.render(Control("ticks", {"page": "jobs", "job": j.name}, view=True)),
            ]
            for j in view.jobs
        ]
        sections.append(
            tag(
                "div",
                tag("h4", "failing or late jobs"),
                table(["job", "state", "last tick", "last error", ""], rows),
            )
        )
    if view.tasks:
        rows = [
            [
                tag("b", name),
                str(dead),
                controls.render(Control("failures", {"page": "tasks", "task": name}, view=True)),
                controls.render(
                    Control(
                        f"redrive {dead}",
                        {"action": "tasks.redrive", "task": name, "seen": dead, "page": "now"},
                        confirm=f"Run {name}'s {dead} dead-lettered tasks again?",
                    )
                ),
            ]
            for name, dead in view.tasks
        ]
        sections.append(
            tag(
                "div",
                tag("h4", "tasks with dead letters"),
                table(["task", "dead letters", "", ""], rows),
            )
        )
    if view.observers:
        sections.append(
            tag(
                "div",
                tag("h4", "failed observers"),
                observers_page.observers_table(view.observers, controls, "now"),
            )
        )
    return tag("div", *sections)
