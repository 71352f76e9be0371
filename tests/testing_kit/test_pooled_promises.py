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
