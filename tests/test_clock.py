"""The two timestamp formats every part of Vigil writes, from ``vigil.clock``: a scheduled tick's
(whole seconds, as EventBridge and Scheduler write one) and a record's (milliseconds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from vigil.clock import iso, iso_seconds
from vigil.jobs.events import tick_key

MOMENT = datetime(2026, 11, 22, 9, 5, 7, 123456, tzinfo=UTC)


def test_a_tick_is_written_to_the_whole_second_in_utc_with_a_z() -> None:
    assert iso_seconds(MOMENT) == "2026-11-22T09:05:07Z"
    assert iso_seconds(MOMENT.astimezone(timezone(timedelta(hours=-5)))) == "2026-11-22T09:05:07Z"


def test_a_record_time_keeps_the_milliseconds_and_both_sort_as_they_sort_in_time() -> None:
    assert iso(MOMENT) == "2026-11-22T09:05:07.123Z"
    assert iso(MOMENT.replace(microsecond=0)) == "2026-11-22T09:05:07.000Z"
    moments = [MOMENT + timedelta(seconds=s) for s in (3600 * 24 * 40, -1, 0, 59, 3600)]
    for write in (iso, iso_seconds):
        assert sorted(write(m) for m in moments) == [write(m) for m in sorted(moments)]


def test_a_tick_key_is_the_tick_format_and_a_run_now_key_the_record_format() -> None:
    assert tick_key(MOMENT) == iso_seconds(MOMENT)
    assert tick_key(MOMENT, with_ms=True) == iso(MOMENT)
