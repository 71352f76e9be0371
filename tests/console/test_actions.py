"""The console's buttons on the deployed example app: each action does what the CLI's does and
records the console as its actor; a stale button and an action sent to the view function write
nothing. Each test drives the emulator's stack (``vigil_stack``): about 1-3 s each."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.console.console_stack import invoke, page, said
from vigil.contract.tasks import PK_PREFIX
from vigil.jobs.store import RunStore

JOB = "cleanup"
RECEIPT = "send-receipt"


def runs(stack: Any) -> RunStore:
    return RunStore(stack.account.session.client("dynamodb"), stack.catalog.runs_table)


def head(stack: Any, job: str = JOB) -> Any:
    return runs(stack).head(job)


def test_every_page_draws_on_the_deployed_stack(vigil_stack: Any) -> None:
    for name in ("now", "jobs", "tasks", "observers"):
        shown = said(page(vigil_stack, "view", {"page": name}))

        assert "Refused" not in shown
    assert JOB in said(page(vigil_stack, "view", {"page": "jobs"}))
    assert RECEIPT in said(page(vigil_stack, "view", {"page": "tasks"}))


def test_pause_then_resume_with_the_console_as_actor_and_a_stale_second_press(
    vigil_stack: Any,
) -> None:
    reason = {f"reason-{JOB}": "deploy freeze"}

    paused = page(
        vigil_stack, "operate", {"page": "jobs", "action": "jobs.pause", "job": JOB}, reason
    )
    again = page(
        vigil_stack, "operate", {"page": "jobs", "action": "jobs.pause", "job": JOB}, reason
    )

    first = head(vigil_stack)
    assert f"{JOB}: paused (deploy freeze)" in said(paused)
    assert first.paused_by.startswith("console:123456789012:Vigil-console-us-east-1 (request ")
    assert "already paused" in said(again)
    assert head(vigil_stack) == first  # the stale press wrote nothing

    stale = page(
        vigil_stack,
        "operate",
        {"page": "jobs", "action": "jobs.resume", "job": JOB, "seen": "2000-01-01T00:00:00Z"},
    )
    assert "paused again since this page was drawn" in said(stale)
    assert head(vigil_stack) == first

    resumed = page(
        vigil_stack,
        "operate",
        {"page": "jobs", "action": "jobs.resume", "job": JOB, "seen": first.paused_since},
    )
    assert f"{JOB}: resumed" in said(resumed)
    assert not head(vigil_stack).paused_at(int(vigil_stack.now().timestamp() * 1000))


def test_a_pause_without_a_reason_is_refused_and_writes_nothing(vigil_stack: Any) -> None:
    refused = page(vigil_stack, "operate", {"page": "jobs", "action": "jobs.pause", "job": JOB})

    assert "Refused" in said(refused) and "reason" in said(refused)
    assert head(vigil_stack) is None


def test_an_action_sent_to_the_view_function_is_refused_and_writes_nothing(
    vigil_stack: Any,
) -> None:
    reason = {f"reason-{JOB}": "not allowed"}

    refused = page(
        vigil_stack, "view", {"page": "jobs", "action": "jobs.pause", "job": JOB}, reason
    )

    assert "lambda:InvokeFunction" in said(refused) and "nothing was done" in said(refused)
    assert head(vigil_stack) is None


def test_run_now_sends_the_tick_the_guard_records_with_the_console_as_requester(
    vigil_stack: Any,
) -> None:
    ran = page(vigil_stack, "operate", {"page": "jobs", "action": "jobs.run", "job": JOB})

    assert f"{JOB}: run requested" in said(ran)
    vigil_stack.runtime.run_pending()
    (tick,) = runs(vigil_stack).history(JOB)
    assert tick.status.value == "SUCCEEDED"
    assert str(tick.requested_by).startswith("console:123456789012:")


def test_cancel_a_queued_task_then_the_stale_second_press(vigil_stack: Any) -> None:
    task_id = vigil_stack.enqueue(
        RECEIPT, {"order": "o-9", "email": "a@b.c", "total": 1}, delay=timedelta(minutes=10)
    )
    cancel = {
        "page": "tasks",
        "action": "tasks.cancel",
        "task": RECEIPT,
        "id": task_id,
        "seen": "QUEUED",
    }

    done = page(vigil_stack, "operate", cancel)
    again = page(vigil_stack, "operate", cancel)

    assert f"{RECEIPT} {task_id}: CANCELLED" in said(done)
    assert "CANCELLED now (the page showed QUEUED)" in said(again)
    assert vigil_stack.task(RECEIPT, task_id).status == "CANCELLED"


def test_cancel_of_a_running_task_is_asked_with_the_console_as_who_asked(
    vigil_stack: Any,
) -> None:
    task_id = vigil_stack.enqueue(
        RECEIPT, {"order": "o-8", "email": "a@b.c", "total": 1}, delay=timedelta(minutes=10)
    )
    vigil_stack.account.session.client("dynamodb").update_item(
        TableName=vigil_stack._task_client.catalog.spec(RECEIPT).table,
        Key={"pk": {"S": f"{PK_PREFIX}{RECEIPT}"}, "sk": {"S": task_id}},
        UpdateExpression="SET #s = :running",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":running": {"S": "RUNNING"}},
    )
    cancel = {
        "page": "tasks",
        "action": "tasks.cancel",
        "task": RECEIPT,
        "id": task_id,
        "seen": "RUNNING",
    }

    done = said(page(vigil_stack, "operate", cancel))

    record = vigil_stack.task(RECEIPT, task_id)
    assert "cancel requested" in done
    assert record.status == "RUNNING" and record.cancel_requested_at
    assert str(record.cancel_requested_by).startswith("console:123456789012:")


def test_redrive_a_failed_task_then_the_stale_second_press(vigil_stack: Any) -> None:
    task_id = vigil_stack.enqueue(RECEIPT, {"order": "o-2"})  # no email: fails every attempt
    vigil_stack.advance(minutes=5)
    assert vigil_stack.task(RECEIPT, task_id).status == "FAILED"
    now = said(page(vigil_stack, "view", {"page": "now"}))
    assert RECEIPT in now

    moved = page(
        vigil_stack,
        "operate",
        {"page": "now", "action": "tasks.redrive", "task": RECEIPT, "seen": 1},
    )
    again = page(
        vigil_stack,
        "operate",
        {"page": "now", "action": "tasks.redrive", "task": RECEIPT, "seen": 1},
    )

    assert f"{RECEIPT}: 1 tasks sent back to the queue" in said(moved)
    assert "no dead letters any more" in said(again)


def test_stop_an_observer_then_the_stale_second_press(vigil_stack: Any) -> None:
    vigil_stack.create_observer("t-1", "ticker")
    stop = {"page": "observers", "action": "observers.stop", "name": "t-1", "seen": 1}

    done = page(vigil_stack, "operate", stop)
    vigil_stack.fleet.settle()
    again = page(vigil_stack, "operate", stop)

    assert "t-1: stop requested" in said(done)
    assert "already stopped or stopping" in said(again)
    assert vigil_stack.observer("t-1").status == "STOPPED"


def test_restart_an_observer_shown_at_an_older_generation_is_stale(vigil_stack: Any) -> None:
    started = vigil_stack.create_observer("t-2", "ticker")
    restart = {"page": "observers", "action": "observers.restart", "name": "t-2"}

    stale = page(vigil_stack, "operate", {**restart, "seen": started.generation - 1})
    done = page(vigil_stack, "operate", {**restart, "seen": started.generation})
    vigil_stack.fleet.settle()

    assert "restarted already?" in said(stale)
    assert "t-2: restart requested" in said(done)
    assert vigil_stack.observer("t-2").generation == started.generation + 1


def test_the_console_describes_itself_when_asked(vigil_stack: Any) -> None:
    assert invoke(vigil_stack, "view", {"describe": True}).startswith("## Vigil console")


def test_settle_an_uncertain_task_from_its_record_then_the_stale_second_press(
    vigil_stack: Any,
) -> None:
    from vigil_tools.testing import KillAt

    order = {"order": "o-1", "email": "ann@example.com", "total": 12}
    with vigil_stack.kill(KillAt.effect_done("receipt-email")):
        task_id = vigil_stack.enqueue(RECEIPT, order, key="o-1")
    vigil_stack.advance(minutes=4)  # the batch comes back: UNCERTAIN on its email
    shown = page(
        vigil_stack,
        "view",
        {"page": "tasks", "task": RECEIPT, "status": "UNCERTAIN", "id": task_id},
    )
    settle = {
        "page": "tasks",
        "action": "tasks.settle",
        "task": RECEIPT,
        "id": task_id,
        "effect": "receipt-email",
        "verdict": "done",
    }
    assert settle in shown.actions  # the record's page offers exactly this button

    done = page(vigil_stack, "operate", settle)
    again = page(vigil_stack, "operate", settle)

    assert f"{RECEIPT} {task_id}: settled done, now SUCCEEDED" in said(done)
    assert "out of date" in said(again) and "not UNCERTAIN" in said(again)
    assert vigil_stack.task(RECEIPT, task_id).status == "SUCCEEDED"


def test_settle_an_uncertain_observer_then_the_stale_second_press(vigil_stack: Any) -> None:
    from tests.helpers.observers import leave_uncertain

    vigil_stack.create_observer("t-3", "ticker")
    client = vigil_stack.account.session.client("dynamodb")
    leave_uncertain(client, vigil_stack.fleet.fleet.registry_table, "t-3", "alert", generation=1)
    settle = {
        "page": "now",
        "action": "observers.settle",
        "name": "t-3",
        "effect": "alert",
        "verdict": "not_done",
    }
    assert settle in page(vigil_stack, "view", {"page": "now"}).actions  # a FAILED observer

    done = page(vigil_stack, "operate", settle)
    again = page(vigil_stack, "operate", settle)

    assert "t-3: settled not_done; restart requested" in said(done)
    assert "out of date" in said(again)
