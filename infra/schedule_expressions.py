"""Synth-time checks of EventBridge Scheduler expressions, so a typo fails ``cdk synth``, not a deploy.

Grammar (AWS Scheduler user guide): ``rate(value unit)`` with unit minute(s)/hour(s)/day(s);
``cron(minutes hours day-of-month month day-of-week year)`` where exactly one of day-of-month and
day-of-week is ``?``; ``at(yyyy-mm-ddThh:mm:ss)``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from vigil.contract.schedule import InvalidSchedule, Schedule

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")

_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_DAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"
_CRON_FIELDS: list[tuple[str, str]] = [
    ("minutes", r"[0-9,\-*/]+"),
    ("hours", r"[0-9,\-*/]+"),
    ("day-of-month", r"[0-9,\-*?/LW]+"),
    ("month", rf"([0-9,\-*/]|{_MONTHS})+"),
    ("day-of-week", rf"([0-9,\-*?/L#]|{_DAYS})+"),
    ("year", r"[0-9,\-*/]+"),
]
_RANGES = {"minutes": (0, 59), "hours": (0, 23), "day-of-month": (1, 31), "month": (1, 12)}


def validate_schedule(expression: str) -> str | None:
    """None if valid, else what is wrong with it."""
    if not isinstance(expression, str) or not expression.strip():
        return "must be a rate(), cron() or at() expression"
    if expression.startswith("rate("):
        match = _RATE.match(expression)
        if not match:
            return f"{expression!r}: expected rate(<positive integer> minute(s)|hour(s)|day(s))"
        value, unit = int(match.group(1)), match.group(2)
        if value < 1:
            return f"{expression!r}: the rate must be at least 1"
        if (value == 1) != (not unit.endswith("s")):
            return f"{expression!r}: use the singular unit for 1 and the plural otherwise"
        return None
    if expression.startswith("cron("):
        match = _CRON.match(expression)
        fields = match.group(1).split() if match else []
        if len(fields) != 6:
            return f"{expression!r}: cron needs 6 fields (minutes hours day-of-month month day-of-week year)"
        for (name, pattern), value in zip(_CRON_FIELDS, fields, strict=True):
            if not re.fullmatch(pattern, value):
                return f"{expression!r}: invalid {name} field {value!r}"
            if name in _RANGES:
                low, high = _RANGES[name]
                for number in map(int, re.findall(r"\d+", value.split("/")[0])):
                    if not low <= number <= high:
                        return f"{expression!r}: {name} value {number} is outside {low}-{high}"
        if (fields[2] == "?") == (fields[4] == "?"):
            return f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'"
        return None
    if expression.startswith("at("):
        match = _AT.match(expression)
        if not match:
            return f"{expression!r}: expected at(yyyy-mm-ddThh:mm:ss)"
        try:
            datetime.fromisoformat(match.group(1))
        except ValueError as error:
            return f"{expression!r}: {error}"
        return None
    return f"{expression!r}: must start with rate(, cron( or at("


def evaluable(expression: str, time_zone: str) -> str | None:
    """None if Vigil's own evaluator (the audit, backfill, ``vigil jobs next``) reads the schedule
    as EventBridge will; else why not. A schedule the audit cannot evaluate could stop firing
    unnoticed, so synth refuses it."""
    try:
        Schedule(expression, time_zone)  # parses the expression and the zone, or refuses them
    except InvalidSchedule as error:
        return str(error)
    return None


def never_fires_again(expression: str, time_zone: str) -> bool:
    """A cron() with no matching time from now on (``30 2``, years in the past). Depends on the
    clock, so it warns rather than fails: a schedule that has run its course must not block
    every later deploy of the app."""
    if not expression.startswith("cron("):
        return False
    return not Schedule(expression, time_zone).next_after(datetime.now(UTC), 1)


@cache
def _time_zones() -> frozenset[str]:
    """The IANA names (the standard library walks the zone files on each call)."""
    return frozenset(available_timezones())


def validate_time_zone(name: str) -> str | None:
    if name in ("UTC", "Etc/UTC"):
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not an IANA time zone name (e.g. 'Europe/Prague')"
    if name not in _time_zones():
        return f"{name!r} is not an IANA time zone name (e.g. 'Europe/Prague')"
    return None
