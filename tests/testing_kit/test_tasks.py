"""The testing kit's tasks: enqueue through ``vigil.tasks``, delivered by the emulator's SQS event
source mappings on the simulated clock, read back from the tasks table.

These need the tasks runtime (``vigil.tasks``) and an app that declares the example tasks
(``send-receipt``, ``provision-tenant``): skipped until both are there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from vigil.contract.tasks import CatalogField
from vigil_tools.testing.names import UnknownName

# ImportError too: a vigil.tasks from another checkout that does not match this contract
pytest.importorskip("vigil.tasks", exc_type=ImportError)

RECEIPT = "send-receipt"
TENANT = "provision-tenant"
ORDER = {"order": "o-1", "email": "ann@example.com", "total": 12}


@pytest.fixture
def stack(vigil_stack: Any) -> Any:
    if not {RECEIPT, TENANT} <= set(vigil_stack.tasks):
        pytest.skip(f"the app declares no {RECEIPT}/{TENANT} tasks yet")
    return vigil_stack


def test_a_receipt_enqueued_three_times_with_one_key_runs_once(stack: Any) -> None:
    task_id = stack.enqueue(RECEIPT, ORDER, key="o-1", copies=3)

    state = stack.task(RECEIPT, task_id)
    assert task_id == "o-1"
    assert (state.status, state.attempts) == ("SUCCEEDED", 1)
    assert state.result["order"] == "o-1"
    events = stack.task_events(RECEIPT)
    assert [(e["detail"]["id"], e["detail"]["status"]) for e in events] == [("o-1", "SUCCEEDED")]
    assert stack.dead_letters(RECEIPT) == []

    again = stack.enqueue(RECEIPT, ORDER, key="o-1")  # later, the same key: the same task
    assert again == "o-1"
    assert stack.task(RECEIPT, "o-1").attempts == 1


def test_a_poison_payload_fails_at_once_and_lands_in_the_dead_letter_queue(stack: Any) -> None:
    """send-receipt declares ``no_retry_on=(InvalidOrder,)``: a payload without an email took
    4 attempts and 3.5 minutes to reach FAILED; now its first attempt ends it."""
    task_id = stack.enqueue(RECEIPT, {"order": "o-2"})  # no email: no retry can help

    failed = stack.task(RECEIPT, task_id)
    assert (failed.status, failed.attempts, failed.error_type) == ("FAILED", 1, "InvalidOrder")
    (letter,) = stack.dead_letters(RECEIPT)
    assert (letter.task, letter.id) == (RECEIPT, task_id)
    assert "not retried: InvalidOrder" in letter.reason and "needs an order and an email" in (
        letter.reason
    )
    assert [e["detail"]["status"] for e in stack.task_events(RECEIPT)] == ["FAILED"]
    stack.advance(minutes=5)
    assert stack.task(RECEIPT, task_id).attempts == 1  # no further attempt

    redriven = stack.redrive(RECEIPT)  # still poison: back in the dead-letter queue, once
    assert redriven.moved == [task_id]
    stack.advance(minutes=5)
    again = stack.task(RECEIPT, task_id)
    assert (again.status, again.attempts) == ("FAILED", 2)
    assert [d.id for d in stack.dead_letters(RECEIPT)] == [task_id]


def test_a_delayed_task_runs_when_its_delay_is_over(stack: Any) -> None:
    task_id = stack.enqueue(RECEIPT, ORDER, delay=120)
    assert stack.task(RECEIPT, task_id).status == "QUEUED"
    stack.advance(seconds=119)
    assert stack.task(RECEIPT, task_id).status == "QUEUED"
    stack.advance(seconds=2)
    assert stack.task(RECEIPT, task_id).status == "SUCCEEDED"


def test_a_start_beyond_fifteen_minutes_goes_through_a_one_time_schedule(stack: Any) -> None:
    # A minute beyond SQS's 15: every minute the test's clock passes is a step of the deployed
    # app (the reconciler's resync), so the shortest start beyond the limit proves it cheapest.
    task_id = stack.enqueue(RECEIPT, ORDER, delay=timedelta(minutes=16))
    scheduler = stack.account.session.client("scheduler")
    group = stack.tasks_catalog[RECEIPT]["schedule_group"]
    assert len(scheduler.list_schedules(GroupName=group)["Schedules"]) == 1
    stack.advance(minutes=15)
    assert stack.task(RECEIPT, task_id).status == "QUEUED"
    stack.advance(minutes=2)
    assert stack.task(RECEIPT, task_id).status == "SUCCEEDED"
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == []  # DELETE after completion


def test_an_ordered_group_runs_in_enqueue_order(stack: Any) -> None:
    ids = [
        stack.enqueue(TENANT, {"tenant": "t1", "action": action}, group="t1", deliver=False)
        for action in ("create", "resize", "delete")
    ]
    stack.advance(seconds=1)
    assert [stack.task(TENANT, i).status for i in ids] == ["SUCCEEDED"] * 3
    assert [e["detail"]["id"] for e in stack.task_events(TENANT)] == ids


def test_unknown_task_names_the_tasks_there_are(stack: Any) -> None:
    with pytest.raises(UnknownName, match=RECEIPT):
        stack.enqueue("send-reciept", ORDER)
    with pytest.raises(UnknownName, match=RECEIPT):
        stack.task("send-reciept", "x")
    with pytest.raises(LookupError, match="never enqueued"):
        stack.task(RECEIPT, "nobody")
    with pytest.raises(ValueError, match="one-time schedule"):
        stack.enqueue(RECEIPT, ORDER, copies=2, delay=timedelta(hours=1))


def test_a_big_result_goes_to_the_deployed_results_bucket_and_reads_back(stack: Any) -> None:
    big = ORDER | {"order": "o-big", "email": "a" * 5_000 + "@example.com"}  # a 5 KB result
    stack.enqueue(RECEIPT, big, key="o-big")
    state = stack.task(RECEIPT, "o-big")
    assert state.status == "SUCCEEDED" and state.result["email"] == big["email"]
    assert state.result_ref.startswith("s3://")  # the record kept the location, not the result
    (event,) = [e for e in stack.task_events(RECEIPT) if e["detail"]["id"] == "o-big"]
    assert event["detail"]["result_ref"] == state.result_ref


def test_the_deployed_audit_finds_a_retry_whose_message_is_gone(stack: Any) -> None:
    # an unknown action: retried (provision-tenant retries every error), so a retry waits
    task_id = stack.enqueue(TENANT, {"tenant": "t-3", "action": "explode"}, group="t-3")
    assert stack.task(TENANT, task_id).status == "QUEUED"
    sqs = stack.account.session.client("sqs")
    url = sqs.get_queue_url(QueueName=stack.tasks_catalog[TENANT]["queue_url"].rsplit("/", 1)[1])
    sqs.purge_queue(QueueUrl=url["QueueUrl"])  # the retry's message, gone

    audits = [
        invocation.attempts[-1].payload
        # its retry is due within the queue's visibility (12 min) and max_queue_age (30 min)
        for invocation in stack.advance(minutes=50)
        if invocation.attempts and "stranded" in (invocation.attempts[-1].payload or {})
    ]
    # its message may still come: not yet (and none of the example's tasks is stuck)
    assert audits and audits[0] == {"stranded": [], "stuck": []}
    assert audits[-1] == {"stranded": [f"{TENANT} {task_id}"], "stuck": []}


def test_a_high_priority_receipt_starts_before_the_normal_ones_still_queued(stack: Any) -> None:
    """send-receipt declares the level "high": its own queue and event source mapping, polled
    beside the normal queue (the emulator's mappings of one function take turns, a poll each),
    so a high receipt waits for one poll of the normal backlog, not for it to drain."""
    levels = stack.tasks_catalog[RECEIPT][CatalogField.PRIORITY_QUEUE_URLS]
    high_queue = levels["high"]
    # Given more normal receipts queued than one poll takes (5 batches of 10), then a high one
    backlog = [
        stack.enqueue(RECEIPT, {**ORDER, "order": f"bulk-{n}"}, deliver=False) for n in range(60)
    ]
    high = stack.enqueue(RECEIPT, {**ORDER, "order": "vip"}, priority="high", deliver=False)
    before = len(stack.batches)

    # When the event source mappings deliver what is due
    stack.advance(seconds=0)

    # Then the high receipt's batch runs after the first poll of the normal queue, before the
    # 10 normal receipts still queued then
    delivered = stack.batches[before:]
    queues = [batch.queue for batch in delivered]
    first_high = queues.index(high_queue)
    normal_after = sum(
        len(b.message_ids) for b in delivered[first_high + 1 :] if b.queue != high_queue
    )
    assert [len(b.message_ids) for b in delivered if b.queue == high_queue] == [1]
    assert normal_after == 10
    # And every receipt ran once
    assert stack.task(RECEIPT, high).status == "SUCCEEDED"
    assert {stack.task(RECEIPT, t).status for t in backlog} == {"SUCCEEDED"}
