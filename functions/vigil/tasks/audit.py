"""The stranded-tasks audit: a task that is neither running, nor backed by a message, nor final.

Every state a task's record can be in is held by something that will move it on:

* QUEUED by ``enqueue``: its message was sent *before* the record was written, so it exists (SQS
  can still lose it: past its retention, or moved by the redrive policy, both alarmed:
  task-queue-age, task-dead-letters);
* RUNNING: the delivery that claimed it holds its message until the run ends; a run that dies
  leaves the message to come back when its visibility ends and take the expired lease over;
* final (SUCCEEDED, FAILED, CANCELLED, UNCERTAIN): nothing is owed;
* QUEUED for a retry: the one state the runtime itself bets on a message. The finish of a failed
  attempt writes ``retry_at`` and the message that holds the retry (``retry_message``), and sets
  that message to come back at ``retry_at``. Should that message be gone (another copy deleted
  it), nothing would ever run or fail the task.

So the audit reads the retries: a record is in the tasks table's sparse ``retries`` index (``pk``,
``retry_at``) only between the finish that sets its retry and the claim that takes it (two index
writes, on the failure path only). A retry whose message has not claimed the record by
``retry_at + visibility timeout + max_queue_age`` (``TaskSpec.retry_due_within``: its backoff not
set, it comes back after the visibility timeout; then it may wait in the queue until the queue-age
alarm) is stranded: counted (``TasksStranded``, alarmed) and logged with its task, id and message.
Each candidate the index names is read back (strongly consistent) before it is judged. The audit
cannot repair one (the payload lives only in the message): enqueueing the key again with its
payload runs it (the claim takes a retry whose time has passed).

The same pass finds what is *stuck*: a record of a task that declares ``max_duration`` (a flow,
most often) not ended by its ``deadline`` (its first start + ``max_duration``). Such records are
in the sparse ``deadlines`` index from their first claim to their final finish, so the pass reads
``deadline < now`` of each such task: what is past due, never the records on time. A record
found ended (a cancel, a settlement: writes that do not pass through a run's finish) is taken
out of the index, once. Each stuck one is counted (``TaskStuck``, by task, alarmed) and logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from vigil.clock import iso
from vigil.contract.flows import WAKE_AT_ATTRIBUTE
from vigil.contract.tasks import DEADLINE_ATTRIBUTE, FINAL_STATUSES, RETRY_AT_ATTRIBUTE, TaskStatus
from vigil.dynamo import Item
from vigil.tasks.catalog import TaskSpec
from vigil.tasks.store import TaskStore

T = TypeVar("T")


@dataclass(frozen=True)
class Stranded:
    task: str
    id: str
    retry_at: str
    retry_message: str


@dataclass(frozen=True)
class Stuck:
    task: str
    id: str
    status: str
    deadline: str
    started_at: str
    """The last claim's (a flow's last resume): where its steps are, ``vigil tasks get``."""
    wake_at: str
    """A SLEEPING or WAITING flow's wake-up (empty otherwise)."""


def is_stranded(item: Item | None, now: datetime, spec: TaskSpec) -> bool:
    """The record still waits for a retry its message should have taken by now."""
    if item is None or item.get("status") != TaskStatus.QUEUED.value:
        return False
    retry_at = item.get(RETRY_AT_ATTRIBUTE)
    return bool(retry_at) and str(retry_at) < iso(now - spec.retry_due_within)


class AuditIncomplete(Exception):
    """Some tasks could not be audited; the others were (one task's fault never hides another's
    stranded records). Raised after the whole pass, with what was found."""

    def __init__(self, found: list[Any], failures: dict[str, Exception]) -> None:
        names = ", ".join(f"{task}: {error!r}" for task, error in failures.items())
        super().__init__(f"audit failed for {len(failures)} task(s): {names}")
        self.found = found
        self.failures = failures


def audit(
    specs: Mapping[str, TaskSpec], store_of: Callable[[TaskSpec], TaskStore], now: datetime
) -> list[Stranded]:
    """Every stranded record of every task (see the module)."""
    return _each_task(specs.values(), lambda spec: _audit_task(spec, store_of(spec), now))


def stuck(
    specs: Mapping[str, TaskSpec],
    store_of: Callable[[TaskSpec], TaskStore],
    now: datetime,
    *,
    clear_ended: bool = True,
) -> list[Stuck]:
    """Every record not ended past its deadline, of every task that declares ``max_duration``;
    ``clear_ended``: take the ended ones found in the index out of it (see the module)."""
    declaring = [spec for spec in specs.values() if spec.max_duration is not None]
    return _each_task(declaring, lambda spec: _stuck_of(spec, store_of(spec), now, clear_ended))


def is_stuck(item: Item | None, now: datetime) -> bool:
    """The record has not ended and its deadline has passed."""
    if item is None or item.get("status") in {status.value for status in FINAL_STATUSES}:
        return False
    deadline = item.get(DEADLINE_ATTRIBUTE)
    return bool(deadline) and str(deadline) < iso(now)


def _each_task(specs: Iterable[TaskSpec], find: Callable[[TaskSpec], list[T]]) -> list[T]:
    """``find`` for each task; one task's fault never hides another's findings."""
    found: list[T] = []
    failures: dict[str, Exception] = {}
    for spec in specs:
        try:
            found += find(spec)
        except Exception as error:  # isolated per task, raised together below
            failures[spec.name] = error
    if failures:
        raise AuditIncomplete(found, failures)
    return found


def _stuck_of(spec: TaskSpec, store: TaskStore, now: datetime, clear_ended: bool) -> list[Stuck]:
    found = []
    for task_id in store.past_deadline(spec.name, now):
        item = store.item(spec.name, task_id)
        if item is None:
            continue
        if is_stuck(item, now):
            found.append(
                Stuck(
                    spec.name,
                    task_id,
                    str(item["status"]),
                    str(item[DEADLINE_ATTRIBUTE]),
                    str(item.get("started_at", "")),
                    str(item.get(WAKE_AT_ATTRIBUTE, "")),
                )
            )
        elif clear_ended and item.get(DEADLINE_ATTRIBUTE):
            store.clear_deadline(spec.name, task_id)
    return found


def _audit_task(spec: TaskSpec, store: TaskStore, now: datetime) -> list[Stranded]:
    found = []
    for task_id in store.waiting_retries(spec.name, now - spec.retry_due_within):
        item = store.item(spec.name, task_id)
        if item is not None and is_stranded(item, now, spec):
            found.append(
                Stranded(
                    spec.name,
                    task_id,
                    str(item[RETRY_AT_ATTRIBUTE]),
                    str(item.get("retry_message", "")),
                )
            )
    return found
