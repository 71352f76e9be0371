"""Enqueueing and cancelling tasks, from any Python application with only boto3.

Message first, then the record, so no dual write can lose work::

    validate everything -> InvalidTask, nothing sent or written
    send the message (SQS, DelaySeconds <= 15 min; beyond: a one-time Scheduler schedule that
        sends it and deletes itself; the same key meets the same schedule name: ConflictException)
    put the QUEUED record, only if the key has none (refused: enqueued before; the id is returned)

A record without a message cannot exist (the record is written second); a message without a
record (the put failed after the send) is still run: the consumer's claim creates the record.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, Sleeper, iso, system_clock
from vigil.contract.journal import Verdict
from vigil.contract.tasks import (
    GROUP,
    MAX_QUEUE_DELAY_S,
    NORMAL_PRIORITY,
    REQUEST_ATTRIBUTE,
    SUSPENDED_STATUSES,
    TASK_ID,
    TASK_ID_CHARACTERS,
    TaskStatus,
)
from vigil.dynamo import error_code
from vigil.persist import OutOfTime, persist
from vigil.tasks import bulk
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.envelope import (
    Envelope,
    at_expression,
    deduplication_id,
    schedule_name,
    schedule_names,
)
from vigil.tasks.errors import (
    EnqueuedUnrecorded,
    InvalidTask,
    KeyReused,
    NotCancellable,
    TaskNotFound,
)
from vigil.tasks.flows.errors import InvalidStep
from vigil.tasks.flows.settle import NO_RESULT
from vigil.tasks.queues import MAX_TASK_MESSAGE_BYTES, TaskQueue
from vigil.tasks.results import ResultStore, ResultUnavailable
from vigil.tasks.store import TaskRecord, TaskStore
from vigil.tasks.waiting import (
    DEFAULT_TIMEOUT_S,
    PollBackoff,
    TaskHandle,
    seconds_of,
    wait_for,
)

if TYPE_CHECKING:
    from vigil.tasks.flows.signals import SignalSent

Delay = timedelta | int | float
RECORD_BUDGET_S = 10.0
"""How long ``enqueue`` keeps retrying the QUEUED record's write (throttles, 5xx, timeouts) once
its message is sent, before it raises :class:`EnqueuedUnrecorded` naming the id."""


@dataclass(frozen=True)
class Plan:
    """An enqueue, validated: what will be sent, and how (a delay, a schedule, or at once)."""

    spec: TaskSpec
    envelope: Envelope
    body: str
    delay_s: int
    due: datetime | None
    scheduled: bool
    """Beyond SQS's 15-minute delay: through a one-time schedule."""
    expires_at: datetime
    """The QUEUED record's expiry: its retention after it is due (the key's promise outlives
    the wait)."""

    def record(self, store: TaskStore) -> bool:
        """One try at the QUEUED record, only if the key has none (False: it had one)."""
        envelope = self.envelope
        return store.put_queued(
            envelope.task,
            envelope.id,
            enqueued_at=datetime.fromisoformat(envelope.enqueued_at),
            expires_at=self.expires_at,
            due_at=self.due,
            group=envelope.group,
            request=envelope.request,
            parent=envelope.parent,
        )


class TaskClient:
    """``enqueue``/``cancel``/``get``/``list`` against one stack's catalog (its clients are
    created lazily, so an application that only enqueues never builds a Scheduler client)."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        sqs: Any = None,
        dynamodb: Any = None,
        scheduler: Any = None,
        s3: Any = None,
        clock: Clock = system_clock,
        sleep: Sleeper = time.sleep,
    ) -> None:
        self.catalog = catalog
        self._sqs, self._dynamodb, self._scheduler, self._s3 = sqs, dynamodb, scheduler, s3
        self._clock = clock
        self._sleep = sleep

    # Clients ------------------------------------------------------------------------------------

    def _client(self, kind: str) -> Any:
        attribute = f"_{kind}"
        if getattr(self, attribute) is None:
            import boto3

            setattr(self, attribute, boto3.client(kind))
        return getattr(self, attribute)

    def store(self, spec: TaskSpec) -> TaskStore:
        return TaskStore(self._client("dynamodb"), spec.table)

    # Enqueue ------------------------------------------------------------------------------------

    def plan(
        self,
        task: str,
        payload: Any,
        *,
        key: str | None = None,
        delay: Delay | None = None,
        at: datetime | None = None,
        group: str | None = None,
        request: str | None = None,
        priority: str | None = None,
        parent: dict[str, str] | None = None,
    ) -> Plan:
        """Every check ``enqueue`` makes, before anything is sent: :class:`InvalidTask`."""
        spec = self.catalog.spec(task)
        spec.queue_for(priority)  # an undeclared level is refused before anything else
        now = self._clock()
        if not isinstance(payload, Mapping):
            raise InvalidTask(
                "payload", f"the payload must be a JSON object, got {type(payload).__name__}"
            )
        if key is not None and (not isinstance(key, str) or not TASK_ID.match(key)):
            raise InvalidTask(
                "key",
                f"invalid key {key!r}: 1 to 128 characters, {TASK_ID_CHARACTERS}, "
                "starting with a letter or digit",
            )
        if group is not None:
            if not spec.ordered:
                raise InvalidTask(
                    "group", f"task {task} is not ordered: a group means nothing to it"
                )
            if not isinstance(group, str) or not GROUP.match(group):
                raise InvalidTask(
                    "group", f"invalid group {group!r}: 1 to 128 of [A-Za-z0-9_.:@#=+/-]"
                )
        if delay is not None and at is not None:
            raise InvalidTask("delay", "give delay or at, not both")
        try:
            due = _due(now, delay, at)
            expires_at = (due or now) + spec.retention
        except OverflowError:
            # Computed here, not after the send: a start whose record cannot be kept is refused.
            raise InvalidTask(
                "delay" if delay is not None else "at",
                f"the start is too far ahead: it and the {spec.retention} retention after it "
                "must fall before the year 10000",
            ) from None
        if due is not None and spec.ordered:
            raise InvalidTask(
                "delay" if delay is not None else "at",
                f"task {task} is ordered (a FIFO queue, which has no per-message delay): it "
                "cannot start later; enqueue it when it is due",
            )
        wait_s = math.ceil((due - now).total_seconds()) if due else 0
        scheduled = wait_s > MAX_QUEUE_DELAY_S
        if scheduled and not spec.scheduler_role_arn:
            raise InvalidTask(
                "at", f"task {task} has no scheduler role: it cannot start beyond 15 minutes"
            )
        envelope = Envelope(
            task=task,
            id=key or uuid.uuid4().hex,
            payload=dict(payload),
            enqueued_at=iso(now),
            due_at=iso(due) if due else None,
            group=(group or task) if spec.ordered else None,
            priority=None if priority in (None, NORMAL_PRIORITY) else priority,
            parent=parent,
        )
        try:
            envelope.body()
        except (TypeError, ValueError) as error:
            raise InvalidTask("payload", f"the payload is not JSON-serializable: {error}") from None
        if key is not None:
            envelope = replace(
                envelope,
                request=request or enqueue_digest(payload, delay, at, group, envelope.priority),
            )
        body = envelope.body()
        # As a redrive would send it: the message must survive its dead letter and redrive.
        size = len(envelope.redrive().body().encode())
        if size > MAX_TASK_MESSAGE_BYTES:
            raise InvalidTask(
                "payload",
                f"the task message would be {size} bytes, over the {MAX_TASK_MESSAGE_BYTES} a "
                "task may use of SQS's 256 KiB: store the data elsewhere (S3) and pass its location",
            )
        return Plan(spec, envelope, body, 0 if scheduled else wait_s, due, scheduled, expires_at)

    def enqueue(
        self,
        task: str,
        payload: Any,
        *,
        key: str | None = None,
        delay: Delay | None = None,
        at: datetime | None = None,
        group: str | None = None,
        request: str | None = None,
        priority: str | None = None,
    ) -> str:
        """The task's id (``key``, or a new one): QUEUED once this returns. The same key again
        is the same task: it is not run twice (its record is left as it is).

        With a ``key``, the digest of the caller's whole request (:func:`enqueue_digest`;
        ``request`` overrides it) is kept on the record, and the key's record is read first: a
        record of another request is :class:`KeyReused` and one of this request (or of an
        enqueue that kept no digest) answers its id, both with nothing sent.

        ``priority``: one of the levels the task declares (``BackgroundTask(priorities=...)``):
        its message goes to that level's queue, polled apart from the normal backlog."""
        plan = self.plan(
            task,
            payload,
            key=key,
            delay=delay,
            at=at,
            group=group,
            request=request,
            priority=priority,
        )
        envelope = plan.envelope
        store = self.store(plan.spec)
        if envelope.request is not None:
            seen = store.item(task, envelope.id)
            if seen is not None:
                _same_request(task, envelope.id, seen, envelope.request)
                return envelope.id
        self.send(plan)

        def put() -> bool:
            return plan.record(store)

        # The message is out: the task will run. A throttled record write is retried rather
        # than raised, since a caller told "failed" enqueues again, and without a key that is a
        # second task. Timed by the pauses taken, so any clock (a test's, the kit's) will do.
        slept = [0.0]

        def pause(seconds: float) -> None:
            slept[0] += seconds
            self._sleep(seconds)

        try:
            written = persist(put, time_left_s=lambda: RECORD_BUDGET_S - slept[0], sleep=pause)
        except OutOfTime as out_of_time:
            raise EnqueuedUnrecorded(task, envelope.id, out_of_time.__cause__ or out_of_time) from (
                out_of_time
            )
        if not written and envelope.request is not None:
            # Another request under the key got its record in between the read and the put:
            # this one's message, sent, is a DUPLICATE when it comes (its claim compares).
            _same_request(task, envelope.id, store.item(task, envelope.id) or {}, envelope.request)
        return envelope.id

    def enqueue_many(
        self,
        task: str,
        items: Iterable[tuple[Any, str | None]],
        *,
        delay: Delay | None = None,
        group: str | None = None,
        workers: int = bulk.DEFAULT_WORKERS,
        priority: str | None = None,
        parent: dict[str, str] | None = None,
    ) -> list[bulk.ItemOutcome]:
        """Many ``(payload, key)`` of one task in batches, each item's outcome in order
        (:mod:`vigil.tasks.bulk`): every item is checked first (:class:`InvalidTask` naming
        the item, nothing sent), then SendMessageBatch and conditional record writes."""
        spec = self.catalog.spec(task)

        def digest(payload: Any) -> str:
            level = None if priority in (None, NORMAL_PRIORITY) else priority
            return enqueue_digest(payload, delay, None, group, level)

        return bulk.enqueue_many(
            functools.partial(self.plan, priority=priority, parent=parent),
            self.store(spec),
            self._client("sqs"),
            task,
            items,
            digest=digest,
            group=group,
            delay=delay,
            sleep=self._sleep,
            workers=workers,
        )

    def send(self, plan: Plan) -> None:
        spec, envelope = plan.spec, plan.envelope
        if plan.scheduled:
            assert plan.due is not None
            self._schedule(spec, envelope, plan.body, plan.due)
            return
        queue = TaskQueue(self._client("sqs"), spec.queue_for(envelope.priority))
        if spec.ordered:
            queue.send(
                plan.body, group=envelope.group, dedup=deduplication_id(spec.name, envelope.id)
            )
        else:
            queue.send(plan.body, delay_s=plan.delay_s)

    def _schedule(self, spec: TaskSpec, envelope: Envelope, body: str, due: datetime) -> None:
        schedule_message(
            self._client("scheduler"),
            queue_url=spec.queue_for(envelope.priority),
            dead_letter_url=spec.dead_letter_url,
            role_arn=spec.scheduler_role_arn,
            group=spec.schedule_group,
            name=schedule_name(spec.name, envelope.id),
            body=body,
            due=due,
            description=f"vigil task {spec.name} {envelope.id}",
        )

    # Cancel and read ----------------------------------------------------------------------------

    def cancel(self, task: str, task_id: str, *, by: str = "") -> TaskRecord:
        """QUEUED (or not yet recorded) -> CANCELLED: its message, when it comes, is not run;
        a pending one-time schedule is deleted. RUNNING: the request is noted on the record
        (``cancel_requested_at``, ``cancel_requested_by`` = ``by``) and the record returned still
        RUNNING; the run learns it at its next ``run.progress``, ``run.once`` intent or strict
        fenced write (``TaskCancelled``) and ends CANCELLED, neither retried nor dead-lettered.
        A body that never checks is not stopped: it may still end SUCCEEDED. A task that has
        ended: :class:`NotCancellable`.

        The schedule is deleted after the record says CANCELLED (the other way round, a failed
        write would leave a QUEUED task with nothing to run it), so a delete that fails is
        finished by the cancel retried, though that one answers NotCancellable (CANCELLED). A
        task with no record yet may have a schedule too (its PutItem failed after it was
        created): that one is deleted whenever the task can have schedules. A schedule left
        behind would fire once the CANCELLED record, kept its retention from the cancel, is
        gone, and run the task."""
        spec = self.catalog.spec(task)
        if not isinstance(task_id, str) or not TASK_ID.match(task_id):
            raise InvalidTask("id", f"invalid task id {task_id!r}")
        now = self._clock()
        try:
            before = self.store(spec).cancel(task, task_id, now, now + spec.retention, by=by)
        except NotCancellable as refused:
            if refused.status == TaskStatus.CANCELLED and _scheduled(refused.seen or {}):
                self._unschedule(spec, task_id)
            if refused.status in SUSPENDED_STATUSES and self._wake_to_cancel(spec, task_id, now):
                # A sleeping or waiting flow: woken now to stop (and compensate) in its function.
                return self.get(task, task_id)
            raise
        record = self.store(spec).get(task, task_id)
        if record is None:  # pragma: no cover - written just above
            raise TaskNotFound(f"{task} {task_id}: no record")
        # Only a task the cancel ended: one asked to stop (RUNNING, or a flow waiting for its
        # retry) keeps what runs it to its stop.
        if record.status is TaskStatus.CANCELLED and (
            _scheduled(before) if before is not None else bool(spec.scheduler_role_arn)
        ):
            self._unschedule(spec, task_id)
        return record

    def _wake_to_cancel(self, spec: TaskSpec, task_id: str, now: datetime) -> bool:
        from vigil.tasks.flows.signals import wake_to_cancel

        queue = TaskQueue(self._client("sqs"), spec.queue_url)
        return wake_to_cancel(self.store(spec), queue, spec.name, task_id, now)

    def settle(
        self, task: str, task_id: str, effect: str, *, verdict: Verdict, result: Any = NO_RESULT
    ) -> TaskRecord:
        """A person's word on the effect an UNCERTAIN task stopped on (``vigil tasks settle``,
        ``POST /tasks/{task}/{id}/settle``): see :meth:`TaskStore.settle`; a flow's
        ``step:<name>`` settled done takes ``result`` as the step's."""
        spec = self.catalog.spec(task)
        if not isinstance(task_id, str) or not TASK_ID.match(task_id):
            raise InvalidTask("id", f"invalid task id {task_id!r}")
        try:
            return self.store(spec).settle(
                task, task_id, effect, verdict=verdict, now=self._clock(), result=result
            )
        except InvalidStep as invalid:
            raise InvalidTask("result", str(invalid)) from None

    def signal(
        self, task: str, task_id: str, name: str, payload: Any, *, key: str | None = None
    ) -> SignalSent:
        """Signal ``name`` to the flow ``task_id`` with ``payload`` (:mod:`vigil.tasks.flows.signals`):
        kept until its ``run.wait_for(name)``, or waking it there. The same ``key`` (default: the
        payload's digest) again counts once."""
        from vigil.tasks.flows.signals import send_signal

        spec = self.catalog.spec(task)
        now = self._clock()
        return send_signal(
            self.store(spec),
            TaskQueue(self._client("sqs"), spec.queue_url),
            table=spec.table,
            task=task,
            task_id=task_id,
            name=name,
            payload=payload,
            key=key,
            now=now,
            expires_at=int((now + spec.retention).timestamp()),
        )

    def _unschedule(self, spec: TaskSpec, task_id: str) -> None:
        """Under every name its schedule may have: one created before the current naming
        (``legacy_schedule_name``) may still be pending, and the same key enqueued again since
        may have a second one under the current name."""
        for name in schedule_names(spec.name, task_id):
            try:
                self._client("scheduler").delete_schedule(Name=name, GroupName=spec.schedule_group)
            except ClientError as error:
                if error_code(error) != "ResourceNotFoundException":
                    raise

    def get(self, task: str, task_id: str, *, steps: bool = True) -> TaskRecord:
        """The task's record; a result stored out of it (``result_ref``) is read back into
        ``result``, or ``result_unavailable`` says why it cannot be (the record still answers).
        ``steps``: a flow's step timeline too (one Query of its journal more)."""
        spec = self.catalog.spec(task)
        if not isinstance(task_id, str):
            raise InvalidTask("id", f"a task id is text, got {type(task_id).__name__}")
        record = self.store(spec).get(task, task_id) if TASK_ID.match(task_id) else None
        if record is None:
            raise TaskNotFound(f"no task {task} {task_id} (never enqueued, or expired)")
        if steps:
            record = self._with_steps(spec, record)
        if record.result_ref and record.result is None:
            try:
                result = ResultStore(self._client("s3")).read(task, task_id, record.result_ref)
            except ResultUnavailable as unavailable:
                return replace(record, result_unavailable=str(unavailable))
            record = replace(record, result=result)
        return record

    def wait(
        self,
        task: str,
        task_id: str,
        timeout: timedelta | float = DEFAULT_TIMEOUT_S,
        poll: PollBackoff | None = None,
    ) -> Any:
        """The task's result once its record is final, polling on a backoff
        (:mod:`vigil.tasks.waiting`): :class:`TaskFailed`, ``TimeoutError``."""
        seconds_of("timeout", timeout)  # refused before any request
        return wait_for(
            lambda: self.get(task, task_id, steps=False), self._clock, self._sleep, timeout, poll
        )

    def _with_steps(self, spec: TaskSpec, record: TaskRecord) -> TaskRecord:
        """A flow's step timeline from its journal (one Query a page; none for a plain task's
        empty partition but that one request)."""
        from vigil.tasks.flows.journal import FlowJournal
        from vigil.tasks.flows.timeline import timeline

        items = FlowJournal(self._client("dynamodb"), spec.table, spec.name, record.id).read()
        if not items:
            return record
        rows = timeline(
            items, now=self._clock(), status=record.status, finished_at=record.finished_at
        )
        return replace(record, steps=rows)

    def list(
        self,
        task: str,
        status: TaskStatus | str | None = None,
        limit: int = 50,
        page: str | None = None,
    ) -> tuple[list[TaskRecord], str | None]:
        """One page of ``task``'s records; ``status`` (any case) keeps those in it."""
        spec = self.catalog.spec(task)
        wanted = parse_status(status) if status is not None else None
        if not 1 <= limit <= 1000:
            raise InvalidTask("limit", f"limit must be from 1 to 1000, got {limit}")
        return self.store(spec).list(task, wanted, limit=limit, page=page)


def schedule_message(
    scheduler: Any,
    *,
    queue_url: str,
    dead_letter_url: str,
    role_arn: str,
    group: str,
    name: str,
    body: str,
    due: datetime,
    description: str,
) -> None:
    """A one-time schedule that sends ``body`` to the queue at ``due`` and deletes itself: a
    task's start beyond SQS's 15-minute delay, a flow's wake-up beyond it. The same name again
    (the same key enqueued again, the same sleep suspended again) meets it: ConflictException,
    taken as already scheduled."""
    region = scheduler.meta.region_name
    target: dict[str, Any] = {
        "Arn": queue_arn(queue_url, region),
        "RoleArn": role_arn,
        "Input": body,
        # A schedule that cannot send retries for a day (Scheduler's longest), then leaves
        # the envelope in the task's dead-letter queue: alarmed and redrivable, never a
        # record QUEUED for ever with nothing left to run it.
        "RetryPolicy": {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185},
    }
    if dead_letter_url:
        target["DeadLetterConfig"] = {"Arn": queue_arn(dead_letter_url, region)}
    try:
        scheduler.create_schedule(
            Name=name,
            GroupName=group,
            ScheduleExpression=at_expression(due),
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Target=target,
            Description=description[:512],
        )
    except ClientError as error:
        if error_code(error) != "ConflictException":
            raise


def parse_status(status: TaskStatus | str) -> TaskStatus:
    """A status filter as a person types it (``failed``, ``Failed``), or :class:`InvalidTask`
    naming the statuses there are."""
    name = status.upper() if isinstance(status, str) else status
    if name not in TaskStatus.__members__:
        raise InvalidTask(
            "status", f"unknown status {status!r}; the statuses are: {', '.join(TaskStatus)}"
        )
    return TaskStatus(name)


def _due(now: datetime, delay: Delay | None, at: datetime | None) -> datetime | None:
    if delay is not None:
        seconds = seconds_of("delay", delay)
        return now + timedelta(seconds=seconds) if seconds else None
    if at is not None:
        if not isinstance(at, datetime):
            raise InvalidTask("at", f"at must be a datetime, got {type(at).__name__}")
        if at.tzinfo is None:
            raise InvalidTask("at", f"at must carry a time zone, got {at.isoformat()}")
        if at < now:
            raise InvalidTask("at", f"at {iso(at)} is in the past (now {iso(now)})")
        return at if at > now else None
    return None


def request_digest(request: Mapping[str, Any]) -> str:
    """A caller's request (its payload, delay, at and group, not its key) as compared across
    requests under one key: canonical JSON, hashed."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def enqueue_digest(
    payload: Mapping[str, Any],
    delay: Delay | None,
    at: datetime | None,
    group: str | None,
    priority: str | None = None,
) -> str:
    """The digest every keyed enqueue keeps on its record and compares (the library, the CLI
    and ``POST /tasks/{task}`` alike, so one key is one request wherever it came from): the
    request as the API's body names it, values as given (``delay_seconds`` in seconds, ``at``
    in ISO 8601, in UTC: the same instant is the same start), since two requests with the same
    fields are the same request. A ``priority`` level counts only when given (records from
    before priorities keep matching)."""
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    fields: dict[str, Any] = {
        "payload": dict(payload),
        "delay_seconds": None if seconds is None else float(seconds),
        # An instant, whatever the zone it was written in (15:30Z is 16:30+01:00).
        "at": None if at is None else at.astimezone(UTC).isoformat(),
        "group": group,
    }
    if priority:
        fields["priority"] = priority
    return request_digest(fields)


def _same_request(task: str, task_id: str, seen: Mapping[str, Any], request: str) -> None:
    """:class:`KeyReused` if the key's record was written for another request (a record that
    kept no digest, from an enqueue without one, is taken as the same task, as before)."""
    if seen.get(REQUEST_ATTRIBUTE) not in (None, request):
        raise KeyReused(task, task_id)


def _scheduled(item: Mapping[str, Any]) -> bool:
    """The record was enqueued with a start beyond SQS's delay: a schedule may be pending."""
    due, enqueued = item.get("due_at"), item.get("enqueued_at")
    if not due or not enqueued:
        return False
    wait = datetime.fromisoformat(due) - datetime.fromisoformat(enqueued)
    return wait.total_seconds() > MAX_QUEUE_DELAY_S


def queue_arn(queue_url: str, region: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>`` -> the queue's ARN."""
    parts = queue_url.rstrip("/").split("/")
    if len(parts) < 2:
        raise InvalidTask("task", f"not a queue URL: {queue_url}")
    account, name = parts[-2], parts[-1]
    host = parts[2] if len(parts) > 2 else ""
    if host.startswith("sqs.") and host.count(".") >= 3:
        region = host.split(".")[1]
    return f"arn:aws:sqs:{region}:{account}:{name}"


@cache
def default_client() -> TaskClient:
    """From ``VIGIL_TASKS_CATALOG``, else the catalog of the stack ``VIGIL_STACK`` names, built
    on first use and kept for the process."""
    return TaskClient(Catalog.from_env(os.environ))


def enqueue(
    task: str,
    payload: Any,
    *,
    key: str | None = None,
    delay: Delay | None = None,
    at: datetime | None = None,
    group: str | None = None,
    priority: str | None = None,
    client: TaskClient | None = None,
) -> TaskHandle:
    """Enqueue ``task`` with ``payload``; its id, as a :class:`TaskHandle` (a ``str``) with
    ``.get()`` and ``.wait(timeout)``. See :meth:`TaskClient.enqueue`."""
    client = client or default_client()
    task_id = client.enqueue(
        task, payload, key=key, delay=delay, at=at, group=group, priority=priority
    )
    return TaskHandle(task, task_id, client)


def enqueue_many(
    task: str,
    items: Iterable[tuple[Any, str | None]],
    *,
    delay: Delay | None = None,
    group: str | None = None,
    priority: str | None = None,
    client: TaskClient | None = None,
) -> list[bulk.ItemOutcome]:
    """Enqueue many ``(payload, key)`` of ``task`` in batches; each item's outcome. See
    :meth:`TaskClient.enqueue_many`."""
    return (client or default_client()).enqueue_many(
        task, items, delay=delay, group=group, priority=priority
    )


def cancel(
    task: str, task_id: str, *, by: str = "", client: TaskClient | None = None
) -> TaskRecord:
    """Cancel a task: QUEUED ends CANCELLED, RUNNING is asked to stop (``by``: who asks, for
    the audit). See :meth:`TaskClient.cancel`."""
    return (client or default_client()).cancel(task, task_id, by=by)


def get(task: str, task_id: str, *, client: TaskClient | None = None) -> TaskRecord:
    """The task's record now (status, attempts, result or error): :class:`TaskNotFound` when
    there is none. See :meth:`TaskClient.get`."""
    return (client or default_client()).get(task, task_id)


def wait(
    task: str,
    task_id: str,
    timeout: timedelta | float = DEFAULT_TIMEOUT_S,
    *,
    poll: PollBackoff | None = None,
    client: TaskClient | None = None,
) -> Any:
    """The task's result, once it is final: ``TaskFailed`` (FAILED, CANCELLED, UNCERTAIN) with
    its error type and message, ``TimeoutError`` when it is not final after ``timeout``
    (seconds or a timedelta; the task goes on). One GetItem a poll, 0.25 s apart and doubling
    up to 5 s: a wait of 10 s makes at most 7 (:class:`PollBackoff`)."""
    return (client or default_client()).wait(task, task_id, timeout, poll)


def signal(
    task: str,
    task_id: str,
    name: str,
    payload: Any = None,
    *,
    key: str | None = None,
    client: TaskClient | None = None,
) -> SignalSent:
    """Signal a flow's ``run.wait_for(name)``. See :meth:`TaskClient.signal`."""
    return (client or default_client()).signal(task, task_id, name, payload, key=key)


__all__ = [
    "NotCancellable",
    "TaskClient",
    "cancel",
    "default_client",
    "enqueue",
    "enqueue_many",
    "get",
    "queue_arn",
    "signal",
    "wait",
]
