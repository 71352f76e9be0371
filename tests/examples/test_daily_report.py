"""The example job ``daily-report`` (cron 07:30 Europe/Prague on weekdays, policy ``allow``), tested
as a team tests its own: the deployed schedule's time zone and the guard decide, not the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vigil_tools.demo.effects import killed_after_the_email
from vigil_tools.testing import VigilStack


def test_the_report_runs_at_half_past_seven_in_prague(vigil_stack: VigilStack) -> None:
    vigil_stack.advance(minutes=30)  # from 07:00 Prague (06:00 UTC) on a Monday

    (tick,) = vigil_stack.history("daily-report")
    assert (tick.scheduled_at, tick.status) == (
        datetime(2026, 11, 23, 6, 30, tzinfo=UTC),
        "SUCCEEDED",
    )


def test_a_day_delivered_three_times_runs_once(vigil_stack: VigilStack) -> None:
    # the first day's tick (07:30 in Prague): a later day would follow the days the schedule
    # itself fires on the way there, as on AWS
    monday = datetime(2026, 11, 23, 6, 30, tzinfo=UTC)

    vigil_stack.fire("daily-report", at=monday, copies=3)

    assert [
        (r.scheduled_at, r.status, r.attempts) for r in vigil_stack.history("daily-report")
    ] == [(monday, "SUCCEEDED", 1)]


def test_a_late_redelivery_within_the_limit_still_runs(vigil_stack: VigilStack) -> None:
    t = vigil_stack.now() - timedelta(minutes=3)

    vigil_stack.fire("daily-report", at=t)

    assert [r.status for r in vigil_stack.history("daily-report")] == ["SUCCEEDED"]


def test_a_run_killed_after_its_email_ends_uncertain_not_a_second_email(
    vigil_stack: VigilStack, caplog: pytest.LogCaptureFixture
) -> None:
    monday = datetime(2026, 11, 23, 6, 30, tzinfo=UTC)

    with killed_after_the_email():  # the email leaves, its completion's write never lands
        vigil_stack.fire("daily-report", at=monday)  # and Lambda retries the delivery

    (tick,) = vigil_stack.history("daily-report")
    assert (tick.status, tick.attempts, tick.uncertain_effect) == ("UNCERTAIN", 2, "report-email")
    assert [r.getMessage() for r in caplog.records].count("report emailed") == 1
