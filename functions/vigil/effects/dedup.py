"""The consumer's side of ``run.fenced`` sends: handle each effect of a run once.

A send cannot be refused by its destination the way a conditional write is: a superseded run's
send goes out (unless ``run.fenced.strict`` read its claim first, and even then not in the
instant after the read), a takeover sends its effects again, and a standard queue or a bus may
deliver one message twice. A FIFO queue drops a repeat for 5 minutes only. What every fenced
send carries lets the consumer do the rest: the run's unit of once (a job's tick, a task, an
observer), the effect's name and the sender's fence, as the message attributes ``vigil-run``,
``vigil-effect`` and ``vigil-fence`` (SQS) or under ``detail.vigil`` (EventBridge).

::

    dedup = Deduplicator(boto3.client("dynamodb"), "Processed")

    def handler(event, context):                 # a Lambda consuming a standard queue
        for record in event["Records"]:
            sent = Sent.of(record)               # None: not sent through run.fenced
            if sent is not None and not dedup.first(sent):
                continue                         # that run's effect was handled already
            try:
                deliver(record["body"])
            except Exception:
                if sent is not None:
                    dedup.forget(sent)           # its redelivery may try again
                raise

:meth:`Deduplicator.first` is one conditional ``PutItem`` on a table of the consumer's
(partition key ``pk``, a string; TTL on ``expires_at``): True for the first copy of a run's
effect, False for every later one, whichever run sent it. First come, first handled: a
superseded run's copy that arrives first is the one handled (its successor's repeat is
dropped), so what a consumer must not take from a superseded run it checks with the fence.
The record is written before the work: a consumer that dies between the two loses that one
effect (``forget`` on a caught failure lets its redelivery in); record after the work instead
where doing it twice is the lesser harm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, iso, system_clock
from vigil.contract.effects import EVENT_DETAIL_KEY, MessageAttribute
from vigil.dynamo import is_condition_failure, to_wire

KEY = "pk"
"""The consumer's table's partition key (a string): ``<run>|<effect>``."""
EXPIRES = "expires_at"
"""The epoch second after which DynamoDB's TTL may delete a record (enable TTL on it)."""
KEEP = timedelta(days=7)
"""How long a record is kept by default: longer than any redelivery or takeover comes."""


class NotASend(ValueError):
    """A message or event that carries some of a fenced send's identity but not all of it (or
    not as text): malformed, not something to deliver or drop silently."""


@dataclass(frozen=True)
class Sent:
    """Who sent a message: the run's unit of once, the effect's name, the sender's fence."""

    run: str
    effect: str
    fence: str

    @property
    def key(self) -> str:
        """One effect of one unit of once: what every copy of it shares, whichever run sent it."""
        return f"{self.run}|{self.effect}"

    @classmethod
    def of(cls, delivered: Mapping[str, Any]) -> Sent | None:
        """From a Lambda SQS record, a ``ReceiveMessage`` message or an EventBridge event; None
        when it carries none of a fenced send's identity."""
        if not isinstance(delivered, Mapping):
            raise NotASend(f"not a message or an event: {type(delivered).__name__}")
        if "detail" in delivered and "detail-type" in delivered:
            return cls._of_event(delivered)
        if "messageAttributes" in delivered:  # Lambda's SQS record
            return cls._of_attributes(delivered["messageAttributes"], "stringValue")
        return cls._of_attributes(delivered.get("MessageAttributes") or {}, "StringValue")

    @classmethod
    def _of_attributes(cls, attributes: Any, value: str) -> Sent | None:
        names = [a.value for a in MessageAttribute]
        if not isinstance(attributes, Mapping):
            raise NotASend("message attributes are not a map")
        found = {n: _text_of(attributes[n], value) for n in names if n in attributes}
        return cls._complete(found, names, "message attribute")

    @classmethod
    def _of_event(cls, event: Mapping[str, Any]) -> Sent | None:
        detail = event.get("detail")
        identity = detail.get(EVENT_DETAIL_KEY) if isinstance(detail, Mapping) else None
        if identity is None:
            return None
        if not isinstance(identity, Mapping):
            raise NotASend(f"detail.{EVENT_DETAIL_KEY} is not an object")
        found = {f"vigil-{k}": identity.get(k) for k in ("run", "effect", "fence") if k in identity}
        return cls._complete(found, ["vigil-run", "vigil-effect", "vigil-fence"], "detail field")

    @classmethod
    def _complete(cls, found: dict[str, Any], names: list[str], what: str) -> Sent | None:
        if not found:
            return None
        bad = [n for n in names if not isinstance(found.get(n), str) or not found[n]]
        if bad:
            raise NotASend(f"a fenced send's {what}s {bad} are missing or not text: malformed")
        return cls(found[names[0]], found[names[1]], found[names[2]])


def _text_of(attribute: Any, value: str) -> Any:
    """An SQS attribute's text (``value``: ``StringValue`` or Lambda's ``stringValue``); None
    when it is not an attribute's map, which :meth:`Sent._complete` refuses as not text."""
    return attribute.get(value) if isinstance(attribute, Mapping) else None


class Deduplicator:
    """Records, in a table of the consumer's, which run's effects it has handled."""

    def __init__(
        self, client: Any, table: str, *, keep: timedelta = KEEP, clock: Clock = system_clock
    ) -> None:
        if keep <= timedelta(0):
            raise ValueError(f"keep must be positive, got {keep}")
        self._client = client
        self._table = table
        self._keep = keep
        self._clock = clock

    def first(self, sent: Sent) -> bool:
        """True if no copy of ``sent``'s effect was recorded before (now it is): handle it.
        False: a repeat (a takeover's resend, a redelivery, another copy): drop it."""
        now = self._clock()
        item = {
            KEY: sent.key,
            "fence": sent.fence,
            "at": iso(now),
            EXPIRES: int((now + self._keep).timestamp()),
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_wire(item),
                ConditionExpression="attribute_not_exists(#k)",
                ExpressionAttributeNames={"#k": KEY},
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True

    def forget(self, sent: Sent) -> None:
        """Undo :meth:`first` for this very copy (its fence), so a redelivery is handled: for a
        consumer whose work failed after ``first``. Another copy's record is left as it is."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=to_wire({KEY: sent.key}),
                ConditionExpression="#f = :f",
                ExpressionAttributeNames={"#f": "fence"},
                ExpressionAttributeValues=to_wire({":f": sent.fence}),
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise


__all__ = ["EXPIRES", "KEY", "Deduplicator", "NotASend", "Sent"]
