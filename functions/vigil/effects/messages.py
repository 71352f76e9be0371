"""``run.fenced.sqs`` / ``run.fenced.events``: sends a repeat of the same effect cannot double.

A send names its effect (``effect="welcome-email"``). On a FIFO queue its deduplication id is a
digest of the run's unit of once (a job's tick, a task, an observer) and that name, so a takeover
or a redelivery that sends it again within SQS's 5-minute window is dropped by the queue. Every
send (FIFO or standard, and every event) also carries the run, the effect and the fence, for a
consumer of a standard queue or a bus to deduplicate on. One request per send, as without them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from vigil.contract.effects import EVENT_DETAIL_KEY, MessageAttribute
from vigil.effects.fence import GrantedWriter, RunFence


def deduplication_id(fence: RunFence, effect: str) -> str:
    """A FIFO deduplication id (at most 128 characters) for this effect of this run's unit."""
    return hashlib.sha256(f"{fence.unit}|{effect}".encode()).hexdigest()


def _effect_name(effect: str) -> str:
    if not isinstance(effect, str) or not effect.strip():
        raise ValueError("a fenced send needs effect='<name>': the name is what makes it once")
    return effect


class FencedQueues(GrantedWriter):
    """``send_message`` on granted queues (by alias, name or URL)."""

    def send_message(
        self,
        *,
        QueueUrl: str,
        MessageBody: str,
        effect: str,
        **request: Any,
    ) -> dict[str, Any]:
        url = self._resolve(QueueUrl)
        name = _effect_name(effect)
        attributes = dict(request.pop("MessageAttributes", None) or {})
        attributes.update(
            {
                MessageAttribute.RUN.value: _text(self._fence.unit),
                MessageAttribute.EFFECT.value: _text(name),
                MessageAttribute.FENCE.value: _text(self._fence.value),
            }
        )
        if url.endswith(".fifo"):
            request.setdefault("MessageGroupId", deduplication_id(self._fence, "")[:64])
            request["MessageDeduplicationId"] = deduplication_id(self._fence, name)
        return dict(
            self._client.send_message(
                QueueUrl=url, MessageBody=MessageBody, MessageAttributes=attributes, **request
            )
        )


class FencedEvents(GrantedWriter):
    """``put_event``: one event on a granted bus, the run's identity in its detail."""

    def put_event(
        self,
        *,
        Source: str,
        DetailType: str,
        Detail: dict[str, Any],
        effect: str,
        EventBusName: str = "default",
        **entry: Any,
    ) -> dict[str, Any]:
        bus = self._resolve(EventBusName)
        identity = {"run": self._fence.unit, "effect": _effect_name(effect)}
        detail = {**Detail, EVENT_DETAIL_KEY: {**identity, "fence": self._fence.value}}
        answer = self._client.put_events(
            Entries=[
                {
                    "Source": Source,
                    "DetailType": DetailType,
                    "Detail": json.dumps(detail),
                    "EventBusName": bus,
                    **entry,
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            failed = answer["Entries"][0]
            raise RuntimeError(
                f"event {effect!r} to {bus} not accepted: {failed.get('ErrorCode')} "
                f"{failed.get('ErrorMessage')}"
            )
        return dict(answer)


def _text(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}
