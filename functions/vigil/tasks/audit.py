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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from vigil.clock import iso
from vigil.contract.tasks import RETRY_AT_ATTRIBUTE, TaskStatus
from vigil.dynamo import Item
from vigil.tasks.catalog import TaskSpec
from vigil.tasks.store import TaskStore


@dataclass(frozen=True)
class Stranded:
    task: str
    id: str
    retry_at: str
    retry_message: str


def is_stranded(item: Item | None, now: datetime, spec: TaskSpec) -> bool:
    """The record still waits for a retry its message should have taken by now."""
    if item is None or item.get("status") != TaskStatus.QUEUED.value:
        return False
    retry_at = item.get(RETRY_AT_ATTRIBUTE)
    return bool(retry_at) and str(retry_at) < iso(now - spec.retry_due_within)


class AuditIncomplete(Exception):
    """Some tasks could not be audited; the others were (one task's fault never hides another's
    stranded records). Raised after the whole pass, with what was found."""

    def __init__(self, found: list[Stranded], failures: dict[str, Exception]) -> None:
        names = ", ".join(f"{task}: {error!r}" for task, error in failures.items())
        super().__init__(f"audit failed for {len(failures)} task(s): {names}")
        self.found = found
        self.failures = failures


def audit(
    specs: Mapping[str, TaskSpec], store_of: Callable[[TaskSpec], TaskStore], now: datetime
) -> list[Stranded]:
    """Every stranded record of every task (see the module)."""
    found: list[Stranded] = []
    failures: dict[str, Exception] = {}
    for spec in specs.values():
        try:
            found += _audit_task(spec, store_of(spec), now)
        except Exception as error:  # isolated per task, raised together below
            failures[spec.name] = error
    if failures:
        raise AuditIncomplete(found, failures)
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
