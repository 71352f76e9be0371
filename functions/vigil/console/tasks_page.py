"""The tasks page: counts by status per task, its queue (waiting, in flight, delayed) and dead
letters; one task's records (its failures first) and one record whole, steps included when the
record has them.

Buttons: redrive a task's dead letters (how a FAILED task runs again), cancel a task, settle an
UNCERTAIN task. Reads per view, for each task shown (a page of them): its records' statuses (one
Query per 1 MB of them, the status alone) and two GetQueueAttributes; with a task chosen one
Query of its records; with a record chosen one GetItem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vigil.console.controls import Control, Controls, settle_controls
from vigil.console.frame import counts, more, state
from vigil.console.markup import Safe, short, table, tag
from vigil.console.services import ConsoleServices
from vigil.contract.tasks import SUSPENDED_STATUSES, TaskStatus
from vigil.tasks.queues import TaskQueue

RECORDS_SHOWN = 20
CANCELLABLE = tuple(s.value for s in (TaskStatus.QUEUED, TaskStatus.RUNNING, *SUSPENDED_STATUSES))
"""A sleeping or waiting flow too: the cancel marks it and wakes it to stop and compensate."""


@dataclass(frozen=True)
class TaskLine:
    name: str
    by_status: dict[str, int]
    waiting: int
    in_flight: int
    delayed: int
    dead_letters: int


@dataclass(frozen=True)
class RecordLine:
    id: str
    status: str
    attempts: int
    enqueued_at: str | None
    finished_at: str | None
    error: str | None


@dataclass(frozen=True)
class TasksView:
    counts: list[tuple[str, int]]
    lines: list[TaskLine]
    next: int | None
    task: str | None = None
    status: str | None = None
    records: list[RecordLine] | None = None
    records_next: str | None = None
    record: dict[str, Any] | None = None


def read(services: ConsoleServices, params: Mapping[str, Any]) -> TasksView:
    client = services.tasks
    if client is None:
        return TasksView([("tasks", 0)], [], None)
    names = sorted(client.catalog)
    start = _offset(params.get("next"))
    shown = names[start : start + services.page_size]
    lines = [_line(services, name) for name in shown]
    failed = sum(line.by_status.get(TaskStatus.FAILED.value, 0) for line in lines)
    dead = sum(line.dead_letters for line in lines)
    tally = [("tasks", len(names)), ("failed (this page)", failed), ("dead letters", dead)]
    following = start + services.page_size
    view = TasksView(tally, lines, following if following < len(names) else None)
    task = params.get("task") or None
    if not task or task not in client.catalog:
        return view
    status = params.get("status") or TaskStatus.FAILED.value
    records, token = client.list(
        task, status, limit=RECORDS_SHOWN, page=params.get("records_next") or None
    )
    record = None
    if params.get("id"):
        record = client.get(task, str(params["id"])).to_json()
    return TasksView(
        tally,
        lines,
        view.next,
        task=task,
        status=status,
        records=[_record(r.to_json()) for r in records],
        records_next=token,
        record=record,
    )


def _offset(raw: Any) -> int:
    try:
        return max(0, int(raw or 0))
    except (TypeError, ValueError):
        return 0


def _line(services: ConsoleServices, name: str) -> TaskLine:
    assert services.tasks is not None
    spec = services.tasks.catalog.spec(name)
    by_status = services.tasks.store(spec).count_by_status(name)
    depth = TaskQueue(services.sqs, spec.queue_url, spec.dead_letter_url).depth()
    return TaskLine(
        name=name,
        by_status={status.value: count for status, count in by_status.items()},
        waiting=depth.waiting,
        in_flight=depth.in_flight,
        delayed=depth.delayed,
        dead_letters=depth.dead_letters,
    )


def _record(raw: Mapping[str, Any]) -> RecordLine:
    error = f"{raw['error_type']}: {raw.get('error_message')}" if raw.get("error_type") else None
    return RecordLine(
        id=str(raw["id"]),
        status=str(raw["status"]),
        attempts=int(raw.get("attempts") or 0),
        enqueued_at=raw.get("enqueued_at"),
        finished_at=raw.get("finished_at"),
        error=error,
    )


# -- rendering (pure) --------------------------------------------------------------------------


def render(view: TasksView, controls: Controls) -> Safe:
    statuses = [s.value for s in TaskStatus]
    rows = [
        [
            tag("b", line.name),
            *(_count(line.by_status.get(s, 0), s) for s in statuses),
            f"{line.waiting} / {line.in_flight} / {line.delayed}",
            str(line.dead_letters),
            tag("span", *_task_buttons(line, controls)),
        ]
        for line in view.lines
    ]
    listing = (
        table(["task", *statuses, "waiting / in flight / delayed", "dead letters", ""], rows)
        if rows
        else tag("p", "no task declared", class_="muted")
    )
    following = {"page": "tasks", "next": view.next} if view.next is not None else None
    return tag(
        "div",
        counts(view.counts),
        listing,
        more(controls, "next page", following),
        _records(view, controls) if view.task else None,
        _one(view, controls) if view.record else None,
    )


def _count(count: int, status: str) -> Safe:
    if not count:
        return tag("span", "0", class_="muted")
    bad = status in (TaskStatus.FAILED.value, TaskStatus.UNCERTAIN.value)
    return tag("span", str(count), class_="bad" if bad else None)


def _task_buttons(line: TaskLine, controls: Controls) -> list[Safe]:
    buttons = [
        controls.render(Control("failures", {"page": "tasks", "task": line.name}, view=True))
    ]
    if line.dead_letters:
        buttons.append(
            controls.render(
                Control(
                    f"redrive {line.dead_letters}",
                    {
                        "action": "tasks.redrive",
                        "task": line.name,
                        "seen": line.dead_letters,
                        "page": "tasks",
                    },
                    confirm=f"Run {line.name}'s {line.dead_letters} dead-lettered tasks again?",
                )
            )
        )
    return buttons


def _records(view: TasksView, controls: Controls) -> Safe:
    task = view.task or ""
    filters = [
        controls.render(
            Control(s.value.lower(), {"page": "tasks", "task": task, "status": s.value}, view=True)
        )
        for s in TaskStatus
    ]
    rows = [
        [
            controls.render(
                Control(
                    r.id,
                    {"page": "tasks", "task": task, "status": view.status, "id": r.id},
                    view=True,
                )
            ),
            state(r.status),
            str(r.attempts),
            r.enqueued_at or "-",
            r.finished_at or "-",
            short(r.error) or "-",
        ]
        for r in view.records or []
    ]
    following = (
        {"page": "tasks", "task": task, "status": view.status, "records_next": view.records_next}
        if view.records_next
        else None
    )
    return tag(
        "div",
        tag("h4", f"{task}: {str(view.status).lower()} tasks"),
        tag("div", *filters),
        table(["id", "status", "attempts", "enqueued", "finished", "error"], rows)
        if rows
        else tag("p", "none", class_="muted"),
        more(controls, "more", following),
    )


def _one(view: TasksView, controls: Controls) -> Safe:
    record = view.record or {}
    task, task_id, status = view.task or "", str(record.get("id")), str(record.get("status"))
    buttons = []
    if status in CANCELLABLE:
        buttons.append(
            controls.render(
                Control(
                    "cancel",
                    {
                        "action": "tasks.cancel",
                        "task": task,
                        "id": task_id,
                        "seen": status,
                        "page": "tasks",
                    },
                    confirm=f"Cancel {task} {task_id}?",
                )
            )
        )
    effect = record.get("uncertain_effect")
    if status == TaskStatus.UNCERTAIN.value and effect:
        buttons += settle_controls(
            controls,
            f"{task} {task_id}",
            str(effect),
            {"action": "tasks.settle", "task": task, "id": task_id, "page": "tasks"},
        )
    steps = record.get("steps")
    details = [[key, short(_shown(value), 300)] for key, value in record.items() if key != "steps"]
    return tag(
        "div",
        tag("h4", f"{task} {task_id}"),
        tag("span", *buttons),
        table(["field", "value"], details),
        _steps(steps) if isinstance(steps, list) and steps else None,
    )


def _steps(steps: list[Any]) -> Safe:
    keys: list[str] = []
    for step in steps:
        if isinstance(step, Mapping):
            keys += [k for k in step if k not in keys]
    rows = [[short(_shown(s.get(k)), 120) for k in keys] for s in steps if isinstance(s, Mapping)]
    return tag("div", tag("h4", "steps"), table(keys, rows))


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)
