"""A suspended flow's wake-up: its message again, delayed by SQS up to 15 minutes, beyond that
sent by a one-time schedule (as ``enqueue(at=)`` does), named after the flow and the step so a
repeat of the same suspension meets the same schedule.

The wake-up is sent *before* the record says SLEEPING or WAITING: a suspended record always has
its wake-up on the way. Sent twice (a suspension retried), the second finds the flow running or
past that step: a BUSY or DUPLICATE delivery, one request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from vigil.contract.tasks import MAX_QUEUE_DELAY_S
from vigil.tasks.envelope import schedule_name
from vigil.tasks.queues import TaskQueue


def send_wake(
    queue: TaskQueue,
    scheduler: Callable[[], Any],
    *,
    task: str,
    task_id: str,
    step: str,
    body: str,
    now: datetime,
    until: datetime,
    role_arn: str,
    group: str,
) -> None:
    wait_s = max(0, math.ceil((until - now).total_seconds()))
    if wait_s <= MAX_QUEUE_DELAY_S:
        queue.send(body, delay_s=wait_s)
        return
    from vigil.tasks.enqueue import schedule_message

    schedule_message(
        scheduler(),
        queue_url=queue.queue_url,
        dead_letter_url=queue.dead_letter_url,
        role_arn=role_arn,
        group=group,
        name=wake_schedule_name(task, task_id, step),
        body=body,
        due=until,
        description=f"vigil flow {task} {task_id} wakes from {step}",
    )


def wake_schedule_name(task: str, task_id: str, step: str) -> str:
    """Within the task's own schedule names (its grants); ``/`` is in no task id, so no task's
    own start schedule has the same name."""
    return schedule_name(task, f"{task_id}/{step}")
