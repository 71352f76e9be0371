"""Background tasks an application enqueues and a Lambda function runs once per key.

Writing one (``functions/tasks/send_receipt.py``)::

    from vigil.tasks import TaskRun, task

    @task
    def handler(run: TaskRun, payload: dict) -> dict:
        return {"receipt": ...}

Enqueueing one and waiting for its result, from any Python application with boto3 and
``VIGIL_STACK`` (the stack's name: its tasks catalog is in SSM) set::

    from vigil.tasks import enqueue, wait
    handle = enqueue("send-receipt", {"order": "o-1", "email": "a@example.com"}, key="o-1")
    receipt = handle.wait(timeout=30)  # or wait("send-receipt", "o-1", timeout=30)

Enqueueing needs boto3 alone: the consumer's half (``task``, ``TaskRun``, which bring in
Powertools) is imported only when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vigil.tasks.bulk import ItemOutcome, ItemStatus
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient, cancel, enqueue, enqueue_many, get, signal, wait
from vigil.tasks.envelope import Envelope, deduplication_id, schedule_name
from vigil.tasks.errors import (
    EnqueuedUnrecorded,
    InvalidTask,
    KeyReused,
    MalformedTask,
    NotCancellable,
    Reject,
    TaskCancelled,
    TaskFenced,
    TaskNotFound,
    UnknownTask,
)
from vigil.tasks.flows.errors import Abort, InvalidStep, SignalRefused, SignalTimeout
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import TaskRecord
from vigil.tasks.waiting import PollBackoff, TaskFailed, TaskHandle

if TYPE_CHECKING:
    from vigil.tasks.decorator import task
    from vigil.tasks.guard import TaskRun

_CONSUMER = {"task": "vigil.tasks.decorator", "TaskRun": "vigil.tasks.guard"}


def __getattr__(name: str) -> Any:
    if name in _CONSUMER:
        import importlib

        return getattr(importlib.import_module(_CONSUMER[name]), name)
    raise AttributeError(f"module 'vigil.tasks' has no attribute {name!r}")


__all__ = [
    "Abort",
    "Catalog",
    "EnqueuedUnrecorded",
    "Envelope",
    "InvalidStep",
    "InvalidTask",
    "ItemOutcome",
    "ItemStatus",
    "KeyReused",
    "MalformedTask",
    "NotCancellable",
    "PollBackoff",
    "Reject",
    "SignalRefused",
    "SignalTimeout",
    "TaskCancelled",
    "TaskClient",
    "TaskFailed",
    "TaskFenced",
    "TaskHandle",
    "TaskNotFound",
    "TaskRecord",
    "TaskRun",
    "TaskSettings",
    "TaskSpec",
    "UnknownTask",
    "cancel",
    "deduplication_id",
    "enqueue",
    "enqueue_many",
    "get",
    "schedule_name",
    "signal",
    "task",
    "wait",
]
