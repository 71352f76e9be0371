"""A task's rate limit (``BackgroundTask(rate_limit="100/minute")``), shared by every invocation.

Paced, not counted per window: one DynamoDB item per task (``RATE#<task>``, ``pace``) holds the
theoretical arrival time ``tat`` of the generic cell rate algorithm (a token bucket without a
timer). A start at ``now`` conforms when ``tat <= now + tau``; it moves ``tat`` one ``interval``
(``period / starts``) on. Both moves are single conditional updates, no read first::

    tat <= now + tau, tat >= now  ->  SET tat = tat + interval          (a backlog: 1 request)
    tat absent or tat < now       ->  SET tat = now + interval          (idle: a 2nd request)
    tat > now + tau               ->  reserve: SET tat = tat + interval, the old tat - tau is
                                      this message's slot; a reservation item (its message id)
                                      keeps it; the message comes back at its slot (no attempt)

A message back with a receive count over 1 first takes its reservation (one conditional update)
and starts without a new slot: so a backlog is deferred once per message, not over and over.
Starts in any window of ``period`` stay within ``starts + burst + grace/interval`` (``burst`` =
``tau / interval + 1``; ``grace``: how late a reserved message may come back and still use its
slot, a later one gives its slot up and takes a new one, so late messages never add starts),
sized to be at most 5 % over where the limit allows it (``100/minute``: 105) and otherwise two
starts over (``10/minute``: 12), except per-second limits, whose period is shorter than the
grace: up to three times the limit in a second (``10/second``: 31).

What it is not: a concurrency limit (``concurrency`` is), nor a promise of order; a duplicate
message takes a slot as any other (the limit errs on the slow side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.contract.tasks import RATE_PK_PREFIX, RateLimit
from vigil.dynamo import Update, from_wire, is_condition_failure, old_item
from vigil.dynamo import to_wire as wire

PACE = "pace"
"""The pacing item's sort key."""
RESERVED = "r#"
"""A reservation's sort key prefix, then the message id."""
OVER = 0.05
"""The most a window's starts may exceed the limit (when the limit is large enough to allow
any burst at all)."""
GRACE = timedelta(seconds=2)
"""How late a reserved message may come back and still take its slot: its wait is rounded up to
whole seconds (SQS's visibility), and Lambda's pollers pick a visible message up within about a
second more. Later, it gives its slot up and takes a new one."""
KEEP_RESERVATION = timedelta(days=1)
"""A reservation's expiry (TTL) after its slot: one never used is cleared."""


@dataclass(frozen=True)
class Admitted:
    """Start now."""

    reserved: bool = False
    """On a slot reserved when the message was deferred."""


@dataclass(frozen=True)
class Deferred:
    """Over the limit: the message comes back in ``seconds`` (no attempt spent)."""

    seconds: int
    slot: datetime
    why: str = ""
    """Why, when it is not the limit (the limiter throttled)."""


@dataclass(frozen=True)
class Pacing:
    """The numbers of the algorithm, from the limit alone."""

    interval_ms: int
    burst: int
    tau_ms: int
    grace_ms: int

    @classmethod
    def of(cls, limit: RateLimit) -> Pacing:
        interval = max(1, int(limit.period_s * 1000 / limit.starts))
        grace = int(GRACE.total_seconds() * 1000)
        # A window's starts are its slots, from ``grace`` before it to ``tau`` after it:
        # ``starts + burst + grace/interval``. The burst gets what the grace leaves of 5 %.
        burst = max(1, math.floor(OVER * limit.starts) - math.ceil(grace / interval))
        return cls(interval, burst, (burst - 1) * interval, grace)

    def bound(self, starts: int) -> int:
        """The most starts any window of the period can see."""
        return starts + self.burst + math.ceil(self.grace_ms / self.interval_ms)


class RateLimiter:
    """One task's limiter on the tasks table (``RATE#<task>``)."""

    def __init__(
        self, client: Any, table: str, task: str, limit: RateLimit, max_wait: timedelta
    ) -> None:
        self._client = client
        self._table = table
        self.task = task
        self.limit = limit
        self.pacing = Pacing.of(limit)
        self._max_wait_s = int(max_wait.total_seconds())
        self._idle_first = False
        """Whether the last start here found the limiter idle: try that move first."""

    def admit(self, message_id: str, receive_count: int, now: datetime) -> Admitted | Deferred:
        """Whether the message may start at ``now``; each request is one conditional write."""
        now_ms = _ms(now)
        if receive_count > 1:
            reservation = self._take_reservation(message_id, now_ms)
            if reservation is not None:
                return reservation
        for _ in range(4):
            seen = self._conform(now_ms)
            if seen is None:
                return Admitted()
            if int(seen.get("tat", 0)) > now_ms + self.pacing.tau_ms:
                reserved = self._reserve(message_id, now_ms)
                if reserved is not None:
                    return reserved
        # The pace kept moving under every move: others are starting; come back in a moment.
        return Deferred(1, _at(now_ms + 1000))

    # The moves --------------------------------------------------------------------------------

    def _conform(self, now_ms: int) -> dict[str, Any] | None:
        """Take a slot now if one conforms: None if taken, else the pacing item as seen."""
        moves = (self._idle, self._backlog) if self._idle_first else (self._backlog, self._idle)
        seen: dict[str, Any] = {}
        for move in moves:
            update = move(now_ms)
            try:
                self._update(PACE, update, ReturnValuesOnConditionCheckFailure="ALL_OLD")
            except ClientError as error:
                if not is_condition_failure(error):
                    raise
                seen = old_item(error) or {}
                if int(seen.get("tat", 0)) > now_ms + self.pacing.tau_ms:
                    return seen  # over: no other move can conform
                continue
            self._idle_first = move == self._idle
            return None
        return seen

    def _backlog(self, now_ms: int) -> Update:
        update = Update().increment("tat", self.pacing.interval_ms)
        update.condition(
            at_least(update, "tat", now_ms), update.le("tat", now_ms + self.pacing.tau_ms)
        )
        return update

    def _idle(self, now_ms: int) -> Update:
        update = Update().set("tat", now_ms + self.pacing.interval_ms)
        update.condition(any_absent_or_lt(update, "tat", now_ms))
        return update

    def _reserve(self, message_id: str, now_ms: int) -> Deferred | None:
        """Move ``tat`` on by one slot for this message (the slot is the old tat - tau) and keep
        it on a reservation; the message comes back then."""
        update = Update().increment("tat", self.pacing.interval_ms)
        update.condition(at_least(update, "tat", now_ms + self.pacing.tau_ms + 1))
        try:
            answer = self._update(PACE, update, ReturnValues="UPDATED_OLD")
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            return None  # it conforms by now (slots went unused): the ordinary way, again
        old = int((from_wire(answer.get("Attributes")) or {}).get("tat", now_ms))
        slot_ms = old - self.pacing.tau_ms
        keep = Update().set_all(
            {
                "slot": slot_ms,
                "expires_at": (slot_ms + int(KEEP_RESERVATION.total_seconds() * 1000)) // 1000,
            }
        )
        self._update(RESERVED + message_id, keep)
        return self._wait(slot_ms, now_ms)

    def _take_reservation(self, message_id: str, now_ms: int) -> Admitted | Deferred | None:
        """A slot this message reserved: start on it (once), wait for it, or None if it has
        none (or came back too late for it: then it takes a new slot, never an extra start)."""
        update = Update().set("used", now_ms)
        update.condition(
            update.exists("slot"),
            update.absent("used"),
            update.le("slot", now_ms),
            at_least(update, "slot", now_ms - self.pacing.grace_ms),
        )
        try:
            self._update(
                RESERVED + message_id, update, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            seen = old_item(error) or {}
            if "slot" in seen and "used" not in seen and int(seen["slot"]) > now_ms:
                return self._wait(int(seen["slot"]), now_ms)  # back early (clock skew)
            return None
        return Admitted(reserved=True)

    def _wait(self, slot_ms: int, now_ms: int) -> Deferred:
        seconds = max(1, math.ceil((slot_ms - now_ms) / 1000))
        return Deferred(min(seconds, self._max_wait_s), _at(slot_ms))

    def _update(self, sort_key: str, update: Update, **extra: Any) -> dict[str, Any]:
        return dict(
            self._client.update_item(
                TableName=self._table,
                Key=wire({"pk": f"{RATE_PK_PREFIX}{self.task}", "sk": sort_key}),
                **extra,
                **update.request(),
            )
        )


def any_absent_or_lt(update: Update, attribute: str, value: int) -> str:
    return f"({update.absent(attribute)} OR {update.lt(attribute, value)})"


def at_least(update: Update, attribute: str, value: int) -> str:
    """``attribute >= value`` (false where the attribute is absent)."""
    return f"{update.name(attribute)} >= {update.value(value)}"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
