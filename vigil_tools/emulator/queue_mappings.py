"""SQS event source mappings, delivered in-process as Lambda's SQS poller would.

moto keeps an SQS mapping and, on every SendMessage, tries to run the function in Docker with a
fixed, fake event (receive count "1", a constant timestamp), then makes the messages visible again:
each send would count as a receive and no function would run. :func:`detach_moto_delivery` stops
that; :class:`QueueMapping` then polls the queue through the SQS API, as Lambda does:

* it receives up to the mapping's ``BatchSize`` messages (ten per ReceiveMessage, as SQS answers at
  most ten) with the queue's visibility timeout, and invokes the function with the event Lambda
  sends (``messageId``, ``receiptHandle``, ``body``, ``attributes`` with ``ApproximateReceiveCount``,
  ``SentTimestamp``, ``MessageGroupId``... , ``messageAttributes``, ``eventSourceARN``);
* an invocation that raises fails the whole batch; with ``ReportBatchItemFailures`` the function's
  ``batchItemFailures`` stay and the rest are deleted (a malformed response, an identifier that is
  empty or not in the batch, fails the whole batch, as on AWS); without it, success deletes all;
* what failed is left to its visibility timeout, or to the visibility the function set meanwhile.

What moto's SQS already does, on whatever clock it reads (freezegun's in the testing kit, so the
stepped clock drives it): per-message and queue delay, visibility (a message shows again only once
the clock has passed the instant it became visible: ``now > visible_at``), the receive count, FIFO
groups (a group with a message in flight gives nothing more until it is deleted or visible again)
and the redrive policy (a message received ``maxReceiveCount`` times moves to the dead-letter queue
at the next receive, as on AWS). :meth:`QueueMapping.next_due` reads moto's queue (as
:func:`~vigil_tools.emulator.queues.peek` does) for the instant the next message can be received,
so a stepped clock stops there.

An invocation that ends past the function's timeout (on the clock ``deliver`` is given) counts
as timed out: its answer is dropped and the whole batch stays, as when Lambda stops a function.

Several mappings of one function (a task's priority levels, each its own queue) are polled in
turn by :func:`deliver_together`, one poll each a round, as Lambda's pollers work each mapping
on its own: a high-priority message waits for at most one poll of the normal queue, not for
the normal backlog to drain.

Not emulated: the batching window (a batch is delivered as soon as it is receivable), several
pollers of one mapping (the batches of one poll run one after another unless ``deliver`` gets a
runner that runs them at once: the testing kit's runs them interleaved), mappings polled at the
same time (they take turns, one poll each), ``MaximumConcurrency`` beyond capping the batches of
one poll, and stopping a function at its timeout (it runs to its end, in-process).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from vigil_tools.emulator.lambda_runtime import Invocation
from vigil_tools.sqs_event import lambda_attribute

Invoke = Callable[[str, Any], Invocation]
Runner = Callable[[Sequence[Callable[[], Invocation]]], list[Invocation]]
REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"
RECEIVE_MAX = 10
"""SQS answers at most ten messages per ReceiveMessage."""
DEFAULT_BATCH_SIZE = 10
MOTO_TICK = timedelta(milliseconds=1)
"""moto shows a message once the clock is strictly past its instant (milliseconds)."""
MAX_POLLS = 10_000
"""One ``deliver`` stops after this many polls (a function that keeps every message visible)."""


def one_after_another(batches: Sequence[Callable[[], Invocation]]) -> list[Invocation]:
    return [batch() for batch in batches]


def detach_moto_delivery(session: Any, queue_url: str) -> None:
    """Stop moto invoking (through Docker) the functions mapped to a queue on every send.

    The mapping stays in the Lambda API, where :class:`QueueMapping` reads its settings.
    """
    _moto_queue(session, queue_url).lambda_event_source_mappings.clear()


def _moto_queue(session: Any, queue_url: str) -> Any:
    from moto.sqs.models import sqs_backends

    account, name = queue_url.rstrip("/").split("/")[-2:]
    return sqs_backends[account][session.region_name].get_queue(name)


@dataclass(frozen=True)
class BatchResult:
    """One invocation with one batch: what it got, what it answered, what was deleted."""

    function: str
    queue: str
    message_ids: tuple[str, ...]
    invocation: Invocation
    failed: tuple[str, ...]
    """The message ids left on the queue (all of them when the batch failed as a whole)."""
    reason: str | None = None
    """Why the whole batch failed (the invocation raised, or answered a malformed response)."""

    @property
    def deleted(self) -> tuple[str, ...]:
        return tuple(m for m in self.message_ids if m not in self.failed)


@dataclass
class QueueMapping:
    """One SQS event source mapping, polled on demand."""

    session: Any
    mapping: dict[str, Any]
    queue_url: str
    sqs: Any
    """The poller's own client: its requests are Lambda's, not the application's."""
    _idle: tuple[datetime, frozenset[str]] | None = field(default=None)
    """The instant a poll last gave nothing, and the messages the queue held then: those are
    held back by something else (their FIFO group, retention) and are not due again then."""

    @classmethod
    def all_of(cls, session: Any, sqs: Any | None = None) -> list[QueueMapping]:
        """Every enabled SQS mapping the account holds, with moto's own delivery detached."""
        client = session.client("lambda")
        found = []
        for page in client.get_paginator("list_event_source_mappings").paginate():
            for mapping in page["EventSourceMappings"]:
                arn = str(mapping.get("EventSourceArn", ""))
                if ":sqs:" not in arn or mapping.get("State", "Enabled") not in ("Enabled", None):
                    continue
                own = sqs or session.client("sqs")
                url = own.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]
                detach_moto_delivery(session, url)
                found.append(cls(session, mapping, url, own))
        return found

    @property
    def function(self) -> str:
        return str(self.mapping["FunctionArn"]).rsplit(":", 1)[-1]

    @property
    def queue_arn(self) -> str:
        return str(self.mapping["EventSourceArn"])

    @property
    def batch_size(self) -> int:
        return int(self.mapping.get("BatchSize") or DEFAULT_BATCH_SIZE)

    @property
    def reports_failures(self) -> bool:
        return REPORT_BATCH_ITEM_FAILURES in (self.mapping.get("FunctionResponseTypes") or [])

    @property
    def max_batches(self) -> int:
        """Batches one poll hands out at once: the mapping's maximum concurrency (AWS's
        default without one is the function's concurrency: a thousand)."""
        scaling = self.mapping.get("ScalingConfig") or {}
        return int(scaling.get("MaximumConcurrency") or 1000)

    # -- when ------------------------------------------------------------------------------------

    def next_due(self, now: datetime) -> datetime | None:
        """The first instant a message of the queue can be received (``now`` when one can be
        now); None when the queue is empty. Read from moto's queue, consuming nothing.

        A FIFO group is due when its first message is: the messages behind it wait for it.
        """
        queue = _moto_queue(self.session, self.queue_url)
        seen_groups: set[str] = set()
        due: datetime | None = None
        for message in list(queue._messages):
            if queue.fifo_queue and message.group_id is not None:
                if message.group_id in seen_groups:
                    continue
                seen_groups.add(message.group_id)
            moment = _receivable_at(message)
            if self._idle is not None and moment <= self._idle[0] and message.id in self._idle[1]:
                continue
            if due is None or moment < due:
                due = moment
        return None if due is None else max(due, now)

    # -- delivering ------------------------------------------------------------------------------

    def deliver(
        self, invoke: Invoke, clock: Callable[[], datetime], run: Runner = one_after_another
    ) -> list[BatchResult]:
        """Poll until the queue gives nothing more now: each poll receives up to
        ``max_batches`` batches and ``run`` invokes them (one after another by default).

        An invocation that ends past the function's timeout on ``clock`` timed out, whatever
        it answered: Lambda stopped it and its response is lost, so the whole batch stays,
        including the messages it had finished (they come back as duplicates)."""
        return deliver_together([self], invoke, clock, run)

    def poll(
        self, invoke: Invoke, clock: Callable[[], datetime], run: Runner = one_after_another
    ) -> list[BatchResult]:
        """One poll: up to ``max_batches`` batches received and run (see :meth:`deliver`);
        nothing when the queue gives nothing now."""
        batches = self._receive_batches()
        if not batches:
            held = _moto_queue(self.session, self.queue_url)._messages
            self._idle = (clock(), frozenset(m.id for m in held))
            return []
        self._idle = None
        timeout = timedelta(seconds=self._timeout_s())
        invocations = run(
            [partial(self._invoke, invoke, clock, timeout, batch) for batch in batches]
        )
        return [self._settle(b, i) for b, i in zip(batches, invocations, strict=True)]

    def _invoke(
        self,
        invoke: Invoke,
        clock: Callable[[], datetime],
        timeout: timedelta,
        batch: list[dict[str, Any]],
    ) -> Invocation:
        started = clock()
        invocation = invoke(self.function, {"Records": batch})
        if clock() - started > timeout:
            return Invocation(
                ok=False,
                error_type="Sandbox.Timedout",
                error_message=f"Task timed out after {timeout.total_seconds():g} seconds",
            )
        return invocation

    @functools.cached_property
    def _lambda(self) -> Any:
        """One client for every poll (``vigil local up`` polls four times a second)."""
        return self.session.client("lambda")

    def _timeout_s(self) -> int:
        config = self._lambda.get_function_configuration(FunctionName=self.mapping["FunctionArn"])
        return int(config.get("Timeout", 3))

    def _receive_batches(self) -> list[list[dict[str, Any]]]:
        batches: list[list[dict[str, Any]]] = []
        while len(batches) < self.max_batches:
            batch = self._receive_batch()
            if not batch:
                break
            batches.append(batch)
        return batches

    def _receive_batch(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        while len(records) < self.batch_size:
            answer = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(RECEIVE_MAX, self.batch_size - len(records)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            messages = answer.get("Messages") or []
            if not messages:
                break
            records += [self._record(m) for m in messages]
        return records

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        """A ReceiveMessage message as Lambda's event carries it."""
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": dict(message.get("Attributes") or {}),
            "messageAttributes": {
                name: lambda_attribute(value)
                for name, value in (message.get("MessageAttributes") or {}).items()
            },
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.session.region_name,
        }

    def _settle(self, batch: list[dict[str, Any]], invocation: Invocation) -> BatchResult:
        """Delete what succeeded; what failed stays for its visibility timeout."""
        ids = tuple(r["messageId"] for r in batch)
        failed, reason = self._failures(ids, invocation)
        if reason is not None:
            failed = ids
        handles = [r["receiptHandle"] for r in batch if r["messageId"] not in failed]
        for start in range(0, len(handles), RECEIVE_MAX):
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": h}
                    for i, h in enumerate(handles[start : start + RECEIVE_MAX])
                ],
            )
        return BatchResult(self.function, self.queue_url, ids, invocation, failed, reason)

    def _failures(
        self, ids: tuple[str, ...], invocation: Invocation
    ) -> tuple[tuple[str, ...], str | None]:
        if not invocation.ok:
            return ids, f"{invocation.error_type}: {invocation.error_message}"
        if not self.reports_failures:
            return (), None
        return batch_item_failures(invocation.payload, ids)


def deliver_together(
    mappings: Sequence[QueueMapping],
    invoke: Invoke,
    clock: Callable[[], datetime],
    run: Runner = one_after_another,
) -> list[BatchResult]:
    """Poll ``mappings`` in turn, one poll each a round, until none gives anything more now.

    Lambda polls each mapping on its own: a function's priority level (its own queue and
    mapping) is not drained after the normal backlog but polled beside it. Taking turns is
    that, run one poll at a time: a message on any of them waits at most one poll of each of
    the others (``max_batches`` batches), never for the others' queues to empty."""
    results: list[BatchResult] = []
    active = list(mappings)
    for _ in range(MAX_POLLS):
        if not active:
            return results
        gave = []
        for mapping in active:
            polled = mapping.poll(invoke, clock, run)
            results += polled
            if polled:
                gave.append(mapping)
        active = gave
    names = sorted({m.function for m in active})
    raise RuntimeError(
        f"{', '.join(names)}: its queues still gave messages after {MAX_POLLS} polls"
    )


def by_function(mappings: Sequence[QueueMapping]) -> list[list[QueueMapping]]:
    """The mappings grouped by function (a task and its priority levels), in first-seen
    order: what :func:`deliver_together` delivers at once."""
    groups: dict[str, list[QueueMapping]] = {}
    for mapping in mappings:
        groups.setdefault(mapping.function, []).append(mapping)
    return list(groups.values())


def batch_item_failures(answer: Any, ids: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """The failed message ids of a partial batch response, or the whole batch and why when the
    response is malformed (AWS then retries the whole batch). No answer, or no failures, is
    success."""
    if answer is None or answer == {}:
        return (), None
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return tuple(ids), "the response is not JSON"
    if not isinstance(answer, dict):
        return tuple(ids), f"the response is a {type(answer).__name__}, not an object"
    items = answer.get("batchItemFailures")
    if items is None:
        return (), None
    if not isinstance(items, list):
        return tuple(ids), "batchItemFailures is not a list"
    failed: list[str] = []
    for item in items:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or not identifier or identifier not in ids:
            return tuple(ids), f"batchItemFailures names {identifier!r}, not a message of the batch"
        failed.append(identifier)
    return tuple(failed), None


def _receivable_at(message: Any) -> datetime:
    """When moto gives the message: past its visibility instant and its delay (milliseconds,
    one more so a float's rounding never leaves it a hair short)."""
    visible = float(message.visible_at) + MOTO_TICK.total_seconds() * 1000
    moment_ms = max(visible, float(message.delayed_until))
    return datetime.fromtimestamp(moment_ms / 1000, UTC) + MOTO_TICK
