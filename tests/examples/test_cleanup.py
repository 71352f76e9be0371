"""The example job ``cleanup`` (every 5 minutes, policy ``skip``), tested as a team tests its own:
on the deployed app, through Scheduler's deliveries, the guard and the runs table."""

from __future__ import annotations

from datetime import timedelta

from vigil_tools.testing import VigilStack


def test_a_tick_delivered_three_times_runs_once(vigil_stack: VigilStack) -> None:
    t = vigil_stack.now() + timedelta(minutes=5)

    vigil_stack.fire("cleanup", at=t, copies=3)

    assert [r.status for r in vigil_stack.history("cleanup")] == ["SUCCEEDED"]
    (tick,) = vigil_stack.history("cleanup")
    assert tick.scheduled_at == t
    assert tick.attempts == 1


def test_the_schedule_fires_every_five_minutes(vigil_stack: VigilStack) -> None:
    start = vigil_stack.now()

    vigil_stack.advance(minutes=15)

    history = vigil_stack.history("cleanup")
    assert [r.scheduled_at - start for r in history] == [
        timedelta(minutes=15),
        timedelta(minutes=10),
        timedelta(minutes=5),
    ]
    assert {r.status for r in history} == {"SUCCEEDED"}
    assert vigil_stack.now() == start + timedelta(minutes=15)


def test_a_delivery_past_the_lateness_limit_is_recorded_missed(vigil_stack: VigilStack) -> None:
    t = vigil_stack.now() - timedelta(minutes=10)

    vigil_stack.fire("cleanup", at=t)

    assert [(r.scheduled_at, r.status) for r in vigil_stack.history("cleanup")] == [(t, "MISSED")]
    assert vigil_stack.dead_letters("cleanup") == []
