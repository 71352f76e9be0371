"""The queue message of a task: ``{"vigil_task": {"v": 1, "task", "id", "payload", ...}}``.

Built by ``enqueue`` (and by a one-time schedule, which sends the same body), read by the task's
function. Anything else on the queue is refused as :class:`MalformedTask` with a reason that goes
to the dead-letter queue with it: a message that cannot be a task is never retried.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from vigil.clock import iso
from vigil.contract.tasks import (
    ENVELOPE_KEY,
    ENVELOPE_VERSION,
    GROUP,
    LEGACY_SCHEDULE_DIGEST,
    LEGACY_SCHEDULE_TASK_CHARACTERS,
    MAX_SCHEDULE_NAME,
    TASK_ID,
    EnvelopeField,
    schedule_name_prefix,
)
from vigil.tasks.errors import MalformedTask

F = EnvelopeField


@dataclass(frozen=True)
class Envelope:
    task: str
    id: str
    payload: dict[str, Any]
    enqueued_at: str
    """ISO 8601 UTC (``vigil.clock.iso``)."""
    due_at: str | None = None
    group: str | None = None
    redriven: bool = False
    request: str | None = None
    """The digest of the caller's request under its key (``EnvelopeField.REQUEST``)."""
    redrive_id: str | None = None
    """The redrive operation that sent it back (``EnvelopeField.REDRIVE_ID``); None on a
    message redriven before operations had ids (``redriven`` alone)."""
    wake: str | None = None
    """A signal's wake-up of a WAITING flow: the wait's name (``EnvelopeField.WAKE``)."""
    priority: str | None = None
    """The declared level it was enqueued at (None: normal): its redrive goes to that queue."""
    parent: dict[str, str] | None = None
    """A map's child: its flow's ``task``, ``id`` and ``map`` (``EnvelopeField.PARENT``)."""

    def to_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            F.VERSION: ENVELOPE_VERSION,
            F.TASK: self.task,
            F.ID: self.id,
            F.PAYLOAD: self.payload,
            F.ENQUEUED_AT: self.enqueued_at,
        }
        if self.due_at:
            fields[F.DUE_AT] = self.due_at
        if self.group:
            fields[F.GROUP] = self.group
        if self.redriven:
            fields[F.REDRIVEN] = True
        if self.request:
            fields[F.REQUEST] = self.request
        if self.redrive_id:
            fields[F.REDRIVE_ID] = self.redrive_id
        if self.wake:
            fields[F.WAKE] = self.wake
        if self.priority:
            fields[F.PRIORITY] = self.priority
        if self.parent:
            fields[F.PARENT] = self.parent
        return {ENVELOPE_KEY: fields}

    def body(self) -> str:
        """The message body; ``json.dumps`` raises TypeError/ValueError on a payload that is
        not JSON (``enqueue`` turns that into ``InvalidTask``)."""
        return json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False)

    def redrive(self, operation: str | None = None) -> Envelope:
        """The same task marked as an operator's redrive ``operation`` (a new one if None): it
        may take a FAILED record, once per operation."""
        return replace(self, redriven=True, redrive_id=operation or new_redrive_id())

    def resume(self, wake: str | None = None) -> Envelope:
        """The message that wakes a flow: the same task and payload, without a redrive's marks
        (spent on the record), with ``wake`` for a signal's."""
        return replace(self, redriven=False, redrive_id=None, wake=wake)

    def redrive_operation(self, message_id: str) -> str | None:
        """The redrive this message belongs to, None if it is no redrive. A message redriven
        before operations had ids is an operation of its own (its message id)."""
        if not self.redriven:
            return None
        return self.redrive_id or f"message:{message_id}"


def new_redrive_id() -> str:
    return uuid.uuid4().hex


def parse(body: str, expected_task: str | None = None) -> Envelope:
    """The envelope in a message body, or :class:`MalformedTask` saying why not; with
    ``expected_task``, a message of another task is malformed too (it was misrouted)."""
    try:
        raw = json.loads(body)
    except (TypeError, ValueError) as error:
        raise MalformedTask(f"the body is not JSON: {error}") from None
    except RecursionError:
        # Arrays nested some thousand deep fit SQS's 256 KiB; json's decoder recurses per level.
        raise MalformedTask("the body is not a task: its JSON is nested too deeply") from None
    fields = raw.get(ENVELOPE_KEY) if isinstance(raw, dict) else None
    if not isinstance(fields, dict):
        raise MalformedTask(f"the body is not a task envelope (no {ENVELOPE_KEY!r} object)")
    task, task_id = fields.get(F.TASK), fields.get(F.ID)
    readable_task = task if isinstance(task, str) and task else None
    readable_id = task_id if isinstance(task_id, str) and TASK_ID.match(task_id) else None

    def refuse(reason: str) -> MalformedTask:
        mine = expected_task is None or readable_task == expected_task
        return MalformedTask(reason, readable_task if mine else None, readable_id if mine else None)

    if fields.get(F.VERSION) != ENVELOPE_VERSION:
        raise refuse(f"envelope version {fields.get(F.VERSION)!r}, expected {ENVELOPE_VERSION}")
    if readable_task is None:
        raise refuse("the envelope names no task")
    if expected_task is not None and task != expected_task:
        raise refuse(f"a message of task {task!r} on the queue of {expected_task!r}")
    if readable_id is None:
        raise refuse(f"invalid task id {task_id!r}")
    payload = fields.get(F.PAYLOAD)
    if not isinstance(payload, dict):
        raise refuse(f"the payload is {type(payload).__name__}, not a JSON object")
    enqueued_at = fields.get(F.ENQUEUED_AT)
    if not isinstance(enqueued_at, str) or not _is_time(enqueued_at):
        raise refuse(f"invalid enqueued_at {enqueued_at!r}")
    due_at = fields.get(F.DUE_AT)
    if due_at is not None and (not isinstance(due_at, str) or not _is_time(due_at)):
        raise refuse(f"invalid due_at {due_at!r}")
    group = fields.get(F.GROUP)
    if group is not None and (not isinstance(group, str) or not GROUP.match(group)):
        raise refuse(f"invalid group {group!r}")
    request = fields.get(F.REQUEST)
    if request is not None and not isinstance(request, str):
        raise refuse(f"invalid request digest {request!r}")
    redrive_id = fields.get(F.REDRIVE_ID)
    if redrive_id is not None and (not isinstance(redrive_id, str) or not redrive_id):
        raise refuse(f"invalid redrive id {redrive_id!r}")
    wake = fields.get(F.WAKE)
    if wake is not None and (not isinstance(wake, str) or not wake):
        raise refuse(f"invalid wake {wake!r}")
    priority = fields.get(F.PRIORITY)
    if priority is not None and (not isinstance(priority, str) or not priority):
        raise refuse(f"invalid priority {priority!r}")
    parent = fields.get(F.PARENT)
    if parent is not None and not _is_parent(parent):
        raise refuse(f"invalid parent {parent!r:.120}")
    return Envelope(
        parent=parent,
        wake=wake,
        task=readable_task,
        id=readable_id,
        payload=payload,
        enqueued_at=enqueued_at,
        due_at=due_at,
        group=group,
        redriven=fields.get(F.REDRIVEN) is True or redrive_id is not None,
        request=request,
        redrive_id=redrive_id,
        priority=priority,
    )


def _is_time(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def deduplication_id(task: str, task_id: str) -> str:
    """A FIFO message's ``MessageDeduplicationId``: one per task and key (SQS keeps it 5 min)."""
    return hashlib.sha256(f"{task}#{task_id}".encode()).hexdigest()


def schedule_name(task: str, task_id: str) -> str:
    """The one-time schedule of a task due beyond 15 minutes: derived from task and id, so
    enqueueing the same key again meets it (ConflictException) instead of scheduling twice, and
    ``cancel`` finds it. ``_<task>_<digest>``: the task's whole name between delimiters no task
    name has (``schedule_name_prefix``), then as much of the digest as fits Scheduler's 64
    characters (base32, lower case: at least 14 characters, 70 bits, for a 48-character task)."""
    digest = hashlib.sha256(f"{task}#{task_id}".encode()).digest()
    text = base64.b32encode(digest).decode().rstrip("=").lower()
    return f"{schedule_name_prefix(task)}{text}"[:MAX_SCHEDULE_NAME]


def legacy_schedule_name(task: str, task_id: str) -> str:
    """The name a schedule was created under before :func:`schedule_name` (``<task[:23]>-`` and
    40 hex digits): a schedule pending from then still fires as it should (its target and body
    are what they were) and must still be found by ``cancel``."""
    digest = hashlib.sha256(f"{task}#{task_id}".encode()).hexdigest()[:LEGACY_SCHEDULE_DIGEST]
    return f"{task[:LEGACY_SCHEDULE_TASK_CHARACTERS]}-{digest}"


def schedule_names(task: str, task_id: str) -> tuple[str, str]:
    """Every name the task's one-time schedule may have: the current one first."""
    return (schedule_name(task, task_id), legacy_schedule_name(task, task_id))


def at_expression(moment: datetime) -> str:
    """Scheduler's one-time expression, in UTC (``ScheduleExpressionTimezone`` = UTC). ``at()``
    has whole seconds: a moment within a second is rounded up, never down, so the schedule does
    not fire before it (a flow's wake-up truncated to the second came before its sleep's end,
    was answered BUSY and came back: two invocations for one wake-up)."""
    if moment.microsecond:
        moment += timedelta(microseconds=1_000_000 - moment.microsecond)
    return f"at({iso(moment)[:19]})"


def _is_parent(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"task", "id", "map"}
        and all(isinstance(part, str) and part for part in value.values())
    )
