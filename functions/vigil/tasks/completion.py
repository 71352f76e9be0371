"""Completion events: an application subscribes with an EventBridge rule instead of polling.

``source: vigil`` (``vigil.NAME`` in a named stage), detail-type ``Vigil Task Succeeded`` / ``Vigil Task Failed``, detail
``{task, id, status, attempts, result | error_type + error_message, enqueued_at, finished_at}``.
Sent after the finish is recorded (the record is the truth; the event tells of it), through
``vigil.persist``: a throttled PutEvents is retried while the invocation has time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Sleeper
from vigil.contract.stages import current_stage, event_source
from vigil.contract.tasks import EVENT_SOURCE, TaskEventType, TaskStatus
from vigil.persist import persist


def completion_entry(
    *,
    task: str,
    task_id: str,
    status: TaskStatus,
    attempts: int,
    enqueued_at: str | None,
    finished_at: str,
    bus: str,
    result: Any = None,
    error_type: str | None = None,
    error_message: str | None = None,
) -> dict[str, Any]:
    """The PutEvents entry of a task that ended SUCCEEDED or FAILED."""
    detail: dict[str, Any] = {
        "task": task,
        "id": task_id,
        "status": status.value,
        "attempts": attempts,
        "enqueued_at": enqueued_at,
        "finished_at": finished_at,
    }
    if status is TaskStatus.SUCCEEDED:
        detail["result"] = result
        detail_type = TaskEventType.SUCCEEDED
    else:
        detail |= {"error_type": error_type, "error_message": error_message}
        detail_type = TaskEventType.FAILED
    return {
        "Source": event_source(EVENT_SOURCE, current_stage()),
        "DetailType": detail_type.value,
        "Detail": json.dumps(detail),
        "EventBusName": bus,
        "Resources": [],
    }


def send_completion(
    client: Any,
    entry: dict[str, Any],
    *,
    time_left_s: Callable[[], float],
    sleep: Sleeper,
) -> None:
    """PutEvents, through transient faults while there is time; raises ``OutOfTime``."""

    def put() -> None:
        answer = client.put_events(Entries=[entry])
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            # An entry refused inside a 200 answer: the same codes, so persist's rules apply.
            raise ClientError(
                {
                    "Error": {
                        "Code": failed.get("ErrorCode", "InternalFailure"),
                        "Message": failed.get("ErrorMessage", ""),
                    }
                },
                "PutEvents",
            )

    persist(put, time_left_s=time_left_s, sleep=sleep)
