"""The EventBridge Scheduler evaluator: against croniter where they agree, and AWS's own rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.contract.schedule import InvalidSchedule, Schedule

START = datetime(2026, 1, 1, tzinfo=UTC)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        number.map(str),
        # croniter reads a one-value range ("0-0") unlike cron; ranges here span two values or more
        st.tuples(number, number)
        .filter(lambda p: p[0] != p[1])
        .map(lambda p: f"{min(p)}-{max(p)}"),
        st.integers(1, 20).map(lambda s: f"*/{s}"),
        st.lists(number, min_size=1, max_size=3, unique=True).map(
            lambda xs: ",".join(map(str, xs))
        ),
    )


@settings(max_examples=150, deadline=None)
@given(
    minutes=_field(0, 59),
    hours=_field(0, 23),
    days=_field(1, 28),
    months=_field(1, 12),
    zone=st.sampled_from(["UTC", "Asia/Tokyo", "America/Phoenix"]),
)
def test_cron_agrees_with_croniter_where_semantics_agree(
    minutes: str, hours: str, days: str, months: str, zone: str
) -> None:
    """Day-of-month only (day-of-week '?'), zones without daylight saving: croniter's ground."""
    ours = Schedule(f"cron({minutes} {hours} {days} {months} ? *)", zone)
    from zoneinfo import ZoneInfo

    reference = croniter(f"{minutes} {hours} {days} {months} *", START.astimezone(ZoneInfo(zone)))
    expected = [reference.get_next(datetime).astimezone(UTC) for _ in range(5)]
    assert ours.next_after(START, 5) == expected


def test_spring_forward_skips_the_missing_hour_and_fall_back_fires_once() -> None:
    daily = Schedule("cron(30 2 * * ? *)", "Europe/Prague")
    spring = list(
        daily.between(datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC))
    )
    assert [t.day for t in spring] == [28, 30]  # 02:30 on 29 March does not exist
    every_half_hour = Schedule("cron(*/30 * * * ? *)", "Europe/Prague")
    fall = list(
        every_half_hour.between(
            datetime(2026, 10, 24, 23, tzinfo=UTC), datetime(2026, 10, 25, 2, tzinfo=UTC)
        )
    )
    # 02:00 and 02:30 happen twice; they fire once, at their first occurrence (CEST).
    assert [t.strftime("%H:%M") for t in fall] == ["23:00", "23:30", "00:00", "00:30"]


@pytest.mark.parametrize(
    ("expression", "first"),
    [
        ("cron(0 10 ? * 6#3 *)", datetime(2026, 1, 16, 10, tzinfo=UTC)),  # third Friday
        ("cron(0 10 ? * 5L *)", datetime(2026, 1, 29, 10, tzinfo=UTC)),  # last Thursday
        ("cron(0 10 L * ? *)", datetime(2026, 1, 31, 10, tzinfo=UTC)),  # last day
        ("cron(0 10 LW * ? *)", datetime(2026, 1, 30, 10, tzinfo=UTC)),  # last weekday (31 = Sat)
        ("cron(0 10 3W * ? *)", datetime(2026, 1, 2, 10, tzinfo=UTC)),  # 3 Jan is a Saturday
        ("cron(0 10 ? * MON-FRI 2027)", datetime(2027, 1, 1, 10, tzinfo=UTC)),
        ("at(2026-06-01T09:00:00)", datetime(2026, 6, 1, 9, tzinfo=UTC)),
    ],
)
def test_wildcards_and_years(expression: str, first: datetime) -> None:
    assert Schedule(expression).next_after(START, 1) == [first]


def test_rate_counts_elapsed_time_from_a_known_tick() -> None:
    rate = Schedule("rate(1 day)", "Europe/Prague")
    anchor = datetime(2026, 3, 28, 10, 7, tzinfo=UTC)
    assert rate.next_after(anchor, 2, anchor) == [
        anchor + timedelta(days=1),
        anchor + timedelta(days=2),
    ]
    assert rate.is_tick(anchor + timedelta(days=5), anchor)
    assert not rate.is_tick(anchor + timedelta(days=5, minutes=1), anchor)


@pytest.mark.parametrize(
    "expression",
    ["cron(0 10 * * * *)", "cron(0 10 ? * ? *)", "cron(61 * * * ? *)", "rate(0 minutes)", "x"],
)
def test_invalid_expressions_are_refused(expression: str) -> None:
    with pytest.raises(InvalidSchedule):
        Schedule(expression)
