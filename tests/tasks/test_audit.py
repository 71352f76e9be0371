"""The stranded-tasks audit (``vigil.tasks.audit``): a task waiting for a retry that no message
holds is found, alarmed and named; a retry still on its way is not; the audit reads the sparse
``retries`` index, which the clean path never writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handlers.tasks_api import run_audit
from tests.helpers.tasks import PLAIN, Stack, invoke, records, settle
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_examples import emf
from tests.tasks.test_runs import Body, url
from vigil.contract.tasks import RETRIES_INDEX
from vigil.tasks.audit import is_stranded
from vigil.tasks.catalog import TaskSpec

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
SPEC = TaskSpec(
    name=PLAIN,
    queue_url="q",
    table="t",
    visibility_timeout=timedelta(minutes=6),
    max_queue_age=timedelta(minutes=15),
)


@pytest.mark.parametrize(
    ("item", "stranded"),
    [
        ({"status": "QUEUED", "retry_at": "2026-11-22T11:38:59.000Z"}, True),  # 21 min late
        ({"status": "QUEUED", "retry_at": "2026-11-22T11:39:01.000Z"}, False),  # within 21 min
        ({"status": "QUEUED"}, False),  # enqueued: its message was sent before it
        ({"status": "RUNNING", "retry_at": "2026-11-22T10:00:00.000Z"}, False),
        ({"status": "SUCCEEDED"}, False),
        (None, False),
    ],
)
def test_a_retry_is_stranded_once_its_message_is_later_than_it_can_be(
    item: dict[str, Any] | None, stranded: bool
) -> None:
    assert is_stranded(item, NOW, SPEC) is stranded


def _index(stack: Stack) -> list[dict[str, Any]]:
    return list(stack.dynamodb.scan(TableName=stack.table, IndexName=RETRIES_INDEX)["Items"])


def test_a_retry_whose_message_is_gone_is_found_and_named(
    stack: Stack, make_handler: HandlerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    client = stack.client()
    for key in ("lost", "coming", "clean"):
        client.enqueue(PLAIN, {}, key=key)
    batch = records(stack.messages(url(stack)))
    failing = {"lost", "coming"}

    def fail_some(run: Any) -> None:
        if run.id in failing:
            raise RuntimeError("first attempt fails")

    handler = make_handler(Body(during=fail_some), retries=2, backoff=timedelta(minutes=1))
    failed = invoke(handler, batch)
    settle(stack, url(stack), batch, failed)
    assert sorted(item["sk"]["S"] for item in _index(stack)) == ["coming", "lost"]
    lost = next(r for r in batch if "lost" in r["body"])
    stack.sqs.delete_message(QueueUrl=url(stack), ReceiptHandle=lost["receiptHandle"])

    stack.clock.advance(timedelta(minutes=2))
    assert run_audit(client, stack.clock)["stranded"] == []  # both may still come
    failing.clear()
    back = [r for r in batch if "coming" in r["body"]]  # its retry comes back, and succeeds
    assert invoke(handler, back) == []
    assert [item["sk"]["S"] for item in _index(stack)] == ["lost"]  # the claim took "coming" out

    stack.clock.advance(stack.catalog.spec(PLAIN).retry_due_within)
    capsys.readouterr()
    assert run_audit(client, stack.clock)["stranded"] == [f"{PLAIN} lost"]
    output = capsys.readouterr().out
    (metric,) = [m for m in emf(output) if "TasksStranded" in m]
    assert metric["TasksStranded"] == [1.0] and "task" not in metric


def test_every_pass_emits_its_count_so_a_pass_that_never_runs_alarms(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_audit(stack.client(), stack.clock) == {"stranded": [], "stuck": []}
    (metric,) = [m for m in emf(capsys.readouterr().out) if "TasksStranded" in m]
    assert metric["TasksStranded"] == [0.0]
