"""Helpers for the tasks tests: a stack of tasks on moto, and an SQS event source played by hand.

The event source (:class:`EventSource`) does what Lambda's SQS mapping does, one batch at a time:
receive, invoke the handler with the records, delete what it did not report failed. Redelivery
(a visibility timeout, a Lambda timeout's whole batch) is replaying the same records, so no test
waits for moto's wall-clock visibility.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tests.helpers.clients import Delegating
from tests.helpers.jobs import throttled
from vigil.clock import ManualClock
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.settings import TaskSettings
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.sqs_event import sqs_records

PLAIN = "send-receipt"
ORDERED = "provision-tenant"


class Counting(Delegating):
    """Counts every request by operation (``update_item``, ``send_message``...) and keeps its
    arguments, so a test can say "one DynamoDB request" and see what was sent."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_") or name in ("meta", "exceptions"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return attribute(*args, **kwargs)

        return call

    @property
    def counts(self) -> Counter[str]:
        return Counter(name for name, _ in self.calls)

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]

    def reset(self) -> None:
        self.calls.clear()


class ThrottledFinish(Delegating):
    """A DynamoDB client whose finish writes (fenced by ``token``) are throttled ``times`` times
    (``times=None``: always), the rest passed through."""

    def __init__(self, client: Any, times: int | None) -> None:
        super().__init__(client)
        self.times = times
        self.refused = 0

    def update_item(self, **kwargs: Any) -> Any:
        finishing = "finished_at" in json.dumps(kwargs) or "duration_ms" in json.dumps(kwargs)
        if finishing and (self.times is None or self.refused < self.times):
            self.refused += 1
            raise throttled("UpdateItem")
        return self._client.update_item(**kwargs)


@dataclass
class Stack:
    """Two tasks on moto: ``send-receipt`` (standard queue) and ``provision-tenant`` (FIFO)."""

    dynamodb: Any
    sqs: Any
    events: Any
    scheduler: Any
    table: str
    catalog: Catalog
    clock: ManualClock
    urls: dict[str, str] = field(default_factory=dict)
    s3: Any = None
    results_bucket: str = ""
    """A bucket for results too big for a record (a handler uses it when its settings say so)."""

    def client(self, **clients: Any) -> TaskClient:
        return TaskClient(
            self.catalog,
            sqs=clients.get("sqs", self.sqs),
            dynamodb=clients.get("dynamodb", self.dynamodb),
            scheduler=clients.get("scheduler", self.scheduler),
            s3=clients.get("s3", self.s3),
            clock=self.clock,
            sleep=self.clock.advance,
        )

    def send_copy(self, task: str, payload: dict[str, Any], key: str) -> None:
        """Another message of ``key`` on the queue, as a second enqueue racing the first sends
        it (both read no record yet); an enqueue after the record exists sends nothing."""
        client = self.client()
        client.send(client.plan(task, payload, key=key))

    def settings(self, task: str = PLAIN, **overrides: Any) -> TaskSettings:
        spec = self.catalog.spec(task)
        values: dict[str, Any] = {
            "task": task,
            "table": spec.table,
            "queue_url": spec.queue_url,
            "dead_letter_url": spec.dead_letter_url,
            "ordered": spec.ordered,
            "retries": 2,
            "backoff": timedelta(seconds=10),
            "lease_margin": timedelta(seconds=30),
        }
        return TaskSettings(**(values | overrides))

    def messages(self, url: str, limit: int = 10, visibility: int = 0) -> list[dict[str, Any]]:
        """Visible messages, received as the event source would (left visible, unless given
        the ``visibility`` the event source receives with: the queue's visibility timeout)."""
        answer = self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=limit,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=visibility,
        )
        return list(answer.get("Messages", []))

    def queued(self, task: str = PLAIN) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.catalog.spec(task).queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesDelayed"]
        )

    def dead_letters(self, task: str = PLAIN) -> list[dict[str, Any]]:
        return self.messages(self.catalog.spec(task).dead_letter_url)

    def items(self) -> list[dict[str, Any]]:
        return list(self.dynamodb.scan(TableName=self.table).get("Items", []))


def records(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """SQS messages as the records of a Lambda event."""
    return sqs_records(messages)


def record_of(body: str, message_id: str = "m-1", group: str | None = None) -> dict[str, Any]:
    attributes = {"MessageGroupId": group} if group else {}
    message = {"MessageId": message_id, "ReceiptHandle": f"rh-{message_id}", "Body": body}
    return records([message | {"Attributes": attributes}])[0]


Handler = Callable[[Any, Any], dict[str, Any]]


def invoke(
    handler: Handler, batch: list[dict[str, Any]], remaining: Callable[[], int] = lambda: 60_000
) -> list[str]:
    """The ids of the messages the handler reported failed (SQS keeps those)."""
    answer = handler({"Records": batch}, LambdaContext(remaining_ms=remaining))
    return [failure["itemIdentifier"] for failure in answer["batchItemFailures"]]


def settle(stack: Stack, url: str, batch: list[dict[str, Any]], failed: list[str]) -> None:
    """Delete what the handler finished with, as the event source does."""
    for record in batch:
        if record["messageId"] not in failed:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])


def make_queue(sqs: Any, name: str, fifo: bool) -> str:
    attributes = {"FifoQueue": "true"} if fifo else {}
    suffix = ".fifo" if fifo else ""
    return str(sqs.create_queue(QueueName=name + suffix, Attributes=attributes)["QueueUrl"])


def build_stack(
    dynamodb: Any, sqs: Any, events: Any, scheduler: Any, clock: ManualClock, table: str
) -> Stack:
    specs = {}
    for name, fifo in ((PLAIN, False), (ORDERED, True)):
        specs[name] = TaskSpec(
            name=name,
            queue_url=make_queue(sqs, f"vigil-{name}", fifo),
            dead_letter_url=make_queue(sqs, f"vigil-{name}-dlq", fifo),
            table=table,
            ordered=fifo,
            retention=timedelta(days=7),
            scheduler_role_arn="arn:aws:iam::123456789012:role/vigil-tasks-scheduler",
            schedule_group="vigil-tasks",
            function=f"vigil-{name}",
        )
    return Stack(dynamodb, sqs, events, scheduler, table, Catalog(specs), clock)
