"""Bulk enqueue: many tasks of one kind in a few requests, each item's outcome reported.

::

    validate every item -> InvalidTask naming the item (items[3].payload), nothing sent or written
    read the keyed items' records (BatchGetItem, 100 keys a request): a key with a record is a
        DUPLICATE (REFUSED idempotency_key_reused if its request differs); nothing sent for it
    send the rest (SendMessageBatch: at most 10 entries and 256 KiB a request); an entry SQS
        failed is sent again (its fault) or REFUSED with SQS's reason (the sender's: nothing sent)
    put each sent item's QUEUED record, only if its key has none, in parallel

Message first, then the record, as ``enqueue`` does: no record without a message. The records
are conditional PutItems, not BatchWriteItem, which takes no condition: it would overwrite a
record written meanwhile (a RUNNING task set back to QUEUED, an ended one run again), so the
key's once-only promise would rest on the pre-read alone. A refused put is a DUPLICATE, as for
``enqueue``: its message, sent, meets the key's record at its claim and runs nothing.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from vigil.clock import Sleeper
from vigil.contract.tasks import MAX_MESSAGE_BYTES, REQUEST_ATTRIBUTE
from vigil.persist import OutOfTime, error_code, persist
from vigil.tasks.errors import InvalidTask
from vigil.tasks.store import TaskStore

MAX_BATCH_ENTRIES = 10
"""SendMessageBatch's most entries a request."""
MAX_BATCH_BYTES = MAX_MESSAGE_BYTES
"""SendMessageBatch's most bytes a request, all entries' bodies together (256 KiB)."""
MAX_READ_KEYS = 100
"""BatchGetItem's most keys a request."""
SEND_ROUNDS = 5
"""Times an entry SQS failed on its side (``SenderFault`` false) is sent again before it is
reported REFUSED."""
BUDGET_S = 10.0
"""How long the whole call retries throttles (the pauses it takes, so any clock will do)."""
DEFAULT_WORKERS = 8
"""Record writes in flight at once: 1,000 records are 125 round trips, not 1,000."""


class ItemStatus(StrEnum):
    ENQUEUED = "enqueued"
    """Its message is sent and its QUEUED record written (or, rarely, being written by its
    claim: ``reason`` says so)."""
    DUPLICATE = "duplicate"
    """Its key already had a task (or came earlier in this call): nothing new runs."""
    REFUSED = "refused"
    """Not enqueued; ``reason`` says why. Nothing was sent for it, unless ``reason`` says its
    fate is unknown (then enqueue it again under its key: at most one runs)."""


@dataclass(frozen=True)
class ItemOutcome:
    index: int
    """The item's place in the call's list."""
    id: str
    status: ItemStatus
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "status": self.status.value,
            "reason": self.reason,
        }


Item = tuple[Any, str | None]
"""``(payload, key)``: key None gets a new id."""


def enqueue_many(
    plan: Callable[..., Any],
    store: TaskStore,
    sqs: Any,
    task: str,
    items: Iterable[Item],
    *,
    digest: Callable[[Any], str],
    group: str | None = None,
    delay: Any = None,
    sleep: Sleeper = time.sleep,
    workers: int = DEFAULT_WORKERS,
) -> list[ItemOutcome]:
    """See the module. ``plan`` is :meth:`TaskClient.plan` (every check ``enqueue`` makes);
    ``digest(payload)`` the request digest a keyed item's record keeps."""
    plans = _plan_all(plan, task, list(items), digest, group, delay)
    outcomes: dict[int, ItemOutcome] = {}
    budget = _Budget(sleep)
    # Keys repeated within the call: the first one stands for them.
    first_of: dict[str, int] = {}
    for index, planned in plans:
        key = planned.envelope.id
        if key in first_of:
            earlier = plans[first_of[key]][1]
            same = earlier.envelope.request == planned.envelope.request
            outcomes[index] = _repeat(index, key, same, f"item {first_of[key]} has this key")
        else:
            first_of[key] = index
    keyed = [plans[i][1].envelope.id for i in first_of.values() if plans[i][1].envelope.request]
    seen = _read(store, task, keyed, budget)
    to_send = []
    for index in first_of.values():
        planned = plans[index][1]
        found = seen.get(planned.envelope.id)
        if found is None:
            to_send.append((index, planned))
            continue
        same = found.get(REQUEST_ATTRIBUTE) in (None, planned.envelope.request)
        outcomes[index] = _repeat(index, planned.envelope.id, same, "enqueued before")
    sent, refused = _send(sqs, to_send, budget)
    outcomes |= refused
    outcomes |= _record(store, task, sent, budget, workers)
    return [outcomes[index] for index, _ in plans]


def _plan_all(
    plan: Callable[..., Any],
    task: str,
    items: Sequence[Item],
    digest: Callable[[Any], str],
    group: str | None,
    delay: Any,
) -> list[tuple[int, Any]]:
    """Every item planned, or :class:`InvalidTask` naming the first bad one (nothing sent)."""
    if not items:
        raise InvalidTask("items", "no items to enqueue")
    plans = []
    for index, item in enumerate(items):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidTask(
                f"items[{index}]", f"item {index} must be a (payload, key) pair, got {item!r:.80}"
            )
        payload, key = item
        try:
            request = digest(payload) if key is not None else None
            planned = plan(task, payload, key=key, delay=delay, group=group, request=request)
        except InvalidTask as invalid:
            raise InvalidTask(
                f"items[{index}].{invalid.field}", f"item {index} (key {key!r}): {invalid}"
            ) from None
        except (TypeError, ValueError) as error:
            raise InvalidTask(
                f"items[{index}].payload", f"item {index} (key {key!r}): not JSON: {error}"
            ) from None
        if planned.scheduled:
            raise InvalidTask(
                "delay", "a bulk enqueue sends through SQS alone (15 minutes' delay at most)"
            )
        plans.append((index, planned))
    return plans


def _repeat(index: int, key: str, same: bool, why: str) -> ItemOutcome:
    if same:
        return ItemOutcome(index, key, ItemStatus.DUPLICATE, why)
    return ItemOutcome(
        index,
        key,
        ItemStatus.REFUSED,
        f"idempotency_key_reused: {why} with a different request; nothing sent",
    )


class _Budget:
    """The call's time for retries: the pauses taken, against :data:`BUDGET_S`."""

    def __init__(self, sleep: Sleeper) -> None:
        self._sleep = sleep
        self._lock = threading.Lock()  # the record writes pause from several threads
        self.slept = 0.0

    def left(self) -> float:
        return BUDGET_S - self.slept

    def pause(self, seconds: float) -> None:
        with self._lock:
            self.slept += seconds
        self._sleep(seconds)

    def run(self, call: Callable[[], Any]) -> Any:
        return persist(call, time_left_s=self.left, sleep=self.pause)

    def backoff(self, round_: int, what: str) -> None:
        """Before round ``round_`` (from 1) of ``what`` DynamoDB or SQS left undone: a capped
        exponential pause, or :class:`OutOfTime` once the call's time is spent."""
        wait = min(0.05 * 2 ** (round_ - 1), 1.0)
        if self.left() < wait:
            raise OutOfTime(
                f"{what} after {round_} tries in {BUDGET_S:.0f} s: nothing sent",
                attempts=round_,
                ambiguous=False,
            )
        self.pause(wait)


def _read(
    store: TaskStore, task: str, ids: list[str], budget: _Budget
) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for start in range(0, len(ids), MAX_READ_KEYS):
        found |= store.batch_items(
            task,
            ids[start : start + MAX_READ_KEYS],
            budget.run,
            functools.partial(budget.backoff, what="BatchGetItem left keys unprocessed"),
        )
    return found


def _batches(planned: list[tuple[int, Any]]) -> list[list[tuple[int, Any]]]:
    """At most 10 entries and 256 KiB of bodies a batch (each body fits alone: ``plan``)."""
    batches: list[list[tuple[int, Any]]] = []
    size = 0
    for entry in planned:
        body = len(entry[1].body.encode())
        if not batches or len(batches[-1]) == MAX_BATCH_ENTRIES or size + body > MAX_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(entry)
        size += body
    return batches


def _entry(index: int, planned: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"Id": str(index), "MessageBody": planned.body}
    if planned.spec.ordered:
        from vigil.tasks.envelope import deduplication_id

        entry["MessageGroupId"] = planned.envelope.group
        entry["MessageDeduplicationId"] = deduplication_id(planned.spec.name, planned.envelope.id)
    elif planned.delay_s:
        entry["DelaySeconds"] = planned.delay_s
    return entry


def _send(
    sqs: Any, planned: list[tuple[int, Any]], budget: _Budget
) -> tuple[list[tuple[int, Any]], dict[int, ItemOutcome]]:
    """SendMessageBatch per batch; the items sent, and those refused (with SQS's reason)."""
    sent: list[tuple[int, Any]] = []
    refused: dict[int, ItemOutcome] = {}
    for batch in _batches(planned):
        by_id = {str(index): (index, plan) for index, plan in batch}
        pending = list(by_id)
        for round_ in range(SEND_ROUNDS):
            entries = [_entry(*by_id[i]) for i in pending]
            first = batch[0][1]  # one call, one level: every item goes to the same queue
            url = first.spec.queue_for(first.envelope.priority)
            try:
                answer = budget.run(
                    functools.partial(sqs.send_message_batch, QueueUrl=url, Entries=entries)
                )
            except (OutOfTime, ClientError, BotoCoreError) as error:
                # Reported, never raised: the batches before this one are out, and a caller
                # told only "it failed" would enqueue them again (a second run of each item
                # without a key). What persist lets through is final: nothing was sent.
                ambiguous = isinstance(error, OutOfTime) and error.ambiguous
                why = "unknown whether sent" if ambiguous else "not sent"
                for i in pending:
                    index, plan = by_id[i]
                    refused[index] = ItemOutcome(
                        index,
                        plan.envelope.id,
                        ItemStatus.REFUSED,
                        f"{why} ({_named(error)}): enqueue it again under its key",
                    )
                pending = []
                break
            sent += [by_id[ok["Id"]] for ok in answer.get("Successful", [])]
            again = []
            for failed in answer.get("Failed", []):
                index, plan = by_id[failed["Id"]]
                if failed.get("SenderFault") or round_ == SEND_ROUNDS - 1:
                    refused[index] = ItemOutcome(
                        index,
                        plan.envelope.id,
                        ItemStatus.REFUSED,
                        f"SQS refused it: {failed.get('Code')}: {failed.get('Message', '')}; "
                        "nothing sent",
                    )
                else:
                    again.append(failed["Id"])
            pending = again
            if not pending:
                break
            budget.pause(min(0.1 * 2**round_, max(0.0, budget.left())))
    return sent, refused


def _record(
    store: TaskStore, task: str, sent: list[tuple[int, Any]], budget: _Budget, workers: int
) -> dict[int, ItemOutcome]:
    """Each sent item's conditional put, ``workers`` at a time."""

    def put(entry: tuple[int, Any]) -> ItemOutcome:
        index, plan = entry
        envelope = plan.envelope
        try:
            written = budget.run(functools.partial(plan.record, store))
            seen = {} if written else store.item(task, envelope.id) or {}
        except (OutOfTime, ClientError, BotoCoreError) as error:
            # Its message is out: reported ENQUEUED (the claim writes the record), never
            # raised, which would lose every other item's outcome.
            return ItemOutcome(
                index,
                envelope.id,
                ItemStatus.ENQUEUED,
                f"its message is sent and it runs, but its QUEUED record was not written "
                f"({_named(error)}): enqueue it again only under key {envelope.id!r}",
            )
        if written:
            return ItemOutcome(index, envelope.id, ItemStatus.ENQUEUED)
        same = envelope.request is None or seen.get(REQUEST_ATTRIBUTE) in (None, envelope.request)
        return _repeat(index, envelope.id, same, "enqueued meanwhile")

    if not sent:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(sent)))) as pool:
        return {outcome.index: outcome for outcome in pool.map(put, sent)}


def _named(error: BaseException) -> str:
    """An error for an item's reason: its AWS code first, where it has one."""
    code = error_code(error)
    return f"{code}: {error}" if code and code not in str(error) else str(error)


__all__ = ["ItemOutcome", "ItemStatus", "enqueue_many"]
