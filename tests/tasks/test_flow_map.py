# ruff: noqa: F811 (the flows' fixtures, imported, are the tests' parameters)
"""Flows' fan-out and fan-in (issue 30): ``run.map`` enqueues one child task per payload exactly
once, the flow waits with no compute until every child has ended (the last to end wakes it), and
the results come back in order; a failed child raises ``ChildFailed`` (or is returned with
``return_exceptions``). Driven by a queue played on the test's clock (``FlowQueue``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Counting, Stack
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_flows import Crash, client, queue  # noqa: F401 (the flows' fixtures)
from vigil.contract.flows import journal_pk
from vigil.contract.tasks import TaskStatus
from vigil.dynamo import from_wire
from vigil.tasks import Reject, TaskRun
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.flows.errors import ChildFailed
from vigil.tasks.flows.fanout import child_id, count_end
from vigil.tasks.flows.journal import FlowJournal
from vigil_tools.testing.flow_queue import FlowQueue


class Family:
    """One handler for the flow and its children (the same task: a payload with ``n`` is a
    child), counting the children's bodies and the messages the flow sends."""

    def __init__(self, make_handler: HandlerFactory, queue: FlowQueue, client: TaskClient) -> None:
        self.children_ran: list[int] = []
        self.batches: list[int] = []
        self.fail: set[int] = set()
        self.crash: set[int] = set()
        self.undone: list[str] = []
        self.return_exceptions = False
        self.size = 3
        self.queue = queue
        batch = queue.send_message_batch

        def counted_batch(**request: Any) -> dict[str, Any]:
            self.batches.append(len(request["Entries"]))
            return batch(**request)

        queue.send_message_batch = counted_batch  # type: ignore[method-assign]
        self.make_handler = make_handler
        self.handler = self.handler_with(client)

    def handler_with(self, children: TaskClient) -> Any:
        return self.make_handler(
            self.body,
            sqs=self.queue,
            scheduler=self.queue.scheduler,
            children=children,
            scheduler_role_arn="arn:aws:iam::123456789012:role/vigil-tasks-scheduler",
            schedule_group="vigil-tasks",
        )

    def body(self, run: TaskRun, payload: dict[str, Any]) -> Any:
        if "n" in payload:
            self.children_ran.append(payload["n"])
            if payload["n"] in self.crash:
                raise Crash()  # the invocation dies inside the child: its record stays RUNNING
            if payload["n"] in self.fail:
                raise Reject(f"child {payload['n']} cannot")
            return {"square": payload["n"] ** 2}
        if "reserve" in payload:
            run.step("reserve", lambda: 1, compensate=lambda _: self.undone.append("reserve"))
        results = run.map(
            "squares",
            PLAIN,
            [{"n": n} for n in range(self.size)],
            return_exceptions=self.return_exceptions,
        )
        return [r if not isinstance(r, ChildFailed) else {"failed": str(r)} for r in results]


@pytest.fixture
def family(make_handler: HandlerFactory, queue: FlowQueue, client: TaskClient) -> Family:
    return Family(make_handler, queue, client)


def map_item(stack: Stack, task_id: str, name: str = "squares") -> dict[str, Any]:
    answer = stack.dynamodb.get_item(
        TableName=stack.table,
        Key={"pk": {"S": journal_pk(PLAIN, task_id)}, "sk": {"S": name}},
        ConsistentRead=True,
    )
    return from_wire(answer.get("Item")) or {}


def test_three_children_succeed_and_their_results_come_back_in_order(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    client.enqueue(PLAIN, {"album": "a"}, key="flow-1")
    queue.deliver(family.handler)
    assert client.get(PLAIN, "flow-1").status is TaskStatus.WAITING  # no compute while waiting
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))

    record = client.get(PLAIN, "flow-1")
    assert record.status is TaskStatus.SUCCEEDED
    assert record.result == [{"square": 0}, {"square": 1}, {"square": 4}]
    assert sorted(family.children_ran) == [0, 1, 2]
    assert family.batches == [3]
    for n in range(3):  # ordinary tasks with their own records
        child = client.get(PLAIN, child_id("flow-1", "squares", n))
        assert child.status is TaskStatus.SUCCEEDED
        assert child.parent == {"task": PLAIN, "id": "flow-1", "map": "squares"}
    item = map_item(stack, "flow-1")
    assert (item["children"], item["ended"], item["ended_SUCCEEDED"]) == (3, 3, 3)
    steps = {row["name"]: row for row in record.steps or []}
    assert steps["squares"]["children"] == {"total": 3, "SUCCEEDED": 3}
    assert steps["squares"]["status"] == "DONE"
    assert steps["squares"]["finished_at"] <= (record.finished_at or "")  # its last child's end


def test_a_failed_child_fails_the_flow_with_child_failed_naming_it(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    family.fail = {1}
    client.enqueue(PLAIN, {"album": "a"}, key="flow-2")
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))

    record = client.get(PLAIN, "flow-2")
    assert record.status is TaskStatus.FAILED
    assert record.error_type == "ChildFailed"
    assert "child 1" in (record.error_message or "")
    assert child_id("flow-2", "squares", 1) in (record.error_message or "")
    assert map_item(stack, "flow-2")["ended_FAILED"] == 1


def test_return_exceptions_returns_a_failed_child_as_its_error(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    family.fail = {0}
    family.return_exceptions = True
    client.enqueue(PLAIN, {"album": "a"}, key="flow-3")
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))

    record = client.get(PLAIN, "flow-3")
    assert record.status is TaskStatus.SUCCEEDED
    assert record.result is not None
    assert "child 0" in record.result[0]["failed"] and "FAILED" in record.result[0]["failed"]
    assert record.result[1:] == [{"square": 1}, {"square": 4}]


def test_a_re_execution_of_the_flow_does_not_enqueue_the_children_again(
    stack: Stack,
    queue: FlowQueue,
    client: TaskClient,
    family: Family,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first execution dies after the children are sent, before the enqueue is journaled.
    mark = FlowJournal.mark_enqueued
    died: list[str] = []

    def dies_once(self: FlowJournal, name: str, now: Any) -> Any:
        if not died:
            died.append(name)
            raise Crash()
        return mark(self, name, now)

    monkeypatch.setattr(FlowJournal, "mark_enqueued", dies_once)
    client.enqueue(PLAIN, {"album": "a"}, key="flow-4")
    with pytest.raises(Crash):
        queue.deliver(family.handler)
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=30))

    assert client.get(PLAIN, "flow-4").result == [{"square": 0}, {"square": 1}, {"square": 4}]
    assert sorted(family.children_ran) == [0, 1, 2]  # each child ran once
    assert family.batches == [3]  # the re-execution found their records: nothing sent again
    assert "enqueued_at" in map_item(stack, "flow-4")


def test_a_childs_end_delivered_twice_counts_once(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    client.enqueue(PLAIN, {"album": "a"}, key="flow-5")
    queue.deliver(family.handler)
    held = dict(queue.held)
    first = next(m for m in held.values() if '"n":0' in m.body)
    queue.held = {first.id: first}
    queue.deliver(family.handler)  # child 0 ends
    queue.send_message(QueueUrl=queue.url, MessageBody=first.body)
    queue.deliver(family.handler)  # its message again: a DUPLICATE, told again, counted once
    item = map_item(stack, "flow-5")
    assert (item["ended"], item["ended_set"]) == (1, {0})
    assert client.get(PLAIN, "flow-5").status is TaskStatus.WAITING

    # The same end told directly twice more: still once.
    parent = {"task": PLAIN, "id": "flow-5", "map": "squares"}
    for _ in range(2):
        count_end(
            stack.dynamodb, queue, stack.table, parent, first_id(), "SUCCEEDED", stack.clock()
        )
    assert map_item(stack, "flow-5")["ended"] == 1

    queue.held = {i: m for i, m in held.items() if m.id != first.id}
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))
    assert client.get(PLAIN, "flow-5").result == [{"square": 0}, {"square": 1}, {"square": 4}]
    assert family.children_ran.count(0) == 1


def test_cancel_of_a_flow_waiting_on_a_map_cancels_its_children_that_have_not_ended(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    """Child 0 has ended (left as it is), child 1 is RUNNING (asked to stop), child 2 is QUEUED
    (cancelled: its body never runs); the flow ends CANCELLED and compensates."""
    family.crash = {1}
    client.enqueue(PLAIN, {"album": "a", "reserve": True}, key="flow-8")
    queue.deliver(family.handler)  # the flow: the map sent, WAITING
    children = {m.id: m for m in queue.held.values() if '"n":' in m.body}
    by_n = {n: next(m for m in children.values() if f'"n":{n}' in m.body) for n in range(3)}
    queue.held = {by_n[0].id: by_n[0]}
    queue.deliver(family.handler)  # child 0 ends SUCCEEDED
    queue.held = {by_n[1].id: by_n[1]}
    with pytest.raises(Crash):
        queue.deliver(family.handler)  # child 1 dies running
    ids = [child_id("flow-8", "squares", n) for n in range(3)]
    assert [client.get(PLAIN, i).status for i in ids[:2]] == [
        TaskStatus.SUCCEEDED,
        TaskStatus.RUNNING,
    ]

    queue.held = {}
    client.cancel(PLAIN, "flow-8", by="ops")  # WAITING: woken now to stop
    queue.deliver(family.handler)
    record = client.get(PLAIN, "flow-8")
    assert record.status is TaskStatus.CANCELLED and family.undone == ["reserve"]
    message = record.error_message or ""
    assert "map 'squares': 1 child(ren) cancelled, 1 running asked to stop, 1 had ended" in message
    child = [client.get(PLAIN, i) for i in ids]
    assert child[0].status is TaskStatus.SUCCEEDED and child[0].result == {"square": 0}
    assert child[1].status is TaskStatus.RUNNING
    assert child[1].cancel_requested_by == f"flow {PLAIN} flow-8"
    assert child[2].status is TaskStatus.CANCELLED
    steps = {row["name"]: row for row in record.steps or []}
    assert steps["squares"]["children"] == {
        "total": 3,
        "SUCCEEDED": 1,
        "CANCELLED": 1,
        "stop_asked": 1,
    }

    # The children's messages come back: 2 runs nothing, 1 (its run died) ends CANCELLED and
    # counts its end; the flow stays CANCELLED.
    queue.held = {by_n[1].id: by_n[1], by_n[2].id: by_n[2]}
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=30))
    assert family.children_ran == [0, 1]
    assert client.get(PLAIN, ids[1]).status is TaskStatus.CANCELLED
    assert client.get(PLAIN, "flow-8").status is TaskStatus.CANCELLED
    item = map_item(stack, "flow-8")
    assert (item["ended"], item["ended_CANCELLED"]) == (3, 2)


def test_a_child_cancelled_while_queued_counts_its_end_and_the_flow_wakes(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    client.enqueue(PLAIN, {"album": "a"}, key="flow-9")
    queue.deliver(family.handler)
    client.cancel(PLAIN, child_id("flow-9", "squares", 0), by="ops")
    queue.run(family.handler, until=stack.clock() + timedelta(minutes=1))

    record = client.get(PLAIN, "flow-9")
    assert (record.status, record.error_type) == (TaskStatus.FAILED, "ChildFailed")
    assert "child 0" in (record.error_message or "") and "CANCELLED" in (record.error_message or "")
    assert sorted(family.children_ran) == [1, 2]


def first_id() -> str:
    return child_id("flow-5", "squares", 0)


@pytest.mark.parametrize(
    ("payloads", "task", "why"),
    [
        ({"n": 1}, PLAIN, "payloads must be a list"),
        ([{"n": i} for i in range(1001)], PLAIN, "at most 1000"),
        ([{"n": 1}], "no-such-task", "unknown child task"),
        ([{"n": 1}, "not-an-object"], PLAIN, "child 1"),
    ],
)
def test_bad_input_is_refused_naming_the_step_with_nothing_written(
    stack: Stack,
    queue: FlowQueue,
    client: TaskClient,
    make_handler: HandlerFactory,
    payloads: Any,
    task: str,
    why: str,
) -> None:
    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        return run.map("bad", task, payloads)

    handler = make_handler(body, sqs=queue, scheduler=queue.scheduler, children=client)
    client.enqueue(PLAIN, {"album": "a"}, key="flow-6")
    queue.run(handler, until=stack.clock() + timedelta(minutes=1))

    record = client.get(PLAIN, "flow-6")
    assert record.status is TaskStatus.FAILED
    assert record.error_type == "InvalidStep"
    assert "'bad'" in (record.error_message or "") and why in (record.error_message or "")
    assert map_item(stack, "flow-6", "bad") == {}
    assert queue.held == {}  # no child sent


@pytest.mark.slow
def test_a_thousand_children_are_enqueued_in_batches_and_read_back_in_pages_of_100(
    stack: Stack, queue: FlowQueue, client: TaskClient, family: Family
) -> None:
    """The map's limits at its largest: 1,000 children sent 10 a request, their ends counted on
    one item, their records read 100 a request. The children's own runs are not driven here
    (the small maps above run them through the guard; on moto each costs ~0.1 s): their ends
    are written as a child's guard writes them (record, then ``count_end``)."""
    family.size = 1000
    client.enqueue(PLAIN, {"album": "a"}, key="flow-7")
    queue.deliver(family.handler)
    assert client.get(PLAIN, "flow-7").status is TaskStatus.WAITING
    assert family.batches == [10] * 100
    ids = [child_id("flow-7", "squares", n) for n in range(1000)]
    parent = {"task": PLAIN, "id": "flow-7", "map": "squares"}
    # The children's records as their finishes leave them, written 25 a request: the test's
    # time goes to the map's own requests (the counts below), not to 1,000 moto UpdateItems.
    records = {
        item["sk"]["S"]: item
        for page in stack.dynamodb.get_paginator("query").paginate(
            TableName=stack.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :flow)",
            ExpressionAttributeValues={":pk": {"S": f"TASK#{PLAIN}"}, ":flow": {"S": "flow-7."}},
        )
        for item in page["Items"]
    }
    assert len(records) == 1000
    for start in range(0, 1000, 25):
        finished = [
            {
                **records[ids[n]],
                "status": {"S": "SUCCEEDED"},
                "result": {"S": f'{{"square":{n * n}}}'},
            }
            for n in range(start, start + 25)
        ]
        stack.dynamodb.batch_write_item(
            RequestItems={stack.table: [{"PutRequest": {"Item": item}} for item in finished]}
        )
    for n, task_id in enumerate(ids):
        woke = count_end(
            stack.dynamodb, queue, stack.table, parent, task_id, "SUCCEEDED", stack.clock()
        )
        assert woke is (n == 999)  # only the last end wakes the flow
    reads = Counting(stack.dynamodb)
    queue.held = {i: m for i, m in queue.held.items() if '"n":' not in m.body}  # the flow's wake
    queue.deliver(family.handler_with(stack.client(sqs=queue, dynamodb=reads)))

    record = client.get(PLAIN, "flow-7")
    assert record.status is TaskStatus.SUCCEEDED
    assert record.result == [{"square": n * n} for n in range(1000)]
    assert reads.counts["batch_get_item"] == 10
    assert family.children_ran == []
