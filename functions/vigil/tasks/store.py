"""The task store: every DynamoDB request ``vigil.tasks`` makes, and nothing else.

One item per task in the stack's tasks table (``pk = TASK#<task>``, ``sk = <id>``), written by
conditional single-item requests only, so a task costs at most three write units all told:

* ``put_queued`` (enqueue): PutItem, only if no record exists (the key's once-only promise);
* ``claim``: one UpdateItem that creates a missing record, or takes a QUEUED one, a RUNNING one
  whose lease ran out, or (a redrive operation not yet spent on it) a FAILED one; refused, it
  hands back the record it saw (ALL_OLD), so a duplicate costs that single request;
* ``finish``: one UpdateItem fenced by the claim's token; refused, the record it hands back tells
  a run fenced out from a run whose own earlier try landed.

Progress and cancel are single conditional updates too; reads are GetItem and Query.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, Sleeper, iso
from vigil.contract.flows import (
    RESUME_ATTRIBUTE,
    WAITING_FOR_ATTRIBUTE,
    WAKE_AT_ATTRIBUTE,
    journal_pk,
)
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE, Verdict
from vigil.contract.tasks import (
    CANCEL_REQUESTED_ATTRIBUTE,
    CANCEL_REQUESTED_BY_ATTRIBUTE,
    DEADLINE_ATTRIBUTE,
    DEADLINES_INDEX,
    FINAL_STATUSES,
    FINISHED_BY_ATTRIBUTE,
    OUTBOX_ATTRIBUTE,
    PK_PREFIX,
    REDRIVES_ATTRIBUTE,
    REQUEST_ATTRIBUTE,
    RESULT_REF_ATTRIBUTE,
    RETRIES_INDEX,
    RETRY_AT_ATTRIBUTE,
    SUSPENDED_STATUSES,
    TaskStatus,
)
from vigil.dynamo import (
    Item,
    Update,
    all_of,
    any_of,
    from_wire,
    is_condition_failure,
    old_item,
    paginate,
)
from vigil.dynamo import to_wire as wire
from vigil.fenced_write import CancelCheck, RunRecordSite
from vigil.settle import settlement, write_settlement, write_settlements
from vigil.tasks.errors import InvalidTask, NotCancellable, TaskCancelled
from vigil.tasks.flows.settle import NO_RESULT, step_of, step_verdict

LEASE_ATTRIBUTES = ("lease_until", "holder")
PARENT_ATTRIBUTE = "parent"
"""On a map's child's record: its flow and map (``{"task", "id", "map"}``)."""
OUTCOME_ATTRIBUTES = (OUTBOX_ATTRIBUTE, FINISHED_BY_ATTRIBUTE, RESULT_REF_ATTRIBUTE)
"""What a final outcome leaves that the next run (a redrive's) must not inherit."""
RETRY_ATTRIBUTES = (RETRY_AT_ATTRIBUTE, "retry_message")
"""A QUEUED record waiting for its retry: when the backoff ends, and the message that holds the
retry (SQS hands it back then). Until then no other message of the key may take the record."""
SUSPENSION_ATTRIBUTES = (WAKE_AT_ATTRIBUTE, WAITING_FOR_ATTRIBUTE, RESUME_ATTRIBUTE)
"""A SLEEPING or WAITING flow's: when its wake-up is due, the wait, its message body."""
BUDGET_FROM = "budget_from"
"""The attempts spent when the task last went FAILED: the retry budget of a redriven task counts
its attempts from there (absent: from 0)."""


def task_key(task: str, task_id: str) -> dict[str, str]:
    return {"pk": f"{PK_PREFIX}{task}", "sk": task_id}


def epoch_s(moment: datetime) -> int:
    return int(moment.timestamp())


@dataclass(frozen=True)
class TaskRecord:
    """One task as its record says, for the API, the CLI and the kit."""

    task: str
    id: str
    status: TaskStatus
    attempts: int
    enqueued_at: str | None = None
    due_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    progress: int | None = None
    progress_note: str | None = None
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None
    group: str | None = None
    token: int | None = None
    uncertain_effect: str | None = None
    """UNCERTAIN: the effect found begun and never recorded done."""
    effects: dict[str, Any] | None = None
    """``run.once``'s journal: effect -> {state, fence, at}."""
    result_ref: str | None = None
    """A result too big for the record: where it is stored (``get`` reads it into ``result``)."""
    result_unavailable: str | None = None
    """Why ``get`` could not read ``result_ref`` (gone from the bucket, refused, not the task's)."""
    cancel_requested_at: str | None = None
    """A cancel asked for while it ran (the run stops at its next check), and by whom."""
    cancel_requested_by: str | None = None
    wake_at: str | None = None
    """A SLEEPING or WAITING flow: when it wakes (its sleep's end, its wait's timeout)."""
    waiting_for: str | None = None
    steps: list[dict[str, Any]] | None = None
    """A flow's step timeline (``get`` reads it from the flow's journal; None: not read)."""
    parent: dict[str, str] | None = None
    """A map's child: the flow (``task``, ``id``) and the map (``map``) that enqueued it."""

    @classmethod
    def from_item(cls, item: Item) -> TaskRecord:
        raw_result = item.get("result")
        return cls(
            task=str(item.get("task") or str(item["pk"]).removeprefix(PK_PREFIX)),
            id=str(item.get("id") or item["sk"]),
            status=TaskStatus(item["status"]),
            attempts=int(item.get("attempts", 0)),
            enqueued_at=item.get("enqueued_at"),
            due_at=item.get("due_at"),
            started_at=item.get("started_at"),
            finished_at=item.get("finished_at"),
            progress=int(item["progress"]) if "progress" in item else None,
            progress_note=item.get("progress_note"),
            result=json.loads(raw_result) if isinstance(raw_result, str) else None,
            error_type=item.get("error_type"),
            error_message=item.get("error_message"),
            group=item.get("group"),
            token=int(item["token"]) if "token" in item else None,
            uncertain_effect=item.get(UNCERTAIN_EFFECT_ATTRIBUTE),
            effects=item.get(JOURNAL_ATTRIBUTE) or None,
            result_ref=item.get(RESULT_REF_ATTRIBUTE),
            cancel_requested_at=item.get(CANCEL_REQUESTED_ATTRIBUTE),
            cancel_requested_by=item.get(CANCEL_REQUESTED_BY_ATTRIBUTE),
            wake_at=item.get(WAKE_AT_ATTRIBUTE),
            waiting_for=item.get(WAITING_FOR_ATTRIBUTE),
            parent=item.get(PARENT_ATTRIBUTE),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "id": self.id,
            "status": self.status.value,
            "attempts": self.attempts,
            "enqueued_at": self.enqueued_at,
            "due_at": self.due_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "progress": self.progress,
            "progress_note": self.progress_note,
            "result": self.result,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "group": self.group,
            **({"uncertain_effect": self.uncertain_effect} if self.uncertain_effect else {}),
            **({"effects": self.effects} if self.effects else {}),
            **({RESULT_REF_ATTRIBUTE: self.result_ref} if self.result_ref else {}),
            **({"result_unavailable": self.result_unavailable} if self.result_unavailable else {}),
            **(
                {
                    CANCEL_REQUESTED_ATTRIBUTE: self.cancel_requested_at,
                    CANCEL_REQUESTED_BY_ATTRIBUTE: self.cancel_requested_by,
                }
                if self.cancel_requested_at
                else {}
            ),
            **({WAKE_AT_ATTRIBUTE: self.wake_at} if self.wake_at else {}),
            **({WAITING_FOR_ATTRIBUTE: self.waiting_for} if self.waiting_for else {}),
            **({"steps": self.steps} if self.steps else {}),
            **({PARENT_ATTRIBUTE: self.parent} if self.parent else {}),
        }


@dataclass(frozen=True)
class Claim:
    """What a claim writes: the run's token, its lease, who holds it, and what the envelope says
    (written only if the record is missing: enqueue's write may not have landed)."""

    task: str
    id: str
    token: int
    now: datetime
    lease_until: datetime
    holder: str
    expires_at: datetime
    enqueued_at: str
    due_at: str | None = None
    group: str | None = None
    redrive: str | None = None
    """The redrive operation of the claiming message (``Envelope.redrive_operation``): it may
    take a FAILED record (or a waiting retry) once, then it is spent on the record."""
    message_id: str = ""
    """The claiming message: the one that holds a retry may take it before its backoff ends."""
    request: str | None = None
    """The envelope's request digest: the claim takes only a record of that request (or of
    none), and writes it on a record it creates."""
    wake: str | None = None
    """A signal's wake-up: it may take a flow WAITING on that wait before its timeout."""
    deadline: datetime | None = None
    """``max_duration`` declared: when the task must have ended, written by its first claim only
    (kept through retries, takeovers and a flow's resumes; a final finish removes it)."""
    cancelled_flow: bool = False
    """A flow cancelled while it ran whose run died (in its children's cancel or its
    compensations): taken over, so the new run stops it and compensates what is left."""


@dataclass(frozen=True)
class Claimed:
    record: Item


@dataclass(frozen=True)
class ClaimRefused:
    seen: Item | None


@dataclass(frozen=True)
class TaskFinish:
    """A run's outcome as written: built once per run, so every try is the same request."""

    task: str
    id: str
    token: int
    status: TaskStatus
    """SUCCEEDED, FAILED (final) or QUEUED (a retry to come after the backoff)."""
    at: datetime
    attempt: int
    expires_at: datetime
    duration_ms: int = 0
    result: str | None = None
    """The body's return value as JSON."""
    error_type: str | None = None
    error_message: str | None = None
    retry_in_s: int = 0
    """QUEUED: the backoff, after which ``retry_message`` comes back to run the retry."""
    retry_message: str | None = None
    uncertain_effect: str | None = None
    """UNCERTAIN: the effect an earlier attempt began and never recorded done."""
    enqueued_at: str | None = None
    """The record's (what the completion event says)."""
    message_id: str = ""
    """The message whose run this is (``finished_by`` on a final record)."""
    event_id: str | None = None
    """An announced outcome: its completion event's id, written with it (the outbox)."""
    result_ref: str | None = None
    """A result stored out of the record (``s3://...``), instead of ``result``."""
    not_retried: bool = False
    """FAILED with retries left: its error is not worth one (``Reject``, ``no_retry_on``)."""
    answers_cancel: bool = False
    """A cancelled flow's own end (FAILED: a compensation of its cancel failed): written as it
    is, not turned into a plain CANCELLED that would drop the compensation's name."""
    wake_at: datetime | None = None
    """SLEEPING or WAITING: when its wake-up (sent before this finish) is due."""
    waiting_for: str | None = None
    resume: str | None = None
    """SLEEPING or WAITING: its message body, for a cancel to wake it with."""

    def recorded(self) -> Item:
        """The record's fields this finish leaves, as a read of the record returns them: what
        the completion event is built from, here and at any later re-send."""
        item: Item = {
            "task": self.task,
            "id": self.id,
            "status": self.status.value,
            "attempts": self.attempt,
            "enqueued_at": self.enqueued_at,
            "finished_at": iso(self.at),
            "token": self.token,
        }
        optional = {
            "result": self.result,
            RESULT_REF_ATTRIBUTE: self.result_ref,
            "error_type": self.error_type,
            "error_message": (self.error_message or "") if self.error_type is not None else None,
            OUTBOX_ATTRIBUTE: self.event_id,
            FINISHED_BY_ATTRIBUTE: self.message_id or None,
        }
        return item | {k: v for k, v in optional.items() if v is not None}

    @property
    def run(self) -> tuple[str, str]:
        return (self.task, self.id)

    @property
    def label(self) -> str:
        return f"task {self.task} {self.id}"

    @property
    def final(self) -> bool:
        return self.status is not TaskStatus.QUEUED and self.status not in SUSPENDED_STATUSES

    def landed_in(self, seen: Item | None) -> bool:
        """The refused try's record is this very outcome, written by an earlier try whose answer
        was lost; only this run writes under its token, so this is not a guess."""
        return (
            seen is not None
            and seen.get("token") == self.token
            and seen.get("status") == self.status.value
            and "lease_until" not in seen
        )


@dataclass(frozen=True)
class HeldRun:
    """What :meth:`TaskStore.still_held` read: the run still holds its record, and the cancel
    asked for it (None: none)."""

    held: bool
    cancel: TaskCancelled | None = None


class TaskStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    @property
    def client(self) -> Any:
        """The DynamoDB client (the rate limiter and a flow's journal share it)."""
        return self._client

    # Enqueue ------------------------------------------------------------------------------------

    def put_queued(
        self,
        task: str,
        task_id: str,
        *,
        enqueued_at: datetime,
        expires_at: datetime,
        due_at: datetime | None = None,
        group: str | None = None,
        request: str | None = None,
        parent: Mapping[str, str] | None = None,
    ) -> bool:
        """The QUEUED record; False if the key has a record already (nothing is written).
        ``request``: the digest of the request that enqueued it (``REQUEST_ATTRIBUTE``);
        ``parent``: a map's child's flow and map."""
        item: Item = {
            **task_key(task, task_id),
            "task": task,
            "id": task_id,
            "status": TaskStatus.QUEUED.value,
            "attempts": 0,
            "enqueued_at": iso(enqueued_at),
            "expires_at": epoch_s(expires_at),
        }
        if due_at is not None:
            item["due_at"] = iso(due_at)
        if group is not None:
            item["group"] = group
        if request is not None:
            item[REQUEST_ATTRIBUTE] = request
        if parent is not None:
            item[PARENT_ATTRIBUTE] = dict(parent)
        try:
            self._client.put_item(
                TableName=self._table,
                Item=wire(item),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    # Running ------------------------------------------------------------------------------------

    def claim(self, claim: Claim) -> Claimed | ClaimRefused:
        update = Update().set_all(
            {
                "status": TaskStatus.RUNNING.value,
                "token": claim.token,
                "lease_until": iso(claim.lease_until),
                "holder": claim.holder,
                "started_at": iso(claim.now),
                "expires_at": epoch_s(claim.expires_at),
            }
        )
        update.count_up("attempts")
        update.set_default(JOURNAL_ATTRIBUTE, {})  # run.once's journal survives a takeover
        update.set_default("task", claim.task)
        update.set_default("id", claim.id)
        update.set_default("enqueued_at", claim.enqueued_at)
        if claim.due_at:
            update.set_default("due_at", claim.due_at)
        if claim.group:
            update.set_default("group", claim.group)
        if claim.request:
            update.set_default(REQUEST_ATTRIBUTE, claim.request)
        if claim.deadline is not None:
            update.set_default(DEADLINE_ATTRIBUTE, iso(claim.deadline))
        update.remove(
            "progress",
            "progress_note",
            *RETRY_ATTRIBUTES,
            *OUTCOME_ATTRIBUTES,
            *SUSPENSION_ATTRIBUTES,
        )
        # A waiting retry is its own message's, once its backoff ends; a redrive not yet spent
        # on this record may run it at once (it is spent by doing so).
        waiting_over = [
            update.absent("retry_at"),
            update.le("retry_at", iso(claim.now)),
            update.eq("retry_message", claim.message_id),
        ]
        takeable = [update.absent("pk")]
        if claim.redrive:
            # A cancel asked of an earlier run that ended UNCERTAIN was that run's: the
            # operator's settlement and redrive run the task again, and this run is not told of
            # it. (Any other claim keeps it: a cancelled flow is woken to see it and compensate.)
            update.remove(CANCEL_REQUESTED_ATTRIBUTE, CANCEL_REQUESTED_BY_ATTRIBUTE)
            update.set("redriven", True)
            update.add(REDRIVES_ATTRIBUTE, {claim.redrive})
            unspent = update.lacks(REDRIVES_ATTRIBUTE, claim.redrive)
            waiting_over.append(unspent)
            takeable.append(all_of(update.eq("status", TaskStatus.FAILED.value), unspent))
        takeable += [
            all_of(update.eq("status", TaskStatus.QUEUED.value), any_of(*waiting_over)),
            # A run cancelled while it ran is not taken over: it ends CANCELLED (the guard's
            # END_CANCELLED), never runs again; a flow's is, to stop at its next step.
            all_of(
                update.eq("status", TaskStatus.RUNNING.value),
                update.lt("lease_until", iso(claim.now)),
                *([] if claim.cancelled_flow else [update.absent(CANCEL_REQUESTED_ATTRIBUTE)]),
            ),
            # A flow whose wake-up is due (a cancel's too: it stops at the step it slept in and
            # runs its compensations, so a cancelled flow is taken).
            all_of(
                update.one_of("status", *(status.value for status in SUSPENDED_STATUSES)),
                update.le(WAKE_AT_ATTRIBUTE, iso(claim.now)),
            ),
        ]
        if claim.wake:
            takeable.append(
                all_of(
                    update.eq("status", TaskStatus.WAITING.value),
                    update.eq(WAITING_FOR_ATTRIBUTE, claim.wake),
                )
            )
        update.condition(any_of(*takeable))
        update.condition(any_of(update.absent("token"), update.lt("token", claim.token)))
        if claim.request:
            update.condition(
                any_of(
                    update.absent(REQUEST_ATTRIBUTE), update.eq(REQUEST_ATTRIBUTE, claim.request)
                )
            )
        try:
            answer = self._update(
                claim.task,
                claim.id,
                update,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if is_condition_failure(error):
                return ClaimRefused(old_item(error))
            raise
        return Claimed(from_wire(answer["Attributes"]) or {})

    def finish(self, outcome: TaskFinish) -> bool:
        """One try at recording the outcome, only if the run still holds the task: True if
        recorded (by this try or, as the refusal shows, an earlier one), False if fenced out.
        Transient faults are raised for ``record_outcome`` to retry."""
        update = Update().set_all(
            {"status": outcome.status.value, "expires_at": epoch_s(outcome.expires_at)}
        )
        update.set("duration_ms", outcome.duration_ms)
        if outcome.final:
            update.set("finished_at", iso(outcome.at))
            update.set(FINISHED_BY_ATTRIBUTE, outcome.message_id)
            update.remove(DEADLINE_ATTRIBUTE)  # out of the deadlines index: ended in time or not
            if outcome.event_id:
                update.set(OUTBOX_ATTRIBUTE, outcome.event_id)
        if outcome.status is TaskStatus.FAILED:
            # Only an operator's redrive takes a FAILED record, and it gets the retries afresh:
            # its attempts count from here, whichever message (the redrive's or a plain copy of
            # the key) runs them.
            update.set(BUDGET_FROM, outcome.attempt)
        if outcome.status in SUSPENDED_STATUSES:
            assert outcome.wake_at is not None
            update.set(WAKE_AT_ATTRIBUTE, iso(outcome.wake_at))
            update.set(RESUME_ATTRIBUTE, outcome.resume or "")
            if outcome.waiting_for:
                update.set(WAITING_FOR_ATTRIBUTE, outcome.waiting_for)
            # Each resume is a fresh start of the retry budget: a flow that sleeps a hundred
            # times is not a task that crashed a hundred times.
            update.set(BUDGET_FROM, outcome.attempt)
        if outcome.status is TaskStatus.QUEUED:
            update.set("retry_at", iso(outcome.at + timedelta(seconds=outcome.retry_in_s)))
            update.set("retry_message", outcome.retry_message or "")
        if outcome.result is not None:
            update.set("result", outcome.result)
        if outcome.result_ref is not None:
            update.set(RESULT_REF_ATTRIBUTE, outcome.result_ref)
        if outcome.uncertain_effect:
            update.set(UNCERTAIN_EFFECT_ATTRIBUTE, outcome.uncertain_effect)
        if outcome.error_type is not None:
            update.set("error_type", outcome.error_type)
            update.set("error_message", outcome.error_message or "")
        else:
            update.remove("error_type", "error_message")
        update.remove(*LEASE_ATTRIBUTES)
        update.condition(
            update.eq("token", outcome.token), update.eq("status", TaskStatus.RUNNING.value)
        )
        if outcome.status in CANCELLABLE_OUTCOMES and not outcome.answers_cancel:
            # A failure (to retry, or final) after a cancel was asked for ends CANCELLED instead.
            update.condition(update.absent(CANCEL_REQUESTED_ATTRIBUTE))
        try:
            self._update(
                outcome.task, outcome.id, update, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as error:
            if is_condition_failure(error):
                seen = old_item(error)
                if (
                    outcome.status in CANCELLABLE_OUTCOMES
                    and not outcome.answers_cancel
                    and _cancel_asked(seen, outcome.token)
                ):
                    raise CancelAsked(seen or {}) from None
                return outcome.landed_in(seen)
            raise
        return True

    def record_site(
        self,
        task: str,
        task_id: str,
        token: int,
        time_left_s: Callable[[], float],
        clock: Clock,
        sleep: Sleeper,
    ) -> RunRecordSite:
        """Where ``run.once`` journals this attempt's effects: the task's record, while the
        attempt holds it (its token, still RUNNING)."""
        return RunRecordSite(
            client=self._client,
            table=self._table,
            key=task_key(task, task_id),
            token_attribute="token",
            token=token,
            running=TaskStatus.RUNNING.value,
            label=f"task {task} {task_id}",
            time_left_s=time_left_s,
            clock=clock,
            sleep=sleep,
            cancel=CancelCheck(
                CANCEL_REQUESTED_ATTRIBUTE, functools.partial(cancelled, task, task_id)
            ),
        )

    def progress(self, task: str, task_id: str, token: int, percent: int, note: str | None) -> bool:
        """The run's progress, only while it holds the task and no cancel was asked for; False:
        fenced out; :class:`TaskCancelled` once someone asked to cancel it (one request either
        way: the refusal hands back the record)."""
        update = Update().set("progress", percent)
        if note is not None:
            update.set("progress_note", note)
        else:
            update.remove("progress_note")
        update.condition(update.eq("token", token), update.eq("status", TaskStatus.RUNNING.value))
        update.condition(update.absent(CANCEL_REQUESTED_ATTRIBUTE))
        try:
            self._update(task, task_id, update, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            seen = old_item(error)
            if _cancel_asked(seen, token):
                raise cancelled(task, task_id, seen or {}) from None
            return False
        return True

    def still_held(self, task: str, task_id: str, token: int) -> HeldRun:
        """One strongly consistent read, made before a run's final failure is dead-lettered:
        whether the run still holds the record (its token, RUNNING; else a newer delivery took
        the task over and this outcome would be refused), and the cancellation asked for it."""
        seen = self.item(task, task_id)
        held = (
            seen is not None
            and seen.get("token") == token
            and seen.get("status") == TaskStatus.RUNNING.value
        )
        asked = held and seen is not None and _cancel_asked(seen, token)
        return HeldRun(held, cancelled(task, task_id, seen or {}) if asked else None)

    def mark_malformed(
        self, task: str, task_id: str, reason: str, now: datetime, expires_at: datetime
    ) -> bool:
        """FAILED with the reason, for a message naming this task and a readable id that is not
        a task (a payload that is not an object, an old envelope version): only if the key has
        no record. A record means ``enqueue`` (which never sends such a message) or a real
        message's claim wrote it: the key's real message is on its way or has run, and a
        malformed copy must not fail it."""
        update = _end_unstarted(task, task_id, TaskStatus.FAILED, now, expires_at)
        update.condition(update.absent("pk"))
        update.set_all({"error_type": "MalformedTask", "error_message": reason})
        return self._applied(task, task_id, update)

    # Management ---------------------------------------------------------------------------------

    def cancel(
        self, task: str, task_id: str, now: datetime, expires_at: datetime, by: str = ""
    ) -> Item | None:
        """QUEUED (or no record: its message may be on the way) -> CANCELLED; RUNNING -> the
        request noted (``cancel_requested_at``/``_by``, the first one kept) for the run to see.
        The record as it was (None if there was none). A final task: :class:`NotCancellable`.

        A record that moves between the two tries (a run starting, or going back to QUEUED for
        its retry) is tried again, so the answer is always about the status the write met."""
        seen: Item = {}
        for _ in range(3):
            status = seen.get("status")
            retrying = status == TaskStatus.QUEUED.value and int(seen.get("attempts") or 0) > 0
            if status == TaskStatus.RUNNING.value or (retrying and self.has_steps(task, task_id)):
                # A flow between a failed attempt and its retry has finished steps: asked, not
                # ended here, so its retry stops it at its next step and compensates.
                update = Update().set_default(CANCEL_REQUESTED_ATTRIBUTE, iso(now))
                update.set_default(CANCEL_REQUESTED_BY_ATTRIBUTE, by or "unknown")
                update.condition(update.eq("status", str(status)))
            else:
                update = _end_unstarted(task, task_id, TaskStatus.CANCELLED, now, expires_at)
                if not retrying:  # the first try: a record never started (or one to look at)
                    update.condition(any_of(update.absent("attempts"), update.eq("attempts", 0)))
            try:
                answer = self._update(
                    task,
                    task_id,
                    update,
                    ReturnValues="ALL_OLD",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as error:
                if not is_condition_failure(error):
                    raise
                seen = old_item(error) or {}
                if seen.get("status") in (TaskStatus.RUNNING.value, TaskStatus.QUEUED.value):
                    continue
                status = str(seen.get("status", "gone"))
                raise NotCancellable(task, task_id, status, seen) from None
            return from_wire(answer.get("Attributes"))
        raise NotCancellable(task, task_id, str(seen.get("status", "gone")), seen)

    def has_steps(self, task: str, task_id: str) -> bool:
        """The task is a flow that has journalled a step (one Query of a key, at most 1 item)."""
        answer = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": journal_pk(task, task_id)}},
            ProjectionExpression="pk",
            Limit=1,
        )
        return bool(answer.get("Items"))

    def cancel_suspended(self, task: str, task_id: str, now: datetime) -> Item | None:
        """A SLEEPING or WAITING flow asked to stop: due to wake now (its compensations run in
        its own function), with the cancel on the record; the record as written, None if it is
        not suspended (any more)."""
        update = Update().set(CANCEL_REQUESTED_ATTRIBUTE, iso(now)).set(WAKE_AT_ATTRIBUTE, iso(now))
        update.condition(update.one_of("status", *(status.value for status in SUSPENDED_STATUSES)))
        try:
            answer = self._update(task, task_id, update, ReturnValues="ALL_NEW")
        except ClientError as error:
            if is_condition_failure(error):
                return None
            raise
        return from_wire(answer.get("Attributes"))

    def settle(
        self,
        task: str,
        task_id: str,
        effect: str,
        *,
        verdict: Verdict,
        now: datetime,
        result: Any = NO_RESULT,
    ) -> TaskRecord:
        """An operator's verdict on an UNCERTAIN task's effect (:mod:`vigil.settle`): done ->
        SUCCEEDED; done, rerun and not done -> FAILED, which ``vigil tasks redrive`` runs again
        from the dead-letter queue (where the UNCERTAIN attempt put its message), skipping the
        effect or doing it. Anything else: :class:`NotSettleable`, nothing changed.

        A flow's ``step:<name>`` (:mod:`vigil.tasks.flows.settle`): done records ``result`` as
        the step's, not done lets it run again; either way the flow is FAILED for the redrive
        that resumes it (a step's done does not end the flow). An effect named ``step:...``
        that the record's own journal holds is a task's ``run.once``, settled as such."""
        step = step_of(effect)
        if step is not None and effect in (
            (self.item(task, task_id) or {}).get(JOURNAL_ATTRIBUTE) or {}
        ):
            # ``run.once("step:...")`` in a task (':' is an effect name's): its record's journal
            # holds the effect, which a flow's step never puts there. One GetItem, step: only.
            step = None
        if step is not None and verdict is Verdict.DONE:
            verdict = Verdict.DONE_RERUN
        elif step is None and result is not NO_RESULT:
            raise InvalidTask("result", "a result is settled only for a flow's step:<name>")
        update = settlement(
            effect,
            verdict=verdict,
            now=now,
            done_status=TaskStatus.SUCCEEDED.value,
            failed_status=TaskStatus.FAILED.value,
            again=f"`vigil tasks redrive {task}` runs it",
        )
        if verdict is not Verdict.DONE:
            # FAILED for a redrive, which gets the retries afresh as for any FAILED task (the
            # guard's finish sets this for its own FAILED): counted from the attempts spent.
            update.set_from(BUDGET_FROM, "attempts")
        run = f"task {task} {task_id}"
        if step is None:
            item = write_settlement(
                self._client, self._table, task_key(task, task_id), update, run=run, effect=effect
            )
        else:
            journal = step_verdict(task, task_id, step, verdict=verdict, result=result, now=now)
            writes = [(task_key(task, task_id), update), journal]
            item = write_settlements(self._client, self._table, writes, run=run, effect=effect)
        return TaskRecord.from_item(item)

    def _update(self, task: str, task_id: str, update: Update, **extra: Any) -> dict[str, Any]:
        return dict(
            self._client.update_item(
                TableName=self._table,
                Key=wire(task_key(task, task_id)),
                **extra,
                **update.request(),
            )
        )

    def _applied(self, task: str, task_id: str, update: Update) -> bool:
        """Written; False if its condition refused it."""
        try:
            self._update(task, task_id, update)
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    def count_by_status(self, task: str) -> Counter[TaskStatus]:
        """The task's records by status: a Query of its partition, reading the status alone
        (for the operator's views; every record is read, one request per 1 MB page)."""
        request = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk",
            "ProjectionExpression": "#status",
            "ExpressionAttributeNames": {"#pk": "pk", "#status": "status"},
            "ExpressionAttributeValues": wire({":pk": f"{PK_PREFIX}{task}"}),
        }
        return Counter(TaskStatus(item["status"]) for item in paginate(self._client.query, request))

    def waiting_retries(self, task: str, due_before: datetime) -> Iterator[str]:
        """The ids of ``task``'s records whose retry was due before ``due_before``, from the
        sparse ``retries`` index (eventually consistent: read each record before judging it)."""
        request = {
            "TableName": self._table,
            "IndexName": RETRIES_INDEX,
            "KeyConditionExpression": "#pk = :pk AND #at < :before",
            "ExpressionAttributeNames": {"#pk": "pk", "#at": RETRY_AT_ATTRIBUTE},
            "ExpressionAttributeValues": wire(
                {":pk": f"{PK_PREFIX}{task}", ":before": iso(due_before)}
            ),
        }
        for item in paginate(self._client.query, request):
            yield str(item["sk"])

    def past_deadline(self, task: str, now: datetime) -> Iterator[str]:
        """The ids of ``task``'s records whose ``deadline`` is before ``now``, from the sparse
        ``deadlines`` index (eventually consistent: read each record before judging it)."""
        request = {
            "TableName": self._table,
            "IndexName": DEADLINES_INDEX,
            "KeyConditionExpression": "#pk = :pk AND #at < :now",
            "ExpressionAttributeNames": {"#pk": "pk", "#at": DEADLINE_ATTRIBUTE},
            "ExpressionAttributeValues": wire({":pk": f"{PK_PREFIX}{task}", ":now": iso(now)}),
        }
        for item in paginate(self._client.query, request):
            yield str(item["sk"])

    def clear_deadline(self, task: str, task_id: str) -> bool:
        """Take an ended record out of the ``deadlines`` index (one ended by a cancel, a
        settlement or anything but a run's finish, which removes it itself); False if the record
        has not ended (or is gone)."""
        update = Update()
        update.remove(DEADLINE_ATTRIBUTE)
        update.condition(update.one_of("status", *(status.value for status in FINAL_STATUSES)))
        return self._applied(task, task_id, update)

    def get(self, task: str, task_id: str) -> TaskRecord | None:
        item = self.item(task, task_id)
        return TaskRecord.from_item(item) if item else None

    def batch_items(
        self,
        task: str,
        ids: list[str],
        run: Callable[[Callable[[], Any]], Any],
        pause: Callable[[int], None],
        *,
        full: bool = False,
    ) -> dict[str, Item]:
        """Up to 100 records by id (BatchGetItem, strongly consistent, the fields a bulk enqueue
        compares, or whole with ``full``: a map's children), each request through ``run`` (a retrier); what DynamoDB leaves unprocessed
        (it throttled) is asked again after ``pause(round)``, which raises when time is up."""
        keys = [wire(task_key(task, task_id)) for task_id in ids]
        found: dict[str, Item] = {}
        for round_ in itertools.count():
            if not keys:
                break
            if round_:
                pause(round_)
            projection = {
                "ProjectionExpression": "#sk, #status, #request",
                "ExpressionAttributeNames": {
                    "#sk": "sk",
                    "#status": "status",
                    "#request": REQUEST_ATTRIBUTE,
                },
            }
            request = {
                self._table: {"Keys": keys, "ConsistentRead": True, **({} if full else projection)}
            }
            answer = run(functools.partial(self._client.batch_get_item, RequestItems=request))
            for raw in answer.get("Responses", {}).get(self._table, []):
                item = from_wire(raw) or {}
                found[str(item["sk"])] = item
            keys = answer.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
        return found

    def item(self, task: str, task_id: str) -> Item | None:
        answer = self._client.get_item(
            TableName=self._table, Key=wire(task_key(task, task_id)), ConsistentRead=True
        )
        return from_wire(answer.get("Item")) or None

    def list(
        self,
        task: str,
        status: TaskStatus | None = None,
        limit: int = 50,
        page: str | None = None,
    ) -> tuple[list[TaskRecord], str | None]:
        """One page of a task's records (by id), and the token of the next page (None: the
        last). With ``status``, DynamoDB filters after reading ``limit`` items, so a page may
        hold fewer: follow the token until it is None."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "pk"},
            "ExpressionAttributeValues": wire({":pk": f"{PK_PREFIX}{task}"}),
            "Limit": limit,
        }
        if status is not None:
            request["FilterExpression"] = "#status = :status"
            request["ExpressionAttributeNames"]["#status"] = "status"
            request["ExpressionAttributeValues"] |= wire({":status": status.value})
        if page:
            request["ExclusiveStartKey"] = wire(_start_key(task, page))
        answer = self._client.query(**request)
        records = [TaskRecord.from_item(from_wire(raw) or {}) for raw in answer.get("Items", [])]
        last = from_wire(answer.get("LastEvaluatedKey"))
        return records, _page_token(task, last) if last else None


CANCELLABLE_OUTCOMES = frozenset({TaskStatus.QUEUED, TaskStatus.FAILED})
"""A run's failures, which a cancel asked for turns into CANCELLED: a SUCCEEDED run did the
work (the cancel came too late: the record keeps it), an UNCERTAIN one waits for a person."""


class CancelAsked(Exception):
    """A failure's finish refused because someone asked to cancel the run: finish it CANCELLED."""

    def __init__(self, seen: Item) -> None:
        super().__init__("a cancel was asked for")
        self.seen = seen


def _cancel_asked(seen: Item | None, token: int) -> bool:
    """``seen`` is still this run's (its token, RUNNING) and someone asked to cancel it."""
    return (
        seen is not None
        and seen.get("token") == token
        and seen.get("status") == TaskStatus.RUNNING.value
        and bool(seen.get(CANCEL_REQUESTED_ATTRIBUTE))
    )


def cancelled(task: str, task_id: str, seen: Mapping[str, Any]) -> TaskCancelled:
    """The :class:`TaskCancelled` a run meets on ``seen``, naming when and by whom."""
    return TaskCancelled(
        task,
        task_id,
        str(seen.get(CANCEL_REQUESTED_ATTRIBUTE) or ""),
        str(seen.get(CANCEL_REQUESTED_BY_ATTRIBUTE) or ""),
    )


def _end_unstarted(
    task: str, task_id: str, status: TaskStatus, now: datetime, expires_at: datetime
) -> Update:
    """A task that never started, ended (CANCELLED, or FAILED as malformed): only if its record
    is missing (its message may come later) or QUEUED."""
    update = Update().set_all(
        {
            "task": task,
            "id": task_id,
            "status": status.value,
            "finished_at": iso(now),
            "expires_at": epoch_s(expires_at),
        }
    )
    update.set_default("attempts", 0)
    # A retry's waiting record too: out of the sparse retries index, which the audit reads whole.
    update.remove(*RETRY_ATTRIBUTES)
    update.condition(any_of(update.absent("pk"), update.eq("status", TaskStatus.QUEUED.value)))
    return update


def _page_token(task: str, last: Item) -> str:
    """An opaque next-page token: the last id read, checked against the task on the way back."""
    text = json.dumps({"task": task, "sk": last["sk"], "check": _check(task, str(last["sk"]))})
    return base64.urlsafe_b64encode(text.encode()).decode()


def _start_key(task: str, token: str) -> dict[str, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token.encode()))
        sk = str(raw["sk"])
        valid = raw["task"] == task and raw["check"] == _check(task, sk)
    except (ValueError, KeyError, TypeError, binascii.Error):
        valid = False
    if not valid:
        raise InvalidTask("next", f"invalid page token {token[:40]!r} for task {task}")
    return task_key(task, sk)


def _check(task: str, sk: str) -> str:
    return hashlib.sha256(f"{task}#{sk}".encode()).hexdigest()[:12]
