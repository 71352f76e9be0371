"""Completion events: an application subscribes with an EventBridge rule instead of polling.

``source: vigil`` (``vigil.NAME`` in a named stage), detail-type ``Vigil Task Succeeded`` / ``Vigil
Task Failed``, detail ``{task, id, status, attempts, result | result_ref | error_type +
error_message, enqueued_at, finished_at, event_id}``.

The record is the outbox. The finish that ends a task writes, in the same request, the event's id
(``event_id``, from the task, its id, the run's token and the outcome) and the message that
finished it (``finished_by``); the event is then built from the record's fields alone
(:func:`completion_entry`) and sent through ``vigil.persist``. If the invocation dies before
PutEvents took it, or PutEvents refused it until the invocation's time ran out, the message is
not deleted: it comes back, meets the final record as a DUPLICATE, and being the message that
finished it, sends the same event again (:func:`owes_event`). So an announced outcome is sent at
least once, and every copy is the same event, ``event_id`` included: a subscriber that must act
once deduplicates on it. Only when the message could not come back again (its receives spent) is
the event given up and counted (``TaskEventUnsent``, alarmed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Sleeper
from vigil.contract.stages import current_stage, event_source
from vigil.contract.tasks import (
    EVENT_SOURCE,
    FINISHED_BY_ATTRIBUTE,
    OUTBOX_ATTRIBUTE,
    RESULT_REF_ATTRIBUTE,
    TaskEventType,
    TaskStatus,
)
from vigil.persist import persist

ANNOUNCED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED})


def event_id(task: str, task_id: str, token: int, status: TaskStatus) -> str:
    """The completion event's id: one per outcome of one run (a redrive's run has its own)."""
    return hashlib.sha256(f"{task}\n{task_id}\n{token}\n{status.value}".encode()).hexdigest()[:32]


def owes_event(record: Mapping[str, Any], message_id: str) -> bool:
    """The record is final with an announced outcome, and ``message_id`` finished it: its
    delivery may have died before the event went out, so this one sends it (again)."""
    return (
        record.get("status") in ANNOUNCED
        and bool(record.get(OUTBOX_ATTRIBUTE))
        and record.get(FINISHED_BY_ATTRIBUTE) == message_id
    )


def completion_entry(record: Mapping[str, Any], bus: str) -> dict[str, Any]:
    """The PutEvents entry of a task that ended SUCCEEDED, FAILED or CANCELLED (a run stopped
    by a cancel), from its record's fields
    (as written by the finish: ``result`` is the JSON text the record keeps)."""
    status = TaskStatus(record["status"])
    detail: dict[str, Any] = {
        "task": record["task"],
        "id": record["id"],
        "status": status.value,
        "attempts": int(record.get("attempts", 0)),
        "enqueued_at": record.get("enqueued_at"),
        "finished_at": record.get("finished_at"),
        "event_id": record.get(OUTBOX_ATTRIBUTE),
    }
    if status is TaskStatus.SUCCEEDED:
        raw = record.get("result")
        detail["result"] = json.loads(raw) if isinstance(raw, str) else None
        if record.get(RESULT_REF_ATTRIBUTE):
            detail[RESULT_REF_ATTRIBUTE] = record[RESULT_REF_ATTRIBUTE]
        detail_type = TaskEventType.SUCCEEDED
    else:
        detail |= {
            "error_type": record.get("error_type"),
            "error_message": record.get("error_message"),
        }
        detail_type = (
            TaskEventType.CANCELLED if status is TaskStatus.CANCELLED else TaskEventType.FAILED
        )
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
