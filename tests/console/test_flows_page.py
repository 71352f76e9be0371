"""The console's tasks page knows flows' states: it counts SLEEPING, WAITING and COMPENSATED
records per task, lists each, and offers to cancel a sleeping or waiting flow (a cancel marks it
and wakes it to stop and compensate). Pure rendering: milliseconds."""

from __future__ import annotations

import pytest

from vigil.console import tasks_page
from vigil.console.controls import FormControls
from vigil.contract.tasks import TaskStatus


def _view(status: str) -> tasks_page.TasksView:
    return tasks_page.TasksView(
        [("tasks", 1)],
        [
            tasks_page.TaskLine(
                "onboard-tenant", {"SLEEPING": 7, "WAITING": 5, "COMPENSATED": 3}, 0, 0, 2, 0
            )
        ],
        None,
        task="onboard-tenant",
        status=status,
        records=[tasks_page.RecordLine("t-1", status, 1, "2026-11-22T12:00:00.000Z", None, None)],
        record={"id": "t-1", "status": status, "wake_at": "2026-11-25T12:00:00.000Z"},
    )


def test_the_tasks_page_counts_flows_by_their_states() -> None:
    html = str(tasks_page.render(_view("SLEEPING"), FormControls()))
    header = html[html.index("<th>task</th>") : html.index("waiting / in flight")]
    for status in ("SLEEPING", "WAITING", "COMPENSATED"):
        assert f"<th>{status}</th>" in header
    row = html[html.index("<b>onboard-tenant</b>") :]
    assert [count for count in ("7", "5", "3") if f">{count}</span>" in row] == ["7", "5", "3"]
    for status in ("sleeping", "waiting", "compensated"):  # each listed on its own
        assert f">{status}<" in html


@pytest.mark.parametrize("status", [TaskStatus.SLEEPING, TaskStatus.WAITING])
def test_a_sleeping_or_waiting_flow_can_be_cancelled_from_its_record(status: TaskStatus) -> None:
    html = str(tasks_page.render(_view(status.value), FormControls()))
    assert "&quot;tasks.cancel&quot;" in html
    assert f"&quot;seen&quot;:&quot;{status.value}&quot;" in html  # refused if it moved on


def test_an_ended_flow_offers_no_cancel() -> None:
    assert "tasks.cancel" not in str(tasks_page.render(_view("COMPENSATED"), FormControls()))
