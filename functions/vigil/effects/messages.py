"""``run.fenced.sqs`` / ``run.fenced.events``: sends a repeat of the same effect cannot double.

A send names its effect (``effect="welcome-email"``). On a FIFO queue its deduplication id is a
digest of the run's unit of once (a job's tick, a task, an observer) and that name, so a takeover
or a redelivery that sends it again within SQS's 5-minute window is dropped by the queue. Every
send (FIFO or standard, and every event) also carries the run, the effect and the fence, for a
consumer of a standard queue or a bus to deduplicate on. One request per send, as without them.

So one name is one message: a run that sends a second, different message to the same destination
under a name it already sent (``effect="welcome-email"`` in a loop over users) would have it
dropped as a repeat, silently; it is refused instead (:class:`SentEffects`), before any request.
The same message again is a repeat, sent (and deduplicated downstream).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from vigil.contract.effects import EVENT_DETAIL_KEY, MessageAttribute
from vigil.effects.fence import GrantedWriter, RunFence
from vigil.fenced_write import Halt

MAX_MESSAGE_ATTRIBUTES = 10
"""What SQS takes on one message; a fenced send uses 3 of them for the run's identity."""


REMEMBERED = 10_000
"""Sends one run's :class:`SentEffects` remembers (about 2 MB at most)."""


def deduplication_id(fence: RunFence, effect: str) -> str:
    """A FIFO deduplication id (at most 128 characters) for this effect of this run's unit."""
    return hashlib.sha256(f"{fence.unit}|{effect}".encode()).hexdigest()


class SentEffects:
    """What one run has sent, per destination and effect name: a digest of the message.

    At most :data:`REMEMBERED` sends, the oldest forgotten first: an observer's run lasts as long
    as its generation, and one naming each occurrence (``f"alert:{incident}"``) must not grow
    without end; a name repeated after that many others is the rare case left unchecked."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], str] = {}

    def check(self, destination: str, effect: str, message: object) -> Callable[[], None]:
        """Refuse ``message`` if this run sent another under ``effect`` to ``destination``;
        else what records it, once it was accepted."""
        key = (destination, effect)
        digest = hashlib.sha256(json.dumps(message, sort_keys=True, default=str).encode())
        seen = digest.hexdigest()
        if self._sent.get(key, seen) != seen:
            raise ValueError(
                f"effect {effect!r} was already sent by this run to {destination} with another "
                "message, which would be dropped as its repeat: name each message's effect "
                "(effect=f'welcome-email:{user}')"
            )
        return lambda: self._remember(key, seen)

    def _remember(self, key: tuple[str, str], seen: str) -> None:
        self._sent.pop(key, None)
        self._sent[key] = seen
        if len(self._sent) > REMEMBERED:
            del self._sent[next(iter(self._sent))]


def _effect_name(effect: str) -> str:
    if not isinstance(effect, str) or not effect.strip():
        raise ValueError("a fenced send needs effect='<name>': the name is what makes it once")
    return effect


class _Sender(GrantedWriter):
    """A writer of sends: it also holds the run's :class:`SentEffects`, shared by its queues'
    and buses' writers."""

    def __init__(
        self,
        client: Any,
        resolve: Callable[[str], str],
        fence: RunFence,
        halt: Halt,
        sent: SentEffects,
        check_claim: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(client, resolve, fence, halt, check_claim)
        self._sent = sent


class FencedQueues(_Sender):
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
        room = MAX_MESSAGE_ATTRIBUTES - len(MessageAttribute)
        if len(attributes) > room:
            raise ValueError(
                f"{len(attributes)} message attributes: at most {room} of the author's, beside "
                f"the run's {len(MessageAttribute)} (SQS takes {MAX_MESSAGE_ATTRIBUTES})"
            )
        accepted = self._sent.check(url, name, [MessageBody, attributes, request])
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
        self._check_claim()
        answer = dict(
            self._client.send_message(
                QueueUrl=url, MessageBody=MessageBody, MessageAttributes=attributes, **request
            )
        )
        accepted()
        return answer


class FencedEvents(_Sender):
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
        accepted = self._sent.check(bus, effect, [Source, DetailType, Detail, entry])
        detail = {**Detail, EVENT_DETAIL_KEY: {**identity, "fence": self._fence.value}}
        self._check_claim()
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
        accepted()
        return dict(answer)


def _text(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}
