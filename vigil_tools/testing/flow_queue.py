"""A flow's queue played by hand on a manual clock (tests, the flows benchmark): delays, visibility changes and one-time
schedules are due times, not wall-clock waits, so a three-day sleep passes in one ``advance``.

:class:`FlowQueue` stands in for one task queue's SQS and for Scheduler (every other queue, the
dead-letter queue too, goes to moto): ``send_message`` (with ``DelaySeconds``) and a schedule's
``create_schedule`` put a message due later; ``change_message_visibility`` moves a delivered
message's due time; ``deliver`` hands the handler every due message, one batch, as the event
source would, and deletes what it did not report failed. A handler that dies (a BaseException
out of it) leaves its batch in flight until the visibility timeout.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import ManualClock
from vigil_tools.lambda_context import LambdaContext
from vigil_tools.sqs_event import sqs_records

VISIBILITY = timedelta(minutes=15)


class Delegating:
    """A client with some calls replaced; every other attribute is the client's."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass
class Held:
    id: str
    body: str
    due: datetime
    receives: int = 0


class FlowQueue(Delegating):
    def __init__(self, sqs: Any, scheduler: Any, url: str, clock: ManualClock) -> None:
        super().__init__(sqs)
        self.url = url
        self.clock = clock
        self.held: dict[str, Held] = {}
        self.schedules: dict[str, Held] = {}
        self.sent_delays: list[int] = []
        self.invocations = 0
        self._ids = itertools.count(1)
        self.scheduler = _Scheduler(scheduler, self)

    # SQS ----------------------------------------------------------------------------------------

    def send_message(self, **request: Any) -> dict[str, Any]:
        if request["QueueUrl"] != self.url:
            return dict(self._client.send_message(**request))
        delay = int(request.get("DelaySeconds", 0))
        self.sent_delays.append(delay)
        message = Held(
            f"m-{next(self._ids)}", request["MessageBody"], self.clock() + timedelta(seconds=delay)
        )
        self.held[message.id] = message
        return {"MessageId": message.id}

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        if request["QueueUrl"] != self.url:
            return dict(self._client.send_message_batch(**request))
        successful = []
        for entry in request["Entries"]:
            answer = self.send_message(
                QueueUrl=self.url,
                MessageBody=entry["MessageBody"],
                DelaySeconds=entry.get("DelaySeconds", 0),
            )
            successful.append({"Id": entry["Id"], "MessageId": answer["MessageId"]})
        return {"Successful": successful, "Failed": []}

    def change_message_visibility(self, **request: Any) -> dict[str, Any]:
        held = self.held.get(str(request["ReceiptHandle"]).removeprefix("rh-"))
        if held is not None:
            held.due = self.clock() + timedelta(seconds=int(request["VisibilityTimeout"]))
        return {}

    # Driving ------------------------------------------------------------------------------------

    def due(self) -> list[Held]:
        self._fire_schedules()
        now = self.clock()
        return sorted((m for m in self.held.values() if m.due <= now), key=lambda m: m.due)

    def deliver(self, handler: Any, remaining_ms: int = 600_000) -> list[str]:
        """One batch of every due message; the ids reported failed (kept, in flight)."""
        batch = self.due()
        if not batch:
            return []
        for message in batch:
            message.receives += 1
            message.due = self.clock() + VISIBILITY
        records = sqs_records(
            {
                "MessageId": m.id,
                "ReceiptHandle": f"rh-{m.id}",
                "Body": m.body,
                "Attributes": {"ApproximateReceiveCount": str(m.receives)},
            }
            for m in batch
        )
        self.invocations += 1
        answer = handler({"Records": records}, LambdaContext(remaining_ms=lambda: remaining_ms))
        failed = [f["itemIdentifier"] for f in answer["batchItemFailures"]]
        for message in batch:
            if message.id not in failed:
                del self.held[message.id]
        return failed

    def run(self, handler: Any, *, until: datetime | None = None, rounds: int = 50) -> int:
        """Deliver due messages, stepping the clock to the next due time up to ``until`` (now if
        None); the number of invocations."""
        start = self.invocations
        limit = until or self.clock()
        for _ in range(rounds):
            self.deliver(handler)
            upcoming = [m.due for m in self.held.values()] + [
                m.due for m in self.schedules.values()
            ]
            nexts = [due for due in upcoming if due <= limit]
            if not nexts:
                break
            self.clock.set(max(self.clock(), min(nexts)))
        if until is not None and self.clock() < until:
            self.clock.set(until)
        return self.invocations - start

    def _fire_schedules(self) -> None:
        now = self.clock()
        for name, schedule in list(self.schedules.items()):
            if schedule.due <= now:
                del self.schedules[name]
                self.held[schedule.id] = Held(schedule.id, schedule.body, schedule.due)


class _Scheduler(Delegating):
    """Scheduler's one-time schedules into the flow queue, due at their ``at(...)``."""

    def __init__(self, client: Any, queue: FlowQueue) -> None:
        super().__init__(client)
        self._queue = queue

    def create_schedule(self, **request: Any) -> dict[str, Any]:
        name = request["Name"]
        if name in self._queue.schedules:
            raise ClientError(
                {"Error": {"Code": "ConflictException", "Message": "exists"}}, "CreateSchedule"
            )
        moment = re.fullmatch(r"at\((.+)\)", request["ScheduleExpression"])
        assert moment is not None
        due = datetime.fromisoformat(moment.group(1) + "+00:00")
        self._queue.schedules[name] = Held(f"s-{name}", request["Target"]["Input"], due)
        return {"ScheduleArn": f"arn:aws:scheduler:::schedule/{name}"}

    def delete_schedule(self, **request: Any) -> dict[str, Any]:
        if self._queue.schedules.pop(request["Name"], None) is None:
            raise ClientError(
                {"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "DeleteSchedule"
            )
        return {}
