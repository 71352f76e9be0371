"""A flow's journal: every DynamoDB request of ``run.step``/``run.sleep``/``run.wait_for`` and of
a signal, and nothing else.

One item per step in the flow's own partition (:func:`vigil.contract.flows.journal_pk`), each
written by single conditional requests:

* a step: one PutItem of its result when it is done (1 write unit for a result under ~900 bytes),
  only if no attempt recorded it first (refused: the recorded result wins, handed back by
  ``ALL_OLD``); a ``once=True`` step also writes its intent first (2 in all); a failed attempt
  writes its error (1, on failure only);
* a sleep: one PutItem of its end (the first execution to reach it);
* a wait: one UpdateItem arming it (its timeout and the flow's message), and at its timeout one
  UpdateItem that wins only if no signal came: exactly one of the signal and the timeout wins;
* a signal: one UpdateItem of the wait's item, refused once the wait timed out or under another
  key;
* a map: one PutItem of its item, one UpdateItem once its children are enqueued, one GetItem of
  its count; each child's end one UpdateItem of it (counted once: the child's index joins a set);
* a compensation: one UpdateItem of its intent before it runs (only if none began it), one of
  its outcome after.

Reading the journal back is a Query of the partition, one request per 1 MB page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import iso
from vigil.contract.flows import (
    MAX_STEP_RESULT_BYTES,
    StepField,
    StepKind,
    StepState,
    journal_pk,
)
from vigil.dynamo import Item, Update, from_wire, is_condition_failure, old_item, to_wire
from vigil.tasks.flows.errors import InvalidStep

F = StepField


def step_key(task: str, task_id: str, name: str) -> dict[str, str]:
    return {"pk": journal_pk(task, task_id), "sk": name}


@dataclass(frozen=True)
class Refused:
    """A conditional write that lost: the item as it was (None if absent)."""

    seen: Item | None


class FlowJournal:
    def __init__(self, client: Any, table: str, task: str, task_id: str) -> None:
        self._client = client
        self._table = table
        self.task = task
        self.id = task_id
        self.pages_read = 0

    # Reading ------------------------------------------------------------------------------------

    def read(self) -> dict[str, Item]:
        """Every item of the flow's journal by name: one strongly consistent Query per page."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "pk"},
            "ExpressionAttributeValues": to_wire({":pk": journal_pk(self.task, self.id)}),
            "ConsistentRead": True,
        }
        items: dict[str, Item] = {}
        while True:
            answer = self._client.query(**request)
            self.pages_read += 1
            for raw in answer.get("Items", []):
                item = from_wire(raw) or {}
                items[str(item["sk"])] = item
            last = answer.get("LastEvaluatedKey")
            if not last:
                return items
            request["ExclusiveStartKey"] = last

    # Steps --------------------------------------------------------------------------------------

    def record_done(self, name: str, fields: Mapping[str, Any]) -> Item | Refused:
        """A step's result, only if no attempt recorded it DONE first."""
        item = {**step_key(self.task, self.id, name), **fields, F.STATE: StepState.DONE.value}
        return self._put(item, "attribute_not_exists(#state) OR #state <> :state", StepState.DONE)

    def record_start(self, name: str, fields: Mapping[str, Any]) -> Item | Refused:
        """A ``once=True`` step's intent, only if no attempt began it (or recorded it) before."""
        item = {**step_key(self.task, self.id, name), **fields, F.STATE: StepState.STARTED.value}
        return self._put_new(item, allow_failed=True)

    def record_failure(self, name: str, fields: Mapping[str, Any], error: str) -> None:
        """The error of a step's attempt, unless the step is DONE by then (best kept, not vital)."""
        update = Update()
        for attribute, value in fields.items():
            if attribute not in (F.ATTEMPTS, F.STATE):
                update.set(attribute, value)
        update.set(F.STATE, StepState.FAILED.value).set(F.ERROR, error)
        update.count_up(F.ATTEMPTS)
        update.condition(any_of_absent_or_not(update, F.STATE, StepState.DONE.value))
        self._try_update(name, update)

    def put_new(self, name: str, fields: Mapping[str, Any]) -> Item | Refused:
        """A sleep's (or another first-reached) item, only if the name has none yet."""
        return self._put_new({**step_key(self.task, self.id, name), **fields})

    # Waits and signals --------------------------------------------------------------------------

    def arm_wait(self, name: str, fields: Mapping[str, Any]) -> Item | Refused:
        """A wait's timeout and resume body, only if it is neither armed nor signalled: refused,
        the item seen says which (a signal that came first is returned at once)."""
        update = Update().set_all(fields)
        update.condition(update.absent(F.UNTIL), update.absent(F.SIGNAL_KEY))
        update.condition(any_of_absent_or(update, F.KIND, StepKind.WAIT.value))
        return self._update_returning(name, update)

    def time_out(self, name: str, now: datetime, expires_at: int) -> Item | Refused:
        """The wait's timeout, only if no signal came: refused, the signal is in the item seen."""
        update = Update().set(F.TIMED_OUT_AT, iso(now)).set(F.EXPIRES_AT, expires_at)
        update.condition(update.absent(F.SIGNAL_KEY))
        return self._update_returning(name, update)

    def signal(
        self, name: str, payload: str, key: str, now: datetime, expires_at: int
    ) -> Item | Refused:
        """The signal on its wait's item (made if the wait is not reached yet): refused once the
        wait timed out, or if the name was signalled with another key. The same key again is
        the same signal (rewritten with the same values: it counts once)."""
        update = Update()
        update.set_default(F.SIGNAL, payload)
        update.set_default(F.SIGNAL_KEY, key)
        update.set_default(F.SIGNALLED_AT, iso(now))
        update.set_default(F.KIND, StepKind.WAIT.value)
        update.set(F.EXPIRES_AT, expires_at)
        update.condition(update.absent(F.TIMED_OUT_AT))
        update.condition(any_of_absent_or(update, F.SIGNAL_KEY, key))
        update.condition(any_of_absent_or(update, F.KIND, StepKind.WAIT.value))
        return self._update_returning(name, update)

    # Maps ---------------------------------------------------------------------------------------

    def item(self, name: str) -> Item | None:
        """One step's item (a strongly consistent GetItem): a map's count, read after its enqueue."""
        answer = self._client.get_item(
            TableName=self._table,
            Key=to_wire(step_key(self.task, self.id, name)),
            ConsistentRead=True,
        )
        return from_wire(answer.get("Item"))

    def mark_enqueued(self, name: str, now: datetime) -> Item | Refused:
        """A map's children all enqueued: a later execution sends none again."""
        update = Update().set_default(F.ENQUEUED_AT, iso(now))
        update.condition(update.eq(F.KIND, StepKind.MAP.value))
        return self._update_returning(name, update)

    def count_child(self, name: str, index: int, status: str, now: datetime) -> Item | Refused:
        """A child's end on its map's item, once per child (its index joins a set): refused, it
        was counted before (or the map's item is gone: its flow expired). ``now``: the map's
        latest end (the map's own end once every child has)."""
        update = Update().add(F.ENDED, 1).add(F.ENDED_SET, {index}).set(F.ENDED_AT, iso(now))
        update.add(f"{F.ENDED.value}_{status}", 1)
        update.condition(update.eq(F.KIND, StepKind.MAP.value), update.lacks(F.ENDED_SET, index))
        return self._update_returning(name, update)

    def record_children_cancelled(self, name: str, now: datetime, asked: int) -> None:
        """A cancelled flow cancelled this map's children that had not ended (``asked`` of them
        RUNNING, asked to stop): for the timeline and the operator."""
        update = Update().set_default(F.CHILDREN_CANCELLED_AT, iso(now))
        update.set(F.CHILDREN_STOP_ASKED, asked)
        update.condition(update.eq(F.KIND, StepKind.MAP.value))
        self._try_update(name, update)

    # Compensations ------------------------------------------------------------------------------

    def begin_compensation(self, name: str, expires_at: int) -> Item | Refused:
        """A compensation's intent, written before it runs, only if no execution began or
        finished it (one that raised, its error kept, may run again): refused, the item seen
        says which. Found begun and never recorded, it is not run a second time."""
        update = Update().set(F.COMPENSATION, StepState.STARTED.value)
        update.set(F.EXPIRES_AT, expires_at)
        update.condition(
            f"({update.absent(F.COMPENSATION)} OR "
            f"({update.ne(F.COMPENSATION, StepState.STARTED.value)} AND "
            f"{update.ne(F.COMPENSATION, StepState.DONE.value)}))"
        )
        return self._update_returning(name, update)

    def record_compensation(self, name: str, outcome: str, order: int, expires_at: int) -> None:
        """What the compensation of a finished step did (DONE, or its error), and the order it
        ran in among the flow's compensations (1 first)."""
        update = Update().set(F.COMPENSATION, outcome).set(F.EXPIRES_AT, expires_at)
        update.set(F.COMPENSATION_ORDER, order)
        self._try_update(name, update)

    # Requests -----------------------------------------------------------------------------------

    def _put_new(self, item: Item, allow_failed: bool = False) -> Item | Refused:
        if allow_failed:
            return self._put(item, "attribute_not_exists(sk) OR #state = :state", StepState.FAILED)
        return self._put(item, "attribute_not_exists(sk)")

    def _put(self, item: Item, condition: str, state: StepState | None = None) -> Item | Refused:
        """``item`` written if ``condition`` holds (``#state``/``:state``: the item's state and
        ``state``); refused, the item as it was."""
        extra: dict[str, Any] = {}
        if state is not None:
            extra = {
                "ExpressionAttributeNames": {"#state": F.STATE.value},
                "ExpressionAttributeValues": to_wire({":state": state.value}),
            }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_wire(item),
                ConditionExpression=condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **extra,
            )
        except ClientError as error:
            if is_condition_failure(error):
                return Refused(old_item(error))
            raise
        return item

    def _update_returning(self, name: str, update: Update) -> Item | Refused:
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=to_wire(step_key(self.task, self.id, name)),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.request(),
            )
        except ClientError as error:
            if is_condition_failure(error):
                return Refused(old_item(error))
            raise
        return from_wire(answer.get("Attributes")) or {}

    def _try_update(self, name: str, update: Update) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_wire(step_key(self.task, self.id, name)),
                **update.request(),
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True


def any_of_absent_or(update: Update, attribute: str, value: Any) -> str:
    return f"({update.absent(attribute)} OR {update.eq(attribute, value)})"


def any_of_absent_or_not(update: Update, attribute: str, value: Any) -> str:
    return f"({update.absent(attribute)} OR {update.ne(attribute, value)})"


def encode_result(name: str, value: Any) -> str:
    """A step's result as the JSON its item keeps: refused (nothing written) when it is not JSON
    or over the size a step records. One check for a step that ran and for an operator's
    settlement."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidStep(name, f"its result is not JSON ({error}); nothing recorded") from None
    size = len(text.encode())
    if size > MAX_STEP_RESULT_BYTES:
        raise InvalidStep(
            name,
            f"its result is {size} bytes of JSON, over the {MAX_STEP_RESULT_BYTES} a step "
            "records; nothing recorded: store it elsewhere (S3) and return its location",
        )
    return text
