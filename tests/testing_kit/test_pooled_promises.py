"""The kit's ``crash()`` and ``stop_observer()`` return a pooled observer in the state their
docstrings promise, as they do a dedicated one: replaced and RUNNING again, STOPPED. (The kit's
stack with one pooled host: a few seconds.)"""

from __future__ import annotations

from typing import Any


def test_crash_returns_a_pooled_observer_running_again(vigil_stack: Any) -> None:
    vigil_stack.create_observer("p1", "pooled-ticker", {"interval_seconds": 5})
    vigil_stack.advance(seconds=30)

    state = vigil_stack.crash("p1")

    assert (state.status, state.restarts) == ("RUNNING", 1)
    assert state.last_exit is not None and state.last_exit["exit_code"] == 1


def test_stop_observer_returns_a_pooled_observer_stopped(vigil_stack: Any) -> None:
    vigil_stack.create_observer("p1", "pooled-ticker", {"interval_seconds": 5})
    vigil_stack.advance(seconds=30)

    state = vigil_stack.stop_observer("p1")

    assert (state.status, state.desired) == ("STOPPED", "STOPPED")


def test_a_quick_second_crash_comes_back_pending_saying_when_it_restarts(vigil_stack: Any) -> None:
    """A crash soon after another waits out the reconciler's restart backoff: the kit says so
    (PENDING, ``next_start_at``) as soon as the host reported it, pooled or dedicated, instead
    of promising RUNNING (the pooled one also spent a minute of the clock looking for it)."""
    from datetime import datetime

    for name, kind in (("p1", "pooled-ticker"), ("d1", "ticker")):
        vigil_stack.create_observer(name, kind, {"interval_seconds": 5})
        vigil_stack.advance(seconds=30)
        assert vigil_stack.crash(name).status == "RUNNING"  # the first: restarted at once
        before = vigil_stack.now()

        state = vigil_stack.crash(name)

        assert (state.status, state.restarts) == ("PENDING", 1)
        assert state.next_start_at is not None
        restart = datetime.fromisoformat(state.next_start_at)
        assert vigil_stack.now() < restart and (vigil_stack.now() - before).total_seconds() < 15
        # started at the reconciler's first pass past it (the minute's resync)
        vigil_stack.advance(seconds=(restart - vigil_stack.now()).total_seconds() + 60)
        assert (vigil_stack.observer(name).status, vigil_stack.observer(name).restarts) == (
            "RUNNING",
            2,
        )
