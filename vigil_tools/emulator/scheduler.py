"""EventBridge Scheduler, emulated: occurrences of each schedule and the input it delivers.

Schedules are read back from the emulator's Scheduler API (created from the template), so the
expression, time zone and input template are the deployed ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil.contract.schedule import Schedule as ScheduleExpression


@dataclass(frozen=True)
class Schedule:
    name: str
    expression: str
    time_zone: str
    target_arn: str
    input_template: str

    def render_input(self, scheduled_at: datetime, attempt: int = 1) -> str:
        """The target input with Scheduler's context attributes filled in, as Scheduler does."""
        return (
            self.input_template.replace(
                "<aws.scheduler.scheduled-time>", scheduled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            )
            .replace("<aws.scheduler.execution-id>", str(uuid.uuid4()))
            .replace("<aws.scheduler.attempt-number>", str(attempt))
            .replace("<aws.scheduler.schedule-arn>", f"arn:aws:scheduler:::schedule/{self.name}")
        )


def deployed_schedules(session: Any) -> list[Schedule]:
    client = session.client("scheduler")
    schedules = []
    for summary in client.list_schedules()["Schedules"]:
        detail = client.get_schedule(Name=summary["Name"])
        if detail.get("State") != "ENABLED":
            continue
        schedules.append(
            Schedule(
                name=detail["Name"],
                expression=detail["ScheduleExpression"],
                time_zone=detail.get("ScheduleExpressionTimezone", "UTC"),
                target_arn=detail["Target"]["Arn"],
                input_template=detail["Target"].get("Input", "{}"),
            )
        )
    return schedules


def occurrences(schedule: Schedule, start: datetime, end: datetime) -> Iterator[datetime]:
    """Scheduled times in [start, end), in UTC, from the runtime's own evaluator (the one the
    audit and ``vigil jobs next`` use); a rate() schedule starts at ``start``, as at creation."""
    evaluator = ScheduleExpression(schedule.expression, schedule.time_zone)
    return evaluator.between(start, end, anchor=start if evaluator.needs_anchor else None)
