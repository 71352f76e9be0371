"""EventBridge Scheduler expressions, evaluated: when a job's schedule fires.

One evaluator for everything that must agree with the scheduler: ``cdk synth``'s check that a
schedule can be evaluated (hence its place in the contract), the audit of ticks that never arrived, the check that a ``run --at`` time is a tick, backfill's expected ticks, ``vigil jobs
next`` and the local emulator. Standard library only (``zoneinfo``), so it ships in the Lambda
asset as it is.

Grammar and semantics (EventBridge Scheduler user guide):

* ``rate(n minute(s)|hour(s)|day(s))``: every *n* units of elapsed time from the schedule's start
  (a day is 24 hours, across daylight-saving changes too). The start is not in the expression, so
  callers pass an ``anchor``: any tick of the schedule.
* ``cron(minutes hours day-of-month month day-of-week year)`` in the schedule's time zone; exactly
  one of the day fields is ``?``. Day-of-week is 1-7 = SUN-SAT (or names). Wildcards: ``L`` (last
  day of the month; in day-of-week, ``5L`` is the last Thursday and ``L`` alone is Saturday), ``W``
  (``15W`` the weekday nearest the 15th within the month, ``LW`` the last weekday), ``#`` (``6#3``
  the third Friday).
* ``at(yyyy-mm-ddThh:mm:ss)`` once, in the time zone.

Daylight saving time, as the scheduler does it: a local time the clocks skip (spring forward) does
not fire; a local time that happens twice (fall back) fires once, at its first occurrence.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UNIT = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
_MONTHS = {m.upper(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAYS = {d: i for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)}
_LAST_YEAR = 2199


class InvalidSchedule(ValueError):
    """The expression or time zone is not one EventBridge Scheduler accepts."""


def _numbers(field: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int]:
    """``*``, ``a``, ``a-b``, ``a/s``, ``a-b/s``, ``*/s``, comma lists; names allowed."""

    def number(text: str) -> int:
        value = names.get(text.upper()) if names else None
        if value is None:
            if not text.isdigit():
                raise InvalidSchedule(f"{text!r} is not a number")
            value = int(text)
        if not low <= value <= high:
            raise InvalidSchedule(f"{value} is outside {low}-{high}")
        return value

    found: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise InvalidSchedule(f"step {step_text!r} must be positive")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, b = span.split("-", 1)
            first, last = number(a), number(b)
            if last < first:
                # EventBridge does not document ranges that wrap around; a schedule Vigil cannot
                # evaluate could never be audited, so it is refused, with the unambiguous spelling.
                raise InvalidSchedule(f"{span!r} wraps around: write it as {a}-{high},{low}-{b}")
        else:
            first = number(span)
            last = high if step_text else first
        found.update(range(first, last + 1, step))
    return found


@dataclass(frozen=True)
class _DayRule:
    """Which days of a month match: plain numbers plus the L/W/# wildcards."""

    days_of_month: frozenset[int] = frozenset()
    last_day: bool = False
    last_weekday: bool = False
    nearest_weekday: frozenset[int] = frozenset()
    days_of_week: frozenset[int] = frozenset()
    last_of_week: frozenset[int] = frozenset()
    nth_of_week: frozenset[tuple[int, int]] = frozenset()

    def matches(self, day: date) -> bool:
        last = calendar.monthrange(day.year, day.month)[1]
        aws_dow = (day.weekday() + 1) % 7 + 1
        return (
            day.day in self.days_of_month
            or (self.last_day and day.day == last)
            or (self.last_weekday and day == _nearest_weekday(day.replace(day=last)))
            or any(
                day == _nearest_weekday(day.replace(day=min(n, last))) for n in self.nearest_weekday
            )
            or aws_dow in self.days_of_week
            or (aws_dow in self.last_of_week and day.day + 7 > last)
            or (aws_dow, (day.day - 1) // 7 + 1) in self.nth_of_week
        )


def _nearest_weekday(target: date) -> date:
    """The weekday nearest ``target`` without leaving its month (Quartz's and AWS's ``W``)."""
    weekday = target.weekday()
    if weekday < 5:
        return target
    last = calendar.monthrange(target.year, target.month)[1]
    if weekday == 5:  # Saturday: Friday, unless that leaves the month
        return target - timedelta(days=1) if target.day > 1 else target + timedelta(days=2)
    return target + timedelta(days=1) if target.day < last else target - timedelta(days=2)


def _day_of_month_rule(field: str) -> _DayRule:
    plain, nearest, last_day, last_weekday = [], set(), False, False
    for part in field.split(","):
        if part == "L":
            last_day = True
        elif part == "LW":
            last_weekday = True
        elif part.endswith("W"):
            nearest |= _numbers(part[:-1], 1, 31)
        else:
            plain.append(part)
    days = _numbers(",".join(plain), 1, 31) if plain else set()
    return _DayRule(
        days_of_month=frozenset(days),
        last_day=last_day,
        last_weekday=last_weekday,
        nearest_weekday=frozenset(nearest),
    )


def _day_of_week_rule(field: str) -> _DayRule:
    plain, last_of, nth = [], set(), set()
    for part in field.split(","):
        if part == "L":
            plain.append("7")
        elif part.endswith("L"):
            last_of |= _numbers(part[:-1], 1, 7, _DAYS)
        elif "#" in part:
            day, _, which = part.partition("#")
            if not which.isdigit() or not 1 <= int(which) <= 5:
                raise InvalidSchedule(f"{part!r}: the week after '#' must be 1-5")
            nth |= {(d, int(which)) for d in _numbers(day, 1, 7, _DAYS)}
        else:
            plain.append(part)
    days = _numbers(",".join(plain), 1, 7, _DAYS) if plain else set()
    return _DayRule(
        days_of_week=frozenset(days), last_of_week=frozenset(last_of), nth_of_week=frozenset(nth)
    )


@dataclass(frozen=True)
class _Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    years: frozenset[int]
    days: _DayRule

    @classmethod
    def parse(cls, body: str) -> _Cron:
        fields = body.split()
        if len(fields) != 6:
            raise InvalidSchedule(
                "cron needs 6 fields: minutes hours day-of-month month day-of-week year"
            )
        minutes, hours, dom, month, dow, year = fields
        if (dom == "?") == (dow == "?"):
            raise InvalidSchedule("exactly one of day-of-month and day-of-week must be '?'")
        return cls(
            minutes=tuple(sorted(_numbers(minutes, 0, 59))),
            hours=tuple(sorted(_numbers(hours, 0, 23))),
            months=frozenset(_numbers(month, 1, 12, _MONTHS)),
            years=frozenset(_numbers(year, 1970, _LAST_YEAR)),
            days=_day_of_week_rule(dow) if dom == "?" else _day_of_month_rule(dom),
        )

    def local_times(self, first_day: date) -> Iterator[datetime]:
        """Matching wall-clock times (naive), day by day from ``first_day``, in order."""
        day = first_day
        last_year = max(self.years)
        while day.year <= last_year:
            if day.year in self.years and day.month in self.months and self.days.matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        yield datetime.combine(day, time(hour, minute))
            day += timedelta(days=1)


@dataclass(frozen=True)
class Schedule:
    """A job's schedule expression in its time zone."""

    expression: str
    time_zone: str = "UTC"

    def __post_init__(self) -> None:
        self._zone()  # refuses an unknown time zone now, not at first use
        self._parsed()

    def _zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidSchedule(f"{self.time_zone!r} is not an IANA time zone") from None

    def _parsed(self) -> timedelta | _Cron | datetime:
        expression = self.expression.strip()
        if match := _RATE.match(expression):
            value = int(match.group(1))
            if value < 1:
                raise InvalidSchedule(f"{expression!r}: the rate must be at least 1")
            return value * _UNIT[match.group(2).rstrip("s")]
        if expression.startswith("cron(") and expression.endswith(")"):
            try:
                return _Cron.parse(expression[5:-1])
            except (InvalidSchedule, ValueError) as error:
                raise InvalidSchedule(f"{expression!r}: {error}") from None
        if match := _AT.match(expression):
            return datetime.fromisoformat(match.group(1))
        raise InvalidSchedule(f"{expression!r} is not a rate(), cron() or at() expression")

    @property
    def period(self) -> timedelta | None:
        """A rate()'s step; None for cron() and at()."""
        parsed = self._parsed()
        return parsed if isinstance(parsed, timedelta) else None

    @property
    def needs_anchor(self) -> bool:
        return self.period is not None

    def between(
        self, start: datetime, end: datetime, anchor: datetime | None = None
    ) -> Iterator[datetime]:
        """Ticks in ``[start, end)``, aware UTC, in order. ``anchor``: any tick, for rate()."""
        parsed, zone = self._parsed(), self._zone()
        if isinstance(parsed, timedelta):
            if anchor is None:
                raise InvalidSchedule(f"{self.expression!r} needs an anchor (a known tick)")
            steps = -((anchor - start) // parsed)  # ceil((start - anchor) / period)
            moment = anchor + steps * parsed
            while moment < end:
                yield moment.astimezone(UTC)
                moment += parsed
            return
        if isinstance(parsed, datetime):
            once = _resolve(parsed, zone)
            if once is not None and start <= once < end:
                yield once
            return
        for local in parsed.local_times(start.astimezone(zone).date() - timedelta(days=1)):
            fired = _resolve(local, zone)
            if fired is None or fired < start:
                continue
            if fired >= end:
                return
            yield fired

    def next_after(
        self, moment: datetime, count: int, anchor: datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` ticks strictly after ``moment``."""
        found: list[datetime] = []
        horizon = datetime(_LAST_YEAR + 1, 1, 1, tzinfo=UTC)
        for tick in self.between(moment + timedelta(seconds=1), horizon, anchor):
            found.append(tick)
            if len(found) == count:
                break
        return found

    def is_tick(self, moment: datetime, anchor: datetime | None = None) -> bool:
        return next(self.between(moment, moment + timedelta(seconds=1), anchor), None) == moment


def _resolve(local: datetime, zone: ZoneInfo) -> datetime | None:
    """A wall-clock time in ``zone`` as UTC: None if the clocks skip it, the first if it repeats."""
    aware = local.replace(tzinfo=zone, fold=0)
    moment = aware.astimezone(UTC)
    if moment.astimezone(zone).replace(tzinfo=None) != local:
        return None
    return moment
