"""Signals to flows (``vigil.tasks.signal``, ``POST /tasks/{task}/{id}/signals/{name}``,
``vigil tasks signal``), and waking a suspended flow to stop it (a cancel).

A signal is written on its wait's item in the flow's journal (:mod:`vigil.tasks.flows.journal`), one
conditional UpdateItem, whether the flow has reached the wait or not::

    read the record (GetItem) -> none: TaskNotFound (404); ended: SignalRefused (409); nothing written
    write the signal on the wait's item, only if the wait has not timed out and the name was not
    signalled under another key (the same key again: the same signal, counted once)
        refused -> SignalRefused (409), nothing written
    the wait armed (the flow waits on it): send its message, marked as this wait's wake-up

A signal that comes before its wait is kept there and returned when the flow reaches it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil.contract.flows import (
    MAX_SIGNAL_BYTES,
    RESUME_ATTRIBUTE,
    STEP_NAME,
    STEP_NAME_CHARACTERS,
    StepField,
)
from vigil.contract.tasks import FINAL_STATUSES, TASK_ID, TaskStatus
from vigil.tasks.envelope import parse
from vigil.tasks.errors import TaskNotFound
from vigil.tasks.flows.errors import InvalidSignal, SignalRefused
from vigil.tasks.flows.journal import FlowJournal, Refused
from vigil.tasks.queues import TaskQueue
from vigil.tasks.store import TaskStore

F = StepField


@dataclass(frozen=True)
class SignalSent:
    task: str
    id: str
    name: str
    key: str
    woke: bool
    """The flow was waiting on it: its wake-up was sent."""

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "id": self.id,
            "name": self.name,
            "key": self.key,
            "woke": self.woke,
        }


def send_signal(
    store: TaskStore,
    queue: TaskQueue,
    *,
    table: str,
    task: str,
    task_id: str,
    name: str,
    payload: Any,
    key: str | None,
    now: datetime,
    expires_at: int,
) -> SignalSent:
    if not isinstance(task_id, str) or not TASK_ID.match(task_id):
        raise InvalidSignal("id", f"invalid task id {task_id!r}")
    if not isinstance(name, str) or not STEP_NAME.match(name):
        raise InvalidSignal("name", f"invalid signal name {name!r}: {STEP_NAME_CHARACTERS}")
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise InvalidSignal("payload", f"the payload is not JSON: {error}") from None
    if len(text.encode()) > MAX_SIGNAL_BYTES:
        raise InvalidSignal(
            "payload", f"the payload is {len(text.encode())} bytes, over {MAX_SIGNAL_BYTES}"
        )
    if key is not None and (not isinstance(key, str) or not TASK_ID.match(key)):
        raise InvalidSignal("key", f"invalid signal key {key!r}")
    key = key or hashlib.sha256(text.encode()).hexdigest()[:32]
    record = store.item(task, task_id)
    if record is None:
        raise TaskNotFound(f"no flow {task} {task_id} (never enqueued, or expired)")
    status = TaskStatus(record["status"])
    if status in FINAL_STATUSES:
        raise SignalRefused(task, task_id, name, f"the flow has ended ({status.value})")
    written = FlowJournal(store.client, table, task, task_id).signal(
        name, text, key, now, expires_at
    )
    if isinstance(written, Refused):
        seen = written.seen or {}
        if F.TIMED_OUT_AT in seen:
            why = f"its wait timed out at {seen[F.TIMED_OUT_AT]}"
        elif F.SIGNAL_KEY in seen:
            why = "it was signalled already under another key"
        else:
            why = f"the name is a {seen.get(F.KIND)} of this flow, not a wait"
        raise SignalRefused(task, task_id, name, why)
    resume = written.get(F.RESUME)
    woke = isinstance(resume, str) and bool(resume)
    if woke:
        assert isinstance(resume, str)
        queue.send(parse(resume).resume(wake=name).body())
    return SignalSent(task, task_id, name, key, woke)


def wake_to_cancel(
    store: TaskStore, queue: TaskQueue, task: str, task_id: str, now: datetime
) -> bool:
    """A SLEEPING or WAITING flow asked to stop: due now, woken with its own message, so its
    function stops it at the step it slept in (running its compensations). False: the flow is
    not suspended (any more)."""
    written = store.cancel_suspended(task, task_id, now)
    if written is None:
        return False
    resume = written.get(RESUME_ATTRIBUTE)
    if isinstance(resume, str) and resume:
        queue.send(resume)
    return True
