"""EventBridge Scheduler, emulated: occurrences of each schedule and the input it delivers.

Schedules are read back from the emulator's Scheduler API (created from the template), so the
expression, time zone and input template are the deployed ones.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

_RATE = re.compile(r"^rate\((\d+) (minute|hour|day)s?\)$")
_UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}


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
    """Scheduled times in [start, end), in UTC."""
    expression = schedule.expression
    if match := _RATE.match(expression):
        step = int(match.group(1)) * _UNITS[match.group(2)]
        moment = start
        while moment < end:
            yield moment
            moment += step
        return
    if expression.startswith("at("):
        zone = ZoneInfo(schedule.time_zone)
        moment = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=zone).astimezone(UTC)
        if start <= moment < end:
            yield moment
        return
    if expression.startswith("cron("):
        zone = ZoneInfo(schedule.time_zone)
        iterator = croniter(_to_croniter(expression), start.astimezone(zone) - timedelta(seconds=1))
        while True:
            moment = iterator.get_next(datetime).astimezone(UTC)
            if moment >= end:
                return
            if moment >= start:
                yield moment
        return
    raise ValueError(f"unsupported schedule expression {expression!r}")


def _to_croniter(expression: str) -> str:
    """EventBridge cron (6 fields, '?', day-of-week 1-7 = SUN-SAT) to croniter's 5 fields."""
    minutes, hours, day_of_month, month, day_of_week, _year = expression[5:-1].split()
    day_of_week = re.sub(r"\d+", lambda m: str(int(m.group()) - 1), day_of_week)
    fields = [minutes, hours, day_of_month, month, day_of_week]
    return " ".join("*" if field == "?" else field for field in fields)
