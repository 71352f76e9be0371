"""Time as a dependency, so lease, lateness and retry logic can be tested with an injected clock
and an injected sleep."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime."""
Sleeper = Callable[[float], None]
"""Waits the given number of seconds (``time.sleep``; tests record the pauses instead)."""


def system_clock() -> datetime:
    return datetime.now(UTC)


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_epoch_ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def iso(moment: datetime) -> str:
    """A fixed-width UTC timestamp (milliseconds, 'Z'): sorts lexicographically as it sorts in time."""
    return f"{_seconds(moment)}.{moment.microsecond // 1000:03d}Z"


def iso_seconds(moment: datetime) -> str:
    """A scheduled tick's time, to the whole second ('Z'), as EventBridge writes an event's
    ``time`` and Scheduler its ``<aws.scheduler.scheduled-time>``: the key a job's run is recorded
    under. Fixed width too, so it sorts as it sorts in time."""
    return f"{_seconds(moment)}Z"


def _seconds(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


class ManualClock:
    """A clock that moves only when told to: for tests, benchmarks and the local emulator."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start

    def __call__(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        self._now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = moment
