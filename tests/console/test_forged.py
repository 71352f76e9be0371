"""Forged and out-of-date invocations on the deployed example app (``vigil_stack``): arguments no
page offered, a record that is not there, a page token no page printed, and a restart pressed on
a view from before someone stopped the observer. Each gets a clear answer on the page, never a
failed invocation, and writes nothing. About 1-2 s each."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.console_stack import page, said
from tests.console.test_actions import RECEIPT

LONG = "x" * 5_000
"""Longer than any name or id (DynamoDB refuses a key over 2,048 bytes)."""


@pytest.mark.parametrize(
    "action",
    [
        {"action": "tasks.cancel", "task": RECEIPT, "id": "no-such-id", "seen": "QUEUED"},
        {
            "action": "tasks.settle",
            "task": RECEIPT,
            "id": "no-such-id",
            "effect": "e",
            "verdict": "done",
        },
    ],
    ids=["cancel", "settle"],
)
def test_an_action_on_a_task_id_with_no_record_is_refused_on_the_page(
    vigil_stack: Any, action: dict[str, Any]
) -> None:
    shown = said(page(vigil_stack, "operate", {"page": "tasks", **action}))

    # cancel reads the record first (refused); settle's conditional write finds none (stale)
    assert "no task send-receipt no-such-id" in shown or (
        "out of date" in shown and "no-such-id: no such record; nothing changed" in shown
    )


def test_a_task_record_gone_since_its_link_was_drawn_is_refused_on_the_page(
    vigil_stack: Any,
) -> None:
    shown = said(page(vigil_stack, "view", {"page": "tasks", "task": RECEIPT, "id": "gone"}))

    assert "Refused: no task send-receipt gone" in shown
    assert RECEIPT in shown  # the page itself still drawn


def test_an_observers_page_token_no_page_printed_is_refused_on_the_page(vigil_stack: Any) -> None:
    shown = said(page(vigil_stack, "view", {"page": "observers", "next": "not-a-cursor"}))

    assert "Refused: " in shown and "cursor" in shown


@pytest.mark.parametrize(
    "action",
    [
        {"page": "jobs", "action": "jobs.run", "job": LONG},
        {
            "page": "jobs",
            "action": "jobs.settle",
            "job": "cleanup",
            "tick": LONG,
            "effect": "e",
            "verdict": "done",
        },
        {"page": "tasks", "action": "tasks.cancel", "task": RECEIPT, "id": LONG},
        {"page": "observers", "action": "observers.restart", "name": LONG},
    ],
    ids=["job", "tick", "task-id", "observer"],
)
def test_a_huge_argument_is_refused_before_any_read_and_not_echoed(
    vigil_stack: Any, action: dict[str, Any]
) -> None:
    html = page(vigil_stack, "operate", action)
    shown = said(html)

    assert "Refused: " in shown and "5000 characters" in shown
    assert LONG not in shown


def test_a_restart_pressed_on_a_view_from_before_a_stop_is_stale(vigil_stack: Any) -> None:
    started = vigil_stack.create_observer("t-9", "ticker")
    shown = page(vigil_stack, "view", {"page": "observers"})
    (restart,) = [a for a in shown.actions if a.get("action") == "observers.restart"]
    stop = {"page": "observers", "action": "observers.stop", "name": "t-9"}
    page(vigil_stack, "operate", stop)  # someone else stops it
    vigil_stack.fleet.settle()
    stopped = vigil_stack.observer("t-9")
    assert stopped.status == "STOPPED" and stopped.generation == started.generation

    stale = said(page(vigil_stack, "operate", restart))

    assert "out of date" in stale and "stopped" in stale
    assert vigil_stack.observer("t-9") == stopped  # not re-armed
