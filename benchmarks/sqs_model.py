"""A standard SQS queue modelled in memory, for a backlog moto cannot play at size.

moto 5.2.1's ReceiveMessage scans every message of the queue and, for each message it hands
out, recomputes the queue's attributes (another scan: ``is_message_valid_based_on_retention_period``
calls ``get_queue_attributes``); DeleteMessage scans it twice more. Draining a backlog of n is
O(n²) requests' worth of Python: at 10,000 more than 15 CPU-minutes.

:class:`StandardQueue` keeps what the drain depends on and nothing else, each request O(its
messages):

* messages are handed out in sent order, oldest visible first (as moto hands them out; real
  standard queues only approximate it, from a sample of their servers);
* a received message is in flight until deleted; it never becomes visible again (the benchmark's
  batches end long before their visibility timeout, and none fails);
* no delay, no FIFO groups, no redrive, no retention expiry (the benchmark uses none).

:class:`Routed` is a client that sends one queue's requests to the model and every other
request to the real (moto) client, so the code under measurement calls SQS exactly as it
would: ``TaskClient.enqueue`` picks the queue, only the queue is modelled.
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from typing import Any


class StandardQueue:
    """One standard queue: the visible messages in sent order, and those in flight."""

    def __init__(self) -> None:
        self._visible: deque[tuple[str, str]] = deque()
        """(message id, body), oldest first."""
        self._in_flight: dict[str, tuple[str, str]] = {}
        """By receipt handle."""
        self._handles = itertools.count()

    def __len__(self) -> int:
        return len(self._visible)

    def send_message(self, *, QueueUrl: str, MessageBody: str, **rest: Any) -> dict[str, Any]:
        _refuse(rest, "DelaySeconds", "MessageGroupId")
        message_id = str(uuid.uuid4())
        self._visible.append((message_id, MessageBody))
        return {"MessageId": message_id}

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        successful = []
        for entry in Entries:
            _refuse(entry, "DelaySeconds", "MessageGroupId")
            sent = self.send_message(QueueUrl=QueueUrl, MessageBody=entry["MessageBody"])
            successful.append({"Id": entry["Id"], "MessageId": sent["MessageId"]})
        return {"Successful": successful, "Failed": []}

    def receive_message(
        self, *, QueueUrl: str, MaxNumberOfMessages: int = 1, **_: Any
    ) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        while self._visible and len(messages) < MaxNumberOfMessages:
            message_id, body = self._visible.popleft()
            handle = f"{message_id}#{next(self._handles)}"
            self._in_flight[handle] = (message_id, body)
            messages.append({"MessageId": message_id, "ReceiptHandle": handle, "Body": body})
        return {"Messages": messages} if messages else {}

    def delete_message_batch(
        self, *, QueueUrl: str, Entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        for entry in Entries:
            del self._in_flight[entry["ReceiptHandle"]]  # an unknown handle is a bug here
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


class Routed:
    """An SQS client whose requests for ``url`` go to ``model``, the rest to ``real``."""

    def __init__(self, real: Any, url: str, model: StandardQueue) -> None:
        self._real, self._url, self._model = real, url, model

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._real, name)
        modelled = getattr(self._model, name, None)
        if modelled is None or not callable(real):
            return real

        def call(**request: Any) -> Any:
            target = modelled if request.get("QueueUrl") == self._url else real
            return target(**request)

        return call


def _refuse(request: dict[str, Any], *names: str) -> None:
    """The model has no delays and no groups: a request using them is outside what it models."""
    used = [name for name in names if request.get(name)]
    if used:
        raise NotImplementedError(f"the queue model does not model {', '.join(used)}")
