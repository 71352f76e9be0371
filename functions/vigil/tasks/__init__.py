"""Background tasks an application enqueues and a Lambda function runs once per key.

Writing one (``functions/tasks/send_receipt.py``)::

    from vigil.tasks import TaskRun, task

    @task
    def handler(run: TaskRun, payload: dict) -> dict:
        return {"receipt": ...}

Enqueueing one, from any Python application with boto3 and ``VIGIL_TASKS_CATALOG`` set::

    from vigil.tasks import enqueue
    task_id = enqueue("send-receipt", {"order": "o-1"}, key="o-1")

Enqueueing needs boto3 alone: the consumer's half (``task``, ``TaskRun``, which bring in
Powertools) is imported only when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient, cancel, enqueue, signal
from vigil.tasks.envelope import Envelope, deduplication_id, schedule_name
from vigil.tasks.errors import (
    EnqueuedUnrecorded,
    InvalidTask,
    KeyReused,
    MalformedTask,
    NotCancellable,
    TaskFenced,
    TaskNotFound,
    UnknownTask,
)
from vigil.tasks.flows.errors import Abort, InvalidStep, SignalRefused, SignalTimeout
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import TaskRecord

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
    "KeyReused",
    "MalformedTask",
    "NotCancellable",
    "SignalRefused",
    "SignalTimeout",
    "TaskClient",
    "TaskFenced",
    "TaskNotFound",
    "TaskRecord",
    "TaskRun",
    "TaskSettings",
    "TaskSpec",
    "UnknownTask",
    "cancel",
    "deduplication_id",
    "enqueue",
    "schedule_name",
    "signal",
    "task",
]
