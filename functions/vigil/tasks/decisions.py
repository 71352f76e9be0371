"""What a task delivery does next: pure functions of what it saw, returning frozen decisions.

The guard (``guard.py``) makes the requests; these decide from their answers alone, so every
branch is tested without AWS:

* a refused claim (:func:`resolve_claim`): the record is final -> DUPLICATE (CANCELLED: not run;
  FAILED is final except to an operator's redrive not yet spent on it: a redrive runs once);
  RUNNING under a live lease -> BUSY, the message comes back when the lease has run out; otherwise
  the state moved (a token ahead of our clock) -> RETRY above what was seen;
* a copy of the key during a retry's backoff -> DUPLICATE: the retry's own message runs it then;
* a flow SLEEPING or WAITING not yet due -> its wake-up is on the way: a message due within
  SQS's 15-minute delay comes back then (BUSY: it may be the wake-up, early by clock skew), an
  earlier one is a DUPLICATE (the schedule sends the wake-up);
* a body that raised (:func:`after_failure`): retry after ``backoff * 2**(attempt-1)`` (capped at
  ``MAX_BACKOFF``, just under SQS's 12 hours), or, out of retries, FAILED and the dead-letter queue;
* a claim past the retries (:func:`crashed_out`): earlier attempts died without an outcome ->
  FAILED ``RunCrashed`` without running it again;
* a batch near its deadline (:func:`may_claim`): claim nothing more, so no run starts that the
  invocation cannot finish and record;
* a body's return value (:func:`encode_result`): JSON within ``MAX_RESULT_BYTES``, or a refusal
  that fails the run plainly (retrying would not shrink it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from vigil.clock import iso
from vigil.contract.flows import WAITING_FOR_ATTRIBUTE, WAKE_AT_ATTRIBUTE
from vigil.contract.journal import UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.contract.tasks import (
    CANCEL_REQUESTED_ATTRIBUTE,
    MAX_QUEUE_DELAY_S,
    MAX_RESULT_BYTES,
    REDRIVES_ATTRIBUTE,
    REQUEST_ATTRIBUTE,
    SUSPENDED_STATUSES,
    TaskStatus,
)
from vigil.dynamo import Item
from vigil.tasks.errors import Reject
from vigil.tasks.settings import MAX_BACKOFF

UNSETTLED_COME_BACK_S = 300
"""A redriven message of a task still UNCERTAIN comes back after this long (then, out of
receives, to the dead-letter queue again)."""


class Verdict(StrEnum):
    DUPLICATE = "DUPLICATE"
    """The task is final: the message is deleted, nothing runs."""
    CANCELLED = "CANCELLED"
    """Cancelled before it started: the message is deleted, nothing runs."""
    BUSY = "BUSY"
    """Another delivery runs it under a live lease: the message comes back when that ends."""
    RETRY = "RETRY"
    """The record moved under the claim: claim again with what was seen."""
    END_CANCELLED = "END_CANCELLED"
    """Cancelled while it ran, and its run died without an outcome (the lease ran out): end it
    CANCELLED under the dead run's token; nothing runs."""
    OWN = "OWN"
    """The record is this very claim, written by an earlier try whose answer was lost (a
    timeout after DynamoDB applied it; botocore sent it again): it is claimed, run it."""


@dataclass(frozen=True)
class ClaimDecision:
    verdict: Verdict
    reason: str
    token_floor: int = 0
    come_back_in_s: int = 0
    """BUSY: the message's new visibility, the rest of the holder's lease (at least 1 s)."""


def resolve_claim(
    seen: Item | None,
    *,
    now: datetime,
    token: int,
    redrive: str | None = None,
    message_id: str = "",
    holder: str = "",
    request: str | None = None,
    wake: str | None = None,
) -> ClaimDecision:
    """A claim refused with ``seen`` (ALL_OLD) under ``token`` at ``now``; a message of a
    ``redrive`` operation not yet spent on the record may take a FAILED record (or a waiting
    retry), so its refusal there can only be the token, as can that of ``message_id`` when it is
    the message holding the retry; once spent, the operation's messages are as any other.
    ``holder`` names this delivery (invocation and message): a RUNNING record under this token
    and holder is this claim's own earlier try. ``request``: the message's request digest; a
    record of another request under the key is that request's task, never this message's."""
    if seen is None:
        return ClaimDecision(Verdict.RETRY, "the record vanished under the claim")
    if request and seen.get(REQUEST_ATTRIBUTE) not in (None, request):
        return ClaimDecision(
            Verdict.DUPLICATE, "another request's message under this key: the key's task is not it"
        )
    status = TaskStatus(seen["status"])
    unspent_redrive = bool(redrive) and redrive not in (seen.get(REDRIVES_ATTRIBUTE) or set())
    if (
        status is TaskStatus.RUNNING
        and holder
        and seen.get("holder") == holder
        and int(seen.get("token", -1)) == token
    ):
        return ClaimDecision(Verdict.OWN, "this claim's earlier try landed; its answer was lost")
    if status is TaskStatus.CANCELLED:
        return ClaimDecision(Verdict.CANCELLED, "cancelled before it started: not run")
    if status is TaskStatus.UNCERTAIN:
        why = f"UNCERTAIN on effect {seen.get(UNCERTAIN_EFFECT_ATTRIBUTE)!r}: settle it"
        if unspent_redrive:
            # Its dead letter, redriven before the settlement: kept (it comes back, and in the
            # end returns to the dead-letter queue), so a redrive after settling still runs it.
            return ClaimDecision(Verdict.BUSY, why, come_back_in_s=UNSETTLED_COME_BACK_S)
        return ClaimDecision(Verdict.DUPLICATE, why)
    if status is TaskStatus.FAILED and redrive and not unspent_redrive:
        return ClaimDecision(Verdict.DUPLICATE, f"already FAILED: redrive {redrive} ran it already")
    if status in (TaskStatus.SUCCEEDED, TaskStatus.COMPENSATED) or (
        status is TaskStatus.FAILED and not unspent_redrive
    ):
        return ClaimDecision(Verdict.DUPLICATE, f"already {status.value}")
    if (
        status is TaskStatus.QUEUED
        and not unspent_redrive
        and seen.get("retry_message") != message_id
        and str(seen.get("retry_at", "")) > iso(now)
    ):
        # Another copy of the key (enqueued again) during a retry's backoff: the retry's own
        # message comes back when the backoff ends and runs it; this one would run it early.
        return ClaimDecision(
            Verdict.DUPLICATE, f"a retry waits until {seen['retry_at']}: its own message runs it"
        )
    if status in SUSPENDED_STATUSES:
        woken = wake is not None and wake == seen.get(WAITING_FOR_ATTRIBUTE)
        due = datetime.fromisoformat(str(seen.get(WAKE_AT_ATTRIBUTE) or iso(now)))
        if not woken and due > now:
            wait = max(1, math.ceil((due - now).total_seconds()))
            why = f"{status.value} until {iso(due)}: its wake-up is on the way"
            if wait <= MAX_QUEUE_DELAY_S:
                return ClaimDecision(Verdict.BUSY, why, come_back_in_s=wait)
            return ClaimDecision(Verdict.DUPLICATE, why)
    if status is TaskStatus.RUNNING:
        until = datetime.fromisoformat(str(seen["lease_until"]))
        if until < now and seen.get(CANCEL_REQUESTED_ATTRIBUTE):
            return ClaimDecision(
                Verdict.END_CANCELLED,
                f"cancelled at {seen[CANCEL_REQUESTED_ATTRIBUTE]} while it ran, and that run "
                "ended without an outcome: not run again",
            )
        if until >= now:
            wait = max(1, math.ceil((until - now).total_seconds()))
            return ClaimDecision(
                Verdict.BUSY,
                f"running under token {seen.get('token')} until {seen['lease_until']}",
                come_back_in_s=min(wait, int(MAX_BACKOFF.total_seconds())),
            )
    seen_token = int(seen.get("token", 0))
    return ClaimDecision(
        Verdict.RETRY,
        f"token {seen_token} is ahead of {token}: claiming above it",
        token_floor=max(seen_token, token),
    )


@dataclass(frozen=True)
class AfterFailure:
    retry: bool
    delay_s: int = 0
    """Retry: the message's visibility, so SQS hands it back after the backoff."""


def after_failure(attempt: int, retries: int, backoff: timedelta) -> AfterFailure:
    """Attempt ``attempt`` (1 for the first run) failed; ``retries`` more are allowed."""
    if attempt > retries:
        return AfterFailure(retry=False)
    delay = backoff.total_seconds() * 2 ** (attempt - 1)
    return AfterFailure(retry=True, delay_s=int(min(delay, MAX_BACKOFF.total_seconds())))


@dataclass(frozen=True)
class RetryPolicy:
    """Which errors a task's failed attempt is retried on (``@task(retry_on=, no_retry_on=)``):
    ``Reject`` never, an error in ``no_retry_on`` never, and with ``retry_on`` given only the
    errors in it. The default retries every error, as before."""

    retry_on: tuple[type[BaseException], ...] | None = None
    no_retry_on: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        for name in ("retry_on", "no_retry_on"):
            value = getattr(self, name)
            if value is None and name == "retry_on":
                continue
            if not isinstance(value, tuple) or not all(
                isinstance(kind, type) and issubclass(kind, BaseException) for kind in value
            ):
                raise TypeError(
                    f"@task({name}=...): {name} must be a tuple of exception classes, got {value!r}"
                )

    def retries(self, error: BaseException) -> bool:
        if isinstance(error, (Reject, *self.no_retry_on)):
            return False
        return self.retry_on is None or isinstance(error, self.retry_on)


def crashed_out(attempt: int, retries: int) -> bool:
    """Claimed as attempt ``attempt`` with only ``retries`` allowed after the first: the
    attempts before it ended without any outcome (a failure records one, and the last allowed
    records FAILED), so they crashed or timed out. Not run again: a body that kills its
    invocation would otherwise run on every redelivery until SQS's redrive policy drops it,
    leaving the record RUNNING for good."""
    return attempt > retries + 1


def may_claim(remaining_ms: int, margin: timedelta) -> bool:
    """Whether a batch may claim another message with this much of the invocation left."""
    return remaining_ms > margin.total_seconds() * 1000


def lease_until(now: datetime, remaining_ms: int, margin: timedelta) -> datetime:
    """The invocation's deadline plus the margin: Lambda has killed the run by then, so a
    claimant that sees the lease expired cannot overlap a live run (skew below the margin)."""
    return now + timedelta(milliseconds=remaining_ms) + margin


@dataclass(frozen=True)
class FinalFailure:
    """A failure no retry can fix (a result too large, runs that kept crashing): FAILED at once."""

    error_type: str
    message: str


def encode_result(value: Any) -> str | FinalFailure | None:
    """The record's ``result``: JSON of what the body returned (None: no result)."""
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        return FinalFailure("ResultNotJSON", f"the task returned a value that is not JSON: {error}")
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        return FinalFailure(
            "ResultTooLarge",
            f"the result is {size} bytes of JSON, over the {MAX_RESULT_BYTES} a task record "
            "keeps: store it elsewhere (S3) and return its location",
        )
    return text
