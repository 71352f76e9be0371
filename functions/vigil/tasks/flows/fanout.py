"""Fan-out and fan-in: ``run.map(name, task, payloads)`` enqueues one child task per payload,
exactly once, and the flow waits, with no compute, until every child has ended::

    flow: the map's item (PutItem: N, the flow's resume message and queue; first execution only)
          -> [boundary] -> enqueue_many under derived keys <flow id>.<map>.<i> (BatchGetItem,
          SendMessageBatch, conditional PutItems) -> the enqueue journaled (UpdateItem)
          -> the map's count (GetItem): all ended -> results; otherwise WAITING on the map
    child: its final outcome recorded -> its end counted on the map's item (one conditional
          UpdateItem, once per child) -> the one that makes it N sends the flow's resume message
    flow, woken: the map's item says N ended -> the children's records (BatchGetItem, 100 a
          request) -> their results in order; a child not SUCCEEDED raises ChildFailed

A re-execution of the flow finds the map's item and sends nothing (the enqueue is journaled; the
derived keys make even a re-send of an unjournaled one a DUPLICATE). A child's end delivered
twice counts once: its index is in the item's set. The children share the flow's tasks table.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vigil.clock import iso
from vigil.contract.flows import MAX_CHILDREN, StepField, StepKind
from vigil.contract.tasks import TASK_ID, TaskStatus
from vigil.dynamo import Item
from vigil.tasks.envelope import parse
from vigil.tasks.errors import InvalidTask, NotCancellable
from vigil.tasks.flows.errors import ChildFailed, InvalidStep, Suspend
from vigil.tasks.flows.journal import FlowJournal, Refused
from vigil.tasks.store import TaskRecord

if TYPE_CHECKING:
    from vigil.tasks.flows.run import Flow

F = StepField
READ_PAGE = 100
"""BatchGetItem's most keys a request: the children's records are read 100 at a time."""


def child_id(parent_id: str, name: str, index: int) -> str:
    """The key of a map's child: ``<flow id>.<map>.<i>``; a digest of the two when that would
    pass a task id's 128 characters."""
    plain = f"{parent_id}.{name}.{index}"
    if len(plain) <= 128:
        return plain
    digest = hashlib.sha256(f"{parent_id}/{name}".encode()).hexdigest()[:40]
    return f"{digest}.{index}"


def child_index(task_id: str) -> int:
    return int(task_id.rsplit(".", 1)[1])


def run_map(
    flow: Flow,
    name: str,
    task: str,
    payloads: Any,
    digest: str,
    return_exceptions: bool,
) -> list[Any]:
    site = flow.site
    if not isinstance(payloads, list):
        raise InvalidStep(str(name), f"payloads must be a list, got {type(payloads).__name__}")
    if len(payloads) > MAX_CHILDREN:
        raise InvalidStep(
            str(name), f"{len(payloads)} children: a map enqueues at most {MAX_CHILDREN}"
        )
    client = site.children()
    if not isinstance(task, str) or task not in client.catalog:
        raise InvalidStep(str(name), f"unknown child task {task!r}: not in this stack's catalog")
    entry = flow._reach(name, StepKind.MAP, digest)
    journal = site.journal
    parent = {"task": journal.task, "id": journal.id, "map": name}
    ids = [child_id(journal.id, name, i) for i in range(len(payloads))]
    if entry is None:
        for i, payload in enumerate(payloads):  # every check enqueue makes, nothing sent yet
            try:
                client.plan(task, payload, key=ids[i], parent=parent)
            except InvalidTask as invalid:
                raise InvalidStep(name, f"child {i}: {invalid}") from None
        if not payloads:
            return []
        flow._boundary()
        now = site.clock()
        put = journal.put_new(
            name,
            {
                F.KIND: StepKind.MAP.value,
                F.NAME: name,
                F.SEQ: flow._seq_of(name, entry),
                F.ARGS: digest,
                F.CHILD_TASK: task,
                F.CHILDREN: len(payloads),
                F.ENDED: 0,
                F.RESUME: site.resume_body,
                F.QUEUE: site.queue_url,
                F.STARTED_AT: iso(now),
                F.EXPIRES_AT: flow._expires_at(),
            },
        )
        entry = (put.seen or {}) if isinstance(put, Refused) else put
        if entry.get(F.KIND) != StepKind.MAP:
            raise InvalidStep(name, "the name is another kind of step in this flow's journal")
        flow.entries()[name] = entry
    if int(entry.get(F.CHILDREN, -1)) != len(payloads) or entry.get(F.CHILD_TASK) != task:
        raise InvalidStep(name, "the map's task or number of children differ from its journal")
    if not payloads:
        return []
    if F.ENQUEUED_AT not in entry:
        flow._boundary_claimed()  # a replay sends nothing
        _enqueue(client, task, name, payloads, ids, parent)
        marked = journal.mark_enqueued(name, site.clock())
        entry = (marked.seen or {}) if isinstance(marked, Refused) else marked
        flow.entries()[name] = entry
    if int(entry.get(F.ENDED, 0)) < len(payloads):
        entry = journal.item(name) or entry
        flow.entries()[name] = entry
    if int(entry.get(F.ENDED, 0)) < len(payloads):
        flow._before_suspend()
        until = site.enqueued_at + site.retention
        raise Suspend(name, TaskStatus.WAITING.value, until, by_children=True)
    return collect(client, task, name, ids, return_exceptions)


def _enqueue(
    client: Any,
    task: str,
    name: str,
    payloads: Sequence[Any],
    ids: list[str],
    parent: dict[str, str],
) -> None:
    outcomes = client.enqueue_many(task, list(zip(payloads, ids, strict=True)), parent=parent)
    refused = [o for o in outcomes if o.status == "refused"]
    if refused:
        # Raised for the task's retry: the keys make the enqueued ones DUPLICATEs next time.
        first = refused[0]
        raise RuntimeError(
            f"map {name!r}: {len(refused)} of {len(ids)} children not enqueued "
            f"(child {first.index}: {first.reason})"
        )


@dataclass(frozen=True)
class ChildrenCancelled:
    """What a cancelled flow did to one map's children that had not ended."""

    map: str
    cancelled: int
    """QUEUED (or not yet recorded): ended CANCELLED, their bodies never run."""
    asked: int
    """RUNNING: asked to stop, as ``cancel`` asks a running task; each ends when it next checks."""
    ended: int
    """Had ended before the cancel: left as they are (their results kept, nothing undone)."""

    def __str__(self) -> str:
        return (
            f"map {self.map!r}: {self.cancelled} child(ren) cancelled, {self.asked} running "
            f"asked to stop, {self.ended} had ended"
        )


def cancel_children(flow: Flow) -> list[ChildrenCancelled]:
    """A cancelled flow's children that have not ended, cancelled as ``vigil tasks cancel``
    cancels a task (the same library call, ``by`` naming the flow): QUEUED ones end CANCELLED
    and are counted on their map at once (their messages, when they come, run nothing); RUNNING
    ones are asked to stop and count their own end when they do. A child that has ended is left
    as it is. Recorded on each map's item (``children_cancelled_at``, ``children_stop_asked``).

    Cost: per map one GetItem of its item and one UpdateItem; per child not ended the cancel's
    UpdateItem and GetItem (and one UpdateItem of the map's count for a QUEUED one)."""
    site = flow.site
    journal = site.journal
    maps = [name for name, item in flow.entries().items() if item.get(F.KIND) == StepKind.MAP.value]
    if not maps:
        return []
    client = site.children()
    done: list[ChildrenCancelled] = []
    for name in maps:
        item = journal.item(name) or {}
        total = int(item.get(F.CHILDREN, 0))
        task = str(item.get(F.CHILD_TASK, ""))
        ended = {int(i) for i in item.get(F.ENDED_SET, set())}
        if len(ended) >= total:
            continue
        cancelled = asked = 0
        for index in range(total):
            if index in ended:
                continue
            task_id = child_id(journal.id, name, index)
            try:
                after = client.cancel(task, task_id, by=flow.label)
            except NotCancellable:
                ended.add(index)  # ended between the read and the cancel: left as it is
                continue
            if after.status is TaskStatus.RUNNING:
                asked += 1
                continue
            cancelled += 1
            journal.count_child(name, index, TaskStatus.CANCELLED.value, site.clock())
        journal.record_children_cancelled(name, site.clock(), asked)
        done.append(ChildrenCancelled(name, cancelled, asked, len(ended)))
    return done


def collect(
    client: Any, task: str, name: str, ids: list[str], return_exceptions: bool
) -> list[Any]:
    """The children's results in order, read 100 records a request."""
    store = client.store(client.catalog.spec(task))
    records: dict[str, Item] = {}
    for start in range(0, len(ids), READ_PAGE):
        records |= store.batch_items(task, ids[start : start + READ_PAGE], _call, _pause, full=True)
    results: list[Any] = []
    for index, task_id in enumerate(ids):
        item = records.get(task_id)
        if item is None:
            failed = ChildFailed(name, index, task, task_id, "MISSING", "its record is gone")
        else:
            record = TaskRecord.from_item(item)
            if record.status is TaskStatus.SUCCEEDED:
                if record.result is None and record.result_ref:
                    record = client.get(task, task_id, steps=False)  # kept in S3: one more read
                results.append(record.result)
                continue
            failed = ChildFailed(
                name,
                index,
                task,
                task_id,
                record.status.value,
                f"{record.error_type}: {record.error_message}",
            )
        if not return_exceptions:
            raise failed
        results.append(failed)
    return results


def _call(request: Any) -> Any:
    return request()


def _pause(round_: int) -> None:
    if round_ > 8:
        raise RuntimeError("BatchGetItem kept children's records unprocessed (throttled)")
    time.sleep(min(0.05 * 2 ** (round_ - 1), 1.0))


# The child's side -------------------------------------------------------------------------------


def count_end(
    client: Any,
    sqs: Any,
    table: str,
    parent: dict[str, str],
    task_id: str,
    status: str,
    now: datetime,
) -> bool:
    """A child's final ``status`` counted on its map's item, once; the child whose end makes the
    count reach the map's number of children (or a repeat of it) sends the flow's resume
    message, as a signal does. True: the flow was woken."""
    if not TASK_ID.match(task_id) or "." not in task_id:
        return False
    journal = FlowJournal(client, table, parent["task"], parent["id"])
    counted = journal.count_child(parent["map"], child_index(task_id), status, now)
    item = (counted.seen or {}) if isinstance(counted, Refused) else counted
    if not item or int(item.get(F.ENDED, 0)) < int(item.get(F.CHILDREN, 1)):
        return False
    resume, queue = item.get(F.RESUME), item.get(F.QUEUE)
    if not isinstance(resume, str) or not isinstance(queue, str):
        return False
    sqs.send_message(QueueUrl=queue, MessageBody=parse(resume).resume(wake=parent["map"]).body())
    return True
