"""``@task``: the whole SQS-triggered Lambda handler a task author needs.

The construct sets the task's name, queues, table and retry policy in the environment; the
decorator reads them on the first invocation (not at import), then hands every message of a batch
to :class:`TaskGuard` through Powertools' batch processing, and answers the event source with the
messages to keep (``batchItemFailures``): only those come back, so a batch with one failure does
not run its other messages again. An ordered task's FIFO batch stops a group at its first
message that does not finish (``SqsFifoPartialProcessor``), so the group keeps its order.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.base import BasePartialBatchProcessor
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from vigil import telemetry
from vigil.clock import Clock, Sleeper, system_clock
from vigil.contract.metrics import TaskMetric
from vigil.contract.tasks import TaskStatus
from vigil.persist import write_client
from vigil.tasks.decisions import RetryPolicy
from vigil.tasks.guard import Body, Delivery, Message, Outcome, TaskGuard
from vigil.tasks.queues import TaskQueue
from vigil.tasks.results import ResultStore
from vigil.tasks.settings import TaskSettings
from vigil.tasks.store import TaskStore

Handler = Callable[[Any, Any], dict[str, Any]]


class MessageKept(RuntimeError):
    """Raised for a message that is not done with: the batch reports it failed, so SQS keeps it
    (and hands it back when its visibility ends)."""


def task(
    body: Body | None = None,
    *,
    settings: TaskSettings | None = None,
    dynamodb: Any = None,
    sqs: Any = None,
    events: Any = None,
    s3: Any = None,
    scheduler: Any = None,
    children: Any = None,
    clock: Clock = system_clock,
    sleep: Sleeper = time.sleep,
    retry_on: tuple[type[BaseException], ...] | None = None,
    no_retry_on: tuple[type[BaseException], ...] = (),
) -> Any:
    """Turn ``body(run, payload)`` into a guarded SQS handler.

    ``no_retry_on``: errors no retry can help (a bad payload): an attempt raising one ends the
    task FAILED at once, dead-lettered with its error, as ``raise Reject(reason)`` does.
    ``retry_on``: when given, only these errors are retried. The clients, ``clock`` and
    ``sleep`` are for tests (``children``: the TaskClient ``run.map`` enqueues with)."""
    policy = RetryPolicy(retry_on=retry_on, no_retry_on=no_retry_on)  # a bad one: TypeError now

    def wrap(fn: Body) -> Handler:
        # Built on the first invocation and kept while the container lives, with what it
        # remembers of outcomes it could not record (for a redelivery of the same message).
        guard: TaskGuard | None = None

        def build() -> TaskGuard:
            resolved = settings or TaskSettings.from_env()
            return TaskGuard(
                resolved,
                # Each try of a finish, a dead letter or an event bounded, as a job's finish is.
                TaskStore(dynamodb or write_client("dynamodb"), resolved.table),
                TaskQueue(
                    sqs or write_client("sqs"),
                    resolved.queue_url,
                    resolved.dead_letter_url,
                    resolved.priority_queue_urls,
                ),
                events or write_client("events"),
                clock,
                sleep=sleep,
                results=ResultStore(s3 or (lambda: write_client("s3")), resolved.results_bucket)
                if resolved.results_bucket
                else None,
                retry_policy=policy,
                # Built on a flow's first sleep beyond 15 minutes only.
                scheduler=lambda: scheduler or write_client("scheduler"),
                # A map's children's TaskClient (by default the stack's catalog), built on use.
                children=(lambda: children) if children is not None else None,
            )

        def guarded(event: Any, context: Any) -> dict[str, Any]:
            nonlocal guard
            if guard is None:
                guard = build()
            return handle_batch(guard, fn, event, context)

        return functools.wraps(fn)(telemetry.instrument(guarded))

    return wrap(body) if body is not None else wrap


def processor_for(ordered: bool) -> BasePartialBatchProcessor:
    """A fresh processor per batch (they hold the batch's state)."""
    if ordered:
        fifo = SqsFifoPartialProcessor(skip_group_on_error=True)
        fifo.raise_on_entire_batch_failure = False
        return fifo
    return BatchProcessor(EventType.SQS, raise_on_entire_batch_failure=False)


def handle_batch(guard: TaskGuard, body: Body, event: Any, context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}``: the messages SQS must keep."""
    name = guard.settings.task
    logger = telemetry.logger()
    logger.append_keys(task=name)
    holder = str(getattr(context, "aws_request_id", "local"))
    delivered: set[str] = set()

    def one(record: SQSRecord) -> None:
        message = Message.from_record(record.raw_event)
        logger.append_keys(message_id=message.message_id)
        delivered.add(message.message_id)  # even if it raises: its visibility is its own
        delivery = guard.deliver(
            message, body, remaining_ms=context.get_remaining_time_in_millis, holder=holder
        )
        _report(name, delivery)
        if not delivery.delete:
            raise MessageKept(f"{delivery.outcome.value}: {delivery.reason}")

    answer = dict(
        process_partial_response(
            event=event, record_handler=one, processor=processor_for(guard.settings.ordered)
        )
    )
    if guard.settings.ordered:
        _release_skipped(guard, event, answer, delivered)
    return answer


def _release_skipped(
    guard: TaskGuard, event: Any, answer: dict[str, Any], delivered: set[str]
) -> None:
    """An ordered batch reports a group's messages after its first kept one failed without
    handing them to the guard; left alone they would stay invisible for the queue's whole
    visibility timeout, and the FIFO group with them, whatever the head's backoff. Visible at
    once instead: SQS still holds the group while its head is in flight, so the order holds."""
    kept = {failure["itemIdentifier"] for failure in answer.get("batchItemFailures", [])}
    for record in event.get("Records", []):
        message = Message.from_record(record)
        if message.message_id in kept and message.message_id not in delivered:
            guard.come_back_at_once(message)


_OUTCOME_METRIC = {
    Outcome.SUCCEEDED: TaskMetric.SUCCEEDED,
    Outcome.FAILED: TaskMetric.FAILED,
    Outcome.RETRIED: TaskMetric.RETRIED,
    Outcome.DUPLICATE: TaskMetric.DUPLICATE,
    Outcome.CANCELLED: TaskMetric.CANCELLED,
    Outcome.FENCED: TaskMetric.FENCED,
    Outcome.MALFORMED: TaskMetric.MALFORMED,
    Outcome.UNRECORDED: TaskMetric.FINISH_UNRECORDED,
    Outcome.UNCERTAIN: TaskMetric.UNCERTAIN,
    Outcome.COMPENSATED: TaskMetric.COMPENSATED,
}
_WORTH_A_WARNING = frozenset(
    {
        Outcome.FAILED,
        Outcome.FENCED,
        Outcome.MALFORMED,
        Outcome.UNRECORDED,
        Outcome.RETRIED,
        Outcome.UNCERTAIN,
        Outcome.COMPENSATED,
    }
)


def _report(task: str, delivery: Delivery) -> None:
    """A success, its duration and its wait count for the stack (one series each, whatever the
    number of tasks); anything else counts for its task too (``task`` dimension): those series
    exist, and are billed, only while something goes wrong, and the stack's alarms read them by
    task (``infra.monitoring``). The task's own durations are in its log line."""
    metrics, logger = telemetry.metrics(), telemetry.logger()
    metric = _OUTCOME_METRIC.get(delivery.outcome)
    if metric is TaskMetric.SUCCEEDED:
        metrics.add_metric(name=metric, unit="Count", value=1)
    elif metric is not None:
        telemetry.count_one(metric, task=task)
    if delivery.duration_ms is not None:
        metrics.add_metric(
            name=TaskMetric.DURATION, unit="Milliseconds", value=delivery.duration_ms
        )
    if delivery.queue_wait_ms is not None:
        metrics.add_metric(
            name=TaskMetric.QUEUE_WAIT, unit="Milliseconds", value=delivery.queue_wait_ms
        )
    if delivery.event_unsent:
        telemetry.count_one(TaskMetric.EVENT_UNSENT, task=task)
    if delivery.suspended is not None:  # a flow's normal path: one series for the stack
        slept = delivery.suspended is TaskStatus.SLEEPING
        metrics.add_metric(
            name=TaskMetric.SLEPT if slept else TaskMetric.WAITED, unit="Count", value=1
        )
    worth_a_warning = delivery.outcome in _WORTH_A_WARNING or delivery.announce_pending
    log = logger.warning if worth_a_warning else logger.info
    log(
        f"task {delivery.outcome.value.lower()}",
        extra={
            "id": delivery.task_id,
            "attempt": delivery.attempt,
            "reason": delivery.reason,
            "duration_ms": delivery.duration_ms,
            "queue_wait_ms": delivery.queue_wait_ms,
            **(
                {"event": "not sent yet: the message comes back to send it"}
                if delivery.announce_pending
                else {}
            ),
        },
    )
