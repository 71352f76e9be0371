"""What the effects' adversarial tests had to reach into internals for, in the kit (issue 33,
items 10 and 11): killing a run at a chosen request (``vigil_stack.kill(KillAt(...))``), settling
a job's tick or a task (``settle_job``, ``settle_task``, with the three verdicts), and an
operator's rerun of a tick (``vigil_stack.run``). Through the example app's ``daily-report`` job
(its report email in ``run.once("report-email")``) and ``send-receipt`` task (its receipt email
in ``run.once("receipt-email")``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from vigil.settle import NotSettleable
from vigil_tools.testing import KillAt, VigilStack
from vigil_tools.testing.kill import killing as vigil_stack_kill

ORDER = {"order": "o-1", "email": "ann@example.com", "total": 12}


def test_a_job_killed_after_its_email_ends_uncertain_and_done_rerun_runs_the_rest_once(
    vigil_stack: VigilStack,
) -> None:
    tick = vigil_stack.now() + timedelta(minutes=1)
    with vigil_stack.kill(KillAt.effect_done("report-email")) as kill:
        (delivery,) = vigil_stack.fire("daily-report", at=tick)
    # The process died after the email, before its completion: Lambda's two retries find the
    # dead run's lease still live (its 10-minute timeout), and the event is dead-lettered.
    assert kill.fired
    assert [a.error_type for a in delivery.attempts] == [
        "Runtime.ExitError",
        "TickBusy",
        "TickBusy",
    ]
    (running,) = vigil_stack.history("daily-report")
    assert (running.status, running.effects["report-email"]["state"]) == ("RUNNING", "INTENT")

    vigil_stack.advance(minutes=10)  # past the dead run's lease
    vigil_stack.redrive("daily-report")
    (uncertain,) = vigil_stack.history("daily-report")
    assert (uncertain.status, uncertain.uncertain_effect) == ("UNCERTAIN", "report-email")

    settled = vigil_stack.settle_job("daily-report", tick, "report-email", "done_rerun")
    assert settled.status == "FAILED" and "vigil jobs run" in (settled.error_message or "")
    (rerun,) = vigil_stack.run("daily-report", at=tick).attempts

    assert rerun.payload["outcome"] == "SUCCEEDED"
    (done,) = vigil_stack.history("daily-report")
    assert done.status == "SUCCEEDED"
    # The rerun skipped the email: the entry is still the operator's settlement (no run's fence).
    assert (done.effects["report-email"]["fence"], done.effects["report-email"]["settled"]) == (
        0,
        True,
    )


def test_a_task_killed_after_its_email_ends_uncertain_and_is_settled_then_redriven(
    vigil_stack: VigilStack,
) -> None:
    with vigil_stack.kill(KillAt.effect_done("receipt-email")) as kill:
        task_id = vigil_stack.enqueue("send-receipt", ORDER, key="o-1")
    assert kill.fired and vigil_stack.task("send-receipt", task_id).status == "RUNNING"

    vigil_stack.advance(minutes=4)  # the batch comes back after its visibility timeout
    uncertain = vigil_stack.task("send-receipt", task_id)
    assert (uncertain.status, uncertain.uncertain_effect) == ("UNCERTAIN", "receipt-email")

    with pytest.raises(NotSettleable, match="not UNCERTAIN on 'other'"):
        vigil_stack.settle_task("send-receipt", task_id, "other", "done")
    with pytest.raises(ValueError, match="'done', 'done_rerun', 'not_done'"):
        vigil_stack.settle_task("send-receipt", task_id, "receipt-email", "maybe")
    settled = vigil_stack.settle_task("send-receipt", task_id, "receipt-email", "done_rerun")
    assert settled.status.value == "FAILED"
    assert vigil_stack.redrive("send-receipt").moved == [task_id]

    done = vigil_stack.task("send-receipt", task_id)
    assert done.status.value == "SUCCEEDED" and done.result["receipt"].startswith("R-")
    assert (done.effects or {})["receipt-email"]["fence"] == 0  # skipped, not sent again


def test_a_kill_before_a_request_leaves_nothing_of_it_and_bad_kills_are_refused(
    vigil_stack: VigilStack,
) -> None:
    """Killed before its intent left: the effect never began, so Lambda's retry sends it once."""
    tick = vigil_stack.now() + timedelta(minutes=1)
    intent = KillAt("UpdateItem", applied=False, where=KillAt.effect_intent("report-email").where)
    with vigil_stack.kill(intent) as kill:
        (delivery,) = vigil_stack.fire("daily-report", at=tick)
    assert kill.fired and delivery.attempts[0].error_type == "Runtime.ExitError"
    vigil_stack.advance(minutes=10)
    vigil_stack.redrive("daily-report")
    (done,) = vigil_stack.history("daily-report")
    assert (done.status, done.effects["report-email"]["state"]) == ("SUCCEEDED", "DONE")
    assert "settled" not in done.effects["report-email"]  # a run did it, once
    with pytest.raises(ValueError, match="botocore"):
        KillAt("update_item")
    with pytest.raises(ValueError, match="nth=1"):
        KillAt("UpdateItem", nth=0)


def test_a_kill_at_a_request_aws_refuses_still_kills_the_invocation() -> None:
    """``applied=True`` at a request AWS answers with an error (a refused condition): the
    process dies all the same, its answer unheard (found in review: the refusal came back to the
    run, which went on alive while ``kill.fired`` said it was killed)."""
    import boto3
    from moto import mock_aws

    from tests.effects.test_takeover import create
    from vigil_tools.emulator import lambda_runtime

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create(client, "t", "id")
        refused = {"TableName": "t", "Item": {"id": {"S": "a"}}}
        inside = lambda_runtime._current
        inside.inside = True
        try:
            with vigil_stack_kill(KillAt("PutItem")) as kill:
                with pytest.raises(lambda_runtime.InvocationKilled):
                    client.put_item(**refused, ConditionExpression="attribute_exists(id)")
                with pytest.raises(lambda_runtime.InvocationKilled):  # nothing more leaves it
                    client.get_item(TableName="t", Key={"id": {"S": "a"}})
        finally:
            inside.inside, inside.killed = False, None
        assert kill.fired
        assert "Item" not in client.get_item(TableName="t", Key={"id": {"S": "a"}})
