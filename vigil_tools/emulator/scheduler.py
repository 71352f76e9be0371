"""EventBridge Scheduler, emulated: occurrences of each schedule and the input it delivers.

Schedules are read back from the emulator's Scheduler API (created from the template), so the
expression, time zone and input template are the deployed ones.

One-time schedules (``at(...)``, which ``vigil.tasks.enqueue`` creates for a start beyond SQS's
15-minute delay) are read afresh on every look (:func:`one_time_schedules`): moto stores them and
never fires them; :func:`fire_one_time` sends the input to the target queue, as Scheduler's SQS
target does, and deletes the schedule when its ``ActionAfterCompletion`` is ``DELETE``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vigil.clock import iso_seconds
from vigil.contract.schedule import Schedule as ScheduleExpression


@dataclass(frozen=True)
class Schedule:
    name: str
    expression: str
    time_zone: str
    target_arn: str
    input_template: str
    arn: str = ""
    """The schedule's own ARN (a look for one-time schedules need not fetch it again)."""

    def render_input(self, scheduled_at: datetime, attempt: int = 1) -> str:
        """The target input with Scheduler's context attributes filled in, as Scheduler does."""
        return (
            self.input_template.replace("<aws.scheduler.scheduled-time>", iso_seconds(scheduled_at))
            .replace("<aws.scheduler.execution-id>", str(uuid.uuid4()))
            .replace("<aws.scheduler.attempt-number>", str(attempt))
            .replace("<aws.scheduler.schedule-arn>", f"arn:aws:scheduler:::schedule/{self.name}")
        )


def deployed_schedules(session: Any) -> list[Schedule]:
    """The enabled recurring schedules (rate, cron), in every group."""
    schedules = []
    for detail in _details(session.client("scheduler")):
        if _is_one_time(detail) or detail.get("State") != "ENABLED":
            continue
        schedules.append(
            Schedule(
                name=detail["Name"],
                expression=detail["ScheduleExpression"],
                time_zone=detail.get("ScheduleExpressionTimezone", "UTC"),
                target_arn=detail["Target"]["Arn"],
                input_template=detail["Target"].get("Input", "{}"),
                arn=detail.get("Arn", ""),
            )
        )
    return schedules


def occurrences(schedule: Schedule, start: datetime, end: datetime) -> Iterator[datetime]:
    """Scheduled times in [start, end), in UTC, from the runtime's own evaluator (the one the
    audit and ``vigil jobs next`` use); a rate() schedule starts at ``start``, as at creation."""
    evaluator = ScheduleExpression(schedule.expression, schedule.time_zone)
    return evaluator.between(start, end, anchor=start if evaluator.needs_anchor else None)


def _details(client: Any, skip: Collection[str] = ()) -> list[dict[str, Any]]:
    """Every schedule of every group but those whose ARN is in ``skip``, whole (ListSchedules'
    summaries carry no expression: each is one GetSchedule more)."""
    found: list[dict[str, Any]] = []
    for page in client.get_paginator("list_schedules").paginate():
        found += [
            client.get_schedule(Name=summary["Name"], GroupName=summary["GroupName"])
            for summary in page["Schedules"]
            if summary.get("Arn") not in skip
        ]
    return found


def _is_one_time(detail: dict[str, Any]) -> bool:
    return str(detail.get("ScheduleExpression", "")).startswith("at(")


@dataclass(frozen=True)
class OneTimeSchedule:
    """An ``at(...)`` schedule: delivered once, when its time has come."""

    name: str
    group: str
    due_at: datetime
    target_arn: str
    input: str
    message_group_id: str | None
    delete_after: bool


def one_time_schedules(
    scheduler: Any, *, recurring: Collection[Schedule] = ()
) -> list[OneTimeSchedule]:
    """The enabled ``at(...)`` schedules of every group, soonest first (``scheduler``: a
    client; the emulator's own, so its look each step is not counted as the app's).

    ``recurring``: the caller's :func:`deployed_schedules`, which it holds fixed; they are not
    fetched again on each look (a look the testing kit makes at every step of its clock, where the
    app's recurring schedules outnumber the one-time ones)."""
    found = []
    for detail in _details(scheduler, skip={s.arn for s in recurring if s.arn}):
        if not _is_one_time(detail) or detail.get("State", "ENABLED") != "ENABLED":
            continue
        evaluator = ScheduleExpression(
            detail["ScheduleExpression"], detail.get("ScheduleExpressionTimezone") or "UTC"
        )
        due = next(
            evaluator.between(datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)),
            None,
        )
        if due is None:  # a local time the clocks skip: Scheduler never fires it
            continue
        target = detail["Target"]
        found.append(
            OneTimeSchedule(
                name=detail["Name"],
                group=detail.get("GroupName") or "default",
                due_at=due,
                target_arn=target["Arn"],
                input=target.get("Input") or "{}",
                message_group_id=(target.get("SqsParameters") or {}).get("MessageGroupId"),
                delete_after=detail.get("ActionAfterCompletion") == "DELETE",
            )
        )
    return sorted(found, key=lambda s: s.due_at)


def fire_one_time(sqs: Any, scheduler: Any, schedule: OneTimeSchedule) -> None:
    """Deliver the schedule's input to its SQS queue, then delete the schedule if it says so
    (otherwise it is disabled: it has completed, and a one-time schedule never fires again).
    ``sqs``/``scheduler``: clients (the emulator's own: these are Scheduler's requests)."""
    if ":sqs:" not in schedule.target_arn:
        raise NotImplementedError(
            f"one-time schedule {schedule.name}: the emulator delivers to SQS targets only, "
            f"not {schedule.target_arn}"
        )
    url = sqs.get_queue_url(QueueName=schedule.target_arn.rsplit(":", 1)[-1])["QueueUrl"]
    message: dict[str, Any] = {"QueueUrl": url, "MessageBody": schedule.input}
    if schedule.message_group_id:
        message["MessageGroupId"] = schedule.message_group_id
    sqs.send_message(**message)
    if schedule.delete_after:
        scheduler.delete_schedule(Name=schedule.name, GroupName=schedule.group)
        return
    detail = scheduler.get_schedule(Name=schedule.name, GroupName=schedule.group)
    scheduler.update_schedule(
        **{
            key: detail[key]
            for key in ("Name", "GroupName", "ScheduleExpression", "FlexibleTimeWindow", "Target")
        },
        State="DISABLED",
    )
